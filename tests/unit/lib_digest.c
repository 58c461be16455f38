/* lib_digest.c - SHA-256 (libcrypto's, through src/lib/digest.h) against FIPS 180-4's examples
 * and sha256sum, in one piece and streamed in odd pieces as hub-sync hashes an LFS object. */
#include "t.h"
#include "digest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void streamed(const void *data, size_t len, size_t first, char out[65])
{
	struct digest_stream d;
	const char *p = data;
	digest_sha256_begin(&d);
	for (size_t off = 0, step = first; off < len; off += step, step = step * 7 % 1013 + 1)
		digest_sha256_add(&d, p + off, off + step > len ? len - off : step);
	digest_sha256_end(&d, out);
}

int main(void)
{
	char h[65], s[65];

	T_CASE("fips_examples") {
		digest_sha256_hex("", 0, h);
		T_STREQ(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		digest_sha256_hex("abc", 3, h);
		T_STREQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
		digest_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, h);
		T_STREQ(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	}

	T_CASE("million_a_in_odd_pieces") {
		static char a[1000000];
		memset(a, 'a', sizeof a);
		streamed(a, sizeof a, 1, h);
		T_STREQ(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	}

	T_CASE("dropped_stream_frees_and_a_new_one_starts_clean") {
		struct digest_stream d;
		digest_sha256_begin(&d);
		digest_sha256_add(&d, "garbage", 7);
		digest_sha256_drop(&d);
		T_ASSERT(d.ctx == NULL);
		streamed("abc", 3, 1, h);
		T_STREQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	}

	/* every length around the padding boundaries, whole and streamed, and the file reader,
	 * compared with sha256sum */
	T_CASE("padding_lengths_match_sha256sum") {
		char path[] = "/tmp/lib-digest-XXXXXX", cmd[128], want[65], why[256];
		uint8_t buf[200];
		uint64_t size;
		int fd = mkstemp(path);
		T_ASSERT(fd >= 0);
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = (uint8_t)(i * 131 + 7);
		for (size_t n = 0; n <= 130 && fd >= 0; n++) {
			FILE *p;
			if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, n, 0) != (ssize_t)n)
				break;
			snprintf(cmd, sizeof cmd, "sha256sum %s", path);
			p = popen(cmd, "r");
			if (!p || fscanf(p, "%64s", want) != 1)
				want[0] = '\0';
			if (p)
				pclose(p);
			digest_sha256_hex(buf, n, h);
			T_ASSERT(strcmp(h, want) == 0);
			streamed(buf, n, 3, s);
			T_ASSERT(strcmp(s, want) == 0);
			T_ASSERT(digest_sha256_file(path, s, &size, why, sizeof why) == 0);
			T_ASSERT(strcmp(s, want) == 0 && size == n);
		}
		if (fd >= 0)
			close(fd);
		unlink(path);
	}
	T_DONE();
}
