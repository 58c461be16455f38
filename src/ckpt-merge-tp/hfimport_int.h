/* hfimport_int - what hfimport.c (the tensors, the source, the checkpoint) and hfconfig.c
 * (config.json, the class, the model's flags, the tokenizer record) share. */
#ifndef CKPT_MERGE_TP_HFIMPORT_INT_H
#define CKPT_MERGE_TP_HFIMPORT_INT_H

#include <jansson.h>
#include <stddef.h>

enum cls { C_GPT2, C_BLOOM, C_BERT_PT, C_BERT_MLM };
extern const char *const hfc_class_names[];   /* by enum cls */

/* DIR/name, which must be a regular file inside DIR once links are resolved (path: DIR/name).
 * 1 there, 0 not there, -1 + err (a link out, a dangling link, not a file: bad input). */
int hfc_confined(const char *dir, const char *name, char *path, size_t n, char *err,
		 size_t errlen);
/* DIR/name as a JSON object (at most 64 MiB), confined.  NULL + *rc (EXIT_USAGE, EXIT_FAILED)
 * and err; a file not there is an error only when required. */
json_t *hfc_read_json(const char *dir, const char *name, int required, int *rc, char *err,
		      size_t errlen);

/* config.json and where to say what is wrong with it */
struct cfgr {
	json_t *j;
	const char *path;
	char *err;
	size_t errlen;
};

/* The class: "architectures" (one name), else "model_type".  0, or -1 + err. */
int hfc_class(struct cfgr *c, enum cls *k);
/* The manifest's "model" object from config.json, every number range-checked; zero_types: the
 * files hold one all-zero token-type row (a BERT without token types).  NULL + err. */
json_t *hfc_model(struct cfgr *c, enum cls k, int divisible_by, int zero_types,
		  long long *hidden, long long *heads);
/* The manifest's "tokenizer" record of the tokenizer files dir has (NULL: none), as train
 * records its own (tokrec.h).  0, or an exit status + err (a link out is refused). */
int hfc_tokenizer(const char *dir, enum cls k, json_t **rec, char *err, size_t errlen);

#endif
