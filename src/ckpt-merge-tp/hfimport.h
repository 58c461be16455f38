/* hfimport - a Hugging Face transformers model directory read as an lmtk checkpoint at
 * iteration 0 (ckpt-merge-tp --from hf), the inverse of hfexport.
 *
 * Three classes, by config.json's "architectures" (else "model_type"): GPT2LMHeadModel (also a
 * GPT2Model's files, whose names lack "transformer."), BloomForCausalLM (or BloomModel's files)
 * and MegatronBertForPreTraining / MegatronBertForMaskedLM.  The weights come from
 * model.safetensors, model.safetensors.index.json and the files its weight_map names,
 * pytorch_model.bin (a torch.save zip, read by pt.h: nothing is executed) or
 * pytorch_model.bin.index.json; F32, F16, BF16 or F64, converted to fp32.  The name and layout
 * mapping is hfexport.h's table read backwards, which follows transformers' own converters
 * (models/megatron_gpt2/convert_megatron_gpt2_checkpoint.py, models/bloom/
 * convert_bloom_original_checkpoint_to_pytorch.py, models/megatron_bert/
 * convert_megatron_bert_checkpoint.py) in the other direction:
 *   GPT-2  Conv1D weights [in, out] are transposed to Linear's [out, in]; c_attn's output
 *          columns, q | k | v ([3, heads, hd]), become Megatron's rows [heads, 3, hd] (weight and
 *          bias).
 *   BLOOM  its fused query_key_value is already [heads, 3, hd] per head (BloomAttention's
 *          _split_heads views it as (heads, 3, hd)), Megatron's order: copied.
 *   BERT   query, key and value ([h, h] each) are interleaved per head into [heads, 3, hd].
 * The word embeddings get the padded rows Megatron adds (zeros, as many as
 * --make-vocab-size-divisible-by for TP 1 asks; the re-split pads further for more ranks), and
 * so does BERT's LM-head bias.  lmtk's output layer is the word embeddings: an lm_head.weight
 * (or BERT's cls.predictions.decoder.weight) is accepted only when it is equal to them, as
 * tie_word_embeddings makes it, and refused otherwise.
 *
 * Nothing in the directory is trusted: every number of config.json is range-checked before it
 * sizes anything, every tensor's dtype and shape must be the one config.json implies (an error
 * names the file and the tensor), a tensor missing is an error, one the class does not have is
 * named in a warning and left out, and every file read - the configs, the weights, the index's
 * files, the tokenizer - must lie inside DIR once links are resolved (fsx_confined): a link to
 * elsewhere is refused, not followed.
 *
 * The result is a shards.h checkpoint over a source (TP 1, PP 1) with a manifest train
 * understands: the model's flags under "model", iteration and counters 0, Adam's moments zero
 * (step 0), the tokenizer files the directory has (vocab.json + merges.txt, tokenizer.json,
 * BERT's vocab.txt) recorded as train records them (tokrec.h), "converted_from" saying where
 * it came from.  reshard.h writes it in any TP/PP layout, as it writes any other input.
 * hfimport.c reads the tensors and feeds the checkpoint; hfconfig.c reads config.json (the
 * class, the model's flags) and the tokenizer's record (hfimport_int.h between them). */
#ifndef CKPT_MERGE_TP_HFIMPORT_H
#define CKPT_MERGE_TP_HFIMPORT_H

#include <stddef.h>

#include "ckpt/shards.h"

/* dir: the model directory; divisible_by: Megatron's --make-vocab-size-divisible-by (the
 * padding for TP 1).  *cls the class read (static).  0, or EXIT_USAGE (bad input) /
 * EXIT_FAILED (I/O, memory) + err naming the file.  sh_close(c) frees it, also after a
 * failure. */
int hfi_open(struct sh_ckpt *c, const char *dir, int divisible_by, const char **cls, char *err,
	     size_t errlen);

#endif
