/* hfbert - Megatron's BERT (train --model-type bert) as a Hugging Face model directory.
 *
 * Megatron's BertModel is PRE-LN: each layer norms its input before the attention and before the
 * MLP, adds the residual after, and norms the stack's output once more.  transformers'
 * BertForPreTraining is post-LN (a layer norm after each residual add, one on the embeddings,
 * none at the end) and cannot hold it; MegatronBertForPreTraining (model_type "megatron-bert",
 * models/megatron_bert/modeling_megatron_bert.py) is the pre-LN BERT that NVIDIA's Megatron
 * checkpoints are converted to (its convert_megatron_bert_checkpoint.py).  So the export is that
 * class, or MegatronBertForMaskedLM for a model without the binary head (no pooler, no
 * seq_relationship: what that class holds).  Names and layouts, lmtk -> HF:
 *
 *   word_embeddings.weight [Vp,h]          bert.embeddings.word_embeddings.weight [V,h]
 *   position_embeddings.weight [P,h]       bert.embeddings.position_embeddings.weight
 *   tokentype_embeddings.weight [K,h]      bert.embeddings.token_type_embeddings.weight [K,h]
 *                                          (K = 0: one row of zeros, type_vocab_size 1)
 *   layers.i.input_layernorm.*             bert.encoder.layer.i.attention.ln.*
 *   layers.i.attention.query_key_value.*   ...attention.self.{query,key,value}.* [h,h], [h] (1)
 *   layers.i.attention.dense.*             ...attention.output.dense.*
 *   layers.i.post_attention_layernorm.*    ...ln.*
 *   layers.i.mlp.dense_h_to_4h.*           ...intermediate.dense.*
 *   layers.i.mlp.dense_4h_to_h.*           ...output.dense.*
 *   final_layernorm.*                      bert.encoder.ln.*
 *   pooler.dense.*                         bert.pooler.dense.*
 *   lm_head.dense.*                        cls.predictions.transform.dense.*
 *   lm_head.layernorm.*                    cls.predictions.transform.LayerNorm.*
 *   lm_head.bias [Vp]                      cls.predictions.bias [V]
 *   binary_head.* [2,h], [2]               cls.seq_relationship.*
 *
 * (1) Megatron's qkv rows are [heads, 3, head_dim] (checkpoint version 2+): the query is rows
 * [3k hd, 3k hd + hd) of every head k, the key and value the next two blocks; Linear weights
 * are [out, in] on both sides, so nothing is transposed.  The padded vocabulary rows are dropped
 * (from the embeddings and the bias); the decoder is tied to the word embeddings and its bias is
 * cls.predictions.bias, so neither cls.predictions.decoder.weight nor .bias is written (as
 * save_pretrained writes a tied model).
 *
 * What HF cannot say.  One hidden_act serves the MLP and the LM head in MegatronBert; Megatron's
 * (and lmtk's) MLP GeLU is the tanh approximation (the fused bias-gelu) and its LM head's the
 * exact erf one unless --openai-gelu.  With --openai-gelu the export says "gelu_new" (tanh) and
 * is the model exactly.  Without, it says "gelu" (erf), as transformers' converter does: the
 * LM head exact, every MLP's GeLU off by at most 4.7e-4 per element.  Measured on a trained
 * 4-layer model, that moves the prediction logits by 2.5e-5 relative and the seq_relationship
 * logits by 1.6e-6; "gelu_new" (MLPs exact, the head not) moved the logits six times more,
 * 1.6e-4.  HF masks padded keys only, Megatron queries too: the outputs at real positions are
 * the same.  The post-LN residual (--apply-residual-connection-post-layernorm: the residual taken
 * after the layer norm) is in neither class, and is refused. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "file.h"
#include "msg.h"
#include "ckpt-merge-tp/hf_int.h"
#include "xalloc.h"

const char *hf_bert_class(const struct sh_ckpt *in, char *err, size_t errlen)
{
	struct hf_switches sw;
	hf_switches_of(in, &sw);
	if (sw.post_ln) {
		errf(err, errlen, "this BERT was trained with --apply-residual-connection-post-layernorm "
		     "(the residual taken after the layer norm): MegatronBertForPreTraining adds it "
		     "before (pre-LN) and BertForPreTraining norms after the add with no layer norm "
		     "before the attention; no Hugging Face class holds it");
		return NULL;
	}
	return in->m.binary_head ? "MegatronBertForPreTraining" : "MegatronBertForMaskedLM";
}

/* Appends an exported tensor (d1 0: 1-D). */
static struct hf_item *item(struct hf_item *it, int *k, int t, enum hf_op op, int64_t d0,
			    int64_t d1, const char *name)
{
	struct hf_item *x = &it[(*k)++];
	x->t = t;
	x->op = op;
	x->ndim = d1 ? 2 : 1;
	x->shape[0] = d0;
	x->shape[1] = d1 ? d1 : 1;
	snprintf(x->name, sizeof x->name, "%s", name);
	return x;
}

