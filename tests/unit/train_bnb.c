/* train_bnb.c - bitsandbytes' 8-bit Adam (src/train/optim/bnb.c).
 *
 * Without arguments: unit cases (the maps' shape, quantization picks the nearest code, the
 * block-wise step does not depend on how a tensor is cut at block boundaries).
 *
 * With `--ref DIR`: the C side of the PyTorch comparison (tests/cli/train-bnb.sh with
 * tests/ref/bnb-ref.py): reads DIR/x.f32, p.f32, g{1,2,3}.f32, m0.f32, v0.f32 and writes the
 * maps, the block-wise quantization of x and its dequantization, and the state after three
 * 8-bit and three 32-bit Adam steps (steps 11..13) from m0, v0 quantized. */
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "train/optim/bnb.h"

static const float LR = 1e-3f, B1 = 0.9f, B2 = 0.999f, EPS = 1e-8f, WD = 0.1f, GS = 0.5f;

static void *rd(const char *dir, const char *name, size_t size, size_t *n)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "rb");
	if (!f) {
		perror(p);
		exit(2);
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	void *b = malloc(len);
	if (!b || fread(b, 1, len, f) != (size_t)len)
		exit(2);
	fclose(f);
	*n = len / size;
	return b;
}

static void wr(const char *dir, const char *name, const void *b, size_t bytes)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "wb");
	if (!f || fwrite(b, 1, bytes, f) != bytes || fclose(f)) {
		perror(p);
		exit(2);
	}
}

static int ref(const char *dir)
{
	float cs[256], cu[256];
	size_t n, k;
	bnb_dynamic_map(1, cs);
	bnb_dynamic_map(0, cu);
	wr(dir, "map_s.f32", cs, sizeof cs);
	wr(dir, "map_u.f32", cu, sizeof cu);
	float *x = rd(dir, "x.f32", 4, &n), *deq = malloc(n * 4);
	size_t nb = bnb_blocks(n);
	uint8_t *q = malloc(n), *c1 = malloc(n), *c2 = malloc(n);
	float *am = malloc(nb * 4), *a1 = malloc(nb * 4), *a2 = malloc(nb * 4);
	bnb_quantize_blockwise(cs, x, n, q, am);
	bnb_dequantize_blockwise(cs, q, am, n, deq);
	wr(dir, "q.u8", q, n);
	wr(dir, "absmax.f32", am, nb * 4);
	wr(dir, "deq.f32", deq, n * 4);

	float *p8 = rd(dir, "p.f32", 4, &k), *p32 = rd(dir, "p.f32", 4, &k);
	float *s1 = rd(dir, "m0.f32", 4, &k), *s2 = rd(dir, "v0.f32", 4, &k);
	bnb_quantize_blockwise(cs, s1, n, c1, a1);
	bnb_quantize_blockwise(cu, s2, n, c2, a2);
	for (int s = 1; s <= 3; s++) {
		char name[16];
		snprintf(name, sizeof name, "g%d.f32", s);
		float *g = rd(dir, name, 4, &k);
		bnb_adam8bit(p8, p8, g, c1, c2, a1, a2, n, cs, cu, LR, B1, B2, EPS, WD, GS, 10 + s);
		bnb_adam32(p32, p32, g, s1, s2, n, LR, B1, B2, EPS, WD, GS, 10 + s);
		free(g);
	}
	wr(dir, "p8.f32", p8, n * 4);
	wr(dir, "c1.u8", c1, n);
	wr(dir, "c2.u8", c2, n);
	wr(dir, "a1.f32", a1, nb * 4);
	wr(dir, "a2.f32", a2, nb * 4);
	wr(dir, "p32.f32", p32, n * 4);
	wr(dir, "s1.f32", s1, n * 4);
	wr(dir, "s2.f32", s2, n * 4);
	return 0;
}

static float rnd(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return ((*s >> 8) / 16777216.0f - 0.5f) * 2.0f;
}

