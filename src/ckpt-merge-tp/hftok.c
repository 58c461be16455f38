/* hftok - the export's tokenizer: the files AutoTokenizer.from_pretrained reads, and the
 * special tokens' ids config.json and generation_config.json carry for generate().
 *
 * Only the files the manifest's "tokenizer" records are read (ckpt/tokrec.h: each file's
 * absolute path, size and SHA-256, hashed when the run started), and each only while it still
 * is that file (hf_recorded_file): never a path out of the recorded command line, never one
 * relative to the current directory, so an export works from anywhere and copies nothing else.
 * A file that changed is skipped with a line saying so, and what needs it is not written.
 *
 *   the run trained with                  the export writes
 *   --vocab-file, --merge-file            vocab.json, merges.txt (the files), tokenizer.json: the
 *   (GPT2BPETokenizer)                    byte-level BPE as GPT2TokenizerFast serializes it (see
 *                                         below), special_tokens_map.json and tokenizer_config.json
 *                                         (GPT2Tokenizer: <|endoftext|> is bos, eos and unk)
 *   --tokenizer-name-or-path DIR or FILE  tokenizer.json (the file); the directory's
 *   (PretrainedFromHF)                    special_tokens_map.json and tokenizer_config.json (the
 *                                         files, where recorded), else written:
 *                                         PreTrainedTokenizerFast and the special tokens found
 *   BERT's vocab.txt                      hfbert.c: vocab.txt, tokenizer.json (WordPiece), ...
 *
 * The end of document is train's and tokenize's: <|endoftext|>'s id in vocab.json (Megatron's
 * GPT2BPETokenizer), or the eos_token special_tokens_map.json (else tokenizer_config.json) names,
 * else the first of </s>, <|endoftext|>, <eos> the tokenizer has.  It is the export's eos; bos
 * is the named bos_token, else <s> (BLOOM's), else the eos (GPT-2's convention: one
 * <|endoftext|>); pad the named pad_token, else <pad> or [PAD] where the tokenizer has it; none
 * for GPT-2, as HF's.
 *
 * GPT2TokenizerFast's tokenizer.json (transformers' GPT2Converter over tokenizers' serde):
 * no normalizer; ByteLevel pre-tokenizer (add_prefix_space false, trim_offsets true, GPT-2's
 * regex); ByteLevel post-processor (trim_offsets false) and decoder; model BPE with the vocab in
 * id order, the merges as "a b" strings in file order (read by every tokenizers release; 0.20
 * and later also write [a, b] pairs), no unk, no dropout, empty prefix and suffix; and
 * <|endoftext|> as a special added token.  HF then matches a literal "<|endoftext|>" in text as
 * that token, where Megatron's GPT2BPETokenizer (and tokenize --vocab-file) spells it out. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "file.h"
#include "msg.h"
#include "ckpt-merge-tp/hf_int.h"
#include "ckpt-merge-tp/hfexport.h"
#include "xalloc.h"

static int copy_file(const char *src, const char *dir, const char *name, char *err, size_t errlen)
{
	char path[4200], *data;
	size_t len;
	if (file_read_all(src, &data, &len, err, errlen) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int rc = file_write_atomic(path, data, len, 0644, err, errlen);
	free(data);
	return rc;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

int hf_recorded_file(const struct sh_ckpt *in, const char *role, int quiet, char **data,
		     size_t *len, char *err, size_t errlen)
{
	json_t *files = json_object_get(json_object_get(in->manifest, "tokenizer"), "files"), *f;
	const char *path = NULL, *sum = NULL;
	json_int_t size = -1;
	size_t i;
	json_array_foreach(files, i, f) {
		const char *r = json_string_value(json_object_get(f, "role"));
		if (r && strcmp(r, role) == 0) {
			path = json_string_value(json_object_get(f, "path"));
			sum = json_string_value(json_object_get(f, "sha256"));
			size = json_is_integer(json_object_get(f, "size"))
				       ? json_integer_value(json_object_get(f, "size")) : -1;
			break;
		}
	}
	if (!f)
		return 0;
	char why[300] = "", hex[65];
	struct stat sb;
	char *b = NULL;
	ssize_t got = 0;
	int fd = -1;
	if (!path || path[0] != '/' || !sum || strlen(sum) != 64 || size < 0) {
		snprintf(why, sizeof why, "the record lacks an absolute path, a size or a sha256");
	} else if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
		snprintf(why, sizeof why, "%s", errno == ELOOP ? "a symbolic link, not the file train "
			 "read" : strerror(errno));
	} else if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		snprintf(why, sizeof why, "not a regular file");
	} else if (sb.st_size != size) {
		snprintf(why, sizeof why, "%lld bytes, the manifest records %lld: not the file train "
			 "read", (long long)sb.st_size, (long long)size);
	} else if (!(b = malloc((size_t)size + 1))) {
		close(fd);
		return xalloc_err_in(err, errlen, path, "the recorded tokenizer file", (size_t)size + 1);
	} else {
		size_t off = 0;
		while (off < (size_t)size && (got = read(fd, b + off, (size_t)size - off)) > 0)
			off += (size_t)got;
		if (got < 0 || off < (size_t)size)
			snprintf(why, sizeof why, "%s", got < 0 ? strerror(errno) : "shorter than it was");
		else if (digest_sha256_hex(b, off, hex), strcmp(hex, sum) != 0)
			snprintf(why, sizeof why, "its sha256 is not the one the manifest records: not "
				 "the file train read");
	}
	if (fd >= 0)
		close(fd);
	if (why[0]) {
		free(b);
		if (!quiet)
			warn("warning: the checkpoint's %s %s: %s; not copied (give it with "
			     "--tokenizer-files)", role, path ? path : "(no path)", why);
		return 0;
	}
	b[size] = 0;
	*data = b, *len = (size_t)size;
	return 1;
}

/* Tokenizer files: those the manifest records (lmtk-checkpoint(5)) where they are still the
 * files train read, then the caller's.  Never a path from the recorded command line ("args"):
 * whoever edits a checkpoint could name any file the exporting user can read. */

