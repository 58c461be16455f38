/* train_gpumodel.c - the step model's parts that gpu-model.py has no twin for, worked by hand:
 * where a collective runs (NVLink inside a node, the node's network shared by the groups that
 * cross it), what a ring sum and a pipeline send cost, the 1F1B iteration as slots plus tail;
 * and one GEMM's wave quantisation. */
#include "t.h"
#include "train/plan/gpumodel.h"

#include <math.h>
#include <string.h>

static const struct gpumodel_row *find(const struct gpumodel *g, const char *name)
{
	for (int i = 0; i < g->nrows; i++)
		if (strcmp(g->rows[i].name, name) == 0)
			return &g->rows[i];
	return NULL;
}

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * fabs(b);
}

/* a small GPT: 2 layers per stage, h 1024, 16 heads, seq 1024, MBS 4, vocabulary 50304 */
static struct gpumodel_cfg cfg(int64_t tp, int64_t pp, int64_t dp, int64_t gpn, int64_t *layers)
{
	struct gpumodel_cfg c = {
		.h = 1024, .heads = 16, .ffn = 4096, .seq = 1024, .mbs = 4, .vocab = 50257,
		.vocab_padded = 50304, .maxpos = 1024, .tp = tp, .pp = pp, .dp = dp, .micro = 8,
		.gpus_per_node = gpn, .stage_layers = layers,
		.hidden_dropout = 0.1, .opt = GM_ADAMW,
	};
	for (int64_t i = 0; i < pp; i++)
		layers[i] = 2;
	return c;
}

/* one NCCL ring call's alpha-beta as share/lmtk/gpu-model.tsv states it: base, steps x hop, and
 * steps/g of the bytes at the link's bandwidth */
static double ring(const struct gpumodel_consts *k, int net, double g, double steps, double bytes, double bw)
{
	return k->nccl_base + steps * k->ring_hop[net] + steps / g * bytes / bw;
}

