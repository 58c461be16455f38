/* train_cudaops.c - every function of the CUDA backend's ops table against the CPU backend.
 *
 * Each case draws inputs, rounds them to the CUDA backend's activation type (bf16, or fp16 with
 * --fp16) so that both backends see the same values, runs the op on both, and compares the CUDA
 * result with the CPU's fp32 one: max |cuda - cpu| over the tensor, relative to max |cpu|,
 * within a tolerance that says how many roundings to the activation type the op makes (an
 * output rounded once to bf16 is within 2^-9, to fp16 within 2^-12: TOL_ACT is 8e-3 or 1e-3;
 * fp32 outputs computed from the same inputs within float rounding).  Shapes are the awkward
 * ones: sequence lengths across the attention's 64-row tiles and not multiples of them, head
 * dims 32/64/80/128, odd head counts, ALiBi with non-power-of-two head counts, the
 * --reset-attention-mask document mask, dropout, channels that are not multiples of 8 (the
 * kernels' scalar paths), pointers that are not 16-byte aligned, padded vocabularies that are
 * not multiples of 128, out-of-vocabulary targets.
 *
 * Which CUDA backend: the one train itself would load (LMTK_CUDA_PLUGIN, else train-cuda.so
 * next to the build) - a real GPU where there is one, or the CPU executor when
 * LMTK_CUDA_PLUGIN names build/lib/lmtk/train-cuda-exec.so (tests/cli/train-cuda.sh runs it
 * there under two thread orders).  Without a usable CUDA backend it says skip.
 *
 * `train_cudaops --dump FILE` also writes every CUDA output, bit for bit, to FILE: runs under
 * different thread orders must write identical files (the kernels claim results that do not
 * depend on scheduling).  `--only TEXT` runs the cases whose names contain TEXT.  `--fp16` opens
 * the backend with fp16 activations (train --fp16) and runs every case in fp16: its tolerance is
 * 8 times tighter than bf16's, so a kernel that rounded through bf16 on the fp16 path, or read
 * fp16 bits as bf16, fails it; the conversion case checks fp16's overflow to inf and its
 * subnormals bit for bit. */
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "train/optim/bnb.h"
#include "train/model/model.h"
#include "train/model/ops.h"
#include "train/model/philox.h"
#include "train/device.h"
#include "train/cpu/ops_cpu.h"

static const struct ops *cu, *cpu;
static int fp16;           /* --fp16: the CUDA backend computes in fp16 */
static double tol_act;     /* one or two roundings to the activation type */
#define TOL_ACT tol_act
static FILE *dumpf;
static const char *only; /* --only: the cases whose names contain it */
#define CASE(name) if (!only || strstr((name), only)) T_CASE(name)

/* --- host helpers --- */

static float bf16r(float x) /* round to bf16, nearest even (the CUDA backend's activations) */
{
	uint32_t u;
	memcpy(&u, &x, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return x;
	u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	memcpy(&x, &u, 4);
	return x;
}

/* round to IEEE fp16, nearest even: subnormals below 2^-14, beyond 65504 to inf (the CUDA
 * backend's activations under --fp16) */
static float f16r(float x)
{
	float a = fabsf(x);
	if (!(a < INFINITY))
		return x;
	if (a < 0x1p-14f)   /* subnormal: a multiple of 2^-24 (rintf: to nearest even) */
		return copysignf(rintf(a * 0x1p24f) * 0x1p-24f, x);
	uint32_t u;
	memcpy(&u, &x, 4);
	u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
	memcpy(&x, &u, 4);
	return fabsf(x) > 65504.0f ? copysignf(INFINITY, x) : x;
}

static float actr(float x) /* to the activation type of the backend under test */
{
	return fp16 ? f16r(x) : bf16r(x);
}

/* n values ~ N(0, sd) from stream key, rounded to the activation type */
static float *randn(size_t n, float sd, uint64_t key)
{
	float *x = malloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++)
		x[i] = actr((float)(sd * philox_normal(key, i)));
	return x;
}

static float *zeros(size_t n)
{
	return calloc(n ? n : 1, sizeof(float));
}

static float *copyf(const float *x, size_t n)
{
	float *y = malloc((n ? n : 1) * sizeof *y);
	memcpy(y, x, n * sizeof *y);
	return y;
}

/* --- device helpers, the same for both backends --- */

static void *up_act(const struct ops *o, const float *h, size_t n)
{
	void *d = o->alloc(n * o->act_size);
	float *t = o->alloc(n * sizeof(float));
	o->to_device(t, h, n * sizeof(float));
	o->f32_to_act(d, t, n);
	o->free(t);
	return d;
}

static void down_act(const struct ops *o, float *h, const void *d, size_t n)
{
	float *t = o->alloc(n * sizeof(float));
	o->act_to_f32(t, d, n);
	o->to_host(h, t, n * sizeof(float));
	o->free(t);
}

static float *up_f32(const struct ops *o, const float *h, size_t n)
{
	float *d = o->alloc(n * sizeof(float));
	if (h)
		o->to_device(d, h, n * sizeof(float));
	return d;
}

static void down_f32(const struct ops *o, float *h, const float *d, size_t n)
{
	o->to_host(h, d, n * sizeof(float));
}

static int32_t *up_i32(const struct ops *o, const int32_t *h, size_t n)
{
	int32_t *d = o->alloc(n * sizeof(int32_t));
	o->to_device(d, h, n * sizeof(int32_t));
	return d;
}

/* --- comparison --- */

static void dump(const char *what, const void *p, size_t bytes)
{
	if (!dumpf)
		return;
	fprintf(dumpf, "%s %zu\n", what, bytes);
	fwrite(p, 1, bytes, dumpf);
}

/* max |c - r| <= tol * max(max |r|, floor): differences relative to the tensor's scale, or to
 * floor where the true values are zero and the reference holds only rounding noise */
static int near_floor(const char *what, const float *c, const float *r, size_t n, double tol,
		      double floor)
{
	double scale = floor, worst = 0;
	size_t at = 0;
	for (size_t i = 0; i < n; i++)
		if (fabs(r[i]) > scale)
			scale = fabs(r[i]);
	if (scale < 1e-30)
		scale = 1e-30;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)c[i] - r[i]);
		if (!(d <= worst)) { /* NaN counts as worst */
			worst = isnan(d) ? INFINITY : d;
			at = i;
		}
	}
	dump(what, c, n * sizeof *c);
	if (worst <= tol * scale)
		return 1;
	printf("# %s: max |cuda - cpu| %.3g at %zu (cuda %.7g, cpu %.7g) > %.2g x scale %.3g\n",
	       what, worst, at, c[at], r[at], tol, scale);
	return 0;
}

static int near(const char *what, const float *c, const float *r, size_t n, double tol)
{
	return near_floor(what, c, r, n, tol, 0);
}

#define TOL_F32 2e-5  /* fp32 results of the same inputs, summed in another order */

/* ---- cases ---- */

static int case_convert(void)
{
	/* f32 -> act -> f32 is rounding to nearest even (bf16 or fp16), exact both ways */
	float h[] = {0.0f, -0.0f, 1.0f, 1.00390625f /* tie: 1 + 2^-8 */, 1.01171875f /* tie up */,
		     3.14159265f, -2.7182818f, 1e-40f /* subnormal */, 3.389e38f /* > bf16 max */,
		     INFINITY, -INFINITY, 65504.0f, 1.0f / 3.0f, -1e-3f, 7.0e-39f, 1.5f,
		     /* fp16: ties at 1 + 2^-11, 1 + 3 2^-11; 65519 down to 65504, 65520 up
		      * to inf; subnormals (2^-24, and 2^-25 + 2^-26 rounding up to 2^-24),
		      * 2^-26 to 0 */
		     1.00048828125f, 1.00146484375f, 65519.0f, -65520.0f, 0x1p-24f, 0x1.8p-25f,
		     0x1p-26f, 1.2345e-5f};
	size_t n = sizeof h / sizeof h[0];
	float back[40], want[40];
	int ok = 1;
	for (size_t m = n - 1; m <= n; m++) {   /* n - 1 is odd: the scalar paths; n, 8-wide */
		void *d = up_act(cu, h, m);
		memset(back, 0, sizeof back);
		down_act(cu, back, d, m);
		cu->free(d);
		for (size_t i = 0; i < m; i++) {
			want[i] = actr(h[i]);
			if (memcmp(&back[i], &want[i], 4)) {
				printf("# f32_to_act(%.9g) = %.9g, want %.9g (%zu elements)\n",
				       h[i], back[i], want[i], m);
				ok = 0;
			}
		}
	}
	float nan = NAN, nb;
	void *d = up_act(cu, &nan, 1);
	down_act(cu, &nb, d, 1);
	cu->free(d);
	dump("convert", back, n * 4);
	return ok && isnan(nb);
}

static int case_memory(void)
{
	/* alloc is zeroed; zero, to_device, to_host round trip; odd sizes */
	size_t n = 1001;
	float *h = randn(n, 1, 1), *back = zeros(n);
	float *d = cu->alloc(n * sizeof(float));
	down_f32(cu, back, d, n);
	int ok = 1;
	for (size_t i = 0; i < n; i++)
		ok &= back[i] == 0.0f;
	cu->to_device(d, h, n * sizeof(float));
	cu->sync();
	down_f32(cu, back, d, n);
	ok &= memcmp(back, h, n * sizeof(float)) == 0;
	cu->zero((char *)d + 12, 40);
	down_f32(cu, back, d, n);
	for (size_t i = 0; i < n; i++)
		ok &= back[i] == (i >= 3 && i < 13 ? 0.0f : h[i]);
	cu->free(d);
	void *z = cu->alloc(0); /* a distinct, valid pointer */
	ok &= z != NULL;
	cu->free(z);
	free(h);
	free(back);
	return ok;
}

static int case_embed(int B, int T, int C, int with_wpe, int misalign)
{
	int N = B * T, V = 37;
	char name[96];
	snprintf(name, sizeof name, "embed B%d T%d C%d%s%s", B, T, C, with_wpe ? " wpe" : "",
		 misalign ? " misaligned" : "");
	int32_t *tok = malloc(N * sizeof *tok);
	for (int i = 0; i < N; i++) /* repeats, and -1 (another rank's token) */
		tok[i] = i % 7 == 3 ? -1 : (int32_t)(philox_u32(5, i) % 9);
	float *wte = randn((size_t)V * C + 1, 0.5f, 2), *wpe = randn((size_t)T * C + 1, 0.5f, 3);
	float *dout = randn((size_t)N * C, 1, 4), *acc0 = randn((size_t)V * C, 1, 6);
	float *acc1 = randn((size_t)T * C, 1, 7);
	float *out[2], *dwte[2], *dwpe[2];
	const struct ops *os[2] = {cu, cpu};
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		/* misaligned: tensors one element into their buffers (the scalar paths) */
		void *dwte_b = up_act(o, wte, (size_t)V * C + 1), *dwpe_b = up_act(o, wpe, (size_t)T * C + 1);
		void *w1 = (char *)dwte_b + (misalign ? o->act_size : 0);
		void *w2 = (char *)dwpe_b + (misalign ? o->act_size : 0);
		int32_t *dtok = up_i32(o, tok, N);
		void *dout_act = o->alloc((size_t)N * C * o->act_size);
		o->embed_fwd(dout_act, dtok, w1, with_wpe ? w2 : NULL, B, T, C);
		out[k] = zeros((size_t)N * C);
		down_act(o, out[k], dout_act, (size_t)N * C);
		void *g = up_act(o, dout, (size_t)N * C);
		float *gw = up_f32(o, acc0, (size_t)V * C), *gp = up_f32(o, acc1, (size_t)T * C);
		o->embed_bwd(gw, with_wpe ? gp : NULL, g, dtok, B, T, C);
		dwte[k] = zeros((size_t)V * C);
		dwpe[k] = zeros((size_t)T * C);
		down_f32(o, dwte[k], gw, (size_t)V * C);
		down_f32(o, dwpe[k], gp, (size_t)T * C);
		o->free(dwte_b), o->free(dwpe_b), o->free(dtok), o->free(dout_act), o->free(g);
		o->free(gw), o->free(gp);
	}
	char w[128];
	int ok = 1;
	snprintf(w, sizeof w, "%s out", name);
	ok &= near(w, out[0], out[1], (size_t)N * C, TOL_ACT / 2);
	snprintf(w, sizeof w, "%s dwte", name);
	ok &= near(w, dwte[0], dwte[1], (size_t)V * C, TOL_F32);
	snprintf(w, sizeof w, "%s dwpe", name);
	ok &= near(w, dwpe[0], dwpe[1], (size_t)T * C, TOL_F32);
	for (int k = 0; k < 2; k++)
		free(out[k]), free(dwte[k]), free(dwpe[k]);
	free(tok), free(wte), free(wpe), free(dout), free(acc0), free(acc1);
	return ok;
}