/* Does the manifest record a file in this role (whether or not it is still there)? */
static int recorded(const struct sh_ckpt *in, const char *role)
{
	json_t *files = json_object_get(json_object_get(in->manifest, "tokenizer"), "files"), *f;
	size_t i;
	json_array_foreach(files, i, f) {
		const char *r = json_string_value(json_object_get(f, "role"));
		if (r && strcmp(r, role) == 0)
			return 1;
	}
	return 0;
}

static int put(const char *dir, const char *name, const char *data, size_t len, char *err,
	       size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return file_write_atomic(path, data, len, 0644, err, errlen);
}

/* A token's id in a tokenizer.json: an added token's, else the model's vocab's ({token: id},
 * or Unigram's [[token, score], ...] by position).  -1 when it has none. */
static int token_id(json_t *tj, const char *s)
{
	json_t *e, *vocab = json_object_get(json_object_get(tj, "model"), "vocab");
	size_t i;
	if (!s)
		return -1;
	json_array_foreach(json_object_get(tj, "added_tokens"), i, e)
		if (json_is_string(json_object_get(e, "content")) &&
		    strcmp(json_string_value(json_object_get(e, "content")), s) == 0 &&
		    json_is_integer(json_object_get(e, "id")))
			return (int)json_integer_value(json_object_get(e, "id"));
	if (json_is_object(vocab))
		return json_is_integer(json_object_get(vocab, s))
			       ? (int)json_integer_value(json_object_get(vocab, s)) : -1;
	json_array_foreach(vocab, i, e) {
		const char *t = json_string_value(json_is_array(e) ? json_array_get(e, 0) : e);
		if (t && strcmp(t, s) == 0)
			return (int)i;
	}
	return -1;
}

/* The content of `key` ("eos_token") in a special_tokens_map.json or tokenizer_config.json:
 * a string or {"content": ...}. */
static const char *named_token(json_t *j, const char *key)
{
	json_t *e = json_object_get(j, key);
	if (json_is_object(e))
		e = json_object_get(e, "content");
	return json_string_value(e);
}

