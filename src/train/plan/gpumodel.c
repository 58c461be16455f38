#include "train/plan/gpumodel.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model/ops.h"
#include "train/optim/bnb.h"

/* --- the one table: tests/bench/gpu-model.py has the same numbers and they must agree -------
 * Peaks: NVIDIA's data sheets, dense (no sparsity).  Efficiencies: what cuBLAS and a streaming
 * kernel reach in practice, inputs of the model (gpu-model.py's header says why each).  The
 * interconnect, which gpu-model.py does not use: NVLink per GPU per direction (A100: 12 links,
 * H100: 18 links, 25 GB/s each), and the network per node per direction: an A100 node of Jean
 * Zay, where BLOOM-176B trained, has 4 x 100 Gb/s Omni-Path links (the BigScience tr11 README
 * and "The Technology Behind BLOOM Training"); an H100 node (a DGX H100) 8 x 400 Gb/s
 * InfiniBand.  NCCL's ring reaches gpumodel_k.net of a link; a call costs a latency on top. */
static const struct gpumodel_device devices[] = {
	{"h100", "H100 SXM", 989.4e12, 66.9e12, 3.35e12, 25e9, 132, 0.25, 450e9, 400e9,
	 "NVLink 4, 450 GB/s per direction; 8 x 400 Gb/s InfiniBand per node"},
	{"a100", "A100 SXM", 312.0e12, 19.5e12, 2.039e12, 20e9, 108, 0.40, 300e9, 50e9,
	 "NVLink 3, 300 GB/s per direction; 4 x 100 Gb/s Omni-Path per node (Jean Zay)"},
};
const struct gpumodel_consts gpumodel_k = {
	.gemm = 0.80,         /* cuBLASLt on large bf16 GEMMs, before wave quantisation */
	.simt = 0.50,         /* a fp32 SIMT tile loop (no such kernel is left in the backend) */
	.hbm = 0.85,          /* a streaming memory-bound kernel */
	.net = 0.80,          /* an NCCL ring, of the link's bandwidth */
	.gap = 2.5e-6,        /* per launch: the front end between dependent kernels, no CUDA graph */
	/* per launch of a graph's node (--cuda-graph): an assumption, not a measurement - the
	 * graph removes the per-launch submission (the runtime call, the driver's push of each
	 * launch) and leaves the device's resolution of each dependency; 1 us is taken until an
	 * H100 run of train with and without --cuda-graph measures it */
	.gap_graph = 1.0e-6,
	.sync = 10e-6,        /* per host synchronisation that drains the device (a read-back the
			       * step waits for; a deferred one, behind the next step, costs none) */
	.tile_m = 128,        /* cuBLAS's usual bf16 tile on these parts, for wave quantisation */
	.tile_n = 256,
	.lat_nvlink = 10e-6,  /* per NCCL call inside a node */
	.lat_net = 30e-6,     /* per NCCL call across nodes */
};
#define K gpumodel_k

const char *const gpumodel_kind_name[GM_KINDS] = {"gemm", "attention", "other", "comm"};

const struct gpumodel_device *gpumodel_device(const char *key)
{
	for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
		if (strcmp(devices[i].key, key) == 0)
			return &devices[i];
	return NULL;
}

/* --- rows ------------------------------------------------------------------------------------ */

struct list {
	struct gpumodel_row *r;
	int n, cap;
	double launches;
};

static struct gpumodel_row *row_of(struct list *l, const char *name, enum gpumodel_kind kind)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->r[i].name, name) == 0)
			return &l->r[i];
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 64;
		struct gpumodel_row *r = realloc(l->r, (size_t)cap * sizeof *r);
		if (!r)
			return NULL;
		l->r = r;
		l->cap = cap;
	}
	struct gpumodel_row *r = &l->r[l->n++];
	memset(r, 0, sizeof *r);
	snprintf(r->name, sizeof r->name, "%s", name);
	r->kind = kind;
	return r;
}

/* What one stage is: its shapes, and where its rows go (per micro-batch or per iteration). */
struct ctx {
	const struct gpumodel_cfg *c;
	const struct gpumodel_device *d;
	struct list *l;
	int oom;
	int first, last, nl;
	int64_t B, T, N, C, Cl, C3, F, NH, HD, Vl, ck;
	double hd;
	double t_mb;              /* the stage's micro-batch, seconds (for the DP buckets' overlap) */
};

static void add(struct ctx *x, const char *name, enum gpumodel_kind kind, double count,
		double flops, double bytes, double s)
{
	struct gpumodel_row *r = row_of(x->l, name, kind);
	if (!r) {
		x->oom = 1;
		return;
	}
	r->count += count;
	r->flops += flops;
	r->bytes += bytes;
	r->seconds += s;
}

/* bytes of a buffer as the executor counts them: whole 32-byte sectors */
static double sec(double bytes)
{
	return ceil(bytes / 32) * 32;
}

static double mem_s(const struct ctx *x, double bytes)
{
	return bytes / (x->d->hbm * K.hbm);
}

/* a memory-bound kernel: its compulsory bytes at HBM bandwidth, plus the launch gap */
/* the front end's time per launch: shorter when the step is a replayed CUDA graph */
static double gap(const struct ctx *x)
{
	return x->c->graph ? K.gap_graph : K.gap;
}

