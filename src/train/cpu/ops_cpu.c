/* ops_cpu - the fp32 CPU backend: OpenBLAS for every GEMM, OpenMP for everything else.
 *
 * Threads are ours, not OpenBLAS's: OpenBLAS is told to use one thread and each OpenMP thread
 * calls it on its own block of rows (forward, input gradient) or output features (weight
 * gradient).  Two thread pools spinning against each other on a few cores cost more than they
 * give, and owning the split keeps every sum in a fixed order.
 *
 * Determinism is a feature here, because resuming must be bit-exact: no reduction depends on
 * the thread count.  Sums over rows (layer-norm and bias gradients, gradient norms) are taken
 * over fixed chunks of rows and the chunk partials added in chunk order; the embedding gradient
 * is split by channel, each thread walking the tokens in order.  GEMMs split along dimensions
 * that do not change any element's own summation order.
 *
 * Attention is flash-style even here: the forward keeps each row's log-sum-exp, the backward
 * recomputes the probabilities block by block, so memory is (B,NH,T) per layer instead of
 * (B,NH,T,T).  The score blocks themselves are GEMMs (rows x keys x HD), keys only up to the
 * block's last row, so the causal half above the diagonal is never computed. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xalloc.h"
#include "train/optim/bnb.h"
#include "train/cpu/ops_cpu.h"
#include "train/model/philox.h"

void openblas_set_num_threads(int n);
char *openblas_get_config(void);

#define ROW_CHUNKS 64     /* fixed partition of row sums: results independent of thread count */
#define ATT_BLOCK 64      /* query rows per attention block */

/* ---- memory ---- */

static void *cpu_alloc(size_t bytes)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
		return NULL;
	memset(p, 0, bytes);
	return p;
}

static void cpu_free(void *p) { free(p); }
static void cpu_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static void cpu_sync(void) {}
static void cpu_f32(float *dst, const float *src, size_t n) { memmove(dst, src, n * sizeof *dst); }
static void cpu_to_act(void *dst, const float *src, size_t n) { cpu_f32(dst, src, n); }
static void cpu_from_act(float *dst, const void *src, size_t n) { cpu_f32(dst, src, n); }

/* [lo, hi) of `n` items for part `i` of `parts` */
static inline void part(size_t n, int parts, int i, size_t *lo, size_t *hi)
{
	*lo = n * i / parts;
	*hi = n * (i + 1) / parts;
}

/* exp(x) that vectorises: Cephes' range reduction and polynomial (about 1 ulp), the power of two
 * built in the exponent bits.  libm's expf and tanhf are scalar calls, and GeLU and the softmaxes
 * spent more time in them than in their own loops.  Results do not depend on the vector width:
 * the same operations run lane by lane. */
static inline float exp_fast(float x)
{
	x = x < -87.0f ? -87.0f : x;   /* two selects: if-converted, so the loops vectorise */
	x = x > 88.0f ? 88.0f : x;
	float k = x * 1.44269504088896341f + 12582912.0f;   /* round to nearest: 1.5 * 2^23 */
	k -= 12582912.0f;
	float r = x - k * 0.693359375f;
	r = r + k * 2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	union {
		int32_t i;
		float f;
	} scale = {.i = ((int32_t)k + 127) << 23};
	return p * scale.f;
}

/* tanh from exp_fast: absolute error about 1e-7, which is what GeLU's 1 + tanh needs */
static inline float tanh_fast(float u)
{
	float a = u < 0 ? -u : u, t = exp_fast(-2.0f * a), y = (1.0f - t) / (1.0f + t);
	return u < 0 ? -y : y;
}

#define SIMD_CLONES __attribute__((target_clones("avx2", "default")))

/* ---- embedding ---- */

/* out(B,T,C) = wte[tok] (+ wpe[t]) */
static void cpu_embed_fwd(void *out_, const int32_t *tok, const void *wte_, const void *wpe_,
			  int B, int T, int C)
{
	float *out = out_;
	const float *wte = wte_, *wpe = wpe_;
#pragma omp parallel for schedule(static)
	for (int r = 0; r < B * T; r++) {
		float *o = out + (size_t)r * C;
		if (tok[r] < 0) {
			memset(o, 0, C * sizeof *o);
			continue;
		}
		const float *e = wte + (size_t)tok[r] * C;
		if (wpe) {
			const float *p = wpe + (size_t)(r % T) * C;
			for (int c = 0; c < C; c++)
				o[c] = e[c] + p[c];
		} else {
			memcpy(o, e, C * sizeof *o);
		}
	}
}

/* Split by channel: each thread owns columns [c0,c1) of every row and walks tokens in order. */
static void cpu_embed_bwd(float *dwte, float *dwpe, const void *dout_, const int32_t *tok,
			  int B, int T, int C)
{
	const float *dout = dout_;
#pragma omp parallel
	{
		size_t c0, c1;
		part(C, omp_get_num_threads(), omp_get_thread_num(), &c0, &c1);
		for (int r = 0; r < B * T; r++) {
			const float *d = dout + (size_t)r * C;
			if (tok[r] >= 0) {
				float *w = dwte + (size_t)tok[r] * C;
				for (size_t c = c0; c < c1; c++)
					w[c] += d[c];
			}
			if (dwpe) {
				float *p = dwpe + (size_t)(r % T) * C;
				for (size_t c = c0; c < c1; c++)
					p[c] += d[c];
			}
		}
	}
}