static int case_layernorm(int N, int C, int with_bias)
{
	char name[64];
	snprintf(name, sizeof name, "layernorm N%d C%d%s", N, C, with_bias ? "" : " nobias");
	size_t n = (size_t)N * C;
	float *x = randn(n, 2, 10), *w = randn(C, 1, 11), *b = randn(C, 1, 12);
	for (size_t i = 0; i < n; i++) /* a large mean: the two-pass variance matters */
		x[i] = actr(x[i] + 3.0f);
	float *dy = randn(n, 1, 13), *dx0 = randn(n, 1, 14), *dw0 = randn(C, 1, 15), *db0 = randn(C, 1, 16);
	float *out[2], *mean[2], *rstd[2], *dx[2], *dw[2], *db[2];
	const struct ops *os[2] = {cu, cpu};
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		void *dxin = up_act(o, x, n), *dwt = up_act(o, w, C), *dbs = up_act(o, b, C);
		void *dout = o->alloc(n * o->act_size);
		float *dm = up_f32(o, NULL, N), *dr = up_f32(o, NULL, N);
		o->layernorm_fwd(dout, dm, dr, dxin, dwt, with_bias ? dbs : NULL, N, C, 1e-5f);
		out[k] = zeros(n), mean[k] = zeros(N), rstd[k] = zeros(N);
		down_act(o, out[k], dout, n);
		down_f32(o, mean[k], dm, N);
		down_f32(o, rstd[k], dr, N);
		void *g = up_act(o, dy, n), *gx = up_act(o, dx0, n);
		float *gw = up_f32(o, dw0, C), *gb = up_f32(o, db0, C);
		o->layernorm_bwd(gx, gw, gb, g, dxin, dwt, dm, dr, N, C);
		dx[k] = zeros(n), dw[k] = zeros(C), db[k] = zeros(C);
		down_act(o, dx[k], gx, n);
		down_f32(o, dw[k], gw, C);
		down_f32(o, db[k], gb, C);
		o->free(dxin), o->free(dwt), o->free(dbs), o->free(dout), o->free(dm), o->free(dr);
		o->free(g), o->free(gx), o->free(gw), o->free(gb);
	}
	int ok = 1;
	char wn[128];
#define CMP(arr, cnt, tol)                                                                         \
	snprintf(wn, sizeof wn, "%s " #arr, name);                                                 \
	ok &= near(wn, arr[0], arr[1], cnt, tol)
	CMP(out, n, TOL_ACT);
	CMP(mean, (size_t)N, TOL_F32);
	CMP(rstd, (size_t)N, 1e-4);
	CMP(dx, n, TOL_ACT);
	CMP(dw, (size_t)C, 1e-4);
	CMP(db, (size_t)C, TOL_F32);
#undef CMP
	for (int k = 0; k < 2; k++)
		free(out[k]), free(mean[k]), free(rstd[k]), free(dx[k]), free(dw[k]), free(db[k]);
	free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0);
	return ok;
}

static int case_matmul(int N, int IC, int OC, int with_bias, int misalign)
{
	char name[96];
	snprintf(name, sizeof name, "matmul N%d IC%d OC%d%s%s", N, IC, OC, with_bias ? " bias" : "",
		 misalign ? " misaligned" : "");
	size_t ni = (size_t)N * IC, no = (size_t)N * OC, nw = (size_t)OC * IC;
	float *x = randn(ni + 1, 1, 20), *w = randn(nw + 1, 0.2f, 21), *b = randn(OC + 1, 1, 22);
	float *dy = randn(no + 1, 1, 23), *dw0 = randn(nw, 0.1f, 24), *db0 = randn(OC, 0.1f, 25);
	float *out[2], *dx[2], *dw[2], *db[2];
	const struct ops *os[2] = {cu, cpu};
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		size_t e = misalign ? o->act_size : 0; /* an element in: 2-byte aligned pointers */
		void *bx = up_act(o, x, ni + 1), *bw = up_act(o, w, nw + 1), *bb = up_act(o, b, OC + 1);
		void *bdy = up_act(o, dy, no + 1);
		void *bo = o->alloc((no + 1) * o->act_size), *bdx = o->alloc((ni + 1) * o->act_size);
		float *gw = up_f32(o, dw0, nw), *gb = up_f32(o, db0, OC);
		void *px = (char *)bx + e, *pw = (char *)bw + e, *pb = (char *)bb + e;
		void *pdy = (char *)bdy + e, *po = (char *)bo + e, *pdx = (char *)bdx + e;
		o->matmul_fwd(po, px, pw, with_bias ? pb : NULL, N, IC, OC);
		o->matmul_bwd(pdx, gw, with_bias ? gb : NULL, pdy, px, pw, N, IC, OC);
		out[k] = zeros(no + 1), dx[k] = zeros(ni + 1), dw[k] = zeros(nw), db[k] = zeros(OC);
		down_act(o, out[k], bo, no + 1);
		down_act(o, dx[k], bdx, ni + 1);
		down_f32(o, dw[k], gw, nw);
		down_f32(o, db[k], gb, OC);
		o->free(bx), o->free(bw), o->free(bb), o->free(bdy), o->free(bo), o->free(bdx);
		o->free(gw), o->free(gb);
	}
	int ok = 1;
	char wn[128];
	size_t s = misalign ? 1 : 0;
	snprintf(wn, sizeof wn, "%s out", name);
	ok &= near(wn, out[0] + s, out[1] + s, no, TOL_ACT);
	snprintf(wn, sizeof wn, "%s dinp", name);
	ok &= near(wn, dx[0] + s, dx[1] + s, ni, TOL_ACT);
	snprintf(wn, sizeof wn, "%s dw", name);
	ok &= near(wn, dw[0], dw[1], nw, 1e-4);
	snprintf(wn, sizeof wn, "%s dbias", name);
	ok &= near(wn, db[0], db[1], OC, 1e-4);
	for (int k = 0; k < 2; k++)
		free(out[k]), free(dx[k]), free(dw[k]), free(db[k]);
	free(x), free(w), free(b), free(dy), free(dw0), free(db0);
	return ok;
}

/* The CUDA backend's fused residual + layer norm pairs against the same backend's separate
 * kernels - the same bits, as ops.h promises - and against the CPU's separate pair.  The
 * backward's dropout output goes in place over its dout, as the model calls it. */
