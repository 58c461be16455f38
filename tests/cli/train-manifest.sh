#!/usr/bin/env bash
# A checkpoint's manifest is input from elsewhere: every counter is checked against its range
# and against the others before anything is loaded (exit 2, naming the field and the file), and a
# run never saves over a global_stepN it did not write itself - it stops before its first step.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
	--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
	--min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 4
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1 --eval-iters 0)
tr() { "$TR" "${MODEL[@]}" "$@"; }
# edit DIR/manifest.json: FIELD (dotted) = VALUE (a Python literal)
edit() { "$PY" - "$@" <<'PYEOF'
import json, sys
p, field, value = sys.argv[1] + "/manifest.json", sys.argv[2], eval(sys.argv[3])
m = json.load(open(p))
o = m
keys = field.split(".")
for k in keys[:-1]:
    o = o[k]
o[keys[-1]] = value
json.dump(m, open(p, "w"), indent=1)
PYEOF
}
sums() { (cd "$1" && find . -type f ! -name .lock | sort | xargs sha256sum); }

tr --train-iters 8 --save d --save-interval 4 >d.out 2>d.err ||
	{ fail made_checkpoints "$(tail -3 d.err)"; exit 0; }
[ -d d/global_step4 ] && [ -d d/global_step8 ] || { fail made_checkpoints "$(ls d)"; exit 0; }

# --- the issue's case: iteration -5 in the newest step, resumed into the same directory ---
cp -r d e
edit e/global_step8 iteration -5
sums e >before.sum
tr --train-iters 16 --save-interval 4 --load e --save e --use-checkpoint-lr-scheduler >e.out 2>e.err
rc=$?
[ $rc = 2 ] && ok negative_iteration_stops_the_run || fail negative_iteration_stops_the_run "exit $rc: $(tail -3 e.err)"
contains negative_iteration_names_the_field_and_file e.err 'e/global_step8/manifest.json: "iteration" is -5, below 0'
contains run_would_save_over_a_step_it_did_not_write e.err 'global_step8 is there, past iteration 4 .* would save over it'
sums e >after.sum
cmp -s before.sum after.sum && ok intact_steps_are_not_overwritten ||
	fail intact_steps_are_not_overwritten "$(diff before.sum after.sum | head -5)"
lacks no_negative_step_is_saved <(ls e) 'global_step-'

# --- each field out of its range, in a directory whose only step is edited: exit 2 naming it ---
one() {  # NAME FIELD VALUE PATTERN
	rm -rf f && mkdir f && cp -r d/global_step4 f/ && echo global_step4 >f/latest
	edit f/global_step4 "$2" "$3"
	tr --train-iters 12 --load f >f.out 2>f.err
	local rc=$?
	if [ $rc = 2 ] && grep -Eq -- "$4" f.err; then ok "$1"; else fail "$1" "exit $rc: $(tail -2 f.err)"; fi
}
one optimizer_step_below_0_refused optimizer.step -1 'f/global_step4/manifest.json: "optimizer.step" is -1, below 0'
one data_position_below_0_refused data_position -7 '"data_position" is -7, below 0'
one consumed_samples_below_0_refused consumed_samples -100 '"consumed_samples" is -100, below 0'
one consumed_past_data_position_refused consumed_samples 1000 '"consumed_samples" 1000 is past "data_position" 16'
one scheduler_num_steps_below_0_refused scheduler.num_steps -1000000 '"scheduler.num_steps" is -1000000, below 0'
one huge_counter_refused consumed_tokens '2**62' '"consumed_tokens" is 4611686018427387904, above 2\^53'
one zero_loss_scale_refused optimizer.loss_scale 0.0 '"optimizer.loss_scale" is 0, not a finite positive'
one negative_lr_refused scheduler.max_lr -0.5 '"scheduler.max_lr" is -0.5'
one iteration_other_than_the_directory_refused iteration 12 '"iteration" is 12 in a directory named global_step4'
one tp_out_of_range_refused layout.tp 0 'layout TP=0 PP=1, outside'
one nan_past_skipped_refused nan_iterations 3 '0 skipped and 3 nan iterations at iteration 4'
one valid_position_below_0_refused valid_positions '[-3]' '"valid_positions"\[0\] is not a count'

# --- a fresh run into a --save that holds another run's steps: stopped before the first step ---
rm -rf g && cp -r d g && sums g >g-before.sum
tr --train-iters 8 --save-interval 4 --save g >g.out 2>g.err
rc=$?
[ $rc = 2 ] && ok fresh_run_into_another_runs_steps_refused || fail fresh_run_into_another_runs_steps_refused "exit $rc: $(tail -2 g.err)"
contains fresh_run_refusal_names_the_step g.err 'global_step4 is there, past iteration 0'
lacks fresh_run_trains_nothing g.out '^ iteration '
sums g >g-after.sum
cmp -s g-before.sum g-after.sum && ok other_runs_steps_untouched || fail other_runs_steps_untouched "$(diff g-before.sum g-after.sum | head -3)"
# steps beyond the run's last iteration cannot collide: that run goes ahead
rm -rf h && mkdir h && cp -r d/global_step8 h/
tr --train-iters 6 --save-interval 3 --save h >h.out 2>h.err && [ -d h/global_step6 ] &&
	ok steps_past_the_last_iteration_do_not_collide || fail steps_past_the_last_iteration_do_not_collide "$(tail -2 h.err)"

