/* batch - see batch.h. */
#include "train/run/batch.h"

#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "xalloc.h"

int batch_alloc(struct run *r, char *err, size_t errlen)
{
	int64_t rows = r->dseq > r->seq ? r->dseq : r->seq;   /* T5: the longer of its two */
	r->sample = malloc((r->seq + 1) * sizeof *r->sample);
	r->tok = malloc(r->mbs * r->seq * sizeof *r->tok);
	r->tgt = malloc(r->mbs * rows * sizeof *r->tgt);
	r->types = calloc(r->mbs * r->seq, sizeof *r->types);
	r->lmask = calloc(r->mbs * rows, 1);
	r->lens = calloc(r->mbs, sizeof *r->lens);
	r->sop = calloc(r->mbs, sizeof *r->sop);
	r->dtok = calloc(r->mbs * (r->dseq > 0 ? r->dseq : 1), sizeof *r->dtok);
	if (!r->sample || !r->tok || !r->tgt || !r->types || !r->lmask || !r->lens || !r->sop ||
	    !r->dtok)
		return xalloc_err(err, errlen, "the micro-batch's token buffers", 0);
	r->mb = (struct model_batch){.tokens = r->tok, .targets = r->tgt};
	if (r->bert)
		r->mb = (struct model_batch){.tokens = r->tok, .targets = r->tgt, .types = r->types,
					     .loss_mask = r->lmask, .lens = r->lens, .sop = r->sop};
	if (r->t5)
		r->mb = (struct model_batch){.tokens = r->tok, .dec_tokens = r->dtok,
					     .targets = r->tgt, .loss_mask = r->lmask,
					     .lens = r->lens};
	return 0;
}

/* Fills micro-batch `k` of the iteration whose first sample is `first`, Megatron's pretraining
 * sampler: the iteration's samples go in chunks of mbs*DP, DP rank r taking [r*mbs, (r+1)*mbs)
 * of each.  Input tokens [0,seq), targets [1,seq]. */
static int load_micro_bert(struct run *r, int split, int64_t first, int k)
{
	char err[512];
	int T = (int)r->seq, K = r->m.cfg.num_tokentypes;
	for (int b = 0; b < r->mbs; b++) {
		int64_t i = first + (int64_t)k * r->mbs * r->dist.dp + (int64_t)r->dist.dp_rank * r->mbs + b;
		struct bert_sample *s = &r->bs;
		int32_t *tk = r->tok + (size_t)b * T, *ty = r->types + (size_t)b * T;
		if (feed_get_bert(&r->feed, split, i, s, err, sizeof err) < 0) {
			warn("%s", err);
			goto harmless;
		}
		for (int t = 0; t < T; t++) {
			int lab = s->loss_mask[t] ? s->labels[t] : -1;
			if (s->tokens[t] < 0 || s->tokens[t] >= r->m.cfg.vocab || lab >= r->m.cfg.vocab) {
				warn("%s sample %lld holds token id %d, outside the vocabulary of %d: the "
				     "data was not tokenized with this --vocab-file", split == FEED_TRAIN
				     ? "training" : split == FEED_VALID ? "validation" : "test", (long long)i,
				     lab >= r->m.cfg.vocab ? lab : s->tokens[t], r->m.cfg.vocab);
				r->bad_data = 1;
				goto harmless;
			}
			if (s->types[t] < 0 || (K > 0 && s->types[t] >= K) || (K == 0 && s->types[t])) {
				warn("%s sample %lld holds token type %d, outside --num-tokentypes %d",
				     split == FEED_TRAIN ? "training" : "held-out", (long long)i,
				     s->types[t], K);
				r->bad_data = 1;
				goto harmless;
			}
			tk[t] = s->tokens[t];
			ty[t] = s->types[t];
			r->tgt[(size_t)b * T + t] = lab;
			r->lmask[(size_t)b * T + t] = s->loss_mask[t];
		}
		r->lens[b] = s->n_tokens;
		r->sop[b] = s->is_random;
	}
	return 0;
harmless:   /* so that every stage can still run the step in lockstep */
	memset(r->tok, 0, r->mbs * r->seq * sizeof *r->tok);
	memset(r->types, 0, r->mbs * r->seq * sizeof *r->types);
	memset(r->tgt, 0xff, r->mbs * r->seq * sizeof *r->tgt);
	memset(r->lmask, 0, r->mbs * r->seq);
	for (int b = 0; b < r->mbs; b++)
		r->lens[b] = (int32_t)r->seq, r->sop[b] = 0;
	return -1;
}

/* The last real position + 1 of a T5 sample's validity vector (Megatron's id >= 1), counting
 * the samples whose vector is not a prefix: their masked inner positions are real keys here
 * (model/t5.c), which only a vocabulary with a word at id 0 and [PAD] elsewhere makes. */
static int32_t t5_prefix(const uint8_t *valid, int n, int *inner)
{
	int last = 0;
	for (int t = 0; t < n; t++)
		if (valid[t])
			last = t + 1;
	for (int t = 0; t < last; t++)
		*inner |= !valid[t];
	return last;
}

