/* layout - the tensors of an lmtk checkpoint and how they lie across TP ranks and PP stages.
 *
 * The table is rebuilt from the manifest's "model" object, in the order and with the names of
 * train's model table (src/train/model: model.c, gpt.c, bert.c, t5.c; lmtk-checkpoint(5),
 * "Tensors").
 * train's model code cannot be linked here (it drags in the compute backends), so the table is
 * repeated, and the tests prove the two agree: a checkpoint written by train is read, re-split
 * and written back byte for byte.
 *
 * The model type.  "model"."model_type" names the architecture ("gpt" when absent: checkpoints
 * from before BERT are GPTs); each type is one entry of a table in layout.c - its name, its
 * manifest fields, the function that lists its tensors - so another architecture (T5) is one
 * more entry there and in enum lt_type, not a copy of this module.  A type that no entry names
 * is refused (lt_from_manifest fails naming the type and the file; the programs exit 2).
 *   gpt   word embeddings, position embeddings (learned only), embedding layer norm
 *         (--embed-layernorm only), twelve tensors per layer, final layer norm
 *   bert  word, position and token-type embeddings (num_tokentypes > 0), twelve tensors per
 *         layer, final layer norm, then the heads in train's order (bert.c): pooler (with the
 *         binary head only), the LM head's dense, layer norm and vocab-parallel bias, the binary
 *         head (binary_head only)
 *   t5    word and position embeddings; the encoder's layers (encoder.layers.L.*, twelve each)
 *         and encoder.final_layernorm; the decoder's (decoder.layers.L.*: twelve, then the
 *         cross-attention's inter_attention.query and .key_value - column-parallel, key_value's
 *         rows per head [k, v] - inter_attention.dense - row-parallel - and
 *         post_inter_attention_layernorm); decoder.final_layernorm; the LM head's
 *         vocab-parallel lm_head.bias.  Never split over pipeline stages (train refuses), so
 *         its layouts are TP only.
 *
 * Each tensor knows its split over TP (Megatron's tensor-parallel layout, shared/spec
 * megatron-train.md): vocab-parallel and column-parallel tensors are cut along dim 0, row-parallel
 * ones along dim 1, the rest (layer norms, row-parallel biases, position and token-type
 * embeddings, BERT's pooler, LM-head dense and layer norm, binary head) are whole on every rank
 * and must be equal.  BERT's LM-head bias is vocab-parallel, as the logits it is added to.  Over
 * PP, a stage holds its own layers under their global indices; the embeddings live on the first
 * stage, the word embeddings also on the last (the tied output layer), the final layer norm and
 * the heads on the last.  Which stage holds which layer is read
 * from the shards themselves (shards.h); lt_stage_of_layer() is only how a NEW layout is cut,
 * as train's plan cuts it (src/train/plan/plan.c, DeepSpeed's --pp-partition-method): with
 * 'type:transformer' the L layers are the units, with 'type:transformer|embedding' the input and
 * the output embedding are one more unit each, at both ends; every stage gets ceil(units/PP)
 * consecutive units, the last what remains.  Within a shard the order is train's: on the first
 * stage the embeddings, then the layers, then (last stage) the final layer norm and the heads,
 * and on a last stage that is not the first the word embeddings' copy after them. */
#ifndef CKPT_LAYOUT_H
#define CKPT_LAYOUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum lt_split { LT_NONE, LT_COLUMN, LT_ROW, LT_VOCAB };   /* train/model/model.h's enum split */
enum lt_place { LT_FIRST, LT_LAYER, LT_LAST, LT_EMBED };  /* EMBED: first and last stage */

/* The per-layer tensors, in table order (train/model/model.h's LN1_W ...). */
enum { LT_LN1_W, LT_LN1_B, LT_QKV_W, LT_QKV_B, LT_PROJ_W, LT_PROJ_B, LT_LN2_W, LT_LN2_B,
       LT_FC_W, LT_FC_B, LT_FCPROJ_W, LT_FCPROJ_B, LT_LAYER_TENSORS };