/* ---- layer norm ---- */

static void cpu_layernorm_fwd(void *out_, float *mean, float *rstd, const void *inp_,
			      const void *w_, const void *b_, int N, int C, float eps)
{
	float *out = out_;
	const float *inp = inp_, *w = w_, *b = b_;
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *x = inp + (size_t)r * C;
		float *o = out + (size_t)r * C;
		double s = 0, v = 0;
		for (int c = 0; c < C; c++)
			s += x[c];
		float m = (float)(s / C);
		for (int c = 0; c < C; c++) {
			float d = x[c] - m;
			v += (double)d * d;
		}
		float rs = 1.0f / sqrtf((float)(v / C) + eps);
		for (int c = 0; c < C; c++)
			o[c] = (x[c] - m) * rs * w[c] + b[c];
		mean[r] = m;
		rstd[r] = rs;
	}
}

/* dinp += ..., dw/db += sums over rows (fixed chunks, added in chunk order) */
static void cpu_layernorm_bwd(void *dinp_, float *dw, float *db, const void *dout_,
			      const void *inp_, const void *w_, const float *mean,
			      const float *rstd, int N, int C)
{
	float *dinp = dinp_;
	const float *dout = dout_, *inp = inp_, *w = w_;
	int chunks = N < ROW_CHUNKS ? N : ROW_CHUNKS;
	/* the per-chunk partial sums: one buffer kept across calls (the ops run on one thread) */
	static float *part_;
	static size_t part_cap;
	size_t need = (size_t)chunks * 2 * C;
	if (need > part_cap) {
		free(part_);
		part_ = xmalloc(need * sizeof *part_, "the CPU backend's per-chunk partial sums");
		part_cap = need;
	}
	memset(part_, 0, need * sizeof *part_);
#pragma omp parallel for schedule(static)
	for (int k = 0; k < chunks; k++) {
		size_t r0, r1;
		part(N, chunks, k, &r0, &r1);
		float *pw = part_ + (size_t)k * 2 * C, *pb = pw + C;
		for (size_t r = r0; r < r1; r++) {
			const float *x = inp + r * C, *dy = dout + r * C;
			float *dx = dinp + r * C;
			float m = mean[r], rs = rstd[r];
			float dnorm_mean = 0, dnorm_norm_mean = 0;
			for (int c = 0; c < C; c++) {
				float xh = (x[c] - m) * rs, dn = w[c] * dy[c];
				dnorm_mean += dn;
				dnorm_norm_mean += dn * xh;
			}
			dnorm_mean /= C;
			dnorm_norm_mean /= C;
			for (int c = 0; c < C; c++) {
				float xh = (x[c] - m) * rs, dn = w[c] * dy[c];
				pb[c] += dy[c];
				pw[c] += xh * dy[c];
				dx[c] += (dn - dnorm_mean - xh * dnorm_norm_mean) * rs;
			}
		}
	}
	for (int k = 0; k < chunks; k++) {
		const float *pw = part_ + (size_t)k * 2 * C, *pb = pw + C;
		for (int c = 0; c < C; c++) {
			dw[c] += pw[c];
			db[c] += pb[c];
		}
	}
}

/* ---- matmul ---- */

/* GEMMs are cut into blocks of a fixed size, whatever the thread count, and threads take whole
 * blocks: OpenBLAS picks its kernels (and so its summation order) by the shape it is given, so
 * the same shapes must reach it for results to be independent of the thread count. */
#define GEMM_BLOCK 256

/* out(N,OC) = inp(N,IC) w(OC,IC)^T + bias: blocks of rows */
static void cpu_matmul_fwd(void *out_, const void *inp_, const void *w_, const void *bias_,
			   int N, int IC, int OC)
{
	float *out = out_;
	const float *inp = inp_, *w = w_, *bias = bias_;
	int nb = (N + GEMM_BLOCK - 1) / GEMM_BLOCK;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < nb; k++) {
		size_t r0 = (size_t)k * GEMM_BLOCK, r1 = r0 + GEMM_BLOCK < (size_t)N ? r0 + GEMM_BLOCK : (size_t)N;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, OC, IC, 1.0f,
			    inp + r0 * IC, IC, w, IC, 0.0f, out + r0 * OC, OC);
		if (bias)
			for (size_t r = r0; r < r1; r++) {
				float *o = out + r * OC;
				for (int c = 0; c < OC; c++)
					o[c] += bias[c];
			}
	}
}

/* dinp = dout w (blocks of rows), dw += dout^T inp and dbias += colsum(dout) (blocks of output
 * features, each summing over all rows) */
