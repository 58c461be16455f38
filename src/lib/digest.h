/* digest - SHA-256 of bytes and of files, as 64 lowercase hex digits.
 *
 * For records that say "this exact file": a checkpoint's manifest names the tokenizer files the
 * run trained with by path, size and SHA-256, and an export copies one only when its bytes still
 * hash the same (lmtk-checkpoint(5)); a Git LFS object is named by the SHA-256 of its bytes
 * (hub-sync).  libcrypto's EVP does the hashing: its SHA-256 uses the CPU's SHA extensions where
 * there are some (x86 SHA-NI, ARMv8 SHA2), about 2 GB/s a core, so hub-sync's LFS clean step, which
 * hashes every byte of every large file, is not held up by it.  Failures of libcrypto itself
 * (out of memory for a context) end the program: there is nothing to hash with. */
#ifndef LMTK_DIGEST_H
#define LMTK_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* A SHA-256 over bytes that come in pieces (hub-sync hashes each Git LFS object as it is
 * written: the object is named by its hash).  begin, add as often as needed, then end (the
 * hash) or drop (none); either frees it. */
struct digest_stream {
	void *ctx;   /* libcrypto's EVP_MD_CTX */
};
void digest_sha256_begin(struct digest_stream *d);
void digest_sha256_add(struct digest_stream *d, const void *data, size_t len);
void digest_sha256_end(struct digest_stream *d, char hex[65]);
void digest_sha256_drop(struct digest_stream *d);

/* SHA-256 of len bytes; hex has room for 65 bytes (64 digits and the NUL). */
void digest_sha256_hex(const void *data, size_t len, char hex[65]);

/* SHA-256 of a whole file (read as it is, following links) and its size in bytes.
 * 0, or -1 + err naming the file. */
int digest_sha256_file(const char *path, char hex[65], uint64_t *size, char *err, size_t errlen);

#endif
