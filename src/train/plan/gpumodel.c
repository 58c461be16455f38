#include "train/plan/gpumodel.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model/ops.h"
#include "train/optim/bnb.h"
#include "msg.h"

/* --- the one table: share/lmtk/gpu-model.tsv, which tests/bench/gpu-model.py reads too --------
 * The file is compiled in (the assembler's .incbin, as tokenize's built-in Punkt parameters), so
 * train --dry-run needs nothing at run time, from any directory or an installed copy, and the two
 * readers cannot hold different numbers.  It is parsed once, on first use; a key missing or
 * malformed is a build defect (tests/unit/train_gpumodel.c loads it) and stops train with 3. */
__asm__(".pushsection .rodata\n"
	".type gpumodel_tsv, @object\n"
	".balign 16\n"
	"gpumodel_tsv:\n"
	".incbin \"share/lmtk/gpu-model.tsv\"\n"
	"gpumodel_tsv_end:\n"
	".byte 0\n"
	".popsection\n");
extern const char gpumodel_tsv[], gpumodel_tsv_end[];

#define MAX_DEVICES 8
static struct gpumodel_device devices[MAX_DEVICES];
static int ndevices;
static struct gpumodel_consts consts;
static char keys_text[128];

/* the value of KEY (a copy in buf), or die */
static char *tsv_get(const char *key, char *buf, size_t len)
{
	size_t kl = strlen(key);
	for (const char *l = gpumodel_tsv; l < gpumodel_tsv_end;) {
		const char *e = memchr(l, '\n', (size_t)(gpumodel_tsv_end - l));
		if (!e)
			e = gpumodel_tsv_end;
		if (*l != '#' && (size_t)(e - l) > kl && strncmp(l, key, kl) == 0 && l[kl] == '\t') {
			size_t n = (size_t)(e - l) - kl - 1;
			if (n >= len)
				n = len - 1;
			memcpy(buf, l + kl + 1, n);
			buf[n] = 0;
			return buf;
		}
		l = e + 1;
	}
	die(3, "the compiled-in share/lmtk/gpu-model.tsv has no %s: rebuild train", key);
}

static double tsv_num(const char *key)
{
	char buf[64], *end;
	double v = strtod(tsv_get(key, buf, sizeof buf), &end);
	if (end == buf || *end)
		die(3, "the compiled-in share/lmtk/gpu-model.tsv: %s '%s' is not a number", key, buf);
	return v;
}

static double dev_num(const char *dev, const char *field)
{
	char key[64];
	snprintf(key, sizeof key, "device.%s.%s", dev, field);
	return tsv_num(key);
}

/* --- attention kernels: attn.* lines, "rows=128 warps=8 ..." ------------------------------- */

static struct gpumodel_attn_variant attn_cur, attn_var[GM_ATTN_VARIANTS];
static struct gpumodel_attn attn_fa2[2]; /* head dim 64, 128 */
static int n_attn_var;

static void attn_parse(const char *key, struct gpumodel_attn *k)
{
	char buf[256], *save = NULL;
	int seen = 0;
	memset(k, 0, sizeof *k);
	for (char *w = strtok_r(tsv_get(key, buf, sizeof buf), " ", &save); w;
	     w = strtok_r(NULL, " ", &save)) {
		int used = 0, ok = 0;
		if (sscanf(w, "rows=%d%n", &k->rows, &used) == 1 ||
		    sscanf(w, "keys=%d%n", &k->keys, &used) == 1 ||
		    sscanf(w, "warps=%d,%d,%d%n", &k->warps[0], &k->warps[1], &k->warps[2], &used) == 3 ||
		    sscanf(w, "rpw=%d,%d,%d%n", &k->rpw[0], &k->rpw[1], &k->rpw[2], &used) == 3 ||
		    sscanf(w, "kchunk=%d%n", &k->kchunk, &used) == 1 ||
		    sscanf(w, "products=%lf%n", &k->products, &used) == 1 ||
		    sscanf(w, "exps=%lf%n", &k->exps, &used) == 1 ||
		    sscanf(w, "abytes=%lf%n", &k->abytes, &used) == 1 ||
		    sscanf(w, "overlap=%lf%n", &k->overlap, &used) == 1 ||
		    sscanf(w, "io=%lf%n", &k->io, &used) == 1 ||
		    sscanf(w, "tiles=%lf%n", &k->tiles, &used) == 1 ||
		    sscanf(w, "extra=%lf%n", &k->extra, &used) == 1 ||
		    sscanf(w, "regs=%d,%d,%d%n", &k->regs[0], &k->regs[1], &k->regs[2], &used) == 3)
			ok = !w[used];
		if (!ok)
			die(3, "the compiled-in share/lmtk/gpu-model.tsv: %s: '%s' is not a field", key, w);
		seen++;
	}
	for (int i = 0; i < 3; i++)
		if (k->warps[i] < 1 || k->rpw[i] < 16)
			seen = -1;
	if (seen != 13 || k->rows < 16 || k->keys < 16 ||
	    k->kchunk < 1 || k->products <= 0 || k->overlap < 0 || k->overlap > 1 || k->io < 0 ||
	    k->regs[0] < 1 || k->regs[1] < 1 || k->regs[2] < 1 || k->tiles <= 0 ||
	    k->rows % k->keys)
		die(3, "the compiled-in share/lmtk/gpu-model.tsv: %s needs rows, keys, warps (3), rpw "
		    "(3), kchunk, products, exps, abytes, overlap, io, regs (3), tiles and extra, "
		    "each in range, rows a multiple of keys", key);
}

