/* bertdata - Megatron's BERT and T5 samples from a sentence dataset, in Megatron's order.
 *
 * The data is a SENTENCE dataset (Megatron's preprocess with --split-sentences, PREFIX being
 * ..._text_sentence): every sequence of PREFIX.bin/.idx is one sentence, and the .idx's doc_idx
 * (D = documents + 1 int64, 0 first, the number of sentences last) says where each document's
 * sentences begin.  The reference is NVIDIA Megatron-LM as of fabad461 (September 2022; the
 * masking and the mapping are unchanged since T5 joined in April 2021, 48a5e0d, and BERT's seed
 * took its % 2^32 in May 2021): megatron/data/bert_dataset.py, t5_dataset.py, dataset_utils.py
 * and helpers.cpp (build_mapping), with the BertWordPiece tokenizers of
 * megatron/tokenizer/tokenizer.py.  A sample is a function of the data, the key
 * below and the sample's number alone; the steps, each reproduced draw for draw:
 *
 * 1. Documents are split as get_train_valid_test_split_ (gptdata_split) into train, valid and
 *    test; a split keeps its documents' sentences.
 * 2. The samples mapping (helpers.cpp build_mapping): epoch after epoch (until the epoch that
 *    starts with at least num_samples built: whole epochs, so usually more), for each document
 *    with at least min_num_sent sentences (2 with BERT's binary head, else 1) and, when it has
 *    more than one, none over 512 tokens, sentences are gathered into samples of about a target
 *    length: max_len = seq_length - 3 for BERT ([CLS] A [SEP] B [SEP]), encoder length - 2 for
 *    T5, but with probability 1/round(1/short_seq_prob) (a 32-bit output r of std::mt19937(seed)
 *    with r % ratio == 0) the target is 2 + r % (max_len - 1).  A sample ends once it reaches
 *    the target with at least min_num_sent sentences and more than one sentence left in the
 *    document, or at the document's end; a target is drawn at each document's start and after
 *    every sample (the last draw of a document is wasted, as in Megatron).  The rows (first
 *    sentence, end sentence, target) are then shuffled by std::mt19937_64(seed + 1): for i from
 *    n-1 down to 1, j = next() % (i + 1), swap rows i and j.
 * 3. Sample i draws from numpy's RandomState((seed + i) % 2^32) (BERT; T5: seed + i, which must
 *    be below 2^32 as numpy requires), mt19937.h:
 *    BERT  with the binary head, segment A is the first a_end sentences (a_end = randint(1, n)
 *          when n >= 3, else 1), B the rest, swapped when random() < 0.5 (is_random, the
 *          sentence-order label); without it A is every sentence and B empty.  The longer
 *          segment (B on a tie) loses a token until both fit the target, from its front when
 *          random() < 0.5, else from its back.  Tokens [CLS] A [SEP] B [SEP] (the second [SEP]
 *          only when B has tokens), types 0 up to the first [SEP], 1 after.
 *    T5    the sentences' tokens, cut to the target.
 *    Masking (create_masked_lm_predictions): candidates are the tokens other than [CLS] and
 *    [SEP], a token whose vocabulary entry starts with "##" joining the candidate before it
 *    (Megatron's do_whole_word_mask, which BertDataset and T5Dataset leave at its default, on:
 *    whole words are masked); num_to_predict = min(mask_prob * target,
 *    max(1, round(len(tokens) * mask_prob))).  The candidates' order is shuffled (one
 *    RandomState.shuffle of a list); for each in turn, until num_to_predict tokens are masked:
 *    an n-gram length n (BERT: choice of 1..3 with p proportional to 1/n; T5: min(geometric(0.2),
 *    10)), shortened while the n words would pass num_to_predict; skipped if even one word would,
 *    or if any of its tokens is already masked; else each token is masked: BERT replaces it with
 *    [MASK] when random() < 0.8, else keeps it when random() < 0.5, else puts
 *    randint(0, vocabulary size) in its place (any id of the tokenizer's inv_vocab: [BOS], [EOS]
 *    and the extra ids too); T5 always uses [MASK] and keeps the span.
 *    BERT  tokens, types (pad_id after the tokens, as Megatron pads them), labels (the original
 *          token where masked, else -1), padding_mask (1 on the tokens), loss_mask (1 where
 *          masked), each of seq_length.
 *    T5    spans in order of their first token: the encoder input is the tokens with each span
 *          (first to last token) replaced by the next sentinel (<extra_id_0>, ...); the decoder
 *          input is [BOS] then per span its sentinel and its original tokens; the labels are
 *          the same sequence shifted, ending in [EOS]; pad_id after each, -1 in the labels.
 *          Masks are Megatron's make_attention_mask, id >= 1 meaning "not padding": enc_mask[i][j]
 *          = enc[i] >= 1 && enc[j] >= 1; enc_dec_mask[i][j] = dec[i] >= 1 && enc[j] >= 1;
 *          dec_mask[i][j] = dec[i] >= 1 && dec[j] >= 1 && j <= i.  The structure holds the two
 *          valid vectors and t5_*_mask() expand them.
 *
 * Where Megatron asserts or raises (a binary-head sample of one sentence, an empty segment A, a
 * token id outside the vocabulary, more spans than sentinels, an encoder or decoder sequence
 * longer than its length), the call returns an error naming the sample instead.  Not
 * reproduced: the second candidate shuffle after masking (it changes no output), do_permutation
 * and favor_longer_ngram (off in BERT and T5), blending several datasets, and Megatron's .npy
 * cache of the mapping (built in memory: two passes over the split's sentences per epoch).
 * mask_prob 0 gives unmasked samples (Megatron fails on it).
 *
 * Cost, measured on the 2-core development machine: the mapping of 10M samples over 2M
 * sentences builds in about 5 s (rows of 12 bytes: 120 MB); a sample takes about 30 us (BERT of
 * 128 tokens, T5 of 512/128), mostly seeding and first regenerating its own 624-word generator.
 *
 * tests/ref/bert-samples.py is an independent Python reimplementation with numpy's RandomState;
 * tests/cli/train-bertdata.sh compares the two on datasets it builds.  (Once, by hand, the same
 * cases also matched Megatron-LM's own fabad461 code byte for byte: helpers.cpp built with
 * pybind11 and the dataset modules run with numpy 1.24.) */
