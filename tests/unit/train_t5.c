/* train_t5.c - Megatron's T5 (src/train/model/t5.c) on the CPU backend.
 *
 * Without arguments: unit cases - every gradient against central differences (with and without
 * dropout, the post-LN residual), padding in the encoder and the decoder changing no loss and
 * no gradient, the cross-attention op against a direct computation, Megatron's tensor names.
 *
 * With `--dump CONFIG.json OUTDIR`: the C side of tests/ref/t5-ref.py (tests/cli/train-t5.sh),
 * as train_model --dump is gpt-ref.py's: builds the T5 of the config ("device" picks the
 * backend, exit 4 when it is absent; "tp" > 1 under mpirun), writes OUTDIR/init.safetensors,
 * OUTDIR/batch.safetensors (S micro-batches shaped like T5Dataset's: text_enc, text_dec, labels,
 * loss_mask, enc_valid, dec_valid, I32 [S,B,T]) and OUTDIR/c.safetensors: logits [B,Td,Vp],
 * loss and every gradient of batch 0 at the initial weights, then the losses, gradient norms and
 * final weights of S optimizer steps. */
#include "t.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/safetensors.h"
#include "train/parallel/dist.h"
#include "train/model/model.h"
#include "train/model/philox.h"
#include "train/optim/optim.h"
#include "train/optim/state.h"
#include "train/device.h"
#include "train/cpu/ops_cpu.h"

static struct model_config tiny_t5(void)
{
	struct model_config c = {
		.arch = MODEL_T5, .layers = 2, .hidden = 32, .heads = 4, .ffn = 128, .seq = 12,
		.dec_seq = 7, .max_pos = 16, .vocab = 60, .padded_vocab = 64, .eps = 1e-5f,
		.init_std = 0.2f, .seed = 1234, .tp = 1, .eod = -1,
	};
	return c;
}

/* S micro-batches of B samples as T5Dataset makes them: the encoder's tokens (ids >= 5) then
 * padding 0 (sample 0 full, the others between Te/2 and Te real), the decoder's input and
 * labels on its first n_dec positions (sample 0 full, others 2..Td) then 0 and -1, loss mask 1
 * there; *_valid the masks' "id >= 1". */
struct t5_batches {
	int S, B, Te, Td;
	int32_t *enc, *dec, *labels, *lmask, *ev, *dv;
	int32_t *lens;   /* [S,B] real encoder tokens */
	uint8_t *lm;     /* [S,B,Td] */
};

static void t5_batches_make(struct t5_batches *x, int S, int B, int Te, int Td, int V)
{
	size_t ne = (size_t)S * B * Te, nd = (size_t)S * B * Td;
	*x = (struct t5_batches){.S = S, .B = B, .Te = Te, .Td = Td};
	x->enc = calloc(ne, 4), x->ev = calloc(ne, 4);
	x->dec = calloc(nd, 4), x->labels = calloc(nd, 4), x->lmask = calloc(nd, 4);
	x->dv = calloc(nd, 4), x->lm = calloc(nd, 1), x->lens = calloc((size_t)S * B, 4);
	for (int s = 0; s < S; s++)
		for (int b = 0; b < B; b++) {
			uint64_t key = 7000 + s * 64 + b;
			int k = s * B + b;
			int ne_ = b == 0 ? Te : Te / 2 + (int)(philox_u32(key, 0) % (Te / 2 + 1));
			int nd_ = b == 0 ? Td : 2 + (int)(philox_u32(key, 1) % (Td - 1));
			for (int t = 0; t < Te; t++) {
				int real = t < ne_;
				x->enc[(size_t)k * Te + t] = real ? 5 + (int)(philox_u32(key, 10 + t) % (V - 5)) : 0;
				x->ev[(size_t)k * Te + t] = real;
			}
			for (int t = 0; t < Td; t++) {
				int real = t < nd_;
				size_t i = (size_t)k * Td + t;
				x->dec[i] = real ? 5 + (int)(philox_u32(key, 500 + t) % (V - 5)) : 0;
				x->labels[i] = real ? (int)(philox_u32(key, 900 + t) % V) : -1;
				x->lmask[i] = real;
				x->lm[i] = (uint8_t)real;
				x->dv[i] = real;
			}
			x->lens[k] = ne_;
		}
}

static void t5_batches_free(struct t5_batches *x)
{
	free(x->enc), free(x->ev), free(x->dec), free(x->labels), free(x->lmask), free(x->dv);
	free(x->lm), free(x->lens);
}

