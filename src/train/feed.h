/* feed - the training, validation and test samples, in Megatron's order.
 *
 * --data-path PREFIX, or W1 P1 W2 P2 ... blended: each dataset is split by --split into
 * train/valid/test sequence ranges; each split builds Megatron's GPT sample index (gptdata.h,
 * cached beside the data) for the samples Megatron would ask it for - the run's samples, or
 * ceil(N * w * 1.005) of them in a blend - and a blend interleaves the datasets exactly as
 * BlendableDataset does.  feed_get(split, i) then gives the seq+1 tokens of sample i: tokens
 * [0, seq) are the input, [1, seq] the targets.
 *
 * Training may ask for more samples than were indexed (skipped iterations consume data beyond
 * the plan): sample i then wraps around the split, with one warning. */
#ifndef TRAIN_FEED_H
#define TRAIN_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "train/args.h"
#include "train/gptdata.h"

enum { FEED_TRAIN, FEED_VALID, FEED_TEST };

struct feed {
	int nds, seq;
	struct gptdata_ds *ds;
	double *weights;
	struct gptdata_index *x[3];       /* [split][dataset] */
	int64_t size[3];                  /* samples in each split (0: the split is empty) */
	uint8_t *bidx[3];                 /* blends: dataset of sample i */
	int64_t *bsample[3];              /* blends: its sample number in that dataset */
	int wrapped;
};

/* samples[3]: what each split is asked for.  Prints what it builds or loads from cache through
 * `say`.  0, or -1 + err (a dataset that cannot be read, a bad split or weight). */
int feed_open(struct feed *f, const struct train_args *a, const int64_t samples[3], int seq,
	      uint32_t seed, void (*say)(const char *line), char *err, size_t errlen);
int feed_get(struct feed *f, int split, int64_t i, int32_t *tokens, char *err, size_t errlen);
void feed_close(struct feed *f);

#endif
