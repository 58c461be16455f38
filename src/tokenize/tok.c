#include "tok.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "msg.h"
#include "xalloc.h"
#include "tokenize/pretok.h"
#include "tokenize/regex.h"
#include "tokenize/unicode.h"
#include "tokenize/wordpiece.h"

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define BLOOM_PATTERN " ?[^(\\s|[.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c])]+"
#define MAX_STEPS 16

enum step_type { ST_GPT2, ST_BLOOM, ST_REGEX, ST_PREFIX };

struct step {
	enum step_type type;
	struct regex *re;            /* compiled once at load to report errors; threads use their own */
	char *pattern;
	int literal;
	enum regex_behavior behavior;
	int invert;
};

struct added {
	char *content;
	size_t len;
	char *norm;                  /* normalized=true under a normalizer: the content normalized, */
	size_t norm_len;             /* which is what HF matches in the normalized text */
	uint32_t id;
	int special, lstrip, rstrip, single_word, normalized;
};

struct tok {
	struct bpe *model;           /* NULL for WordPiece */
	struct wp *wp;               /* the WordPiece model, with its normalizer and pre-tokenizer */
	struct wp_norm norm;
	int has_norm, wp_pretok;
	struct step steps[MAX_STEPS];
	int nsteps;
	struct added *added;
	int nadded;
	uint32_t eod, vocab_size;
	int byte_level, byte_fallback;
	char desc[256];
	uint8_t first_byte[2][256];  /* pass -> byte -> some added token starts with it */
	uint8_t unbyte[0x180];       /* byte-level stand-in code point -> byte */
};

struct seg {
	const char *p;
	size_t len;
	uint32_t id;                 /* an added token's id, or BPE_NONE for text */
};

struct tok_state {
	struct bpe_cache *cache;
	struct seg *segs, *segs2;
	size_t segcap, segcap2;
	struct pretok_piece *pa, *pb, *tmp;
	size_t capa, capb, captmp;
	struct regex *re[MAX_STEPS];     /* a regex's match region is not shareable between threads */
	char *arena;
	size_t arena_cap;
	struct wp_state *wps;
	uint8_t *norm;                   /* a segment's normalized text */
	size_t norm_cap;
	struct seg *segs3;
	size_t segcap3;
};

/* ---------------------------------------------------------------------------------------------
 * loading */

static void finish_common(struct tok *t)
{
	size_t len;
	uint32_t end = t->wp ? wp_vocab_end(t->wp) : bpe_vocab_end(t->model);
	t->vocab_size = end;
	for (int i = 0; i < t->nadded; i++)
		if (t->added[i].id + 1 > t->vocab_size)
			t->vocab_size = t->added[i].id + 1;
	for (int i = 0; i < t->nadded; i++) {
		const struct added *a = &t->added[i];
		if (a->norm ? a->norm_len : a->len)
			t->first_byte[a->normalized][(uint8_t)(a->norm ? a->norm : a->content)[0]] = 1;
	}
	for (int b = 0; b < 256; b++) {
		const char *c = bpe_byte_char((uint8_t)b, &len);
		unsigned cp = len == 1 ? (uint8_t)c[0] : (unsigned)((c[0] & 0x1f) << 6 | (c[1] & 0x3f));
		if (cp < sizeof t->unbyte)
			t->unbyte[cp] = (uint8_t)b;
	}
}

static struct tok *tok_alloc(int wordpiece)
{
	struct tok *t = calloc(1, sizeof *t);
	if (t && !(wordpiece ? (void *)(t->wp = wp_new()) : (void *)(t->model = bpe_new()))) {
		free(t);
		return NULL;
	}
	if (t)
		t->eod = BPE_NONE;
	return t;
}

uint32_t tok_lookup(const struct tok *t, const char *s, size_t len)
{
	uint32_t id = t->wp ? wp_lookup(t->wp, s, len) : bpe_lookup(t->model, s, len);
	for (int k = 0; k < t->nadded && id == BPE_NONE; k++)
		if (t->added[k].len == len && memcmp(t->added[k].content, s, len) == 0)
			id = t->added[k].id;
	return id;
}

/* Megatron's BertWordPieceLowerCase / BertWordPieceCase: BERT's vocab.txt, a token per line, the
 * id its line number (0-based), read as HF's WordPiece.from_file reads it (trailing whitespace
 * trimmed).  Megatron's _BertWordPieceTokenizer needs [CLS] [SEP] [PAD] [MASK] (and WordPiece
 * [UNK]), and appends [BOS] and [EOS] when the file lacks them: their ids follow the file's, and
 * [EOS] is its EOD. */
struct tok *tok_load_bert(const char *vocab_txt, int lower_case, char *err, size_t errlen)
{
	static const char *const need[] = {"[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"};
	struct tok *t = tok_alloc(1);
	FILE *f = NULL;
	char *line = NULL, why[512];
	size_t cap = 0;
	ssize_t len;
	uint32_t n = 0;