/* special_tokens_map.json / tokenizer_config.json's token entries, the tokens that exist */
static void set_tokens(json_t *j, const char *const tok[4])
{
	static const char *keys[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
	for (int k = 0; k < 4; k++)
		if (tok[k])
			json_object_set_new(j, keys[k], json_string(tok[k]));
}

static int write_json(const char *dir, const char *name, json_t *j, char *err, size_t errlen)
{
	return hf_write_json(dir, name, j, JSON_INDENT(2) | JSON_PRESERVE_ORDER, err, errlen) < 0
		       ? EXIT_FAILED : 0;
}

struct vocab_entry {
	json_int_t id;
	const char *token;
};

static int by_id(const void *a, const void *b)
{
	const struct vocab_entry *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* GPT2TokenizerFast's tokenizer.json from vocab.json (parsed) and merges.txt (the file's bytes),
 * or NULL + why (what is wrong with the files) / out of memory (xalloc_die). */
static json_t *gpt2_tokenizer_json(json_t *vocab, const char *merges, size_t mlen, int eos,
				   int model_vocab, char *why, size_t whylen)
{
	size_t n = json_object_size(vocab), k = 0;
	struct vocab_entry *v = malloc((n ? n : 1) * sizeof *v);
	const char *key;
	json_t *val;
	if (!v)
		xalloc_die("the vocab.json entries", n * sizeof *v);
	json_object_foreach(vocab, key, val) {
		if (!json_is_integer(val) || json_integer_value(val) < 0 ||
		    json_integer_value(val) >= model_vocab) {
			errf(why, whylen, "vocab.json: token \"%.40s\" has id %s, not one of the model's "
			     "0 to %d", key, json_is_integer(val) ? "out of range" : "that is no integer",
			     model_vocab - 1);
			free(v);
			return NULL;
		}
		v[k++] = (struct vocab_entry){json_integer_value(val), key};
	}
	qsort(v, k, sizeof *v, by_id);
	json_t *ordered = json_object(), *mlist = json_array();
	for (size_t i = 0; i < k; i++)
		json_object_set_new(ordered, v[i].token, json_integer(v[i].id));
	free(v);
	/* merges.txt: "#version" first, then one "a b" a line, as tokenize and HF read it */
	int lineno = 0;
	for (const char *p = merges, *end = merges + mlen; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end;
		size_t len = (size_t)(e - p);
		lineno++;
		if (len && p[len - 1] == '\r')
			len--;
		if (len && !(lineno == 1 && len >= 8 && memcmp(p, "#version", 8) == 0)) {
			const char *sp = memchr(p, ' ', len);
			if (!sp || sp == p || sp == p + len - 1 || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - p))) {
				errf(why, whylen, "merges.txt:%d: not two tokens separated by one space", lineno);
				json_decref(ordered);
				json_decref(mlist);
				return NULL;
			}
			json_array_append_new(mlist, json_stringn(p, len));
		}
		p = nl ? nl + 1 : end;
	}
	json_t *added = json_array();
	if (eos >= 0)
		json_array_append_new(added, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", eos,
						       "content", "<|endoftext|>", "single_word", 0,
						       "lstrip", 0, "rstrip", 0, "normalized", 1,
						       "special", 1));
	json_t *j = json_pack("{s:s,s:n,s:n,s:o,s:n,"
			      "s:{s:s,s:b,s:b,s:b},s:{s:s,s:b,s:b,s:b},s:{s:s,s:b,s:b,s:b},"
			      "s:{s:s,s:n,s:n,s:s,s:s,s:b,s:b,s:b,s:o,s:o}}",
			      "version", "1.0", "truncation", "padding", "added_tokens", added,
			      "normalizer",
			      "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0,
			      "trim_offsets", 1, "use_regex", 1,
			      "post_processor", "type", "ByteLevel", "add_prefix_space", 1,
			      "trim_offsets", 0, "use_regex", 1,
			      "decoder", "type", "ByteLevel", "add_prefix_space", 1,
			      "trim_offsets", 1, "use_regex", 1,
			      "model", "type", "BPE", "dropout", "unk_token",
			      "continuing_subword_prefix", "", "end_of_word_suffix", "",
			      "fuse_unk", 0, "byte_fallback", 0, "ignore_merges", 0,
			      "vocab", ordered, "merges", mlist);
	if (!j)
		xalloc_die("the tokenizer.json document", 0);
	return j;
}