static int case_residual_layernorm(int N, int C, float p)
{
	char name[80];
	snprintf(name, sizeof name, "residual_layernorm N%d C%d p%g", N, C, p);
	size_t n = (size_t)N * C;
	float *r = randn(n, 2, 40), *x = randn(n, 1, 41), *w = randn(C, 1, 42), *b = randn(C, 1, 43);
	float *dy = randn(n, 1, 44), *dres0 = randn(n, 1, 45), *dw0 = randn(C, 1, 46), *db0 = randn(C, 1, 47);
	for (size_t i = 0; i < n; i++)
		r[i] += 3.0f;
	uint64_t seed = 0x5eed, off = 777;
	float *res[3], *ln[3], *mean[3], *rstd[3], *dres[3], *dx[3], *dw[3], *db[3];
	T_ASSERT(cu->residual_layernorm_fwd && cu->layernorm_bwd_dropout);
	for (int k = 0; k < 3; k++) {   /* 0: CUDA fused, 1: CUDA separate, 2: CPU separate */
		const struct ops *o = k == 2 ? cpu : cu;
		void *br = up_act(o, r, n), *bx = up_act(o, x, n), *bw = up_act(o, w, C), *bb = up_act(o, b, C);
		void *bres = o->alloc(n * o->act_size), *bln = o->alloc(n * o->act_size);
		float *bm = up_f32(o, NULL, N), *brs = up_f32(o, NULL, N);
		void *bdy = up_act(o, dy, n), *bdres = up_act(o, dres0, n);
		float *gw = up_f32(o, dw0, C), *gb = up_f32(o, db0, C);
		if (k == 0) {
			o->residual_layernorm_fwd(bres, bln, bm, brs, br, bx, bw, bb, N, C, 1e-5f, p, seed, off);
			o->layernorm_bwd_dropout(bdres, bdy, gw, gb, bdy, bres, bw, bm, brs, N, C, p, seed, off);
		} else {
			o->residual_fwd(bres, br, bx, n, p, seed, off);
			o->layernorm_fwd(bln, bm, brs, bres, bw, bb, N, C, 1e-5f);
			o->layernorm_bwd(bdres, gw, gb, bdy, bres, bw, bm, brs, N, C);
			o->dropout_bwd(bdy, bdres, n, p, seed, off);
		}
		res[k] = zeros(n), ln[k] = zeros(n), mean[k] = zeros(N), rstd[k] = zeros(N);
		dres[k] = zeros(n), dx[k] = zeros(n), dw[k] = zeros(C), db[k] = zeros(C);
		down_act(o, res[k], bres, n), down_act(o, ln[k], bln, n);
		down_f32(o, mean[k], bm, N), down_f32(o, rstd[k], brs, N);
		down_act(o, dres[k], bdres, n), down_act(o, dx[k], bdy, n);
		down_f32(o, dw[k], gw, C), down_f32(o, db[k], gb, C);
		o->free(br), o->free(bx), o->free(bw), o->free(bb), o->free(bres), o->free(bln);
		o->free(bm), o->free(brs), o->free(bdy), o->free(bdres), o->free(gw), o->free(gb);
	}
	int ok = 1;
	char wn[128];
#define SAME(arr, cnt)                                                                             \
	snprintf(wn, sizeof wn, "%s " #arr " fused vs separate", name);                           \
	ok &= near(wn, arr[0], arr[1], cnt, 0.0);                                                  \
	snprintf(wn, sizeof wn, "%s " #arr " vs cpu", name);                                       \
	ok &= near(wn, arr[0], arr[2], cnt, 1e-2)
	SAME(res, n);
	SAME(ln, n);
	SAME(mean, (size_t)N);
	SAME(rstd, (size_t)N);
	SAME(dres, n);
	SAME(dx, n);
	SAME(dw, (size_t)C);
	SAME(db, (size_t)C);
#undef SAME
	for (int k = 0; k < 3; k++)
		free(res[k]), free(ln[k]), free(mean[k]), free(rstd[k]), free(dres[k]), free(dx[k]),
			free(dw[k]), free(db[k]);
	free(r), free(x), free(w), free(b), free(dy), free(dres0), free(dw0), free(db0);
	return ok;
}

/* The fused MLP ops of the CUDA backend (the GELU_AUX_BIAS and DGELU epilogues, or their
 * fallback for widths that are not multiples of 8) against the CPU backend's unfused pair:
 * forward pre = x w^T + b, out = gelu(pre); backward dinp = (dy w) gelu'(pre), dw, dbias. */
static int case_matmul_gelu(int N, int IC, int OC, int misalign)
{
	char name[96];
	snprintf(name, sizeof name, "matmul_gelu N%d IC%d OC%d%s", N, IC, OC, misalign ? " misaligned" : "");
	size_t ni = (size_t)N * IC, no = (size_t)N * OC, nw = (size_t)OC * IC;
	float *x = randn(ni + 1, 1, 30), *w = randn(nw + 1, 0.2f, 31), *b = randn(OC + 1, 1, 32);
	float *pre = randn(ni + 1, 1.5f, 33), *dy = randn(no + 1, 1, 34);
	float *dw0 = randn(nw, 0.1f, 35), *db0 = randn(OC, 0.1f, 36);
	float *out[2], *pf[2], *dx[2], *dw[2], *db[2];
	const struct ops *os[2] = {cu, cpu};
	T_ASSERT(cu->matmul_gelu_fwd && cu->matmul_dgelu_bwd);   /* the CUDA backend fuses */
	T_ASSERT(!cpu->matmul_gelu_fwd && !cpu->matmul_dgelu_bwd);   /* the CPU is the reference */
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		size_t e = misalign ? o->act_size : 0;
		void *bx = up_act(o, x, ni + 1), *bw = up_act(o, w, nw + 1), *bb = up_act(o, b, OC + 1);
		void *bpre = up_act(o, pre, ni + 1), *bdy = up_act(o, dy, no + 1);
		void *bo = o->alloc((no + 1) * o->act_size), *bpf = o->alloc((no + 1) * o->act_size);
		void *bdx = o->alloc((ni + 1) * o->act_size);
		float *gw = up_f32(o, dw0, nw), *gb = up_f32(o, db0, OC);
		void *px = (char *)bx + e, *pw = (char *)bw + e, *pb = (char *)bb + e;
		void *ppre = (char *)bpre + e, *pdy = (char *)bdy + e, *po = (char *)bo + e;
		void *ppf = (char *)bpf + e, *pdx = (char *)bdx + e;
		if (o->matmul_gelu_fwd) {
			o->matmul_gelu_fwd(po, ppf, px, pw, pb, N, IC, OC);
			/* the layer after it: dinp of (N, IC) through w(OC, IC), gelu'(pre) */
			o->matmul_dgelu_bwd(pdx, gw, gb, pdy, px, pw, ppre, N, IC, OC);
		} else {
			o->matmul_fwd(ppf, px, pw, pb, N, IC, OC);
			o->gelu_fwd(po, ppf, no);
			o->matmul_bwd(pdx, gw, gb, pdy, px, pw, N, IC, OC);
			o->gelu_bwd(pdx, ppre, pdx, ni);
		}
		out[k] = zeros(no + 1), pf[k] = zeros(no + 1), dx[k] = zeros(ni + 1);
		dw[k] = zeros(nw), db[k] = zeros(OC);
		down_act(o, out[k], bo, no + 1);
		down_act(o, pf[k], bpf, no + 1);
		down_act(o, dx[k], bdx, ni + 1);
		down_f32(o, dw[k], gw, nw);
		down_f32(o, db[k], gb, OC);
		o->free(bx), o->free(bw), o->free(bb), o->free(bpre), o->free(bdy), o->free(bo);
		o->free(bpf), o->free(bdx), o->free(gw), o->free(gb);
	}
	int ok = 1;
	char wn[128];
	size_t s = misalign ? 1 : 0;
	snprintf(wn, sizeof wn, "%s out", name);
	ok &= near(wn, out[0] + s, out[1] + s, no, TOL_ACT);
	snprintf(wn, sizeof wn, "%s pre", name);
	ok &= near(wn, pf[0] + s, pf[1] + s, no, TOL_ACT);
	snprintf(wn, sizeof wn, "%s dinp", name);
	ok &= near(wn, dx[0] + s, dx[1] + s, ni, TOL_ACT);
	snprintf(wn, sizeof wn, "%s dw", name);
	ok &= near(wn, dw[0], dw[1], nw, 1e-4);
	snprintf(wn, sizeof wn, "%s dbias", name);
	ok &= near(wn, db[0], db[1], OC, 1e-4);
	for (int k = 0; k < 2; k++)
		free(out[k]), free(pf[k]), free(dx[k]), free(dw[k]), free(db[k]);
	free(x), free(w), free(b), free(pre), free(dy), free(dw0), free(db0);
	return ok;
}

/* Queries that see no key (a sample of key length 0, bidirectionally) have output 0 and lse +inf
 * on both backends (FlashAttention-2's convention: exp(s - lse) is 0 for every key, so the
 * backward's P and dQ are 0 too), and a zero dQ; the lse entries are then set to 0 for the
 * tolerance comparison, which takes inf - inf for a difference.  out/dq rows are (b, i, h) of
 * HD elements, dq's with stride nq (3 for qkv's columns, 1 for q). */
static int empty_rows_agree(const char *name, float *out[2], float *lse[2], float *dq[2],
			    const int32_t *kl, int B, int T, int NH, int HD, int nq)
{
	int ok = 1;
	for (int k = 0; k < 2; k++)
		for (int b = 0; b < B; b++) {
			if (kl[b] != 0)
				continue;
			for (int i = 0; i < T; i++)
				for (int h = 0; h < NH; h++) {
					size_t r = ((size_t)b * T + i) * NH + h;
					float *l = &lse[k][((size_t)b * NH + h) * T + i], lv = *l;
					int good = lv == INFINITY;
					*l = 0.0f;
					for (int d = 0; d < HD; d++)
						good &= out[k][r * HD + d] == 0.0f &&
							dq[k][r * nq * HD + d] == 0.0f;
					if (!good && ok)
						printf("# %s: %s, sample %d query %d head %d sees no key: lse "
						       "%g (want inf), out[0] %g, dq[0] %g (want 0)\n", name,
						       k ? "cuda" : "cpu", b, i, h,
						       (double)lv,
						       (double)out[k][r * HD], (double)dq[k][r * nq * HD]);
					ok &= good;
				}
		}
	return ok;
}

/* Cross-attention (T5's inter_attention): q(B,Tq,NH,HD) against kv(B,Tk,NH,2,HD), every query
 * seeing its sample's first kl[b] keys; the tolerances as the self-attention's below. */
static int case_xattn(int B, int Tq, int Tk, int NH, int HD, float p, int head0, int heads,
		      int empty)
{
	char name[128];
	snprintf(name, sizeof name, "xattn B%d Tq%d Tk%d NH%d HD%d p%g%s", B, Tq, Tk, NH, HD, p,
		 empty ? " sample 1 empty" : "");
	size_t nq = (size_t)B * Tq * NH * HD, nkv = (size_t)B * Tk * NH * 2 * HD;
	size_t nl = (size_t)B * NH * Tq;
	float *q = randn(nq, 1.0f, 60), *kv = randn(nkv, 1.0f, 61), *dout = randn(nq, 1, 62);
	int32_t kl[B];
	for (int b = 0; b < B; b++)   /* empty: sample 1 sees no keys */
		kl[b] = b == 0 ? Tk : empty && b == 1 ? 0 : 1 + (int)(philox_u32(63, b) % Tk);
	float *out[2], *lse[2], *dq[2], *dkv[2];
	const struct ops *os[2] = {cpu, cu};
	float *ref_out = NULL, *ref_lse = NULL;
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		int32_t *dkl = up_i32(o, kl, B);
		struct ops_attn a = {NULL, NULL, p, 78, 5, head0, heads, 1, dkl};
		void *dQ = up_act(o, q, nq), *dKV = up_act(o, kv, nkv), *dO = o->alloc(nq * o->act_size);
		float *dl = up_f32(o, NULL, nl);
		o->xattn_fwd(dO, dl, dQ, dKV, B, Tq, Tk, NH, HD, a);
		out[k] = zeros(nq), lse[k] = zeros(nl);
		down_act(o, out[k], dO, nq);
		down_f32(o, lse[k], dl, nl);
		if (k == 0) {
			ref_out = copyf(out[0], nq);
			for (size_t i = 0; i < nq; i++)
				ref_out[i] = actr(ref_out[i]);
			ref_lse = lse[0];
		}
		void *rO = up_act(o, ref_out, nq), *g = up_act(o, dout, nq);
		float *rl = up_f32(o, ref_lse, nl);
		void *gq = o->alloc(nq * o->act_size), *gkv = o->alloc(nkv * o->act_size);
		o->xattn_bwd(gq, gkv, g, dQ, dKV, rO, rl, B, Tq, Tk, NH, HD, a);
		dq[k] = zeros(nq), dkv[k] = zeros(nkv);
		down_act(o, dq[k], gq, nq);
		down_act(o, dkv[k], gkv, nkv);
		o->free(dkl), o->free(dQ), o->free(dKV), o->free(dO), o->free(dl), o->free(rO);
		o->free(g), o->free(rl), o->free(gq), o->free(gkv);
	}
	int ok = 1;
	char wn[160];
	ok &= empty_rows_agree(name, out, lse, dq, kl, B, Tq, NH, HD, 1);
	snprintf(wn, sizeof wn, "%s out", name);
	ok &= near(wn, out[1], out[0], nq, TOL_ACT);
	snprintf(wn, sizeof wn, "%s lse", name);
	ok &= near(wn, lse[1], lse[0], nl, 1e-5);
	snprintf(wn, sizeof wn, "%s dq", name);
	ok &= near_floor(wn, dq[1], dq[0], nq, 2 * TOL_ACT, 1e-2);
	const char *part[2] = {"dk", "dv"};
	for (int c = 0; c < 2; c++) {
		size_t m = nkv / 2;
		float *a = malloc(m * sizeof *a), *b = malloc(m * sizeof *b);
		for (size_t r = 0; r < (size_t)B * Tk * NH; r++)
			for (int d = 0; d < HD; d++) {
				a[r * HD + d] = dkv[1][(r * 2 + c) * HD + d];
				b[r * HD + d] = dkv[0][(r * 2 + c) * HD + d];
			}
		snprintf(wn, sizeof wn, "%s %s", name, part[c]);
		ok &= near_floor(wn, a, b, m, 2 * TOL_ACT, 1e-2);
		free(a), free(b);
	}
	/* keys past a sample's klen: exactly 0 on both */
	for (int b = 0; b < B; b++)
		for (int j = kl[b]; j < Tk; j++)
			for (size_t e = 0; e < (size_t)NH * 2 * HD; e++)
				ok &= dkv[1][((size_t)b * Tk + j) * NH * 2 * HD + e] == 0.0f;
	for (int k = 0; k < 2; k++)
		free(out[k]), free(lse[k]), free(dq[k]), free(dkv[k]);
	free(ref_out), free(q), free(kv), free(dout);
	return ok;
}