	if (!t) {
		xalloc_err_in(err, errlen, vocab_txt, "the tokenizer", 0);
		return NULL;
	}
	f = fopen(vocab_txt, "r");
	if (!f) {
		errf(err, errlen, "%s: %s", vocab_txt, strerror(errno));
		goto fail;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		while (len > 0 && memchr(" \t\r\n\v\f", line[len - 1], 6))
			len--;
		if (memchr(line, 0, (size_t)len)) {
			errf(err, errlen, "%s:%u: a NUL byte: not a vocab.txt", vocab_txt, n + 1);
			goto fail;
		}
		if (wp_add_token(t->wp, line, (size_t)len, n, why, sizeof why) < 0) {
			uint32_t first = wp_lookup(t->wp, line, (size_t)len);
			if (first != WP_NONE)
				errf(err, errlen, "%s:%u: token '%.*s' is on line %u already", vocab_txt, n + 1,
				     (int)(len > 80 ? 80 : len), line, first + 1);
			else
				errf(err, errlen, "%s:%u: %s", vocab_txt, n + 1, why);
			goto fail;
		}
		n++;
	}
	if (ferror(f)) {
		errf(err, errlen, "%s: %s", vocab_txt, strerror(errno));
		goto fail;
	}
	if (n == 0) {
		errf(err, errlen, "%s: the vocabulary is empty", vocab_txt);
		goto fail;
	}
	for (size_t k = 0; k < sizeof need / sizeof *need; k++)
		if (wp_lookup(t->wp, need[k], strlen(need[k])) == WP_NONE) {
			errf(err, errlen, "%s: no %s token: Megatron's BERT tokenizers need [UNK], [CLS], [SEP], "
			     "[PAD] and [MASK]; is it a BERT vocab.txt?", vocab_txt, need[k]);
			goto fail;
		}
	for (const char *const *k = (const char *const[]){"[BOS]", "[EOS]", NULL}; *k; k++)
		if (wp_lookup(t->wp, *k, 5) == WP_NONE && wp_add_token(t->wp, *k, 5, n++, why, sizeof why) < 0) {
			errf(err, errlen, "%s: %s", vocab_txt, why);
			goto fail;
		}
	if (wp_finish(t->wp, "[UNK]", "##", 100, why, sizeof why) < 0) {
		errf(err, errlen, "%s: %s", vocab_txt, why);
		goto fail;
	}
	t->norm = (struct wp_norm){1, 1, lower_case, lower_case};
	t->has_norm = 1;
	t->wp_pretok = 1;
	t->eod = wp_lookup(t->wp, "[EOS]", 5);
	finish_common(t);
	snprintf(t->desc, sizeof t->desc, "BERT WordPiece (%.160s, %s), %u tokens", vocab_txt,
		 lower_case ? "lower case" : "cased", t->vocab_size);
	fclose(f);
	free(line);
	return t;
fail:
	if (f)
		fclose(f);
	free(line);
	tok_free(t);
	return NULL;
}

/* An id a vocabulary of n tokens cannot have: Megatron's embedding has n rows (the GPT-2
 * tokenizer's len(encoder), PretrainedFromHF's len(tokenizer)), so an id >= n would index past it;
 * and a huge one would size our tables.  1 + err when so. */
static int id_past_end(json_int_t id, size_t n, const char *file, const char *token, char *err,
		       size_t errlen)
{
	if (id >= 0 && (uint64_t)id < n)
		return 0;
	errf(err, errlen, "%s: token '%.80s' has id %lld, but the vocabulary has %zu tokens: ids run "
	     "from 0 to %zu", file, token, (long long)id, n, n - 1);
	return 1;
}

struct tok *tok_load_gpt2(const char *vocab_json, const char *merges_txt, char *err, size_t errlen)
{
	struct tok *t = tok_alloc(0);
	json_error_t je;
	json_t *v = NULL, *val;
	const char *key;
	FILE *f = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0;

	if (!t) {
		xalloc_err(err, errlen, "the tokenizer", 0);
		return NULL;
	}
	v = json_load_file(vocab_json, JSON_ALLOW_NUL, &je);
	if (!v || !json_is_object(v)) {
		if (!v && je.line < 0)
			errf(err, errlen, "%s", je.text);  /* jansson names the file: can't open it */
		else
			errf(err, errlen, "%s:%d: %s", vocab_json, je.line,
			     v ? "not a JSON object of token -> id" : je.text);
		goto fail;
	}
	if (json_object_size(v) == 0) {
		errf(err, errlen, "%s: the vocabulary is empty", vocab_json);
		goto fail;
	}
	json_object_foreach(v, key, val) {
		char why[512];
		if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= BPE_NONE) {
			errf(err, errlen, "%s: token '%s' has no valid id", vocab_json, key);
			goto fail;
		}
		if (id_past_end(json_integer_value(val), json_object_size(v), vocab_json, key, err, errlen))
			goto fail;
		if (bpe_add_token(t->model, key, strlen(key), (uint32_t)json_integer_value(val), why,
				  sizeof why) < 0) {
			errf(err, errlen, "%s: %s", vocab_json, why);
			goto fail;
		}
	}
	f = fopen(merges_txt, "r");
	if (!f) {
		errf(err, errlen, "%s: %s", merges_txt, strerror(errno));
		goto fail;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		char why[512], *sp;
		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (lineno == 1 && strncmp(line, "#version", 8) == 0)
			continue;
		if (len == 0)
			continue;
		sp = strchr(line, ' ');
		if (!sp || strchr(sp + 1, ' ')) {
			errf(err, errlen, "%s:%d: expected two tokens separated by one space", merges_txt, lineno);
			goto fail;
		}
		if (bpe_add_merge(t->model, line, (size_t)(sp - line), sp + 1, strlen(sp + 1), why, sizeof why) < 0) {
			errf(err, errlen, "%s:%d: %s; do --vocab-file and --merge-file belong together?",
			     merges_txt, lineno, why);
			goto fail;
		}
	}
	fclose(f);
	f = NULL;
	if (bpe_finish(t->model, 1, NULL, 0, 0, 0, err, errlen) < 0)
		goto fail;
	t->byte_level = 1;
	t->steps[t->nsteps++] = (struct step){ST_GPT2, NULL, NULL, 0, REGEX_ISOLATED, 0};
	t->eod = bpe_lookup(t->model, "<|endoftext|>", 13);
	finish_common(t);
	snprintf(t->desc, sizeof t->desc, "GPT-2 BPE (%.160s), %u tokens, %zu merges", vocab_json,
		 t->vocab_size, bpe_merge_count(t->model));
	json_decref(v);
	free(line);
	return t;
