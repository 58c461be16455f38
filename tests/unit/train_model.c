/* train_model.c - the model and its CPU backend.
 *
 * Without arguments: unit cases (ALiBi slopes, vocabulary padding, layout-independent
 * initialisation, thread-count independence, gradients against finite differences with and
 * without dropout).
 *
 * With `--dump CONFIG.json OUTDIR`: the C side of the PyTorch comparison
 * (tests/cli/train-model.sh; the config's "device" picks the backend, exit 4 when it is absent).  Builds the model from the config, writes OUTDIR/init.safetensors
 * (the initial weights), OUTDIR/batch.safetensors (S random batches) and OUTDIR/c.safetensors:
 * logits, loss and every gradient of batch 0 at the initial weights, then the losses, gradient
 * norms and final weights of S AdamW steps - the items tests/ref/gpt-ref.py --compare reads. */
#include "t.h"

#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/model/model.h"
#include "train/optim/optim.h"
#include "train/optim/state.h"
#include "train/model/philox.h"
#include "ckpt/safetensors.h"
#include "train/parallel/dist.h"
#include "train/device.h"
#include "train/cpu/ops_cpu.h"

static struct model_config tiny(int alibi, int embed_ln, int heads, int hidden)
{
	struct model_config c = {
		.layers = 2, .hidden = hidden, .heads = heads, .ffn = 4 * hidden, .seq = 8,
		.max_pos = 16, .vocab = 50, .padded_vocab = 64, .alibi = alibi,
		.embed_ln = embed_ln, .eps = 1e-5f, .init_std = 0.2f, .seed = 1234, .tp = 1,
		.eod = -1,
	};
	return c;
}

static void batch(int32_t *tok, int32_t *tgt, int n, int V, uint64_t key)
{
	for (int i = 0; i < n; i++) {
		tok[i] = philox_u32(key, 2 * i) % V;
		tgt[i] = philox_u32(key, 2 * i + 1) % V;
	}
}

/* Documents of 2 to 5 tokens: an end-of-document token every few positions (as input, and
 * as the target of the position before it). */
static void plant_eod(int32_t *tok, int32_t *tgt, int n, int eod, uint64_t key)
{
	for (int i = 1; i < n; i++)
		if (philox_u32(key, 1000 + i) % 4 == 0) {
			tok[i] = eod;
			tgt[i - 1] = eod;
		}
}

static double loss_of(struct model *m, const int32_t *tok, const int32_t *tgt, uint64_t rng)
{
	int bad;
	return model_forward(m, tok, tgt, 1.0f, rng, 0, NULL, &bad);
}

/* central differences in double around the fp32 weights: the loss is summed in double, so a
 * step of 1e-2 on weights of scale 0.2 leaves fp32 rounding well below the tolerance */
static int fd_check(struct model_config c, const char *what)
{
	const struct ops *o = ops_cpu(2);
	struct model m;
	char err[256];
	int B = 2, T = c.seq, n = B * T, worst_ok = 1;
	int32_t tok[n], tgt[n];
	if (model_init(&m, &c, o, B, T, err, sizeof err) < 0) {
		printf("# %s\n", err);
		return 0;
	}
	model_init_weights(&m);
	batch(tok, tgt, n, c.vocab, 7);
	if (c.eod >= 0)
		plant_eod(tok, tgt, n, c.eod, 7);
	uint64_t rng = 99;
	model_zero_grad(&m);
	loss_of(&m, tok, tgt, rng);
	model_backward(&m);
	for (int i = 0; i < m.ntensors; i++) {
		const struct model_tensor *t = &m.tensors[i];
		float *g = model_grad(&m, i), *w = model_master(&m, i);
		/* the three largest-gradient elements of each tensor */
		for (int k = 0; k < 3; k++) {
			size_t best = 0;
			for (size_t e = 0; e < t->numel; e++)
				if (fabsf(g[e]) > fabsf(g[best]) && (k == 0 || fabsf(g[e]) < 0.999f * fabsf(g[0 + best])))
					best = e;
			size_t e = (best + k * 7919) % t->numel;
			float save = w[e], h = 1e-2f;
			w[e] = save + h;
			double lp = loss_of(&m, tok, tgt, rng);
			w[e] = save - h;
			double lm = loss_of(&m, tok, tgt, rng);
			w[e] = save;
			double fd = (lp - lm) / (2 * h), an = g[e];
			double tol = 2e-2 * fmax(fabs(fd), 1e-2) + 2e-4;
			if (fabs(fd - an) > tol) {
				printf("# %s: %s[%zu]: analytic %.6g, finite difference %.6g\n", what,
				       t->name, e, an, fd);
				worst_ok = 0;
			}
		}
	}
	model_free(&m);
	return worst_ok;
}

struct bert_batches;
static void bert_batch(struct bert_batches *x, int S, int B, int T, int V, int K);
static struct model_batch bert_view(const struct bert_batches *x, int s, int B, int T,
				    int32_t *lens, uint8_t *lm);
struct bert_batches {
	int32_t *tok, *types, *labels, *lmask, *pad, *isr;   /* [S,B,T], isr [S,B] */
};

static struct model_config tiny_bert(int binary_head, int types)
{
	struct model_config c = tiny(0, 0, 4, 32);
	c.arch = MODEL_BERT;
	c.binary_head = binary_head;
	c.num_tokentypes = types;
	c.vocab = 60;
	return c;
}

