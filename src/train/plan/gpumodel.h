/* gpumodel - the CUDA backend's training step priced on an H100 SXM or an A100, from the run's
 * configuration alone: the analytic twin of tests/bench/gpu-model.py, for train --dry-run.
 *
 * gpu-model.py prices what the CPU executor recorded of a real step (every kernel with the bytes
 * it touched, every cuBLASLt call, copy and memset); this module writes the same list down from
 * the shapes - the kernels, GEMMs, memsets and copies that model.c makes the CUDA backend launch
 * for one micro-batch and one iteration of a pipeline stage (src/train/cuda/ *.cu), each with the
 * FLOPs and compulsory bytes of its buffers as the kernel reads and writes them (in 32-byte
 * sectors, as the executor counts) - and prices each with gpu-model.py's rules and constants:
 * the larger of FLOPs at a pipe's peak x efficiency and bytes at HBM bandwidth x efficiency, plus
 * a launch gap; GEMMs by shape (cuBLAS's tiles, wave quantisation, K); attention's FLOPs at the
 * tensor-core efficiency of its kernels; a host synchronisation per device-to-host copy
 * (tests/cli/train-gpu-model.sh compares the per-op times of the two on a real profile).
 *
 * What gpu-model.py does not see - one GPU's profile has no peers - is added here: the NCCL
 * calls of the layout (TP's all-reduces of activations inside each layer, the pipeline's
 * send/receive per micro-batch, the tied embedding's gradient between first and last stage,
 * DP's gradient sum - under ZeRO-1 a reduce onto each shard's owner - and ZeRO-1's all-gather,
 * the host collectives of every iteration's decisions), each priced by an alpha-beta model per
 * algorithm (ring, tree) and group size, at NVLink's bandwidth inside a node or at the node's
 * network share across nodes; and the 1F1B pipeline: an iteration of m micro-batches takes
 * m + PP - 1 slots of the slowest stage's micro-batch, plus the work after the last backward
 * (gradient norm, optimizer, the DP gradients) of the slowest stage - the bubble
 * (PP-1)/(m+PP-1).  Everything runs on the backend's one stream, so nothing overlaps - but with
 * --overlap-grad-reduce the DP buckets of the layers (run/buckets.h), whose sums run on a second
 * stream under the last backward: only what outlasts the backward of the layers below the first
 * bucket is counted, and at least the last bucket.
 *
 * cfg.mds (--step-model megatron-deepspeed) writes down what Megatron-DeepSpeed launches for the
 * same flags instead (gpumodel.c says what), priced with the same table; on tr11's flags it gives
 * BLOOM-176B's measured 149 TFLOPs per A100 (tests/cli/train-step-model.sh), lmtk's step 160.7.
 * The table - peaks, GEMM efficiencies by shape, NCCL's terms - is share/lmtk/gpu-model.tsv,
 * compiled in; gpu-model.py reads the same file.
 *
 * Not modelled: evaluation, checkpoint saves, data loading, start-up, failures and restarts; the
 * CUB radix sort of the embedding backward (not in a profile either: tens of microseconds). */
#ifndef TRAIN_GPUMODEL_H
#define TRAIN_GPUMODEL_H

#include <stdint.h>

struct gpumodel_device {
	const char *key;          /* --gpu-model: "h100", "a100" */
	const char *name;         /* "H100 SXM" as gpu-model.py names it */
	double tc, simt;          /* dense bf16 tensor-core and fp32 SIMT peaks, FLOP/s */
	double hbm, pcie;         /* bytes/s */
	int sms;
	double mamf;              /* the best GEMM's share of the tc peak (measured, cited) */
	double clock;             /* Hz: the clock the tc peak is quoted at */
	double mma_sync;          /* the share of the tc peak mma.sync can issue (Hopper: wgmma's) */
	double smem_sm;           /* shared memory per SM, bytes */
	double nvlink;            /* bytes/s per GPU per direction, inside a node */
	double nic;               /* bytes/s per node per direction, across nodes */
	const char *network;      /* in words, for the report */
};

/* share/lmtk/gpu-model.tsv's other parameters (the file says where each comes from) */
#define GM_MAX_TILES 8
struct gpumodel_consts {
	double gemm_train;             /* a GEMM in a step keeps this of its MAMF */
	double k_half;                 /* K efficiency: K / (K + k_half) */
	double split_k;                /* the shortest K part of a split-K GEMM */
	int ntiles, tile_m[GM_MAX_TILES], tile_n[GM_MAX_TILES];
	double tile_eff[GM_MAX_TILES];
	double simt, hbm, best;        /* shares of a peak */
	double gap, gap_graph, sync;   /* seconds per launch (plain, graph), per host sync */
	double nccl_base;              /* seconds per NCCL call */
	double ring_hop[2], tree_hop[2];   /* seconds per step: [0] NVLink, [1] the network */
	double eff_link[2];            /* shares of NVLink's, the network's bandwidth */
	/* attention kernels: shared-memory bytes per clock per SM, exp2 per clock per SM, clocks
	 * from a tile load's issue to its use, the tile loads' bandwidth (times HBM's), the share
	 * of its structural bound a kernel issues, the clocks a block's start and end cost per 128 x 128
	 * tile it loads or stores once, the share of the exp2 work other warps' mma hide (the three
	 * FIT), registers and warps per SM */
	double smem_bw, sfu, latency, l2_x_hbm, issue, block, exp_hidden, regs_sm, warps_sm;
};
const struct gpumodel_consts *gpumodel_consts(void);
/* An attention kernel by its structure (share/lmtk/gpu-model.tsv's attn.* lines; gpumodel.c
 * gpumodel_attn_seconds says how it is priced). */
