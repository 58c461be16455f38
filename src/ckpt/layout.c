/* layout - see layout.h. */
#include "ckpt/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

const char *const lt_group_prefix[LT_GROUPS] = {"", "exp_avg.", "exp_avg_sq."};
const char *const lt_group_name[LT_GROUPS] = {"weight", "exp_avg", "exp_avg_sq"};

static const struct {
	const char *name;
	int d0, d1;             /* 1 hidden, 3 3*hidden, 4 ffn; d1 0: 1-D */
	enum lt_split split;
} layer_spec[LT_LAYER_TENSORS] = {
	{"input_layernorm.weight", 1, 0, LT_NONE},
	{"input_layernorm.bias", 1, 0, LT_NONE},
	{"attention.query_key_value.weight", 3, 1, LT_COLUMN},
	{"attention.query_key_value.bias", 3, 0, LT_COLUMN},
	{"attention.dense.weight", 1, 1, LT_ROW},
	{"attention.dense.bias", 1, 0, LT_NONE},
	{"post_attention_layernorm.weight", 1, 0, LT_NONE},
	{"post_attention_layernorm.bias", 1, 0, LT_NONE},
	{"mlp.dense_h_to_4h.weight", 4, 1, LT_COLUMN},
	{"mlp.dense_h_to_4h.bias", 4, 0, LT_COLUMN},
	{"mlp.dense_4h_to_h.weight", 1, 4, LT_ROW},
	{"mlp.dense_4h_to_h.bias", 1, 0, LT_NONE},
};

static int add(struct lt_model *m, const char *name, int64_t d0, int64_t d1, enum lt_split split,
	       enum lt_place place, int layer, int which)
{
	struct lt_tensor *t = &m->t[m->n];
	snprintf(t->name, sizeof t->name, "%s", name);
	t->ndim = d1 ? 2 : 1;
	t->shape[0] = d0;
	t->shape[1] = d1 ? d1 : 1;
	t->split = split;
	t->place = place;
	t->layer = layer;
	t->which = which;
	return m->n++;
}

/* The cross-attention's, as train's (model/layers.c) */
static const struct {
	const char *name;
	int d0, d1;             /* 1 hidden, 2 2*hidden; d1 0: 1-D */
	enum lt_split split;
} xlayer_spec[LT_XLAYER_TENSORS - LT_LAYER_TENSORS] = {
	{"inter_attention.query.weight", 1, 1, LT_COLUMN},
	{"inter_attention.query.bias", 1, 0, LT_COLUMN},
	{"inter_attention.key_value.weight", 2, 1, LT_COLUMN},
	{"inter_attention.key_value.bias", 2, 0, LT_COLUMN},
	{"inter_attention.dense.weight", 1, 1, LT_ROW},
	{"inter_attention.dense.bias", 1, 0, LT_NONE},
	{"post_inter_attention_layernorm.weight", 1, 0, LT_NONE},
	{"post_inter_attention_layernorm.bias", 1, 0, LT_NONE},
};

/* a layer's tensors under a prefix ("", "encoder.", "decoder."), the cross-attention's too */
static void add_layer(struct lt_model *m, const char *prefix, int l, int cross)
{
	char n[64];   /* the longest: "decoder.layers.NNN.post_inter_attention_layernorm.weight" */
	int64_t h = m->hidden;
	for (int k = 0; k < (cross ? LT_XLAYER_TENSORS : LT_LAYER_TENSORS); k++) {
		int64_t dim[5] = {0, h, 2 * h, 3 * h, m->ffn};
		const char *name = k < LT_LAYER_TENSORS ? layer_spec[k].name
							: xlayer_spec[k - LT_LAYER_TENSORS].name;
		int d0 = k < LT_LAYER_TENSORS ? layer_spec[k].d0 : xlayer_spec[k - LT_LAYER_TENSORS].d0;
		int d1 = k < LT_LAYER_TENSORS ? layer_spec[k].d1 : xlayer_spec[k - LT_LAYER_TENSORS].d1;
		enum lt_split sp = k < LT_LAYER_TENSORS ? layer_spec[k].split
						       : xlayer_spec[k - LT_LAYER_TENSORS].split;
		snprintf(n, sizeof n, "%slayers.%d.%s", prefix, l, name);
		add(m, n, dim[d0], dim[d1], sp, LT_LAYER, l, k);
	}
}