/* one BERT micro-batch of B samples (T = c.seq) into caller-owned arrays */
struct bert_one {
	int32_t tok[64], types[64], labels[64], lmask[64], pad[64], isr[4], lens[4];
	uint8_t lm[64];
	struct bert_batches bb;
};

static struct model_batch bert_one(struct bert_one *x, const struct model_config *c, int B)
{
	x->bb = (struct bert_batches){x->tok, x->types, x->labels, x->lmask, x->pad, x->isr};
	bert_batch(&x->bb, 1, B, c->seq, c->vocab, c->num_tokentypes);
	return bert_view(&x->bb, 0, B, c->seq, x->lens, x->lm);
}

/* BERT's gradients against central differences, as fd_check's */
static int fd_check_bert(struct model_config c, const char *what)
{
	struct model m;
	char err[256];
	int B = 3, ok = 1, bad;
	struct bert_one x;
	if (model_init(&m, &c, ops_cpu(2), B, c.seq, err, sizeof err) < 0) {
		printf("# %s\n", err);
		return 0;
	}
	model_init_weights(&m);
	struct model_batch mb = bert_one(&x, &c, B);
	model_zero_grad(&m);
	model_forward_batch(&m, &mb, 1.0f, 99, 0, NULL, &bad);
	model_backward(&m);
	for (int i = 0; i < m.ntensors; i++) {
		const struct model_tensor *t = &m.tensors[i];
		float *g = model_grad(&m, i), *w = model_master(&m, i);
		for (int k = 0; k < 3; k++) {
			size_t best = 0;
			for (size_t e = 0; e < t->numel; e++)
				if (fabsf(g[e]) > fabsf(g[best]))
					best = e;
			size_t e = (best + k * 7919) % t->numel;
			float save = w[e], h = 1e-2f;
			w[e] = save + h;
			double lp = model_forward_batch(&m, &mb, 1.0f, 99, 0, NULL, &bad);
			w[e] = save - h;
			double lm = model_forward_batch(&m, &mb, 1.0f, 99, 0, NULL, &bad);
			w[e] = save;
			double fd = (lp - lm) / (2 * h), an = g[e];
			if (fabs(fd - an) > 2e-2 * fmax(fabs(fd), 1e-2) + 2e-4) {
				printf("# %s: %s[%zu]: analytic %.6g, finite difference %.6g\n", what,
				       t->name, e, an, fd);
				ok = 0;
			}
		}
	}
	model_free(&m);
	return ok;
}