struct hf_item *hf_bert_plan(const struct lt_model *m, int *n)
{
	/* per layer the 12 tensors become 16 (qkv weight and bias: three each), + 1 zero table */
	struct hf_item *it = calloc((size_t)m->n + 4 * (size_t)m->layers + 1, sizeof *it);
	int k = 0;
	int64_t h = m->hidden;
	if (!it)
		return NULL;
	item(it, &k, m->wte, HF_COPY, m->vocab, h, "bert.embeddings.word_embeddings.weight");
	item(it, &k, m->wpe, HF_COPY, m->max_pos, h, "bert.embeddings.position_embeddings.weight");
	if (m->tte >= 0)
		item(it, &k, m->tte, HF_COPY, m->num_tokentypes, h,
		     "bert.embeddings.token_type_embeddings.weight");
	else   /* HF adds a token type's row whatever the model: a zero one adds nothing */
		item(it, &k, -1, HF_ZERO, 1, h, "bert.embeddings.token_type_embeddings.weight");
	static const char *names[LT_LAYER_TENSORS] = {
		"attention.ln.weight", "attention.ln.bias", NULL, NULL,
		"attention.output.dense.weight", "attention.output.dense.bias",
		"ln.weight", "ln.bias", "intermediate.dense.weight", "intermediate.dense.bias",
		"output.dense.weight", "output.dense.bias"};
	static const char *qkv[3] = {"query", "key", "value"};
	for (int t = m->layer0; t < m->layer0 + m->layers * LT_LAYER_TENSORS; t++) {
		const struct lt_tensor *T = &m->t[t];
		char name[96];
		if (T->which == LT_QKV_W || T->which == LT_QKV_B) {
			for (int p = 0; p < 3; p++) {
				snprintf(name, sizeof name, "bert.encoder.layer.%d.attention.self.%s.%s",
					 T->layer, qkv[p], T->which == LT_QKV_W ? "weight" : "bias");
				item(it, &k, t, HF_QKV_PART, h, T->which == LT_QKV_W ? h : 0, name)->part = p;
			}
			continue;
		}
		snprintf(name, sizeof name, "bert.encoder.layer.%d.%s", T->layer, names[T->which]);
		item(it, &k, t, HF_COPY, T->shape[0], T->ndim == 2 ? T->shape[1] : 0, name);
	}
	static const struct { size_t off; const char *name; } heads[] = {
		{offsetof(struct lt_model, lnf_w), "bert.encoder.ln.weight"},
		{offsetof(struct lt_model, lnf_b), "bert.encoder.ln.bias"},
		{offsetof(struct lt_model, pool_w), "bert.pooler.dense.weight"},
		{offsetof(struct lt_model, pool_b), "bert.pooler.dense.bias"},
		{offsetof(struct lt_model, hd_w), "cls.predictions.transform.dense.weight"},
		{offsetof(struct lt_model, hd_b), "cls.predictions.transform.dense.bias"},
		{offsetof(struct lt_model, hd_ln_w), "cls.predictions.transform.LayerNorm.weight"},
		{offsetof(struct lt_model, hd_ln_b), "cls.predictions.transform.LayerNorm.bias"},
		{offsetof(struct lt_model, lm_bias), "cls.predictions.bias"},
		{offsetof(struct lt_model, bin_w), "cls.seq_relationship.weight"},
		{offsetof(struct lt_model, bin_b), "cls.seq_relationship.bias"},
	};
	for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
		int t = *(const int *)((const char *)m + heads[i].off);
		if (t < 0)   /* no binary head: no pooler either */
			continue;
		const struct lt_tensor *T = &m->t[t];
		item(it, &k, t, HF_COPY, t == m->lm_bias ? m->vocab : T->shape[0],
		     T->ndim == 2 ? T->shape[1] : 0, heads[i].name);
	}
	*n = k;
	return it;
}