fail:
	if (f)
		fclose(f);
	free(line);
	json_decref(v);
	tok_free(t);
	return NULL;
}

static int jbool(json_t *o, const char *k, int dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static const char *jtype(json_t *o)
{
	const char *s = json_string_value(json_object_get(o, "type"));
	return s ? s : "(no type)";
}

static int add_pretok(struct tok *t, json_t *p, const char *path, char *err, size_t errlen)
{
	const char *type = jtype(p);
	if (t->nsteps + 2 > MAX_STEPS)
		return errf(err, errlen, "%s: too many pre-tokenizers", path);
	if (strcmp(type, "Sequence") == 0) {
		json_t *list = json_object_get(p, "pretokenizers"), *q;
		size_t i;
		json_array_foreach(list, i, q)
			if (add_pretok(t, q, path, err, errlen) < 0)
				return -1;
		return 0;
	}
	if (strcmp(type, "ByteLevel") == 0) {
		t->byte_level = 1;
		if (jbool(p, "add_prefix_space", 1))
			t->steps[t->nsteps++] = (struct step){ST_PREFIX, NULL, NULL, 0, REGEX_ISOLATED, 0};
		if (jbool(p, "use_regex", 1))
			t->steps[t->nsteps++] = (struct step){ST_GPT2, NULL, NULL, 0, REGEX_ISOLATED, 0};
		return 0;
	}
	if (strcmp(type, "Split") == 0) {
		json_t *pat = json_object_get(p, "pattern");
		const char *rx = json_string_value(json_object_get(pat, "Regex"));
		const char *lit = json_string_value(json_object_get(pat, "String"));
		const char *beh = json_string_value(json_object_get(p, "behavior"));
		int b = beh ? regex_behavior_parse(beh) : -1, invert = jbool(p, "invert", 0);
		char why[512];
		if (!rx && !lit)
			return errf(err, errlen, "%s: Split pre-tokenizer without a String or Regex pattern", path);
		if (b < 0)
			return errf(err, errlen, "%s: Split behavior '%s' is not one HF knows", path, beh ? beh : "(none)");
		if (rx && b == REGEX_ISOLATED && !invert && strcmp(rx, BLOOM_PATTERN) == 0) {
			t->steps[t->nsteps++] = (struct step){ST_BLOOM, NULL, NULL, 0, REGEX_ISOLATED, 0};
			return 0;
		}
		if (rx && b == REGEX_ISOLATED && !invert && strcmp(rx, GPT2_PATTERN) == 0) {
			t->steps[t->nsteps++] = (struct step){ST_GPT2, NULL, NULL, 0, REGEX_ISOLATED, 0};
			return 0;
		}
		struct regex *re = regex_compile(rx ? rx : lit, !rx, why, sizeof why);
		if (!re)
			return errf(err, errlen, "%s: Split pattern '%s': %s", path, rx ? rx : lit, why);
		t->steps[t->nsteps++] = (struct step){ST_REGEX, re, strdup(rx ? rx : lit), !rx,
						      (enum regex_behavior)b, invert};
		return 0;
	}
	return errf(err, errlen, "%s: pre-tokenizer '%s' is not supported (ByteLevel, Split and Sequence are)",
		    path, type);
}

/* eos from the files that sit beside tokenizer.json */
static char *eos_from_dir(const char *dir)
{
	static const char *files[] = {"special_tokens_map.json", "tokenizer_config.json"};
	char p[4200];
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%.4000s/%s", dir, files[i]);
		json_t *j = json_load_file(p, 0, NULL), *e;
		if (!j)
			continue;
		e = json_object_get(j, "eos_token");
		const char *s = json_is_string(e) ? json_string_value(e)
						  : json_string_value(json_object_get(e, "content"));
		char *r = s ? strdup(s) : NULL;
		json_decref(j);
		if (r)
			return r;
	}
	return NULL;
}

/* WordPiece's normalizer: BertNormalizer or none; 0 or -1 + err */
static int wp_normalizer(struct tok *t, json_t *x, const char *file, char *err, size_t errlen)
{
	json_t *sa;
	if (!x || json_is_null(x))
		return 0;
	if (strcmp(jtype(x), "BertNormalizer") != 0)
		return errf(err, errlen, "%s: normalizer '%s' is not supported (WordPiece takes BertNormalizer or none)",
			    file, jtype(x));
	t->has_norm = 1;
	t->norm.clean_text = jbool(x, "clean_text", 1);
	t->norm.handle_chinese = jbool(x, "handle_chinese_chars", 1);
	t->norm.lowercase = jbool(x, "lowercase", 1);
	sa = json_object_get(x, "strip_accents");   /* null: as lowercase */
	t->norm.strip_accents = json_is_boolean(sa) ? json_is_true(sa) : t->norm.lowercase;
	return 0;
}