/* T5's table: train's model/t5.c */
static int build_t5(struct lt_model *m)
{
	int64_t h = m->hidden;
	m->t = calloc((size_t)m->layers * (LT_LAYER_TENSORS + LT_XLAYER_TENSORS) + 7, sizeof *m->t);
	if (!m->t)
		return -1;
	m->n = 0;
	m->eln_w = m->eln_b = -1;
	m->wte = add(m, "word_embeddings.weight", m->padded_vocab, h, LT_VOCAB, LT_EMBED, -1, -1);
	m->wpe = add(m, "position_embeddings.weight", m->max_pos, h, LT_NONE, LT_FIRST, -1, -1);
	m->layer0 = m->n;
	for (int l = 0; l < m->layers; l++)
		add_layer(m, "encoder.", l, 0);
	add(m, "encoder.final_layernorm.weight", h, 0, LT_NONE, LT_LAST, -1, -1);
	add(m, "encoder.final_layernorm.bias", h, 0, LT_NONE, LT_LAST, -1, -1);
	for (int l = 0; l < m->layers; l++)
		add_layer(m, "decoder.", l, 1);
	m->lnf_w = add(m, "decoder.final_layernorm.weight", h, 0, LT_NONE, LT_LAST, -1, -1);
	m->lnf_b = add(m, "decoder.final_layernorm.bias", h, 0, LT_NONE, LT_LAST, -1, -1);
	add(m, "lm_head.bias", m->padded_vocab, 0, LT_VOCAB, LT_LAST, -1, -1);
	return 0;
}

static int build(struct lt_model *m)
{
	char n[64];
	int64_t h = m->hidden;
	if (m->t5)
		return build_t5(m);
	m->t = calloc((size_t)m->layers * LT_LAYER_TENSORS + 6, sizeof *m->t);
	if (!m->t)
		return -1;
	m->n = 0;
	m->wte = add(m, "word_embeddings.weight", m->padded_vocab, h, LT_VOCAB, LT_EMBED, -1, -1);
	m->wpe = m->alibi ? -1 : add(m, "position_embeddings.weight", m->max_pos, h, LT_NONE,
				      LT_FIRST, -1, -1);
	m->eln_w = m->eln_b = -1;
	if (m->embed_ln) {
		m->eln_w = add(m, "embed_layernorm.weight", h, 0, LT_NONE, LT_FIRST, -1, -1);
		m->eln_b = add(m, "embed_layernorm.bias", h, 0, LT_NONE, LT_FIRST, -1, -1);
	}
	m->layer0 = m->n;
	for (int l = 0; l < m->layers; l++)
		for (int k = 0; k < LT_LAYER_TENSORS; k++) {
			int64_t dim[5] = {0, h, 0, 3 * h, m->ffn};
			snprintf(n, sizeof n, "layers.%d.%s", l, layer_spec[k].name);
			add(m, n, dim[layer_spec[k].d0], dim[layer_spec[k].d1], layer_spec[k].split,
			    LT_LAYER, l, k);
		}
	m->lnf_w = add(m, "final_layernorm.weight", h, 0, LT_NONE, LT_LAST, -1, -1);
	m->lnf_b = add(m, "final_layernorm.bias", h, 0, LT_NONE, LT_LAST, -1, -1);
	return 0;
}

static int jint(json_t *o, const char *k, int *v)
{
	json_t *x = json_object_get(o, k);
	if (!json_is_integer(x) || json_integer_value(x) <= 0 || json_integer_value(x) > 1 << 30)
		return -1;
	*v = (int)json_integer_value(x);
	return 0;
}

static double jreal(json_t *o, const char *k, double dflt)
{
	json_t *x = json_object_get(o, k);
	return json_is_number(x) ? json_number_value(x) : dflt;
}

int lt_from_manifest(struct lt_model *m, json_t *mo, const char *where, char *err, size_t errlen)
{
	static const char *keys[] = {"num_layers", "hidden_size", "num_attention_heads",
				     "ffn_hidden_size", "max_position_embeddings", "vocab_size",
				     "padded_vocab_size"};
	int *vals[] = {&m->layers, &m->hidden, &m->heads, &m->ffn, &m->max_pos, &m->vocab,
		       &m->padded_vocab};
	memset(m, 0, sizeof *m);
	if (!json_is_object(mo))
		return errf(err, errlen, "%s: no \"model\" object", where);
	const char *mt = json_string_value(json_object_get(mo, "model_type"));
	if (mt && strcmp(mt, "gpt") != 0 && strcmp(mt, "t5") != 0)   /* train --model-type bert */
		return errf(err, errlen, "%s: a %s checkpoint: this layout knows GPT/BLOOM and T5 "
			    "models; a BERT's tensors (token types, pooler, LM and binary heads) are "
			    "read by train --load only, so far", where, mt);
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		if (jint(mo, keys[i], vals[i]) < 0)
			return errf(err, errlen, "%s: model.%s is missing or not a positive integer",
				    where, keys[i]);
	const char *pe = json_string_value(json_object_get(mo, "position_embedding_type"));
	json_t *eln = json_object_get(mo, "embed_layernorm");
	if (!pe || (strcmp(pe, "learned") != 0 && strcmp(pe, "alibi") != 0))
		return errf(err, errlen, "%s: model.position_embedding_type must be \"learned\" or "
			    "\"alibi\"", where);
	if (!json_is_boolean(eln))
		return errf(err, errlen, "%s: model.embed_layernorm is missing or not a boolean", where);
	m->alibi = strcmp(pe, "alibi") == 0;
	m->embed_ln = json_is_true(eln);
	m->t5 = mt && strcmp(mt, "t5") == 0;
	if (m->t5 && (m->alibi || m->embed_ln))
		return errf(err, errlen, "%s: a T5 has learned positions and no embedding layer norm",
			    where);
	m->eps = jreal(mo, "layernorm_epsilon", 1e-5);
	m->init_std = jreal(mo, "init_method_std", 0.02);
	m->hidden_dropout = jreal(mo, "hidden_dropout", 0.1);
	m->attention_dropout = jreal(mo, "attention_dropout", 0.1);
	if (m->hidden % m->heads)
		return errf(err, errlen, "%s: model.hidden_size %d is not a multiple of "
			    "num_attention_heads %d", where, m->hidden, m->heads);
	if (m->padded_vocab < m->vocab)
		return errf(err, errlen, "%s: model.padded_vocab_size %d < vocab_size %d", where,
			    m->padded_vocab, m->vocab);
	if (build(m) < 0)
		return errf(err, errlen, "out of memory");
	return 0;
}