static void kernel(struct ctx *x, const char *name, double rd, double wr)
{
	add(x, name, GM_KIND_OTHER, 1, 0, rd + wr, mem_s(x, rd + wr) + gap(x));
	x->l->launches++;
}

/* an attention kernel: `units` causal T x T x HD tile products per head on the tensor cores */
static void attention(struct ctx *x, const char *base, int units, double rd, double wr)
{
	char name[64];
	int hdm = x->HD <= 32 ? 32 : x->HD <= 64 ? 64 : 128;
	double flops = (double)units * (double)x->B * (double)x->NH * (double)x->T * (double)x->T *
		       (double)x->HD;
	snprintf(name, sizeof name, "%s<%d>", base, hdm);
	add(x, name, GM_KIND_ATTN, 1, flops, rd + wr,
	    fmax(mem_s(x, rd + wr), flops / (x->d->tc * x->d->attn_tc)) + gap(x));
	x->l->launches++;
}

/* One cuBLASLt call, D(m,n) = A(m,k) B(k,n) (+ C): A and B bf16; c bytes per element of C read
 * (0: beta 0; 4: the fp32 weight gradient accumulated in place), d of D written; aux: the GeLU
 * epilogues' bf16 pre-activation, written or read */
static void gemm(struct ctx *x, int64_t m, int64_t n, int64_t k, int c, int d, const char *epi,
		 int bias, int aux)
{
	char name[80];
	double flops = 2.0 * (double)m * (double)n * (double)k;
	double bytes = (double)m * k * 2 + (double)k * n * 2 + (double)m * n * (c + d) +
		       (aux ? (double)m * n * 2 : 0);
	/* wave quantisation: output tiles over the SMs; few tiles and a long k (the weight
	 * gradients: k = tokens) are split along k, as cuBLAS's heuristics do */
	int64_t sms = x->d->sms;
	int64_t tiles = ((m + K.tile_m - 1) / K.tile_m) * ((n + K.tile_n - 1) / K.tile_n);
	int64_t split = k / 2048 < sms / tiles ? k / 2048 : sms / tiles;
	if (split < 1)
		split = 1;
	int64_t work = tiles * split, waves = (work + sms - 1) / sms;
	double eff = K.gemm * (double)work / (double)(waves * sms);
	double s = fmax(flops / (x->d->tc * eff), mem_s(x, bytes));
	snprintf(name, sizeof name, "gemm %lldx%lldx%lld %s%s%s", (long long)m, (long long)n,
		 (long long)k, epi, bias ? "+bias" : "", aux ? "+aux" : "");
	add(x, name, GM_KIND_GEMM, 1, flops, bytes, s + gap(x));
	x->l->launches++;
}

static void memset_(struct ctx *x, double bytes)
{
	add(x, "(memset)", GM_KIND_OTHER, 1, 0, bytes, mem_s(x, bytes) + gap(x));
	x->l->launches++;
}

static void memcpy_dtod(struct ctx *x, double bytes)
{
	add(x, "(memcpy DtoD)", GM_KIND_OTHER, 1, 0, 2 * bytes, mem_s(x, 2 * bytes) + gap(x));
	x->l->launches++;
}

#define HOST_ROW "host syncs + HtoD copies"
static void htod(struct ctx *x, double bytes)
{
	add(x, HOST_ROW, GM_KIND_OTHER, 0, 0, bytes, bytes / x->d->pcie);
}

static void dtoh(struct ctx *x)
{
	add(x, HOST_ROW, GM_KIND_OTHER, 1, 0, 0, K.sync);
}

/* --- collectives ------------------------------------------------------------------------------
 * A group of g ranks whose members are `stride` ranks apart (Megatron's order: TP varies
 * fastest, then DP, then PP; dist.h).  Inside one node a ring runs at NVLink's bandwidth; a group
 * that spans nodes crosses each node's network once, and the node's other groups do the same
 * at the same time (every rank is in one group of each kind), so it gets the node's network
 * bandwidth divided by the groups that cross it. */
struct group {
	int64_t g, stride;
};

static void link_of(const struct ctx *x, struct group gr, double *bw, double *lat)
{
	int64_t gpn = x->c->gpus_per_node > 0 ? x->c->gpus_per_node : 1;
	int64_t per_node = gr.stride >= gpn ? 1 : gpn / gr.stride;
	if (per_node > gr.g)
		per_node = gr.g;
	if (per_node < 1)
		per_node = 1;
	if (gr.g <= per_node) {
		*bw = x->d->nvlink * K.net;
		*lat = K.lat_nvlink;
	} else {
		*bw = x->d->nic * K.net / (double)(gpn / per_node > 0 ? gpn / per_node : 1);
		*lat = K.lat_net;
	}
}

/* a sum as dist_nccl.cu does it: reduce-scatter, then all-gather (2 (g-1)/g of the bytes) */
static void comm_sum(struct ctx *x, const char *name, struct group gr, double bytes)
{
	double bw, lat;
	if (gr.g <= 1)
		return;
	link_of(x, gr, &bw, &lat);
	add(x, name, GM_KIND_COMM, 2, 0, bytes,
	    2 * (lat + (double)(gr.g - 1) / (double)gr.g * bytes / bw));
}

