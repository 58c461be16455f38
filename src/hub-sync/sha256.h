/* sha256 - SHA-256, the hash that names Git LFS objects.
 *
 * Every byte of every large file goes through here once per sync (the LFS clean step), so it
 * is on the hot path: x86-64 CPUs with the SHA extensions (Intel since Ice Lake / Goldmont,
 * AMD since Zen) use them (~1.5-2 GB/s per core); others use portable C (~250 MB/s).  The
 * choice is made once, at the first call, from CPUID.  libgit2 has no public SHA-256 and the
 * project links no libcrypto, hence our own. */
#ifndef HUBSYNC_SHA256_H
#define HUBSYNC_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t len;        /* bytes hashed so far */
	uint8_t buf[64];     /* a partial block */
	size_t nbuf;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[32]);
/* the 64 lowercase hex digits LFS uses as an oid; out has room for 65 bytes */
void sha256_hex(const uint8_t digest[32], char out[65]);
/* 1 if the SHA extensions are used (for the tests and the benchmark's report) */
int sha256_accelerated(void);
/* forces the portable code (tests compare both); returns the previous setting */
int sha256_force_portable(int on);

#endif