static int unit(void)
{
	T_CASE("alibi_slopes_follow_the_power_of_two_rule") {
		float s[12];
		model_alibi_slopes(8, s);
		for (int h = 0; h < 8; h++)
			T_ASSERT(fabsf(s[h] - powf(0.5f, h + 1)) < 1e-7f);
		model_alibi_slopes(12, s);   /* 8 from 2^(-h-1), then 16's even slopes 2^-0.5, 2^-1.5 ... */
		for (int h = 0; h < 8; h++)
			T_ASSERT(fabsf(s[h] - powf(0.5f, h + 1)) < 1e-7f);
		for (int h = 0; h < 4; h++)
			T_ASSERT(fabsf(s[8 + h] - powf(2.0f, -0.5f - 1.0f * h)) < 1e-7f);
	}
	T_CASE("vocab_padding_matches_megatron") {
		T_ASSERT(model_padded_vocab(50257, 128, 1, 0) == 50304);
		T_ASSERT(model_padded_vocab(50257, 128, 4, 0) == 50688);
		T_ASSERT(model_padded_vocab(250680, 128, 4, 250880) == 250880);
		T_ASSERT(model_padded_vocab(5000, 128, 1, 0) == 5120);
	}
	T_CASE("init_is_the_same_model_whatever_the_tp_layout") {
		struct model_config c = tiny(0, 1, 4, 32);
		struct model full, sh[2];
		char err[256];
		const struct ops *o = ops_cpu(1);
		T_ASSERT(model_init(&full, &c, o, 1, 8, err, sizeof err) == 0);
		model_init_weights(&full);
		for (int r = 0; r < 2; r++) {
			struct model_config cr = c;
			cr.tp = 2;
			cr.tp_rank = r;
			T_ASSERT(model_init(&sh[r], &cr, o, 1, 8, err, sizeof err) == 0);
			model_init_weights(&sh[r]);
		}
		int same = 1;
		for (int i = 0; i < full.ntensors; i++) {
			const struct model_tensor *t = &full.tensors[i];
			const float *f = model_master(&full, i);
			for (int r = 0; r < 2; r++) {
				const float *s = model_master(&sh[r], i);
				size_t n = sh[r].tensors[i].numel;
				for (size_t e = 0; e < n; e++) {
					size_t g = e;
					if (t->split == SPLIT_COLUMN || t->split == SPLIT_VOCAB)
						g = r * n + e;
					else if (t->split == SPLIT_ROW) {
						size_t cols = t->shape[1] / 2;
						g = e / cols * t->shape[1] + r * cols + e % cols;
					}
					same &= s[e] == f[g];
				}
			}
		}
		T_ASSERT(same);
		/* and the draws look like N(0, std): mean ~0, std ~0.2 on the QKV weight */
		int q = model_layer_tensor(&full, 0, QKV_W);
		double s1 = 0, s2 = 0;
		size_t n = full.tensors[q].numel;
		for (size_t e = 0; e < n; e++) {
			s1 += model_master(&full, q)[e];
			s2 += (double)model_master(&full, q)[e] * model_master(&full, q)[e];
		}
		T_ASSERT(fabs(s1 / n) < 0.02 && fabs(sqrt(s2 / n) - 0.2) < 0.02);
		/* output layers are scaled by 1/sqrt(2 layers) */
		int p = model_layer_tensor(&full, 0, PROJ_W);
		s2 = 0;
		for (size_t e = 0; e < full.tensors[p].numel; e++)
			s2 += (double)model_master(&full, p)[e] * model_master(&full, p)[e];
		T_ASSERT(fabs(sqrt(s2 / full.tensors[p].numel) - 0.1) < 0.015);
		model_free(&full);
		model_free(&sh[0]);
		model_free(&sh[1]);
	}
	T_CASE("gradients_do_not_depend_on_the_thread_count") {
		struct model_config c = tiny(1, 1, 5, 40);
		c.hidden_dropout = c.attention_dropout = 0.1f;
		float *g[2];
		size_t np = 0;
		for (int k = 0; k < 2; k++) {
			struct model m;
			char err[256];
			int32_t tok[3 * 8], tgt[3 * 8];
			T_ASSERT(model_init(&m, &c, ops_cpu(k + 1), 3, 8, err, sizeof err) == 0);
			model_init_weights(&m);
			batch(tok, tgt, 24, c.vocab, 3);
			model_zero_grad(&m);
			loss_of(&m, tok, tgt, 5);
			model_backward(&m);
			np = m.nparams;
			g[k] = malloc(np * sizeof(float));
			memcpy(g[k], m.grads, np * sizeof(float));
			model_free(&m);
		}
		T_ASSERT(memcmp(g[0], g[1], np * sizeof(float)) == 0);
		for (size_t e = 0; e < np; e++)
			if (g[0][e] != g[1][e]) {
				printf("# first difference at %zu: %g vs %g\n", e, g[0][e], g[1][e]);
				break;
			}
		free(g[0]);
		free(g[1]);
	}
	T_CASE("gradients_match_finite_differences_gpt2_style")
		T_ASSERT(fd_check(tiny(0, 0, 4, 32), "gpt2"));
	T_CASE("gradients_match_finite_differences_bloom_style_odd_heads")
		T_ASSERT(fd_check(tiny(1, 1, 5, 40), "bloom"));
	T_CASE("gradients_match_finite_differences_with_dropout") {
		struct model_config c = tiny(1, 1, 5, 40);
		c.hidden_dropout = 0.1f;
		c.attention_dropout = 0.2f;
		T_ASSERT(fd_check(c, "dropout"));
		c = tiny(0, 1, 4, 32);   /* learned positions after the embedding LN */
		c.hidden_dropout = 0.1f;
		T_ASSERT(fd_check(c, "dropout-learned"));
	}
	T_CASE("gradients_match_finite_differences_post_layernorm_residual") {
		struct model_config c = tiny(0, 0, 4, 32);
		c.post_ln_residual = 1;
		T_ASSERT(fd_check(c, "post-ln"));
		c = tiny(1, 1, 5, 40);
		c.post_ln_residual = 1;
		c.hidden_dropout = 0.1f;
		T_ASSERT(fd_check(c, "post-ln-bloom-dropout"));
	}
	T_CASE("gradients_match_finite_differences_with_document_masks") {
		struct model_config c = tiny(0, 0, 4, 32);
		c.eod = 3;
		c.eod_mask_loss = c.reset_position_ids = c.reset_attention_mask = 1;
		T_ASSERT(fd_check(c, "eod-masks"));
		c = tiny(1, 1, 5, 40);
		c.eod = 3;
		c.reset_attention_mask = 1;
		c.attention_dropout = 0.2f;
		T_ASSERT(fd_check(c, "eod-attention-mask-alibi-dropout"));
		c = tiny(0, 1, 4, 32);
		c.eod = 3;
		c.reset_position_ids = c.eod_mask_loss = 1;
		T_ASSERT(fd_check(c, "eod-positions-embed-ln"));
	}
	T_CASE("document_masks_change_the_loss_only_where_documents_meet") {
		/* no eod in the batch: each flag leaves the loss bit-identical; with eods: each
		 * changes it */
		int32_t tok[16], tgt[16];
		double base[2], with[2][3];
		for (int e = 0; e < 2; e++) {
			struct model_config c = tiny(0, 0, 4, 32);
			struct model m;
			char err[256];
			batch(tok, tgt, 16, c.vocab, 11);
			for (int i = 0; i < 16; i++)
				if (tok[i] == 3 || tgt[i] == 3)
					tok[i] = tgt[i] = 4;
			if (e)
				plant_eod(tok, tgt, 16, 3, 11);
			T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, 8, err, sizeof err) == 0);
			model_init_weights(&m);
			base[e] = loss_of(&m, tok, tgt, 0);
			model_free(&m);
			for (int f = 0; f < 3; f++) {
				c.eod = 3;
				c.eod_mask_loss = f == 0;
				c.reset_position_ids = f == 1;
				c.reset_attention_mask = f == 2;
				T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, 8, err, sizeof err) == 0);
				model_init_weights(&m);
				with[e][f] = loss_of(&m, tok, tgt, 0);
				model_free(&m);
			}
		}
		for (int f = 0; f < 3; f++) {
			T_ASSERT(with[0][f] == base[0]);
			T_ASSERT(with[1][f] != base[1]);
		}
	}
	T_CASE("dropout_masks_follow_the_sample_not_the_micro_batch") {
		/* one micro-batch of 2 samples, or two of 1 with sample0 0 and 1: the same masks, so
		 * the same mean loss and (up to summation order) the same gradients */
		struct model_config c = tiny(1, 1, 5, 40);
		c.hidden_dropout = 0.2f;
		c.attention_dropout = 0.3f;
		struct model m1, m2;
		char err[256];
		int32_t tok[16], tgt[16];
		batch(tok, tgt, 16, c.vocab, 5);
		T_ASSERT(model_init(&m1, &c, ops_cpu(1), 2, 8, err, sizeof err) == 0);
		T_ASSERT(model_init(&m2, &c, ops_cpu(1), 1, 8, err, sizeof err) == 0);
		model_init_weights(&m1);
		model_init_weights(&m2);
		int bad;
		model_zero_grad(&m1);
		model_zero_grad(&m2);
		double l1 = model_forward(&m1, tok, tgt, 1.0f, 42, 0, NULL, &bad);
		model_backward(&m1);
		double l2 = 0;
		for (int s = 0; s < 2; s++) {
			l2 += model_forward(&m2, tok + 8 * s, tgt + 8 * s, 0.5f, 42, (uint64_t)s, NULL, &bad) / 2;
			model_backward(&m2);
		}
		T_ASSERT(fabs(l1 - l2) < 1e-6 * fabs(l1));
		double worst = 0, gmax = 0;
		for (size_t e = 0; e < m1.nparams; e++) {
			double d = fabs((double)m1.grads[e] - m2.grads[e]);
			worst = d > worst ? d : worst;
			gmax = fabs(m1.grads[e]) > gmax ? fabs(m1.grads[e]) : gmax;
		}
		T_ASSERT(worst < 1e-5 * gmax);
		/* and the second sample's masks are not the first's */
		double a = model_forward(&m2, tok + 8, tgt + 8, 1.0f, 42, 1, NULL, &bad);
		double b = model_forward(&m2, tok + 8, tgt + 8, 1.0f, 42, 0, NULL, &bad);
		T_ASSERT(a != b);
		model_free(&m1);
		model_free(&m2);
	}
	T_CASE("curriculum_length_is_a_shorter_model") {
		/* a model sized for T = 8 running micro-batches cut to 5 (model_set_seq, the
		 * curriculum's) computes what a model built for T = 5 computes on those 5 tokens:
		 * loss and every gradient, with learned positions and with ALiBi; back at 8 it is the
		 * T = 8 model again (the positions were put back) */
		for (int k = 0; k < 3; k++) {   /* learned positions, + embedding LN, ALiBi */
			struct model_config c8 = tiny(k == 2, k >= 1, 4, 32), c5 = c8;
			c5.seq = 5;
			struct model m8, m5, f8;
			char err[256];
			int32_t tok[16], tgt[16], t5[10], g5[10];
			batch(tok, tgt, 16, c8.vocab, 77);
			for (int b = 0; b < 2; b++)
				for (int t = 0; t < 5; t++) {
					t5[b * 5 + t] = tok[b * 8 + t];
					g5[b * 5 + t] = tgt[b * 8 + t];
				}
			T_ASSERT(model_init(&m8, &c8, ops_cpu(1), 2, 8, err, sizeof err) == 0);
			T_ASSERT(model_init(&m5, &c5, ops_cpu(1), 2, 5, err, sizeof err) == 0);
			T_ASSERT(model_init(&f8, &c8, ops_cpu(1), 2, 8, err, sizeof err) == 0);
			model_init_weights(&m8);
			model_init_weights(&m5);
			model_init_weights(&f8);
			T_ASSERT(model_set_seq(&m8, 9) < 0 && model_set_seq(&m8, 0) < 0);
			T_ASSERT(model_set_seq(&m8, 5) == 0);
			int bad;
			model_zero_grad(&m8);
			model_zero_grad(&m5);
			double a = model_forward(&m8, t5, g5, 1.0f, 0, 0, NULL, &bad);
			model_backward(&m8);
			double b = model_forward(&m5, t5, g5, 1.0f, 0, 0, NULL, &bad);
			model_backward(&m5);
			T_ASSERT(a == b);
			T_ASSERT(memcmp(m8.grads, m5.grads, m8.nparams * sizeof *m8.grads) == 0);
			/* and it is not the 8-token loss: the cut happened */
			double full = model_forward(&f8, tok, tgt, 1.0f, 0, 0, NULL, &bad);
			T_ASSERT(full != a);
			T_ASSERT(model_set_seq(&m8, 8) == 0);
			T_ASSERT(model_forward(&m8, tok, tgt, 1.0f, 0, 0, NULL, &bad) == full);
			model_free(&m8);
			model_free(&m5);
			model_free(&f8);
		}
	}
	T_CASE("dropout_changes_the_loss_and_is_reproducible") {
		struct model_config c = tiny(0, 0, 4, 32);
		c.hidden_dropout = 0.3f;
		struct model m;
		char err[256];
		int32_t tok[16], tgt[16];
		T_ASSERT(model_init(&m, &c, ops_cpu(2), 2, 8, err, sizeof err) == 0);
		model_init_weights(&m);
		batch(tok, tgt, 16, c.vocab, 1);
		double a = loss_of(&m, tok, tgt, 1), b = loss_of(&m, tok, tgt, 1),
		       d = loss_of(&m, tok, tgt, 2);
		T_ASSERT(a == b && a != d);
		model_free(&m);
	}
	T_CASE("out_of_vocabulary_targets_are_counted") {
		struct model_config c = tiny(0, 0, 4, 32);
		struct model m;
		char err[256];
		int32_t tok[16], tgt[16];
		int bad = 0;
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, 8, err, sizeof err) == 0);
		model_init_weights(&m);
		batch(tok, tgt, 16, c.vocab, 1);
		tgt[3] = c.vocab;       /* a padded row: outside the real vocabulary */
		tgt[5] = -1;
		model_forward(&m, tok, tgt, 1.0f, 0, 0, NULL, &bad);
		T_ASSERT(bad == 2);
		model_free(&m);
	}
	T_CASE("bert_gradients_match_finite_differences") {
		T_ASSERT(fd_check_bert(tiny_bert(1, 2), "bert"));
		struct model_config c = tiny_bert(0, 0);   /* --bert-no-binary-head, no types */
		c.post_ln_residual = 1;
		c.head_gelu_tanh = 1;
		T_ASSERT(fd_check_bert(c, "bert-nohead-postln"));
		c = tiny_bert(1, 3);
		c.hidden_dropout = 0.1f;
		c.attention_dropout = 0.2f;
		T_ASSERT(fd_check_bert(c, "bert-dropout"));
	}
	T_CASE("bert_padding_changes_nothing_real") {
		/* other tokens and types at the padded positions: the losses and every gradient are
		 * bit-identical (no real position attends to them, the loss mask is 0 there); the
		 * same change at a real position changes them */
		struct model_config c = tiny_bert(1, 2);
		c.attention_dropout = 0.1f;
		struct model m;
		char err[256];
		int B = 3, bad, T = c.seq;
		struct bert_one x;
		T_ASSERT(model_init(&m, &c, ops_cpu(2), B, T, err, sizeof err) == 0);
		model_init_weights(&m);
		struct model_batch mb = bert_one(&x, &c, B);
		T_ASSERT(x.lens[1] < T || x.lens[2] < T);
		float *g0 = malloc(m.nparams * sizeof *g0);
		model_zero_grad(&m);
		double l0 = model_forward_batch(&m, &mb, 1.0f, 5, 0, NULL, &bad);
		model_backward(&m);
		memcpy(g0, m.grads, m.nparams * sizeof *g0);
		for (int b = 0; b < B; b++)
			for (int t = x.lens[b]; t < T; t++) {
				x.tok[b * T + t] = 7 + t;
				x.types[b * T + t] = 1;
			}
		model_zero_grad(&m);
		double l1 = model_forward_batch(&m, &mb, 1.0f, 5, 0, NULL, &bad);
		model_backward(&m);
		T_ASSERT(l1 == l0);
		T_ASSERT(memcmp(g0, m.grads, m.nparams * sizeof *g0) == 0);
		x.tok[1] = x.tok[1] == 9 ? 10 : 9;   /* a real position */
		double l2 = model_forward_batch(&m, &mb, 1.0f, 5, 0, NULL, &bad);
		T_ASSERT(l2 != l0);
		free(g0);
		model_free(&m);
	}
	T_CASE("bert_has_megatrons_tensors") {
		struct model_config c = tiny_bert(1, 2);
		struct model m;
		char err[256];
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, 8, err, sizeof err) == 0);
		const char *want[] = {"tokentype_embeddings.weight", "pooler.dense.weight",
				      "pooler.dense.bias", "lm_head.dense.weight", "lm_head.dense.bias",
				      "lm_head.layernorm.weight", "lm_head.layernorm.bias",
				      "lm_head.bias", "binary_head.weight", "binary_head.bias"};
		for (size_t k = 0; k < sizeof want / sizeof *want; k++)
			T_ASSERT(model_find(&m, want[k]) >= 0);
		T_ASSERT(m.tensors[model_find(&m, "lm_head.bias")].split == SPLIT_VOCAB);
		T_ASSERT(!m.tensors[model_find(&m, "lm_head.bias")].decay);
		T_ASSERT(m.tensors[model_find(&m, "binary_head.weight")].shape[0] == 2);
		model_free(&m);
		c = tiny_bert(0, 0);   /* --bert-no-binary-head: no pooler either (Megatron's) */
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, 8, err, sizeof err) == 0);
		T_ASSERT(model_find(&m, "pooler.dense.weight") < 0 &&
			 model_find(&m, "binary_head.weight") < 0 &&
			 model_find(&m, "tokentype_embeddings.weight") < 0);
		model_free(&m);
		c = tiny_bert(1, 2);
		c.alibi = 1;
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, 8, err, sizeof err) < 0);
	}
	T_CASE("bad_shapes_are_refused_with_a_message") {
		struct model_config c = tiny(0, 0, 5, 32);   /* 32 % 5 != 0 */
		struct model m;
		char err[256] = "";
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 1, 8, err, sizeof err) < 0);
		T_ASSERT(strstr(err, "--num-attention-heads") != NULL);
		c = tiny(0, 0, 4, 32);
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 1, 32, err, sizeof err) < 0);
		T_ASSERT(strstr(err, "--max-position-embeddings") != NULL);
	}
	T_DONE();
}

