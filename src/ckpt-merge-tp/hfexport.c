/* hfexport - see hfexport.h. */
#include "ckpt-merge-tp/hfexport.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "ckpt/stop.h"
#include "msg.h"
#include "ckpt/reshard.h"
#include "ckpt/safetensors.h"
#include "ckpt-merge-tp/hf_int.h"
#include "xalloc.h"

void hf_switches_of(const struct sh_ckpt *in, struct hf_switches *s)
{
	const char *args = json_string_value(json_object_get(in->manifest, "args"));
	s->post_ln = in->m.post_ln >= 0 ? in->m.post_ln
		     : args && hf_arg_has(args, "--apply-residual-connection-post-layernorm");
	s->openai_gelu = in->m.openai_gelu >= 0 ? in->m.openai_gelu
			 : args && hf_arg_has(args, "--openai-gelu");
}

const char *hf_class(const struct sh_ckpt *in, char *err, size_t errlen)
{
	const struct lt_model *m = &in->m;
	struct hf_switches sw;
	switch (m->type) {
	case LT_BERT:
		return hf_bert_class(in, err, errlen);
	case LT_GPT:
		break;
	case LT_T5:   /* what T5ForConditionalGeneration's modules are, against Megatron's T5 */
		errf(err, errlen, "a T5 checkpoint (Megatron's T5Model) has no Hugging Face class: "
		     "T5ForConditionalGeneration has relative position buckets instead of learned "
		     "absolute position embeddings, RMS layer norms without a bias, linear layers "
		     "without biases, unscaled attention scores and an output without a bias, so "
		     "this model's position embeddings, layer-norm biases, linear biases and "
		     "lm_head.bias have no place in it; keep the lmtk checkpoint (train --load "
		     "resumes it, ckpt-merge-tp --format lmtk --target-tp N re-splits it; its tensors "
		     "carry Megatron's names, lmtk-checkpoint(5))");
		return NULL;
	default:   /* a type layout.h knows and the export does not (yet) */
		errf(err, errlen, "the export knows no Hugging Face class for a %s model", m->type_name);
		return NULL;
	}
	hf_switches_of(in, &sw);
	if (!m->alibi && !m->embed_ln) {
		if (sw.post_ln) {
			errf(err, errlen, "GPT2LMHeadModel adds the residual before the layer norm; this "
			     "model was trained with --apply-residual-connection-post-layernorm: no "
			     "Hugging Face class holds it");
			return NULL;
		}
		return "GPT2LMHeadModel";
	}
	if (m->alibi && m->embed_ln) {
		if (m->ffn != 4 * m->hidden) {
			errf(err, errlen, "BloomForCausalLM's MLP is 4 x hidden_size (%d) wide; this model's "
			     "ffn_hidden_size is %d: no Hugging Face class holds it", 4 * m->hidden, m->ffn);
			return NULL;
		}
		return "BloomForCausalLM";   /* the post-LN residual: its config says so */
	}
	errf(err, errlen, "a model with %s and %s embedding layer norm has no Hugging Face class "
	     "(GPT2LMHeadModel: learned positions, no embedding layer norm; BloomForCausalLM: ALiBi "
	     "and an embedding layer norm)", m->alibi ? "ALiBi" : "learned positions",
	     m->embed_ln ? "an" : "no");
	return NULL;
}