/* an all-gather of `bytes` in all ((g-1)/g of them arrive) */
static void comm_gather(struct ctx *x, const char *name, struct group gr, double bytes)
{
	double bw, lat;
	if (gr.g <= 1)
		return;
	link_of(x, gr, &bw, &lat);
	add(x, name, GM_KIND_COMM, 1, 0, bytes,
	    lat + (double)(gr.g - 1) / (double)gr.g * bytes / bw);
}

/* The DP gradients (run/buckets.c): a sum (reduce-scatter + all-gather) of `bytes`, or under
 * ZeRO-1 a reduce onto each shard's owner (a reduce-scatter's (g-1)/g of them), in `calls`
 * buckets; seconds */
static double dp_seconds(struct ctx *x, struct group gr, double bytes, double calls, int zero)
{
	double bw, lat;
	link_of(x, gr, &bw, &lat);
	double k = zero ? 1 : 2;
	return k * calls * lat + k * (double)(gr.g - 1) / (double)gr.g * bytes / bw;
}

static void comm_dp(struct ctx *x, struct group gr, double P, int zero)
{
	const struct gpumodel_cfg *c = x->c;
	const char *name = zero ? "nccl reduce DP (ZeRO-1 gradients)" : "nccl sum DP (gradients)";
	int64_t h = c->h, t = c->tp, f = c->ffn;
	/* one layer's elements, as tensors() lists them */
	double per = (double)(6 * h + 3 * h * h / t + 3 * h / t + h * h / t + f * h / t + f / t +
			      h * f / t);
	double Pl = per * x->nl;
	if (gr.g <= 1)
		return;
	if (!c->overlap || x->nl == 0 || Pl <= 0 || Pl > P) {
		add(x, name, GM_KIND_COMM, zero ? 1 : 2, 0, P * 4, dp_seconds(x, gr, P * 4, 1, zero));
		return;
	}
	/* --overlap-grad-reduce: buckets of k whole layers go, one after another on their own
	 * stream, while the last backward runs the layers below them (a layer's backward taken as
	 * its share of the micro-batch's: 2/3, or 3/4 with the recomputation); exposed is what
	 * outlasts that window - at least the last bucket, which nothing hides - then the rest
	 * (embeddings, final layer norm) after the backward */
	double kl = ceil(c->bucket / per);
	if (kl < 1)
		kl = 1;
	if (kl > x->nl)
		kl = x->nl;
	double nb = ceil(x->nl / kl), tc = dp_seconds(x, gr, Pl * 4, nb, zero);
	double window = (x->nl - kl) * x->t_mb * (x->ck ? 0.75 : 2.0 / 3.0) / x->nl;
	double exposed = tc - window > tc / nb ? tc - window : tc / nb;
	add(x, zero ? "nccl reduce DP (ZeRO-1 gradients, layers' buckets: exposed part)"
		    : "nccl sum DP (gradients, layers' buckets: exposed part)",
	    GM_KIND_COMM, nb * (zero ? 1 : 2), 0, Pl * 4, exposed);
	if (P > Pl)
		add(x, name, GM_KIND_COMM, zero ? 1 : 2, 0, (P - Pl) * 4,
		    dp_seconds(x, gr, (P - Pl) * 4, 1, zero));
}

/* a host-memory collective (dist.h): staged through the device and waited for */
static void host_coll(struct ctx *x, struct group gr, double bytes)
{
	if (gr.g <= 1)
		return;
	htod(x, bytes);
	comm_sum(x, "nccl host collectives", gr, bytes);
	dtoh(x);
}

static struct group tp_group(const struct ctx *x)
{
	return (struct group){x->c->tp, 1};
}

static struct group dp_group(const struct ctx *x)
{
	return (struct group){x->c->dp, x->c->tp};
}

static struct group pp_group(const struct ctx *x)
{
	return (struct group){x->c->pp, x->c->tp * x->c->dp};
}

static struct group world_group(const struct ctx *x)
{
	return (struct group){x->c->tp * x->c->dp * x->c->pp, 1};
}

/* one send/receive pair of the pipeline, both directions at once; across nodes every GPU of
 * the node sends its own at the same time */
static void p2p(struct ctx *x, double bytes)
{
	int64_t gpn = x->c->gpus_per_node > 0 ? x->c->gpus_per_node : 1;
	int inter = x->c->tp * x->c->dp >= gpn;
	double bw = inter ? x->d->nic * K.net / (double)gpn : x->d->nvlink * K.net;
	add(x, "nccl send/recv PP", GM_KIND_COMM, 1, 0, bytes,
	    (inter ? K.lat_net : K.lat_nvlink) + bytes / bw);
}

/* --- the kernels, as src/train/cuda/ *.cu launches them ------------------------------------ */

static const char *v8(int64_t n)
{
	return n % 8 == 0 ? "8" : "1";
}