static void cpu_matmul_bwd(void *dinp_, float *dw, float *dbias, const void *dout_,
			   const void *inp_, const void *w_, int N, int IC, int OC)
{
	float *dinp = dinp_;
	const float *dout = dout_, *inp = inp_, *w = w_;
	int nr = (N + GEMM_BLOCK - 1) / GEMM_BLOCK, no = (OC + GEMM_BLOCK - 1) / GEMM_BLOCK;
#pragma omp parallel
	{
		if (dinp) {
#pragma omp for schedule(static)
			for (int k = 0; k < nr; k++) {
				size_t r0 = (size_t)k * GEMM_BLOCK;
				size_t r1 = r0 + GEMM_BLOCK < (size_t)N ? r0 + GEMM_BLOCK : (size_t)N;
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, IC, OC,
					    1.0f, dout + r0 * OC, OC, w, IC, 0.0f, dinp + r0 * IC, IC);
			}
		}
#pragma omp for schedule(static)
		for (int k = 0; k < no; k++) {
			size_t o0 = (size_t)k * GEMM_BLOCK;
			size_t o1 = o0 + GEMM_BLOCK < (size_t)OC ? o0 + GEMM_BLOCK : (size_t)OC;
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, IC, N, 1.0f,
				    dout + o0, OC, inp, IC, 1.0f, dw + o0 * IC, IC);
			if (dbias) {
				float acc[GEMM_BLOCK] = {0};
				for (size_t r = 0; r < (size_t)N; r++) {
					const float *d = dout + r * OC + o0;
					for (size_t j = 0; j < o1 - o0; j++)
						acc[j] += d[j];
				}
				for (size_t j = 0; j < o1 - o0; j++)
					dbias[o0 + j] += acc[j];
			}
		}
	}
}

/* ---- attention ---- */

/* One (b, h) of an attention call: its query, key and value rows (row strides ldq, ldk; v has
 * k's), its output rows (stride C) and gradients (dq stride ldq, dk and dv stride ldk).  The
 * self-attention's are columns of one qkv tensor; the cross-attention's, q and kv tensors of
 * their own lengths. */
struct att_head {
	const float *Q, *K, *V;
	float *dQ, *dK, *dV;
	int ldq, ldk, Tq, Tk;
};

/* Scores of query rows [i0,i1) against keys [0,nk) of one (b,h) into S (rows x nk, ld Tk),
 * turned into probabilities with the saved (or here computed) log-sum-exp.  Causal (kl < 0):
 * nk = i1 and row i sees keys [ks[i], i] (ks NULL: [0, i]); bidirectional: nk = kl and every
 * row sees keys [0, kl).  Masked entries are 0. */
SIMD_CLONES static void att_probs(float *S, float *lse, int compute_lse, const struct att_head *x,
				  int HD, int i0, int i1, float slope, int alibi, const int32_t *ks,
				  int kl)
{
	float scale = 1.0f / sqrtf((float)HD);
	int nk = kl >= 0 ? kl : i1, T = x->Tk;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, i1 - i0, nk, HD, scale,
		    x->Q + (size_t)i0 * x->ldq, x->ldq, x->K, x->ldk, 0.0f, S, T);
	for (int i = i0; i < i1; i++) {
		float *s = S + (size_t)(i - i0) * T;
		int j0 = ks ? ks[i] : 0, je = kl >= 0 ? kl - 1 : i;
		if (alibi)
			for (int j = j0; j <= je; j++)
				s[j] += slope * j;
		if (compute_lse) {
			float mx = -INFINITY;
			for (int j = j0; j <= je; j++)
				mx = s[j] > mx ? s[j] : mx;
			double sum = 0;
			for (int j = j0; j <= je; j++)
				sum += exp_fast(s[j] - mx);
			/* a row that sees no key (key length 0): +inf, so that exp(s - lse) is 0
			 * for every key, as the CUDA kernels (FlashAttention-2's convention) */
			lse[i] = je < j0 ? INFINITY : mx + (float)log(sum);
		}
		float l = lse[i];
		for (int j = 0; j < j0; j++)
			s[j] = 0.0f;
#pragma omp simd
		for (int j = j0; j <= je; j++)
			s[j] = exp_fast(s[j] - l);
		for (int j = je + 1; j < nk; j++)
			s[j] = 0.0f;
	}
}

/* The forward of one (b, h): O (Tq rows, stride C), L (Tq) */
static void att_head_fwd(float *S, const struct att_head *x, float *O, int C, float *L, int HD,
			 float slope, int alibi, const int32_t *ks, int kl, float p, uint64_t seed,
			 uint64_t base)
{
	int Tq = x->Tq, T = x->Tk;
	for (int i0 = 0; i0 < Tq; i0 += ATT_BLOCK) {
		int i1 = i0 + ATT_BLOCK < Tq ? i0 + ATT_BLOCK : Tq;
		int nk = kl >= 0 ? kl : i1;
		att_probs(S, L, 1, x, HD, i0, i1, slope, alibi, ks, kl);
		if (p > 0)
			for (int i = i0; i < i1; i++)
				for (int j = 0, je = kl >= 0 ? kl - 1 : i; j <= je; j++)
					S[(size_t)(i - i0) * T + j] *= philox_keep(
						seed, base + (uint64_t)i * T + j, p);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, i1 - i0, HD, nk, 1.0f, S, T,
			    x->V, x->ldk, 0.0f, O + (size_t)i0 * C, C);
	}
}