/* --vocab-file and --merge-file: the two files, and GPT2TokenizerFast's files from them. */
static int gpt2_files(const struct sh_ckpt *in, const char *dir, struct hf_special *sp, char *err,
		      size_t errlen)
{
	char *vj = NULL, *mt = NULL, why[512];
	size_t vl = 0, ml = 0;
	int rv, rm, rc = 0;
	if ((rv = hf_recorded_file(in, "vocab-file", 0, &vj, &vl, err, errlen)) < 0)
		return EXIT_FAILED;
	if ((rm = hf_recorded_file(in, "merge-file", 0, &mt, &ml, err, errlen)) < 0) {
		free(vj);
		return EXIT_FAILED;
	}
	if ((rv && put(dir, "vocab.json", vj, vl, err, errlen) < 0) ||
	    (rm && put(dir, "merges.txt", mt, ml, err, errlen) < 0)) {
		rc = EXIT_FAILED;
		goto out;
	}
	if (!rv)
		goto out;   /* said why */
	json_error_t je;
	json_t *vocab = json_loadb(vj, vl, 0, &je);
	if (!json_is_object(vocab)) {
		warn("warning: the checkpoint's vocab-file: %s%s: no tokenizer.json written", vocab ?
		     "not an object of token: id" : je.text, vocab ? "" : " (line and column in "
		     "the file)");
		json_decref(vocab);
		goto out;
	}
	/* Megatron's GPT2BPETokenizer: the end of document is <|endoftext|> */
	json_t *e = json_object_get(vocab, "<|endoftext|>");
	if (json_is_integer(e) && json_integer_value(e) >= 0 && json_integer_value(e) < in->m.vocab)
		sp->eos = sp->bos = (int)json_integer_value(e);
	else
		warn("warning: the checkpoint's vocab-file has no <|endoftext|> (the end of "
		     "document): config.json names no eos_token_id");
	if (!rm) {
		warn("warning: no merge-file to go with the vocab-file: no tokenizer.json written");
		json_decref(vocab);
		goto out;
	}
	json_t *tj = gpt2_tokenizer_json(vocab, mt, ml, sp->eos, in->m.vocab, why, sizeof why);
	json_decref(vocab);
	if (!tj) {
		warn("warning: the checkpoint's %s: no tokenizer.json written", why);
		goto out;
	}
	rc = write_json(dir, "tokenizer.json", tj, err, errlen);
	json_decref(tj);
	const char *eos = sp->eos >= 0 ? "<|endoftext|>" : NULL;
	const char *tok[4] = {eos, eos, eos, NULL};
	json_t *map = json_object(), *cfg = json_pack("{s:s,s:b,s:b,s:s,s:b,s:I}",
						      "tokenizer_class", "GPT2Tokenizer",
						      "add_prefix_space", 0, "add_bos_token", 0,
						      "errors", "replace",
						      "clean_up_tokenization_spaces", 0,
						      "model_max_length", (json_int_t)in->m.max_pos);
	set_tokens(map, tok);
	set_tokens(cfg, tok);
	if (!rc)
		rc = write_json(dir, "special_tokens_map.json", map, err, errlen);
	if (!rc)
		rc = write_json(dir, "tokenizer_config.json", cfg, err, errlen);
	json_decref(map);
	json_decref(cfg);
out:
	free(vj);
	free(mt);
	return rc;
}

/* --tokenizer-name-or-path: the run's tokenizer.json and, where the directory had them, its
 * special_tokens_map.json and tokenizer_config.json; those not recorded are written. */