static void ln_fwd(struct ctx *x)   /* norm.cu ln_fwd_k: x, w, b in; y, mean, rstd out */
{
	char n[32];
	snprintf(n, sizeof n, "ln_fwd_k<%s>", v8(x->C));
	kernel(x, n, sec(x->N * x->C * 2) + 2 * sec(x->C * 2), sec(x->N * x->C * 2) + 2 * sec(x->N * 4));
}

static void ln_res_fwd(struct ctx *x)   /* res + dropout(x) stored, then its layer norm */
{
	char n[32];
	snprintf(n, sizeof n, "ln_res_fwd_k<%s>", v8(x->C));
	kernel(x, n, 2 * sec(x->N * x->C * 2) + 2 * sec(x->C * 2),
	       2 * sec(x->N * x->C * 2) + 2 * sec(x->N * 4));
}

/* reduce.cu cu_colsum over (N, width): S slices of rows, partials, then their sum into d */
static void colsum(struct ctx *x, int64_t width, int ln)
{
	char n[48];
	int64_t S = (x->N + 255) / 256;
	if (S > 256)
		S = 256;
	int k = ln ? 2 : 1;
	snprintf(n, sizeof n, "colsum_part_k<%s, %s>", v8(width), ln ? "true" : "false");
	kernel(x, n, sec(x->N * width * 2) * k + (ln ? 2 * sec(x->N * 4) : 0),
	       sec((double)S * width * 4 * k));
	kernel(x, "colsum_fin_k", sec((double)S * width * 4 * k) + k * sec(width * 4),
	       k * sec(width * 4));
}

/* layer norm backward: dinp += (read and written), column sums of dy and dy * xhat; drop: the
 * fused version that also writes the dropout of the result (cu_layernorm_bwd_dropout).  Up to
 * 1024 channels (128 when C % 8) norm.cu's ln_bwd_k takes the column sums in the same pass,
 * writing per-slice partials (slices of 32 rows, at most 512 slices) that colsum_fin_k adds;
 * wider, the dinp kernel and the separate cu_colsum. */
static void ln_bwd(struct ctx *x, int drop)
{
	char n[40];
	double nc = sec(x->N * x->C * 2);
	if (x->C <= (x->C % 8 == 0 ? 8 : 1) * 32 * 4) {
		int64_t R = (x->N + 511) / 512, S;
		if (R < 32)
			R = 32;
		S = (x->N + R - 1) / R;
		double part = sec((double)S * x->C * 4 * 2);
		snprintf(n, sizeof n, "ln_bwd_k<%s, %s>", v8(x->C), drop ? "true" : "false");
		kernel(x, n, 3 * nc + sec(x->C * 2) + 2 * sec(x->N * 4), (drop ? 2 : 1) * nc + part);
		kernel(x, "colsum_fin_k", part + 2 * sec(x->C * 4), 2 * sec(x->C * 4));
		return;
	}
	if (drop)
		colsum(x, x->C, 1);
	snprintf(n, sizeof n, "ln_bwd_dinp_k<%s, %s>", v8(x->C), drop ? "true" : "false");
	kernel(x, n, 3 * nc + sec(x->C * 2) + 2 * sec(x->N * 4), (drop ? 2 : 1) * nc);
	if (!drop)
		colsum(x, x->C, 1);
}

static void pointwise(struct ctx *x, const char *base, int64_t n, int reads, int writes)
{
	char name[40];
	snprintf(name, sizeof name, "%s<%s>", base, v8(n));
	kernel(x, name, reads * sec(n * 2), writes * sec(n * 2));
}

/* cu_matmul_bwd: dinp (when asked), dW += (fp32, read and written); with a bias its gradient
 * from the dW GEMM's BGRADB epilogue into an fp32 scratch vector that vec_acc_k adds to dbias */
static void matmul_bwd(struct ctx *x, int64_t IC, int64_t OC, int dinp, int bias)
{
	if (dinp)
		gemm(x, IC, x->N, OC, 0, 2, "none", 0, 0);
	gemm(x, IC, OC, x->N, 4, 4, bias ? "bgradb" : "none", bias, 0);
	if (bias)
		kernel(x, "vec_acc_k", 2 * sec(OC * 4), sec(OC * 4));
}

/* --- one stage ----------------------------------------------------------------------------- */

static int starts_chunk(const struct ctx *x, int l)
{
	return l == 0 || (x->ck > 0 && l % x->ck == 0);
}

static double attn_extra(const struct ctx *x)   /* ALiBi slopes, --reset-attention-mask's starts */
{
	return (x->c->alibi ? sec(x->NH * 4) : 0) + (x->c->reset_attn ? sec(x->N * 4) : 0);
}