/* ---- --dump ---- */

static double jnum(json_t *j, const char *k, double def)
{
	json_t *v = json_object_get(j, k);
	return json_is_number(v) ? json_number_value(v) : json_is_boolean(v) ? json_is_true(v) : def;
}

/* BERT micro-batches as Megatron's BertDataset makes them: [CLS]-like token first, segment A
 * (type 0) and B (type 1), padding (id 0, type 0) after each sample's length (sample 0 full,
 * the others between T/2 and T), about 20% of the real positions past 0 loss-masked with a
 * label, is_random 0 or 1. */
static void bert_batch(struct bert_batches *x, int S, int B, int T, int V, int K)
{
	for (int s = 0; s < S; s++)
		for (int b = 0; b < B; b++) {
			uint64_t key = 5000 + s * 64 + b;
			size_t o = ((size_t)s * B + b) * T;
			int len = b == 0 ? T : T / 2 + (int)(philox_u32(key, 0) % (T / 2 + 1));
			int sp = 2 + (int)(philox_u32(key, 1) % (len > 3 ? len - 3 : 1));
			int nmask = 0;
			for (int t = 0; t < T; t++) {
				int real = t < len;
				x->tok[o + t] = !real ? 0 : t == 0 ? 2 : 5 + (int)(philox_u32(key, 10 + t) % (V - 5));
				x->types[o + t] = real && K > 1 && t >= sp ? 1 : 0;
				x->pad[o + t] = real;
				int m = real && t > 0 && philox_u32(key, 1000 + t) % 5 == 0;
				if (real && t == len - 1 && !nmask)
					m = 1;
				nmask += m;
				x->lmask[o + t] = m;
				x->labels[o + t] = m ? (int)(philox_u32(key, 2000 + t) % V) : -1;
			}
			x->isr[(size_t)s * B + b] = (int)(philox_u32(key, 3) % 2);
		}
}