static struct model_batch t5_view(const struct t5_batches *x, int s)
{
	size_t oe = (size_t)s * x->B * x->Te, od = (size_t)s * x->B * x->Td;
	return (struct model_batch){.tokens = x->enc + oe, .dec_tokens = x->dec + od,
				    .targets = x->labels + od, .loss_mask = x->lm + od,
				    .lens = x->lens + (size_t)s * x->B};
}

/* central differences in double around the fp32 weights (train_model.c's fd_check) */
static int fd_check_t5(struct model_config c, const char *what)
{
	struct model m;
	char err[256];
	int B = 3, ok = 1, bad;
	struct t5_batches x;
	if (model_init(&m, &c, ops_cpu(1), B, c.seq, err, sizeof err) < 0) {
		printf("# %s\n", err);
		return 0;
	}
	model_init_weights(&m);
	t5_batches_make(&x, 1, B, c.seq, c.dec_seq, c.vocab);
	struct model_batch mb = t5_view(&x, 0);
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
	t5_batches_free(&x);
	model_free(&m);
	return ok;
}

/* The cross-attention op against the definition, in double: q (B,Tq,NH,HD), kv (B,Tk,NH,2,HD),
 * keys [0, klen[b]), dropout p as ops.h says; the backward against finite differences of
 * sum(out * w) for a fixed w */
static double xattn_direct(const float *q, const float *kv, const int32_t *klen, int B, int Tq,
			   int Tk, int NH, int HD, float p, uint64_t seed, const float *w)
{
	double tot = 0;
	int C = NH * HD;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int i = 0; i < Tq; i++) {
				double s[64], mx = -1e300, sum = 0;
				for (int j = 0; j < klen[b]; j++) {
					double d = 0;
					for (int c = 0; c < HD; c++)
						d += (double)q[((size_t)(b * Tq + i)) * C + h * HD + c] *
						     kv[((size_t)(b * Tk + j)) * 2 * C + h * 2 * HD + c];
					s[j] = d / sqrt((double)HD);
					mx = s[j] > mx ? s[j] : mx;
				}
				for (int j = 0; j < klen[b]; j++)
					sum += exp(s[j] - mx);
				for (int c = 0; c < HD; c++) {
					double o = 0;
					for (int j = 0; j < klen[b]; j++) {
						uint64_t e = ((uint64_t)b * NH + h) * Tq * Tk + (uint64_t)i * Tk + j;
						double keep = p > 0 ? philox_keep(seed, e, p) : 1.0;
						o += exp(s[j] - mx) / sum * keep *
						     kv[((size_t)(b * Tk + j)) * 2 * C + h * 2 * HD + HD + c];
					}
					tot += o * w[((size_t)(b * Tq + i)) * C + h * HD + c];
				}
			}
	return tot;
}

static int xattn_check(float p)
{
	const struct ops *o = ops_cpu(2);
	enum { B = 2, Tq = 5, Tk = 9, NH = 2, HD = 4, C = NH * HD };
	float q[B * Tq * C], kv[B * Tk * 2 * C], w[B * Tq * C], out[B * Tq * C], lse[B * NH * Tq];
	float dq[B * Tq * C], dkv[B * Tk * 2 * C];
	int32_t klen[B] = {Tk, 4};
	int ok = 1;
	for (int i = 0; i < B * Tq * C; i++) {
		q[i] = (float)philox_normal(1, i);
		w[i] = (float)philox_normal(3, i);
	}
	for (int i = 0; i < B * Tk * 2 * C; i++)
		kv[i] = (float)philox_normal(2, i);
	struct ops_attn k = {.p = p, .seed = 77, .heads = NH, .bidir = 1, .klen = klen};
	o->xattn_fwd(out, lse, q, kv, B, Tq, Tk, NH, HD, k);
	double got = 0;
	for (int i = 0; i < B * Tq * C; i++)
		got += (double)out[i] * w[i];
	double want = xattn_direct(q, kv, klen, B, Tq, Tk, NH, HD, p, 77, w);
	if (fabs(got - want) > 1e-4 * fmax(1, fabs(want))) {
		printf("# xattn forward: %.8g, direct %.8g\n", got, want);
		ok = 0;
	}
	o->xattn_bwd(dq, dkv, w, q, kv, out, lse, B, Tq, Tk, NH, HD, k);
	for (int which = 0; which < 2; which++) {
		float *x = which ? kv : q, *g = which ? dkv : dq;
		int n = which ? B * Tk * 2 * C : B * Tq * C;
		for (int e = 0; e < n; e += 3) {
			float save = x[e];
			x[e] = save + 1e-2f;
			double lp = xattn_direct(q, kv, klen, B, Tq, Tk, NH, HD, p, 77, w);
			x[e] = save - 1e-2f;
			double lm = xattn_direct(q, kv, klen, B, Tq, Tk, NH, HD, p, 77, w);
			x[e] = save;
			double fd = (lp - lm) / 2e-2;
			if (fabs(fd - g[e]) > 1e-2 * fmax(fabs(fd), 1e-1)) {
				printf("# xattn d%s[%d]: %.6g, finite difference %.6g\n",
				       which ? "kv" : "q", e, g[e], fd);
				ok = 0;
			}
		}
	}
	/* keys at or past klen get no gradient */
	for (int j = 4; j < Tk; j++)
		for (int c = 0; c < 2 * C; c++)
			ok &= dkv[((size_t)(Tk + j)) * 2 * C + c] == 0.0f;
	return ok;
}