static void layer_fwd(struct ctx *x, int l)
{
	double nc = sec(x->N * x->C * 2), lse = sec(x->B * x->NH * x->T * 4);
	if (starts_chunk(x, l))
		ln_fwd(x);
	gemm(x, x->C3, x->N, x->C, 0, 2, "none", 1, 0);
	attention(x, "attn_fwd_mma_k", 2, sec(x->N * x->C3 * 2) + attn_extra(x),
		  sec(x->N * x->Cl * 2) + lse);
	gemm(x, x->C, x->N, x->Cl, 0, 2, "none", 1, 0);   /* TP rank 0 adds the bias */
	comm_sum(x, "nccl sum TP (activations)", tp_group(x), nc);
	ln_res_fwd(x);
	if (x->F % 8 == 0) {   /* the GeLU in the epilogue, the pre-activation as aux */
		gemm(x, x->F, x->N, x->C, 0, 2, "gelu", 1, 1);
	} else {
		gemm(x, x->F, x->N, x->C, 0, 2, "none", 1, 0);
		pointwise(x, "gelu_fwd_k", x->N * x->F, 1, 1);
	}
	gemm(x, x->C, x->N, x->F, 0, 2, "none", 1, 0);
	comm_sum(x, "nccl sum TP (activations)", tp_group(x), nc);
	if (l + 1 < x->nl && !starts_chunk(x, l + 1))
		ln_res_fwd(x);   /* with the next layer's first layer norm */
	else
		pointwise(x, "residual_fwd_k", x->N * x->C, 2, 1);
}

static void layer_bwd(struct ctx *x, int l)
{
	double nc = sec(x->N * x->C * 2), lse = sec(x->B * x->NH * x->T * 4);
	double qkv = sec(x->N * x->C3 * 2), o = sec(x->N * x->Cl * 2);
	if (l == x->nl - 1 || starts_chunk(x, l + 1)) {   /* else the layer above's LN did it */
		if (x->hd > 0)
			pointwise(x, "dropout_k", x->N * x->C, 1, 1);
		else
			memcpy_dtod(x, nc);
	}
	if (x->F % 8 == 0) {
		gemm(x, x->F, x->N, x->C, 0, 2, "dgelu", 0, 1);
		matmul_bwd(x, x->F, x->C, 0, 1);
	} else {
		gemm(x, x->F, x->N, x->C, 0, 2, "none", 0, 0);
		pointwise(x, "gelu_bwd_k", x->N * x->F, 2, 1);
		matmul_bwd(x, x->F, x->C, 0, 1);
	}
	matmul_bwd(x, x->C, x->F, 1, 1);
	comm_sum(x, "nccl sum TP (activations)", tp_group(x), nc);
	if (x->c->post_ln) {
		pointwise(x, "add_k", x->N * x->C, 2, 1);
		memset_(x, nc);
	}
	ln_bwd(x, 1);
	matmul_bwd(x, x->Cl, x->C, 1, 1);
	kernel(x, "attn_dsum_k", 2 * o, lse);
	/* one kernel, 5 tile products; dQ is summed in fp32 (B,NH,T,HD) in key-tile order, each
	 * query tile's semaphore read: the sums are read (the first adds fetch the zeros, the last
	 * contributor the total) and written back (cleared) once; the atomic adds between stay in
	 * L2 */
	double acc = sec(x->N * x->Cl * 4), sem = sec(x->B * x->NH * ((x->T + 63) / 64) * 4);
	attention(x, "attn_bwd_mma_k", 5, qkv + o + 2 * lse + attn_extra(x) + acc + sem,
		  3 * o + acc);
	matmul_bwd(x, x->C, x->C3, 1, 1);
	comm_sum(x, "nccl sum TP (activations)", tp_group(x), nc);
	if (x->c->post_ln) {
		pointwise(x, "add_k", x->N * x->C, 2, 1);
		memset_(x, nc);
	}
	ln_bwd(x, !starts_chunk(x, l));
}

