/* tok - a whole tokenizer: added tokens, pre-tokenizer steps, and the model - byte-level BPE loaded
 * from Megatron's --vocab-file/--merge-file or a Hugging Face tokenizer.json, or WordPiece (BERT)
 * from a vocab.txt or a tokenizer.json.
 *
 * The pipeline is HF's, restricted to what those tokenizers use, and refusing anything else by
 * name (another normalizer or model, dropout) rather than producing different ids:
 *
 *   1. added tokens with normalized=false are cut out of the raw text (leftmost-longest, honouring
 *      single_word, lstrip, rstrip), then those with normalized=true from what is left - for BPE,
 *      which has no normalizer, the raw text again; for WordPiece, each remaining segment after
 *      BertNormalizer, matched against the tokens' normalized forms, as HF does;
 *   2. each remaining segment goes through the pre-tokenizer steps: GPT-2's split (ByteLevel with
 *      use_regex, hand-coded), BLOOM's split (hand-coded), any other Split (Oniguruma), and
 *      ByteLevel's add_prefix_space; or BertPreTokenizer;
 *   3. each piece goes through the model (bpe.h, wordpiece.h).
 *
 * Megatron's GPT2BPETokenizer (--vocab-file/--merge-file) has no added tokens: a literal
 * "<|endoftext|>" in a document is text, BPE'd like any other, as Megatron's own tokenizer does;
 * the EOD id is still vocab["<|endoftext|>"].  Likewise its BERT tokenizers: a literal "[SEP]" is
 * text (three words, "[" "sep" "]").  A tokenizer.json treats its added tokens as HF does: the
 * same literal becomes the special token.
 *
 * A struct tok is read-only once loaded; each thread encodes with its own struct tok_state. */
#ifndef LMTK_TOKENIZE_TOK_H
#define LMTK_TOKENIZE_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "tokenize/bpe.h"

struct tok;
struct tok_state;

/* Megatron's GPT2BPETokenizer.  NULL + err (naming file and line) on failure. */
struct tok *tok_load_gpt2(const char *vocab_json, const char *merges_txt, char *err, size_t errlen);
/* Megatron's BertWordPieceLowerCase (lower_case) / BertWordPieceCase: BERT's vocab.txt. */
struct tok *tok_load_bert(const char *vocab_txt, int lower_case, char *err, size_t errlen);
/* PretrainedFromHF: a tokenizer.json, or a directory holding one (its special_tokens_map.json or
 * tokenizer_config.json then names the eos token).  eod_token overrides the EOD choice. */
struct tok *tok_load_hf(const char *path, const char *eod_token, char *err, size_t errlen);
void tok_free(struct tok *t);

uint32_t tok_eod(const struct tok *t);         /* BPE_NONE if none */
void tok_set_eod(struct tok *t, uint32_t id);  /* --eod-token on Megatron's GPT-2 flags */
uint32_t tok_vocab_size(const struct tok *t);  /* max id + 1 over the model and added tokens */
uint32_t tok_lookup(const struct tok *t, const char *s, size_t len); /* a token's id, BPE_NONE if none */
const char *tok_describe(const struct tok *t); /* "GPT-2 BPE, 50257 tokens" for messages */
/* The bytes of token id, decoded (byte-level stand-ins and <0xNN> undone; a WordPiece token after
 * a space unless first, a continuation without its prefix and space); -1 if unknown id */
int tok_decode_id(const struct tok *t, uint32_t id, int first, char *buf, size_t cap, size_t *len);

struct tok_state *tok_state_new(const struct tok *t);
void tok_state_free(struct tok_state *s);

/* Encodes text (valid UTF-8) and appends its ids to *out (*n, *cap as in bpe_encode).
 * 0, or -1 with err (out of memory, a regex failure). */
int tok_encode(const struct tok *t, struct tok_state *s, const char *text, size_t len,
	       uint32_t **out, size_t *n, size_t *cap, char *err, size_t errlen);

#endif