/* vocab.txt's lines as train's BERT tokenizer reads them (Megatron's load_vocab: each line
 * stripped of ASCII white space), then the [BOS] and [EOS] Megatron's _BertWordPieceTokenizer
 * adds when vocab.txt lacks them: the model's vocabulary, id by id.  The count, or -1 + err. */
static int read_vocab(const char *data, size_t len_in, char ***tok, int *added, char *err,
		      size_t errlen)
{
	FILE *f = len_in ? fmemopen((void *)data, len_in, "r") : NULL;
	char *line = NULL, **t = NULL;
	size_t cap = 0;
	int n = 0, room = 0, bos = 0, eos = 0;
	if (!f)
		return errf(err, errlen, "vocab.txt: %s", len_in ? strerror(errno) : "empty");
	while (getline(&line, &cap, f) > 0) {
		char *s = line;
		size_t len;
		while (*s == ' ' || (*s >= '\t' && *s <= '\r') || (*s >= 0x1c && *s <= 0x1f))
			s++;
		len = strlen(s);
		while (len && (s[len - 1] == ' ' || (s[len - 1] >= '\t' && s[len - 1] <= '\r') ||
			       (s[len - 1] >= 0x1c && s[len - 1] <= 0x1f)))
			s[--len] = 0;
		if (n + 3 > room) {
			room = room ? 2 * room : 1024;
			char **nt = realloc(t, (size_t)room * sizeof *t);
			if (!nt)
				xalloc_die("the vocab.txt token list", (size_t)room * sizeof *t);
			t = nt;
		}
		if (!(t[n++] = strdup(s)))
			xalloc_die("a vocab.txt token", strlen(s) + 1);
		bos |= strcmp(s, "[BOS]") == 0;
		eos |= strcmp(s, "[EOS]") == 0;
	}
	free(line);
	fclose(f);
	*added = 0;
	if (t && !bos && (t[n++] = strdup("[BOS]")))
		*added |= 1;
	if (t && !eos && (t[n++] = strdup("[EOS]")))
		*added |= 2;
	*tok = t;
	return n;
}

static int index_of(char **tok, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (strcmp(tok[i], s) == 0)
			return i;
	return -1;
}

/* BertTokenizerFast's tokenizer.json (transformers' BertConverter): BertNormalizer (accents
 * stripped with lower-casing, strip_accents null), BertPreTokenizer, [CLS] A [SEP] (B [SEP])
 * template, WordPiece decoder and model (##, 100 characters a word), the special tokens and
 * the [BOS]/[EOS] Megatron added as special added tokens. */