static int unit(void)
{
	T_CASE("cross_attention_op_matches_its_definition") {
		T_ASSERT(xattn_check(0.0f));
		T_ASSERT(xattn_check(0.3f));
	}
	T_CASE("t5_gradients_match_finite_differences") {
		T_ASSERT(fd_check_t5(tiny_t5(), "t5"));
		struct model_config c = tiny_t5();
		c.post_ln_residual = 1;
		c.dec_seq = 13;   /* a decoder longer than the encoder */
		c.max_pos = 13;
		T_ASSERT(fd_check_t5(c, "t5-postln-longdec"));
		c = tiny_t5();
		c.hidden_dropout = 0.1f;
		c.attention_dropout = 0.2f;
		T_ASSERT(fd_check_t5(c, "t5-dropout"));
	}
	T_CASE("t5_padding_changes_nothing_real") {
		/* other ids at the padded encoder and decoder positions: the loss and every gradient
		 * are bit-identical; a change at a real encoder position changes the loss */
		struct model_config c = tiny_t5();
		c.attention_dropout = 0.1f;
		c.hidden_dropout = 0.1f;
		struct model m;
		char err[256];
		int B = 3, bad;
		struct t5_batches x;
		T_ASSERT(model_init(&m, &c, ops_cpu(2), B, c.seq, err, sizeof err) == 0);
		model_init_weights(&m);
		t5_batches_make(&x, 1, B, c.seq, c.dec_seq, c.vocab);
		struct model_batch mb = t5_view(&x, 0);
		T_ASSERT(x.lens[1] < c.seq || x.lens[2] < c.seq);
		T_ASSERT(!x.dv[2 * c.dec_seq - 1] || !x.dv[3 * c.dec_seq - 1]);
		float *g0 = malloc(m.nparams * sizeof *g0);
		model_zero_grad(&m);
		double l0 = model_forward_batch(&m, &mb, 1.0f, 5, 0, NULL, &bad);
		model_backward(&m);
		memcpy(g0, m.grads, m.nparams * sizeof *g0);
		for (int i = 0; i < B * c.seq; i++)
			if (!x.ev[i])
				x.enc[i] = 7 + i % 11;
		for (int i = 0; i < B * c.dec_seq; i++)
			if (!x.dv[i])
				x.dec[i] = 9 + i % 13;
		model_zero_grad(&m);
		double l1 = model_forward_batch(&m, &mb, 1.0f, 5, 0, NULL, &bad);
		model_backward(&m);
		T_ASSERT(l1 == l0);
		T_ASSERT(memcmp(g0, m.grads, m.nparams * sizeof *g0) == 0);
		x.enc[1] = x.enc[1] == 9 ? 10 : 9;   /* a real encoder position */
		double l2 = model_forward_batch(&m, &mb, 1.0f, 5, 0, NULL, &bad);
		T_ASSERT(l2 != l0);
		free(g0);
		t5_batches_free(&x);
		model_free(&m);
	}
	T_CASE("t5_has_megatrons_tensors") {
		struct model_config c = tiny_t5();
		struct model m;
		char err[256];
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, c.seq, err, sizeof err) == 0);
		const char *want[] = {"word_embeddings.weight", "position_embeddings.weight",
				      "encoder.layers.1.attention.query_key_value.weight",
				      "encoder.final_layernorm.bias",
				      "decoder.layers.0.attention.dense.weight",
				      "decoder.layers.1.inter_attention.query.weight",
				      "decoder.layers.1.inter_attention.key_value.bias",
				      "decoder.layers.0.inter_attention.dense.weight",
				      "decoder.layers.0.post_inter_attention_layernorm.weight",
				      "decoder.final_layernorm.weight", "lm_head.bias"};
		for (size_t k = 0; k < sizeof want / sizeof *want; k++)
			T_ASSERT(model_find(&m, want[k]) >= 0);
		T_ASSERT(model_find(&m, "encoder.layers.0.inter_attention.query.weight") < 0);
		T_ASSERT(model_find(&m, "tokentype_embeddings.weight") < 0);
		/* 2 embeddings, 2 x 12 encoder, 2 enc LN, 2 x 20 decoder, 2 dec LN, the bias */
		T_ASSERT(m.ntensors == 2 + 24 + 2 + 40 + 2 + 1);
		const struct model_tensor *kv = &m.tensors[model_find(&m, "decoder.layers.0.inter_attention.key_value.weight")];
		T_ASSERT(kv->shape[0] == 64 && kv->shape[1] == 32 && kv->split == SPLIT_COLUMN);
		T_ASSERT(m.tensors[model_find(&m, "decoder.layers.0.inter_attention.dense.weight")].split == SPLIT_ROW);
		T_ASSERT(m.tensors[model_find(&m, "lm_head.bias")].split == SPLIT_VOCAB &&
			 !m.tensors[model_find(&m, "lm_head.bias")].decay);
		model_free(&m);
		c.pp = 2;
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, c.seq, err, sizeof err) < 0);
		T_ASSERT(strstr(err, "--pipeline-model-parallel-split-rank") != NULL);
		c = tiny_t5();
		c.dec_seq = 17;
		T_ASSERT(model_init(&m, &c, ops_cpu(1), 2, c.seq, err, sizeof err) < 0);
		T_ASSERT(strstr(err, "--decoder-seq-length") != NULL);
	}
	T_DONE();
}