struct tok *tok_load_hf(const char *path, const char *eod_token, char *err, size_t errlen)
{
	struct tok *t = NULL;
	char file[4096], dir[4096], why[512];
	struct stat st;
	json_error_t je;
	json_t *j = NULL, *model, *vocab, *merges, *x, *val;
	const char *key, *s;
	char *eos = NULL;
	size_t i;
	int wordpiece;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(dir, sizeof dir, "%s", path);
		snprintf(file, sizeof file, "%s/tokenizer.json", path);
	} else {
		snprintf(file, sizeof file, "%s", path);
		const char *sl = strrchr(path, '/');
		snprintf(dir, sizeof dir, "%.*s", sl ? (int)(sl - path) : 1, sl ? path : ".");
	}
	j = json_load_file(file, JSON_ALLOW_NUL, &je);
	if (!j) {
		if (je.line < 0)
			errf(err, errlen, "%s", je.text);
		else
			errf(err, errlen, "%s:%d: %s", file, je.line, je.text);
		goto fail;
	}
	model = json_object_get(j, "model");
	s = json_string_value(json_object_get(model, "type"));
	wordpiece = s && strcmp(s, "WordPiece") == 0;
	if (!json_is_object(model) || (s && strcmp(s, "BPE") != 0 && !wordpiece)) {
		errf(err, errlen, "%s: model '%s' is not supported (BPE and WordPiece are)", file, s ? s : "?");
		goto fail;
	}
	if (!(t = tok_alloc(wordpiece))) {
		xalloc_err_in(err, errlen, file, "the tokenizer", 0);
		goto fail;
	}
	x = json_object_get(j, "normalizer");
	if (wordpiece) {
		if (wp_normalizer(t, x, file, err, errlen) < 0)
			goto fail;
	} else if (x && !json_is_null(x)) {
		errf(err, errlen, "%s: normalizer '%s' is not supported (lmtk tokenizes byte-level BPE without one)",
		     file, jtype(x));
		goto fail;
	}
	x = json_object_get(j, "post_processor");
	if (x && !json_is_null(x) && strcmp(jtype(x), "ByteLevel") != 0)
		warn("%s: post_processor '%s' ignored: no special tokens are added around documents "
		     "(--append-eod adds the EOD)", file, jtype(x));
	if (!wordpiece && (x = json_object_get(model, "dropout")) && !json_is_null(x) &&
	    !(json_is_number(x) && json_number_value(x) == 0)) {
		errf(err, errlen, "%s: BPE dropout is random; refusing to tokenize with it", file);
		goto fail;
	}
	for (const char *const *k = (const char *const[]){"continuing_subword_prefix", "end_of_word_suffix", NULL};
	     *k && !wordpiece; k++) {
		s = json_string_value(json_object_get(model, *k));
		if (s && *s) {
			errf(err, errlen, "%s: BPE %s '%s' is not supported", file, *k, s);
			goto fail;
		}
	}
	vocab = json_object_get(model, "vocab");
	x = json_object_get(j, "added_tokens");
	if (!json_is_object(vocab) || json_object_size(vocab) == 0) {
		errf(err, errlen, "%s: model.vocab is %s", file, json_is_object(vocab) ? "empty" : "missing");
		goto fail;
	}
	if (x && !json_is_array(x)) {
		errf(err, errlen, "%s: added_tokens is not an array", file);
		goto fail;
	}
	/* The ids, checked before anything is sized by one.  The tokens are model.vocab's plus the
	 * added tokens it lacks, and every id must index an embedding of that many rows (Megatron
	 * sizes it by the count), so the ids are 0 .. count-1, each given once.  An added token
	 * model.vocab has keeps the vocabulary's id; one it lacks gets, in Hugging Face tokenizers,
	 * the next id after the vocabulary, in file order, whatever the file says (with a warning):
	 * a file whose id differs is refused rather than tokenized with ids HF would not give. */
	size_t ntok = json_object_size(vocab), nnew = 0;
	json_t *seen = json_object();   /* added contents the vocabulary lacks -> their HF id */
	if (!seen) {
		xalloc_err_in(err, errlen, file, "the added tokens' ids", 0);
		goto fail;
	}
	json_array_foreach(x, i, val) {
		const char *c = json_string_value(json_object_get(val, "content"));
		json_t *idv = json_object_get(val, "id"), *vid;
		if (!c || !*c || !json_is_integer(idv)) {
			errf(err, errlen, "%s: added token %zu lacks content or id", file, i);
			json_decref(seen);
			goto fail;
		}
		if ((vid = json_object_get(vocab, c)) && !json_equal(vid, idv)) {
			errf(err, errlen, "%s: added token '%.80s' has id %lld, but model.vocab gives it id %s%lld",
			     file, c, (long long)json_integer_value(idv), json_is_integer(vid) ? "" : "no valid ",
			     json_is_integer(vid) ? (long long)json_integer_value(vid) : 0LL);
			json_decref(seen);
			goto fail;
		}
		if (!vid && !json_object_get(seen, c) &&
		    json_object_set_new(seen, c, json_integer((json_int_t)(ntok + nnew++))) < 0) {
			xalloc_err_in(err, errlen, file, "the added tokens' ids", 0);
			json_decref(seen);
			goto fail;
		}
	}
	ntok += nnew;
	json_array_foreach(x, i, val) {
		const char *c = json_string_value(json_object_get(val, "content"));
		json_int_t id = json_integer_value(json_object_get(val, "id"));
		json_t *hf = json_object_get(seen, c);
		if (id_past_end(id, ntok, file, c, err, errlen)) {
			json_decref(seen);
			goto fail;
		}
		if (hf && json_integer_value(hf) != id) {
			errf(err, errlen, "%s: added token '%.80s' has id %lld, but Hugging Face tokenizers "
			     "numbers it %lld: the added tokens model.vocab lacks take the ids after its %zu "
			     "tokens, in file order", file, c, (long long)id, (long long)json_integer_value(hf),
			     ntok - nnew);
			json_decref(seen);
			goto fail;
		}
	}
	json_decref(seen);
	json_object_foreach(vocab, key, val) {
		if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= BPE_NONE) {
			errf(err, errlen, "%s: token '%s' has no valid id", file, key);
			goto fail;
		}
		if (id_past_end(json_integer_value(val), json_object_size(vocab), file, key, err, errlen))
			goto fail;
		if ((wordpiece ? wp_add_token(t->wp, key, strlen(key), (uint32_t)json_integer_value(val), why, sizeof why)
			       : bpe_add_token(t->model, key, strlen(key), (uint32_t)json_integer_value(val), why,
					       sizeof why)) < 0) {
			errf(err, errlen, "%s: %s", file, why);
			goto fail;
		}
	}
	merges = wordpiece ? NULL : json_object_get(model, "merges");
	json_array_foreach(merges, i, x) {
		const char *a, *b;
		size_t al, bl;
		char *tmp = NULL;
		if (json_is_string(x)) {  /* "a b" */
			const char *m = json_string_value(x), *sp = strchr(m, ' ');
			if (!sp || strchr(sp + 1, ' ')) {
				errf(err, errlen, "%s: merge %zu '%s' is not two tokens", file, i, m);
				goto fail;
			}
			a = m, al = (size_t)(sp - m), b = sp + 1, bl = strlen(sp + 1);
		} else if (json_is_array(x) && json_array_size(x) == 2 && json_is_string(json_array_get(x, 0)) &&
			   json_is_string(json_array_get(x, 1))) {
			a = json_string_value(json_array_get(x, 0)), al = json_string_length(json_array_get(x, 0));
			b = json_string_value(json_array_get(x, 1)), bl = json_string_length(json_array_get(x, 1));
		} else {
			errf(err, errlen, "%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", file, i);
			goto fail;
		}
		if (bpe_add_merge(t->model, a, al, b, bl, why, sizeof why) < 0) {
			errf(err, errlen, "%s: merge %zu: %s", file, i, why);
			free(tmp);
			goto fail;
		}
	}
	/* added tokens: their ids are part of the vocabulary even when the model lacks them */
	x = json_object_get(j, "added_tokens");
	t->added = calloc(json_array_size(x) + 1, sizeof *t->added);
	json_array_foreach(x, i, val) {
		const char *c = json_string_value(json_object_get(val, "content"));
		json_t *idv = json_object_get(val, "id");
		if (!c || !*c || !json_is_integer(idv)) {
			errf(err, errlen, "%s: added token %zu lacks content or id", file, i);
			goto fail;
		}
		struct added *a = &t->added[t->nadded++];
		a->content = strdup(c);
		a->len = strlen(c);
		a->id = (uint32_t)json_integer_value(idv);
		a->special = jbool(val, "special", 0);
		a->lstrip = jbool(val, "lstrip", 0);
		a->rstrip = jbool(val, "rstrip", 0);
		a->single_word = jbool(val, "single_word", 0);
		a->normalized = jbool(val, "normalized", !a->special);
		/* HF matches a normalized token in the normalized text, so as the normalizer makes it */
		if (a->normalized && t->has_norm) {
			uint8_t *nb = NULL;
			size_t nl = 0, ncap = 0;
			struct wp_state *ws = wp_state_new();
			if (!ws || wp_normalize(&t->norm, ws, (const uint8_t *)c, a->len, &nb, &nl, &ncap) < 0) {
				wp_state_free(ws);
				free(nb);
				xalloc_err_in(err, errlen, file, "an added token's normalized text", 0);
				goto fail;
			}
			wp_state_free(ws);
			a->norm = (char *)nb;
			a->norm_len = nl;
		}
		/* the ids were checked above: one model.vocab has is its own, and a new one is free.
		 * WordPiece's vocabulary stays the model's: HF never matches an added token as a piece */
		if (!wordpiece && bpe_lookup(t->model, c, a->len) == BPE_NONE &&
		    bpe_add_token(t->model, c, a->len, a->id, why, sizeof why) < 0) {
			errf(err, errlen, "%s: added token '%s': %s", file, c, why);
			goto fail;
		}
	}
	x = json_object_get(j, "pre_tokenizer");
	if (wordpiece) {
		json_t *mc = json_object_get(model, "max_input_chars_per_word");
		const char *unk = json_string_value(json_object_get(model, "unk_token"));
		const char *pre = json_string_value(json_object_get(model, "continuing_subword_prefix"));
		if (x && !json_is_null(x) && strcmp(jtype(x), "BertPreTokenizer") != 0) {
			errf(err, errlen, "%s: pre-tokenizer '%s' is not supported with WordPiece (BertPreTokenizer is)",
			     file, jtype(x));
			goto fail;
		}
		t->wp_pretok = x && !json_is_null(x);
		if (mc && !(json_is_integer(mc) && json_integer_value(mc) >= 0 && json_integer_value(mc) <= 1000000000)) {
			errf(err, errlen, "%s: model.max_input_chars_per_word is not a count", file);
			goto fail;
		}
		if (wp_finish(t->wp, unk ? unk : "[UNK]", pre ? pre : "##", mc ? (unsigned)json_integer_value(mc) : 100,
			      why, sizeof why) < 0) {
			errf(err, errlen, "%s: %s", file, why);
			goto fail;
		}
		goto eod;
	}
	if (x && !json_is_null(x) && add_pretok(t, x, file, err, errlen) < 0)
		goto fail;
	s = json_string_value(json_object_get(model, "unk_token"));
	if (bpe_finish(t->model, t->byte_level, s, jbool(model, "fuse_unk", 0), jbool(model, "byte_fallback", 0),
		       jbool(model, "ignore_merges", 0), why, sizeof why) < 0) {
		errf(err, errlen, "%s: %s", file, why);
		goto fail;
	}
	t->byte_fallback = jbool(model, "byte_fallback", 0);

	/* EOD: asked for, else the eos the directory names, else the usual suspects */
