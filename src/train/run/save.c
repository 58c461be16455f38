/* save - see save.h. */
#include "train/run/save.h"

#include <stdio.h>
#include <string.h>

#include "msg.h"
#include "units.h"
#include "train/run/logs.h"

int save_checkpoint(struct run *r)
{
	char err[1024];
	if (!r->a->save)
		return 0;
	double t0 = units_now();
	struct keep k = {r->a->save_keep, r->a->save_keep_every};
	struct keep_report pr;
	r->st.tokenizer = r->tokrec;
	if (ckpt_save(r->a->save, &r->m, &r->dist, &r->st, r->cmdline, &k, &pr, err, sizeof err) < 0) {
		warn("saving checkpoint at iteration %lld failed: %s", (long long)r->st.iteration, err);
		return -1;
	}
	logs_out("saved checkpoint at iteration %8lld to %s (%.2f s)\n", (long long)r->st.iteration,
	       r->a->save, units_now() - t0);
	/* what the pruning did (world rank 0's report; the others' is empty) */
	char policy[96];
	snprintf(policy, sizeof policy, "--save-keep %lld", (long long)k.newest);
	if (k.every > 0)
		snprintf(policy + strlen(policy), sizeof policy - strlen(policy),
			 " --save-keep-every %lld", (long long)k.every);
	if (pr.removed)
		logs_out("removed %s from %s (%s)\n", pr.removed_names, r->a->save, policy);
	fflush(stdout);
	if (pr.held)
		warn("%s: kept %s for now: a reader holds %s .lock; tried again after the next save",
		     r->a->save, pr.held_names, pr.held > 1 ? "their" : "its");
	if (pr.linked)
		warn("%s: kept %s: %s a symbolic link, and pruning removes only step directories "
		     "inside --save (remove the link by hand to let it go)", r->a->save, pr.linked_names,
		     pr.linked > 1 ? "each is" : "it is");
	if (pr.nolock)
		warn("%s: %s removes nothing: %s", r->a->save, policy, pr.err);
	else if (*pr.err)
		warn("%s: %s could not remove a step: %s", r->a->save, policy, pr.err);
	return 0;
}

int save_rollback(struct run *r, int64_t iteration, double loss, char *err, size_t errlen)
{
	int64_t spike_end = r->st.data_position;
	char loaded[4200];
	struct ckpt_state ck = r->st;
	if (!r->a->save)
		return errf(err, errlen, "--spike-policy rollback needs --save");
	if (++r->rollbacks > MAX_ROLLBACKS)
		return errf(err, errlen, "%d rollbacks and the loss still spikes (iteration %lld, loss "
			    "%g): stopping so a human can look", MAX_ROLLBACKS, (long long)iteration, loss);
	int rc = ckpt_load(r->a->save, &r->m, &ck, loaded, sizeof loaded, err, errlen);
	if (rc <= 0)
		return rc < 0 ? -1 : errf(err, errlen, "loss spike at iteration %lld but no checkpoint "
					  "in --save %s to roll back to", (long long)iteration, r->a->save);
	int64_t skipped = spike_end - ck.data_position;
	struct optim o = r->st.optim;
	o.step = ck.optim.step;
	o.good_steps = ck.optim.good_steps;
	o.hysteresis_left = ck.optim.hysteresis_left;
	o.loss_scale = ck.optim.loss_scale;
	struct sched s = r->st.sched;
	s.num_steps = ck.sched.num_steps;
	s.num_tokens = ck.sched.num_tokens;
	s.warmup_tokens = ck.sched.warmup_tokens;
	int64_t spikes = r->st.spikes_total;
	r->st = ck;
	r->st.optim = o;
	r->st.sched = s;
	r->st.spikes_total = spikes;
	r->st.data_position = spike_end;   /* the data between the checkpoint and the spike is skipped */
	logs_out("loss spike at iteration %lld (lm loss %.6E): rolled back to %s (iteration %lld) and "
	       "skipped the %lld samples it trained on since\n", (long long)iteration, loss, loaded,
	       (long long)ck.iteration, (long long)skipped);
	fflush(stdout);
	return 0;
}