int main(void)
{
	const struct gpumodel_device *a100 = gpumodel_device("a100");
	const struct gpumodel_consts *k = gpumodel_consts();
	int64_t layers[4];
	struct gpumodel g;

	T_CASE("devices_by_name_from_the_table") {
		T_ASSERT(a100 && strcmp(a100->name, "A100 SXM") == 0);
		T_ASSERT(gpumodel_device("h100") && gpumodel_device("h100")->tc == 989.4e12);
		T_ASSERT(!gpumodel_device("v100"));
		T_ASSERT(strcmp(gpumodel_device_keys(), "h100, a100") == 0);
		/* every parameter of the table read: the tiles, the NCCL terms */
		T_ASSERT(k->ntiles >= 2 && k->tile_m[0] > 0 && k->tile_eff[0] > 0);
		T_ASSERT(k->nccl_base > 0 && k->ring_hop[1] > k->ring_hop[0] && k->eff_link[1] > 0);
		T_ASSERT(a100->mamf > 0.5 && a100->mamf < 1 && k->gemm_train > 0 && k->gemm_train <= 1);
	}

	T_CASE("tp_inside_a_node_runs_on_nvlink") {
		struct gpumodel_cfg c = cfg(8, 1, 1, 8, layers);
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *r = find(&g, "nccl sum TP (activations)");
		/* per micro-batch: 2 sums a layer forward, 2 backward, 2 layers, the embedding's and
		 * the output layer's input gradient: 10 sums of (N,C) bf16, each a reduce-scatter and
		 * an all-gather: 7 ring steps, 7/8 of the bytes over NVLink */
		double bytes = 4.0 * 1024 * 1024 * 2;
		double one = 2 * ring(k, 0, 8, 7, bytes, 300e9 * k->eff_link[0]);
		T_ASSERT(r && r->count == 8 * 10 * 2);
		T_ASSERT(r && near(r->seconds, 8 * 10 * one));
		gpumodel_free(&g);
	}

	T_CASE("tp_across_nodes_shares_the_network") {
		struct gpumodel_cfg c = cfg(8, 1, 1, 1, layers);   /* 8 nodes of one GPU */
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *r = find(&g, "nccl sum TP (activations)");
		double bytes = 4.0 * 1024 * 1024 * 2;
		double one = 2 * ring(k, 1, 8, 7, bytes, 50e9 * k->eff_link[1]);
		T_ASSERT(r && near(r->seconds, 8 * 10 * one));
		gpumodel_free(&g);
	}

	T_CASE("dp_ring_over_nodes_shares_the_nic_with_the_nodes_other_rings") {
		/* TP 4 x DP 8 on 8-GPU nodes: a DP group has 2 members per node (stride 4), so 4 DP
		 * rings cross each node's network at once: a quarter of it each */
		struct gpumodel_cfg c = cfg(4, 1, 8, 8, layers);
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *r = find(&g, "nccl sum DP (gradients)");
		double P = 50304.0 * 1024 / 4 + 1024.0 * 1024 + 2 * (12.0 * 1024 * 1024 / 4 +
			   (3.0 * 1024 + 4096) / 4 + 6 * 1024) + 2 * 1024;
		T_ASSERT(r && near(r->bytes, 4 * P));
		T_ASSERT(r && near(r->seconds, 2 * ring(k, 1, 8, 7, 4 * P, 50e9 * k->eff_link[1] / 4)));
		gpumodel_free(&g);
	}

	T_CASE("zero1_reduces_onto_shards_and_overlap_hides_the_layers_buckets") {
		/* ZeRO-1: a reduce, (g-1)/g of the bytes once, not a sum's twice */
		struct gpumodel_cfg c = cfg(4, 1, 8, 8, layers);
		c.zero1 = 1;
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *r = find(&g, "nccl reduce DP (ZeRO-1 gradients)");
		double P = 50304.0 * 1024 / 4 + 1024.0 * 1024 + 2 * (12.0 * 1024 * 1024 / 4 +
			   (3.0 * 1024 + 4096) / 4 + 6 * 1024) + 2 * 1024;
		double Pl = 2 * (12.0 * 1024 * 1024 / 4 + (3.0 * 1024 + 4096) / 4 + 6 * 1024);
		double bw = 50e9 * k->eff_link[1] / 4;
		T_ASSERT(r && near(r->bytes, 4 * P) && r->count == 1);
		T_ASSERT(r && near(r->seconds, ring(k, 1, 8, 7, 4 * P, bw)));
		T_ASSERT(!find(&g, "nccl sum DP (gradients)"));
		double tail = g.t_post, full = r->seconds;
		gpumodel_free(&g);
		/* --overlap-grad-reduce, one layer a bucket: the layers' buckets outlast the last
		 * layer's backward window only in part; at least the last bucket is exposed */
		c.overlap = 1;
		c.bucket = 1;
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *b = find(&g, "nccl reduce DP (ZeRO-1 gradients, layers' buckets: exposed part)");
		r = find(&g, "nccl reduce DP (ZeRO-1 gradients)");
		T_ASSERT(b && near(b->bytes, 4 * Pl) && b->count == 2);
		double layers_s = 2 * (k->nccl_base + 7 * k->ring_hop[1]) + 7.0 / 8 * 4 * Pl / bw;
		T_ASSERT(b && b->seconds < layers_s && b->seconds >= layers_s / 2 - 1e-12);
		T_ASSERT(r && near(r->bytes, 4 * (P - Pl)));
		T_ASSERT(g.t_post < tail && full > r->seconds);
		gpumodel_free(&g);
	}

	T_CASE("pipeline_iteration_is_slots_of_the_slowest_stage_and_its_tail") {
		struct gpumodel_cfg c = cfg(1, 4, 1, 1, layers);   /* 4 stages, 4 nodes */
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		T_ASSERT(near(g.t_iter, (8 + 4 - 1) * g.t_slot + g.t_post));
		T_ASSERT(near(gpumodel_iter_seconds(&g, 4, 1), 4 * g.t_slot + g.t_post));
		T_ASSERT(g.stage == 3);   /* the last stage holds the logits and the loss */
		/* one exchange per micro-batch on the last stage, across nodes: the node's whole
		 * network for its one GPU, one hop */
		const struct gpumodel_row *r = find(&g, "nccl send/recv PP");
		double xb = 4.0 * 1024 * 1024 * 2;
		T_ASSERT(r && r->count == 8 &&
			 near(r->seconds, 8 * (k->nccl_base + k->ring_hop[1] + xb / (50e9 * k->eff_link[1]))));
		gpumodel_free(&g);
	}

	T_CASE("gemm_by_tile_k_and_waves") {
		/* the output layer's forward, 50304 x 4096 x 1024 on 108 SMs.  256x128 tiles: 197 x 32
		 * = 6304, 59 waves of 108 (6372 slots); 128x128 tiles: 12576 in 117 waves (12636), but
		 * 0.92 of the large tile's rate: the large tile wins.  K = 1024 keeps 1024/1152. */
		struct gpumodel_cfg c = cfg(1, 1, 1, 1, layers);
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		T_ASSERT(k->tile_m[0] == 256 && k->tile_n[0] == 128 && k->tile_eff[0] == 1.0);
		T_ASSERT(k->tile_m[1] == 128 && k->tile_n[1] == 128 && k->tile_eff[1] < 6304.0 / 6372 / (12576.0 / 12636));
		const struct gpumodel_row *r = find(&g, "gemm 50304x4096x1024 none");
		double flops = 2.0 * 50304 * 4096 * 1024;
		double eff = k->gemm_train * a100->mamf * 1024.0 / (1024 + k->k_half) * 6304.0 / 6372;
		T_ASSERT(near(gpumodel_gemm_eff(a100, 50304, 4096, 1024, 1), eff));
		T_ASSERT(r && r->count == 8 && near(r->flops, 8 * flops));
		T_ASSERT(r && near(r->seconds, 8 * (flops / (312e12 * eff) + k->gap)));
		/* a short K costs: K = 64 keeps a third of K = 8192's rate at the same tiles */
		T_ASSERT(gpumodel_gemm_eff(a100, 4096, 4096, 64, 1) <
			 0.5 * gpumodel_gemm_eff(a100, 4096, 4096, 8192, 1));
		gpumodel_free(&g);
	}

	T_CASE("nccl_tree_for_a_small_all_reduce_across_nodes_ring_for_a_large_one") {
		/* Megatron-DeepSpeed's step on TP 4 x DP 8, 8-GPU nodes: the gradient norm's 4 bytes
		 * over DP (4 nodes of 2) go by the tree - 2 x (1 + log2 4) = 6 steps against the ring's
		 * 14 - and over TP (one node) by the ring; the fp32 gradients by the ring */
		struct gpumodel_cfg c = cfg(4, 1, 8, 8, layers);
		c.mds = 1;
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		double bw_dp = 50e9 * k->eff_link[1] / 4, bw_tp = 300e9 * k->eff_link[0];
		const struct gpumodel_row *r = find(&g, "nccl all-reduce (norm)");
		double tree = k->nccl_base + 6 * k->tree_hop[1] + 2 * 4 / bw_dp;
		T_ASSERT(tree < ring(k, 1, 8, 14, 4, bw_dp));
		T_ASSERT(r && r->count == 2 && near(r->seconds, tree + ring(k, 0, 4, 6, 4, bw_tp)));
		double P = 50304.0 * 1024 / 4 + 1024.0 * 1024 + 2 * (12.0 * 1024 * 1024 / 4 +
			   (3.0 * 1024 + 4096) / 4 + 6 * 1024) + 2 * 1024;
		r = find(&g, "nccl all-reduce DP (fp32 gradients)");
		T_ASSERT(r && r->count == 1 && near(r->seconds, ring(k, 1, 8, 14, 4 * P, bw_dp)));
		gpumodel_free(&g);
	}

	T_CASE("megatron_deepspeed_materialises_the_scores_and_recomputes") {
		/* (B, heads/TP, T, T) bf16 scores: written by baddbmm, read and written by the fused
		 * softmax, per layer and micro-batch; with checkpointing each layer's forward twice */
		struct gpumodel_cfg c = cfg(1, 1, 1, 1, layers);
		c.mds = 1;
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		double S = 4.0 * 16 * 1024 * 1024 * 2;
		const struct gpumodel_row *r = find(&g, "scaled_masked_softmax fwd");
		T_ASSERT(r && r->count == 8 * 2 && near(r->bytes, 8 * 2 * 2 * S));
		r = find(&g, "bmm 1024x1024x64 x64 scores (baddbmm)");
		T_ASSERT(r && r->count == 8 * 2 && near(r->flops, 8 * 2 * 2.0 * 1024 * 1024 * 64 * 64));
		double before = g.t_slot;
		gpumodel_free(&g);
		c.ckpt_layers = 1;
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		r = find(&g, "scaled_masked_softmax fwd");
		T_ASSERT(r && r->count == 8 * 2 * 2 && g.t_slot > before);
		gpumodel_free(&g);
	}
	T_DONE();
}