eod:
	eos = eod_token ? strdup(eod_token) : eos_from_dir(dir);
	if (eos) {
		t->eod = tok_lookup(t, eos, strlen(eos));
		if (t->eod == BPE_NONE) {
			errf(err, errlen, "%s: the eos token '%s' is not in the vocabulary", file, eos);
			goto fail;
		}
	} else {
		for (const char *const *k = (const char *const[]){"</s>", "<|endoftext|>", "<eos>", NULL};
		     *k && t->eod == BPE_NONE; k++)
			t->eod = tok_lookup(t, *k, strlen(*k));
	}
	finish_common(t);
	if (wordpiece)
		snprintf(t->desc, sizeof t->desc, "%.160s: WordPiece, %u tokens, %d added", file, t->vocab_size,
			 t->nadded);
	else
		snprintf(t->desc, sizeof t->desc, "%.160s: BPE, %u tokens, %zu merges, %d added", file,
			 t->vocab_size, bpe_merge_count(t->model), t->nadded);
	free(eos);
	json_decref(j);
	return t;
fail:
	free(eos);
	json_decref(j);
	tok_free(t);
	return NULL;
}

void tok_free(struct tok *t)
{
	if (!t)
		return;
	bpe_free(t->model);
	wp_free(t->wp);
	for (int i = 0; i < t->nsteps; i++) {
		regex_free(t->steps[i].re);
		free(t->steps[i].pattern);
	}
	for (int i = 0; i < t->nadded; i++) {
		free(t->added[i].content);
		free(t->added[i].norm);
	}
	free(t->added);
	free(t);
}

