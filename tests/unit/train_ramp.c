/* train_ramp.c - Megatron's batch-size ramp-up, counted as megatron/microbatches.py and
 * update_train_iters() count it.  The anchors are the runs' own logs: BLOOM-176B printed
 * "iteration 3707/ 128728 | consumed samples: 59312 | ... global batch size: 16" and the 13B
 * "iteration 168000/ 311541", the totals Megatron computed from these very flags; the per-stage
 * hand figures are the READMEs' (4805, 2402 and 18146 for the 176B; 4960, 2480, 1653, 1240 for
 * the 13B). */
#include "t.h"
#include "train/data/ramp.h"

#include <stdlib.h>

static struct ramp r176(void)
{
	struct ramp r;
	char err[256];
	if (ramp_init(&r, 16, 16, 9765625, 2048, err, sizeof err) < 0 || ramp_build(&r) < 0)
		abort();
	ramp_finish(&r, ramp_train_iters(&r, 220000000));
	return r;
}

static struct ramp r13(void)
{
	struct ramp r;
	char err[256];
	if (ramp_init(&r, 16, 16, 5000000, 1024, err, sizeof err) < 0 || ramp_build(&r) < 0)
		abort();
	ramp_finish(&r, ramp_train_iters(&r, 300000000));
	return r;
}

static int row_of(const struct ramp *r, int64_t gbs)
{
	for (int i = 0; i < r->nst; i++)
		if (r->st[i].gbs == gbs)
			return i;
	return -1;
}

int main(void)
{
	T_CASE("bloom176b_total_iterations_match_its_log") {
		struct ramp r = r176();
		T_ASSERT(r.num_incr == 127);
		T_ASSERT(r.per > 76894.685 && r.per < 76894.686);
		T_ASSERT(r.iters == 128728);
		T_ASSERT(r.ramp_steps == 26076);
		T_ASSERT(r.ramp_consumed == 9766880);
		ramp_free(&r);
	}
	T_CASE("bloom176b_iteration_3707_runs_at_gbs16_with_59312_consumed") {
		struct ramp r = r176();
		T_ASSERT(ramp_consumed(&r, 3707) == 59312);
		T_ASSERT(ramp_gbs(&r, 59312) == 16);
		ramp_free(&r);
	}
	T_CASE("bloom176b_hand_figures_within_one_step_per_stage") {
		struct ramp r = r176();
		int i16 = row_of(&r, 16), i32 = row_of(&r, 32), i384 = row_of(&r, 384);
		T_ASSERT(r.st[i16].hand_steps == 4805 && r.st[i16].steps == 4806);
		T_ASSERT(r.st[i32].hand_steps == 2402 && r.st[i32].steps == 2403);
		/* the README's perl one-liner: 18146 steps through GBS 384 */
		T_ASSERT(r.st[i384].hand_cum == 18146);
		T_ASSERT(r.st[i384].first_step + r.st[i384].steps - 1 == 18148);
		for (int i = 0; i < r.nst - 1; i++)
			T_ASSERT(llabs(r.st[i].steps - r.st[i].hand_steps) <= 1);
		T_ASSERT(r.nst == 128);  /* 127 ramp stages 16..2032, then 2048 */
		T_ASSERT(r.st[r.nst - 1].gbs == 2048 && r.st[r.nst - 2].gbs == 2032);
		ramp_free(&r);
	}
	T_CASE("tr1_13b_total_iterations_match_its_log") {
		struct ramp r = r13();
		T_ASSERT(r.iters == 311541);
		int i16 = row_of(&r, 16), i32 = row_of(&r, 32), i48 = row_of(&r, 48), i64 = row_of(&r, 64);
		T_ASSERT(r.st[i16].hand_steps == 4960 && r.st[i16].steps == 4961);
		T_ASSERT(r.st[i32].hand_steps == 2480 && r.st[i32].steps == 2480);
		T_ASSERT(r.st[i48].hand_steps == 1653 && r.st[i48].steps == 1654);
		T_ASSERT(r.st[i64].hand_steps == 1240 && r.st[i64].steps == 1240);
		ramp_free(&r);
	}
	T_CASE("tr1_13b_iteration_168000_consumed_153013584_as_its_log") {
		struct ramp r = r13();
		/* "iteration 168000/ 311541 | consumed samples: 153013584" (the final checkpoint) */
		T_ASSERT(ramp_consumed(&r, 168000) == 153013584);
		ramp_free(&r);
	}
	T_CASE("tr1_13b_warmup_of_216320_samples_is_8641_iterations_not_2000") {
		struct ramp r = r13();
		/* the README's 2000 steps assumed 160 steps per GBS stage (16*160*12*13/2 + 16*13*80);
		 * under the ramp the flags give, GBS 16 alone lasts 4961 steps */
		T_ASSERT(16 * 160 * 12 * 13 / 2 + 16 * 13 * 80 == 216320);
		T_ASSERT(ramp_iter_at(&r, 216320) == 8641);
		T_ASSERT(r.st[ramp_stage_of(&r, 8641)].gbs == 48);
		T_ASSERT(ramp_consumed(&r, 2000) == 32000);
		ramp_free(&r);
	}
	T_CASE("iter_at_is_the_first_iteration_reaching_the_samples") {
		struct ramp r = r176();
		int64_t xs[] = {1, 16, 17, 76896, 76897, 183105, 9765625, 9766880, 9766881, 200000000};
		for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
			int64_t n = ramp_iter_at(&r, xs[i]);
			T_ASSERT(ramp_consumed(&r, n) >= xs[i]);
			T_ASSERT(ramp_consumed(&r, n - 1) < xs[i]);
		}
		T_ASSERT(ramp_iter_at(&r, 0) == 0);
		ramp_free(&r);
	}
	T_CASE("consumed_follows_the_rule_step_by_step") {
		struct ramp r = r13();
		int64_t consumed = 0;
		for (int64_t n = 1; n <= 30000; n++) {
			consumed += ramp_gbs(&r, consumed);
			if (ramp_consumed(&r, n) != consumed) {
				T_ASSERT(ramp_consumed(&r, n) == consumed);
				break;
			}
		}
		ramp_free(&r);
	}
	T_CASE("constant_batch_drops_the_last_partial_batch") {
		struct ramp r;
		ramp_constant(&r, 1024);
		T_ASSERT(ramp_build(&r) == 0);
		T_ASSERT(ramp_train_iters(&r, 300000000) == 292968);
		T_ASSERT(ramp_iter_at(&r, 1025) == 2);
		T_ASSERT(r.nst == 1);
		ramp_free(&r);
	}
	T_CASE("short_run_loses_iterations_like_python_floor_division") {
		struct ramp r;
		char err[256];
		T_ASSERT(ramp_init(&r, 16, 16, 5000000, 1024, err, sizeof err) == 0);
		T_ASSERT(ramp_build(&r) == 0);
		/* (1000000 - 5000528) // 1024 = -3907 in Python */
		T_ASSERT(ramp_train_iters(&r, 1000000) == 23456 - 3907);
		ramp_free(&r);
	}
	T_CASE("increment_must_divide_the_distance") {
		struct ramp r;
		char err[256] = "";
		T_ASSERT(ramp_init(&r, 16, 16, 1000, 2050, err, sizeof err) < 0);
		T_ASSERT(strstr(err, "not a multiple of INCR 16") != NULL);
		T_ASSERT(ramp_init(&r, 4096, 16, 1000, 2048, err, sizeof err) < 0);
		T_ASSERT(ramp_init(&r, 0, 16, 1000, 2048, err, sizeof err) < 0);
	}
	T_DONE();
}