struct gpumodel_attn {
	int rows, keys;                 /* a block's rows (the forward's queries, the backward's
					 * keys), the rows of the tiles it iterates over (keys; the
					 * backward's queries) */
	int warps[3], rpw[3];           /* its warps, each warp's rows, at HDM 32, 64, 128 */
	int kchunk;                     /* causal masking skips work in chunks of this many keys */
	double products, exps, abytes;  /* tile products; exp2 per score; A-operand bytes read from
					 * shared memory per mma (B's follow from rpw) */
	double overlap;                 /* the share of an iteration's compute the next tiles' load
					 * runs under: 0 loads then computes, 1 all of it */
	double io;                      /* rows x HD tiles a block loads and stores once (Q, O) */
	int regs[3];                    /* registers per thread at HDM 32, 64, 128 (ptxas, sm_90) */
	double tiles, extra;            /* shared memory: 64-row tiles of HDM + 8 16-bit elements,
					 * plus bytes */
};
#define GM_ATTN_VARIANTS 4
struct gpumodel_attn_variant {
	char name[112];
	struct gpumodel_attn fwd, bwd;
};
/* the kernels train runs (attn.fwd, attn.bwd); the what-ifs the report prices beside them
 * (attn.variants: the kernels before each change, and the next one); FlashAttention-2's
 * forward at head dim 128 and 64 (attn.ref.fa2_128, fa2_64), which the FIT constants are fit to */
const struct gpumodel_attn_variant *gpumodel_attn_current(void);
int gpumodel_attn_variants(const struct gpumodel_attn_variant **v);
const struct gpumodel_attn *gpumodel_attn_fa2(int hd);
/* one launch of kernel k over `heads` (B x NH) causal T x T attentions at head dim HD, seconds:
 * its compute at the structure's bound, and the tile loads it does not hide */
double gpumodel_attn_seconds(const struct gpumodel_device *d, const struct gpumodel_attn *k,
			     double heads, int64_t T, int64_t HD);

/* NULL when the name is not one of them; gpumodel_device_keys() lists them ("h100, a100") */
const struct gpumodel_device *gpumodel_device(const char *key);
const char *gpumodel_device_keys(void);

enum gpumodel_opt { GM_ADAMW, GM_LAMB, GM_SGD, GM_BNB };

struct gpumodel_cfg {
	int64_t h, heads, ffn, seq, mbs, vocab, vocab_padded, maxpos;
	int64_t tp, pp, dp, micro;          /* micro: micro-batches per pipeline at full GBS */
	int64_t gpus_per_node;
	const int64_t *stage_layers;        /* pp entries */
	int64_t ckpt_layers;                /* 0: no activation checkpointing */
	int alibi, embed_ln, fp16, zero1, post_ln, reset_pos, reset_attn;
	int overlap;                        /* --overlap-grad-reduce: DP buckets under the backward */
	double bucket;                      /* their size, elements (--ddp-bucket-size) */
	double hidden_dropout, sgd_momentum;   /* attention dropout launches nothing more */
	int deferred;                       /* run.c: the step's scalars stay on the device */
	int graph;                          /* --cuda-graph: the step replayed as a CUDA graph */
	int mds;                            /* --step-model megatron-deepspeed: its kernels, not ours */
	double attn_dropout;                /* Megatron-DeepSpeed launches its dropout */
	const struct gpumodel_attn_variant *attn;   /* NULL: the kernels train runs */
	enum gpumodel_opt opt;
};

enum gpumodel_kind { GM_KIND_GEMM, GM_KIND_ATTN, GM_KIND_OTHER, GM_KIND_COMM, GM_KINDS };
extern const char *const gpumodel_kind_name[GM_KINDS];   /* "gemm", "attention", ... */

/* One kind of operation of an iteration: a kernel by its name as the executor records it
 * ("ln_fwd_k<8>"), a GEMM shape as gpu-model.py prints it ("gemm 768x16384x768 none+bias"),
 * "(memset)", "(memcpy DtoD)", "host syncs + HtoD copies", or a collective ("nccl sum TP") */
struct gpumodel_row {
	char name[80];
	enum gpumodel_kind kind;
	double count, flops, bytes, seconds;
};

struct gpumodel {
	const struct gpumodel_device *dev;
	const char *step_model_name;   /* "lmtk", "megatron-deepspeed" */
	int stage;                /* the slowest stage: rows and shares are its own */
	double t_slot;            /* the slowest stage's micro-batch: forward, backward, recompute, p2p */
	double t_post;            /* after the last backward, the slowest stage's: norm, optimizer, DP */
	double t_iter;            /* (micro + pp - 1) t_slot + t_post */
	struct gpumodel_row *rows;     /* that stage's iteration at `micro` micro-batches */
	int nrows;
	double share[GM_KINDS];   /* of that stage's busy time */
	double launches;          /* kernels, GEMMs, memsets and copies per iteration, that stage */
};

/* 0, or -1 when out of memory */
int gpumodel_run(struct gpumodel *g, const struct gpumodel_cfg *c, const struct gpumodel_device *d);
/* an iteration of m micro-batches per pipeline (a ramp-up's smaller batch), seconds */
double gpumodel_iter_seconds(const struct gpumodel *g, int64_t pp, int64_t m);
/* a GEMM (m,n,k) x batch's share of the device's tc peak, as the model prices it */
double gpumodel_gemm_eff(const struct gpumodel_device *d, int64_t m, int64_t n, int64_t k, int64_t batch);
void gpumodel_free(struct gpumodel *g);

#endif
