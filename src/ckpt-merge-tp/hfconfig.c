/* hfconfig - a Hugging Face model directory's config.json read into lmtk's model flags, and its
 * tokenizer files into the manifest's record; the directory's files confined to it (see
 * hfimport.h for what is read and why nothing is trusted). */
#include "ckpt-merge-tp/hfimport_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file.h"
#include "fsx.h"
#include "msg.h"
#include "ckpt/layout.h"
#include "ckpt/tokrec.h"
#include "xalloc.h"

#define K(...) ((const char *const[]){__VA_ARGS__, NULL})

/* DIR/name, which must be a regular file inside DIR once links are resolved.  1 there, 0 not
 * there (ENOENT), -1 + err (EXIT_USAGE: a link out, not a file; the caller says). */
int hfc_confined(const char *dir, const char *name, char *path, size_t n, char *err,
		    size_t errlen)
{
	char why[PATH_MAX + 200];
	struct stat sb;
	snprintf(path, n, "%s/%s", dir, name);
	if (lstat(path, &sb) < 0 && errno == ENOENT)
		return 0;
	int rc = fsx_confined(dir, path, why, sizeof why);
	if (rc < 0 && errno == ENOENT)   /* a dangling link */
		return errf(err, errlen, "%s: a symbolic link to nothing", path);
	if (rc)   /* the Hub's cache: snapshots/REV/NAME -> ../../blobs/HASH */
		return errf(err, errlen, "%s: %s: a link out of the model directory is not followed "
			    "(a copy with the links resolved, cp -rL, is read)", path, why);
	if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
		return errf(err, errlen, "%s: not a regular file", path);
	return 1;
}

json_t *hfc_read_json(const char *dir, const char *name, int required, int *rc, char *err,
			 size_t errlen)
{
	char path[PATH_MAX + 64];
	char *data;
	size_t len;
	json_error_t je;
	int in = hfc_confined(dir, name, path, sizeof path, err, errlen);
	*rc = EXIT_USAGE;
	if (in < 0)
		return NULL;
	if (in == 0) {
		if (required)
			errf(err, errlen, "%s: not there: not a Hugging Face model directory", path);
		return NULL;
	}
	struct stat sb;
	if (stat(path, &sb) == 0 && sb.st_size > (64 << 20)) {   /* a config, not a corpus */
		errf(err, errlen, "%s: %lld bytes: not a configuration file", path,
		     (long long)sb.st_size);
		return NULL;
	}
	if (file_read_all(path, &data, &len, err, errlen) < 0) {
		*rc = EXIT_FAILED;
		return NULL;
	}
	json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	free(data);
	if (!j || !json_is_object(j)) {
		errf(err, errlen, "%s:%d: %s", path, j ? 1 : je.line, j ? "not a JSON object" : je.text);
		json_decref(j);
		return NULL;
	}
	return j;
}

/* ---- config.json's numbers, every one range-checked ---- */



/* The first of keys that is there (a null counts as absent), an integer in [lo, hi]; dflt when
 * none is (LLONG_MIN: required).  0, or -1 + err. */
static int cint(struct cfgr *c, const char *const *keys, long long lo, long long hi,
		long long dflt, long long *out)
{
	for (; *keys; keys++) {
		json_t *x = json_object_get(c->j, *keys);
		if (!x || json_is_null(x))
			continue;
		if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi) {
			char *s = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT);
			errf(c->err, c->errlen, "%s: %s is %.40s: not an integer from %lld to %lld",
			     c->path, *keys, s ? s : "?", lo, hi);
			free(s);
			return -1;
		}
		*out = json_integer_value(x);
		return 0;
	}
	if (dflt == LLONG_MIN) {
		return errf(c->err, c->errlen, "%s: no %s", c->path, keys[-1]);
	}
	*out = dflt;
	return 0;
}

