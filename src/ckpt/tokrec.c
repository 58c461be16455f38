/* tokrec - see tokrec.h. */
#include "ckpt/tokrec.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "digest.h"
#include "msg.h"

/* quiet: a file that may be absent (the special-tokens files of a tokenizer directory) */
static void add(json_t *files, const char *role, const char *flag, const char *given,
		const char *inside, int quiet)
{
	char path[PATH_MAX + 32], abs[PATH_MAX], hex[65], why[PATH_MAX + 200];
	struct stat sb;
	uint64_t size;
	snprintf(path, sizeof path, "%s", given);
	if (stat(given, &sb) == 0 && S_ISDIR(sb.st_mode))   /* an HF tokenizer directory */
		snprintf(path, sizeof path, "%s/%s", given, inside ? inside : "tokenizer.json");
	if (!realpath(path, abs) || digest_sha256_file(abs, hex, &size, why, sizeof why) < 0) {
		if (!quiet)
			warn("warning: %s %s: cannot be read, so the checkpoints will not name it (an "
			     "export then needs --tokenizer-files)", flag, path);
		return;
	}
	json_array_append_new(files, json_pack("{s:s,s:s,s:I,s:s}", "role", role, "path", abs,
					       "size", (json_int_t)size, "sha256", hex));
}

char *tokrec_json(const char *type, const char *vocab_file, const char *merge_file,
		  const char *name_or_path)
{
	json_t *files = json_array(), *t = json_object();
	if (!files || !t)
		return NULL;
	struct stat sb;
	if (vocab_file)
		add(files, "vocab-file", "--vocab-file", vocab_file, NULL, 0);
	if (merge_file)
		add(files, "merge-file", "--merge-file", merge_file, NULL, 0);
	if (name_or_path) {
		add(files, "tokenizer-name-or-path", "--tokenizer-name-or-path", name_or_path,
		    "tokenizer.json", 0);
		/* where the eos token (train's end of document) and the other special tokens are named */
		if (stat(name_or_path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
			add(files, "special-tokens-map", "--tokenizer-name-or-path", name_or_path,
			    "special_tokens_map.json", 1);
			add(files, "tokenizer-config", "--tokenizer-name-or-path", name_or_path,
			    "tokenizer_config.json", 1);
		}
	}
	if (type)
		json_object_set_new(t, "type", json_string(type));
	json_object_set_new(t, "files", files);
	char *s = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(t);
	return s;
}
