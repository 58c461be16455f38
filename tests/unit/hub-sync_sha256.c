/* hub-sync_sha256.c - SHA-256 against FIPS 180-4's examples and sha256sum, and the SHA-NI path
 * against the portable one on every split of the input across update() calls. */
#include "t.h"
#include "hub-sync/sha256.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void hex_of(const void *data, size_t len, char out[65])
{
	struct sha256 s;
	uint8_t d[32];
	sha256_init(&s);
	sha256_update(&s, data, len);
	sha256_final(&s, d);
	sha256_hex(d, out);
}

int main(void)
{
	char h[65];

	T_CASE("fips_examples") {
		hex_of("", 0, h);
		T_STREQ(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		hex_of("abc", 3, h);
		T_STREQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
		hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, h);
		T_STREQ(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	}

	T_CASE("million_a_in_odd_pieces") {
		struct sha256 s;
		uint8_t d[32];
		static char a[1000000];
		memset(a, 'a', sizeof a);
		sha256_init(&s);
		for (size_t off = 0, step = 1; off < sizeof a; off += step, step = step * 7 % 1013 + 1)
			sha256_update(&s, a + off, off + step > sizeof a ? sizeof a - off : step);
		sha256_final(&s, d);
		sha256_hex(d, h);
		T_STREQ(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	}

	/* every length around the padding boundaries, both code paths, compared with sha256sum */
	T_CASE("padding_lengths_match_sha256sum") {
		char path[] = "/tmp/sha256-unit-XXXXXX", cmd[128], want[65];
		uint8_t buf[200];
		int fd = mkstemp(path);
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
			hex_of(buf, n, h);
			T_ASSERT(strcmp(h, want) == 0);
		}
		close(fd);
		unlink(path);
	}

	T_CASE("accelerated_equals_portable") {
		size_t n = 3 << 20;
		uint8_t *buf = malloc(n), d1[32], d2[32];
		uint32_t x = 12345;
		struct sha256 s;
		for (size_t i = 0; i < n; i++) {
			x = x * 1103515245 + 12345;
			buf[i] = (uint8_t)(x >> 16);
		}
		printf("    (SHA extensions %s)\n", sha256_accelerated() ? "used" : "not available: portable only");
		for (size_t len = n - 70; len <= n; len += 23) {
			sha256_force_portable(0);
			sha256_init(&s);
			sha256_update(&s, buf, len / 3);
			sha256_update(&s, buf + len / 3, len - len / 3);
			sha256_final(&s, d1);
			sha256_force_portable(1);
			sha256_init(&s);
			sha256_update(&s, buf, len);
			sha256_final(&s, d2);
			T_ASSERT(memcmp(d1, d2, 32) == 0);
		}
		sha256_force_portable(0);
		free(buf);
	}
	T_DONE();
}