#ifndef TRAIN_DATA_BERTDATA_H
#define TRAIN_DATA_BERTDATA_H

#include <stddef.h>
#include <stdint.h>

#include "train/data/gptdata.h"

/* --- the vocabulary the masking needs ------------------------------------------------------ */

/* Megatron's _BertWordPieceTokenizer (BertWordPieceLowerCase / BertWordPieceCase) as the
 * datasets see it: ids 0..size-1 are vocab.txt's lines (stripped), then [BOS] and [EOS] and
 * <extra_id_0> ... <extra_id_{N-1}> (--vocab-extra-ids N), each added unless vocab.txt has it. */
struct bertdata_vocab {
	int32_t size;       /* len(tokenizer.inv_vocab): randint(0, size) picks the random word */
	uint8_t *cont;      /* size flags: 1 where the token starts with "##" (continues a word) */
	int32_t cls, sep, mask, pad, bos, eos;
	int32_t n_extra;
	int32_t *extra;     /* n_extra sentinel ids, <extra_id_0> first (T5) */
};

/* Reads vocab.txt as Megatron does.  0, or -1 + err when it cannot be read, lacks [CLS], [SEP],
 * [PAD] or [MASK], or has a token twice (Megatron would then number ids inconsistently). */
int bertdata_vocab_load(struct bertdata_vocab *v, const char *path, int32_t extra_ids, char *err,
			size_t errlen);
void bertdata_vocab_free(struct bertdata_vocab *v);

/* --- the samples mapping -------------------------------------------------------------------- */

struct bertdata_map {
	int64_t n;          /* samples */
	int wide;           /* rows are uint64 (over 2^32 sentences, as Megatron), else uint32 */
	void *rows;         /* (n, 3): first sentence, end sentence (exclusive), target length */
};

/* build_mapping over doc_idx[0..ndocs] (the split's documents: ndocs + 1 sentence offsets) and
 * the whole dataset's sizes.  num_epochs 0 means as many as num_samples takes (Megatron's None);
 * num_samples 0 means no limit (then num_epochs must be given).  0, or -1 + err for arguments
 * Megatron asserts on (max_len < 2, seed < 1 or INT32_MAX, short_seq_prob outside [0, 1]), a
 * split that gives no sample, or out of memory. */
int bertdata_map_build(struct bertdata_map *m, const int64_t *doc_idx, int64_t ndocs,
		       const int32_t *sizes, int32_t num_epochs, uint64_t num_samples,
		       int32_t max_len, double short_seq_prob, int32_t seed, int min_num_sent,
		       char *err, size_t errlen);
void bertdata_map_free(struct bertdata_map *m);

static inline void bertdata_map_row(const struct bertdata_map *m, int64_t i, int64_t *first,
				    int64_t *end, int32_t *target)
{
	if (m->wide) {
		const uint64_t *r = (const uint64_t *)m->rows + 3 * i;
		*first = (int64_t)r[0], *end = (int64_t)r[1], *target = (int32_t)r[2];
	} else {
		const uint32_t *r = (const uint32_t *)m->rows + 3 * i;
		*first = r[0], *end = r[1], *target = (int32_t)r[2];
	}
}

/* --- the dataset ---------------------------------------------------------------------------- */

enum { BERTDATA_BERT, BERTDATA_T5 };

