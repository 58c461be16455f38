/* datasize - what a plan needs to know about --data-path: the size of each dataset and of each
 * of its splits, in sequences and tokens, from its .idx alone.
 *
 * Only PREFIX.idx is read (lib/idx.h's idx_open_index, mapped, every field checked as mkindex
 * check does): the .bin is not touched, so a dry run over a 1.2 TB dataset reads the .idx's
 * 20 bytes per document and needs no .bin at hand.  A truncated or foreign file is reported
 * instead of counted.
 *
 * Splits follow Megatron's get_train_valid_test_split_() as the data loader reads them
 * (gptdata_split, gptdata.h: one rule for the plan and the run).  GPT's datasets split by
 * sequence index, which mkindex and Megatron's preprocessor make one per document. */
#ifndef TRAIN_DATASIZE_H
#define TRAIN_DATASIZE_H

#include <stddef.h>
#include <stdint.h>

struct dataset {
	const char *prefix;
	int ok;                    /* read: the numbers below are the file's */
	double weight;             /* normalised blending weight (1 for a single dataset) */
	int dtype;
	uint64_t docs;             /* N: sequences */
	uint64_t bounds[4];        /* split boundaries, in sequences */
	uint64_t tokens[3];        /* tokens in the train, valid, test splits */
	uint64_t total_tokens;
};

/* Megatron's split boundaries for n sequences (gptdata_split's, a bound below 0 as 0): 0, or
 * -1 + err for a malformed split string. */
int datasize_split(const char *split, uint64_t n, uint64_t bounds[4], char *err, size_t errlen);

/* Reads PREFIX.idx's header and sizes into d (prefix, bounds from `split`).  0; -1 + err when
 * the file cannot be read; -2 + err when it is not a valid MMIDIDX v1 index. */
int datasize_read(struct dataset *d, const char *prefix, const char *split, char *err, size_t errlen);

#endif