int lt_copy(struct lt_model *dst, const struct lt_model *src, int padded_vocab)
{
	*dst = *src;
	dst->padded_vocab = padded_vocab;
	return build(dst);
}

void lt_free(struct lt_model *m)
{
	free(m->t);
	m->t = NULL;
	m->n = 0;
}

int lt_megatron_padded_vocab(int vocab, int tp)
{
	int mult = 128 * tp;
	return (vocab + mult - 1) / mult * mult;
}

int lt_check_tp(const struct lt_model *m, int tp, char *err, size_t errlen)
{
	if (m->heads % tp)
		return errf(err, errlen, "%d attention heads cannot be split over TP=%d", m->heads, tp);
	if (m->ffn % tp)
		return errf(err, errlen, "ffn_hidden_size %d cannot be split over TP=%d", m->ffn, tp);
	if (m->padded_vocab % tp)
		return errf(err, errlen, "the padded vocabulary (%d) cannot be split over TP=%d",
			    m->padded_vocab, tp);
	return 0;
}

int lt_find(const struct lt_model *m, const char *name)
{
	if (m->t5) {   /* two stacks: names are unique, the table short */
		for (int i = 0; i < m->n; i++)
			if (strcmp(m->t[i].name, name) == 0)
				return i;
		return -1;
	}
	if (strncmp(name, "layers.", 7) == 0) {
		char *end;
		long l = strtol(name + 7, &end, 10);
		if (end == name + 7 || *end != '.' || l < 0 || l >= m->layers)
			return -1;
		for (int k = 0; k < LT_LAYER_TENSORS; k++)
			if (strcmp(end + 1, layer_spec[k].name) == 0)
				return m->layer0 + (int)l * LT_LAYER_TENSORS + k;
		return -1;
	}
	for (int i = 0; i < m->layer0; i++)
		if (strcmp(m->t[i].name, name) == 0)
			return i;
	for (int i = m->n - 2; i < m->n; i++)
		if (strcmp(m->t[i].name, name) == 0)
			return i;
	return -1;
}

int lt_parse(const struct lt_model *m, const char *name, int *group)
{
	for (int g = LT_GROUPS - 1; g >= 0; g--) {
		size_t n = strlen(lt_group_prefix[g]);
		if (strncmp(name, lt_group_prefix[g], n) == 0) {
			*group = g;
			return lt_find(m, name + n);
		}
	}
	return -1;
}

void lt_local_shape(const struct lt_tensor *t, int tp, int64_t out[2])
{
	out[0] = t->shape[0];
	out[1] = t->shape[1];
	if (t->split == LT_COLUMN || t->split == LT_VOCAB)
		out[0] /= tp;
	else if (t->split == LT_ROW)
		out[1] /= tp;
}

size_t lt_numel(const int64_t shape[2])
{
	return (size_t)shape[0] * (size_t)shape[1];
}

int lt_stage_of_layer(int l, int layers, int pp, int embedding)
{
	int units = layers + (embedding ? 2 : 0), per = (units + pp - 1) / pp;
	int s = (l + (embedding ? 1 : 0)) / per;
	return s < pp ? s : pp - 1;
}

int lt_on_stage(const struct lt_model *m, const struct lt_tensor *t, int s, int pp, int embedding)
{
	switch (t->place) {
	case LT_FIRST:
		return s == 0;
	case LT_LAST:
		return s == pp - 1;
	case LT_EMBED:
		return s == 0 || s == pp - 1;
	case LT_LAYER:
		return lt_stage_of_layer(t->layer, m->layers, pp, embedding) == s;
	}
	return 0;
}

int lt_stage_order(const struct lt_model *m, int s, int (*holds)(const void *ctx, int t),
		   const void *ctx, int *order)
{
	int n = 0, wte_first = s == 0 && holds(ctx, m->wte);
	for (int t = 0; t < m->n; t++)
		if (t != m->wte && holds(ctx, t))
			order[n++] = t;
		else if (t == m->wte && wte_first)
			order[n++] = t;
	/* the tied output layer of a last stage: after the final layer norm (train/model/model.c) */
	if (!wte_first && holds(ctx, m->wte))
		order[n++] = m->wte;
	return n;
}