static int cnum(struct cfgr *c, const char *const *keys, double lo, double hi, double dflt,
		double *out)
{
	for (; *keys; keys++) {
		json_t *x = json_object_get(c->j, *keys);
		if (!x || json_is_null(x))
			continue;
		double v = json_number_value(x);
		if (!json_is_number(x) || !(v >= lo && v <= hi)) {
			char *s = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT);
			errf(c->err, c->errlen, "%s: %s is %.40s: not a number from %g to %g", c->path,
			     *keys, s ? s : "?", lo, hi);
			free(s);
			return -1;
		}
		*out = v;
		return 0;
	}
	*out = dflt;
	return 0;
}

static const char *cstr(struct cfgr *c, const char *key)
{
	return json_string_value(json_object_get(c->j, key));
}


/* ---- the tokenizer the directory has, recorded as train records its own ---- */

int hfc_tokenizer(const char *dir, enum cls k, json_t **rec, char *err, size_t errlen)
{
	static const char *const names[] = {"vocab.json", "merges.txt", "tokenizer.json",
					    "vocab.txt", "special_tokens_map.json",
					    "tokenizer_config.json"};
	char path[6][PATH_MAX + 64];
	int has[6];
	for (int i = 0; i < 6; i++)
		if ((has[i] = hfc_confined(dir, names[i], path[i], sizeof path[i], err, errlen)) < 0)
			return EXIT_USAGE;
	const char *type = NULL, *vocab = NULL, *merges = NULL, *nop = NULL;
	if (k == C_BERT_PT || k == C_BERT_MLM) {
		if (has[3]) {
			int lower = 1, rc;
			json_t *tc = has[5] ? hfc_read_json(dir, names[5], 0, &rc, err, errlen) : NULL;
			if (has[5] && !tc)
				return rc;
			if (json_is_false(json_object_get(tc, "do_lower_case")))
				lower = 0;
			json_decref(tc);
			type = lower ? "BertWordPieceLowerCase" : "BertWordPieceCase";
			vocab = path[3];
		}
	} else if (has[0] && has[1]) {
		type = "GPT2BPETokenizer";
		vocab = path[0];
		merges = path[1];
	} else if (has[2]) {
		type = "PretrainedFromHF";
		nop = dir;
	}
	if (!type) {
		*rec = NULL;
		return 0;
	}
	char *s = tokrec_json(type, vocab, merges, nop);
	json_error_t je;
	if (!s || !(*rec = json_loads(s, 0, &je))) {
		free(s);
		return xalloc_err(err, errlen, "the tokenizer record", 0), EXIT_FAILED;
	}
	free(s);
	return 0;
}

/* ---- config.json -> the model ---- */

const char *const hfc_class_names[] = {"GPT2LMHeadModel", "BloomForCausalLM",
					  "MegatronBertForPreTraining", "MegatronBertForMaskedLM"};

int hfc_class(struct cfgr *c, enum cls *k)
{
	json_t *a = json_object_get(c->j, "architectures");
	const char *arch = json_is_array(a) && json_array_size(a) == 1
				   ? json_string_value(json_array_get(a, 0)) : NULL;
	const char *mt = cstr(c, "model_type");
	if (json_is_array(a) && json_array_size(a) > 1)
		return errf(c->err, c->errlen, "%s: architectures lists %zu classes: which one?",
			    c->path, json_array_size(a));
	static const struct { const char *name; enum cls k; } known[] = {
		{"GPT2LMHeadModel", C_GPT2}, {"GPT2Model", C_GPT2}, {"BloomForCausalLM", C_BLOOM},
		{"BloomModel", C_BLOOM}, {"MegatronBertForPreTraining", C_BERT_PT},
		{"MegatronBertForMaskedLM", C_BERT_MLM}};
	if (!arch && a && !json_is_null(a))
		return errf(c->err, c->errlen, "%s: architectures is not a list of one class name",
			    c->path);
	if (!arch && mt && !strcmp(mt, "gpt2"))
		arch = "GPT2LMHeadModel";
	if (!arch && mt && !strcmp(mt, "bloom"))
		arch = "BloomForCausalLM";
	for (size_t i = 0; arch && i < sizeof known / sizeof *known; i++)
		if (strcmp(arch, known[i].name) == 0) {
			*k = known[i].k;
			return 0;
		}
	return errf(c->err, c->errlen, "%s: %s%.100s%s: ckpt-merge-tp --from hf reads "
		    "GPT2LMHeadModel, BloomForCausalLM, MegatronBertForPreTraining and "
		    "MegatronBertForMaskedLM (the classes lmtk's models are)", c->path,
		    arch ? "architecture " : mt ? "model_type " : "no architectures nor model_type",
		    arch ? arch : mt ? mt : "", arch || mt ? " is not one lmtk holds" : "");
}

