/* vocab - the vocabulary size Megatron's tokenizers report, read from the tokenizer's files.
 *
 * GPT2BPETokenizer (--vocab-file): len(encoder), the entries of vocab.json (50257 for GPT-2).
 * PretrainedFromHF (--tokenizer-name-or-path): len(tokenizer) of the HF fast tokenizer, i.e. the
 * model's vocab joined with the added tokens by content: an added token already in the vocab
 * (BLOOM's <s>, </s>, <unk>, <pad> are ids 0-3) does not count twice.
 * The padded size the model uses is plan.c's business (--make-vocab-size-divisible-by,
 * --pad-vocab-size-to). */
#ifndef TRAIN_VOCAB_H
#define TRAIN_VOCAB_H

#include <stddef.h>
#include <stdint.h>

enum { VOCAB_MISSING = -1, VOCAB_BAD = -2 };

/* 0 and *n; VOCAB_MISSING when the file (or directory) does not exist; VOCAB_BAD + err when it
 * cannot be read or is not a tokenizer file.  err is filled in both cases. */
int vocab_gpt2(const char *path, int64_t *n, char *err, size_t errlen);
/* path: a tokenizer.json, or a directory holding one */
int vocab_hf(const char *path, int64_t *n, char *err, size_t errlen);

/* The end-of-document id Megatron's tokenizer reports (tokenizer.eod): <|endoftext|> of a GPT-2
 * vocab.json; the eos_token of an HF tokenizer directory (special_tokens_map.json or
 * tokenizer_config.json, looked up in tokenizer.json).  0, or VOCAB_* + err. */
int vocab_eod_gpt2(const char *path, int64_t *id, char *err, size_t errlen);
int vocab_eod_hf(const char *path, int64_t *id, char *err, size_t errlen);

#endif