/* ALiBi: nh heads of a model with `heads` heads, from head0; document starts every few tokens.
 *
 * Tolerances.  The CUDA kernels multiply on tensor cores, bf16 x bf16 (fp16 x fp16) with fp32
 * sums, and round P (after dropout) to the activation type before P V, P M before dV and dS
 * before dK and dQ; the CPU keeps them in fp32.  That is one more rounding per weight: |dO_i| <=
 * 2^-9 sum_j P_ij |v_j| <= 2^-9 max |v| (2^-12 in fp16), on top of the output's own rounding -
 * two roundings, what TOL_ACT allows; lse sums P in fp32 before rounding and stays within float
 * rounding.  The gradients see the rounded P, dS and (through D = dO . O) the rounded output:
 * 2 TOL_ACT.  Measured in bf16 on these cases
 * (worst |cuda - cpu| / max |cpu| over all of them): out 4.3e-3 (2.7e-3 with fp32 P in the
 * SIMT kernels before), dq/dk/dv 4.9e-3 (3.3e-3), lse 1.7e-7 - within the tolerances by 1.9x
 * and 3.2x, which were not changed.  In fp16 (--fp16): out 5.6e-4, dq/dv 5.3e-4, dk 1.2e-3
 * (T 20, HD 8: 1.5 ulps of its largest value), within 1e-3 and 2e-3 by 1.8x and 1.7x; P
 * rounded through bf16 instead fails them (out 1.8e-3, dq up to 3.3e-3). */
static int case_attention(int B, int T, int NH, int HD, int alibi, int docs, float p, int head0,
			  int heads)
{
	char name[128];
	snprintf(name, sizeof name, "attention B%d T%d NH%d HD%d%s%s p%g", B, T, NH, HD,
		 alibi ? " alibi" : "", docs == 3 ? " bidirectional, sample 1 empty"
		 : docs == 2 ? " bidirectional" : docs ? " docs" : "", p);
	size_t nq = (size_t)B * T * NH * 3 * HD, no = (size_t)B * T * NH * HD, nl = (size_t)B * NH * T;
	float *qkv = randn(nq, 1.0f, 30), *dout = randn(no, 1, 31);
	float *slopes = zeros(heads);
	model_alibi_slopes(heads, slopes);
	int32_t *ks = malloc((size_t)B * T * sizeof *ks), kl[B];
	for (int b = 0; b < B; b++)   /* docs 2: bidirectional over a key length per sample */
		kl[b] = b == 0 ? T : docs == 3 && b == 1 ? 0 : 1 + (int)(philox_u32(45, b) % T);
	for (int b = 0; b < B; b++) {
		int start = 0;
		for (int i = 0; i < T; i++) {
			if (docs && i > 0 && philox_u32(40 + b, i) % 9 == 0)
				start = i;
			ks[b * T + i] = start;
		}
	}
	float *out[2], *lse[2], *dqkv[2];
	const struct ops *os[2] = {cpu, cu}; /* the CPU first: its forward feeds both backwards */
	float *ref_out = NULL, *ref_lse = NULL;
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		float *ds = up_f32(o, slopes + head0, NH);
		int32_t *dk = up_i32(o, ks, (size_t)B * T), *dkl = up_i32(o, kl, B);
		struct ops_attn a = {alibi ? ds : NULL, docs == 1 ? dk : NULL, p, 77, 3, head0, heads,
				     docs >= 2, docs >= 2 ? dkl : NULL};
		void *dx = up_act(o, qkv, nq), *dO = o->alloc(no * o->act_size);
		float *dl = up_f32(o, NULL, nl);
		o->attention_fwd(dO, dl, dx, B, T, NH, HD, a);
		out[k] = zeros(no), lse[k] = zeros(nl);
		down_act(o, out[k], dO, no);
		down_f32(o, lse[k], dl, nl);
		if (k == 0) {
			ref_out = copyf(out[0], no);
			for (size_t i = 0; i < no; i++)
				ref_out[i] = actr(ref_out[i]);
			ref_lse = lse[0];
		}
		void *rO = up_act(o, ref_out, no), *g = up_act(o, dout, no);
		float *rl = up_f32(o, ref_lse, nl);
		void *gx = o->alloc(nq * o->act_size);
		o->attention_bwd(gx, g, dx, rO, rl, B, T, NH, HD, a);
		dqkv[k] = zeros(nq);
		down_act(o, dqkv[k], gx, nq);
		o->free(ds), o->free(dk), o->free(dkl), o->free(dx), o->free(dO), o->free(dl), o->free(rO);
		o->free(g), o->free(rl), o->free(gx);
	}
	int ok = 1;
	char wn[160];
	if (docs >= 2)
		ok &= empty_rows_agree(name, out, lse, dqkv, kl, B, T, NH, HD, 3);
	snprintf(wn, sizeof wn, "%s out", name);
	ok &= near(wn, out[1], out[0], no, TOL_ACT);
	snprintf(wn, sizeof wn, "%s lse", name);
	ok &= near(wn, lse[1], lse[0], nl, 1e-5);
	/* dq, dk, dv separately: each has its own scale */
	const char *part[3] = {"dq", "dk", "dv"};
	for (int c = 0; c < 3; c++) {
		size_t m = no;
		float *a = malloc(m * sizeof *a), *b = malloc(m * sizeof *b);
		for (size_t r = 0; r < (size_t)B * T * NH; r++)
			for (int d = 0; d < HD; d++) {
				a[r * HD + d] = dqkv[1][(r * 3 + c) * HD + d];
				b[r * HD + d] = dqkv[0][(r * 3 + c) * HD + d];
			}
		snprintf(wn, sizeof wn, "%s %s", name, part[c]);
		ok &= near_floor(wn, a, b, m, 2 * TOL_ACT, 1e-2); /* dq, dk are 0 for T = 1 */
		free(a), free(b);
	}
	for (int k = 0; k < 2; k++)
		free(out[k]), free(lse[k]), free(dqkv[k]);
	free(ref_out), free(qkv), free(dout), free(slopes), free(ks);
	return ok;
}

/* One attention forward and backward on the CUDA backend alone, its results dropped: under
 * the executor's LMTK_CUDA_EXEC_ABANDON=attn_bwd_mma_k:N its backward stops after N blocks, as a
 * backward killed midway, leaving the dQ semaphores half counted, the tile counters advanced
 * and the partial sums dirty for the next backward of the shape (tests/cli/train-cuda.sh). */
static void attention_throwaway(int B, int T, int NH, int HD)
{
	size_t nq = (size_t)B * T * NH * 3 * HD, no = (size_t)B * T * NH * HD;
	float *qkv = randn(nq, 1.0f, 90), *dout = randn(no, 1.0f, 91);
	struct ops_attn a = {NULL, NULL, 0.0f, 1, 0, 0, NH, 0, NULL};
	void *dx = up_act(cu, qkv, nq), *g = up_act(cu, dout, no);
	void *dO = cu->alloc(no * cu->act_size), *gx = cu->alloc(nq * cu->act_size);
	float *dl = cu->alloc((size_t)B * NH * T * sizeof(float));
	cu->attention_fwd(dO, dl, dx, B, T, NH, HD, a);
	cu->attention_bwd(gx, g, dx, dO, dl, B, T, NH, HD, a);
	float *h = zeros(nq);
	down_act(cu, h, gx, nq);   /* waits for it */
	cu->free(dx), cu->free(g), cu->free(dO), cu->free(gx), cu->free(dl);
	free(h), free(qkv), free(dout);
}

/* The exact GeLU, tanh (fwd from the input, bwd from the output) and the strided rows of
 * BERT's pooler: n elements as (n / 16, 16) rows of a (rows, 3, 16) matrix, row stride 48 */
static int case_bert_heads(size_t n, int misalign)
{
	char name[96];
	snprintf(name, sizeof name, "bert heads n%zu%s", n, misalign ? " misaligned" : "");
	size_t rows = n / 16;
	float *x = randn(n + 1, 2, 60), *dy = randn(n + 1, 1, 61), *big = randn(rows * 48, 1, 62);
	float *y = zeros(n + 1);   /* a tanh output, the same for both backends' backward */
	for (size_t i = 0; i <= n; i++)
		y[i] = bf16r(tanhf(x[i]));
	enum { EF, EB, TF, TB, GR, SR, NR };
	float *r[2][NR];
	const struct ops *os[2] = {cu, cpu};
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		size_t e = misalign ? o->act_size : 0;
		void *bx = up_act(o, x, n + 1), *bg = up_act(o, dy, n + 1);
		void *bo = o->alloc((n + 1) * o->act_size), *bb = up_act(o, big, rows * 48);
		void *px = (char *)bx + e, *pg = (char *)bg + e, *po = (char *)bo + e;
		for (int q = 0; q < NR; q++)
			r[k][q] = zeros(rows * 48 > n + 1 ? rows * 48 : n + 1);
		o->gelu_erf_fwd(po, px, n);
		down_act(o, r[k][EF], bo, n + 1);
		o->gelu_erf_bwd(po, px, pg, n);
		down_act(o, r[k][EB], bo, n + 1);
		o->tanh_fwd(po, px, n);
		down_act(o, r[k][TF], bo, n + 1);
		void *t = up_act(o, y, n + 1);
		o->tanh_bwd(po, (char *)t + e, pg, n);
		down_act(o, r[k][TB], bo, n + 1);
		o->gather_rows(bo, (char *)bb + 16 * o->act_size, (int)rows, 16, 48);
		down_act(o, r[k][GR], bo, rows * 16);
		o->scatter_add_rows((char *)bb + 32 * o->act_size, bo, (int)rows, 16, 48);
		down_act(o, r[k][SR], bb, rows * 48);
		o->free(bx), o->free(bg), o->free(bo), o->free(bb), o->free(t);
	}
	const char *nm[NR] = {"gelu_erf_fwd", "gelu_erf_bwd", "tanh_fwd", "tanh_bwd", "gather_rows",
			      "scatter_add_rows"};
	size_t len[NR] = {n, n, n, n, rows * 16, rows * 48}, s = misalign ? 1 : 0;
	int ok = 1;
	for (int q = 0; q < NR; q++) {
		char wn[160];
		snprintf(wn, sizeof wn, "%s %s", name, nm[q]);
		size_t o0 = q < GR ? s : 0;
		ok &= near(wn, r[0][q] + o0, r[1][q] + o0, len[q], TOL_ACT);
	}
	/* the rows moved are the ones asked for: row r of the gather is big[r][1] */
	for (size_t i = 0; i < rows * 16 && ok; i++)
		if (r[1][GR][i] != big[i / 16 * 48 + 16 + i % 16]) {
			printf("# %s: gather_rows element %zu is not its row's\n", name, i);
			ok = 0;
		}
	for (int k = 0; k < 2; k++)
		for (int q = 0; q < NR; q++)
			free(r[k][q]);
	free(x), free(dy), free(big), free(y);
	return ok;
}