uint32_t tok_eod(const struct tok *t) { return t->eod; }
void tok_set_eod(struct tok *t, uint32_t id) { t->eod = id; }
uint32_t tok_vocab_size(const struct tok *t) { return t->vocab_size; }
const char *tok_describe(const struct tok *t) { return t->desc; }

int tok_decode_id(const struct tok *t, uint32_t id, int first, char *buf, size_t cap, size_t *len)
{
	size_t n, o = 0;
	const char *s = t->wp ? wp_token(t->wp, id, &n) : bpe_token(t->model, id, &n);
	if (t->wp) {
		/* pieces are words joined by spaces, a continuation glued to the piece before */
		for (int i = 0; i < t->nadded && !s; i++)
			if (t->added[i].id == id)
				s = t->added[i].content, n = t->added[i].len;
		if (!s)
			return -1;
		const char *pre = wp_prefix(t->wp);
		size_t pl = strlen(pre);
		if (pl && n >= pl && memcmp(s, pre, pl) == 0 && wp_token(t->wp, id, &(size_t){0}))
			s += pl, n -= pl;
		else if (!first && cap)
			buf[o++] = ' ';
		if (n > cap - o)
			n = cap - o;
		memcpy(buf + o, s, n);
		*len = o + n;
		return 0;
	}
	for (int i = 0; i < t->nadded && !s; i++)
		if (t->added[i].id == id)
			s = t->added[i].content, n = t->added[i].len;
	if (!s)
		return -1;
	for (int i = 0; i < t->nadded; i++)  /* added tokens are literal text */
		if (t->added[i].id == id) {
			if (n > cap)
				n = cap;
			memcpy(buf, s, n);
			*len = n;
			return 0;
		}
	if (t->byte_fallback && n == 6 && strncmp(s, "<0x", 3) == 0 && s[5] == '>' &&
	    isxdigit((unsigned char)s[3]) && isxdigit((unsigned char)s[4])) {
		buf[0] = (char)strtol((char[]){s[3], s[4], 0}, NULL, 16);
		*len = 1;
		return 0;
	}
	if (!t->byte_level) {
		if (n > cap)
			n = cap;
		memcpy(buf, s, n);
		*len = n;
		return 0;
	}
	for (size_t i = 0; i < n && o < cap;) {
		unsigned char c = (unsigned char)s[i];
		unsigned cp;
		if (c < 0x80) {
			cp = c;
			i++;
		} else if ((c & 0xe0) == 0xc0 && i + 1 < n) {
			cp = (unsigned)(c & 0x1f) << 6 | ((unsigned char)s[i + 1] & 0x3f);
			i += 2;
		} else {
			cp = 0x10000;  /* not a stand-in: cannot be */
			i++;
		}
		buf[o++] = cp < sizeof t->unbyte ? (char)t->unbyte[cp] : '?';
	}
	*len = o;
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * encoding */

struct tok_state *tok_state_new(const struct tok *t)
{
	char err[256];
	struct tok_state *s = calloc(1, sizeof *s);
	if (!s || !(t->wp ? (void *)(s->wps = wp_state_new()) : (void *)(s->cache = bpe_cache_new()))) {
		free(s);
		return NULL;
	}
	for (int i = 0; i < t->nsteps; i++)
		if (t->steps[i].type == ST_REGEX &&
		    !(s->re[i] = regex_compile(t->steps[i].pattern, t->steps[i].literal, err, sizeof err))) {
			tok_state_free(s);  /* compiled fine at load: only memory can fail here */
			return NULL;
		}
	return s;
}

void tok_state_free(struct tok_state *s)
{
	if (!s)
		return;
	bpe_cache_free(s->cache);
	wp_state_free(s->wps);
	free(s->norm), free(s->segs3);
	for (int i = 0; i < MAX_STEPS; i++)
		regex_free(s->re[i]);
	free(s->segs), free(s->segs2), free(s->pa), free(s->pb), free(s->tmp), free(s->arena);
	free(s);
}

static int seg_push(struct seg **v, size_t *n, size_t *cap, struct seg x)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct seg *p = realloc(*v, c * sizeof *p);
		if (!p)
			return -1;
		*v = p;
		*cap = c;
	}
	(*v)[(*n)++] = x;
	return 0;
}