static json_t *bert_tokenizer_json(char **tok, int n, int lower, int added)
{
	static const char *special[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
	json_t *vocab = json_object(), *at = json_array(), *post = json_null();
	for (int i = 0; i < n; i++)   /* the last of duplicates, as BertTokenizer's load_vocab */
		json_object_set_new(vocab, tok[i], json_integer(i));
	for (size_t k = 0; k < sizeof special / sizeof *special + 2; k++) {
		const char *t = k < 5 ? special[k] : k == 5 ? "[BOS]" : "[EOS]";
		int id = index_of(tok, n, t);
		if (id < 0 || (k == 5 && !(added & 1)) || (k == 6 && !(added & 2)))
			continue;
		json_array_append_new(at, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", id,
						    "content", t, "single_word", 0, "lstrip", 0,
						    "rstrip", 0, "normalized", 0, "special", 1));
	}
	int cls = index_of(tok, n, "[CLS]"), sep = index_of(tok, n, "[SEP]");
	if (cls >= 0 && sep >= 0) {
		json_decref(post);
		post = json_pack("{s:s,s:[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}}],"
				 "s:[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}}],"
				 "s:{s:{s:s,s:[i],s:[s]},s:{s:s,s:[i],s:[s]}}}",
				 "type", "TemplateProcessing",
				 "single", "SpecialToken", "id", "[CLS]", "type_id", 0,
				 "Sequence", "id", "A", "type_id", 0,
				 "SpecialToken", "id", "[SEP]", "type_id", 0,
				 "pair", "SpecialToken", "id", "[CLS]", "type_id", 0,
				 "Sequence", "id", "A", "type_id", 0,
				 "SpecialToken", "id", "[SEP]", "type_id", 0,
				 "Sequence", "id", "B", "type_id", 1,
				 "SpecialToken", "id", "[SEP]", "type_id", 1,
				 "special_tokens", "[CLS]", "id", "[CLS]", "ids", cls, "tokens", "[CLS]",
				 "[SEP]", "id", "[SEP]", "ids", sep, "tokens", "[SEP]");
	}
	json_t *j = json_pack("{s:s,s:n,s:n,s:o,s:{s:s,s:b,s:b,s:n,s:b},s:{s:s},s:o,"
			      "s:{s:s,s:s,s:b},s:{s:s,s:s,s:s,s:i,s:o}}",
			      "version", "1.0", "truncation", "padding", "added_tokens", at,
			      "normalizer", "type", "BertNormalizer", "clean_text", 1,
			      "handle_chinese_chars", 1, "strip_accents", "lowercase", lower,
			      "pre_tokenizer", "type", "BertPreTokenizer",
			      "post_processor", post,
			      "decoder", "type", "WordPiece", "prefix", "##", "cleanup", 1,
			      "model", "type", "WordPiece", "unk_token", "[UNK]",
			      "continuing_subword_prefix", "##", "max_input_chars_per_word", 100,
			      "vocab", vocab);
	if (!j)
		xalloc_die("the tokenizer.json document", 0);
	return j;
}

int hf_bert_tokenizer(const struct sh_ckpt *in, const char *dir, char *err, size_t errlen)
{
	json_t *rec = json_object_get(in->manifest, "tokenizer");
	const char *type = json_string_value(json_object_get(rec, "type"));
	char **tok = NULL, *data;
	size_t dlen;
	int added = 0, rc = 0;
	if (!type || (strcmp(type, "BertWordPieceLowerCase") && strcmp(type, "BertWordPieceCase"))) {
		warn("warning: the checkpoint's manifest records no tokenizer type "
		     "BertWordPieceLowerCase or BertWordPieceCase: vocab.txt not written (give it "
		     "with --tokenizer-files)");
		return 0;
	}
	if ((rc = hf_recorded_file(in, "vocab-file", 0, &data, &dlen, err, errlen)) <= 0)
		return rc < 0 ? EXIT_FAILED : 0;   /* skipped: said why */
	int n = read_vocab(data, dlen, &tok, &added, err, errlen);
	free(data);
	rc = 0;
	if (n < 0) {
		warn("warning: the checkpoint's vocab-file: %s: not copied (give it with "
		     "--tokenizer-files)", err);
		return 0;
	}
	if (n != in->m.vocab) {
		warn("warning: the checkpoint's vocab-file has %d tokens with [BOS] and [EOS], the "
		     "model %d: another vocabulary; not copied (give it with --tokenizer-files)", n,
		     in->m.vocab);
		goto out;
	}
	/* vocab.txt: one token a line, so BertTokenizer numbers them as the model does */
	size_t len = 0, at = 0;
	for (int i = 0; i < n; i++)
		len += strlen(tok[i]) + 1;
	char *text = malloc(len + 1), path[4200];
	if (!text)
		xalloc_die("the vocab.txt text", len + 1);
	for (int i = 0; i < n; i++)
		at += (size_t)sprintf(text + at, "%s\n", tok[i]);
	snprintf(path, sizeof path, "%s/vocab.txt", dir);
	rc = file_write_atomic(path, text, at, 0644, err, errlen) < 0 ? EXIT_FAILED : 0;
	free(text);
	if (rc)
		goto out;
	/* BertTokenizer: Megatron's FullBertTokenizer lower-cases (and strips accents) for the
	 * uncased vocabulary only; the tokens it added are special (never split) */
	json_t *extra = json_array();
	if (added & 1)
		json_array_append_new(extra, json_string("[BOS]"));
	if (added & 2)
		json_array_append_new(extra, json_string("[EOS]"));
	json_t *cfg = json_pack("{s:s,s:b,s:b,s:n,s:s,s:s,s:s,s:s,s:s,s:o,s:I}",
				"tokenizer_class", "BertTokenizer",
				"do_lower_case", strcmp(type, "BertWordPieceLowerCase") == 0,
				"tokenize_chinese_chars", 1, "strip_accents",
				"unk_token", "[UNK]", "sep_token", "[SEP]", "pad_token", "[PAD]",
				"cls_token", "[CLS]", "mask_token", "[MASK]",
				"additional_special_tokens", extra,
				"model_max_length", (json_int_t)in->m.max_pos);
	rc = hf_write_json(dir, "tokenizer_config.json", cfg, JSON_INDENT(2) | JSON_SORT_KEYS, err,
			   errlen) < 0 ? EXIT_FAILED : 0;
	json_decref(cfg);
	if (rc)
		goto out;
	/* what the fast tokenizer AutoTokenizer picks reads */
	json_t *tj = bert_tokenizer_json(tok, n, strcmp(type, "BertWordPieceLowerCase") == 0, added);
	rc = hf_write_json(dir, "tokenizer.json", tj, JSON_INDENT(2) | JSON_PRESERVE_ORDER, err,
			   errlen) < 0 ? EXIT_FAILED : 0;
	json_decref(tj);
	json_t *map = json_pack("{s:s,s:s,s:s,s:s,s:s}", "unk_token", "[UNK]", "sep_token", "[SEP]",
				"pad_token", "[PAD]", "cls_token", "[CLS]", "mask_token", "[MASK]");
	if (!rc && map && added) {
		json_t *extra = json_array();
		if (added & 1)
			json_array_append_new(extra, json_string("[BOS]"));
		if (added & 2)
			json_array_append_new(extra, json_string("[EOS]"));
		json_object_set_new(map, "additional_special_tokens", extra);
	}
	if (!rc)
		rc = hf_write_json(dir, "special_tokens_map.json", map, JSON_INDENT(2) | JSON_SORT_KEYS,
				   err, errlen) < 0 ? EXIT_FAILED : 0;
	json_decref(map);
out:
	for (int i = 0; i < n; i++)
		free(tok[i]);
	free(tok);
	return rc;
}