/* The manifest's "model" object from config.json; 0, or -1 + err. */
json_t *hfc_model(struct cfgr *c, enum cls k, int divisible_by, int zero_types,
		  long long *hidden, long long *heads)
{
	long long L, H, NH, F, P, V, seq, NT = 0;
	double eps, std, hd, ad;
	int bert = k == C_BERT_PT || k == C_BERT_MLM, gelu_tanh = 0;
	const char *act;
	int post_ln = 0;
	if (k == C_GPT2) {
		if (cint(c, K("n_layer"), 1, 4096, LLONG_MIN, &L) || cint(c, K("n_embd"), 1, 1 << 17, LLONG_MIN, &H) ||
		    cint(c, K("n_head"), 1, 1 << 17, LLONG_MIN, &NH) ||
		    cint(c, K("n_inner"), 1, 1 << 20, 4 * H, &F) ||
		    cint(c, K("n_positions"), 1, 1 << 22, LLONG_MIN, &P) ||
		    cint(c, K("n_ctx"), 1, 1 << 22, P, &seq) ||
		    cint(c, K("vocab_size"), 1, 1 << 24, LLONG_MIN, &V) ||
		    cnum(c, K("layer_norm_epsilon"), 1e-30, 0.5, 1e-5, &eps) ||
		    cnum(c, K("initializer_range"), 0, 10, 0.02, &std) ||
		    cnum(c, K("resid_pdrop"), 0, 1, 0.1, &hd) || cnum(c, K("attn_pdrop"), 0, 1, 0.1, &ad))
			return NULL;
		act = cstr(c, "activation_function");
		if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh")) {
			errf(c->err, c->errlen, "%s: activation_function \"%.40s\": lmtk's GPT MLP is the "
			     "tanh GeLU (\"gelu_new\")", c->path, act);
			return NULL;
		}
		if (json_is_false(json_object_get(c->j, "scale_attn_weights")) ||
		    json_is_true(json_object_get(c->j, "scale_attn_by_inverse_layer_idx")) ||
		    json_is_true(json_object_get(c->j, "add_cross_attention"))) {
			errf(c->err, c->errlen, "%s: scale_attn_weights false, "
			     "scale_attn_by_inverse_layer_idx or add_cross_attention: lmtk's attention "
			     "is scaled by 1/sqrt(head_dim) alone, without cross-attention", c->path);
			return NULL;
		}
		if (seq > P)
			seq = P;
	} else if (k == C_BLOOM) {
		if (cint(c, K("n_layer", "num_hidden_layers"), 1, 4096, LLONG_MIN, &L) ||
		    cint(c, K("hidden_size", "n_embed"), 1, 1 << 17, LLONG_MIN, &H) ||
		    cint(c, K("n_head", "num_attention_heads"), 1, 1 << 17, LLONG_MIN, &NH) ||
		    cint(c, K("vocab_size"), 1, 1 << 24, LLONG_MIN, &V) ||
		    cint(c, K("seq_length", "n_positions", "max_position_embeddings"), 1, 1 << 22, -1, &P) ||
		    cnum(c, K("layer_norm_epsilon"), 1e-30, 0.5, 1e-5, &eps) ||
		    cnum(c, K("initializer_range"), 0, 10, 0.02, &std) ||
		    cnum(c, K("hidden_dropout"), 0, 1, 0, &hd) || cnum(c, K("attention_dropout"), 0, 1, 0, &ad))
			return NULL;
		if (P < 0) {   /* ALiBi has no table: the length BLOOM trained at */
			P = 2048;
			warn("note: %s gives no seq_length: the checkpoint records "
			     "--max-position-embeddings 2048 (BLOOM's; ALiBi has no position table, so "
			     "train may use another --seq-length up to it)", c->path);
		}
		F = 4 * H;
		seq = P;
		post_ln = json_is_true(json_object_get(c->j, "apply_residual_connection_post_layernorm"));
	} else {
		if (cint(c, K("num_hidden_layers"), 1, 4096, LLONG_MIN, &L) ||
		    cint(c, K("hidden_size"), 1, 1 << 17, LLONG_MIN, &H) ||
		    cint(c, K("num_attention_heads"), 1, 1 << 17, LLONG_MIN, &NH) ||
		    cint(c, K("intermediate_size"), 1, 1 << 20, 4 * H, &F) ||
		    cint(c, K("max_position_embeddings"), 1, 1 << 22, LLONG_MIN, &P) ||
		    cint(c, K("vocab_size"), 1, 1 << 24, LLONG_MIN, &V) ||
		    cint(c, K("type_vocab_size"), 1, 1 << 10, 2, &NT) ||
		    cnum(c, K("layer_norm_eps"), 1e-30, 0.5, 1e-12, &eps) ||
		    cnum(c, K("initializer_range"), 0, 10, 0.02, &std) ||
		    cnum(c, K("hidden_dropout_prob"), 0, 1, 0.1, &hd) ||
		    cnum(c, K("attention_probs_dropout_prob"), 0, 1, 0.1, &ad))
			return NULL;
		seq = P;
		act = cstr(c, "hidden_act");
		if (!act || !strcmp(act, "gelu"))
			gelu_tanh = 0;
		else if (!strcmp(act, "gelu_new") || !strcmp(act, "gelu_pytorch_tanh"))
			gelu_tanh = 1;
		else {
			errf(c->err, c->errlen, "%s: hidden_act \"%.40s\": lmtk's BERT has the GeLU "
			     "(\"gelu\", or \"gelu_new\" with --openai-gelu)", c->path, act);
			return NULL;
		}
		const char *pe = cstr(c, "position_embedding_type");
		if (pe && strcmp(pe, "absolute")) {
			errf(c->err, c->errlen, "%s: position_embedding_type \"%.40s\": lmtk's BERT has "
			     "learned absolute positions", c->path, pe);
			return NULL;
		}
		/* a model without token types exports one zero row (hfbert.c): back to none */
		if (NT == 1 && zero_types)
			NT = 0;
	}
	if (H % NH) {
		errf(c->err, c->errlen, "%s: %lld heads do not divide the hidden size %lld", c->path, NH, H);
		return NULL;
	}
	int padded = lt_padded_vocab((int)V, divisible_by, 1);
	if (padded < 0) {
		errf(c->err, c->errlen, "%s: vocab_size %lld padded to a multiple of %d is too large",
		     c->path, V, divisible_by);
		return NULL;
	}
	json_t *mo = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:b,s:f,s:f,s:f,s:f,s:I,s:b}",
			       "num_layers", (json_int_t)L, "hidden_size", (json_int_t)H,
			       "num_attention_heads", (json_int_t)NH, "ffn_hidden_size", (json_int_t)F,
			       "seq_length", (json_int_t)seq, "max_position_embeddings", (json_int_t)P,
			       "vocab_size", (json_int_t)V, "padded_vocab_size", (json_int_t)padded,
			       "position_embedding_type", k == C_BLOOM ? "alibi" : "learned",
			       "embed_layernorm", k == C_BLOOM, "layernorm_epsilon", (double)(float)eps,
			       "init_method_std", (double)(float)std, "hidden_dropout", (double)(float)hd,
			       "attention_dropout", (double)(float)ad, "seed", (json_int_t)1234,
			       "apply_residual_connection_post_layernorm", post_ln);
	if (mo && bert) {
		json_object_set_new(mo, "model_type", json_string("bert"));
		json_object_set_new(mo, "num_tokentypes", json_integer(NT));
		json_object_set_new(mo, "binary_head", json_boolean(k == C_BERT_PT));
		json_object_set_new(mo, "openai_gelu", json_boolean(gelu_tanh));
	}
	if (!mo)
		xalloc_err(c->err, c->errlen, "the model's settings", 0);
	*hidden = H;
	*heads = NH;
	return mo;
}