static int case_pointwise(size_t n, float p, int misalign)
{
	char name[96];
	snprintf(name, sizeof name, "pointwise n%zu p%g%s", n, p, misalign ? " misaligned" : "");
	float *x = randn(n + 1, 2, 50), *res = randn(n + 1, 1, 51), *dy = randn(n + 1, 1, 52);
	float *acc = randn(n + 1, 1, 53);
	enum { GF, GB, RES, DB, DF, ADD, NR };
	float *r[2][NR];
	const struct ops *os[2] = {cu, cpu};
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		size_t e = misalign ? o->act_size : 0;
		void *bx = up_act(o, x, n + 1), *br = up_act(o, res, n + 1), *bg = up_act(o, dy, n + 1);
		void *ba = up_act(o, acc, n + 1), *bo = o->alloc((n + 1) * o->act_size);
		void *px = (char *)bx + e, *pr = (char *)br + e, *pg = (char *)bg + e;
		void *pa = (char *)ba + e, *po = (char *)bo + e;
		for (int q = 0; q < NR; q++)
			r[k][q] = zeros(n + 1);
		o->gelu_fwd(po, px, n);
		down_act(o, r[k][GF], bo, n + 1);
		o->gelu_bwd(po, px, pg, n);
		down_act(o, r[k][GB], bo, n + 1);
		o->residual_fwd(po, pr, px, n, p, 99, 1000);
		down_act(o, r[k][RES], bo, n + 1);
		o->dropout_bwd(po, pg, n, p, 99, 1000);
		down_act(o, r[k][DB], bo, n + 1);
		o->dropout_fwd(pr, n, p, 98, 7); /* in place */
		down_act(o, r[k][DF], br, n + 1);
		o->add(pa, px, n);
		down_act(o, r[k][ADD], ba, n + 1);
		o->free(bx), o->free(br), o->free(bg), o->free(ba), o->free(bo);
	}
	const char *nm[NR] = {"gelu_fwd", "gelu_bwd", "residual_fwd", "dropout_bwd", "dropout_fwd",
			      "add"};
	int ok = 1;
	size_t s = misalign ? 1 : 0;
	for (int q = 0; q < NR; q++) {
		char wn[160];
		snprintf(wn, sizeof wn, "%s %s", name, nm[q]);
		ok &= near(wn, r[0][q] + s, r[1][q] + s, n, TOL_ACT);
		/* the same elements dropped: zero in one iff zero in the other */
		if (p > 0 && (q == RES || q == DB || q == DF))
			for (size_t i = s; i < n + s; i++)
				if ((r[0][q][i] == 0) != (r[1][q][i] == 0) &&
				    (q != RES || (r[0][q][i] != res[i]) != (r[1][q][i] != res[i]))) {
					printf("# %s: element %zu dropped by one backend only\n", wn, i);
					ok = 0;
					break;
				}
	}
	for (int k = 0; k < 2; k++)
		for (int q = 0; q < NR; q++)
			free(r[k][q]);
	free(x), free(res), free(dy), free(acc);
	return ok;
}

static int case_xent(int N, int V, int Vp)
{
	char name[64];
	snprintf(name, sizeof name, "xent N%d V%d Vp%d", N, V, Vp);
	size_t n = (size_t)N * Vp;
	float *logits = randn(n, 3, 60);
	int32_t *tgt = malloc(N * sizeof *tgt), *tl = malloc(N * sizeof *tl);
	for (int i = 0; i < N; i++) {
		tgt[i] = (int32_t)(philox_u32(61, i) % V);
		tl[i] = i % 3 == 0 ? -1 : tgt[i]; /* -1: another rank owns the target */
	}
	tgt[1 % N] = V;  /* a padded column: out of vocabulary */
	tgt[N - 1] = -5; /* garbage */
	int want_bad = 0;
	for (int i = 0; i < N; i++)
		want_bad += tgt[i] < 0 || tgt[i] >= V;
	float *loss[2], *grad[2], *mx[2], *se[2], *zt[2], *g2[2];
	int bad[2];
	const struct ops *os[2] = {cu, cpu};
	float dscale = 0.37f;
	int ok_tp = 1;
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		void *dl = up_act(o, logits, n);
		int32_t *dt = up_i32(o, tgt, N), *dtl = up_i32(o, tl, N);
		float *dloss = up_f32(o, NULL, N);
		int *dbad = o->alloc(sizeof(int));
		float *m = up_f32(o, NULL, N), *s = up_f32(o, NULL, N), *z = up_f32(o, NULL, N);
		/* the split version first: xent_fwd_bwd overwrites the logits */
		o->xent_stats(m, s, z, dl, dtl, N, V, Vp);
		mx[k] = zeros(N), se[k] = zeros(N), zt[k] = zeros(N);
		down_f32(o, mx[k], m, N);
		down_f32(o, se[k], s, N);
		down_f32(o, zt[k], z, N);
		/* the deferred step's combination (TP > 1) with another slice's larger maximum in
		 * half the rows: against the host path's arithmetic on the CPU's statistics */
		float *want_l = zeros(N), *want_s = zeros(N), *want_lse = zeros(N);
		float *dg = up_f32(o, NULL, N), *dls = up_f32(o, NULL, N);
		o->copy(dg, m, N * sizeof(float)); /* as the model does, then the "group's" max */
		float *hg = zeros(N);
		down_f32(o, hg, dg, N);
		for (int i = 0; i < N; i++)
			hg[i] += (i & 1) ? 0.5f : 0.0f;
		float *dg2 = up_f32(o, hg, N);
		o->xent_rescale(s, m, dg2, N);
		int *dbad2 = o->alloc(sizeof(int)), bad2 = 0, want_bad2 = 0;
		o->xent_finish(dls, dg2, dg2, s, z, dt, N, V, dbad2);
		for (int i = 0; i < N; i++) {
			float sc = mx[k][i] == -INFINITY ? 0.0f : se[k][i] * expf(mx[k][i] - hg[i]);
			int okt = tgt[i] >= 0 && tgt[i] < V;
			want_lse[i] = okt ? hg[i] + logf(sc) : INFINITY;
			want_l[i] = okt ? want_lse[i] - zt[k][i] : 0.0f;
			want_s[i] = sc;
			want_bad2 += !okt;
		}
		float *got_l = zeros(N), *got_s = zeros(N), *got_lse = zeros(N);
		down_f32(o, got_l, dls, N);
		down_f32(o, got_s, s, N);
		down_f32(o, got_lse, dg2, N);
		o->to_host(&bad2, dbad2, sizeof bad2);
		for (int i = 0; i < N; i++)
			if (want_lse[i] == INFINITY ? got_lse[i] != INFINITY
						    : !(fabsf(got_lse[i] - want_lse[i]) <=
							1e-6f * fabsf(want_lse[i]) + 1e-6f)) {
				printf("# %s: %s deferred TP lse of row %d: %g, want %g\n", name,
				       o->name, i, got_lse[i], want_lse[i]);
				ok_tp = 0;
				break;
			}
		char dn[128];
		snprintf(dn, sizeof dn, "%s %s deferred TP losses", name, o->name);
		ok_tp &= near(dn, got_l, want_l, N, 1e-6);
		snprintf(dn, sizeof dn, "%s %s deferred TP rescaled sums", name, o->name);
		ok_tp &= near(dn, got_s, want_s, N, 1e-6);
		if (bad2 != want_bad2) {
			printf("# %s: %s deferred TP bad targets %d, want %d\n", name, o->name, bad2,
			       want_bad2);
			ok_tp = 0;
		}
		free(want_l), free(want_s), free(want_lse), free(hg), free(got_l);
		free(got_s), free(got_lse);
		o->free(dg), o->free(dls), o->free(dg2), o->free(dbad2);
		float *lse = zeros(N);
		for (int i = 0; i < N; i++) /* from the CPU's stats, so both use the same */
			lse[i] = mx[k][i] + logf(se[k][i]) + 0.25f;
		float *dlse = up_f32(o, lse, N);
		void *dl2 = up_act(o, logits, n);
		o->xent_grad(dl2, dlse, dtl, N, V, Vp, dscale);
		g2[k] = zeros(n);
		down_act(o, g2[k], dl2, n);
		o->xent_fwd_bwd(dloss, dl, dt, N, V, Vp, dscale, dbad);
		loss[k] = zeros(N), grad[k] = zeros(n);
		down_f32(o, loss[k], dloss, N);
		down_act(o, grad[k], dl, n);
		o->to_host(&bad[k], dbad, sizeof(int));
		o->free(dl), o->free(dt), o->free(dtl), o->free(dloss), o->free(dbad), o->free(m);
		o->free(s), o->free(z), o->free(dlse), o->free(dl2);
		free(lse);
	}
	int ok = 1;
	char wn[128];
#define CMP(arr, cnt, tol)                                                                         \
	snprintf(wn, sizeof wn, "%s " #arr, name);                                                 \
	ok &= near(wn, arr[0], arr[1], cnt, tol)
	CMP(loss, (size_t)N, 1e-5);
	CMP(grad, n, TOL_ACT);
	CMP(mx, (size_t)N, 0);
	CMP(se, (size_t)N, 1e-5);
	CMP(zt, (size_t)N, 0);
	CMP(g2, n, TOL_ACT);
#undef CMP
	ok &= ok_tp;
	if (bad[0] != want_bad || bad[1] != want_bad) {
		printf("# %s: bad targets counted %d (cuda) and %d (cpu), want %d\n", name, bad[0],
		       bad[1], want_bad);
		ok = 0;
	}
	for (int i = 0; i < N; i++) /* padded columns get exactly 0 */
		for (int c = V; c < Vp; c++)
			if (grad[0][(size_t)i * Vp + c] != 0 || g2[0][(size_t)i * Vp + c] != 0) {
				printf("# %s: padded column %d of row %d has a gradient\n", name, c, i);
				ok = 0;
				i = N;
				break;
			}
	for (int k = 0; k < 2; k++)
		free(loss[k]), free(grad[k]), free(mx[k]), free(se[k]), free(zt[k]), free(g2[k]);
	free(logits), free(tgt), free(tl);
	return ok;
}

/* The multi-tensor AdamW against the per-tensor one on the same backend, bit for bit: tensors
 * of sizes around the launch's chunk (so chunks start inside tensors and span several), a gap
 * in the flat buffers that no tensor covers (left untouched), moments packed elsewhere, weight
 * decay on some tensors only, one tensor's lr multiplied (--embedding-lr-mult's word
 * embedding). */
static int case_adamw_multi(void)
{
	static const size_t len[] = {1, 4095, 4097, 3, 9000, 1, 8192, 17};
	enum { NT = sizeof len / sizeof *len, GAP = 5 };
	struct adam_seg seg[NT];
	size_t P = 0, S = 0;
	for (int i = 0; i < NT; i++) {
		seg[i] = (struct adam_seg){P, S, len[i], S, i % 3 != 1, i == 4};
		P += len[i] + (i == 2 ? GAP : 0);
		S += len[i];
	}
	const struct ops *o = cu;
	float *g = randn(P, 1, 80), *w = randn(P, 0.5f, 81), *m0 = randn(S, 0.1f, 82);
	float *v0 = randn(S, 0.1f, 83);
	for (size_t i = 0; i < S; i++)
		v0[i] = v0[i] * v0[i];
	float *out[2][4];
	for (int k = 0; k < 2; k++) {
		float *dg = up_f32(o, g, P), *dw = up_f32(o, w, P), *dm = up_f32(o, m0, S);
		float *dv = up_f32(o, v0, S);
		void *dp = o->alloc(P * o->act_size);
		struct adam_seg *ds = o->alloc(sizeof seg);
		o->to_device(ds, seg, sizeof seg);
		for (int step = 1; step <= 3; step++) {
			if (k == 0)
				for (int i = 0; i < NT; i++)
					o->adamw(dw + seg[i].a, (char *)dp + seg[i].a * o->act_size,
						 dg + seg[i].a, dm + seg[i].s, dv + seg[i].s, seg[i].n,
						 seg[i].lr_mult ? 1e-2f * 3.5f : 1e-2f, 0.9f, 0.95f,
						 1e-8f, seg[i].decay ? 0.1f : 0.0f, 0.5f, step);
			else
				o->adamw_multi(dw, dp, dg, dm, dv, ds, NT, S, 1e-2f, 3.5f, 0.9f, 0.95f,
					       1e-8f, 0.1f, 0.5f, step);
		}
		for (int j = 0; j < 4; j++)
			out[k][j] = zeros(P);
		down_f32(o, out[k][0], dw, P);
		down_f32(o, out[k][1], dm, S);
		down_f32(o, out[k][2], dv, S);
		/* the gap's 16-bit copy was never written: zero it on both before comparing */
		down_act(o, out[k][3], dp, P);
		for (size_t i = seg[3].a - GAP; i < seg[3].a; i++)
			out[k][3][i] = 0;
		o->free(dg), o->free(dw), o->free(dm), o->free(dv), o->free(dp), o->free(ds);
	}
	int ok = 1;
	for (size_t i = seg[3].a - GAP; i < seg[3].a; i++)   /* the gap keeps its weights */
		if (memcmp(&out[1][0][i], &w[i], sizeof(float))) {
			printf("# adamw_multi: master[%zu] in no tensor was changed\n", i);
			ok = 0;
		}
	static const char *what[] = {"master", "exp_avg", "exp_avg_sq", "param"};
	size_t cnt[] = {P, S, S, P};
	for (int j = 0; j < 4; j++) {
		for (size_t i = 0; i < cnt[j] && ok; i++)
			if (memcmp(&out[0][j][i], &out[1][j][i], sizeof(float))) {
				printf("# adamw_multi %s[%zu]: %.9g (per tensor) vs %.9g (one launch)\n",
				       what[j], i, out[0][j][i], out[1][j][i]);
				ok = 0;
			}
		free(out[0][j]), free(out[1][j]);
	}
	free(g), free(w), free(m0), free(v0);
	return ok;
}

