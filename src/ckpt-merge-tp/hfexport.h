/* hfexport - a checkpoint's weights as a Hugging Face transformers model directory.
 *
 * Two classes hold what train trains: GPT2LMHeadModel (learned positions, no embedding layer
 * norm) and BloomForCausalLM (ALiBi, an embedding layer norm, a 4h MLP).  Names, shapes and the
 * config keys are those of transformers' models/gpt2/modeling_gpt2.py + configuration_gpt2.py
 * and models/bloom/modeling_bloom.py + configuration_bloom.py:
 *
 *   lmtk                                  GPT2LMHeadModel (transformer.)     BloomForCausalLM (transformer.)
 *   word_embeddings.weight [Vp,h]         wte.weight [V,h]                  word_embeddings.weight [V,h]
 *   position_embeddings.weight [P,h]      wpe.weight [P,h]                  -
 *   embed_layernorm.*                     -                                 word_embeddings_layernorm.*
 *   layers.i.input_layernorm.*            h.i.ln_1.*                        h.i.input_layernorm.*
 *   ...attention.query_key_value.w [3h,h] h.i.attn.c_attn.weight [h,3h] (1) h.i.self_attention.query_key_value.*
 *   ...attention.dense.weight [h,h]       h.i.attn.c_proj.weight (T)        h.i.self_attention.dense.*
 *   ...post_attention_layernorm.*         h.i.ln_2.*                        h.i.post_attention_layernorm.*
 *   ...mlp.dense_h_to_4h.weight [f,h]     h.i.mlp.c_fc.weight [h,f] (T)     h.i.mlp.dense_h_to_4h.*
 *   ...mlp.dense_4h_to_h.weight [h,f]     h.i.mlp.c_proj.weight [f,h] (T)   h.i.mlp.dense_4h_to_h.*
 *   final_layernorm.*                     ln_f.*                            ln_f.*
 *
 * GPT-2's Conv1D stores [in, out] (y = x W + b), the transpose (T) of Linear's [out, in], and its
 * c_attn output is split into q | k | v, i.e. [3, heads, head_dim], where Megatron's rows are
 * [heads, 3, head_dim]: (1) reorders the rows (and the bias) and transposes.  BLOOM splits its
 * fused qkv per head, Megatron's order, so it is copied as is.  The padded vocabulary rows are
 * dropped; the output layer is tied to the word embeddings (no lm_head.weight, as
 * save_pretrained writes it).  The optimizer state is not exported.
 *
 * Output: model.safetensors, or above max_shard bytes model-0000K-of-0000N.safetensors and
 * model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}), each file's header
 * carrying {"format": "pt"} (from_pretrained refuses safetensors without it); config.json and
 * generation_config.json with the tokenizer's eos/bos/pad ids; the tokenizer (hftok.c: from the
 * manifest's record of the files train read, tokenizer.json, tokenizer_config.json,
 * special_tokens_map.json and the source files), then the files the caller lists. */
#ifndef CKPT_HFEXPORT_H
#define CKPT_HFEXPORT_H

#include <stddef.h>

#include "progress.h"
#include "ckpt/shards.h"

struct hf_opts {
	int bf16;                         /* BF16 tensors (round to nearest even); else F32 */
	unsigned long long max_shard;     /* bytes per safetensors file */
	char **tokenizer_files;           /* copied under their own names */
	int ntokenizer_files;
	int average;                      /* replicated tensors: the mean of their copies */
};

/* Which class holds the model: "GPT2LMHeadModel", "BloomForCausalLM",
 * "MegatronBertForPreTraining", "MegatronBertForMaskedLM", or NULL + err why none. */
const char *hf_class(const struct sh_ckpt *in, char *err, size_t errlen);

/* Writes the model directory's files into dir (existing, empty).  0, or EXIT_USAGE (a tokenizer
 * file is missing) / EXIT_FAILED + err. */
int hf_export(const struct sh_ckpt *in, const struct hf_opts *o, const char *dir,
	      struct progress *pg, char *err, size_t errlen);

#endif