/* The backward of one (b, h): dQ, dK, dV from dO and O (stride C), L; P, dP (ATT_BLOCK x Tk)
 * and D (Tq) scratch */
static void att_head_bwd(float *P, float *dP, float *D, const struct att_head *x, const float *O,
			 const float *dO, int C, const float *L, int HD, float slope, int alibi,
			 const int32_t *ks, int kl, float p, uint64_t seed, uint64_t base)
{
	int Tq = x->Tq, T = x->Tk, ldq = x->ldq, ldk = x->ldk;
	float scale = 1.0f / sqrtf((float)HD);
	for (int i = 0; i < Tq; i++) {
		float d = 0;
		for (int c = 0; c < HD; c++)
			d += dO[(size_t)i * C + c] * O[(size_t)i * C + c];
		D[i] = d;
		memset(x->dQ + (size_t)i * ldq, 0, HD * sizeof *x->dQ);
	}
	for (int j = 0; j < T; j++) {
		memset(x->dK + (size_t)j * ldk, 0, HD * sizeof *x->dK);
		memset(x->dV + (size_t)j * ldk, 0, HD * sizeof *x->dV);
	}
	for (int i0 = 0; i0 < Tq; i0 += ATT_BLOCK) {
		int i1 = i0 + ATT_BLOCK < Tq ? i0 + ATT_BLOCK : Tq, n = i1 - i0;
		int nk = kl >= 0 ? kl : i1;
		att_probs(P, (float *)L, 0, x, HD, i0, i1, slope, alibi, ks, kl);
		/* dPd = dO V^T over keys [0,nk) */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, nk, HD, 1.0f,
			    dO + (size_t)i0 * C, C, x->V, ldk, 0.0f, dP, T);
		for (int i = i0; i < i1; i++) {
			float *pr = P + (size_t)(i - i0) * T, *dr = dP + (size_t)(i - i0) * T;
			int je = kl >= 0 ? kl - 1 : i;
			for (int j = 0; j <= je; j++) {
				float keep = p > 0 ? philox_keep(seed, base + (uint64_t)i * T + j, p) : 1.0f;
				float pd = pr[j] * keep;   /* the dropped probability V saw */
				float dpj = dr[j] * keep;  /* gradient wrt the probability */
				dr[j] = pr[j] * (dpj - D[i]) * scale;
				pr[j] = pd;
			}
			for (int j = je + 1; j < nk; j++)
				dr[j] = 0.0f;
		}
		/* dV += Pd^T dO, dQ = dS K, dK += dS^T Q */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HD, n, 1.0f, P, T,
			    dO + (size_t)i0 * C, C, 1.0f, x->dV, ldk);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, HD, nk, 1.0f, dP, T, x->K,
			    ldk, 0.0f, x->dQ + (size_t)i0 * ldq, ldq);
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, HD, n, 1.0f, dP, T,
			    x->Q + (size_t)i0 * ldq, ldq, 1.0f, x->dK, ldk);
	}
}

/* The first key each query of sample b sees (causal), and the keys every query sees
 * (bidirectional; -1 causal) */
static const int32_t *att_kstart(const struct ops_attn *k, int b, int T)
{
	return !k->bidir && k->kstart ? k->kstart + (size_t)b * T : NULL;
}

static int att_klen(const struct ops_attn *k, int b, int Tk)
{
	return k->bidir ? (k->klen ? k->klen[b] : Tk) : -1;
}

static uint64_t att_base(const struct ops_attn *k, int b, int h, int Tq, int Tk)
{
	return ((k->sample0 + b) * k->heads + k->head0 + h) * (uint64_t)Tq * (uint64_t)Tk;
}

static void cpu_attention_fwd(void *out_, float *lse, const void *qkv_, int B, int T, int NH,
			      int HD, struct ops_attn k)
{
	float *out = out_;
	const float *qkv = qkv_;
	int C = NH * HD, ld = 3 * C;
#pragma omp parallel
	{
		float *S = xmalloc((size_t)ATT_BLOCK * T * sizeof *S,
				   "the CPU attention's score block (one per thread)");
#pragma omp for schedule(dynamic, 1) collapse(2)
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++) {
				const float *Q = qkv + (size_t)b * T * ld + (size_t)h * 3 * HD;
				struct att_head x = {Q, Q + HD, Q + 2 * HD, NULL, NULL, NULL, ld, ld, T, T};
				att_head_fwd(S, &x, out + (size_t)b * T * C + (size_t)h * HD, C,
					     lse + ((size_t)b * NH + h) * T, HD,
					     k.slopes ? k.slopes[h] : 0, k.slopes != NULL,
					     att_kstart(&k, b, T), att_klen(&k, b, T), k.p, k.seed,
					     att_base(&k, b, h, T, T));
			}
		free(S);
	}
}

