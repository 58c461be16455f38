/* eval - see eval.h. */
#include "train/run/eval.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train/data/ramp.h"
#include "train/run/batch.h"
#include "train/run/logs.h"

/* --eval-iters global batches of each set of a split, without dropout.  `label` is Megatron's:
 * "at iteration N" during training, "at the end of training for val data" / "... for test data"
 * after it; a named set (weighted split paths) prints "{name} loss at ..." and gets its own
 * TensorBoard prefix.  Validation positions carry on across evaluations, as Megatron's
 * iterators do. */
void eval_split(struct run *r, int split, const char *label, int64_t iteration)
{
	int64_t gbs = ramp_gbs(&r->p->ramp, r->st.consumed_samples), micro = gbs / (r->mbs * r->dist.dp);
	for (int si = 0; si < r->feed.nsets[split] && si < 64; si++) {
		const struct feed_set *set = &r->feed.sets[split][si];
		int64_t test_position = 0;
		int64_t *pos = split == FEED_VALID ? &r->st.valid_position[si] : &test_position;
		double sum = 0, part[2] = {0, 0};
		int n = 0, bad;
		if (set->size == 0 || r->a->eval_iters <= 0)
			continue;
		struct model *m = &r->m;
		struct dist *dd = &r->dist;
		size_t xb = (size_t)r->mbs * r->seq * m->cfg.hidden * m->ops->act_size;
		int failed = 0, cur = (int)r->cur;
		/* evaluation sees whole samples, also under a curriculum (Megatron-DeepSpeed's
		 * eval_split() lifts curriculum_seqlen to --seq-length, then rolls it back) */
		r->cur = r->seq;
		model_set_seq(m, (int)r->seq);
		m->eval_mode = 1;
		model_use_slot(m, 0);
		for (int64_t e = 0; e < r->a->eval_iters && !failed; e++) {
			for (int k = 0; k < micro; k++) {
				/* forward only, through the pipeline: receive, compute, pass on */
				failed |= batch_load(r, split, si, *pos, k) < 0;
				if (!m->first)
					dd->p2p(dd, NULL, 0, 0, model_stage_input(m), xb, dd->pp_rank - 1);
				sum += model_forward_batch(m, &r->mb, 0.0f, 0, 0, NULL, &bad);
				part[0] += m->loss_lm;
				part[1] += m->loss_sop;
				if (!m->last)
					dd->p2p(dd, model_stage_output(m), xb, dd->pp_rank + 1, NULL, 0, 0);
				n++;
			}
			*pos += gbs;
		}
		m->eval_mode = 0;
		r->cur = cur;
		model_set_seq(m, cur);
		if (dist_any(dd, DIST_WORLD, failed) || !n)
			continue;
		/* Megatron's evaluate: each loss of the loss dict averaged, printed as "KEY value" and
		 * "KEY PPL" in its order - lm loss, then BERT's sop loss */
		double v[3] = {m->last ? sum / n : 0, m->last ? part[0] / n : 0, m->last ? part[1] / n : 0};
		dd->sum_f64(dd, DIST_PP, v, 3);
		dd->sum_f64(dd, DIST_DP, v, 3);
		for (int q = 0; q < 3; q++)
			v[q] /= dd->dp;
		double loss = r->bert ? v[1] : v[0], ppl = exp(fmin(20, loss));
		int sop = r->bert && m->cfg.binary_head;
		char line[512], prefix[160], tag[256];
		int len = snprintf(line, sizeof line, " %s%s loss %s | lm loss value: %.6E | lm loss "
				   "PPL: %.6E | ", set->name ? set->name : "validation", "", label,
				   loss, ppl);
		if (sop && len < (int)sizeof line)
			len += snprintf(line + len, sizeof line - len, "sop loss value: %.6E | sop loss "
					"PPL: %.6E | ", v[2], exp(fmin(20, v[2])));
		char dash[520];
		if (len > (int)sizeof dash - 2)
			len = sizeof dash - 2;
		memset(dash, '-', len + 1);
		dash[len + 1] = 0;
		logs_out("%s\n%s\n%s\n", dash, line, dash);
		fflush(stdout);
		if (split != FEED_VALID || iteration < 0)
			continue;
		snprintf(prefix, sizeof prefix, "lm-loss-validation%s%s", set->name ? "/" : "",
			 set->name ? set->name : "");
		snprintf(tag, sizeof tag, "%s/lm loss validation", prefix);
		logs_scalar(r, tag, iteration, loss);
		snprintf(tag, sizeof tag, "%s/lm loss validation vs samples", prefix);
		logs_scalar(r, tag, r->st.consumed_samples, loss);
		snprintf(tag, sizeof tag, "%s/lm loss validation vs tokens", prefix);
		logs_scalar(r, tag, r->st.consumed_tokens, loss);
		if (r->a->tb_ppl) {
			snprintf(tag, sizeof tag, "%s/lm loss validation ppl", prefix);
			logs_scalar(r, tag, iteration, ppl);
			snprintf(tag, sizeof tag, "%s/lm loss validation ppl vs samples", prefix);
			logs_scalar(r, tag, r->st.consumed_samples, ppl);
		}
		if (sop) {
			snprintf(tag, sizeof tag, "%s/sop loss validation", prefix);
			logs_scalar(r, tag, iteration, v[2]);
			snprintf(tag, sizeof tag, "%s/sop loss validation vs samples", prefix);
			logs_scalar(r, tag, r->st.consumed_samples, v[2]);
			snprintf(tag, sizeof tag, "%s/sop loss validation vs tokens", prefix);
			logs_scalar(r, tag, r->st.consumed_tokens, v[2]);
			if (r->a->tb_ppl) {
				snprintf(tag, sizeof tag, "%s/sop loss validation ppl", prefix);
				logs_scalar(r, tag, iteration, exp(fmin(20, v[2])));
				snprintf(tag, sizeof tag, "%s/sop loss validation ppl vs samples", prefix);
				logs_scalar(r, tag, r->st.consumed_samples, exp(fmin(20, v[2])));
			}
		}
	}
}