/* The export's tensors, in model order. */
static struct hf_item *plan(const struct lt_model *m, int gpt2, int *n)
{
	struct hf_item *it = calloc(m->n, sizeof *it);
	int k = 0;
	if (!it)
		return NULL;
	for (int t = 0; t < m->n; t++) {
		const struct lt_tensor *T = &m->t[t];
		struct hf_item *x = &it[k++];
		x->t = t;
		x->op = HF_COPY;
		x->ndim = T->ndim;
		x->shape[0] = T->shape[0];
		x->shape[1] = T->shape[1];
		if (t == m->wte) {
			x->shape[0] = m->vocab;   /* the padding rows are dropped */
			snprintf(x->name, sizeof x->name, "transformer.%s", gpt2 ? "wte.weight"
									      : "word_embeddings.weight");
		} else if (t == m->wpe) {
			snprintf(x->name, sizeof x->name, "transformer.wpe.weight");
		} else if (t == m->eln_w || t == m->eln_b) {
			snprintf(x->name, sizeof x->name, "transformer.word_embeddings_layernorm.%s",
				 t == m->eln_w ? "weight" : "bias");
		} else if (t == m->lnf_w || t == m->lnf_b) {
			snprintf(x->name, sizeof x->name, "transformer.ln_f.%s",
				 t == m->lnf_w ? "weight" : "bias");
		} else if (!gpt2) {
			/* BLOOM: Megatron's names and layouts under transformer.h.i, attention renamed */
			static const char *bloom[LT_LAYER_TENSORS] = {
				"input_layernorm.weight", "input_layernorm.bias",
				"self_attention.query_key_value.weight", "self_attention.query_key_value.bias",
				"self_attention.dense.weight", "self_attention.dense.bias",
				"post_attention_layernorm.weight", "post_attention_layernorm.bias",
				"mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.bias",
				"mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.bias"};
			snprintf(x->name, sizeof x->name, "transformer.h.%d.%s", T->layer, bloom[T->which]);
		} else {
			static const char *gpt[LT_LAYER_TENSORS] = {
				"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
				"attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
				"mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
			snprintf(x->name, sizeof x->name, "transformer.h.%d.%s", T->layer, gpt[T->which]);
			if (T->which == LT_QKV_B)
				x->op = HF_QKV;
			if (T->ndim == 2) {   /* Conv1D: [in, out] */
				x->op = T->which == LT_QKV_W ? HF_T_QKV : HF_T;
				x->shape[0] = T->shape[1];
				x->shape[1] = T->shape[0];
			}
		}
	}
	*n = k;
	return it;
}

/* GPT-2's c_attn output column -> Megatron's qkv row: [3, heads, hd] -> [heads, 3, hd]. */
static int64_t qkv_row(const struct lt_model *m, int64_t col)
{
	int64_t h = m->hidden, hd = h / m->heads;
	int64_t which = col / h, head = col % h / hd, d = col % hd;
	return (head * 3 + which) * hd + d;
}

struct out {
	struct st_writer *w;
	int bf16;
	uint16_t *half;
	struct progress *pg;
};

static int put(struct out *o, const float *p, size_t n)
{
	int rc;
	if (o->bf16) {
		for (size_t i = 0; i < n; i++)
			o->half[i] = st_f32_to_bf16(p[i]);
		rc = st_write(o->w, o->half, n * sizeof *o->half);
	} else {
		rc = st_write(o->w, p, n * sizeof *p);
	}
	progress_add(o->pg, n * (o->bf16 ? 2 : 4));
	return rc < 0 ? -1 : stop_requested() ? -2 : 0;
}

static int write_item(const struct sh_ckpt *in, const struct hf_item *x, int average, struct out *o,
		      float *a, float *b)
{
	const struct lt_model *m = &in->m;
	int64_t rows = x->shape[0], cols = x->shape[1];
	int rc = 0;
	switch (x->op) {
	case HF_COPY: {
		int64_t step = RS_BLOCK / cols ? RS_BLOCK / cols : 1;
		for (int64_t r0 = 0; r0 < rows && !rc; r0 += step) {
			int64_t r1 = r0 + step < rows ? r0 + step : rows;
			const float *p = sh_rows(in, x->t, 0, r0, r1, average);
			if (!p) {
				if (sh_read(in, x->t, 0, r0, r1, 0, cols, average, a) < 0)
					return -3;
				p = a;
			}
			rc = put(o, p, (size_t)(r1 - r0) * cols);
		}
		return rc;
	}
	case HF_QKV_PART: {
		/* head k's rows of this part lie at [(3k + part) hd, +hd) of Megatron's qkv */
		int64_t hd = m->hidden / m->heads, step = RS_BLOCK / cols ? RS_BLOCK / cols : 1;
		for (int64_t k = 0; k < m->heads && !rc; k++)
			for (int64_t r0 = 0; r0 < hd && !rc; r0 += step) {
				int64_t r1 = r0 + step < hd ? r0 + step : hd, base = (3 * k + x->part) * hd;
				if (sh_read(in, x->t, 0, base + r0, base + r1, 0, cols, average, a) < 0)
					return -3;
				rc = put(o, a, (size_t)(r1 - r0) * cols);
			}
		return rc;
	}
	case HF_ZERO: {
		int64_t n = rows * cols, step = RS_BLOCK;
		memset(a, 0, (size_t)(n < step ? n : step) * sizeof *a);
		for (int64_t i = 0; i < n && !rc; i += step)
			rc = put(o, a, (size_t)(n - i < step ? n - i : step));
		return rc;
	}
	case HF_QKV:
		if (sh_read(in, x->t, 0, 0, rows, 0, 1, average, a) < 0)
			return -3;
		for (int64_t c = 0; c < rows; c++)
			b[c] = a[qkv_row(m, c)];
		return put(o, b, rows);
	case HF_T:
	case HF_T_QKV: {
		/* out [I, O] = W [O, I] transposed, I rows at a time: W's columns [i0, i1) */
		int64_t O = cols, I = rows, step = RS_BLOCK / O ? RS_BLOCK / O : 1;
		for (int64_t i0 = 0; i0 < I && !rc; i0 += step) {
			int64_t i1 = i0 + step < I ? i0 + step : I, bw = i1 - i0;
			if (sh_read(in, x->t, 0, 0, O, i0, i1, average, a) < 0)   /* a: [O, bw] */
				return -3;
			for (int64_t i = 0; i < bw; i++)
				for (int64_t c = 0; c < O; c++)
					b[i * O + c] = a[(x->op == HF_T_QKV ? qkv_row(m, c) : c) * bw + i];
			rc = put(o, b, (size_t)bw * O);
		}
		return rc;
	}
	}
	return -1;
}

/* The shortest decimal that is the same float32: 1e-05, not 9.9999997473787516e-06. */
double hf_short_float(double v)
{
	char s[40];
	for (int p = 1; p <= 9; p++) {
		snprintf(s, sizeof s, "%.*g", p, v);
		double d = strtod(s, NULL);
		if ((float)d == (float)v)
			return d;
	}
	return v;
}

/* An id, or null where the tokenizer gave none: GPT2Config's and BloomConfig's defaults
 * (50256; 1 and 2) would name tokens of another vocabulary. */
static json_t *id_or_null(int id)
{
	return id >= 0 ? json_integer(id) : json_null();
}

static json_t *config(const struct sh_ckpt *in, const char *cls, int bf16,
		      const struct hf_special *sp)
{
	const struct lt_model *m = &in->m;
	struct hf_switches sw;
	json_t *c;
	hf_switches_of(in, &sw);
	if (in->m.type == LT_BERT)
		c = hf_bert_config(in, cls);
	else if (strcmp(cls, "GPT2LMHeadModel") == 0)
		c = json_pack("{s:[s],s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:b,s:b,s:b,"
			      "s:o,s:o}",
			      "architectures", cls, "model_type", "gpt2", "activation_function", "gelu_new",
			      "vocab_size", m->vocab, "n_positions", m->max_pos, "n_embd", m->hidden,
			      "n_layer", m->layers, "n_head", m->heads, "n_inner", m->ffn,
			      "layer_norm_epsilon", hf_short_float(m->eps),
			      "initializer_range", hf_short_float(m->init_std),
			      "resid_pdrop", hf_short_float(m->hidden_dropout),
			      "embd_pdrop", hf_short_float(m->hidden_dropout),
			      "attn_pdrop", hf_short_float(m->attention_dropout),
			      "scale_attn_weights", 1, "tie_word_embeddings", 1, "use_cache", 1,
			      /* the run's end of document, GPT-2's <|endoftext|> both */
			      "bos_token_id", id_or_null(sp->bos), "eos_token_id", id_or_null(sp->eos));
	else
		c = json_pack("{s:[s],s:s,s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:b,s:b,s:i,s:b,s:b,s:o,"
			      "s:o}",
			      "architectures", cls, "model_type", "bloom", "vocab_size", m->vocab,
			      "hidden_size", m->hidden, "n_layer", m->layers, "n_head", m->heads,
			      "layer_norm_epsilon", hf_short_float(m->eps),
			      "initializer_range", hf_short_float(m->init_std),
			      "hidden_dropout", hf_short_float(m->hidden_dropout),
			      "attention_dropout", hf_short_float(m->attention_dropout),
			      "apply_residual_connection_post_layernorm", sw.post_ln, "slow_but_exact", 0,
			      "pretraining_tp", in->tp, "tie_word_embeddings", 1, "use_cache", 1,
			      "bos_token_id", id_or_null(sp->bos), "eos_token_id", id_or_null(sp->eos));
	/* ALiBi has no position table to say the length: Megatron-DeepSpeed's BLOOM configs record
	 * seq_length, which --from hf reads back as --max-position-embeddings */
	if (c && in->m.type != LT_BERT && strcmp(cls, "BloomForCausalLM") == 0)
		json_object_set_new(c, "seq_length", json_integer(m->max_pos));
	if (c && in->m.type != LT_BERT && sp->pad >= 0)   /* BERT's config has its own */
		json_object_set_new(c, "pad_token_id", json_integer(sp->pad));
	if (c)
		json_object_set_new(c, "torch_dtype", json_string(bf16 ? "bfloat16" : "float32"));
	return c;
}

int hf_write_json(const char *dir, const char *name, json_t *j, size_t flags, char *err,
		      size_t errlen)
{
	char path[4200];
	char *s = j ? json_dumps(j, flags) : NULL;
	if (!s)
		return xalloc_err_in(err, errlen, name, "the JSON text", 0);
	size_t n = strlen(s);
	char *t = realloc(s, n + 2);
	if (!t) {
		free(s);
		return xalloc_err_in(err, errlen, name, "the JSON text", n + 2);
	}
	t[n] = '\n';
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int rc = file_write_atomic(path, t, n + 1, 0644, err, errlen);
	free(t);
	return rc;
}

/* The value of --flag in the manifest's recorded command line ("--flag V" or "--flag=V"). */
int hf_arg_value(const char *args, const char *flag, char *out, size_t n)
{
	size_t fl = strlen(flag);
	for (const char *p = args; (p = strstr(p, flag)); p += fl) {
		if (p != args && p[-1] != ' ')
			continue;
		if (p[fl] != ' ' && p[fl] != '=')
			continue;
		const char *v = p + fl + 1, *e = strchr(v, ' ');
		size_t len = e ? (size_t)(e - v) : strlen(v);
		if (!len || len >= n)
			return -1;
		snprintf(out, n, "%.*s", (int)len, v);
		return 0;
	}
	return -1;
}

int hf_arg_has(const char *args, const char *flag)
{
	size_t fl = strlen(flag);
	for (const char *p = args; (p = strstr(p, flag)); p += fl)
		if ((p == args || p[-1] == ' ') && (p[fl] == ' ' || p[fl] == 0))
			return 1;
	return 0;
}

int hf_export(const struct sh_ckpt *in, const struct hf_opts *o, const char *dir,
	      struct progress *pg, char *err, size_t errlen)
{
	const char *cls = hf_class(in, err, errlen);
	int n, nfiles = 1, rc = 0;
	if (!cls)
		return EXIT_USAGE;
	for (int i = 0; i < o->ntokenizer_files; i++)
		if (access(o->tokenizer_files[i], R_OK) != 0)
			return errf(err, errlen, "--tokenizer-files %s: %s", o->tokenizer_files[i],
				    strerror(errno)), EXIT_USAGE;
	struct hf_item *it = in->m.type == LT_BERT ? hf_bert_plan(&in->m, &n)
			     : plan(&in->m, strcmp(cls, "GPT2LMHeadModel") == 0, &n);
	if (!it)
		return xalloc_err(err, errlen, "the plan of Hugging Face tensors", 0), EXIT_FAILED;
	/* files: a new one when the next tensor would overflow a non-empty one (HF's rule) */
	size_t esize = o->bf16 ? 2 : 4, widest = RS_BLOCK;
	unsigned long long cur = 0, total = 0;
	for (int i = 0; i < n; i++) {
		unsigned long long sz = (unsigned long long)it[i].shape[0] * it[i].shape[1] * esize;
		if (cur > 0 && cur + sz > o->max_shard) {
			nfiles++;
			cur = 0;
		}
		it[i].file = nfiles - 1;
		cur += sz;
		total += sz;
		for (int d = 0; d < 2; d++)
			if ((size_t)it[i].shape[d] > widest)
				widest = it[i].shape[d];
	}
	float *a = malloc(widest * sizeof *a), *b = malloc(widest * sizeof *b);
	uint16_t *half = malloc(widest * sizeof *half);
	json_t *map = json_object();
	char fname[64], path[4200];
	struct out out = {NULL, o->bf16, half, pg};
	if (!a || !b || !half || !map) {
		rc = (xalloc_err(err, errlen, "the tensor conversion buffers", 0), EXIT_FAILED);
		goto done;
	}
	progress_begin(pg, "exporting", NULL, total);
	for (int f = 0, i = 0; f < nfiles && !rc; f++) {
		if (nfiles == 1)
			snprintf(fname, sizeof fname, "model.safetensors");
		else
			snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", f + 1, nfiles);
		snprintf(path, sizeof path, "%s/%s", dir, fname);
		if (!(out.w = st_create(path, err, errlen))) {
			rc = EXIT_FAILED;
			break;
		}
		st_metadata(out.w, "format", "pt");
		int first = i;
		for (; i < n && it[i].file == f; i++) {
			st_declare(out.w, it[i].name, o->bf16 ? ST_BF16 : ST_F32, it[i].ndim, it[i].shape);
			json_object_set_new(map, it[i].name, json_string(fname));
		}
		int wr = 0;
		for (int k = first; k < i && !wr; k++)
			wr = write_item(in, &it[k], o->average, &out, a, b);
		if (wr == -2)
			rc = (errf(err, errlen, "interrupted"), EXIT_FAILED);
		else if (wr == -3)   /* the input could not be read: bad input */
			rc = (errf(err, errlen, "%s", sh_error(in)), EXIT_USAGE);
		else if (wr < 0 || st_commit(out.w) < 0)
			rc = (errf(err, errlen, "%s", st_werror(out.w)), EXIT_FAILED);
		else
			out.w = NULL;
		if (rc)
			st_abort(out.w);
	}
	progress_end(pg);
	if (rc)
		goto done;
	if (nfiles > 1) {
		json_t *idx = json_pack("{s:{s:I},s:O}", "metadata", "total_size", (json_int_t)total,
					"weight_map", map);
		rc = hf_write_json(dir, "model.safetensors.index.json", idx, JSON_INDENT(2) | JSON_SORT_KEYS,
				err, errlen) < 0 ? EXIT_FAILED : 0;
		json_decref(idx);
		if (rc)
			goto done;
	}
	struct hf_special sp;
	if ((rc = hf_tokenizer(in, o, dir, &sp, err, errlen)))
		goto done;
	json_t *cfg = config(in, cls, o->bf16, &sp);
	rc = hf_write_json(dir, "config.json", cfg, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9),
			err, errlen) < 0 ? EXIT_FAILED : 0;
	json_decref(cfg);
	/* what generate() reads: the config's ids, as save_pretrained writes them for a causal LM */
	if (!rc && in->m.type != LT_BERT && sp.eos >= 0) {
		json_t *g = json_pack("{s:b,s:i}", "_from_model_config", 1, "eos_token_id", sp.eos);
		if (g && sp.bos >= 0)
			json_object_set_new(g, "bos_token_id", json_integer(sp.bos));
		if (g && sp.pad >= 0)
			json_object_set_new(g, "pad_token_id", json_integer(sp.pad));
		rc = hf_write_json(dir, "generation_config.json", g, JSON_INDENT(2) | JSON_SORT_KEYS,
				   err, errlen) < 0 ? EXIT_FAILED : 0;
		json_decref(g);
	}
done:
	json_decref(map);
	free(a);
	free(b);
	free(half);
	free(it);
	return rc;
}