/* T5's micro-batch k, as load_micro_bert's */
static int load_micro_t5(struct run *r, int split, int64_t first, int k)
{
	char err[512];
	int Te = (int)r->seq, Td = (int)r->dseq, V = r->m.cfg.vocab;
	for (int b = 0; b < r->mbs; b++) {
		int64_t i = first + (int64_t)k * r->mbs * r->dist.dp + (int64_t)r->dist.dp_rank * r->mbs + b;
		struct t5_sample *s = &r->ts;
		int inner = 0, bad = -1;
		if (feed_get_t5(&r->feed, split, i, s, err, sizeof err) < 0) {
			warn("%s", err);
			goto harmless;
		}
		for (int t = 0; t < Te; t++)
			if (s->text_enc[t] < 0 || s->text_enc[t] >= V)
				bad = s->text_enc[t];
		for (int t = 0; t < Td; t++)
			if (s->text_dec[t] < 0 || s->text_dec[t] >= V ||
			    (s->loss_mask[t] && (s->labels[t] < 0 || s->labels[t] >= V)))
				bad = s->text_dec[t] < 0 || s->text_dec[t] >= V ? s->text_dec[t] : s->labels[t];
		if (bad != -1) {
			warn("%s sample %lld holds token id %d, outside the vocabulary of %d: the data was "
			     "not tokenized with this --vocab-file and --vocab-extra-ids", split == FEED_TRAIN
			     ? "training" : split == FEED_VALID ? "validation" : "test", (long long)i, bad,
			     V);
			r->bad_data = 1;
			goto harmless;
		}
		memcpy(r->tok + (size_t)b * Te, s->text_enc, Te * sizeof *r->tok);
		memcpy(r->dtok + (size_t)b * Td, s->text_dec, Td * sizeof *r->dtok);
		for (int t = 0; t < Td; t++) {
			r->tgt[(size_t)b * Td + t] = s->loss_mask[t] ? s->labels[t] : -1;
			r->lmask[(size_t)b * Td + t] = s->loss_mask[t];
		}
		r->lens[b] = t5_prefix(s->enc_valid, Te, &inner);
		t5_prefix(s->dec_valid, Td, &inner);
		if (inner && !r->t5_nonprefix++)
			warn("warning: %s sample %lld has a token of id 0 among its real tokens: Megatron's "
			     "T5 masks would hide it as padding, lmtk's attention sees it (train(1), "
			     "--model-type t5); counted, not warned again", split == FEED_TRAIN ?
			     "training" : "held-out", (long long)i);
	}
	return 0;
harmless:   /* so that every rank can still run the step in lockstep */
	memset(r->tok, 0, r->mbs * Te * sizeof *r->tok);
	memset(r->dtok, 0, r->mbs * Td * sizeof *r->dtok);
	memset(r->tgt, 0xff, r->mbs * Td * sizeof *r->tgt);
	memset(r->lmask, 0, r->mbs * Td);
	for (int b = 0; b < r->mbs; b++)
		r->lens[b] = Te;
	return -1;
}

int batch_load(struct run *r, int split, int set, int64_t first, int k)
{
	char err[512];
	if (r->t5)
		return load_micro_t5(r, split, first, k);
	if (r->bert)
		return load_micro_bert(r, split, first, k);
	for (int b = 0; b < r->mbs; b++) {
		int64_t i = first + (int64_t)k * r->mbs * r->dist.dp + (int64_t)r->dist.dp_rank * r->mbs + b;
		if (feed_get(&r->feed, split, set, i, r->sample, err, sizeof err) < 0) {
			warn("%s", err);
			memset(r->tok, 0, r->mbs * r->seq * sizeof *r->tok);
			memset(r->tgt, 0, r->mbs * r->seq * sizeof *r->tgt);
			return -1;
		}
		for (int t = 0; t <= r->seq; t++)
			if (r->sample[t] < 0 || r->sample[t] >= r->m.cfg.vocab) {
				warn("%s sample %lld holds token id %d, outside the vocabulary of %d: the data "
				     "was not tokenized with this --vocab-file/--tokenizer-name-or-path",
				     split == FEED_TRAIN ? "training" : split == FEED_VALID ? "validation" : "test",
				     (long long)i, r->sample[t], r->m.cfg.vocab);
				r->bad_data = 1;
				/* harmless ids, so every stage can still run the step in lockstep */
				memset(r->tok, 0, r->mbs * r->seq * sizeof *r->tok);
				memset(r->tgt, 0, r->mbs * r->seq * sizeof *r->tgt);
				return -1;
			}
		for (int t = 0; t < r->cur; t++) {   /* the first cur tokens (curriculum.h) */
			r->tok[b * r->cur + t] = r->sample[t];
			r->tgt[b * r->cur + t] = r->sample[t + 1];
		}
	}
	return 0;
}

void batch_free(struct run *r)
{
	if (r->bert)
		bert_sample_free(&r->bs);
	if (r->t5) {
		t5_sample_free(&r->ts);
		if (r->t5_nonprefix)
			warn("warning: %lld T5 samples had a token of id 0 among their real tokens, "
			     "seen by lmtk's attention where Megatron's masks hide it",
			     (long long)r->t5_nonprefix);
	}
	free(r->dtok);
}