static uint32_t cp_at(const uint8_t *s, size_t n, size_t i, size_t *clen)
{
	uint8_t c = s[i];
	if (c < 0x80 || i + 1 >= n) {
		*clen = 1;
		return c;
	}
	if ((c & 0xe0) == 0xc0) {
		*clen = 2;
		return (uint32_t)(c & 0x1f) << 6 | (s[i + 1] & 0x3f);
	}
	if ((c & 0xf0) == 0xe0 && i + 2 < n) {
		*clen = 3;
		return (uint32_t)(c & 0x0f) << 12 | (uint32_t)(s[i + 1] & 0x3f) << 6 | (s[i + 2] & 0x3f);
	}
	if (i + 3 < n) {
		*clen = 4;
		return (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3f) << 12 |
		       (uint32_t)(s[i + 2] & 0x3f) << 6 | (s[i + 3] & 0x3f);
	}
	*clen = 1;
	return c;
}

/* the code point that ends at s[end) */
static uint32_t cp_before(const uint8_t *s, size_t end)
{
	size_t i = end - 1, cl;
	while (i > 0 && (s[i] & 0xc0) == 0x80 && end - i < 4)
		i--;
	return cp_at(s, end, i, &cl);
}

/* Rust regex's \w, approximately: letters, numbers, marks are not told apart here */
static int is_word(uint32_t cp)
{
	enum ucd_class c = ucd_class(cp);
	return c == UCD_LETTER || c == UCD_NUMBER || cp == '_';
}

static int is_space(uint32_t cp)
{
	return ucd_class(cp) == UCD_SPACE;
}

/* HF's find_matches over one pass's tokens: leftmost-longest, then single_word / lstrip / rstrip. */
static int split_added(const struct tok *t, int pass, const struct seg *in, size_t nin, struct seg **out,
		       size_t *nout, size_t *cap)
{
	*nout = 0;
	for (size_t k = 0; k < nin; k++) {
		const uint8_t *s = (const uint8_t *)in[k].p;
		size_t n = in[k].len, start_off = 0, i = 0;
		if (in[k].id != BPE_NONE) {
			if (seg_push(out, nout, cap, in[k]) < 0)
				return -1;
			continue;
		}
		while (i < n) {
			if (!t->first_byte[pass][s[i]]) {
				i++;
				continue;
			}
			const struct added *best = NULL;
			size_t blen = 0;
			for (int a = 0; a < t->nadded; a++) {
				const struct added *ad = &t->added[a];
				const char *c = pass && ad->norm ? ad->norm : ad->content;
				size_t cl = pass && ad->norm ? ad->norm_len : ad->len;
				if (ad->normalized == pass && cl && cl <= n - i && (!best || cl > blen) &&
				    memcmp(s + i, c, cl) == 0)
					best = ad, blen = cl;
			}
			if (!best) {
				i++;
				continue;
			}
			size_t start = i, stop = i + blen, cl;
			i = stop;  /* a discarded match still consumes its bytes, as the automaton does */
			if (best->single_word) {
				int start_ok = start == 0 || !is_word(cp_before(s, start));
				int stop_ok = stop == n || !is_word(cp_at(s, n, stop, &cl));
				if (!start_ok || !stop_ok)
					continue;
			}
			if (best->lstrip) {
				/* absorb the whitespace before it, but not what an earlier match took */
				size_t ns = start;
				while (ns > 0) {
					size_t j = ns - 1;
					while (j > 0 && (s[j] & 0xc0) == 0x80)
						j--;
					if (!is_space(cp_at(s, ns, j, &cl)))
						break;
					ns = j;
				}
				start = ns > start_off ? ns : start_off;
			}
			if (best->rstrip) {
				while (stop < n) {
					uint32_t cp = cp_at(s, n, stop, &cl);
					if (!is_space(cp))
						break;
					stop += cl;
				}
				i = stop;
			}
			if (start_off < start &&
			    seg_push(out, nout, cap, (struct seg){(const char *)s + start_off, start - start_off, BPE_NONE}) < 0)
				return -1;
			if (seg_push(out, nout, cap, (struct seg){(const char *)s + start, stop - start, best->id}) < 0)
				return -1;
			start_off = stop;
		}
		if (start_off < n &&
		    seg_push(out, nout, cap, (struct seg){(const char *)s + start_off, n - start_off, BPE_NONE}) < 0)
			return -1;
	}
	return 0;
}