static void cpu_attention_bwd(void *dqkv_, const void *dout_, const void *qkv_,
			      const void *out_, const float *lse, int B, int T, int NH, int HD,
			      struct ops_attn k)
{
	float *dqkv = dqkv_;
	const float *dout = dout_, *qkv = qkv_, *out = out_;
	int C = NH * HD, ld = 3 * C;
#pragma omp parallel
	{
		float *P = xmalloc((size_t)ATT_BLOCK * T * sizeof *P,
				   "the CPU attention backward's probability block (one per thread)");
		float *dP = xmalloc((size_t)ATT_BLOCK * T * sizeof *dP,
				    "the CPU attention backward's gradient block (one per thread)");
		float *D = xmalloc((size_t)T * sizeof *D, "the CPU attention backward's row sums");
#pragma omp for schedule(dynamic, 1) collapse(2)
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++) {
				size_t tok0 = (size_t)b * T;
				const float *Q = qkv + tok0 * ld + (size_t)h * 3 * HD;
				float *dQ = dqkv + tok0 * ld + (size_t)h * 3 * HD;
				struct att_head x = {Q, Q + HD, Q + 2 * HD, dQ, dQ + HD, dQ + 2 * HD,
						     ld, ld, T, T};
				att_head_bwd(P, dP, D, &x, out + tok0 * C + (size_t)h * HD,
					     dout + tok0 * C + (size_t)h * HD, C,
					     lse + ((size_t)b * NH + h) * T, HD,
					     k.slopes ? k.slopes[h] : 0, k.slopes != NULL,
					     att_kstart(&k, b, T), att_klen(&k, b, T), k.p, k.seed,
					     att_base(&k, b, h, T, T));
			}
		free(P);
		free(dP);
		free(D);
	}
}

/* Cross-attention: q(B,Tq,NH,HD) against kv(B,Tk,NH,2,HD), bidirectional over klen */
static void cpu_xattn_fwd(void *out_, float *lse, const void *q_, const void *kv_, int B, int Tq,
			  int Tk, int NH, int HD, struct ops_attn k)
{
	float *out = out_;
	const float *q = q_, *kv = kv_;
	int C = NH * HD;
#pragma omp parallel
	{
		float *S = xmalloc((size_t)ATT_BLOCK * Tk * sizeof *S,
				   "the CPU attention's score block (one per thread)");
#pragma omp for schedule(dynamic, 1) collapse(2)
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++) {
				const float *K = kv + (size_t)b * Tk * 2 * C + (size_t)h * 2 * HD;
				struct att_head x = {q + (size_t)b * Tq * C + (size_t)h * HD, K, K + HD,
						     NULL, NULL, NULL, C, 2 * C, Tq, Tk};
				att_head_fwd(S, &x, out + (size_t)b * Tq * C + (size_t)h * HD, C,
					     lse + ((size_t)b * NH + h) * Tq, HD, 0, 0, NULL,
					     att_klen(&k, b, Tk), k.p, k.seed, att_base(&k, b, h, Tq, Tk));
			}
		free(S);
	}
}

static void cpu_xattn_bwd(void *dq_, void *dkv_, const void *dout_, const void *q_,
			  const void *kv_, const void *out_, const float *lse, int B, int Tq, int Tk,
			  int NH, int HD, struct ops_attn k)
{
	float *dq = dq_, *dkv = dkv_;
	const float *dout = dout_, *q = q_, *kv = kv_, *out = out_;
	int C = NH * HD;
#pragma omp parallel
	{
		float *P = xmalloc((size_t)ATT_BLOCK * Tk * sizeof *P,
				   "the CPU cross-attention backward's probability block (one per thread)");
		float *dP = xmalloc((size_t)ATT_BLOCK * Tk * sizeof *dP,
				    "the CPU cross-attention backward's gradient block (one per thread)");
		float *D = xmalloc((size_t)Tq * sizeof *D, "the CPU cross-attention backward's row sums");
#pragma omp for schedule(dynamic, 1) collapse(2)
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++) {
				size_t qo = (size_t)b * Tq * C + (size_t)h * HD;
				size_t ko = (size_t)b * Tk * 2 * C + (size_t)h * 2 * HD;
				struct att_head x = {q + qo, kv + ko, kv + ko + HD, dq + qo, dkv + ko,
						     dkv + ko + HD, C, 2 * C, Tq, Tk};
				att_head_bwd(P, dP, D, &x, out + qo, dout + qo, C,
					     lse + ((size_t)b * NH + h) * Tq, HD, 0, 0, NULL,
					     att_klen(&k, b, Tk), k.p, k.seed, att_base(&k, b, h, Tq, Tk));
			}
		free(P);
		free(dP);
		free(D);
	}
}

/* ---- elementwise ---- */



#define GELU_K 0.7978845608028654f   /* sqrt(2/pi) */

/* One thread's range of GeLU, built for AVX2 and for the baseline and picked at run time. */
SIMD_CLONES static void gelu_fwd_range(float *restrict out, const float *restrict x, size_t a,
				       size_t b)
{
#pragma omp simd
	for (size_t i = a; i < b; i++) {
		float v = x[i];
		out[i] = 0.5f * v * (1.0f + tanh_fast(GELU_K * (v + 0.044715f * v * v * v)));
	}
}