static struct model_batch bert_view(const struct bert_batches *x, int s, int B, int T,
				    int32_t *lens, uint8_t *lm)
{
	size_t o = (size_t)s * B * T;
	for (int b = 0; b < B; b++) {
		lens[b] = 0;
		for (int t = 0; t < T; t++)
			lens[b] += x->pad[o + (size_t)b * T + t];
	}
	for (int i = 0; i < B * T; i++)
		lm[i] = (uint8_t)x->lmask[o + i];
	return (struct model_batch){.tokens = x->tok + o, .targets = x->labels + o,
				    .types = x->types + o, .loss_mask = lm, .lens = lens,
				    .sop = x->isr + (size_t)s * B};
}

/* tensor i of buf as the full model's, assembled from the TP ranks' shards (every rank calls;
 * *same: replicated tensors are bit-identical on every rank) */
static void gather_full(struct model *m, struct dist *d, const float *buf, int i, float *full,
			float *tmp, int *same)
{
	const struct model_tensor *t = &m->tensors[i];
	size_t n = t->numel;
	int tp = m->cfg.tp;
	model_get(m, buf, i, tmp);
	if (tp == 1) {
		memcpy(full, tmp, n * sizeof *full);
		return;
	}
	float *all = malloc(n * tp * sizeof *all);
	d->allgather(d, DIST_TP, tmp, n * sizeof *tmp, all);
	if (t->split == SPLIT_NONE) {
		for (int r = 1; r < tp; r++)
			*same &= memcmp(all, all + r * n, n * sizeof *all) == 0;
		memcpy(full, all, n * sizeof *full);
	} else if (t->split == SPLIT_ROW) {
		size_t cols = t->shape[1] / tp, rows = t->shape[0];
		for (int r = 0; r < tp; r++)
			for (size_t y = 0; y < rows; y++)
				memcpy(full + y * t->shape[1] + r * cols, all + r * n + y * cols,
				       cols * sizeof *full);
	} else {
		memcpy(full, all, n * tp * sizeof *full);
	}
	free(all);
}