static int ensure_pieces(struct pretok_piece **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	struct pretok_piece *q = realloc(*p, c * sizeof *q);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

/* Pieces are (off, len) into a base pointer; after a prefix step they point into the arena, so
 * every list holds absolute addresses encoded as offsets from `base`. */
static int run_steps(const struct tok *t, struct tok_state *st, const char *text, size_t len,
		     uint32_t **out, size_t *n, size_t *cap, char *err, size_t errlen)
{
	const char *base = text;
	size_t np = 1;

	if (ensure_pieces(&st->pa, &st->capa, 1) < 0)
		return xalloc_err(err, errlen, "the pre-tokenizer's pieces", 0);
	st->pa[0] = (struct pretok_piece){0, len};
	for (int k = 0; k < t->nsteps; k++) {
		const struct step *sp = &t->steps[k];
		size_t nb = 0;
		if (sp->type == ST_PREFIX) {
			/* every piece gets its own copy with a leading space unless it has one */
			size_t total = 0;
			for (size_t i = 0; i < np; i++)
				total += st->pa[i].len + 1;
			if (total > st->arena_cap) {
				char *a = realloc(st->arena, total * 2);
				if (!a)
					return xalloc_err(err, errlen, "the pre-tokenizer's arena", total * 2);
				st->arena = a;
				st->arena_cap = total * 2;
			}
			size_t o = 0;
			for (size_t i = 0; i < np; i++) {
				const char *p = base + st->pa[i].off;
				size_t l = st->pa[i].len, start = o;
				if (l == 0 || p[0] != ' ')
					st->arena[o++] = ' ';
				memmove(st->arena + o, p, l);
				o += l;
				st->pa[i] = (struct pretok_piece){start, o - start};
			}
			base = st->arena;
			continue;
		}
		for (size_t i = 0; i < np; i++) {
			const uint8_t *p = (const uint8_t *)base + st->pa[i].off;
			size_t l = st->pa[i].len, off0 = st->pa[i].off;
			if (sp->type == ST_REGEX) {
				ssize_t got = regex_split(st->re[k], p, l, sp->behavior, sp->invert, &st->tmp,
							  &st->captmp, err, errlen);
				if (got < 0)
					return -1;
				if (ensure_pieces(&st->pb, &st->capb, nb + (size_t)got) < 0)
					return xalloc_err(err, errlen, "the pre-tokenizer's pieces", 0);
				for (ssize_t q = 0; q < got; q++)
					st->pb[nb++] = (struct pretok_piece){off0 + st->tmp[q].off, st->tmp[q].len};
				continue;
			}
			size_t pos = 0;
			while (pos < l) {
				if (ensure_pieces(&st->pb, &st->capb, nb + 256) < 0)
					return xalloc_err(err, errlen, "the pre-tokenizer's pieces", 0);
				size_t got = sp->type == ST_GPT2 ? pretok_gpt2(p, l, &pos, st->pb + nb, st->capb - nb)
								 : pretok_bloom(p, l, &pos, st->pb + nb, st->capb - nb);
				for (size_t q = 0; q < got; q++)
					st->pb[nb + q].off += off0;
				nb += got;
			}
		}
		struct pretok_piece *sw = st->pa;
		size_t swc = st->capa;
		st->pa = st->pb, st->capa = st->capb;
		st->pb = sw, st->capb = swc;
		np = nb;
	}
	for (size_t i = 0; i < np; i++)
		if (st->pa[i].len &&
		    bpe_encode(t->model, st->cache, (const uint8_t *)base + st->pa[i].off, st->pa[i].len, out, n, cap) < 0)
			return xalloc_err(err, errlen, "the document's token ids", 0);
	return 0;
}

static int push_one(uint32_t **out, size_t *n, size_t *cap, uint32_t id)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		uint32_t *p = realloc(*out, c * sizeof *p);
		if (!p)
			return -1;
		*out = p, *cap = c;
	}
	(*out)[(*n)++] = id;
	return 0;
}

/* WordPiece: the segments the raw text left after its added tokens (pass 0) are normalized one by
 * one, the normalized added tokens cut from each (pass 1), and what remains split and looked up,
 * the order in which HF's AddedVocabulary and the pipeline apply them */
static int encode_wordpiece(const struct tok *t, struct tok_state *s, size_t nseg, uint32_t **out, size_t *n,
			    size_t *cap, char *err, size_t errlen)
{
	for (size_t i = 0; i < nseg; i++) {
		const struct seg *g = &s->segs[i];
		const uint8_t *p = (const uint8_t *)g->p;
		size_t len = g->len, n3 = 1;
		if (g->id != BPE_NONE) {
			if (push_one(out, n, cap, g->id) < 0)
				return xalloc_err(err, errlen, "the document's token ids", 0);
			continue;
		}
		if (t->has_norm) {
			if (wp_normalize(&t->norm, s->wps, p, len, &s->norm, &len, &s->norm_cap) < 0)
				return xalloc_err(err, errlen, "the normalized text", 0);
			p = s->norm;
		}
		struct seg one = {(const char *)p, len, BPE_NONE};
		const struct seg *parts = &one;
		if (t->nadded) {
			if (split_added(t, 1, &one, 1, &s->segs3, &n3, &s->segcap3) < 0)
				return xalloc_err(err, errlen, "the text's added-token segments", 0);
			parts = s->segs3;
		}
		for (size_t k = 0; k < n3; k++) {
			if (parts[k].id != BPE_NONE ? push_one(out, n, cap, parts[k].id) < 0
			    : wp_encode(t->wp, s->wps, t->wp_pretok, (const uint8_t *)parts[k].p, parts[k].len, out, n,
					cap) < 0)
				return xalloc_err(err, errlen, "the document's token ids", 0);
		}
	}
	return 0;
}

int tok_encode(const struct tok *t, struct tok_state *s, const char *text, size_t len,
	       uint32_t **out, size_t *n, size_t *cap, char *err, size_t errlen)
{
	size_t nseg = 1, nseg2 = 0;

	if (len == 0)
		return 0;
	if (seg_push(&s->segs, &(size_t){0}, &s->segcap, (struct seg){text, len, BPE_NONE}) < 0)
		return xalloc_err(err, errlen, "the text's added-token segments", 0);
	if (t->nadded) {
		for (int pass = 0; pass < (t->wp ? 1 : 2); pass++) {
			if (split_added(t, pass, s->segs, nseg, &s->segs2, &nseg2, &s->segcap2) < 0)
				return xalloc_err(err, errlen, "the text's added-token segments", 0);
			struct seg *sw = s->segs;
			size_t swc = s->segcap;
			s->segs = s->segs2, s->segcap = s->segcap2;
			s->segs2 = sw, s->segcap2 = swc;
			nseg = nseg2;
		}
	}
	if (t->wp)
		return encode_wordpiece(t, s, nseg, out, n, cap, err, errlen);
	for (size_t i = 0; i < nseg; i++) {
		const struct seg *g = &s->segs[i];
		if (g->id != BPE_NONE) {
			if (*n == *cap) {
				size_t c = *cap ? *cap * 2 : 256;
				uint32_t *p = realloc(*out, c * sizeof *p);
				if (!p)
					return xalloc_err(err, errlen, "the document's token ids", c * sizeof *p);
				*out = p, *cap = c;
			}
			(*out)[(*n)++] = g->id;
		} else if (g->len && run_steps(t, s, g->p, g->len, out, n, cap, err, errlen) < 0) {
			return -1;
		}
	}
	return 0;
}