/* The step's scalars on the device (ops.h struct ops_step) against optim.c's host arithmetic:
 * two micro-batches' mean losses and the sum of squares accumulate; the decision skips on a
 * non-finite loss and on bad targets (masked ones excepted); gscale is 1/loss_scale times the
 * clip coefficient as optim.c computes it; the learning rate and bias corrections are the
 * entry the previous step's outcome picks; adamw_multi_step equals adamw_multi with those
 * values bit for bit when taken and changes nothing when skipped; step_fetch/step_wait bring
 * the struct back. */
static int case_step_scalars(void)
{
	const struct ops *o = cu;
	enum { NL = 100, KEPT = 80, P = 5000 };
	struct adam_seg seg = {0, 0, P, 0, 1, 0};
	float losses[NL];
	double lsum = 0;
	for (int i = 0; i < NL; i++) {
		losses[i] = i < KEPT ? 1.0f + 0.01f * i : 0.0f;
		lsum += losses[i];
	}
	float *g = randn(P, 1, 90), *w = randn(P, 0.5f, 91);
	float *dl = up_f32(o, losses, NL), *dg = up_f32(o, g, P);
	struct ops_step *d = o->alloc(2 * sizeof *d);
	struct adam_seg *dseg = o->alloc(sizeof seg);
	o->to_device(dseg, &seg, sizeof seg);
	int *dbad = o->alloc(sizeof(int));
	/* prev_pending, prev taken, a NaN loss, bad targets, masked targets, clip */
	static const int sc[][6] = {{0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 3, 1}, {1, 1, 0, 0, 0, 1},
				    {0, 1, 0, 0, 0, 1}, {1, 1, 1, 0, 0, 0}, {1, 1, 0, 2, 5, 0}};
	int ok = 1;
	for (size_t c = 0; c < sizeof sc / sizeof *sc && ok; c++) {
		struct ops_step in, prev;
		memset(&in, 0, sizeof in);
		memset(&prev, 0, sizeof prev);
		for (int k = 0; k < 2; k++) {
			in.lr_if[k] = 1e-3f * (float)(k + 1);
			in.bc1_if[k] = (float)(1.0 - pow((double)0.9f, 2 + k));
			in.bc2_if[k] = (float)(1.0 - pow((double)0.95f, 2 + k));
		}
		in.loss_scale = 1.0f;
		in.clip = sc[c][5] ? 0.5f : 0.0f;
		in.masked = sc[c][4];
		in.prev_pending = sc[c][0];
		prev.taken = sc[c][1];
		int nbad = sc[c][3] + sc[c][4];
		o->to_device(d, &in, sizeof in);
		o->to_device(d + 1, &prev, sizeof prev);
		o->to_device(dbad, &nbad, sizeof nbad);
		o->loss_acc(&d->loss[0], dl, NL, KEPT);
		o->loss_acc(&d->loss[0], dl, NL, KEPT);
		if (sc[c][2]) {
			double nan = NAN;
			o->to_device(&d->loss[0], &nan, sizeof nan);
		}
		o->sumsq_acc(&d->sumsq, dg, P);
		o->step_decide(d, d + 1, dbad);
		float *dw = up_f32(o, w, P), *dm = up_f32(o, NULL, P), *dv = up_f32(o, NULL, P);
		float *rw = up_f32(o, w, P), *rm = up_f32(o, NULL, P), *rv = up_f32(o, NULL, P);
		void *dp = o->alloc(P * o->act_size), *rp = o->alloc(P * o->act_size);
		o->adamw_multi_step(dw, dp, dg, dm, dv, dseg, 1, P, 1.0f, 0.9f, 0.95f, 1e-8f, 0.1f, d);
		o->step_fetch(d, 1);
		struct ops_step h = *o->step_wait(1);
		/* the host's view: optim.c's arithmetic on the device's sum of squares */
		double ss = o->sumsq(dg, P), norm = sqrt(ss) / 1.0;
		float gs = 1.0f;
		if (in.clip > 0 && in.clip / (norm + 1e-6) < 1.0)
			gs *= (float)(in.clip / (norm + 1e-6));
		int k = in.prev_pending && prev.taken, taken = !sc[c][2] && !sc[c][3];
		int good = h.sumsq == ss && h.taken == taken && h.bad == sc[c][3] &&
			   h.gscale == gs && h.lr == in.lr_if[k] && h.bc1 == in.bc1_if[k] &&
			   h.bc2 == in.bc2_if[k] &&
			   (sc[c][2] ? isnan(h.loss[0]) : fabs(h.loss[0] - 2 * lsum / KEPT) < 1e-12);
		if (!good)
			printf("# step scalars, case %zu: taken %d (want %d), bad %d, gscale %.9g (%.9g), "
			       "lr %g, loss %.17g (%.17g), sumsq %.17g (%.17g)\n", c, h.taken, taken,
			       h.bad, h.gscale, gs, h.lr, h.loss[0], 2 * lsum / KEPT, h.sumsq, ss);
		ok &= good;
		/* AdamW: the host's values through adamw_multi (step 2 + k: the bias corrections
		 * above), or nothing */
		if (taken)
			o->adamw_multi(rw, rp, dg, rm, rv, dseg, 1, P, in.lr_if[k], 1.0f, 0.9f, 0.95f,
				       1e-8f, 0.1f, gs, 2 + k);
		float *a = zeros(P), *b = zeros(P);
		down_f32(o, a, dw, P);
		down_f32(o, b, rw, P);
		if (memcmp(a, b, P * sizeof *a) || (!taken && memcmp(a, w, P * sizeof *a))) {
			printf("# step scalars, case %zu: adamw_multi_step's weights differ from %s\n", c,
			       taken ? "adamw_multi's" : "the unchanged ones");
			ok = 0;
		}
		free(a), free(b);
		o->free(dw), o->free(dm), o->free(dv), o->free(rw), o->free(rm), o->free(rv);
		o->free(dp), o->free(rp);
	}
	o->free(dl), o->free(dg), o->free(d), o->free(dseg), o->free(dbad);
	free(g), free(w);
	return ok;
}

/* LAMB's two passes and SGD, CUDA against the CPU: the update's sum of squares, both moments,
 * the weights and their 16-bit copy; three steps each, decay on and off, the last two with
 * --lamb-layerwise-noise (the same draws on both: the CPU's weights would be off by the noise,
 * some 0.3 x ratio, were the CUDA kernel to draw other z or index them otherwise) */
static int case_lamb_sgd(size_t n, float wd)
{
	char name[64];
	snprintf(name, sizeof name, "lamb/sgd n%zu wd%g", n, wd);
	float *g = randn(n, 1, 90), *w = randn(n, 0.5f, 91), *m0 = randn(n, 0.1f, 92);
	float *v0 = randn(n, 0.1f, 93);
	for (size_t i = 0; i < n; i++)
		v0[i] = v0[i] * v0[i];
	const struct ops *os[2] = {cu, cpu};
	double uss[2][3];
	float *master[2], *mm[2], *vv[2], *param[2], *sw[2], *sb[2];
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		float *dg = up_f32(o, g, n), *dw = up_f32(o, w, n), *dm = up_f32(o, m0, n);
		float *dv = up_f32(o, v0, n), *sgw = up_f32(o, w, n), *buf = up_f32(o, m0, n);
		void *dp = k == 0 ? o->alloc(n * o->act_size) : (void *)dw;
		void *sp = k == 0 ? o->alloc(n * o->act_size) : (void *)sgw;
		for (int s = 1; s <= 3; s++) {
			uss[k][s - 1] = o->lamb_update(dw, dg, dm, dv, n, 0.9f, 0.95f, 1e-6f, wd, 0.5f,
						       s == 2 ? 1.7f : 1.0f, s);
			/* step 2 and 3 with --lamb-layerwise-noise's draws, as a row-split shard's */
			struct lamb_noise nz = {77u + s, 3, 5, 7, 20, 0.3f};
			o->lamb_apply(dw, dp, dm, dv, n, 0.9f, 0.95f, 1e-6f, wd, 3e-3f * s, s,
				      s > 1 ? &nz : NULL);
			o->sgd(sgw, sp, dg, buf, n, 1e-2f, s == 3 ? 0.0f : 0.9f, wd, 0.5f, s == 1);
		}
		master[k] = zeros(n), mm[k] = zeros(n), vv[k] = zeros(n), param[k] = zeros(n);
		sw[k] = zeros(n), sb[k] = zeros(n);
		down_f32(o, master[k], dw, n);
		down_f32(o, mm[k], dm, n);
		down_f32(o, vv[k], dv, n);
		down_f32(o, sw[k], sgw, n);
		down_f32(o, sb[k], buf, n);
		if (k == 0)
			down_act(o, param[k], dp, n);
		o->free(dg), o->free(dw), o->free(dm), o->free(dv), o->free(sgw), o->free(buf);
		if (k == 0)
			o->free(dp), o->free(sp);
	}
	for (size_t i = 0; i < n; i++)
		param[1][i] = actr(master[1][i]);
	int ok = 1;
	char wn[128];
#define CMP(arr, tol)                                                                              \
	snprintf(wn, sizeof wn, "%s " #arr, name);                                                 \
	ok &= near(wn, arr[0], arr[1], n, tol)
	CMP(master, 1e-6);
	CMP(mm, 1e-6);
	CMP(vv, 1e-6);
	CMP(param, TOL_ACT / 2);
	CMP(sw, 1e-6);
	CMP(sb, 1e-6);
#undef CMP
	for (int s = 0; s < 3; s++)
		if (fabs(uss[0][s] - uss[1][s]) > 1e-9 * uss[1][s]) {
			printf("# %s: step %d's update sum of squares %.17g (cuda) vs %.17g (cpu)\n", name,
			       s + 1, uss[0][s], uss[1][s]);
			ok = 0;
		}
	for (int k = 0; k < 2; k++)
		free(master[k]), free(mm[k]), free(vv[k]), free(param[k]), free(sw[k]), free(sb[k]);
	free(g), free(w), free(m0), free(v0);
	return ok;
}