static int dump(const char *cfgpath, const char *outdir)
{
	json_error_t je;
	json_t *j = json_load_file(cfgpath, 0, &je);
	char err[512], path[4096];
	if (!j) {
		fprintf(stderr, "%s:%d: %s\n", cfgpath, je.line, je.text);
		return 2;
	}
	const char *pe = json_string_value(json_object_get(j, "position_embedding_type"));
	const char *mt = json_string_value(json_object_get(j, "model_type"));
	int bert = mt && !strcmp(mt, "bert");
	struct model_config c = {
		.arch = bert ? MODEL_BERT : MODEL_GPT,
		.num_tokentypes = jnum(j, "num_tokentypes", 0), .binary_head = jnum(j, "binary_head", 0),
		.head_gelu_tanh = jnum(j, "openai_gelu", 0),
		.layers = jnum(j, "num_layers", 2), .hidden = jnum(j, "hidden_size", 64),
		.heads = jnum(j, "num_attention_heads", 4), .ffn = jnum(j, "ffn_hidden_size", 256),
		.seq = jnum(j, "seq_length", 16), .max_pos = jnum(j, "max_position_embeddings", 16),
		.vocab = jnum(j, "vocab_size", 100), .padded_vocab = jnum(j, "padded_vocab_size", 128),
		.alibi = pe && strcmp(pe, "alibi") == 0, .embed_ln = jnum(j, "embed_layernorm", 0),
		.eps = jnum(j, "layernorm_epsilon", 1e-5), .init_std = jnum(j, "init_method_std", 0.02),
		.hidden_dropout = jnum(j, "hidden_dropout", 0),
		.attention_dropout = jnum(j, "attention_dropout", 0),
		.seed = jnum(j, "seed", 1234), .tp = 1,
		.eod = jnum(j, "eod", -1), .eod_mask_loss = jnum(j, "eod_mask_loss", 0),
		.reset_position_ids = jnum(j, "reset_position_ids", 0),
		.reset_attention_mask = jnum(j, "reset_attention_mask", 0),
		.post_ln_residual = jnum(j, "apply_residual_connection_post_layernorm", 0),
	};
	int B = jnum(j, "micro_batch_size", 2), T = c.seq, S = jnum(j, "steps", 10);
	int threads = jnum(j, "threads", 0), tp = jnum(j, "tp", 1);
	const char *dev = json_string_value(json_object_get(j, "device"));
	char devbuf[32];
	snprintf(devbuf, sizeof devbuf, "%s", dev ? dev : "cpu");
	enum ops_prec prec = jnum(j, "fp16", 0) ? OPS_FP16 : OPS_BF16; /* the CUDA backend's */
	float lr = jnum(j, "lr", 1e-3);
	struct optim opt;
	optim_init(&opt, jnum(j, "adam_beta1", 0.9), jnum(j, "adam_beta2", 0.999),
		   jnum(j, "adam_eps", 1e-8), jnum(j, "weight_decay", 0.01), jnum(j, "clip_grad", 1.0),
		   0, 1, 1, 1000, 2);
	const char *okind = json_string_value(json_object_get(j, "optimizer"));
	opt.kind = okind && !strcmp(okind, "lamb") ? OPT_LAMB : okind && !strcmp(okind, "sgd") ? OPT_SGD
											     : OPT_ADAMW;
	opt.momentum = jnum(j, "sgd_momentum", 0.9);
	opt.emb_lr_mult = jnum(j, "embedding_lr_mult", 1);
	opt.lamb_noise = jnum(j, "lamb_layerwise_noise", 0);
	opt.seed = c.seed;
	json_decref(j);

	struct model m;
	struct dist d;
	const struct ops *ops = ops_open(devbuf, threads, prec, err, sizeof err);
	if (!ops) {
		fprintf(stderr, "%s\n", err);
		return 4;   /* no such device: the caller skips */
	}
	if (dist_init(&d, tp, 1, ops->name, NULL, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	c.tp = d.tp;
	c.tp_rank = d.tp_rank;
	int writer = d.rank == 0;
	optim_state_rule(&c);
	if (model_init(&m, &c, ops, B, T, err, sizeof err) < 0 ||
	    optim_state_init(&m, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	m.dist = &d;
	model_init_weights(&m);
	if (writer)
		mkdir(outdir, 0755);

	size_t n = (size_t)B * T;
	int32_t *tok = malloc(S * n * sizeof *tok), *tgt = malloc(S * n * sizeof *tgt);
	struct bert_batches bb = {0};
	int32_t lens[B];
	uint8_t *lmask = malloc(n);
	if (bert) {
		bb.tok = tok;
		bb.labels = tgt;
		bb.types = malloc(S * n * sizeof(int32_t));
		bb.lmask = malloc(S * n * sizeof(int32_t));
		bb.pad = malloc(S * n * sizeof(int32_t));
		bb.isr = malloc(S * B * sizeof(int32_t));
		bert_batch(&bb, S, B, T, c.vocab, c.num_tokentypes);
	} else {
		for (int s = 0; s < S; s++) {
			batch(tok + s * n, tgt + s * n, n, c.vocab, 1000 + s);
			if (c.eod >= 0)   /* documents meet inside the samples */
				plant_eod(tok + s * n, tgt + s * n, n, c.eod, 1000 + s);
		}
	}
	int64_t bshape[3] = {S, B, T}, sbshape[2] = {S, B};
	struct st_writer *w;
	if (writer) {
		snprintf(path, sizeof path, "%s/batch.safetensors", outdir);
		w = st_create(path, err, sizeof err);
		if (!w)
			return fprintf(stderr, "%s\n", err), 3;
		if (bert) {
			const char *names[5] = {"tokens", "types", "labels", "loss_mask", "padding_mask"};
			const int32_t *data[5] = {bb.tok, bb.types, bb.labels, bb.lmask, bb.pad};
			for (int k = 0; k < 5; k++)
				st_declare(w, names[k], ST_I32, 3, bshape);
			st_declare(w, "is_random", ST_I32, 2, sbshape);
			for (int k = 0; k < 5; k++)
				st_write(w, data[k], S * n * 4);
			st_write(w, bb.isr, S * B * 4);
		} else {
			st_declare(w, "tokens", ST_I32, 3, bshape);
			st_declare(w, "targets", ST_I32, 3, bshape);
			st_write(w, tok, S * n * 4);
			st_write(w, tgt, S * n * 4);
		}
		if (st_commit(w))
			return fprintf(stderr, "%s\n", st_werror(w)), 3;
	}

	/* the full model's tensors, assembled from the TP shards */
	size_t most = 0, full_n = 0;
	for (int i = 0; i < m.ntensors; i++) {
		size_t f = (size_t)m.tensors[i].shape[0] * (m.tensors[i].shape[1] ? m.tensors[i].shape[1] : 1);
		most = m.tensors[i].numel > most ? m.tensors[i].numel : most;
		full_n += f;
	}
	float *tmp = malloc(most * sizeof *tmp), *init = malloc(full_n * sizeof *init);
	float *grads = malloc(full_n * sizeof *grads), *fin = malloc(full_n * sizeof *fin);
	int same = 1;
	for (size_t i = 0, at = 0; i < (size_t)m.ntensors; i++) {
		gather_full(&m, &d, m.master, i, init + at, tmp, &same);
		at += (size_t)m.tensors[i].shape[0] * (m.tensors[i].shape[1] ? m.tensors[i].shape[1] : 1);
	}
	if (writer) {
		snprintf(path, sizeof path, "%s/init.safetensors", outdir);
		w = st_create(path, err, sizeof err);
		for (int i = 0; i < m.ntensors; i++)
			st_declare(w, m.tensors[i].name, ST_F32, m.tensors[i].ndim, m.tensors[i].shape);
		st_write(w, init, full_n * 4);
		if (st_commit(w))
			return fprintf(stderr, "%s\n", st_werror(w)), 3;
	}

	/* step 0's logits, loss and gradients */
	int Vp = c.padded_vocab, Vl = Vp / c.tp, bad;
	float *logits = malloc(n * Vp * sizeof *logits), *lloc = malloc(n * Vl * sizeof *lloc);
	struct model_batch mb = {.tokens = tok, .targets = tgt};
	if (bert)
		mb = bert_view(&bb, 0, B, T, lens, lmask);
	model_zero_grad(&m);
	float loss0 = model_forward_batch(&m, &mb, 1.0f, 0, 0, lloc, &bad);
	float lm0 = m.loss_lm, sop0 = m.loss_sop;
	model_backward(&m);
	if (c.tp > 1) {   /* the vocabulary slices' columns side by side */
		float *all = malloc(n * Vp * sizeof *all);
		d.allgather(&d, DIST_TP, lloc, n * Vl * sizeof *lloc, all);
		for (int r = 0; r < c.tp; r++)
			for (size_t y = 0; y < n; y++)
				memcpy(logits + y * Vp + r * Vl, all + (r * n + y) * Vl, Vl * sizeof *logits);
		free(all);
	} else {
		memcpy(logits, lloc, n * Vp * sizeof *logits);
	}
	for (size_t i = 0, at = 0; i < (size_t)m.ntensors; i++) {
		gather_full(&m, &d, m.grads, i, grads + at, tmp, &same);
		at += (size_t)m.tensors[i].shape[0] * (m.tensors[i].shape[1] ? m.tensors[i].shape[1] : 1);
	}

	float *losses = malloc(3 * S * sizeof *losses), *norms = malloc(S * sizeof *norms);
	for (int s = 0; s < S; s++) {
		double gn;
		model_zero_grad(&m);
		mb = (struct model_batch){.tokens = tok + s * n, .targets = tgt + s * n};
		if (bert)
			mb = bert_view(&bb, s, B, T, lens, lmask);
		losses[s] = model_forward_batch(&m, &mb, 1.0f, s, 0, NULL, &bad);
		losses[S + s] = m.loss_lm;
		losses[2 * S + s] = m.loss_sop;
		model_backward(&m);
		optim_step(&opt, &m, lr, &gn);
		norms[s] = gn;
	}
	for (size_t i = 0, at = 0; i < (size_t)m.ntensors; i++) {
		gather_full(&m, &d, m.master, i, fin + at, tmp, &same);
		at += (size_t)m.tensors[i].shape[0] * (m.tensors[i].shape[1] ? m.tensors[i].shape[1] : 1);
	}
	if (c.tp > 1)   /* the replicated tensors, their gradients and their values after S steps */
		printf("replicated tensors bit-identical across %d TP ranks: %s\n", c.tp,
		       same ? "yes" : "NO");

	if (writer) {
		snprintf(path, sizeof path, "%s/c.safetensors", outdir);
		w = st_create(path, err, sizeof err);
		int64_t lshape[3] = {B, T, Vp}, one = 1, sS = S;
		char name[96];
		st_declare(w, "logits", ST_F32, 3, lshape);
		st_declare(w, "loss", ST_F32, 1, &one);
		st_declare(w, "losses", ST_F32, 1, &sS);
		st_declare(w, "grad_norms", ST_F32, 1, &sS);
		if (bert) {
			st_declare(w, "lm_loss", ST_F32, 1, &one);
			st_declare(w, "sop_loss", ST_F32, 1, &one);
			st_declare(w, "lm_losses", ST_F32, 1, &sS);
			st_declare(w, "sop_losses", ST_F32, 1, &sS);
		}
		for (int i = 0; i < m.ntensors; i++) {
			snprintf(name, sizeof name, "grad.%s", m.tensors[i].name);
			st_declare(w, name, ST_F32, m.tensors[i].ndim, m.tensors[i].shape);
		}
		for (int i = 0; i < m.ntensors; i++) {
			snprintf(name, sizeof name, "final.%s", m.tensors[i].name);
			st_declare(w, name, ST_F32, m.tensors[i].ndim, m.tensors[i].shape);
		}
		st_write(w, logits, n * Vp * 4);
		st_write(w, &loss0, 4);
		st_write(w, losses, S * 4);
		st_write(w, norms, S * 4);
		if (bert) {
			st_write(w, &lm0, 4);
			st_write(w, &sop0, 4);
			st_write(w, losses + S, S * 4);
			st_write(w, losses + 2 * S, S * 4);
		}
		st_write(w, grads, full_n * 4);
		st_write(w, fin, full_n * 4);
		if (st_commit(w))
			return fprintf(stderr, "%s\n", st_werror(w)), 3;
	}
	model_free(&m);
	if (d.finish)
		d.finish(&d);
	return same ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--dump") == 0)
		return dump(argv[2], argv[3]);
	return unit();
}
