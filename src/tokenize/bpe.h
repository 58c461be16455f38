/* bpe - the byte-pair-encoding model, exactly as Hugging Face tokenizers applies it.
 *
 * A piece of text (one pre-tokenizer output) starts as one symbol per character - per byte for a
 * byte-level vocabulary, where each byte has its own printable stand-in character - and the
 * merge with the lowest rank among adjacent pairs is applied, leftmost first on ties, until no
 * adjacent pair has a merge.  HF does this with a heap of (rank, position); scanning for the
 * minimum is the same order and faster for the short pieces that make up almost all text, so
 * pieces of up to SCAN_MAX symbols use the scan and longer ones (a 100 kB run of letters in a
 * DNA dump) the heap, keeping the worst case O(n log n).
 *
 * Merges live in one open-addressing table keyed by the pair of ids and giving (rank, new id), so
 * applying a merge is a hash probe, never a string operation.  Strings matter only at load time
 * (vocab, merges) and for the fallbacks: characters outside the vocabulary become <0xNN> byte
 * tokens with byte_fallback, else the unk token (consecutive ones fused with fuse_unk), else they
 * are dropped, as HF does.
 *
 * Encoding is read-only on the model, so threads share one model; each thread brings its own
 * struct bpe_cache (piece bytes -> ids), which pays because text repeats its words. */
#ifndef LMTK_TOKENIZE_BPE_H
#define LMTK_TOKENIZE_BPE_H

#include <stddef.h>
#include <stdint.h>

#define BPE_NONE 0xFFFFFFFFu

struct bpe;

struct bpe *bpe_new(void);
void bpe_free(struct bpe *m);

/* Vocabulary entry (string bytes -> id).  0, or -1 + err (duplicate string). */
int bpe_add_token(struct bpe *m, const char *s, size_t len, uint32_t id, char *err, size_t errlen);
/* The next merge (rank = number of merges so far): both halves and their concatenation must be
 * in the vocabulary.  0, or -1 + err naming the missing token. */
int bpe_add_merge(struct bpe *m, const char *a, size_t alen, const char *b, size_t blen,
		  char *err, size_t errlen);
/* After all tokens and merges: byte_level maps each input byte to its GPT-2 stand-in character
 * first; unk may be NULL.  0 or -1 + err. */
int bpe_finish(struct bpe *m, int byte_level, const char *unk, int fuse_unk, int byte_fallback,
	       int ignore_merges, char *err, size_t errlen);

uint32_t bpe_lookup(const struct bpe *m, const char *s, size_t len);  /* id or BPE_NONE */
const char *bpe_token(const struct bpe *m, uint32_t id, size_t *len); /* NULL if no such id */
uint32_t bpe_vocab_end(const struct bpe *m);                          /* max id + 1 */
size_t bpe_merge_count(const struct bpe *m);

struct bpe_cache;
struct bpe_cache *bpe_cache_new(void);
void bpe_cache_free(struct bpe_cache *c);

/* Encodes one piece (raw UTF-8 bytes; for byte-level models any bytes).  Appends the ids to
 * *out (grown with realloc as needed; *n and *cap updated).  0, or -1 on out of memory. */
int bpe_encode(const struct bpe *m, struct bpe_cache *c, const uint8_t *s, size_t len,
	       uint32_t **out, size_t *n, size_t *cap);

/* GPT-2's byte -> character map: the UTF-8 of the stand-in for byte b (1 or 2 bytes). */
const char *bpe_byte_char(uint8_t b, size_t *len);

#endif