SIMD_CLONES static void gelu_bwd_range(float *dinp, const float *restrict x, const float *dout,
				       size_t a, size_t b)
{
#pragma omp simd
	for (size_t i = a; i < b; i++) {
		float v = x[i], u = GELU_K * (v + 0.044715f * v * v * v);
		float t = tanh_fast(u);
		float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
		dinp[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
	}
}

static void cpu_gelu_fwd(void *out, const void *inp, size_t n)
{
#pragma omp parallel
	{
		size_t a, b;
		part(n, omp_get_num_threads(), omp_get_thread_num(), &a, &b);
		gelu_fwd_range(out, inp, a, b);
	}
}

/* dinp may be dout (in place): element i reads dout[i] before writing dinp[i] */
static void cpu_gelu_bwd(void *dinp, const void *inp, const void *dout, size_t n)
{
#pragma omp parallel
	{
		size_t a, b;
		part(n, omp_get_num_threads(), omp_get_thread_num(), &a, &b);
		gelu_bwd_range(dinp, inp, dout, a, b);
	}
}

/* The exact GeLU, x Phi(x), torch.nn.functional.gelu's default (BERT's LM head): libm's erff,
 * scalar - it runs on one (N,C) tensor per step */
static void cpu_gelu_erf_fwd(void *out_, const void *inp_, size_t n)
{
	float *out = out_;
	const float *x = inp_;
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		out[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

/* d/dx x Phi(x) = Phi(x) + x phi(x); dinp may be dout */
static void cpu_gelu_erf_bwd(void *dinp_, const void *inp_, const void *dout_, size_t n)
{
	float *dinp = dinp_;
	const float *x = inp_, *dout = dout_;
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		float v = x[i];
		float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
		float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
		dinp[i] = dout[i] * (cdf + v * pdf);
	}
}

static void cpu_tanh_fwd(void *out_, const void *inp_, size_t n)
{
	float *out = out_;
	const float *x = inp_;
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		out[i] = tanhf(x[i]);
}

/* from the output: 1 - tanh^2; dinp may be dout */
static void cpu_tanh_bwd(void *dinp_, const void *out_, const void *dout_, size_t n)
{
	float *dinp = dinp_;
	const float *y = out_, *dout = dout_;
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		dinp[i] = dout[i] * (1.0f - y[i] * y[i]);
}

static void cpu_gather_rows(void *out_, const void *inp_, int rows, int C, size_t stride)
{
	float *out = out_;
	const float *inp = inp_;
	for (int r = 0; r < rows; r++)
		memcpy(out + (size_t)r * C, inp + (size_t)r * stride, (size_t)C * sizeof *out);
}

static void cpu_scatter_add_rows(void *dinp_, const void *dout_, int rows, int C, size_t stride)
{
	float *dinp = dinp_;
	const float *dout = dout_;
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < C; c++)
			dinp[(size_t)r * stride + c] += dout[(size_t)r * C + c];
}

static void cpu_residual_fwd(void *out_, const void *res_, const void *x_, size_t n, float p,
			     uint64_t seed, uint64_t off)
{
	float *out = out_;
	const float *res = res_, *x = x_;
	if (p > 0) {
#pragma omp parallel for schedule(static)
		for (size_t i = 0; i < n; i++)
			out[i] = res[i] + x[i] * philox_keep(seed, off + i, p);
	} else {
#pragma omp parallel for simd schedule(static)
		for (size_t i = 0; i < n; i++)
			out[i] = res[i] + x[i];
	}
}

static void cpu_dropout_bwd(void *dx_, const void *dout_, size_t n, float p, uint64_t seed,
			    uint64_t off)
{
	float *dx = dx_;
	const float *dout = dout_;
	if (p > 0) {
#pragma omp parallel for schedule(static)
		for (size_t i = 0; i < n; i++)
			dx[i] = dout[i] * philox_keep(seed, off + i, p);
	} else if (dx != dout) {
		memcpy(dx, dout, n * sizeof *dx);
	}
}

static void cpu_dropout_fwd(void *x, size_t n, float p, uint64_t seed, uint64_t off)
{
	if (p > 0)
		cpu_dropout_bwd(x, x, n, p, seed, off);
}

static void cpu_add(void *acc_, const void *x_, size_t n)
{
	float *acc = acc_;
	const float *x = x_;
#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++)
		acc[i] += x[i];
}

/* ---- loss ---- */

static void cpu_xent_fwd_bwd(float *losses, void *logits_, const int32_t *targets, int N, int V,
			     int Vp, float dscale, int *bad)
{
	float *logits = logits_;
	int nbad = 0;
#pragma omp parallel for schedule(static) reduction(+ : nbad)
	for (int r = 0; r < N; r++) {
		float *z = logits + (size_t)r * Vp;
		int t = targets[r];
		float mx = -INFINITY;
		for (int v = 0; v < V; v++)
			mx = z[v] > mx ? z[v] : mx;
		double sum = 0;
		for (int v = 0; v < V; v++)
			sum += exp_fast(z[v] - mx);
		float lse = mx + (float)log(sum);
		if (t < 0 || t >= V) {
			nbad++;
			losses[r] = 0;
			memset(z, 0, (size_t)Vp * sizeof *z);
			continue;
		}
		losses[r] = lse - z[t];
#pragma omp simd
		for (int v = 0; v < V; v++)
			z[v] = exp_fast(z[v] - lse) * dscale;
		z[t] -= dscale;
		for (int v = V; v < Vp; v++)
			z[v] = 0;
	}
	*bad += nbad;
}

static void cpu_xent_stats(float *mx, float *se, float *zt, const void *logits_,
			   const int32_t *tl, int N, int Vvalid, int Vp)
{
	const float *logits = logits_;
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		const float *z = logits + (size_t)r * Vp;
		float m = -INFINITY;
		double sum = 0;
		for (int v = 0; v < Vvalid; v++)
			m = z[v] > m ? z[v] : m;
		for (int v = 0; v < Vvalid; v++)
			sum += exp_fast(z[v] - m);
		mx[r] = Vvalid ? m : -INFINITY;
		se[r] = (float)sum;
		zt[r] = tl[r] >= 0 ? z[tl[r]] : 0.0f;
	}
}