/* ---- --dump ---- */

static double jnum(json_t *j, const char *k, double def)
{
	json_t *v = json_object_get(j, k);
	return json_is_number(v) ? json_number_value(v) : json_is_boolean(v) ? json_is_true(v) : def;
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

static size_t full_numel(const struct model_tensor *t)
{
	return (size_t)t->shape[0] * (t->shape[1] ? t->shape[1] : 1);
}

static void gather_all(struct model *m, struct dist *d, const float *buf, float *out, float *tmp,
		       int *same)
{
	size_t at = 0;
	for (int i = 0; i < m->ntensors; i++) {
		gather_full(m, d, buf, i, out + at, tmp, same);
		at += full_numel(&m->tensors[i]);
	}
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
	struct model_config c = {
		.arch = MODEL_T5, .layers = jnum(j, "num_layers", 2), .hidden = jnum(j, "hidden_size", 64),
		.heads = jnum(j, "num_attention_heads", 4), .ffn = jnum(j, "ffn_hidden_size", 256),
		.seq = jnum(j, "encoder_seq_length", 16), .dec_seq = jnum(j, "decoder_seq_length", 8),
		.max_pos = jnum(j, "max_position_embeddings", 16),
		.vocab = jnum(j, "vocab_size", 100), .padded_vocab = jnum(j, "padded_vocab_size", 128),
		.eps = jnum(j, "layernorm_epsilon", 1e-5), .init_std = jnum(j, "init_method_std", 0.02),
		.hidden_dropout = jnum(j, "hidden_dropout", 0),
		.attention_dropout = jnum(j, "attention_dropout", 0), .seed = jnum(j, "seed", 1234),
		.tp = 1, .eod = -1,
		.post_ln_residual = jnum(j, "apply_residual_connection_post_layernorm", 0),
	};
	int B = jnum(j, "micro_batch_size", 2), S = jnum(j, "steps", 10);
	int threads = jnum(j, "threads", 0), tp = jnum(j, "tp", 1);
	const char *dev = json_string_value(json_object_get(j, "device"));
	char devbuf[32];
	snprintf(devbuf, sizeof devbuf, "%s", dev ? dev : "cpu");
	float lr = jnum(j, "lr", 1e-3);
	struct optim opt;
	optim_init(&opt, jnum(j, "adam_beta1", 0.9), jnum(j, "adam_beta2", 0.999),
		   jnum(j, "adam_eps", 1e-8), jnum(j, "weight_decay", 0.01), jnum(j, "clip_grad", 1.0),
		   0, 1, 1, 1000, 2);
	const char *okind = json_string_value(json_object_get(j, "optimizer"));
	opt.kind = okind && !strcmp(okind, "lamb") ? OPT_LAMB : okind && !strcmp(okind, "sgd") ? OPT_SGD
											     : OPT_ADAMW;
	opt.momentum = jnum(j, "sgd_momentum", 0.9);
	enum ops_prec prec = jnum(j, "fp16", 0) ? OPS_FP16 : OPS_BF16; /* the CUDA backend's */
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
	int writer = d.rank == 0, Te = c.seq, Td = c.dec_seq;
	optim_state_rule(&c);
	if (model_init(&m, &c, ops, B, Te, err, sizeof err) < 0 ||
	    optim_state_init(&m, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	m.dist = &d;
	model_init_weights(&m);
	if (writer)
		mkdir(outdir, 0755);

	struct t5_batches x;
	t5_batches_make(&x, S, B, Te, Td, c.vocab);
	struct st_writer *w;
	if (writer) {
		int64_t se[3] = {S, B, Te}, sd[3] = {S, B, Td};
		const char *names[6] = {"text_enc", "enc_valid", "text_dec", "labels", "loss_mask",
					"dec_valid"};
		const int32_t *data[6] = {x.enc, x.ev, x.dec, x.labels, x.lmask, x.dv};
		snprintf(path, sizeof path, "%s/batch.safetensors", outdir);
		if (!(w = st_create(path, err, sizeof err)))
			return fprintf(stderr, "%s\n", err), 3;
		for (int k = 0; k < 6; k++)
			st_declare(w, names[k], ST_I32, 3, k < 2 ? se : sd);
		for (int k = 0; k < 6; k++)
			st_write(w, data[k], (size_t)S * B * (k < 2 ? Te : Td) * 4);
		if (st_commit(w))
			return fprintf(stderr, "%s\n", st_werror(w)), 3;
	}

	size_t most = 0, full_n = 0;
	for (int i = 0; i < m.ntensors; i++) {
		most = m.tensors[i].numel > most ? m.tensors[i].numel : most;
		full_n += full_numel(&m.tensors[i]);
	}
	float *tmp = malloc(most * sizeof *tmp), *init = malloc(full_n * sizeof *init);
	float *grads = malloc(full_n * sizeof *grads), *fin = malloc(full_n * sizeof *fin);
	int same = 1;
	gather_all(&m, &d, m.master, init, tmp, &same);
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
	size_t n = (size_t)B * Td;
	int Vp = c.padded_vocab, Vl = Vp / c.tp, bad;
	float *logits = malloc(n * Vp * sizeof *logits), *lloc = malloc(n * Vl * sizeof *lloc);
	struct model_batch mb = t5_view(&x, 0);
	model_zero_grad(&m);
	float loss0 = model_forward_batch(&m, &mb, 1.0f, 0, 0, lloc, &bad);
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
	gather_all(&m, &d, m.grads, grads, tmp, &same);

	float *losses = malloc(S * sizeof *losses), *norms = malloc(S * sizeof *norms);
	for (int s = 0; s < S; s++) {
		double gn;
		model_zero_grad(&m);
		mb = t5_view(&x, s);
		losses[s] = model_forward_batch(&m, &mb, 1.0f, s, 0, NULL, &bad);
		model_backward(&m);
		optim_step(&opt, &m, lr, &gn);
		norms[s] = gn;
	}
	gather_all(&m, &d, m.master, fin, tmp, &same);
	if (c.tp > 1)   /* the replicated tensors, their gradients and their values after S steps */
		printf("replicated tensors bit-identical across %d TP ranks: %s\n", c.tp,
		       same ? "yes" : "NO");

	if (writer) {
		snprintf(path, sizeof path, "%s/c.safetensors", outdir);
		w = st_create(path, err, sizeof err);
		int64_t lshape[3] = {B, Td, Vp}, one = 1, sS = S;
		char name[96];
		st_declare(w, "logits", ST_F32, 3, lshape);
		st_declare(w, "loss", ST_F32, 1, &one);
		st_declare(w, "losses", ST_F32, 1, &sS);
		st_declare(w, "grad_norms", ST_F32, 1, &sS);
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
		st_write(w, grads, full_n * 4);
		st_write(w, fin, full_n * 4);
		if (st_commit(w))
			return fprintf(stderr, "%s\n", st_werror(w)), 3;
	}
	t5_batches_free(&x);
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
