/* lib_crc32c.c - CRC-32C: the check value, continuation, and the hardware path against a
 * bit-by-bit reference at every alignment and length up to 64 bytes. */
#include "t.h"

#include "crc32c.h"

static uint32_t bitwise(const unsigned char *s, size_t n)
{
	uint32_t c = 0xffffffffu;
	while (n--) {
		c ^= *s++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

int main(void)
{
	T_CASE("check_value_of_123456789")
		T_ASSERT(crc32c("123456789", 9) == 0xe3069283u);
	T_CASE("update_continues_a_crc")
		T_ASSERT(crc32c_update(crc32c_update(0, "12345", 5), "6789", 4) == 0xe3069283u);
	T_CASE("every_alignment_and_length_matches_the_bitwise_definition") {
		unsigned char b[80];
		int bad = 0;
		for (int i = 0; i < 80; i++)
			b[i] = (unsigned char)(i * 37 + 11);
		for (int off = 0; off < 8; off++)
			for (size_t n = 0; n <= 64; n++)
				bad += crc32c(b + off, n) != bitwise(b + off, n);
		T_ASSERT(bad == 0);
	}
	T_DONE();
}