static void cpu_xent_rescale(float *se, const float *mx, const float *gmx, int N)
{
	for (int i = 0; i < N; i++)
		se[i] = mx[i] == -INFINITY ? 0.0f : se[i] * expf(mx[i] - gmx[i]);
}

static void cpu_xent_finish(float *losses, float *lse, const float *gmx, const float *se,
			    const float *zt, const int32_t *targets, int N, int V, int *bad)
{
	int nbad = 0;
	for (int i = 0; i < N; i++) {
		int ok = targets[i] >= 0 && targets[i] < V;
		float l = ok ? gmx[i] + logf(se[i]) : INFINITY;
		lse[i] = l;
		losses[i] = ok ? l - zt[i] : 0.0f;
		nbad += !ok;
	}
	*bad += nbad;
}

static void cpu_xent_grad(void *logits_, const float *lse, const int32_t *tl, int N, int Vvalid,
			  int Vp, float dscale)
{
	float *logits = logits_;
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N; r++) {
		float *z = logits + (size_t)r * Vp;
#pragma omp simd
		for (int v = 0; v < Vvalid; v++)
			z[v] = exp_fast(z[v] - lse[r]) * dscale;
		for (int v = Vvalid; v < Vp; v++)
			z[v] = 0;
		if (tl[r] >= 0)
			z[tl[r]] -= dscale;
	}
}

/* ---- optimizer ---- */

static double cpu_sumsq(const float *g, size_t n)
{
	double part_[ROW_CHUNKS] = {0}, s = 0;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < ROW_CHUNKS; k++) {
		size_t a, b;
		double acc = 0;
		part(n, ROW_CHUNKS, k, &a, &b);
		for (size_t i = a; i < b; i++)
			acc += (double)g[i] * g[i];
		part_[k] = acc;
	}
	for (int k = 0; k < ROW_CHUNKS; k++)
		s += part_[k];
	return s;
}

static int cpu_all_within(const float *g, size_t n, float limit)
{
	int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
	for (size_t i = 0; i < n; i++)
		bad |= !isfinite(g[i]) || fabsf(g[i]) > limit;
	return !bad;
}

static void cpu_scale(float *x, float s, size_t n)
{
#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

static void cpu_adamw(float *master, void *param, const float *g, float *m, float *v, size_t n,
		      float lr, float b1, float b2, float eps, float wd, float gscale, int step)
{
	float bc1 = 1.0f - powf(b1, step), bc2 = 1.0f - powf(b2, step);
	float *pw = param;
#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] * gscale;
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		float w = master[i];
		w -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * w);
		master[i] = w;
		if (pw != master)
			pw[i] = w;
	}
}

/* LAMB's bias corrections as apex computes them: std::pow(float, int) is a double */
static float lamb_bc(float b, int step)
{
	return (float)(1.0 - pow((double)b, step));
}

static inline float lamb_u(float m, float v, float w, float bc1, float bc2, float eps, float wd)
{
	return (m / bc1) / (sqrtf(v / bc2) + eps) + wd * w;
}

static double cpu_lamb_update(const float *master, const float *g, float *m, float *v, size_t n,
			      float b1, float b2, float eps, float wd, float gscale, float clipdiv,
			      int step)
{
	float bc1 = lamb_bc(b1, step), bc2 = lamb_bc(b2, step);
	double part_[ROW_CHUNKS] = {0}, s = 0;
#pragma omp parallel for schedule(static)
	for (int k = 0; k < ROW_CHUNKS; k++) {
		size_t a, b;
		double acc = 0;
		part(n, ROW_CHUNKS, k, &a, &b);
		for (size_t i = a; i < b; i++) {
			float gi = g[i] * gscale / clipdiv;
			float mi = b1 * m[i] + (1.0f - b1) * gi;
			float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
			m[i] = mi;
			v[i] = vi;
			float u = lamb_u(mi, vi, master[i], bc1, bc2, eps, wd);
			acc += (double)u * u;
		}
		part_[k] = acc;
	}
	for (int k = 0; k < ROW_CHUNKS; k++)
		s += part_[k];
	return s;
}

