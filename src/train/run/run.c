/* run - see run.h.  The loop, top to bottom: set up (setup.c), then per iteration the skip
 * ranges, the batch size and sequence length, the step queued (iter.c), the previous one
 * accounted; at the end a last save, the final evaluation and the summary. */
#include "train/run/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "units.h"
#include "xalloc.h"
#include "train/data/ramp.h"
#include "train/model/philox.h"
#include "train/run/batch.h"
#include "train/run/eval.h"
#include "train/run/iter.h"
#include "train/run/logs.h"
#include "train/run/save.h"
#include "train/run/setup.h"
#include "train/run/signals.h"
#include "train/run/state.h"

/* Megatron's cumulative-skip rule: the ranges of --skip-train-iteration-range, sorted, merged */
static int cmp_range(const void *x, const void *y)
{
	const int64_t *a = x, *b = y;
	return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* The sequence length of iteration `it`: DeepSpeed's scheduler asked for it, as Megatron-DeepSpeed
 * asks before each step (update_difficulty(iteration + 1)), advanced from where it stood - or
 * replayed from its start when the run went back (a resume, a rollback), so the lengths are a
 * function of the iteration alone.  Sets the model's length too. */
static void curriculum_at(struct run *r, int64_t it)
{
	if (!r->cl.enabled)
		return;
	if (it < r->cl_it) {
		r->cl.current = r->cl.min_difficulty;
		r->cl_it = 0;
	}
	for (; r->cl_it < it; r->cl_it++)
		cl_update(&r->cl, r->cl_it + 1);
	r->cur = r->cl.current < r->seq ? r->cl.current : r->seq;
	model_set_seq(&r->m, (int)r->cur);   /* 1..seq: checked at start-up (cl_check) */
}

int run_train(const struct train_args *a, const struct plan *p, const char *cmdline)
{
	static struct run r;
	char err[2048];
	r.a = a;
	r.p = p;
	r.cmdline = cmdline;

	if (signals_kill_switch(&r)) {
		logs_out("train: kill switch %s exists: exiting without training\n", a->kill_switch_path);
		return EXIT_OK;
	}
	signals_install();

	double t_start = units_now();
	r.fail_code = EXIT_USAGE;
	if (setup_run(&r, err, sizeof err) < 0) {
		if (!r.fail_said)
			warn("%s", err);
		return strstr(err, "out of memory") ? EXIT_FAILED : r.fail_code;
	}
	if (a->cuda_graph) {
		const char *why = iter_graph_blocker(&r);
		if (why) {
			warn("train: --cuda-graph cannot replay this run's step: %s", why);
			return EXIT_USAGE;
		}
	}

	/* skip ranges: sorted, merged */
	int64_t skip[ARGS_MAX_SKIP][2];
	int nskip = 0, next_skip = 0;
	memcpy(skip, a->skip, sizeof skip);
	qsort(skip, a->nskip, sizeof skip[0], cmp_range);
	for (int i = 0; i < a->nskip; i++) {
		if (nskip && skip[i][0] <= skip[nskip - 1][1] + 1) {
			if (skip[i][1] > skip[nskip - 1][1])
				skip[nskip - 1][1] = skip[i][1];
		} else {
			skip[nskip][0] = skip[i][0];
			skip[nskip++][1] = skip[i][1];
		}
	}

	struct ckpt_state *st = &r.st;
	struct loop L = {.t_start = t_start, .t_log = units_now(), .t_train = units_now(),
			 .last_saved = st->iteration, .rc = EXIT_OK};   /* a resumed run has nothing new to save yet */
	const char *blocker = iter_defer_blocker(&r);
	int deferred = blocker == NULL;
	if (blocker && r.m.ops->step_decide)   /* a backend that could keep them on the device */
		logs_out("train: each step's scalars are read back as it runs: %s\n", blocker);
	_Static_assert(sizeof(struct ops_step) <= DSTEP_BYTES, "DSTEP_BYTES");
	if (deferred && !(r.dsteps = r.m.ops->alloc(2 * DSTEP_BYTES))) {
		char oom[200];
		warn("%s; the step is not deferred", xalloc_msg(oom, sizeof oom,
			"the step scalars on the device", 2 * DSTEP_BYTES));
		deferred = 0;
	}

	int profiling = 0;   /* --profile on this rank */
	for (int i = 0; a->profile && i < a->nprofile_ranks; i++)
		profiling |= a->profile_ranks[i] == r.dist.rank;
	if (a->eval_only)   /* Megatron's do_train = False: straight to the final evaluation */
		logs_out("train: --eval-only: evaluating at iteration %lld, training nothing\n",
		    (long long)st->iteration);
	struct iter pend, q;
	int have_pend = 0;
	while (!a->eval_only && !L.stop) {
		int64_t it = (have_pend ? pend.it : st->iteration) + 1;
		if (it > r.iters)
			break;
		/* ranges already skipped before a checkpoint are done: the iteration counter does not
		 * move through a skip, so a resumed run would otherwise skip them again */
		while (next_skip < nskip && (skip[next_skip][1] < it || skip[next_skip][1] <= st->skip_through))
			next_skip++;
		if (next_skip < nskip && skip[next_skip][0] <= it) {
			if (have_pend) {   /* the counters below are the finished iterations' */
				have_pend = 0;
				if (iter_finish(&r, &L, &pend) < 0 || L.stop)
					break;
			}
			int64_t n = 0;
			for (int64_t k = it; k <= skip[next_skip][1]; k++)
				n += ramp_gbs(&p->ramp, st->consumed_samples);
			logs_out("Skipped iterations %lld to %lld due to --skip-train-iteration-range flag.\n",
			       (long long)it, (long long)skip[next_skip][1]);
			fflush(stdout);
			st->data_position += n;
			st->skip_through = skip[next_skip][1];
			next_skip++;
			continue;
		}
		if (profiling && it - 1 == a->profile_step_start)   /* Megatron-LM's points */
			r.m.ops->profiler(1);
		/* the batch-size ramp counts the samples of the iteration in flight too */
		int64_t gbs = ramp_gbs(&p->ramp, st->consumed_samples + (have_pend ? pend.gbs : 0));
		int64_t micro = gbs / (r.mbs * r.dist.dp);
		curriculum_at(&r, it);
		uint64_t key = philox_mix(philox_mix((uint64_t)a->seed, 0x7472616e), (uint64_t)st->data_position);
		memset(&q, 0, sizeof q);
		q.it = it;
		q.gbs = gbs;
		q.cur = r.cur;
		q.micro = micro;
		q.deferred = deferred;
		q.slot = (int)(it & 1);
		int qrc = deferred ? iter_queue(&r, &L, &q, have_pend ? &pend : NULL, key)
				   : iter_sync(&r, &L, &q, key);
		if (qrc < 0)
			break;
		if (qrc > 0)
			continue;
		int drain = !deferred || L.stop || iter_drain_after(&r, it);
		if (profiling && it == a->profile_step_end && !drain)
			r.m.ops->profiler(0);
		if (have_pend) {   /* iteration it is queued: now read it - 1 */
			have_pend = 0;
			if (iter_finish(&r, &L, &pend) < 0)
				break;
			/* a stop decided there comes after q, already applied: finished below */
		}
		if (drain || L.stop) {
			/* a read-back that drains the device is part of the profiled step */
			if (profiling && it == a->profile_step_end) {
				iter_read(&r, &q);
				r.m.ops->profiler(0);
			}
			if (iter_finish(&r, &L, &q) < 0)
				break;
		} else {
			pend = q;
			have_pend = 1;
		}
	}
	if (have_pend && L.rc == EXIT_OK)
		iter_finish(&r, &L, &pend);
	int rc = L.rc, stop = L.stop;
	int64_t last_saved = L.last_saved;
	const char *why_stop = L.why_stop;
	if (rc == EXIT_OK && a->save && last_saved != st->iteration && st->iteration > 0 &&
	    save_checkpoint(&r) < 0)
		rc = EXIT_FAILED;
	if (stop && why_stop)
		logs_out("train: stopping at iteration %lld on %s\n", (long long)st->iteration, why_stop);
	if (rc == EXIT_OK && !stop && (a->eval_only || st->iteration >= r.iters)) {
		/* as Megatron: both held-out splits once more when training is complete */
		eval_split(&r, FEED_VALID, "at the end of training for val data", -1);
		eval_split(&r, FEED_TEST, "at the end of training for test data", -1);
	}
	logs_close(&r, rc, stop, t_start);
	batch_free(&r);
	feed_close(&r.feed);
	buckets_free(&r.bk);
	if (r.dsteps)
		r.m.ops->free(r.dsteps);
	model_free(&r.m);
	if (r.dist.finish)
		r.dist.finish(&r.dist);
	return rc;
}