/* The id of [PAD] in the vocabulary train used, or 0 (BERT's) when it cannot be read. */
static int pad_id(const struct sh_ckpt *in)
{
	char e[256], **tok = NULL, *data;
	size_t dlen;
	int added, id = 0;
	if (hf_recorded_file(in, "vocab-file", 1, &data, &dlen, e, sizeof e) <= 0)
		return 0;
	int n = read_vocab(data, dlen, &tok, &added, e, sizeof e);
	free(data);
	for (int i = n - 1; i >= 0; i--) {
		if (strcmp(tok[i], "[PAD]") == 0)
			id = i;
		free(tok[i]);
	}
	free(tok);
	return id < in->m.vocab ? id : 0;
}

const char *hf_bert_hidden_act(const struct sh_ckpt *in)
{
	struct hf_switches sw;
	hf_switches_of(in, &sw);
	return sw.openai_gelu ? "gelu_new" : "gelu";
}

json_t *hf_bert_config(const struct sh_ckpt *in, const char *cls)
{
	const struct lt_model *m = &in->m;
	return json_pack("{s:[s],s:s,s:i,s:i,s:i,s:i,s:i,s:s,s:f,s:f,s:i,s:i,s:f,s:f,s:i,s:s,s:b,"
			 "s:b}",
			 "architectures", cls, "model_type", "megatron-bert", "vocab_size", m->vocab,
			 "hidden_size", m->hidden, "num_hidden_layers", m->layers,
			 "num_attention_heads", m->heads, "intermediate_size", m->ffn,
			 "hidden_act", hf_bert_hidden_act(in),
			 "hidden_dropout_prob", hf_short_float(m->hidden_dropout),
			 "attention_probs_dropout_prob", hf_short_float(m->attention_dropout),
			 "max_position_embeddings", m->max_pos,
			 "type_vocab_size", m->num_tokentypes > 0 ? m->num_tokentypes : 1,
			 "initializer_range", hf_short_float(m->init_std),
			 "layer_norm_eps", hf_short_float(m->eps), "pad_token_id", pad_id(in),
			 "position_embedding_type", "absolute", "tie_word_embeddings", 1,
			 "use_cache", 1);
}
