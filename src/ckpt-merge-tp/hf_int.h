/* hf_int - what hfexport.c (the writer, GPT-2 and BLOOM) and hfbert.c (Megatron's BERT) share:
 * an exported tensor as a recipe over the checkpoint's tensors, and the small file helpers. */
#ifndef CKPT_MERGE_TP_HF_INT_H
#define CKPT_MERGE_TP_HF_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/shards.h"

enum hf_op {
	HF_COPY,      /* rows [0, rows) as they are */
	HF_T,         /* Linear [out,in] -> Conv1D [in,out] */
	HF_T_QKV,     /* the same, the out rows first reordered [heads,3,hd] -> [3,heads,hd] */
	HF_QKV,       /* a qkv bias reordered the same way */
	HF_QKV_PART,  /* one of q, k, v (part 0-2): its rows of every head, [heads,3,hd] -> [heads,hd] */
	HF_ZERO,      /* zeros (t is -1): a tensor the class has and the model has not */
};

struct hf_item {
	char name[96];
	int t;                  /* lmtk table index (-1: HF_ZERO) */
	enum hf_op op;
	int part;               /* HF_QKV_PART: 0 query, 1 key, 2 value */
	int ndim;
	int64_t shape[2];       /* as exported; 1-D: shape[1] == 1 */
	int file;               /* which safetensors file */
};

/* The model's switches that the manifest may not record (older checkpoints): the manifest's
 * field when it has one, else whether train's recorded command line has the flag. */
struct hf_switches {
	int post_ln;            /* --apply-residual-connection-post-layernorm */
	int openai_gelu;        /* --openai-gelu (BERT's LM head) */
};
void hf_switches_of(const struct sh_ckpt *in, struct hf_switches *s);

/* BERT (hfbert.c): the class or NULL + err; the items (malloc'd, *n); config.json; the
 * tokenizer files from the manifest's recorded vocab-file and tokenizer type (0, or an exit
 * status) */
const char *hf_bert_class(const struct sh_ckpt *in, char *err, size_t errlen);
struct hf_item *hf_bert_plan(const struct lt_model *m, int *n);
json_t *hf_bert_config(const struct sh_ckpt *in, const char *cls);
/* config.json's hidden_act: "gelu_new" (tanh) with --openai-gelu, else "gelu" (erf) */
const char *hf_bert_hidden_act(const struct sh_ckpt *in);
int hf_bert_tokenizer(const struct sh_ckpt *in, const char *dir, char *err, size_t errlen);

/* The tokenizer (hftok.c): its files into dir, from the manifest's record only, and the special
 * tokens' ids in *sp (-1: none known).  0, or an exit status + err. */
struct hf_opts;
struct hf_special {
	int bos, eos, unk, pad;
};
int hf_tokenizer(const struct sh_ckpt *in, const struct hf_opts *o, const char *dir,
		 struct hf_special *sp, char *err, size_t errlen);

/* helpers (hfexport.c) */
double hf_short_float(double v);   /* the shortest decimal that is the same float32 */
/* --flag's value in the recorded command line ("--flag V" or "--flag=V"): 0, or -1 */
int hf_arg_value(const char *args, const char *flag, char *out, size_t n);
int hf_arg_has(const char *args, const char *flag);   /* the word --flag is there */
int hf_write_json(const char *dir, const char *name, json_t *j, size_t flags, char *err,
		  size_t errlen);
/* (hftok.c) The bytes of the tokenizer file the manifest's "tokenizer" records as `role` (train's
 * "vocab-file", "merge-file", "tokenizer-name-or-path"; lmtk-checkpoint(5)), read from its
 * recorded path only while that is a regular file of the recorded size and SHA-256: 1 and
 * *data (malloc'd), 0 when not recorded or skipped (unless quiet, one line saying which and
 * why), -1 + err out of memory.  Never a path from "args". */
int hf_recorded_file(const struct sh_ckpt *in, const char *role, int quiet, char **data,
		     size_t *len, char *err, size_t errlen);

#endif