/* model.c model_forward + model_backward for one micro-batch of stage s */
static void micro_batch(struct ctx *x)
{
	const struct gpumodel_cfg *c = x->c;
	double nc = sec(x->N * x->C * 2), n4 = sec(x->N * 4);
	int tpar = c->tp > 1, wpe = !c->alibi;
	/* rows of the word embedding this rank reads: its vocabulary slice's share */
	double rows = (double)x->N / (double)c->tp;

	if (c->reset_attn)
		htod(x, n4);
	if (x->first) {
		htod(x, n4);
		if (tpar)
			htod(x, n4);
		if (c->reset_pos && wpe)
			htod(x, n4);
		char n[32];
		snprintf(n, sizeof n, "embed_fwd_k<%s>", v8(x->C));
		if (c->embed_ln || tpar || c->reset_pos) {
			kernel(x, n, n4 + sec(rows * x->C * 2), nc);
			comm_sum(x, "nccl sum TP (activations)", tp_group(x), nc);
			if (c->embed_ln)
				ln_fwd(x);
			if (wpe) {
				kernel(x, n, n4 + sec(x->T * x->C * 2), nc);
				pointwise(x, "add_k", x->N * x->C, 2, 1);
			}
		} else {
			kernel(x, n, n4 + sec(x->N * x->C * 2) + (wpe ? sec(x->T * x->C * 2) : 0), nc);
		}
		if (x->hd > 0)
			pointwise(x, "dropout_k", x->N * x->C, 1, 1);
	}
	for (int l = 0; l < x->nl; l++)   /* checkpointed too: the backward recomputes them */
		layer_fwd(x, l);
	if (x->last) {
		double logits = sec((double)x->N * x->Vl * 2);
		htod(x, n4);
		ln_fwd(x);
		gemm(x, x->Vl, x->N, x->C, 0, 2, "none", 0, 0);
		char n[32];
		if (!tpar && c->deferred) {   /* the loss stays on the device (layers.c) */
			snprintf(n, sizeof n, "xent_k<%s>", v8(x->Vl));
			kernel(x, n, logits + n4, logits + n4);
			kernel(x, "loss_acc_k", n4 + 32, 32);   /* + the accumulator's sector */
		} else if (!tpar) {
			memset_(x, 4);
			snprintf(n, sizeof n, "xent_k<%s>", v8(x->Vl));
			kernel(x, n, logits + n4, logits + n4);
			dtoh(x);   /* the losses */
			dtoh(x);   /* the count of bad targets */
		} else {
			memset_(x, 4);   /* model.c vocab_parallel_xent */
			htod(x, n4);
			snprintf(n, sizeof n, "xent_stats_k<%s>", v8(x->Vl));
			kernel(x, n, logits + n4, 3 * n4);
			dtoh(x);
			host_coll(x, tp_group(x), n4);
			host_coll(x, tp_group(x), 2 * n4);
			htod(x, 2 * n4);
			snprintf(n, sizeof n, "xent_grad_k<%s>", v8(x->Vl));
			kernel(x, n, logits + 2 * n4, logits);
			dtoh(x);
		}
		/* backward: logits hold the gradient */
		matmul_bwd(x, x->C, x->Vl, 1, 0);
		comm_sum(x, "nccl sum TP (activations)", tp_group(x), nc);
		memset_(x, nc);
		ln_bwd(x, 0);
	}
	if (!x->ck) {
		for (int l = x->nl - 1; l >= 0; l--)
			layer_bwd(x, l);
	} else {
		for (int hi = x->nl; hi > 0;) {
			int lo = (int)((hi - 1) / x->ck * x->ck);
			for (int l = lo; l < hi; l++)
				layer_fwd(x, l);
			for (int l = hi - 1; l >= lo; l--)
				layer_bwd(x, l);
			hi = lo;
		}
	}
	if (x->first) {
		char n[32];
		if (x->hd > 0)
			pointwise(x, "dropout_k", x->N * x->C, 1, 1);
		int split = c->embed_ln || tpar || c->reset_pos;
		snprintf(n, sizeof n, "embed_bwd_wte_k<%s>", v8(x->C));
		if (split && wpe) {   /* the positions as a table looked up by position "tokens" */
			kernel(x, "iota_k", 0, n4);
			kernel(x, n, 2 * n4 + nc + sec(x->T * x->C * 4), sec(x->T * x->C * 4));
		}
		if (split && c->embed_ln) {
			memset_(x, nc);
			ln_bwd(x, 0);
		}
		/* the deterministic scatter: iota, (CUB's sort), a block per run of equal tokens
		 * adding its dout rows into the fp32 gradient row, read and written once */
		double u = fmin(rows, (double)x->Vl);
		kernel(x, "iota_k", 0, n4);
		kernel(x, n, 2 * n4 + sec(rows * x->C * 2) + sec(u * x->C * 4), sec(u * x->C * 4));
		if (!split && wpe) {
			snprintf(n, sizeof n, "embed_bwd_wpe_k<%s>", v8(x->C));
			kernel(x, n, nc + sec(x->T * x->C * 4), sec(x->T * x->C * 4));
		}
	}
	/* the pipeline's send/receive pairs of 1F1B's steady state: output and gradient */
	double xb = (double)x->N * x->C * 2;
	if (!x->first)
		p2p(x, xb);
	if (!x->last)
		p2p(x, xb);
}

/* the tensors of stage s on one TP rank, as model.c's build_table lays them out; returns the
 * count and fills numel[] and repl[] (replicated across TP: layer norms, row-parallel biases,
 * position embeddings) */
static int tensors(const struct ctx *x, int64_t *numel, int *repl, int *is_wte)
{
	const struct gpumodel_cfg *c = x->c;
	int64_t h = c->h, t = c->tp, f = c->ffn;
	int k = 0;
#define T_(n, r, w) (numel[k] = (n), repl[k] = (r), is_wte[k] = (w), k++)
	if (x->first) {
		T_(c->vocab_padded * h / t, 0, 1);
		if (!c->alibi)
			T_(c->maxpos * h, 1, 0);
		if (c->embed_ln) {
			T_(h, 1, 0);
			T_(h, 1, 0);
		}
	}
	for (int l = 0; l < x->nl; l++) {
		T_(h, 1, 0);
		T_(h, 1, 0);
		T_(3 * h * h / t, 0, 0);
		T_(3 * h / t, 0, 0);
		T_(h * h / t, 0, 0);
		T_(h, 1, 0);
		T_(h, 1, 0);
		T_(h, 1, 0);
		T_(f * h / t, 0, 0);
		T_(f / t, 0, 0);
		T_(h * f / t, 0, 0);
		T_(h, 1, 0);
	}
	if (x->last) {
		T_(h, 1, 0);
		T_(h, 1, 0);
		if (!x->first)
			T_(c->vocab_padded * h / t, 0, 1);
	}
#undef T_
	return k;
}

static void sumsq(struct ctx *x, double n)   /* reduce.cu cu_sumsq: two kernels, a sync */
{
	double G = ceil(n / 4096);
	if (G > 1024)
		G = 1024;
	kernel(x, "sumsq_part_k", sec(n * 4), sec(G * 8));
	kernel(x, "sumsq_fin_k", sec(G * 8), 32);
	dtoh(x);
}