/* What a shard holds for each parameter: the fp32 master weights, then Adam's two moments. */
enum { LT_GROUPS = 3 };
extern const char *const lt_group_prefix[LT_GROUPS];   /* "", "exp_avg.", "exp_avg_sq." */
extern const char *const lt_group_name[LT_GROUPS];     /* "weight", "exp_avg", "exp_avg_sq" */

struct lt_tensor {
	char name[64];
	int ndim;
	int64_t shape[2];       /* the full (unsplit) shape; a 1-D tensor has shape[1] == 1 */
	enum lt_split split;
	enum lt_place place;
	int layer, which;       /* LT_LAYER: global layer index and LT_LN1_W...; else -1 */
};

/* The architectures (model.model_type), each a row of layout.c's table. */
enum lt_type { LT_GPT, LT_BERT, LT_T5 };
/* A T5 decoder layer's tensors: the twelve, then the cross-attention's eight */
enum { LT_XLAYER_TENSORS = LT_LAYER_TENSORS + 8 };

struct lt_model {
	enum lt_type type;
	const char *type_name;  /* "gpt", "bert", "t5" */
	int layers, hidden, heads, ffn, max_pos, vocab, padded_vocab;
	int alibi, embed_ln;
	/* --apply-residual-connection-post-layernorm: 1 yes, 0 no, -1 the manifest does not say
	 * (older checkpoints; an exporter looks at the recorded command line) */
	int post_ln;
	/* BERT: token types (0: none), the pooler and binary head, the LM head's tanh GeLU
	 * (--openai-gelu: 1 yes, 0 no, -1 unrecorded as post_ln) */
	int num_tokentypes, binary_head, openai_gelu;
	double eps, init_std, hidden_dropout, attention_dropout;
	struct lt_tensor *t;
	int n;
	/* table indices, -1 where the model has none */
	int wte, wpe, eln_w, eln_b, tte, layer0, lnf_w, lnf_b;
	int pool_w, pool_b, hd_w, hd_b, hd_ln_w, hd_ln_b, lm_bias, bin_w, bin_b;   /* BERT's heads */
	/* T5: layer0 is the encoder's first layer, lnf_* the decoder's final layer norm, lm_bias
	 * the LM head's bias */
};

/* Builds the table from the manifest's "model" object.  0, or -1 + err naming the field (or
 * the unknown model type) and `where`. */
int lt_from_manifest(struct lt_model *m, json_t *model, const char *where, char *err,
		     size_t errlen);
/* The same model with another padded vocabulary (re-padding for another TP). */
int lt_copy(struct lt_model *dst, const struct lt_model *src, int padded_vocab);
void lt_free(struct lt_model *m);

/* Can the model be cut into tp ranks?  0, or -1 + err saying which size does not divide. */
int lt_check_tp(const struct lt_model *m, int tp, char *err, size_t errlen);
/* Megatron's padded vocabulary: the smallest multiple of 128*tp >= vocab; with
 * --make-vocab-size-divisible-by D, of D*tp (-1: past INT32_MAX). */
int lt_megatron_padded_vocab(int vocab, int tp);
int lt_padded_vocab(int vocab, int divisible_by, int tp);

/* Table index of a parameter name (without group prefix), or -1. */
int lt_find(const struct lt_model *m, const char *name);
/* Splits "exp_avg.NAME" into its group and table index; -1 if it is not a tensor of the model. */
int lt_parse(const struct lt_model *m, const char *name, int *group);

/* The shape of rank r's part of t at tp ranks (r does not matter: the parts are equal). */
void lt_local_shape(const struct lt_tensor *t, int tp, int64_t out[2]);
size_t lt_numel(const int64_t shape[2]);

/* The stage that holds layer l when `layers` layers are cut into pp stages; embedding: the
 * embeddings count as units ('type:transformer|embedding'). */
int lt_stage_of_layer(int l, int layers, int pp, int embedding);
/* Does stage s of pp hold tensor t in a new layout? */
int lt_on_stage(const struct lt_model *m, const struct lt_tensor *t, int s, int pp, int embedding);
/* The table indices stage s holds, in train's order within a shard (holds(ctx, t) says which
 * tensors the stage has).  Returns how many were put in order (room for m->n + 1). */
int lt_stage_order(const struct lt_model *m, int s, int (*holds)(const void *ctx, int t),
		   const void *ctx, int *order);

#endif
