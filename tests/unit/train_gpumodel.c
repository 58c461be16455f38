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

int main(void)
{
	const struct gpumodel_device *a100 = gpumodel_device("a100");
	const struct gpumodel_consts *k = &gpumodel_k;
	int64_t layers[4];
	struct gpumodel g;

	T_CASE("devices_by_name") {
		T_ASSERT(a100 && strcmp(a100->name, "A100 SXM") == 0);
		T_ASSERT(gpumodel_device("h100") && gpumodel_device("h100")->tc == 989.4e12);
		T_ASSERT(!gpumodel_device("v100"));
	}

	T_CASE("tp_inside_a_node_runs_on_nvlink") {
		struct gpumodel_cfg c = cfg(8, 1, 1, 8, layers);
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *r = find(&g, "nccl sum TP (activations)");
		/* per micro-batch: 2 sums a layer forward, 2 backward, 2 layers, the embedding's and
		 * the output layer's input gradient: 10 sums of (N,C) bf16, each a reduce-scatter and
		 * an all-gather of 7/8 of the bytes at 0.8 x 300 GB/s */
		double bytes = 4.0 * 1024 * 1024 * 2, one = 2 * (k->lat_nvlink + 7.0 / 8 * bytes / 240e9);
		T_ASSERT(r && r->count == 8 * 10 * 2);
		T_ASSERT(r && near(r->seconds, 8 * 10 * one));
		gpumodel_free(&g);
	}

	T_CASE("tp_across_nodes_shares_the_network") {
		struct gpumodel_cfg c = cfg(8, 1, 1, 1, layers);   /* 8 nodes of one GPU */
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *r = find(&g, "nccl sum TP (activations)");
		double bytes = 4.0 * 1024 * 1024 * 2, one = 2 * (k->lat_net + 7.0 / 8 * bytes / 40e9);
		T_ASSERT(r && near(r->seconds, 8 * 10 * one));
		gpumodel_free(&g);
	}

	T_CASE("dp_ring_over_nodes_shares_the_nic_with_the_nodes_other_rings") {
		/* TP 4 x DP 8 on 8-GPU nodes: a DP group has 2 members per node (stride 4), so 4 DP
		 * rings cross each node's network at once: 50 GB/s x 0.8 / 4 each */
		struct gpumodel_cfg c = cfg(4, 1, 8, 8, layers);
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *r = find(&g, "nccl sum DP (gradients)");
		double P = 50304.0 * 1024 / 4 + 1024.0 * 1024 + 2 * (12.0 * 1024 * 1024 / 4 +
			   (3.0 * 1024 + 4096) / 4 + 6 * 1024) + 2 * 1024;
		T_ASSERT(r && near(r->bytes, 4 * P));
		T_ASSERT(r && near(r->seconds, 2 * (k->lat_net + 7.0 / 8 * 4 * P / 10e9)));
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
		T_ASSERT(r && near(r->bytes, 4 * P) && r->count == 1);
		T_ASSERT(r && near(r->seconds, k->lat_net + 7.0 / 8 * 4 * P / 10e9));
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
		double layers_s = 2 * k->lat_net + 7.0 / 8 * 4 * Pl / 10e9;
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
		 * network for its one GPU */
		const struct gpumodel_row *r = find(&g, "nccl send/recv PP");
		double xb = 4.0 * 1024 * 1024 * 2;
		T_ASSERT(r && r->count == 8 && near(r->seconds, 8 * (k->lat_net + xb / 40e9)));
		gpumodel_free(&g);
	}

	T_CASE("gemm_wave_quantisation") {
		/* the output layer's forward, 50304 x 4096 x 1024 on 108 SMs: 393 x 16 tiles of
		 * 128 x 256, 59 waves of 108 (the last holds 24): 0.8 x 6288 / 6372 of the peak */
		struct gpumodel_cfg c = cfg(1, 1, 1, 1, layers);
		T_ASSERT(gpumodel_run(&g, &c, a100) == 0);
		const struct gpumodel_row *r = find(&g, "gemm 50304x4096x1024 none");
		double flops = 2.0 * 50304 * 4096 * 1024;
		double eff = 0.8 * 6288.0 / (59.0 * 108);
		T_ASSERT(r && r->count == 8 && near(r->flops, 8 * flops));
		T_ASSERT(r && near(r->seconds, 8 * (flops / (312e12 * eff) + k->gap)));
		gpumodel_free(&g);
	}
	T_DONE();
}