/* run.c iter_queue after the micro-batches: the sum of squares added into the step's struct
 * (ops_step: one 256-byte slot per parity), the decision, nothing read back - the struct's copy
 * to pinned memory is waited for only once the next step is queued */
/* the 32-byte sectors of the struct's bytes [lo, hi) (a slot starts a sector) */
static double span(size_t lo, size_t hi)
{
	return 32.0 * (double)((hi + 31) / 32 - lo / 32);
}

static void deferred_tail(struct ctx *x, double P)
{
	double G = ceil(P / 4096);
	if (G > 1024)
		G = 1024;
	htod(x, sizeof(struct ops_step));   /* the struct's inputs */
	htod(x, 4);                         /* the masked targets' count */
	kernel(x, "sumsq_part_k", sec(P * 4), sec(G * 8));
	kernel(x, "sumsq_fin_k", sec(G * 8) + 32, 32);   /* reads the accumulator too */
	/* reads the inputs and the sums (then writes the decision), the previous struct's `taken`,
	 * the bad-target count */
	kernel(x, "step_decide_k", span(0, offsetof(struct ops_step, taken)) + 64,
	       span(offsetof(struct ops_step, bad), sizeof(struct ops_step)));
}

/* run.c step_grads after the micro-batches, and optim.c optim_step */
static void iteration_tail(struct ctx *x)
{
	const struct gpumodel_cfg *c = x->c;
	int nt = 12 * x->nl + 7;
	int64_t *numel = calloc((size_t)nt, sizeof *numel);
	int *repl = calloc((size_t)nt, sizeof *repl), *wte = calloc((size_t)nt, sizeof *wte);
	if (!numel || !repl || !wte) {
		x->oom = 1;
		free(numel), free(repl), free(wte);
		return;
	}
	nt = tensors(x, numel, repl, wte);
	double P = 0, P_wte = 0;
	for (int i = 0; i < nt; i++) {
		P += (double)numel[i];
		if (wte[i])
			P_wte = (double)numel[i];
	}
	int dp = (int)c->dp, tpar = c->tp > 1, zero = c->zero1 && dp > 1;

	if (c->deferred)
		memset_(x, 4);   /* the bad-target count, once per step */
	memset_(x, P * 4);   /* model_zero_grad, before the first micro-batch */
	if (c->pp > 1) {
		host_coll(x, pp_group(x), 8);   /* the loss */
		if (x->first || x->last)
			comm_sum(x, "nccl sum embedding (tied gradient)",
				 (struct group){2, (c->pp - 1) * c->tp * c->dp}, P_wte * 4);
	}
	if (dp > 1) {
		comm_dp(x, dp_group(x), P, zero);
		host_coll(x, dp_group(x), 8);
	}
	if (tpar)
		for (int i = 0; i < nt; i++)
			if (repl[i]) {
				comm_sum(x, "nccl sum TP (replicated gradients)", tp_group(x), numel[i] * 4.0);
				kernel(x, "scale_k", sec(numel[i] * 4.0), sec(numel[i] * 4.0));
			}
	/* the decisions every rank takes together: failed reads, bad targets, bad data, a signal,
	 * the kill switch */
	for (int i = 0; i < 5; i++)
		host_coll(x, world_group(x), 4);

	/* the gradient norm: per tensor with TP or PP (each shard once), else the one buffer */
	if (c->deferred) {
		deferred_tail(x, P);
	} else if (tpar || c->pp > 1) {
		for (int i = 0; i < nt; i++)
			if (!(wte[i] && !x->first))
				sumsq(x, (double)numel[i]);
		if (zero)
			host_coll(x, dp_group(x), 8);
		host_coll(x, tp_group(x), 8);
		host_coll(x, pp_group(x), 8);
	} else {
		sumsq(x, zero ? P / dp : P);
		if (zero)   /* each shard's, summed over DP */
			host_coll(x, dp_group(x), 8);
	}
	if (c->fp16 && c->deferred) {   /* the overflow check, into the step's struct */
		kernel(x, "nonfinite_k", sec(P * 4), 0);
	} else if (c->fp16) {   /* the overflow check Megatron's fp16 scaler needs */
		memset_(x, 4);
		kernel(x, "nonfinite_k", sec((zero ? P / dp : P) * 4), 0);
		dtoh(x);
		host_coll(x, world_group(x), 4);
	}
	double Po = zero ? P / dp : P;
	switch (c->opt) {
	case GM_ADAMW: {   /* one launch: master, g, m, v in; master, m, v and the bf16 copy out */
		int nseg = 0;
		for (int i = 0; i < nt; i++)
			nseg += numel[i] > 0;
		if (zero)   /* the shard holds a contiguous slice of the tensors */
			nseg = nseg / dp + 2;
		/* deferred: + the struct's sector with the decision */
		double dec = c->deferred ? span(offsetof(struct ops_step, taken),
						 offsetof(struct ops_step, bc2) + sizeof(float)) : 0;
		kernel(x, "adamw_multi_k", 16 * Po + sec(nseg * 32.0) + dec, 14 * Po);
		break;
	}
	case GM_LAMB:
		for (int i = 0; i < nt; i++) {
			double n = (double)numel[i];
			sumsq(x, n);   /* the weights' norm */
			kernel(x, "lamb_update_k", 16 * n, 12 * n);
			sumsq(x, n);   /* the update's */
			kernel(x, "lamb_apply_k", 12 * n, 6 * n);
		}
		break;
	case GM_SGD:
		for (int i = 0; i < nt; i++) {
			double n = (double)numel[i], mom = c->sgd_momentum != 0 ? 4 * n : 0;
			kernel(x, "sgd_k", 8 * n + mom, 6 * n + mom);
		}
		break;
	case GM_BNB:
		for (int i = 0; i < nt; i++) {
			double n = (double)numel[i];
			if (!wte[i] && bnb_is_8bit((size_t)numel[i])) {   /* codes, absmax, the qmap */
				double nb = 2 * sec(ceil(n / BNB_BLOCK) * 4);
				kernel(x, "adam8bit_k", 10 * n + nb + 2048, 8 * n + nb);
			} else {
				kernel(x, "adam32_k", 16 * n, 14 * n);
			}
		}
		break;
	}
	if (c->fp16 && c->deferred)   /* the next step's loss scale waits for this one's flag */
		dtoh(x);
	if (zero) {   /* every DP rank gets the others' updated shards, then the bf16 copy */
		comm_gather(x, "nccl all-gather DP (ZeRO-1)", dp_group(x), P * 4);
		kernel(x, (int64_t)P % 8 ? "f32_to_act_k<1>" : "f32_to_act_k<8>", sec(P * 4), sec(P * 2));
	}
	free(numel), free(repl), free(wte);
}