static void attn_variant(const char *v, struct gpumodel_attn_variant *a)
{
	char key[64];
	snprintf(key, sizeof key, "attn.%s.name", v);
	tsv_get(key, a->name, sizeof a->name);
	snprintf(key, sizeof key, "attn.%s.fwd", v);
	attn_parse(key, &a->fwd);
	snprintf(key, sizeof key, "attn.%s.bwd", v);
	attn_parse(key, &a->bwd);
}

static void attn_load(void)
{
	char buf[256], *save = NULL;
	attn_variant("cur", &attn_cur);
	attn_parse("attn.ref.fa2_64", &attn_fa2[0]);
	attn_parse("attn.ref.fa2_128", &attn_fa2[1]);
	for (char *w = strtok_r(tsv_get("attn.variants", buf, sizeof buf), " ", &save);
	     w && n_attn_var < GM_ATTN_VARIANTS; w = strtok_r(NULL, " ", &save))
		attn_variant(w, &attn_var[n_attn_var++]);
}

const struct gpumodel_attn_variant *gpumodel_attn_current(void)
{
	gpumodel_consts();
	return &attn_cur;
}

int gpumodel_attn_variants(const struct gpumodel_attn_variant **v)
{
	gpumodel_consts();
	*v = attn_var;
	return n_attn_var;
}

const struct gpumodel_attn *gpumodel_attn_fa2(int hd)
{
	gpumodel_consts();
	return &attn_fa2[hd > 64];
}

static void load(void)
{
	static int loaded;
	char buf[256], key[64];
	if (loaded)
		return;
	loaded = 1;
	char *save = NULL, *w = tsv_get("devices", buf, sizeof buf);
	snprintf(keys_text, sizeof keys_text, "%s", "");
	for (w = strtok_r(w, " ", &save); w && ndevices < MAX_DEVICES; w = strtok_r(NULL, " ", &save)) {
		struct gpumodel_device *d = &devices[ndevices++];
		char v[128];
		d->key = strdup(w);
		snprintf(key, sizeof key, "device.%s.name", w);
		d->name = strdup(tsv_get(key, v, sizeof v));
		snprintf(key, sizeof key, "device.%s.network", w);
		d->network = strdup(tsv_get(key, v, sizeof v));
		if (!d->key || !d->name || !d->network)
			die(3, "out of memory for device %s's names in the step model's table (%zu "
			    "bytes)", w, 2 * strlen(w) + 128);
		d->tc = dev_num(w, "tc");
		d->simt = dev_num(w, "simt");
		d->hbm = dev_num(w, "hbm");
		d->pcie = dev_num(w, "pcie");
		d->sms = (int)dev_num(w, "sms");
		d->nvlink = dev_num(w, "nvlink");
		d->nic = dev_num(w, "nic");
		d->mamf = dev_num(w, "mamf");
		d->clock = dev_num(w, "clock");
		d->mma_sync = dev_num(w, "mma_sync");
		d->smem_sm = dev_num(w, "smem_sm");
		snprintf(keys_text + strlen(keys_text), sizeof keys_text - strlen(keys_text), "%s%s",
			 ndevices > 1 ? ", " : "", w);
	}
	struct gpumodel_consts *k = &consts;
	k->gemm_train = tsv_num("gemm.train");
	k->k_half = tsv_num("gemm.k_half");
	k->split_k = tsv_num("gemm.split_k");
	save = NULL;
	for (w = strtok_r(tsv_get("gemm.tiles", buf, sizeof buf), " ", &save);
	     w && k->ntiles < GM_MAX_TILES; w = strtok_r(NULL, " ", &save)) {
		int m, n, used = 0;
		double e;
		if (sscanf(w, "%dx%d:%lf%n", &m, &n, &e, &used) != 3 || w[used] || m <= 0 || n <= 0)
			die(3, "the compiled-in share/lmtk/gpu-model.tsv: gemm.tiles '%s' is not MxN:EFF", w);
		k->tile_m[k->ntiles] = m;
		k->tile_n[k->ntiles] = n;
		k->tile_eff[k->ntiles++] = e;
	}
	k->simt = tsv_num("eff.simt");
	k->hbm = tsv_num("eff.hbm");
	k->best = tsv_num("eff.best");
	k->gap = tsv_num("launch.gap");
	k->gap_graph = tsv_num("launch.gap_graph");
	k->sync = tsv_num("launch.sync");
	k->nccl_base = tsv_num("nccl.base");
	k->ring_hop[0] = tsv_num("nccl.ring.hop_nvlink");
	k->ring_hop[1] = tsv_num("nccl.ring.hop_net");
	k->tree_hop[0] = tsv_num("nccl.tree.hop_nvlink");
	k->tree_hop[1] = tsv_num("nccl.tree.hop_net");
	k->eff_link[0] = tsv_num("nccl.eff_nvlink");
	k->eff_link[1] = tsv_num("nccl.eff_net");
	k->smem_bw = tsv_num("attn.smem_bw");
	k->sfu = tsv_num("attn.sfu");
	k->latency = tsv_num("attn.latency");
	k->l2_x_hbm = tsv_num("attn.l2_x_hbm");
	k->issue = tsv_num("attn.issue");
	k->block = tsv_num("attn.block");
	k->exp_hidden = tsv_num("attn.exp_hidden");
	k->regs_sm = tsv_num("attn.regs_sm");
	k->warps_sm = tsv_num("attn.warps_sm");
	attn_load();
}

