/* feed - the training, validation and test samples, in Megatron's order.
 *
 * Two ways to name the data, as Megatron-DeepSpeed (BigScience fork) has them:
 * - --data-path PREFIX, or W1 P1 W2 P2 ... blended, each dataset split by --split into
 *   train/valid/test sequence ranges: one set per split;
 * - --{train,valid,test}-weighted-split-paths[-path] "NAME: W1 S:E P1, W2 S:E P2": groups, each
 *   a named set blending its datasets over the sequence range [round(S*N), round(E*N)); one
 *   train group, any number of named validation (and test) groups.
 * Each dataset of a set builds Megatron's GPT sample index (gptdata.h, cached beside the data,
 * or in --data-cache-path, or in the user's cache directory when the data's is read-only) for
 * the samples Megatron would ask it for - the split's samples, or ceil(n * w * 1.005) of
 * them in a blend - and a blend interleaves the datasets as BlendableDataset does.
 * feed_get(split, set, i) gives the seq+1 tokens of sample i: [0, seq) input, [1, seq] targets.
 *
 * Training may ask for more samples than were indexed (skipped iterations consume data beyond
 * the plan): sample i then wraps around the set, with one warning.
 *
 * --model-type bert: one sentence dataset (--data-path PREFIX, ..._text_sentence) and Megatron's
 * BertDataset over each split (bertdata.h: the samples mapping for the split's samples, masking
 * with --mask-prob, targets shortened with --short-seq-prob, the binary head's segment order),
 * read with feed_get_bert(); the sets are one per split, as with --data-path.  --model-type t5
 * likewise with Megatron's T5Dataset (span corruption over --encoder-seq-length and
 * --decoder-seq-length, the --vocab-extra-ids sentinels), read with feed_get_t5(). */
#ifndef TRAIN_FEED_H
#define TRAIN_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "train/data/bertdata.h"
#include "train/data/gptdata.h"

enum { FEED_TRAIN, FEED_VALID, FEED_TEST };

#define FEED_MAX_DATA 256   /* --data-path values; datasets in one weighted-split group */

enum feed_kind { FEED_GPT, FEED_BERT, FEED_T5 };

/* What the data is and how to read it: the data flags, as train's setup hands them over. */
struct feed_config {
	enum feed_kind kind;              /* --model-type */
	const char *const *data_path;     /* --data-path: PREFIX, or WEIGHT PREFIX pairs */
	int ndata_path;
	int weighted_split_paths;         /* --train-weighted-split-paths[-path] given */
	const char *wsplit[3];            /* train/valid/test weighted split paths: groups joined by
	                                     wsplit_sep, or (wsplit_file) the file holding them */
	int wsplit_file[3];
	const char *wsplit_sep;
	const char *split;                /* --split, or NULL: Megatron's "969, 30, 1" */
	const char *cache_dir;            /* --data-cache-path, or NULL: beside the data */
	int seq;                          /* tokens per sample (T5: the encoder's) */
	int64_t seed;                     /* --seed */
	/* BERT and T5 (bertdata.h) */
	const char *vocab_file;
	int64_t vocab_extra_ids;          /* T5's sentinels */
	double mask_prob, short_seq_prob;
	int binary_head;                  /* BERT's sentence-order pairs */
	int64_t dec_seq;                  /* T5: the decoder's tokens per sample */
};

struct feed_set {
	char *name;                       /* the group's NAME; NULL with --data-path */
	int n;                            /* datasets */
	int *ds;                          /* index into feed.ds */
	double *weights;
	struct gptdata_index *x;
	int64_t size;                     /* samples (0: empty) */
	uint8_t *bidx;                    /* blends: dataset of sample i */
	int64_t *bsample;                 /* blends: its sample number in that dataset */
};

struct feed {
	int seq;
	const char *cache_dir;            /* --data-cache-path, or NULL: beside the data */
	int nds;
	struct gptdata_ds *ds;            /* every dataset opened once, whatever uses it */
	struct feed_set *sets[3];
	int nsets[3];
	int wrapped;
	int bert;                         /* --model-type bert or t5: the sets are bd[split] */
	int t5;                           /* ... of T5 samples */
	struct bertdata_vocab bvocab;
	struct bertdata bd[3];
	int bd_open[3];
};

/* samples[3]: what each split asks each of its sets for.  Reports what it builds or loads
 * through `say`.  0, or -1 + err (a dataset that cannot be read, a bad split, group or weight). */
int feed_open(struct feed *f, const struct feed_config *c, const int64_t samples[3],
	      void (*say)(const char *line), char *err, size_t errlen);
int feed_get(struct feed *f, int split, int set, int64_t i, int32_t *tokens, char *err,
	     size_t errlen);
/* BERT's sample i of a split into s (bert_sample_alloc'd for seq): 0, or -1 + err */
int feed_get_bert(struct feed *f, int split, int64_t i, struct bert_sample *s, char *err,
		  size_t errlen);
/* T5's sample i of a split into s (t5_sample_alloc'd): 0, or -1 + err */
int feed_get_t5(struct feed *f, int split, int64_t i, struct t5_sample *s, char *err,
		size_t errlen);
void feed_close(struct feed *f);

#endif