static void cpu_lamb_apply(float *master, void *param, const float *m, const float *v, size_t n,
			   float b1, float b2, float eps, float wd, float ratio, int step,
			   const struct lamb_noise *nz)
{
	float bc1 = lamb_bc(b1, step), bc2 = lamb_bc(b2, step);
	float *pw = param;
	if (nz && nz->scale != 0.0f) {   /* --lamb-layerwise-noise: the draws are not vectorised */
		struct lamb_noise z = *nz;
#pragma omp parallel for schedule(static)
		for (size_t i = 0; i < n; i++) {
			float w = master[i];
			float u = lamb_u(m[i], v[i], w, bc1, bc2, eps, wd);
			u += z.scale * (float)philox_normal(z.key, philox_gindex(z.e0 + i, z.base, z.cols,
										 z.stride));
			w -= ratio * u;
			master[i] = w;
			if (pw != master)
				pw[i] = w;
		}
		return;
	}
#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float w = master[i];
		w -= ratio * lamb_u(m[i], v[i], w, bc1, bc2, eps, wd);
		master[i] = w;
		if (pw != master)
			pw[i] = w;
	}
}

static void cpu_sgd(float *master, void *param, const float *g, float *buf, size_t n, float lr,
		    float momentum, float wd, float gscale, int first)
{
	float *pw = param;
#pragma omp parallel for simd schedule(static)
	for (size_t i = 0; i < n; i++) {
		float w = master[i];
		float d = g[i] * gscale + wd * w;
		if (momentum != 0.0f) {
			d = first ? d : momentum * buf[i] + d;
			buf[i] = d;
		}
		w -= lr * d;
		master[i] = w;
		if (pw != master)
			pw[i] = w;
	}
}

static void cpu_adam8bit(float *master, void *param, const float *g, uint8_t *c1, uint8_t *c2,
			 float *absmax1, float *absmax2, size_t n, const float *qmap, float lr,
			 float b1, float b2, float eps, float wd, float gscale, int step)
{
	bnb_adam8bit(master, param, g, c1, c2, absmax1, absmax2, n, qmap, qmap + 256, lr, b1, b2,
		     eps, wd, gscale, step);
}

static void cpu_adam32(float *master, void *param, const float *g, float *m, float *v, size_t n,
		       float lr, float b1, float b2, float eps, float wd, float gscale, int step)
{
	bnb_adam32(master, param, g, m, v, n, lr, b1, b2, eps, wd, gscale, step);
}

static struct ops cpu_ops = {
	.name = "cpu",
	.act_size = sizeof(float),
	.act_type = "fp32",
	.alloc = cpu_alloc,
	.free = cpu_free,
	.zero = cpu_zero,
	.to_device = cpu_copy,
	.to_host = cpu_copy,
	.copy = cpu_copy,
	.sync = cpu_sync,
	.f32_to_act = cpu_to_act,
	.act_to_f32 = cpu_from_act,
	.embed_fwd = cpu_embed_fwd,
	.embed_bwd = cpu_embed_bwd,
	.layernorm_fwd = cpu_layernorm_fwd,
	.layernorm_bwd = cpu_layernorm_bwd,
	.matmul_fwd = cpu_matmul_fwd,
	.matmul_bwd = cpu_matmul_bwd,
	.attention_fwd = cpu_attention_fwd,
	.attention_bwd = cpu_attention_bwd,
	.xattn_fwd = cpu_xattn_fwd,
	.xattn_bwd = cpu_xattn_bwd,
	.gelu_fwd = cpu_gelu_fwd,
	.gelu_bwd = cpu_gelu_bwd,
	.gelu_erf_fwd = cpu_gelu_erf_fwd,
	.gelu_erf_bwd = cpu_gelu_erf_bwd,
	.tanh_fwd = cpu_tanh_fwd,
	.tanh_bwd = cpu_tanh_bwd,
	.gather_rows = cpu_gather_rows,
	.scatter_add_rows = cpu_scatter_add_rows,
	.residual_fwd = cpu_residual_fwd,
	.dropout_bwd = cpu_dropout_bwd,
	.dropout_fwd = cpu_dropout_fwd,
	.add = cpu_add,
	.xent_fwd_bwd = cpu_xent_fwd_bwd,
	.xent_stats = cpu_xent_stats,
	.xent_grad = cpu_xent_grad,
	.xent_rescale = cpu_xent_rescale,
	.xent_finish = cpu_xent_finish,
	.sumsq = cpu_sumsq,
	.all_within = cpu_all_within,
	.scale = cpu_scale,
	.adamw = cpu_adamw,
	.lamb_update = cpu_lamb_update,
	.lamb_apply = cpu_lamb_apply,
	.sgd = cpu_sgd,
	.adam8bit = cpu_adam8bit,
	.adam32 = cpu_adam32,
};

const struct ops *ops_cpu(int threads)
{
	static char device[160];
	long n = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	omp_set_num_threads((int)n);
	openblas_set_num_threads(1);
	snprintf(device, sizeof device, "CPU, %ld thread%s, %s", n, n > 1 ? "s" : "",
		 openblas_get_config());
	cpu_ops.device = device;
	return &cpu_ops;
}