const struct gpumodel_consts *gpumodel_consts(void)
{
	load();
	return &consts;
}

const char *gpumodel_device_keys(void)
{
	load();
	return keys_text;
}

#define K (*gpumodel_consts())

const char *const gpumodel_kind_name[GM_KINDS] = {"gemm", "attention", "other", "comm"};

const struct gpumodel_device *gpumodel_device(const char *key)
{
	load();
	for (int i = 0; i < ndevices; i++)
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

/* One launch of attention kernel k over `heads` causal T x T attentions at head dim HD, seconds.
 * The kernel is priced by its structure (share/lmtk/gpu-model.tsv's attn.* lines say each
 * kernel's and where each constant comes from), in SM clocks:
 *   compute: every m16n8k16 mma (2048 MACs of rows x keys x HD per tile product) costs the
 *   larger of its tensor-pipe time at mma.sync's share of the peak and the shared-memory bytes
 *   its operands take through ldmatrix (B: a 16 x 8 fragment, 256 bytes, shared by a warp's
 *   rpw / 16 row groups; A: abytes) at smem_bw; every score an exp2 on the SFU, exp_hidden of
 *   the smaller of the two hidden under the larger (other warps' work); all of it at `issue` of
 *   that bound.  The scores computed are the causal triangle with kchunk-wide steps at the
 *   diagonal: T (T + kchunk) / 2 per head.
 *   loads: each iteration (a block's pass over one tile of `keys` rows) loads two such tiles
 *   (K and V; the backward's Q and dO), latency plus bytes at the SM's share of l2_x_hbm x
 *   HBM; what the overlap share of the iteration's compute does not cover is exposed, and
 *   hidden in turn under the other blocks the SM holds (registers, shared memory plus the 1 KB
 *   the runtime reserves per block, warps; no more than the grid gives each SM): max(compute,
 *   (compute + exposed) / blocks).
 *   a block's start and end (its Q load and O store - io tiles of rows x HD - and the tail of
 *   the grid): `block` clocks per 128 x 128 tile, not hidden. */
double gpumodel_attn_seconds(const struct gpumodel_device *d, const struct gpumodel_attn *k,
			     double heads, int64_t T, int64_t HD)
{
	int hdm = HD <= 32 ? 32 : HD <= 64 ? 64 : 128, ri = hdm == 32 ? 0 : hdm == 64 ? 1 : 2;
	double hdp = ceil((double)HD / 16) * 16, sms = d->sms, t = (double)T;
	double c_mma = 4096.0 / (d->tc / (sms * d->clock) * d->mma_sync);
	double c_lds = (256.0 * 16 / k->rpw[ri] + k->abytes) / K.smem_bw;
	double scores = heads * t * (t + k->kchunk) / 2, mmas = scores * k->products * hdp / 2048;
	double m = mmas * fmax(c_mma, c_lds), e = scores * k->exps / K.sfu;
	double compute = (fmax(m, e) + (1 - K.exp_hidden) * fmin(m, e)) / K.issue;
	/* a block of rows [r0, r0 + rows) iterates over the tiles of keys up to its last row: with
	 * rows a multiple of keys (attn_parse), (q + 1) rows / keys for full block q, and the last,
	 * partial one over (T - 1) / keys + 1 */
	int64_t full = T / k->rows, rk = k->rows / k->keys;
	double nblk = (double)((T + k->rows - 1) / k->rows);
	double iters = (double)rk * (double)full * (double)(full + 1) / 2 +
		       (T % k->rows ? (double)((T - 1) / k->keys + 1) : 0);
	iters *= heads;
	nblk *= heads;
	double l2 = K.l2_x_hbm * d->hbm / (sms * d->clock); /* bytes per clock per SM */
	double load = K.latency + 2 * k->keys * hdp * 2 / l2;
	double exposed = iters * fmax(0, load - k->overlap * compute / iters);
	double regs = ceil(k->regs[ri] / 8.0) * 8 * 32 * k->warps[ri];
	double smem = k->tiles * 64 * (hdm + 8) * 2 + k->extra + 1024;
	double blocks = floor(K.regs_sm / regs);
	blocks = fmin(blocks, floor(d->smem_sm / smem));
	blocks = fmin(blocks, floor(K.warps_sm / k->warps[ri]));
	blocks = fmax(fmin(blocks, ceil(nblk / sms)), 1);
	double ends = nblk * K.block * k->io * k->rows * hdp / (2.0 * 128 * 128);
	double clocks = (fmax(compute, (compute + exposed) / blocks) + ends) / sms;
	return clocks / d->clock;
}

/* an attention kernel: `units` causal T x T x HD tile products per head, kernel k */
static void attention(struct ctx *x, const char *base, int units, const struct gpumodel_attn *k,
		      double rd, double wr)
{
	char name[64];
	int hdm = x->HD <= 32 ? 32 : x->HD <= 64 ? 64 : 128;
	double flops = (double)units * (double)x->B * (double)x->NH * (double)x->T * (double)x->T *
		       (double)x->HD;
	snprintf(name, sizeof name, "%s<%d>", base, hdm);
	add(x, name, GM_KIND_ATTN, 1, flops, rd + wr,
	    fmax(mem_s(x, rd + wr),
		 gpumodel_attn_seconds(x->d, k, (double)(x->B * x->NH), x->T, x->HD)) + gap(x));
	x->l->launches++;
}

/* A GEMM's share of the tc peak (share/lmtk/gpu-model.tsv): the best of cuBLAS's tiles after
 * wave quantisation - output tiles (times the batch) over the SMs; few tiles and a long k (the
 * weight gradients: k = tokens) are split along k, as cuBLAS's heuristics do - each at the
 * table's share of the MAMF, times K / (K + k_half) for its part of k.  gpu-model.py's
 * gemm_eff is the same function. */
double gpumodel_gemm_eff(const struct gpumodel_device *d, int64_t m, int64_t n, int64_t k, int64_t batch)
{
	double best = 0;
	int64_t sms = d->sms;
	for (int i = 0; i < K.ntiles; i++) {
		int64_t tm = K.tile_m[i], tn = K.tile_n[i];
		int64_t tiles = ((m + tm - 1) / tm) * ((n + tn - 1) / tn) * batch;
		int64_t split = (int64_t)((double)k / K.split_k) < sms / tiles ?
				(int64_t)((double)k / K.split_k) : sms / tiles;
		if (split < 1)
			split = 1;
		int64_t work = tiles * split, waves = (work + sms - 1) / sms;
		double kk = (double)k / (double)split;
		double eff = K.gemm_train * d->mamf * K.tile_eff[i] * kk / (kk + K.k_half) *
			     (double)work / (double)(waves * sms);
		if (eff > best)
			best = eff;
	}
	return best;
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
	double eff = gpumodel_gemm_eff(x->d, m, n, k, 1);
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

enum nccl_op { NCCL_ALLREDUCE, NCCL_HALF };   /* HALF: a reduce-scatter, all-gather, reduce */

/* The link a group's transfers cross and its bandwidth per transfer: NVLink inside a node; a
 * group spanning nodes gets its node's network divided by the node's groups crossing it */
static double link_of(const struct ctx *x, struct group gr, int *net, int64_t *local, int64_t *nodes)
{
	int64_t gpn = x->c->gpus_per_node > 0 ? x->c->gpus_per_node : 1;
	int64_t per_node = gr.stride >= gpn ? 1 : gpn / gr.stride;
	if (per_node > gr.g)
		per_node = gr.g;
	if (per_node < 1)
		per_node = 1;
	*local = per_node;
	*nodes = (gr.g + per_node - 1) / per_node;
	*net = gr.g > per_node;
	if (!*net)
		return x->d->nvlink * K.eff_link[0];
	return x->d->nic * K.eff_link[1] / (double)(gpn / per_node > 0 ? gpn / per_node : 1);
}

/* NCCL's alpha-beta cost of one call (share/lmtk/gpu-model.tsv says where the terms come from):
 * alpha seconds plus beta seconds per byte of the buffer.  A ring takes 2(g-1) steps for an
 * all-reduce (g-1 for the halves), each moving 1/g of the bytes through every link; a tree
 * (all-reduce only) a chain inside each node and a binary tree across them, every link carrying
 * the bytes up and down.  The faster of the two at `bytes`, as NCCL's tuner picks. */
static void nccl_ab(const struct ctx *x, struct group gr, enum nccl_op op, double bytes,
		    double *alpha, double *beta)
{
	int net;
	int64_t local, nodes;
	double bw = link_of(x, gr, &net, &local, &nodes), g = (double)gr.g;
	double steps = op == NCCL_ALLREDUCE ? 2 * (g - 1) : g - 1;
	*alpha = K.nccl_base + steps * K.ring_hop[net];
	*beta = steps / g / bw;
	if (op == NCCL_ALLREDUCE && nodes > 1) {
		double ts = 2 * ((double)(local - 1) + ceil(log2((double)nodes)));
		double ta = K.nccl_base + ts * K.tree_hop[net], tb = 2 / bw;
		if (ta + tb * bytes < *alpha + *beta * bytes) {
			*alpha = ta;
			*beta = tb;
		}
	}
}

static double nccl_seconds(const struct ctx *x, struct group gr, enum nccl_op op, double bytes)
{
	double al, be;
	if (gr.g <= 1)
		return 0;
	nccl_ab(x, gr, op, bytes, &al, &be);
	return al + be * bytes;
}

/* a sum as dist_nccl.cu does it: reduce-scatter, then all-gather */
static void comm_sum(struct ctx *x, const char *name, struct group gr, double bytes)
{
	if (gr.g <= 1)
		return;
	add(x, name, GM_KIND_COMM, 2, 0, bytes, 2 * nccl_seconds(x, gr, NCCL_HALF, bytes));
}

/* one all-reduce call (Megatron-DeepSpeed: torch.distributed.all_reduce) */
static void comm_allreduce(struct ctx *x, const char *name, struct group gr, double bytes)
{
	if (gr.g <= 1)
		return;
	add(x, name, GM_KIND_COMM, 1, 0, bytes, nccl_seconds(x, gr, NCCL_ALLREDUCE, bytes));
}

/* an all-gather of `bytes` in all ((g-1)/g of them arrive) */
static void comm_gather(struct ctx *x, const char *name, struct group gr, double bytes)
{
	if (gr.g <= 1)
		return;
	add(x, name, GM_KIND_COMM, 1, 0, bytes, nccl_seconds(x, gr, NCCL_HALF, bytes));
}

/* The DP gradients (run/buckets.c): a sum (reduce-scatter + all-gather) of `bytes`, or under
 * ZeRO-1 a reduce onto each shard's owner (a reduce-scatter's (g-1)/g of them), in `calls`
 * buckets; seconds */
static double dp_seconds(struct ctx *x, struct group gr, double bytes, double calls, int zero)
{
	double al, be, k = zero ? 1 : 2;
	nccl_ab(x, gr, NCCL_HALF, bytes / calls, &al, &be);
	return k * calls * al + k * be * bytes;
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
	double bw = inter ? x->d->nic * K.eff_link[1] / (double)gpn : x->d->nvlink * K.eff_link[0];
	add(x, "nccl send/recv PP", GM_KIND_COMM, 1, 0, bytes,
	    K.nccl_base + K.ring_hop[inter] + bytes / bw);
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

static const struct gpumodel_attn_variant *attn_of(const struct ctx *x)
{
	return x->c->attn ? x->c->attn : gpumodel_attn_current();
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
	attention(x, "attn_fwd_mma_k", 2, &attn_of(x)->fwd, sec(x->N * x->C3 * 2) + attn_extra(x),
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
	/* D = rowsum(dO x O), and the zeroing of the dQ protocol's semaphores (one per query tile)
	 * and tickets (one per head) for the backward that follows */
	double nqt = (double)((x->T + 63) / 64);
	kernel(x, "attn_dsum_k", 2 * o, lse + sec(x->B * x->NH * (nqt + 1) * 4));
	/* one kernel, 5 tile products; dQ is summed in fp32 (B,NH,T,HD) in key-tile order.  A
	 * query tile that one key tile alone sees (causally the first 64 rows) writes dQ without the
	 * sums; in the others key tile 0's exchange, the adds between and the semaphores' and
	 * tickets' counts are atomics that stay in L2, the last contributor reads the sum once and
	 * the waiting blocks the semaphores (attention.cu's header) */
	double multi = x->T > 64 ? (double)(x->T - 64) : 0.0;
	double acc = sec(x->B * multi * x->Cl * 4), sem = sec(x->B * x->NH * (nqt - 1) * 4);
	attention(x, "attn_bwd_mma_k", 5, &attn_of(x)->bwd, qkv + o + 2 * lse + attn_extra(x) + acc + sem,
		  3 * o);
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
		} else if (c->deferred) {   /* layers.c vocab_parallel_xent, on the device */
			htod(x, n4);
			snprintf(n, sizeof n, "xent_stats_k<%s>", v8(x->Vl));
			kernel(x, n, logits + n4, 3 * n4);
			memcpy_dtod(x, n4);
			comm_allreduce(x, "nccl max TP (cross-entropy)", tp_group(x), n4);
			kernel(x, "xent_rescale_k", 3 * n4, n4);
			comm_sum(x, "nccl sum TP (cross-entropy)", tp_group(x), 2 * n4);
			kernel(x, "xent_finish_k", 4 * n4 + 32, 2 * n4 + 32);
			snprintf(n, sizeof n, "xent_grad_k<%s>", v8(x->Vl));
			kernel(x, n, logits + 2 * n4, logits);
			kernel(x, "loss_acc_k", n4 + 32, 32);
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

/* This stage's tensors (tensors()): their sizes, which are replicated over TP, which is the word
 * embedding, and the totals P and P_wte.  -1 (x->oom set) when out of memory. */
struct stage_tensors {
	int n;
	int64_t *numel;
	int *repl, *wte;
	double P, P_wte;
};

static int stage_tensors(struct ctx *x, struct stage_tensors *t)
{
	int cap = 12 * x->nl + 7;
	*t = (struct stage_tensors){0};
	t->numel = calloc((size_t)cap, sizeof *t->numel);
	t->repl = calloc((size_t)cap, sizeof *t->repl);
	t->wte = calloc((size_t)cap, sizeof *t->wte);
	if (!t->numel || !t->repl || !t->wte) {
		x->oom = 1;
		free(t->numel), free(t->repl), free(t->wte);
		return -1;
	}
	t->n = tensors(x, t->numel, t->repl, t->wte);
	for (int i = 0; i < t->n; i++) {
		t->P += (double)t->numel[i];
		if (t->wte[i])
			t->P_wte = (double)t->numel[i];
	}
	return 0;
}

/* one part of the norm's squares added into the struct (ops.h sumsq_acc) */
static void sumsq_acc(struct ctx *x, double n)
{
	double G = ceil(n / 4096);
	if (G > 1024)
		G = 1024;
	kernel(x, "sumsq_part_k", sec(n * 4), sec(G * 8));
	kernel(x, "sumsq_fin_k", sec(G * 8) + 32, 32);   /* reads the accumulator too */
}

/* P: the elements of the norm's one part (no PP), or 0 with the stage's tensors (PP: each its
 * own part, optim.c norm_part) */
static void deferred_tail(struct ctx *x, double P, const struct stage_tensors *st)
{
	const struct gpumodel_cfg *c = x->c;
	htod(x, sizeof(struct ops_step));   /* the struct's inputs */
	htod(x, 4);                         /* the masked targets' count */
	if (c->tp * c->dp * c->pp > 1) {
		/* the world's loss (the last stage's, over DP) and counts, on the device (iter.c) */
		comm_sum(x, "nccl sum PP (the step's loss)", pp_group(x), 16);
		comm_sum(x, "nccl sum DP (the step's loss)", dp_group(x), 16);
		comm_sum(x, "nccl sum (the step's target counts)", world_group(x), 4);
		comm_sum(x, "nccl sum (the step's target counts)", world_group(x), 4);
		comm_allreduce(x, "nccl max (the step's stop)", world_group(x), 4);
	}
	if (P > 0) {
		sumsq_acc(x, P);
	} else {
		for (int i = 0; i < st->n; i++)
			if (st->numel[i] > 0 && !(st->wte[i] && !x->first))
				sumsq_acc(x, (double)st->numel[i]);
	}
	if (c->zero1 && c->dp > 1)
		comm_sum(x, "nccl sum DP (the step's norm)", dp_group(x), 8);
	if (c->pp > 1)
		comm_sum(x, "nccl sum PP (the step's norm)", pp_group(x), 8);
	/* reads the inputs and the sums (then writes the decision), the previous struct's `taken`,
	 * the bad-target count */
	kernel(x, "step_decide_k", span(0, offsetof(struct ops_step, taken)) + 64,
	       span(offsetof(struct ops_step, bad), sizeof(struct ops_step)));
}

/* run.c step_grads after the micro-batches, and optim.c optim_step */
static void iteration_tail(struct ctx *x)
{
	const struct gpumodel_cfg *c = x->c;
	struct stage_tensors st;
	if (stage_tensors(x, &st) < 0)
		return;
	int nt = st.n, *repl = st.repl, *wte = st.wte;
	int64_t *numel = st.numel;
	double P = st.P, P_wte = st.P_wte;
	int dp = (int)c->dp, tpar = c->tp > 1, zero = c->zero1 && dp > 1;

	if (c->deferred)
		memset_(x, 4);   /* the bad-target count, once per step */
	memset_(x, P * 4);   /* model_zero_grad, before the first micro-batch */
	if (c->pp > 1) {
		if (!c->deferred)
			host_coll(x, pp_group(x), 8);   /* the loss */
		if (x->first || x->last)
			comm_sum(x, "nccl sum embedding (tied gradient)",
				 (struct group){2, (c->pp - 1) * c->tp * c->dp}, P_wte * 4);
	}
	if (dp > 1) {
		comm_dp(x, dp_group(x), P, zero);
		if (!c->deferred)
			host_coll(x, dp_group(x), 8);
	}
	if (tpar)
		for (int i = 0; i < nt; i++)
			if (repl[i]) {
				comm_sum(x, "nccl sum TP (replicated gradients)", tp_group(x), numel[i] * 4.0);
				kernel(x, "scale_k", sec(numel[i] * 4.0), sec(numel[i] * 4.0));
			}
	/* the decisions every rank takes together: failed reads, bad targets, bad data, the stop
	 * (a signal, the kill switch, the elapsed time); deferred, they travel with the step's
	 * scalars (deferred_tail) */
	for (int i = 0; i < (c->deferred ? 0 : 4); i++)
		host_coll(x, world_group(x), 4);

	/* the gradient norm: per tensor with TP or PP (each shard once), else the one buffer */
	if (c->deferred) {
		deferred_tail(x, c->pp > 1 ? 0 : zero ? P / dp : P, &st);
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
		kernel(x, "nonfinite_k", sec((zero ? P / dp : P) * 4), 0);
		comm_allreduce(x, "nccl max (the step's overflow)", world_group(x), 4);
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

/* --- Megatron-DeepSpeed's step (--step-model megatron-deepspeed) ------------------------------
 * What BigScience's Megatron-DeepSpeed launches for the same flags, priced with the same table:
 * PyTorch's eager kernels and Megatron's fused ones (apex's fused layer norm, the JIT-fused
 * bias-GeLU and bias-dropout-add, the fused scale-mask-softmax), attention unfused - the scores
 * (B, heads/TP, T, T) written by a batched GEMM (baddbmm, with ALiBi as its input), softmaxed,
 * dropped out and read back by the second batched GEMM, all of them in bf16 and all of T x T
 * (the mask is applied after the products) - each weight gradient a GEMM of its own plus an add
 * into the parameter's bf16 .grad and a bias gradient a column sum, the TP all-reduces of
 * torch.distributed; --checkpoint-activations recomputes every layer's forward (TP all-reduces
 * included) before its backward.  DeepSpeed's pipeline engine (deepspeed/runtime/pipe) sends the
 * whole activation from every TP rank between stages and runs the 1F1B schedule (m + PP - 1
 * slots); after the last backward its BF16 optimizer (the ZeRO-1 tr11 ran: fp32 state sharded
 * over DP) folds the bf16 gradients into fp32, all-reduces the tied embedding's between the first
 * and last stage and every gradient over DP in fp32 (buckets of 5e8 elements), takes the norm,
 * steps Adam on its shard, and all-gathers the updated bf16 weights over DP.  Nothing overlaps:
 * one stream, blocking collectives. */
static void mds_gemm(struct ctx *x, const char *tag, int64_t m, int64_t n, int64_t k, int64_t batch,
		     double c, double d)
{
	char name[80];
	double flops = 2.0 * (double)m * (double)n * (double)k * (double)batch;
	double bytes = (double)batch * ((double)m * k * 2 + (double)k * n * 2 + (double)m * n * (c + d));
	double eff = gpumodel_gemm_eff(x->d, m, n, k, batch);
	double s = fmax(flops / (x->d->tc * eff), mem_s(x, bytes));
	if (batch > 1)
		snprintf(name, sizeof name, "bmm %lldx%lldx%lld x%lld %s", (long long)m, (long long)n,
			 (long long)k, (long long)batch, tag);
	else
		snprintf(name, sizeof name, "gemm %lldx%lldx%lld %s", (long long)m, (long long)n,
			 (long long)k, tag);
	add(x, name, batch > 1 ? GM_KIND_ATTN : GM_KIND_GEMM, 1, flops, bytes, s + gap(x));
	x->l->launches++;
}

/* a memory-bound kernel of the unfused attention (its share is attention's) */
static void mds_attn_kernel(struct ctx *x, const char *name, double rd, double wr)
{
	add(x, name, GM_KIND_ATTN, 1, 0, rd + wr, mem_s(x, rd + wr) + gap(x));
	x->l->launches++;
}

/* a linear layer's backward: dX (when asked), dW and its add into .grad, the bias's column sum */
static void mds_linear_bwd(struct ctx *x, int64_t in, int64_t out, int dinp, int bias)
{
	if (dinp)
		mds_gemm(x, "dgrad", in, x->N, out, 1, 0, 2);
	mds_gemm(x, "wgrad", out, in, x->N, 1, 0, 2);
	kernel(x, "grad accumulate (bf16 .grad +=)", 2 * sec(in * out * 2.0), sec(in * out * 2.0));
	if (bias)
		kernel(x, "bias grad (column sum)", sec(x->N * out * 2.0), sec(out * 2.0));
}

static void mds_ln(struct ctx *x)   /* apex FusedLayerNorm forward */
{
	kernel(x, "fused_layer_norm fwd", sec(x->N * x->C * 2) + 2 * sec(x->C * 2),
	       sec(x->N * x->C * 2) + 2 * sec(x->N * 4));
}

static void mds_ln_bwd(struct ctx *x)
{
	double nc = sec(x->N * x->C * 2);
	kernel(x, "fused_layer_norm bwd", 2 * nc + 2 * sec(x->N * 4) + sec(x->C * 2), nc);
	kernel(x, "fused_layer_norm bwd (gamma, beta)", 2 * nc, 2 * sec(x->C * 4));
}

static void mds_bda(struct ctx *x)   /* the JIT-fused bias-dropout-add */
{
	double nc = sec(x->N * x->C * 2);
	kernel(x, "bias_dropout_add fwd", 2 * nc, nc + (x->hd > 0 ? sec(x->N * x->C) : 0));
}

static void mds_layer_fwd(struct ctx *x)
{
	const struct gpumodel_cfg *c = x->c;
	double nc = sec(x->N * x->C * 2), S = sec((double)x->B * x->NH * x->T * x->T * 2);
	mds_ln(x);
	mds_gemm(x, "qkv", x->C3, x->N, x->C, 1, 0, 2);
	mds_gemm(x, "scores (baddbmm)", x->T, x->T, x->HD, x->B * x->NH, c->alibi ? 0 : 0, 2);
	mds_attn_kernel(x, "scaled_masked_softmax fwd", S, S);
	if (c->attn_dropout > 0)
		mds_attn_kernel(x, "attention dropout fwd", S, S + S / 2);
	mds_gemm(x, "context (bmm)", x->T, x->HD, x->T, x->B * x->NH, 0, 2);
	kernel(x, "context permute (contiguous)", sec(x->N * x->Cl * 2), sec(x->N * x->Cl * 2));
	mds_gemm(x, "dense", x->C, x->N, x->Cl, 1, 0, 2);
	comm_allreduce(x, "nccl all-reduce TP (activations)", tp_group(x), nc);
	mds_bda(x);
	mds_ln(x);
	mds_gemm(x, "h_to_4h", x->F, x->N, x->C, 1, 0, 2);
	kernel(x, "bias_gelu fwd", sec(x->N * x->F * 2), sec(x->N * x->F * 2));
	mds_gemm(x, "4h_to_h", x->C, x->N, x->F, 1, 0, 2);
	comm_allreduce(x, "nccl all-reduce TP (activations)", tp_group(x), nc);
	mds_bda(x);
}

static void mds_layer_bwd(struct ctx *x)
{
	const struct gpumodel_cfg *c = x->c;
	double nc = sec(x->N * x->C * 2), S = sec((double)x->B * x->NH * x->T * x->T * 2);
	double nf = sec(x->N * x->F * 2);
	kernel(x, "bias_dropout_add bwd", nc + (x->hd > 0 ? sec(x->N * x->C) : 0), nc);
	mds_linear_bwd(x, x->F, x->C, 1, 1);
	kernel(x, "bias_gelu bwd", 2 * nf, nf);
	mds_linear_bwd(x, x->C, x->F, 1, 1);
	comm_allreduce(x, "nccl all-reduce TP (activations)", tp_group(x), nc);
	mds_ln_bwd(x);
	kernel(x, "residual grad add", 2 * nc, nc);
	kernel(x, "bias_dropout_add bwd", nc + (x->hd > 0 ? sec(x->N * x->C) : 0), nc);
	mds_linear_bwd(x, x->Cl, x->C, 1, 1);
	kernel(x, "context permute (contiguous)", sec(x->N * x->Cl * 2), sec(x->N * x->Cl * 2));
	mds_gemm(x, "d probs (bmm)", x->T, x->T, x->HD, x->B * x->NH, 0, 2);
	mds_gemm(x, "d values (bmm)", x->T, x->HD, x->T, x->B * x->NH, 0, 2);
	if (c->attn_dropout > 0)
		mds_attn_kernel(x, "attention dropout bwd", S + S / 2, S);
	mds_attn_kernel(x, "scaled_masked_softmax bwd", 2 * S, S);
	mds_gemm(x, "d queries (bmm)", x->T, x->HD, x->T, x->B * x->NH, 0, 2);
	mds_gemm(x, "d keys (bmm)", x->T, x->HD, x->T, x->B * x->NH, 0, 2);
	mds_linear_bwd(x, x->C, x->C3, 1, 1);
	comm_allreduce(x, "nccl all-reduce TP (activations)", tp_group(x), nc);
	mds_ln_bwd(x);
	kernel(x, "residual grad add", 2 * nc, nc);
}

static void mds_micro_batch(struct ctx *x)
{
	const struct gpumodel_cfg *c = x->c;
	double nc = sec(x->N * x->C * 2), n4 = sec(x->N * 8);
	if (x->first) {   /* VocabParallelEmbedding: mask the ids, look up, zero the others', sum */
		htod(x, n4);
		kernel(x, "embedding (vocab-parallel) fwd", 3 * n4 + nc, nc + n4);
		comm_allreduce(x, "nccl all-reduce TP (activations)", tp_group(x), nc);
		if (!c->alibi)
			kernel(x, "position embedding add", 2 * nc, nc);
		if (c->embed_ln)
			mds_ln(x);
		if (x->hd > 0)
			kernel(x, "embedding dropout", nc, nc + sec(x->N * x->C));
	}
	for (int l = 0; l < x->nl; l++)
		mds_layer_fwd(x);
	if (x->last) {   /* final norm, logits, vocab-parallel cross entropy in fp32 */
		double lg = sec((double)x->N * x->Vl * 2), lf = sec((double)x->N * x->Vl * 4);
		mds_ln(x);
		mds_gemm(x, "logits", x->Vl, x->N, x->C, 1, 0, 2);
		kernel(x, "logits to fp32", lg, lf);
		kernel(x, "cross entropy: max", lf, sec(x->N * 4));
		comm_allreduce(x, "nccl all-reduce TP (cross entropy)", tp_group(x), sec(x->N * 4));
		kernel(x, "cross entropy: exp, sum, softmax", 2 * lf, lf);
		comm_allreduce(x, "nccl all-reduce TP (cross entropy)", tp_group(x), sec(x->N * 4));
		comm_allreduce(x, "nccl all-reduce TP (cross entropy)", tp_group(x), sec(x->N * 4));
		kernel(x, "cross entropy bwd", lf, lg);
		mds_linear_bwd(x, x->C, x->Vl, 1, 0);
		comm_allreduce(x, "nccl all-reduce TP (activations)", tp_group(x), nc);
		mds_ln_bwd(x);
	}
	for (int l = 0; l < x->nl; l++) {
		if (x->ck)
			mds_layer_fwd(x);   /* the recomputation before each layer's backward */
		mds_layer_bwd(x);
	}
	if (x->first) {
		double vc = sec((double)x->Vl * x->C * 2);
		if (c->embed_ln)
			mds_ln_bwd(x);
		kernel(x, "embedding dense bwd", 2 * n4 + nc, vc);
		kernel(x, "grad accumulate (bf16 .grad +=)", 2 * vc, vc);
	}
	double xb = (double)x->N * x->C * 2;   /* DeepSpeed sends each TP rank's whole activation */
	if (!x->first)
		p2p(x, xb);
	if (!x->last)
		p2p(x, xb);
}

static void mds_iteration_tail(struct ctx *x)
{
	const struct gpumodel_cfg *c = x->c;
	struct stage_tensors st;
	if (stage_tensors(x, &st) < 0)
		return;
	double P = st.P, P_wte = st.P_wte;
	double dp = (double)c->dp, Ps = P / dp;
	/* the BF16 optimizer: bf16 gradients into the fp32 flat buffer */
	kernel(x, "bf16 grads into fp32", sec(P * 2) + sec(P * 4), sec(P * 4));
	if (c->pp > 1 && (x->first || x->last))
		comm_allreduce(x, "nccl all-reduce tied embedding (fp32)",
			       (struct group){2, (c->pp - 1) * c->tp * c->dp}, P_wte * 4);
	if (c->dp > 1)
		for (double left = P; left > 0; left -= 5e8)
			comm_allreduce(x, "nccl all-reduce DP (fp32 gradients)", dp_group(x),
				       fmin(left, 5e8) * 4);
	kernel(x, "gradient norm", sec(Ps * 4), 32);
	for (int i = 0; i < 3; i++)   /* the norm over DP, TP and PP */
		comm_allreduce(x, "nccl all-reduce (norm)", i == 0 ? dp_group(x) : i == 1 ? tp_group(x)
			       : pp_group(x), 4);
	dtoh(x);
	kernel(x, "clip", sec(Ps * 4), sec(Ps * 4));
	kernel(x, "FusedAdam (shard)", 16 * Ps, 12 * Ps);
	kernel(x, "fp32 to bf16 (shard)", sec(Ps * 4), sec(Ps * 2));
	if (c->dp > 1)
		comm_gather(x, "nccl all-gather DP (bf16 weights)", dp_group(x), P * 2);
	memset_(x, P * 2);   /* zero the bf16 .grad */
	memset_(x, P * 4);   /* and the fp32 buffer */
	free(st.numel), free(st.repl), free(st.wte);
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
	g->step_model_name = c->mds ? "megatron-deepspeed" : "lmtk";
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
		if (c->mds)
			mds_micro_batch(&x);
		else
			micro_batch(&x);
		x.t_mb = total(&mb[s]);
		x.l = &it[s];
		if (c->mds)
			mds_iteration_tail(&x);
		else
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
