#include "train/vocab.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "msg.h"

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
			die(EXIT_FAILED, "out of memory");
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
