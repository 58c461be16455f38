#include "train/data/vocab.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "msg.h"
#include "xalloc.h"

static json_t *load(const char *path, int *rc, char *err, size_t errlen)
{
	json_error_t je;
	struct stat sb;
	json_t *j;

	if (stat(path, &sb) < 0) {
		*rc = errno == ENOENT ? VOCAB_MISSING : VOCAB_BAD;
		errf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	j = json_load_file(path, JSON_DECODE_ANY, &je);
	if (!j) {
		*rc = VOCAB_BAD;
		errf(err, errlen, "%s:%d: %s", path, je.line, je.text);
	}
	return j;
}

int vocab_gpt2(const char *path, int64_t *n, char *err, size_t errlen)
{
	int rc = 0;
	json_t *j = load(path, &rc, err, errlen);
	if (!j)
		return rc;
	if (!json_is_object(j) || json_object_size(j) == 0) {
		json_decref(j);
		errf(err, errlen, "%s: not a GPT-2 vocab.json (an object of token: id)", path);
		return VOCAB_BAD;
	}
	*n = (int64_t)json_object_size(j);
	json_decref(j);
	return 0;
}

/* Is `content` a token of the model's vocab: a {token: id} object, or Unigram's
 * [[token, score], ...]? */
static int in_vocab(json_t *vocab, const char *content)
{
	size_t i;
	json_t *e;
	if (json_is_object(vocab))
		return json_object_get(vocab, content) != NULL;
	json_array_foreach(vocab, i, e) {
		const char *t = json_string_value(json_is_array(e) ? json_array_get(e, 0) : e);
		if (t && strcmp(t, content) == 0)
			return 1;
	}
	return 0;
}

int vocab_hf(const char *path, int64_t *n, char *err, size_t errlen)
{
	struct stat sb;
	char *file = NULL;
	json_t *j, *vocab, *added, *e;
	size_t i;
	int rc = 0;

	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		if (asprintf(&file, "%s/tokenizer.json", path) < 0)
			xalloc_die("the tokenizer.json path", 0);
		path = file;
	}
	j = load(path, &rc, err, errlen);
	if (!j) {
		/* a directory without tokenizer.json is there, just not usable */
		if (file && rc == VOCAB_MISSING)
			rc = VOCAB_BAD;
		free(file);
		return rc;
	}
	vocab = json_object_get(json_object_get(j, "model"), "vocab");
	if (!json_is_object(vocab) && !json_is_array(vocab)) {
		json_decref(j);
		errf(err, errlen, "%s: no model.vocab: not a Hugging Face tokenizer.json", path);
		free(file);
		return VOCAB_BAD;
	}
	*n = (int64_t)(json_is_object(vocab) ? json_object_size(vocab) : json_array_size(vocab));
	added = json_object_get(j, "added_tokens");
	json_array_foreach(added, i, e) {
		const char *content = json_string_value(json_object_get(e, "content"));
		if (content && !in_vocab(vocab, content))
			(*n)++;
	}
	json_decref(j);
	free(file);
	return 0;
}

int vocab_eod_gpt2(const char *path, int64_t *id, char *err, size_t errlen)
{
	int rc = 0;
	json_t *j = load(path, &rc, err, errlen), *e;
	if (!j)
		return rc;
	e = json_object_get(j, "<|endoftext|>");
	if (!json_is_integer(e)) {
		json_decref(j);
		errf(err, errlen, "%s has no <|endoftext|>: Megatron's GPT2BPETokenizer takes it as the "
		     "end of document", path);
		return VOCAB_BAD;
	}
	*id = json_integer_value(e);
	json_decref(j);
	return 0;
}

/* The eos_token of special_tokens_map.json or tokenizer_config.json in dir: a string or
 * {"content": ...}.  NULL when neither names one. */
static char *eos_content(const char *dir)
{
	static const char *files[] = {"special_tokens_map.json", "tokenizer_config.json"};
	for (int f = 0; f < 2; f++) {
		char *p, *out = NULL;
		json_t *j, *e;
		if (asprintf(&p, "%s/%s", dir, files[f]) < 0)
			xalloc_die("a special-tokens file's path", 0);
		j = json_load_file(p, 0, NULL);
		free(p);
		e = json_object_get(j, "eos_token");
		if (json_is_object(e))
			e = json_object_get(e, "content");
		if (json_is_string(e))
			out = strdup(json_string_value(e));
		json_decref(j);
		if (out)
			return out;
	}
	return NULL;
}

int vocab_eod_hf(const char *path, int64_t *id, char *err, size_t errlen)
{
	struct stat sb;
	char *file = NULL, *eos;
	json_t *j, *vocab, *added, *e;
	size_t i;
	int rc = 0;

	if (stat(path, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return errf(err, errlen, "%s: the end-of-document token is the tokenizer's eos_token, "
			    "named in special_tokens_map.json: give --tokenizer-name-or-path the directory "
			    "holding it", path), VOCAB_BAD;
	if (!(eos = eos_content(path)))
		return errf(err, errlen, "%s: neither special_tokens_map.json nor tokenizer_config.json "
			    "names an eos_token (the end-of-document token)", path), VOCAB_BAD;
	if (asprintf(&file, "%s/tokenizer.json", path) < 0)
		xalloc_die("the tokenizer.json path", 0);
	j = load(file, &rc, err, errlen);
	rc = VOCAB_BAD;
	added = json_object_get(j, "added_tokens");
	json_array_foreach(added, i, e)
		if (json_is_string(json_object_get(e, "content")) &&
		    strcmp(json_string_value(json_object_get(e, "content")), eos) == 0 &&
		    json_is_integer(json_object_get(e, "id"))) {
			*id = json_integer_value(json_object_get(e, "id"));
			rc = 0;
		}
	vocab = json_object_get(json_object_get(j, "model"), "vocab");
	if (rc && json_is_integer(json_object_get(vocab, eos))) {
		*id = json_integer_value(json_object_get(vocab, eos));
		rc = 0;
	}
	if (rc && j)
		errf(err, errlen, "%s: the eos_token %s is not in the vocabulary", file, eos);
	json_decref(j);
	free(file);
	free(eos);
	return rc;
}
