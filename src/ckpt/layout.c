/* layout - see layout.h. */
#include "ckpt/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "xalloc.h"

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

/* T5's cross-attention, after a decoder layer's twelve (train's model/layers.c) */
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

/* The layers under a prefix ("", T5's "encoder." and "decoder."), each with the
 * cross-attention's tensors too when cross */
static void add_stack(struct lt_model *m, const char *prefix, int cross)
{
	char n[64];   /* the longest: "decoder.layers.NNN.post_inter_attention_layernorm.weight" */
	int64_t h = m->hidden;
	for (int l = 0; l < m->layers; l++)
		for (int k = 0; k < (cross ? LT_XLAYER_TENSORS : LT_LAYER_TENSORS); k++) {
			int64_t dim[5] = {0, h, 2 * h, 3 * h, m->ffn};
			int x = k - LT_LAYER_TENSORS;
			const char *name = x < 0 ? layer_spec[k].name : xlayer_spec[x].name;
			int d0 = x < 0 ? layer_spec[k].d0 : xlayer_spec[x].d0;
			int d1 = x < 0 ? layer_spec[k].d1 : xlayer_spec[x].d1;
			snprintf(n, sizeof n, "%slayers.%d.%s", prefix, l, name);
			add(m, n, dim[d0], dim[d1], x < 0 ? layer_spec[k].split : xlayer_spec[x].split,
			    LT_LAYER, l, k);
		}
}

static void add_layers(struct lt_model *m)
{
	m->layer0 = m->n;
	add_stack(m, "", 0);
}

static int one(struct lt_model *m, const char *name, int64_t d0, int64_t d1, enum lt_split split,
	       enum lt_place place)
{
	return add(m, name, d0, d1, split, place, -1, -1);
}

/* train's gpt.c */
static void build_gpt(struct lt_model *m)
{
	int64_t h = m->hidden;
	m->wte = one(m, "word_embeddings.weight", m->padded_vocab, h, LT_VOCAB, LT_EMBED);
	if (!m->alibi)
		m->wpe = one(m, "position_embeddings.weight", m->max_pos, h, LT_NONE, LT_FIRST);
	if (m->embed_ln) {
		m->eln_w = one(m, "embed_layernorm.weight", h, 0, LT_NONE, LT_FIRST);
		m->eln_b = one(m, "embed_layernorm.bias", h, 0, LT_NONE, LT_FIRST);
	}
	add_layers(m);
	m->lnf_w = one(m, "final_layernorm.weight", h, 0, LT_NONE, LT_LAST);
	m->lnf_b = one(m, "final_layernorm.bias", h, 0, LT_NONE, LT_LAST);
}

/* train's bert.c (Megatron's BertModel): the heads after the final layer norm, in its order */
static void build_bert(struct lt_model *m)
{
	int64_t h = m->hidden;
	m->wte = one(m, "word_embeddings.weight", m->padded_vocab, h, LT_VOCAB, LT_EMBED);
	m->wpe = one(m, "position_embeddings.weight", m->max_pos, h, LT_NONE, LT_FIRST);
	if (m->num_tokentypes > 0)
		m->tte = one(m, "tokentype_embeddings.weight", m->num_tokentypes, h, LT_NONE,
			     LT_FIRST);
	add_layers(m);
	m->lnf_w = one(m, "final_layernorm.weight", h, 0, LT_NONE, LT_LAST);
	m->lnf_b = one(m, "final_layernorm.bias", h, 0, LT_NONE, LT_LAST);
	if (m->binary_head) {
		m->pool_w = one(m, "pooler.dense.weight", h, h, LT_NONE, LT_LAST);
		m->pool_b = one(m, "pooler.dense.bias", h, 0, LT_NONE, LT_LAST);
	}
	m->hd_w = one(m, "lm_head.dense.weight", h, h, LT_NONE, LT_LAST);
	m->hd_b = one(m, "lm_head.dense.bias", h, 0, LT_NONE, LT_LAST);
	m->hd_ln_w = one(m, "lm_head.layernorm.weight", h, 0, LT_NONE, LT_LAST);
	m->hd_ln_b = one(m, "lm_head.layernorm.bias", h, 0, LT_NONE, LT_LAST);
	m->lm_bias = one(m, "lm_head.bias", m->padded_vocab, 0, LT_VOCAB, LT_LAST);
	if (m->binary_head) {
		m->bin_w = one(m, "binary_head.weight", 2, h, LT_NONE, LT_LAST);
		m->bin_b = one(m, "binary_head.bias", 2, 0, LT_NONE, LT_LAST);
	}
}

/* train's t5.c (Megatron's T5Model): two stacks, the LM head's bias */
static void build_t5(struct lt_model *m)
{
	int64_t h = m->hidden;
	m->wte = one(m, "word_embeddings.weight", m->padded_vocab, h, LT_VOCAB, LT_EMBED);
	m->wpe = one(m, "position_embeddings.weight", m->max_pos, h, LT_NONE, LT_FIRST);
	m->layer0 = m->n;
	add_stack(m, "encoder.", 0);
	one(m, "encoder.final_layernorm.weight", h, 0, LT_NONE, LT_LAST);
	one(m, "encoder.final_layernorm.bias", h, 0, LT_NONE, LT_LAST);
	add_stack(m, "decoder.", 1);
	m->lnf_w = one(m, "decoder.final_layernorm.weight", h, 0, LT_NONE, LT_LAST);
	m->lnf_b = one(m, "decoder.final_layernorm.bias", h, 0, LT_NONE, LT_LAST);
	m->lm_bias = one(m, "lm_head.bias", m->padded_vocab, 0, LT_VOCAB, LT_LAST);
}