# --- the ordinary resume into the same directory still works, and adds the new steps ---
cp -r d k
tr --train-iters 12 --save-interval 4 --load k --save k --use-checkpoint-lr-scheduler >k.out 2>k.err
rc=$?
[ $rc = 0 ] && [ -d k/global_step12 ] && grep -q 'resumed from k/global_step8' k.out &&
	ok resume_into_the_same_save_works || fail resume_into_the_same_save_works "exit $rc: $(tail -2 k.err)"

# --- the tools read the same manifest with the same checks (src/ckpt/manifest.c) ---
rm -rf m && mkdir m && cp -r d/global_step4 m/ && echo global_step4 >m/latest
edit m/global_step4 iteration -5
"$BIN/ckpt-merge-tp" --input m --output m.out >mt.out 2>mt.err
rc=$?
[ $rc = 2 ] && grep -q 'm/global_step4/manifest.json: "iteration" is -5, below 0' mt.err && [ ! -e m.out ] &&
	ok merge_tool_refuses_a_negative_iteration || fail merge_tool_refuses_a_negative_iteration "exit $rc: $(tail -2 mt.err)"

# --- a run killed between renaming its step into place and naming it in `latest` ---
# The save recorded the step it was publishing (.lmtk-publishing); the next run on the directory
# finishes that publish and resumes from the step, instead of refusing it as another run's.
killed() {  # DIR: d's steps, `latest` still naming global_step4, global_step8 complete
	rm -rf "$1" && cp -r d "$1" && echo global_step4 >"$1/latest" &&
		echo 4 >"$1/latest_checkpointed_iteration.txt"
}
killed p && echo global_step8 >p/.lmtk-publishing
tr --train-iters 12 --save-interval 4 --use-checkpoint-lr-scheduler --load p --save p >p.out 2>p.err
rc=$?
[ $rc = 0 ] && grep -q '^train: resumed from p/global_step8: iteration 8,' p.out &&
	ok killed_publish_is_finished_and_resumed_from ||
	fail killed_publish_is_finished_and_resumed_from "exit $rc: $(grep -m1 resumed p.out) $(tail -2 p.err)"
contains killed_publish_is_named p.out 'global_step8 was saved in full by a run killed before `latest` named it'
[ "$(cat p/latest)" = global_step12 ] && [ ! -e p/.lmtk-publishing ] &&
	ok killed_publish_record_is_dropped || fail killed_publish_record_is_dropped "latest $(cat p/latest); $(ls -a p | tr '\n' ' ')"
# the same directory without the record: a step past `latest` that no save of ours was
# publishing is another's, and the run stops before it
killed q
tr --train-iters 12 --save-interval 4 --use-checkpoint-lr-scheduler --load q --save q >q.out 2>q.err
rc=$?
[ $rc = 2 ] && grep -q 'global_step8 is there, past iteration 4' q.err &&
	ok step_past_latest_without_a_record_is_refused || fail step_past_latest_without_a_record_is_refused "exit $rc: $(tail -2 q.err)"
# killed while a re-saved step was moved aside: the earlier copy goes back and is resumed from
rm -rf s && cp -r d s && mv s/global_step8 "s/.global_step8.tmp.old.999999@$(hostname)" &&
	echo global_step8 >s/.lmtk-publishing
tr --train-iters 12 --save-interval 4 --use-checkpoint-lr-scheduler --load s --save s >s.out 2>s.err
rc=$?
[ $rc = 0 ] && grep -q '^train: resumed from s/global_step8: iteration 8,' s.out &&
	grep -q 'global_step8 is back in place' s.out &&
	ok moved_aside_step_is_put_back || fail moved_aside_step_is_put_back "exit $rc: $(grep -m1 resumed s.out) $(tail -2 s.err)"
# the record is read without trust: a link or another text stops the run, naming it
killed u && ln -s ../d/latest u/.lmtk-publishing
tr --train-iters 12 --save-interval 4 --use-checkpoint-lr-scheduler --load u --save u >u.out 2>u.err
rc=$?
[ $rc = 2 ] && grep -q 'u/.lmtk-publishing: a symbolic link' u.err && [ "$(cat d/latest)" = global_step8 ] &&
	ok publish_record_link_refused || fail publish_record_link_refused "exit $rc: $(tail -2 u.err)"
killed v && echo '../../etc' >v/.lmtk-publishing
tr --train-iters 12 --save-interval 4 --use-checkpoint-lr-scheduler --load v --save v >v.out 2>v.err
rc=$?
[ $rc = 2 ] && grep -q 'v/.lmtk-publishing: not a record of a step being published' v.err &&
	[ "$(cat v/latest)" = global_step4 ] &&
	ok publish_record_garbage_refused || fail publish_record_garbage_refused "exit $rc: $(tail -2 v.err)"