static int case_optim(size_t n)
{
	char name[64];
	snprintf(name, sizeof name, "optim n%zu", n);
	float *g = randn(n, 1, 70), *w = randn(n, 0.5f, 71), *m0 = randn(n, 0.1f, 72);
	float *v0 = randn(n, 0.1f, 73);
	for (size_t i = 0; i < n; i++)
		v0[i] = v0[i] * v0[i];
	double sq[2];
	int fin[2][5];
	float *master[2], *mm[2], *vv[2], *param[2], *sc[2];
	const struct ops *os[2] = {cu, cpu};
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		float *dg = up_f32(o, g, n), *dw = up_f32(o, w, n), *dm = up_f32(o, m0, n);
		float *dv = up_f32(o, v0, n);
		void *dp = k == 0 ? o->alloc(n * o->act_size) : (void *)dw;
		sq[k] = o->sumsq(dg, n);
		fin[k][0] = o->all_within(dg, n, INFINITY);
		float mx = 0;   /* the limit is inclusive: max |g| passes, just below it fails */
		for (size_t i = 0; i < n; i++)
			mx = fabsf(g[i]) > mx ? fabsf(g[i]) : mx;
		fin[k][3] = o->all_within(dg, n, mx);
		fin[k][4] = o->all_within(dg, n, mx * 0.99f);
		for (int s = 1; s <= 3; s++)
			o->adamw(dw, dp, dg, dm, dv, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, s);
		master[k] = zeros(n), mm[k] = zeros(n), vv[k] = zeros(n), param[k] = zeros(n);
		down_f32(o, master[k], dw, n);
		down_f32(o, mm[k], dm, n);
		down_f32(o, vv[k], dv, n);
		if (k == 0)
			down_act(o, param[k], dp, n);
		o->scale(dg, 0.125f, n);
		sc[k] = zeros(n);
		down_f32(o, sc[k], dg, n);
		float inf = INFINITY, nan = NAN;
		o->to_device(dg + n / 2, &inf, 4);
		fin[k][1] = o->all_within(dg, n, INFINITY);
		o->to_device(dg + n / 2, &nan, 4);
		o->to_device(dg, &inf, 4); /* several, far apart: an overflow is rarely alone */
		o->to_device(dg + n - 1, &nan, 4);
		fin[k][2] = o->all_within(dg, n, INFINITY);
		o->free(dg), o->free(dw), o->free(dm), o->free(dv);
		if (k == 0)
			o->free(dp);
	}
	for (size_t i = 0; i < n; i++)
		param[1][i] = actr(master[1][i]); /* the CPU's param is its master */
	int ok = 1;
	char wn[128];
#define CMP(arr, tol)                                                                              \
	snprintf(wn, sizeof wn, "%s " #arr, name);                                                 \
	ok &= near(wn, arr[0], arr[1], n, tol)
	CMP(master, 1e-6);
	CMP(mm, 1e-6);
	CMP(vv, 1e-6);
	CMP(param, TOL_ACT / 2);
	CMP(sc, 0);
#undef CMP
	dump("sumsq", &sq[0], sizeof sq[0]);
	if (fabs(sq[0] - sq[1]) > 1e-12 * sq[1]) {
		printf("# %s: sumsq %.17g (cuda) vs %.17g (cpu)\n", name, sq[0], sq[1]);
		ok = 0;
	}
	for (int k = 0; k < 2; k++)
		if (fin[k][0] != 1 || fin[k][1] != 0 || fin[k][2] != 0 || fin[k][3] != 1 ||
		    fin[k][4] != 0) {
			printf("# %s: all_within %d %d %d %d %d (%s); want 1 0 0 1 0\n", name, fin[k][0],
			       fin[k][1], fin[k][2], fin[k][3], fin[k][4], k ? "cpu" : "cuda");
			ok = 0;
		}
	for (int k = 0; k < 2; k++)
		free(master[k]), free(mm[k]), free(vv[k]), free(param[k]), free(sc[k]);
	free(g), free(w), free(m0), free(v0);
	return ok;
}

/* --use-bnb-optimizer: three steps of 8-bit Adam on n elements (blocks of 2048, the last one
 * short) and of 32-bit Adam, from quantized random moments.  The CUDA kernels round every
 * operation as the CPU does, so codes, absmax, master weights and moments must be identical to
 * the bit; the 16-bit weights are the master rounded once. */
static int case_bnb(size_t n, float wd)
{
	char name[64];
	snprintf(name, sizeof name, "bnb n%zu wd%g", n, wd);
	size_t nb = (n + BNB_BLOCK - 1) / BNB_BLOCK;
	float *g = randn(n, 1, 80), *w = randn(n, 0.5f, 81), *m0 = randn(n, 0.1f, 82);
	float *v0 = randn(n, 0.1f, 83), map[512];
	for (size_t i = 0; i < n; i++)
		v0[i] = v0[i] * v0[i];
	for (size_t i = n / 3; i < n / 3 + 100 && i < n; i++)   /* tiny values beside large ones */
		m0[i] *= 1e-6f, v0[i] *= 1e-9f, g[i] *= 1e-4f;
	bnb_dynamic_map(1, map);
	bnb_dynamic_map(0, map + 256);
	uint8_t *q1 = malloc(n), *q2 = malloc(n), *oq1[2], *oq2[2];
	float *a1 = malloc(nb * sizeof *a1), *a2 = malloc(nb * sizeof *a2);
	bnb_quantize_blockwise(map, m0, n, q1, a1);
	bnb_quantize_blockwise(map + 256, v0, n, q2, a2);
	float *master[2], *oa1[2], *oa2[2], *param[2], *mm[2], *vv[2], *m32[2];
	const struct ops *os[2] = {cu, cpu};
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		float *dg = up_f32(o, g, n), *dw = up_f32(o, w, n), *da1 = up_f32(o, a1, nb);
		float *da2 = up_f32(o, a2, nb), *dmap = up_f32(o, map, 512);
		float *dw32 = up_f32(o, w, n), *dm = up_f32(o, m0, n), *dv = up_f32(o, v0, n);
		uint8_t *dq1 = o->alloc(n), *dq2 = o->alloc(n);
		o->to_device(dq1, q1, n);
		o->to_device(dq2, q2, n);
		void *dp = k == 0 ? o->alloc(n * o->act_size) : (void *)dw;
		for (int s = 1; s <= 3; s++) {
			o->adam8bit(dw, dp, dg, dq1, dq2, da1, da2, n, dmap, 1e-2f, 0.9f, 0.95f, 1e-8f, wd,
				    0.5f, s);
			o->adam32(dw32, k == 0 ? NULL : (void *)dw32, dg, dm, dv, n, 1e-2f, 0.9f, 0.95f,
				  1e-8f, wd, 0.5f, s);
		}
		master[k] = zeros(n), param[k] = zeros(n), oa1[k] = zeros(nb), oa2[k] = zeros(nb);
		mm[k] = zeros(n), vv[k] = zeros(n), m32[k] = zeros(n);
		oq1[k] = malloc(n), oq2[k] = malloc(n);
		down_f32(o, master[k], dw, n);
		down_f32(o, oa1[k], da1, nb);
		down_f32(o, oa2[k], da2, nb);
		down_f32(o, m32[k], dw32, n);
		down_f32(o, mm[k], dm, n);
		down_f32(o, vv[k], dv, n);
		o->to_host(oq1[k], dq1, n);
		o->to_host(oq2[k], dq2, n);
		if (k == 0)
			down_act(o, param[k], dp, n);
		o->free(dg), o->free(dw), o->free(da1), o->free(da2), o->free(dmap), o->free(dw32);
		o->free(dm), o->free(dv), o->free(dq1), o->free(dq2);
		if (k == 0)
			o->free(dp);
	}
	for (size_t i = 0; i < n; i++)
		param[1][i] = actr(master[1][i]);
	int ok = 1;
	char wn[128];
#define SAME(arr, len, bytes)                                                                      \
	snprintf(wn, sizeof wn, "%s " #arr, name);                                                 \
	dump(wn, arr[0], (len) * (bytes));                                                         \
	if (memcmp(arr[0], arr[1], (len) * (bytes))) {                                            \
		size_t at;                                                                         \
		for (at = 0; !memcmp((char *)arr[0] + at * (bytes), (char *)arr[1] + at * (bytes), \
				     bytes); at++)                                                 \
			;                                                                          \
		printf("# %s: first difference at element %zu\n", wn, at);                       \
		ok = 0;                                                                            \
	}
	SAME(master, n, 4);
	SAME(oq1, n, 1);
	SAME(oq2, n, 1);
	SAME(oa1, nb, 4);
	SAME(oa2, nb, 4);
	SAME(param, n, 4);
	SAME(m32, n, 4);
	SAME(mm, n, 4);
	SAME(vv, n, 4);
#undef SAME
	for (int k = 0; k < 2; k++)
		free(master[k]), free(param[k]), free(oa1[k]), free(oa2[k]), free(mm[k]), free(vv[k]),
			free(m32[k]), free(oq1[k]), free(oq2[k]);
	free(g), free(w), free(m0), free(v0), free(q1), free(q2), free(a1), free(a2);
	return ok;
}

/* More work than the grid: the grid-stride loops (grids are capped at 32 blocks per SM) and the
 * two-pass reductions' capped partial counts. */
static int case_big(void)
{
	size_t n = 4300001; /* > 1024 blocks x 256 threads x 16 for sumsq; > 132 x 32 x 256 */
	float *g = randn(n, 1, 80);
	int ok = 1;
	double sq[2];
	int fin[2];
	float *gelu[2];
	size_t ng = 1200001; /* odd: scalar path, more units than threads */
	const struct ops *os[2] = {cu, cpu};
	for (int k = 0; k < 2; k++) {
		const struct ops *o = os[k];
		float *d = up_f32(o, g, n);
		float inf = INFINITY;
		sq[k] = o->sumsq(d, n);
		o->to_device(d + n - 1, &inf, 4);
		fin[k] = o->all_within(d, n, INFINITY);
		void *x = up_act(o, g, ng), *y = o->alloc(ng * o->act_size);
		o->gelu_fwd(y, x, ng);
		gelu[k] = zeros(ng);
		down_act(o, gelu[k], y, ng);
		o->free(d), o->free(x), o->free(y);
	}
	dump("big sumsq", &sq[0], sizeof sq[0]);
	if (fabs(sq[0] - sq[1]) > 1e-12 * sq[1] || fin[0] || fin[1]) {
		printf("# big: sumsq %.17g vs %.17g, all_within %d %d\n", sq[0], sq[1], fin[0], fin[1]);
		ok = 0;
	}
	ok &= near("big gelu_fwd", gelu[0], gelu[1], ng, TOL_ACT);
	free(gelu[0]), free(gelu[1]), free(g);
	return ok;
}