static int jbool(json_t *o, const char *k, int dflt)
{
	json_t *x = json_object_get(o, k);
	return json_is_boolean(x) ? json_is_true(x) : dflt;
}

/* BERT's fields beyond GPT's; 0, or -1 + err */
static int fields_bert(struct lt_model *m, json_t *mo, const char *where, char *err, size_t errlen)
{
	json_t *k = json_object_get(mo, "num_tokentypes"), *b = json_object_get(mo, "binary_head");
	if (!json_is_integer(k) || json_integer_value(k) < 0 || json_integer_value(k) > 1 << 20)
		return errf(err, errlen, "%s: model.num_tokentypes is missing or not a count", where);
	if (!json_is_boolean(b))
		return errf(err, errlen, "%s: model.binary_head is missing or not a boolean", where);
	if (m->alibi || m->embed_ln)
		return errf(err, errlen, "%s: a BERT has learned positions and no embedding layer "
			    "norm (model.position_embedding_type, model.embed_layernorm)", where);
	m->num_tokentypes = (int)json_integer_value(k);
	m->binary_head = json_is_true(b);
	m->openai_gelu = jbool(mo, "openai_gelu", -1);
	return 0;
}

/* T5's fields beyond GPT's: none the table needs; its embeddings are learned and plain */
static int fields_t5(struct lt_model *m, json_t *mo, const char *where, char *err, size_t errlen)
{
	(void)mo;
	if (m->alibi || m->embed_ln)
		return errf(err, errlen, "%s: a T5 has learned positions and no embedding layer norm "
			    "(model.position_embedding_type, model.embed_layernorm)", where);
	return 0;
}

/* The architectures a checkpoint can hold: model.model_type, its fields beyond the common ones,
 * its table. */
static const struct lt_arch {
	enum lt_type type;
	const char *name;
	int (*fields)(struct lt_model *m, json_t *mo, const char *where, char *err, size_t errlen);
	void (*build)(struct lt_model *m);
	int per_layer;          /* tensors per layer index, all stacks */
	int max_tensors;        /* beyond the layers' */
} archs[] = {
	{LT_GPT, "gpt", NULL, build_gpt, LT_LAYER_TENSORS, 6},
	{LT_BERT, "bert", fields_bert, build_bert, LT_LAYER_TENSORS, 14},
	{LT_T5, "t5", fields_t5, build_t5, LT_LAYER_TENSORS + LT_XLAYER_TENSORS, 7},
};

static const struct lt_arch *arch_of(enum lt_type type)
{
	for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
		if (archs[i].type == type)
			return &archs[i];
	return NULL;
}

static int build(struct lt_model *m)
{
	const struct lt_arch *a = arch_of(m->type);
	if (!a)
		return -1;
	m->t = calloc((size_t)m->layers * a->per_layer + a->max_tensors, sizeof *m->t);
	if (!m->t)
		return -1;
	m->n = 0;
	m->wte = m->wpe = m->eln_w = m->eln_b = m->tte = m->lnf_w = m->lnf_b = -1;
	m->pool_w = m->pool_b = m->hd_w = m->hd_b = m->hd_ln_w = m->hd_ln_b = m->lm_bias = -1;
	m->bin_w = m->bin_b = -1;
	a->build(m);
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
	/* the architecture first: an unknown one is refused by name, whatever its fields */
	json_t *mt = json_object_get(mo, "model_type");
	const struct lt_arch *arch = NULL;
	if (mt && !json_is_string(mt))
		return errf(err, errlen, "%s: model.model_type is not a string", where);
	const char *tn = mt ? json_string_value(mt) : "gpt";
	for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
		if (strcmp(tn, archs[i].name) == 0)
			arch = &archs[i];
	if (!arch)
		return errf(err, errlen, "%s: model type \"%.64s\" is not one this program knows "
			    "(gpt, bert, t5): a newer lmtk wrote it?", where, tn);
	m->type = arch->type;
	m->type_name = arch->name;
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
	m->post_ln = jbool(mo, "apply_residual_connection_post_layernorm", -1);
	m->openai_gelu = 0;
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
	if (arch->fields && arch->fields(m, mo, where, err, errlen) < 0)
		return -1;
	if (build(m) < 0)
		return xalloc_err_in(err, errlen, where, "the tensor layout", 0);
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

int lt_padded_vocab(int vocab, int divisible_by, int tp)
{
	int64_t mult = (int64_t)divisible_by * tp, p = ((int64_t)vocab + mult - 1) / mult * mult;
	return p > INT32_MAX ? -1 : (int)p;
}

int lt_megatron_padded_vocab(int vocab, int tp)
{
	return lt_padded_vocab(vocab, 128, tp);
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
	if (m->type == LT_T5) {   /* two stacks of prefixed names: the table is short, scan it */
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
	/* the few tensors outside the layers: before them, and after */
	for (int i = 0; i < m->n; i++) {
		if (i == m->layer0)
			i += m->layers * LT_LAYER_TENSORS;
		if (i < m->n && strcmp(m->t[i].name, name) == 0)
			return i;
	}
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