static double total(const struct list *l)
{
	double s = 0;
	for (int i = 0; i < l->n; i++)
		s += l->r[i].seconds;
	return s;
}

int gpumodel_run(struct gpumodel *g, const struct gpumodel_cfg *c, const struct gpumodel_device *d)
{
	memset(g, 0, sizeof *g);
	g->dev = d;
	int pp = (int)c->pp, oom = 0;
	struct list *mb = calloc((size_t)pp, sizeof *mb), *it = calloc((size_t)pp, sizeof *it);
	if (!mb || !it) {
		free(mb), free(it);
		return -1;
	}
	double worst = -1;
	for (int s = 0; s < pp; s++) {
		struct ctx x = {
			.c = c, .d = d, .first = s == 0, .last = s == pp - 1,
			.nl = (int)c->stage_layers[s], .B = c->mbs, .T = c->seq, .C = c->h,
			.Cl = c->h / c->tp, .C3 = 3 * c->h / c->tp, .F = c->ffn / c->tp,
			.NH = c->heads / c->tp, .HD = c->h / c->heads, .Vl = c->vocab_padded / c->tp,
			.ck = c->ckpt_layers, .hd = c->hidden_dropout,
		};
		x.N = x.B * x.T;
		x.l = &mb[s];
		micro_batch(&x);
		x.t_mb = total(&mb[s]);
		x.l = &it[s];
		iteration_tail(&x);
		oom |= x.oom;
		double t_mb = total(&mb[s]), t_post = total(&it[s]);
		if (t_mb > g->t_slot)
			g->t_slot = t_mb;
		if (t_post > g->t_post)
			g->t_post = t_post;
		double own = (double)c->micro * t_mb + t_post;
		if (own > worst) {
			worst = own;
			g->stage = s;
		}
	}
	/* the slowest stage's iteration: its micro-batch rows m times, then its tail */
	struct list out = {0};
	struct ctx x = {.c = c, .d = d, .l = &out};
	for (int i = 0; i < mb[g->stage].n; i++) {
		const struct gpumodel_row *r = &mb[g->stage].r[i];
		double m = (double)c->micro;
		add(&x, r->name, r->kind, r->count * m, r->flops * m, r->bytes * m, r->seconds * m);
	}
	for (int i = 0; i < it[g->stage].n; i++) {
		const struct gpumodel_row *r = &it[g->stage].r[i];
		add(&x, r->name, r->kind, r->count, r->flops, r->bytes, r->seconds);
	}
	g->launches = mb[g->stage].launches * (double)c->micro + it[g->stage].launches;
	oom |= x.oom;
	for (int s = 0; s < pp; s++) {
		free(mb[s].r);
		free(it[s].r);
	}
	free(mb);
	free(it);
	g->rows = out.r;
	g->nrows = out.n;
	if (oom)
		return -1;
	g->t_iter = gpumodel_iter_seconds(g, c->pp, c->micro);
	double busy = total(&out);
	for (int i = 0; i < out.n; i++)
		g->share[out.r[i].kind] += busy > 0 ? out.r[i].seconds / busy : 0;
	return 0;
}

double gpumodel_iter_seconds(const struct gpumodel *g, int64_t pp, int64_t m)
{
	return (double)(m + pp - 1) * g->t_slot + g->t_post;
}

void gpumodel_free(struct gpumodel *g)
{
	free(g->rows);
	g->rows = NULL;
	g->nrows = 0;
}