int main(int argc, char **argv)
{
	char err[512];
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--dump") == 0) {
			dumpf = fopen(argv[++i], "wb");
			if (!dumpf) {
				perror(argv[i]);
				return 2;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--only") == 0) {
			only = argv[++i];
		} else if (strcmp(argv[i], "--fp16") == 0) {
			fp16 = 1;
		} else {
			fprintf(stderr,
				"usage: train_cudaops [--dump FILE] [--only TEXT] [--fp16]\n");
			return 2;
		}
	}
	tol_act = fp16 ? 1e-3 : 8e-3;
	cu = ops_open("cuda", 0, fp16 ? OPS_FP16 : OPS_BF16, err, sizeof err);
	if (!cu) {
		printf("skip cuda_ops_match_cpu: %s\n", err);
		return 0;
	}
	cpu = ops_cpu(1);
	printf("# %s, %s activations\n", cu->device, cu->act_type);
	if (strcmp(cu->act_type, fp16 ? "fp16" : "bf16")) {
		printf("FAIL cuda_computes_in_the_type_asked: %s\n", cu->act_type);
		return 1;
	}

	CASE(fp16 ? "cuda_converts_f32_to_fp16_to_nearest_even_inf_beyond_65504"
		  : "cuda_converts_f32_to_bf16_to_nearest_even") T_ASSERT(case_convert());
	CASE("cuda_memory_is_zeroed_copied_and_cleared") T_ASSERT(case_memory());
	CASE("cuda_embedding_matches_cpu_repeats_and_foreign_tokens") {
		T_ASSERT(case_embed(2, 17, 24, 1, 0));
		T_ASSERT(case_embed(3, 5, 20, 1, 0));  /* C % 8 != 0: scalar paths */
		T_ASSERT(case_embed(2, 9, 16, 0, 1));  /* no positions, misaligned */
		T_ASSERT(case_embed(1, 3, 1040, 1, 0)); /* two channel tiles of the backward */
		T_ASSERT(case_embed(2, 3, 130, 1, 1));
	}
	CASE("cuda_layernorm_matches_cpu") {
		T_ASSERT(case_layernorm(37, 64, 1));
		T_ASSERT(case_layernorm(9, 20, 1));
		T_ASSERT(case_layernorm(300, 264, 1)); /* more rows than a column-sum slice */
		T_ASSERT(case_layernorm(1, 13, 1));
		/* the column sums in the backward's own pass up to 1024 channels (128 unvectorised),
		 * over slices of 32 rows, or more rows when there would be over 512 slices; wider,
		 * the separate column-sum kernels */
		T_ASSERT(case_layernorm(9, 1032, 1));
		T_ASSERT(case_layernorm(7, 130, 1));
		T_ASSERT(case_layernorm(70001, 8, 1));
	}
	CASE("cuda_residual_layernorm_fused_is_separate") {
		T_ASSERT(case_residual_layernorm(37, 64, 0.0f));
		T_ASSERT(case_residual_layernorm(21, 96, 0.1f));   /* vectorised, dropout */
		T_ASSERT(case_residual_layernorm(9, 50, 0.3f));    /* C not a multiple of 8 */
		T_ASSERT(case_residual_layernorm(5, 1040, 0.1f));  /* wider than the fused sums */
	}
	CASE("cuda_matmul_gelu_matches_cpu") {
		T_ASSERT(case_matmul_gelu(37, 64, 96, 0));   /* both fused */
		T_ASSERT(case_matmul_gelu(20, 40, 160, 1));  /* fused, 2-byte aligned pointers */
		T_ASSERT(case_matmul_gelu(9, 20, 51, 0));    /* OC 51, IC 20: the fallbacks */
	}
	CASE("cuda_matmul_matches_cpu") {
		T_ASSERT(case_matmul(37, 64, 96, 1, 0));
		T_ASSERT(case_matmul(5, 20, 51, 1, 0));
		T_ASSERT(case_matmul(48, 40, 24, 0, 1));
		T_ASSERT(case_matmul(300, 8, 3, 1, 0));
		T_ASSERT(case_matmul(70001, 4, 8, 1, 0)); /* bias gradient over > 256 x 256 rows */
	}
	CASE("cuda_attention_matches_cpu_across_tiles_and_head_dims") {
		T_ASSERT(case_attention(2, 65, 3, 32, 0, 0, 0, 0, 3));
		T_ASSERT(case_attention(1, 100, 2, 64, 0, 0, 0, 0, 2));
		T_ASSERT(case_attention(1, 70, 1, 128, 0, 0, 0, 0, 1));
		T_ASSERT(case_attention(2, 130, 2, 64, 1, 1, 0.1f, 0, 2)); /* three tiles */
		T_ASSERT(case_attention(1, 128, 3, 128, 0, 0, 0, 0, 3));
		T_ASSERT(case_attention(3, 1, 2, 32, 1, 0, 0, 0, 2));
		/* the forward's query tiles are 128 rows (two key tiles each, the last partial),
		 * the backward's 64: 3 and 5 of them, every K/V and Q/dO load overlapped */
		T_ASSERT(case_attention(1, 300, 2, 64, 1, 1, 0.1f, 0, 2));
		T_ASSERT(case_attention(2, 200, 1, 128, 0, 2, 0.0f, 0, 1));
	}
	CASE("cuda_attention_matches_cpu_head_dim_80_alibi_odd_heads") {
		T_ASSERT(case_attention(2, 24, 5, 80, 1, 0, 0, 0, 5));
		T_ASSERT(case_attention(1, 33, 3, 20, 1, 0, 0, 3, 6)); /* heads 3..5 of 6 */
	}
	CASE("cuda_attention_matches_cpu_head_dims_not_multiples_of_the_mma_k_step") {
		/* 16-byte loads, but HD % 16 = 8: the k step past HD reads the zero padding */
		T_ASSERT(case_attention(1, 50, 2, 40, 1, 0, 0.1f, 0, 2));
		T_ASSERT(case_attention(2, 70, 1, 24, 0, 1, 0.0f, 0, 1));
		T_ASSERT(case_attention(1, 20, 3, 8, 0, 0, 0.0f, 0, 3));
		T_ASSERT(case_attention(1, 66, 1, 104, 1, 0, 0.0f, 0, 1));
	}
	CASE("cuda_attention_matches_cpu_document_mask_and_dropout") {
		T_ASSERT(case_attention(2, 67, 3, 16, 1, 1, 0.0f, 0, 3));
		T_ASSERT(case_attention(2, 40, 5, 32, 1, 1, 0.2f, 2, 12));
		T_ASSERT(case_attention(1, 9, 1, 7, 0, 0, 0.5f, 0, 1)); /* odd head dim */
	}
	CASE("cuda_cross_attention_matches_cpu_other_query_and_key_lengths") {
		T_ASSERT(case_xattn(3, 70, 130, 2, 64, 0.0f, 0, 2, 0));   /* keys over three tiles */
		T_ASSERT(case_xattn(2, 130, 20, 3, 32, 0.2f, 1, 4, 0));   /* queries over three */
		T_ASSERT(case_xattn(2, 9, 67, 2, 40, 0.1f, 0, 2, 0));     /* HD not a multiple of 16 */
		T_ASSERT(case_xattn(1, 1, 1, 1, 16, 0.0f, 0, 1, 0));
	}
	CASE("cuda_attention_matches_cpu_bidirectional_with_key_lengths") {
		/* BERT's padding mask: sample 0 whole, the others' keys cut anywhere (1 key, a tile
		 * boundary, mid-tile), every query - padded ones too - seeing [0, klen) */
		T_ASSERT(case_attention(4, 130, 2, 64, 0, 2, 0.0f, 0, 2));
		T_ASSERT(case_attention(3, 70, 3, 32, 0, 2, 0.2f, 1, 4));
		T_ASSERT(case_attention(2, 24, 4, 40, 0, 2, 0.1f, 0, 4));
		T_ASSERT(case_attention(2, 1, 1, 16, 0, 2, 0.0f, 0, 1));
	}
	CASE("cuda_attention_backward_after_an_abandoned_one_matches_cpu") {
		/* 3 key tiles, causal: an abandoned run leaves query tiles 1, 2 mid-chain */
		attention_throwaway(1, 150, 2, 32);
		T_ASSERT(case_attention(1, 150, 2, 32, 0, 0, 0.0f, 0, 2));
	}
	CASE("cuda_attention_rows_that_see_no_key_give_0_as_on_the_cpu") {
		/* a sample of key length 0: every query sees nothing; output 0 (not 0 x 1/0),
		 * lse +inf, dq 0, and the other samples as before */
		T_ASSERT(case_attention(3, 70, 2, 32, 0, 3, 0.0f, 0, 2));
		T_ASSERT(case_attention(2, 24, 3, 64, 0, 3, 0.1f, 0, 3));
		T_ASSERT(case_xattn(3, 20, 67, 2, 32, 0.0f, 0, 2, 1));
	}
	CASE("cuda_bert_head_ops_match_cpu") {
		T_ASSERT(case_bert_heads(1000, 0));
		T_ASSERT(case_bert_heads(1001, 1));
	}
	CASE("cuda_pointwise_ops_match_cpu_with_dropout") {
		T_ASSERT(case_pointwise(1000, 0.0f, 0));
		T_ASSERT(case_pointwise(1000, 0.1f, 0));
		T_ASSERT(case_pointwise(1001, 0.3f, 1));
	}
	CASE("cuda_cross_entropy_matches_cpu_padded_vocab") {
		T_ASSERT(case_xent(9, 100, 136)); /* padded, but not to a multiple of 128 */
		T_ASSERT(case_xent(5, 50, 67));   /* Vp % 8 != 0: scalar path */
		T_ASSERT(case_xent(3, 2000, 2048));
		T_ASSERT(case_xent(4, 4999, 5000)); /* wider than a block's stride */
	}
	CASE("cuda_optimizer_ops_match_cpu") {
		T_ASSERT(case_optim(1000));
		T_ASSERT(case_optim(70001));
	}
	CASE("cuda_lamb_and_sgd_match_cpu") {
		T_ASSERT(case_lamb_sgd(1000, 0.1f));
		T_ASSERT(case_lamb_sgd(70001, 0.0f));
	}
	CASE("cuda_adamw_multi_tensor_launch_equals_per_tensor_bit_for_bit")
		T_ASSERT(case_adamw_multi());
	CASE("cuda_step_scalars_decide_on_the_device_as_optim_c_on_the_host")
		T_ASSERT(case_step_scalars());
	CASE("cuda_bnb_8bit_and_32bit_adam_match_cpu_bit_for_bit") {
		T_ASSERT(case_bnb(5000, 0.1f));   /* two blocks and a short one */
		T_ASSERT(case_bnb(2048, 0.0f));   /* one whole block, no decay */
		T_ASSERT(case_bnb(300, 0.1f));    /* one short block */
	}
	CASE("cuda_grid_stride_loops_and_capped_reductions_match_cpu") T_ASSERT(case_big());
	CASE("cuda_degenerate_sizes_match_cpu") {
		T_ASSERT(case_embed(1, 1, 1, 1, 0));
		T_ASSERT(case_layernorm(3, 1, 1)); /* one channel: variance 0 */
		T_ASSERT(case_matmul(1, 1, 1, 1, 0));
		T_ASSERT(case_matmul(2, 1, 9, 1, 1));
		for (size_t n = 1; n <= 17; n += 8)
			T_ASSERT(case_pointwise(n, 0.5f, 0));
		T_ASSERT(case_pointwise(8, 0.0f, 0));
		T_ASSERT(case_pointwise(9, 0.9f, 0));
		T_ASSERT(case_xent(1, 1, 1));
		T_ASSERT(case_xent(2, 3, 8));
		T_ASSERT(case_optim(1));
		T_ASSERT(case_attention(1, 2, 1, 1, 1, 0, 0.0f, 0, 1));
	}
	if (dumpf)
		fclose(dumpf);
	T_DONE();
}