struct bertdata_config {
	int kind;                  /* BERTDATA_BERT or BERTDATA_T5 */
	const char *split;         /* --split ("969, 30, 1" is Megatron-LM's default) */
	int which;                 /* 0 train, 1 valid, 2 test */
	uint64_t num_samples;      /* samples the run reads from this split (max_num_samples) */
	int32_t num_epochs;        /* 0: enough for num_samples (what Megatron passes) */
	int32_t seq_length;        /* BERT --seq-length; T5 --encoder-seq-length */
	int32_t dec_seq_length;    /* T5 --decoder-seq-length; unused by BERT */
	double mask_prob;          /* --mask-prob, 0.15 */
	double short_seq_prob;     /* --short-seq-prob, 0.1 */
	int32_t seed;              /* --seed, 1234 */
	int binary_head;           /* BERT: 1 unless --bert-no-binary-head; T5: must be 0 */
};

/* Megatron's defaults for kind: split "969, 30, 1", train, mask 0.15, short 0.1, seed 1234,
 * binary head for BERT; num_samples, seq_length (and T5's dec_seq_length) left 0 to fill. */
void bertdata_config_default(struct bertdata_config *c, int kind);

struct bertdata {
	struct bertdata_config cfg;
	const struct bertdata_vocab *vocab;   /* the caller's; must outlive the dataset */
	struct gptdata_ds ds;                 /* the sentences */
	int64_t ndocs;                        /* documents in the whole dataset */
	int64_t *doc_idx;                     /* ndocs + 1 sentence offsets */
	int64_t split[4];                     /* document boundaries of train, valid, test */
	struct bertdata_map map;
	int64_t n;                            /* samples: get() takes 0 <= i < n */
	double pvals[3];                      /* BERT's n-gram probabilities, as numpy has them */
};

/* Opens PREFIX.bin/.idx, splits its documents and builds the samples mapping of cfg->which.
 * 0 with b->n set; -1 + err (naming the file or the setting) when the data cannot be read, is
 * not a sentence dataset (no doc_idx over its sentences), the configuration is one Megatron
 * refuses or the split gives no sample.  vocab supplies the special ids and the "##" flags. */
int bertdata_open(struct bertdata *b, const char *prefix, const struct bertdata_config *cfg,
		  const struct bertdata_vocab *vocab, char *err, size_t errlen);
void bertdata_close(struct bertdata *b);

/* One BERT sample, all arrays of len = seq_length. */
struct bert_sample {
	int32_t len;
	int32_t *tokens;          /* [CLS] A [SEP] B [SEP], masked, then pad_id */
	int32_t *types;           /* 0 for [CLS] A [SEP], 1 for B [SEP], then pad_id */
	int32_t *labels;          /* the original token where masked, else -1 */
	uint8_t *padding_mask;    /* 1 on the n_tokens tokens, 0 on the padding */
	uint8_t *loss_mask;       /* 1 where masked */
	int32_t n_tokens;         /* before padding */
	int is_random;            /* the segments were swapped: the binary head's label */
	int truncated;            /* tokens were cut to fit the target length */
};

/* One T5 sample: text_enc of enc_len (--encoder-seq-length), the rest of dec_len. */
struct t5_sample {
	int32_t enc_len, dec_len;
	int32_t *text_enc;        /* tokens with each span replaced by its sentinel, then pad_id */
	int32_t *text_dec;        /* [BOS], then per span its sentinel and tokens, then pad_id */
	int32_t *labels;          /* text_dec shifted left, [EOS] last, then -1 */
	uint8_t *loss_mask;       /* 1 on the n_dec decoder tokens */
	uint8_t *enc_valid;       /* text_enc[i] >= 1: the masks' notion of "not padding" */
	uint8_t *dec_valid;       /* text_dec[i] >= 1 */
	int32_t n_enc, n_dec;     /* before padding */
	int truncated;
};

/* Buffers sized for b's lengths; free with *_free.  0, or -1 when out of memory. */
int bert_sample_alloc(const struct bertdata *b, struct bert_sample *s);
void bert_sample_free(struct bert_sample *s);
int t5_sample_alloc(const struct bertdata *b, struct t5_sample *s);
void t5_sample_free(struct t5_sample *s);

/* Sample i (0 <= i < b->n) into s: what Megatron's BertDataset / T5Dataset __getitem__(i)
 * returns.  0, or -1 + err naming the sample where Megatron would fail (see above).  Safe to
 * call from several threads on one dataset with a sample each. */
int bertdata_bert_get(const struct bertdata *b, int64_t i, struct bert_sample *s, char *err,
		      size_t errlen);
int bertdata_t5_get(const struct bertdata *b, int64_t i, struct t5_sample *s, char *err,
		    size_t errlen);

/* Megatron's (S, S) masks, one element: 1 where position i may attend to position j. */
static inline int t5_enc_mask(const struct t5_sample *s, int i, int j)
{
	return s->enc_valid[i] && s->enc_valid[j];
}
static inline int t5_enc_dec_mask(const struct t5_sample *s, int i, int j)  /* i decoder, j encoder */
{
	return s->dec_valid[i] && s->enc_valid[j];
}
static inline int t5_dec_mask(const struct t5_sample *s, int i, int j)
{
	return s->dec_valid[i] && s->dec_valid[j] && j <= i;
}

#endif