static int unit(void)
{
	float cs[256], cu[256];
	bnb_dynamic_map(1, cs);
	bnb_dynamic_map(0, cu);
	T_CASE("dynamic_maps_are_sorted_and_span_the_range") {
		for (int i = 1; i < 256; i++) {
			T_ASSERT(cs[i - 1] <= cs[i]);
			T_ASSERT(cu[i - 1] <= cu[i]);
		}
		T_ASSERT(cs[255] == 1.0f && cu[255] == 1.0f && cu[0] == 0.0f);
		T_ASSERT(cs[127] == 0.0f && cs[0] < -0.99f && cs[0] > -1.0f);
		/* the signed map is symmetric but for 1.0 */
		for (int i = 0; i < 127; i++)
			T_ASSERT(cs[i] == -cs[254 - i]);
		/* the smallest magnitudes are 10^-6-ish: the paper's dynamic range */
		T_ASSERT(cs[128] > 1e-7f && cs[128] < 1e-6f && cu[1] > 1e-7f && cu[1] < 1e-6f);
	}
	T_CASE("quantize_finds_the_nearest_code") {
		uint32_t s = 7;
		for (int k = 0; k < 100000; k++) {
			float x = rnd(&s) * powf(10.0f, -(float)(k % 8));
			int q = bnb_quantize(cs, x), best = 0;
			for (int i = 1; i < 256; i++)
				if (fabsf(cs[i] - x) < fabsf(cs[best] - x))
					best = i;
			T_ASSERT(fabsf(cs[q] - x) <= fabsf(cs[best] - x));
		}
		for (int i = 0; i < 256; i++) {
			T_ASSERT(bnb_quantize(cs, cs[i]) == i || cs[bnb_quantize(cs, cs[i])] == cs[i]);
			T_ASSERT(bnb_quantize(cu, cu[i]) == i || cu[bnb_quantize(cu, cu[i])] == cu[i]);
		}
	}
	T_CASE("adam8bit_blocks_are_independent_of_where_the_tensor_is_cut") {
		/* the whole tensor in one call equals the same tensor in block-aligned pieces: what
		 * makes ZeRO-1 shards (cut at block boundaries) bit-identical to no sharding */
		size_t n = 5 * BNB_BLOCK + 300, nb = bnb_blocks(n);
		float *p[2], *g = malloc(n * 4), *a[2][2];
		uint8_t *c[2][2];
		uint32_t s = 3;
		for (int v = 0; v < 2; v++) {
			p[v] = malloc(n * 4);
			for (int j = 0; j < 2; j++) {
				c[v][j] = calloc(n, 1);
				a[v][j] = calloc(nb, 4);
			}
		}
		for (size_t i = 0; i < n; i++)
			p[0][i] = p[1][i] = rnd(&s);
		for (int step = 1; step <= 4; step++) {
			for (size_t i = 0; i < n; i++)
				g[i] = rnd(&s) * 0.1f;
			bnb_adam8bit(p[0], p[0], g, c[0][0], c[0][1], a[0][0], a[0][1], n, cs, cu, LR, B1,
				     B2, EPS, WD, 1.0f, step);
			size_t cuts[] = {0, 2 * BNB_BLOCK, 3 * BNB_BLOCK, n};
			for (int k = 0; k < 3; k++) {
				size_t o = cuts[k], m = cuts[k + 1] - o;
				bnb_adam8bit(p[1] + o, p[1] + o, g + o, c[1][0] + o, c[1][1] + o,
					     a[1][0] + o / BNB_BLOCK, a[1][1] + o / BNB_BLOCK, m, cs, cu, LR,
					     B1, B2, EPS, WD, 1.0f, step);
			}
		}
		T_ASSERT(memcmp(p[0], p[1], n * 4) == 0);
		for (int j = 0; j < 2; j++) {
			T_ASSERT(memcmp(c[0][j], c[1][j], n) == 0);
			T_ASSERT(memcmp(a[0][j], a[1][j], nb * 4) == 0);
		}
		/* and the state is really 8-bit: decoded moments near the fp32 ones */
		T_ASSERT(a[0][0][0] > 0 && a[0][1][0] > 0);
	}
	T_DONE();
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--ref") == 0)
		return ref(argv[2]);
	return unit();
}
