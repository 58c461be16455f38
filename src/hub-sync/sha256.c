/* sha256 - FIPS 180-4 SHA-256: portable C, and the x86 SHA-NI path (see sha256.h).
 *
 * The SHA-NI block function follows Intel's published reference (sha256rnds2 on the ABEF/CDGH
 * state halves, sha256msg1/msg2 for the message schedule), written as a loop over the 16
 * four-round groups rather than fully unrolled: the compiler unrolls it, and a loop is
 * something a reader can check against the schedule W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15])
 * + W[t-16].  It is compiled with a target attribute, so the rest of the program needs no
 * special flags, and it is only called after CPUID said yes. */
#include "sha256.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void blocks_portable(uint32_t h[8], const uint8_t *p, size_t nblocks)
{
	uint32_t w[64];

	for (; nblocks--; p += 64) {
		uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
		for (int t = 0; t < 16; t++)
			w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
			       (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
		for (int t = 16; t < 64; t++) {
			uint32_t s0 = ROR(w[t - 15], 7) ^ ROR(w[t - 15], 18) ^ (w[t - 15] >> 3);
			uint32_t s1 = ROR(w[t - 2], 17) ^ ROR(w[t - 2], 19) ^ (w[t - 2] >> 10);
			w[t] = w[t - 16] + s0 + w[t - 7] + s1;
		}
		for (int t = 0; t < 64; t++) {
			uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
			uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
			hh = g; g = f; f = e; e = d + t1;
			d = c; c = b; b = a; a = t1 + t2;
		}
		h[0] += a; h[1] += b; h[2] += c; h[3] += d;
		h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
	}
}

#ifdef HAVE_X86
__attribute__((target("sha,sse4.1,ssse3")))
static void blocks_shani(uint32_t h[8], const uint8_t *p, size_t nblocks)
{
	const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
	__m128i st0, st1, tmp, msg, w[4];

	/* h[0..7] = A..H -> st0 = ABEF, st1 = CDGH, the layout sha256rnds2 works on */
	tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);  /* CDAB */
	st1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);  /* EFGH */
	st0 = _mm_alignr_epi8(tmp, st1, 8);                                      /* ABEF */
	st1 = _mm_blend_epi16(st1, tmp, 0xF0);                                   /* CDGH */

	for (; nblocks--; p += 64) {
		__m128i abef = st0, cdgh = st1;
		for (int j = 0; j < 16; j++) {  /* rounds 4j .. 4j+3 */
			__m128i x;
			if (j < 4) {
				x = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), bswap);
			} else {
				x = _mm_sha256msg1_epu32(w[(j - 4) & 3], w[(j - 3) & 3]);
				x = _mm_add_epi32(x, _mm_alignr_epi8(w[(j - 1) & 3], w[(j - 2) & 3], 4));
				x = _mm_sha256msg2_epu32(x, w[(j - 1) & 3]);
			}
			w[j & 3] = x;
			msg = _mm_add_epi32(x, _mm_loadu_si128((const __m128i *)&K[4 * j]));
			st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
			msg = _mm_shuffle_epi32(msg, 0x0E);
			st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
		}
		st0 = _mm_add_epi32(st0, abef);
		st1 = _mm_add_epi32(st1, cdgh);
	}
	tmp = _mm_shuffle_epi32(st0, 0x1B);        /* FEBA */
	st1 = _mm_shuffle_epi32(st1, 0xB1);        /* DCHG */
	st0 = _mm_blend_epi16(tmp, st1, 0xF0);     /* DCBA */
	st1 = _mm_alignr_epi8(st1, tmp, 8);        /* HGFE */
	_mm_storeu_si128((__m128i *)&h[0], st0);
	_mm_storeu_si128((__m128i *)&h[4], st1);
}

static int cpu_has_sha(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9)))
		return 0;  /* SSE4.1, SSSE3 */
	if (__get_cpuid_max(0, NULL) < 7)
		return 0;
	__cpuid_count(7, 0, a, b, c, d);
	return (b >> 29) & 1;  /* SHA */
}
#endif

typedef void (*blocks_fn)(uint32_t h[8], const uint8_t *p, size_t nblocks);
static blocks_fn blocks;
static int portable_forced;

static blocks_fn pick(void)
{
	if (!blocks) {
#ifdef HAVE_X86
		blocks = cpu_has_sha() ? blocks_shani : blocks_portable;
#else
		blocks = blocks_portable;
#endif
	}
	return portable_forced ? blocks_portable : blocks;
}

int sha256_accelerated(void)
{
	return pick() != blocks_portable;
}

int sha256_force_portable(int on)
{
	int was = portable_forced;
	portable_forced = on;
	return was;
}

void sha256_init(struct sha256 *s)
{
	static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
				       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(s->h, iv, sizeof iv);
	s->len = 0;
	s->nbuf = 0;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	blocks_fn fn = pick();

	s->len += len;
	if (s->nbuf) {
		size_t n = 64 - s->nbuf < len ? 64 - s->nbuf : len;
		memcpy(s->buf + s->nbuf, p, n);
		s->nbuf += n;
		p += n;
		len -= n;
		if (s->nbuf < 64)
			return;
		fn(s->h, s->buf, 1);
		s->nbuf = 0;
	}
	if (len >= 64) {
		fn(s->h, p, len / 64);
		p += len & ~(size_t)63;
		len &= 63;
	}
	memcpy(s->buf, p, len);
	s->nbuf = len;
}

void sha256_final(struct sha256 *s, uint8_t out[32])
{
	uint64_t bits = s->len * 8;
	uint8_t pad[72] = {0x80};
	size_t npad = (s->nbuf < 56 ? 56 : 120) - s->nbuf;

	for (int i = 0; i < 8; i++)
		pad[npad + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_update(s, pad, npad + 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(s->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s->h[i];
	}
}

void sha256_hex(const uint8_t d[32], char out[65])
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[64] = '\0';
}