static int hf_files(const struct sh_ckpt *in, const char *dir, struct hf_special *sp, char *err,
		    size_t errlen)
{
	char *tj = NULL, *map = NULL, *cfg = NULL;
	size_t tl = 0, mapl = 0, cfgl = 0;
	int rc = 0, rt, rmap, rcfg;
	if ((rt = hf_recorded_file(in, "tokenizer-name-or-path", 0, &tj, &tl, err, errlen)) < 0)
		return EXIT_FAILED;
	if (!rt)
		return 0;   /* said why */
	if ((rmap = hf_recorded_file(in, "special-tokens-map", 0, &map, &mapl, err, errlen)) < 0 ||
	    (rcfg = hf_recorded_file(in, "tokenizer-config", 0, &cfg, &cfgl, err, errlen)) < 0) {
		rc = EXIT_FAILED;
		goto out;
	}
	json_t *tok = json_loadb(tj, tl, 0, NULL);
	json_t *jm = rmap ? json_loadb(map, mapl, 0, NULL) : NULL;
	json_t *jc = rcfg ? json_loadb(cfg, cfgl, 0, NULL) : NULL;
	/* the special tokens: named (the map first, as train and tokenize read them), else found */
	const char *name[4] = {NULL, NULL, NULL, NULL};   /* bos, eos, unk, pad */
	static const char *keys[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
	for (int k = 0; k < 4; k++)
		if (!(name[k] = named_token(jm, keys[k])))
			name[k] = named_token(jc, keys[k]);
	for (const char *const *c = (const char *const[]){"</s>", "<|endoftext|>", "<eos>", NULL};
	     !name[1] && *c; c++)
		if (token_id(tok, *c) >= 0)
			name[1] = *c;
	if (!name[0] && token_id(tok, "<s>") >= 0)   /* BLOOM's: <s> 1, </s> 2 */
		name[0] = "<s>";
	if (!name[0])
		name[0] = name[1];
	if (!name[2])
		name[2] = json_string_value(json_object_get(json_object_get(tok, "model"), "unk_token"));
	for (const char *const *c = (const char *const[]){"<pad>", "[PAD]", NULL}; !name[3] && *c; c++)
		if (token_id(tok, *c) >= 0)
			name[3] = *c;
	int *ids[4] = {&sp->bos, &sp->eos, &sp->unk, &sp->pad};
	for (int k = 0; k < 4; k++) {
		int id = token_id(tok, name[k]);
		if (id >= in->m.vocab)
			id = -1;
		if (id < 0)
			name[k] = NULL;
		*ids[k] = id;
	}
	if (!tok)
		warn("warning: the checkpoint's tokenizer-name-or-path is not JSON: copied, but its "
		     "special tokens are not known");
	else if (sp->eos < 0)
		warn("warning: the checkpoint's tokenizer names no eos_token and has none of </s>, "
		     "<|endoftext|>, <eos>: config.json names no eos_token_id");
	rc = put(dir, "tokenizer.json", tj, tl, err, errlen) < 0 ? EXIT_FAILED : 0;
	if (!rc && rmap) {
		rc = put(dir, "special_tokens_map.json", map, mapl, err, errlen) < 0 ? EXIT_FAILED : 0;
	} else if (!rc) {
		json_t *m = json_object();
		set_tokens(m, name);
		rc = write_json(dir, "special_tokens_map.json", m, err, errlen);
		json_decref(m);
	}
	if (!rc && rcfg) {
		rc = put(dir, "tokenizer_config.json", cfg, cfgl, err, errlen) < 0 ? EXIT_FAILED : 0;
	} else if (!rc) {
		json_decref(jc);
		jc = json_pack("{s:s,s:b,s:I}", "tokenizer_class", "PreTrainedTokenizerFast",
			       "clean_up_tokenization_spaces", 0,
			       "model_max_length", (json_int_t)in->m.max_pos);
		set_tokens(jc, name);
		rc = write_json(dir, "tokenizer_config.json", jc, err, errlen);
	}
	json_decref(tok);
	json_decref(jm);
	json_decref(jc);
out:
	free(tj);
	free(map);
	free(cfg);
	return rc;
}

int hf_tokenizer(const struct sh_ckpt *in, const struct hf_opts *o, const char *dir,
		 struct hf_special *sp, char *err, size_t errlen)
{
	int rc = 0;
	sp->bos = sp->eos = sp->unk = sp->pad = -1;
	if (!json_is_object(json_object_get(in->manifest, "tokenizer"))) {
		if (!o->ntokenizer_files)
			warn("warning: the checkpoint's manifest records no tokenizer files (saved by "
			     "an older train, or converted): no tokenizer copied and config.json names "
			     "no eos_token_id; give them with --tokenizer-files");
	} else if (in->m.type == LT_BERT) {
		rc = hf_bert_tokenizer(in, dir, err, errlen);
	} else if (recorded(in, "tokenizer-name-or-path")) {   /* what train reads first */
		rc = hf_files(in, dir, sp, err, errlen);
	} else {
		rc = gpt2_files(in, dir, sp, err, errlen);
	}
	if (rc)
		return rc;
	for (int i = 0; i < o->ntokenizer_files; i++)
		if (copy_file(o->tokenizer_files[i], dir, base_name(o->tokenizer_files[i]), err,
			      errlen) < 0)
			return EXIT_FAILED;
	return 0;
}
