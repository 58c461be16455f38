#!/usr/bin/env bash
# train as a run: on the real Megatron-written dataset (../shared/data/megatron), a tiny model on
# the CPU - Megatron's log line, checkpoints, resume that is bit-exact, signals, the kill switch,
# kill -9 during saves, a corrupt checkpoint, the schedule check on resume, skipped ranges, loss
# spikes, TensorBoard tags read back by an independent reader (tests/ref/tfevents-read.py).
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
MEG=$(tiny_dataset) || exit 3   # a dataset to train on; the reference one is not needed
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3

MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
	--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
	--min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 4 --adam-beta2 0.95
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1)
tr() { "$TR" "${MODEL[@]}" "$@"; }
# in the background, so that $! is train itself (a backgrounded function would be a subshell)
trbg() { "$TR" "${MODEL[@]}" "$@" & }

# --- a run: the log line, the loss going down, validation, checkpoints ---
tr --train-iters 20 --log-interval 1 --eval-interval 10 --eval-iters 2 --save a --save-interval 10 \
	--tensorboard-dir tb --log-timers-to-tensorboard --log-validation-ppl-to-tensorboard \
	--log-batch-size-to-tensorboard >a.out 2>a.err
rc=$?
[ $rc = 0 ] && ok run_exits_0 || fail run_exits_0 "exit $rc: $(tail -3 a.err)"
# the exact shape of Megatron-DeepSpeed's line (widths included)
LINE='^ iteration +[0-9]+/ +20 \| consumed samples: +[0-9]+ \| consumed tokens: +[0-9]+ \| elapsed time per iteration \(s\): [0-9]+\.[0-9]{2} \| learning rate: [0-9]\.[0-9]{3}E[-+][0-9]{2} \| global batch size: +4 \| lm loss: [0-9]\.[0-9]{6}E[-+][0-9]{2} \| grad norm: [0-9]+\.[0-9]{3} \| num zeros: [0-9]+\.[0-9] \| number of skipped iterations: +0 \| number of nan iterations: +0 \| samples per second: [0-9]+\.[0-9]{3} \| TFLOPs: [0-9]+\.[0-9]{2} \|'
n=$(grep -cE "$LINE" a.out)
[ "$n" = 20 ] && ok log_line_is_megatrons_every_iteration || fail log_line_is_megatrons_every_iteration "$n of 20 lines match: $(grep -m1 ' iteration ' a.out)"
check log_line_widths_match_megatron grep -q '^ iteration        7/      20 | consumed samples:           28 | consumed tokens:         1792 |' a.out
# after Megatron's fields, and only there, the time remaining: nothing left on the last line
check log_line_ends_with_the_time_remaining grep -qE '^ iteration +20/ +20 \| .* \| TFLOPs: [0-9]+\.[0-9]{2} \|( MFU: [0-9.]+% \|)? time remaining: 0:00:00 \|$' a.out
n=$(grep -cE "$LINE( MFU: [0-9.]+% \|)? time remaining: [0-9]+:[0-9]{2}:[0-9]{2} \|\$" a.out)
[ "$n" = 20 ] && ok log_line_time_remaining_is_the_last_field || fail log_line_time_remaining_is_the_last_field "$n of 20 lines: $(grep -m1 ' iteration ' a.out)"
# ... and it is the iterations left times the time per iteration: on a long run stopped early
# (iteration k of M = 2000), within a factor 3 of (M - k) x the line's own time per iteration
# (from samples per second, the same time with more digits: global batch 4 / it)
tr --train-iters 2000 --exit-interval 8 --log-interval 2 >eta.out 2>eta.err
if [ "$(grep -c '^ iteration ' eta.out)" = 4 ]; then
	bad=$(grep '^ iteration ' eta.out | awk '{
		k = $2 + 0; m = $3 + 0
		match($0, /samples per second: [0-9.]+/); sps = substr($0, RSTART + 20, RLENGTH - 20) + 0
		if (!match($0, /time remaining: [0-9]+:[0-9][0-9]:[0-9][0-9] \|$/)) { print "no field: " $0; next }
		split(substr($0, RSTART + 16, RLENGTH - 18), h, ":"); left = h[1] * 3600 + h[2] * 60 + h[3]
		want = (m - k) * 4 / sps
		if (left < want / 3 || left > want * 3) printf "iteration %d: %d s left, (%d - %d) x %.4f s = %.0f s\n", k, left, m, k, 4 / sps, want
	}')
	[ -z "$bad" ] && ok time_remaining_is_iterations_left_times_time_per_iteration ||
		fail time_remaining_is_iterations_left_times_time_per_iteration "$bad"
else
	fail time_remaining_is_iterations_left_times_time_per_iteration "exit: $(tail -2 eta.err)"
fi
# the schedule: warmup of 4 iterations (16 samples) to 1e-3, then cosine to 1e-4 at 80 samples
check lr_after_warmup_is_the_peak grep -q '^ iteration        4/.*learning rate: 1.000E-03 |' a.out
check lr_at_the_end_is_min_lr grep -q '^ iteration       20/.*learning rate: 1.000E-04 |' a.out
lr10=$(grep '^ iteration       10/' a.out | sed 's/.*learning rate: \([^ ]*\) .*/\1/')
want=$("$PY" -c 'import math; r=(40-16)/(80-16); print("%.3E" % (1e-4 + 0.5*(math.cos(math.pi*r)+1)*(1e-3-1e-4)))')
[ "$lr10" = "$want" ] && ok lr_follows_megatrons_cosine || fail lr_follows_megatrons_cosine "$lr10 != $want"
first=$(grep -m1 '^ iteration ' a.out | sed 's/.*lm loss: \([^ ]*\) .*/\1/')
last=$(grep '^ iteration ' a.out | tail -1 | sed 's/.*lm loss: \([^ ]*\) .*/\1/')
"$PY" -c "import sys; sys.exit(not float('$last') < float('$first') - 0.3)" &&
	ok loss_goes_down || fail loss_goes_down "first $first, last $last"
check validation_line_printed grep -qE '^ validation loss at iteration 10 \| lm loss value: [0-9]\.[0-9]{6}E\+[0-9]{2} \| lm loss PPL: [0-9]\.[0-9]{6}E\+[0-9]{2} \| $' a.out
check end_of_training_validation_and_test grep -q 'validation loss at the end of training for test data' a.out
[ -s a/global_step10/rank_tp00_pp000.safetensors ] && [ -s a/global_step20/manifest.json ] &&
	[ "$(cat a/latest)" = global_step20 ] && [ "$(cat a/latest_checkpointed_iteration.txt)" = 20 ] &&
	ok checkpoint_layout || fail checkpoint_layout "$(ls -R a | head -20)"
"$PY" - a/global_step20/manifest.json <<'EOF' && ok manifest_records_the_run || fail manifest_records_the_run "$(head -c 600 a/global_step20/manifest.json)"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["iteration"] == 20 and m["consumed_samples"] == 80 and m["consumed_tokens"] == 80 * 64
assert m["layout"] == {"tp": 1, "pp": 1, "dp": 1}
assert m["scheduler"]["num_steps"] == 80 and m["scheduler"]["style"] == "cosine"
assert m["optimizer"]["step"] == 20 and len(m["files"]["rank_tp00_pp000.safetensors"]["crc32c"]) == 8
assert m["model"]["num_layers"] == 2 and m["model"]["padded_vocab_size"] == 5120
EOF
ls .*tmp* a/.*tmp* >/dev/null 2>&1 && fail no_temporaries_left "$(ls -a a)" || ok no_temporaries_left

# TensorBoard: read back by an independent reader, Megatron's tags
if "$PY" "$TOP/tests/ref/tfevents-read.py" tb >tb.txt 2>tb.err; then
	ok tfevents_read_back
	for tag in "learning-rate/learning-rate" "learning-rate/learning-rate vs samples" \
		"learning-rate/learning-rate vs tokens" "lm-loss-training/lm loss" \
		"lm-loss-training/lm loss vs samples" "lm-loss-training/lm loss vs tokens" \
		"lm-loss-training/lm loss vs gigaflos (without embeddings)" "batch-size/batch-size" \
		"grad-norm/grad-norm" "iteration-time/iteration-time" "iteration-time/samples per second" \
		"iteration-time/TFLOPs per gpu (estimated)" "lm-loss-validation/lm loss validation" \
		"lm-loss-validation/lm loss validation ppl" "steps-vs-samples/y=steps,x=samples"; do
		grep -qF "$tag	" tb.txt || { fail "tfevents_has_tag_$tag" "missing"; continue; }
	done
	ok tfevents_has_megatrons_tags
	# the loss at iteration 7 is the log line's (the line prints 7 significant digits)
	tbl=$(awk -F'\t' '$1 == "lm-loss-training/lm loss" && $2 == 7 { print $3 }' tb.txt)
	logl=$(grep '^ iteration        7/' a.out | sed 's/.*lm loss: \([^ ]*\) .*/\1/')
	"$PY" -c "import sys; sys.exit(abs(float('$tbl') - float('$logl')) > 1e-5 * float('$logl'))" &&
		ok tfevents_loss_equals_log_line || fail tfevents_loss_equals_log_line "tb $tbl, log $logl"
	check tfevents_vs_samples_uses_samples_as_step grep -qP '^lm-loss-training/lm loss vs samples\t28\t' tb.txt
	check tfevents_args_text grep -q '^TEXT	args	0	.*--num-layers 2' tb.txt
else
	fail tfevents_read_back "$(cat tb.err)"
fi
# TensorBoard's own reader, where the tensorboard package is installed (the GPU machines)
TBPY=
for p in "$PY" python3; do "$p" -c 'import tensorboard' 2>/dev/null && { TBPY=$p; break; }; done
if [ -n "$TBPY" ]; then
	"$TBPY" - tb <<'EOF' >tbacc.out 2>&1 && ok tensorboard_event_accumulator_reads_them || fail tensorboard_event_accumulator_reads_them "$(tail -3 tbacc.out)"
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1]); acc.Reload()
tags = acc.Tags()["scalars"]
assert "lm-loss-training/lm loss" in tags and "learning-rate/learning-rate" in tags, tags
assert len(acc.Scalars("lm-loss-training/lm loss")) == 20
EOF
else
	skip tensorboard_event_accumulator_reads_them "the tensorboard Python package is not installed here (the GPU machines have it)"
fi

# --- resume is bit-exact: 20 straight == 10, stop, 10 more (dropout on: RNG state matters) ---
R=(--train-iters 20 --log-interval 1 --eval-interval 5 --eval-iters 1 --hidden-dropout 0.1
	--attention-dropout 0.1 --save-interval 10)
tr "${R[@]}" --save s >s.out 2>&1
tr "${R[@]}" --save h --exit-interval 10 >h1.out 2>&1; rc1=$?
tr "${R[@]}" --save h --load h >h2.out 2>&1; rc2=$?
check exit_interval_stops_and_saves grep -q 'train: stopping at iteration 10 on --exit-interval' h1.out
[ $rc1 = 0 ] && [ $rc2 = 0 ] && grep -q 'train: resumed from h/global_step10: iteration 10, 40 samples' h2.out &&
	ok resume_continues_from_the_checkpoint || fail resume_continues_from_the_checkpoint "rc $rc1 $rc2: $(grep train: h2.out)"
if cmp -s s/global_step20/rank_tp00_pp000.safetensors h/global_step20/rank_tp00_pp000.safetensors; then
	ok resume_is_bit_exact_weights_and_moments
else
	fail resume_is_bit_exact_weights_and_moments "the step-20 shards differ"
fi
losses() { grep '^ iteration ' "$1" | sed 's/.*iteration *\([0-9]*\)\/.*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2 \3/'; }
diff <(losses s.out | tail -10) <(losses h2.out) >/dev/null && [ "$(losses h2.out | wc -l)" = 10 ] &&
	ok resume_is_bit_exact_losses || fail resume_is_bit_exact_losses "$(diff <(losses s.out | tail -10) <(losses h2.out) | head -4)"
vals() { grep '^ validation loss at iteration' "$1" | sed 's/.*iteration \([0-9]*\) .*value: \([^ ]*\) .*/\1 \2/'; }
diff <(vals s.out | awk '$1 > 10') <(vals h2.out | awk '$1 > 10') >/dev/null && [ "$(vals h2.out | wc -l)" -ge 2 ] &&
	ok resume_continues_the_validation_data || fail resume_continues_the_validation_data "$(diff <(vals s.out) <(vals h2.out) | head -4)"
check stop_line_after_the_save grep -Pzq 'saved checkpoint at iteration +10 to h \(.*\n(.*\n)?train: stopping at iteration 10 on --exit-interval' h1.out

# --- the schedule of a checkpoint must match the flags, or say which wins ---
tr --train-iters 20 --lr 2e-3 --eval-iters 0 --load h >lr.out 2>lr.err
rc=$?
[ $rc = 2 ] && grep -q -- '--lr is 0.001 in the checkpoint, 0.002 now; add --override-lr-scheduler' lr.err &&
	ok changed_lr_on_resume_is_refused || fail changed_lr_on_resume_is_refused "exit $rc: $(cat lr.err)"
tr --train-iters 20 --lr 2e-3 --eval-iters 0 --load h --override-lr-scheduler >lr2.out 2>&1 &&
	ok override_lr_scheduler_accepts || fail override_lr_scheduler_accepts "$(tail -2 lr2.out)"

# --- a corrupt newest checkpoint: fall back to the newest intact one ---
cp -r s c
"$PY" -c "
import sys; p = 'c/global_step20/rank_tp00_pp000.safetensors'
b = bytearray(open(p, 'rb').read()); b[-100] ^= 0x40; open(p, 'wb').write(b)"
tr --train-iters 20 --eval-iters 0 --load c >c.out 2>c.err
rc=$?
[ $rc = 0 ] && grep -q 'global_step20, which cannot be loaded: .*checksum mismatch' c.err &&
	grep -q 'fell back to c/global_step10' c.err && grep -q 'resumed from c/global_step10' c.out &&
	ok corrupt_checkpoint_falls_back_to_the_previous || fail corrupt_checkpoint_falls_back_to_the_previous "exit $rc: $(cat c.err)"
: >c/global_step10/manifest.json
truncate -s 1000 c/global_step10/rank_tp00_pp000.safetensors
tr --train-iters 20 --eval-iters 0 --load c >c2.out 2>c2.err
rc=$?
[ $rc = 2 ] && grep -q 'none of its 2 checkpoints can be loaded' c2.err &&
	ok no_intact_checkpoint_is_an_error || fail no_intact_checkpoint_is_an_error "exit $rc: $(tail -3 c2.err)"

# --- signals and the kill switch ---
K=(--train-iters 100000 --log-interval 1 --eval-iters 0 --save k --save-interval 1000)
trbg "${K[@]}" >k.out 2>&1
pid=$!
wait_for 30 grep -q ' iteration        3/' k.out
kill -USR1 $pid
wait $pid
rc=$?
it=$(sed -n 's/^train: stopping at iteration \([0-9]*\) on SIGUSR1$/\1/p' k.out)
[ $rc = 0 ] && [ -n "$it" ] && [ "$(cat k/latest 2>/dev/null)" = "global_step$it" ] &&
	ok sigusr1_finishes_the_iteration_saves_and_exits_0 || fail sigusr1_finishes_the_iteration_saves_and_exits_0 "exit $rc: $(tail -3 k.out)"
touch stop-now
tr "${K[@]}" --load k --kill-switch-path stop-now >ks.out 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'kill switch stop-now exists: exiting without training' ks.out && ! grep -q ' iteration ' ks.out &&
	ok kill_switch_at_startup_exits_0_without_training || fail kill_switch_at_startup_exits_0_without_training "exit $rc: $(cat ks.out)"
rm -f stop-now
trbg "${K[@]}" --load k --kill-switch-path stop-now >ks2.out 2>&1
pid=$!
wait_for 30 grep -q "iteration  *$((it + 2))/" ks2.out
touch stop-now
wait $pid
rc=$?
it2=$(sed -n 's/^train: stopping at iteration \([0-9]*\) on the kill switch$/\1/p' ks2.out)
[ $rc = 0 ] && [ -n "$it2" ] && [ "$(cat k/latest)" = "global_step$it2" ] &&
	ok kill_switch_during_training_saves_and_exits_0 || fail kill_switch_during_training_saves_and_exits_0 "exit $rc: $(tail -3 ks2.out)"
rm -f stop-now
tr --train-iters 100000 --eval-iters 0 --save d --save-interval 1000 --exit-duration-in-mins 0.02 >d.out 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'stopping at iteration [0-9]* on --exit-duration-in-mins' d.out && [ -s d/latest ] &&
	ok exit_duration_saves_and_exits_0 || fail exit_duration_saves_and_exits_0 "exit $rc: $(tail -2 d.out)"

# --- kill -9 at random instants of a run that saves every iteration: never a broken latest ---
broken=0
for delay in 0.7 1.1 1.6 2.2 2.9; do
	trbg --train-iters 100000 --eval-iters 0 --save z --load z --save-interval 1 >z.out 2>&1
	pid=$!
	sleep $delay
	kill -9 $pid
	wait $pid 2>/dev/null
	[ -e z/latest ] || continue
	tr --train-iters 1 --lr-warmup-iters 0 --override-lr-scheduler --eval-iters 0 --load z >zl.out 2>zl.err
	if [ $? != 0 ] || grep -q 'cannot be loaded' zl.err || ! grep -q "resumed from z/$(cat z/latest)" zl.out; then
		broken=1
		echo "# after kill -9 at ${delay}s: $(cat zl.err zl.out | head -3)"
	fi
done
[ -e z/latest ] && [ $broken = 0 ] && ok kill_9_during_saves_never_breaks_latest || fail kill_9_during_saves_never_breaks_latest "latest: $(cat z/latest 2>/dev/null)"

# --- skipped iterations ---
tr --train-iters 8 --log-interval 1 --eval-iters 0 --skip-train-iteration-range 3-4 6-6 >sk.out 2>&1
check skip_range_message grep -q '^Skipped iterations 3 to 4 due to --skip-train-iteration-range flag.$' sk.out
check skip_range_single_iteration grep -q '^Skipped iterations 6 to 6 due to --skip-train-iteration-range flag.$' sk.out
# the skipped data is not trained on: iteration 3 after the skip sees what iteration 5 saw in a plain run
tr --train-iters 8 --log-interval 1 --eval-iters 0 --lr 0 --min-lr 0 >p0.out 2>&1
tr --train-iters 8 --log-interval 1 --eval-iters 0 --lr 0 --min-lr 0 --skip-train-iteration-range 3-4 >p1.out 2>&1
l5=$(losses p0.out | awk '$1 == 5 { print $2 }'); l3=$(losses p1.out | awk '$1 == 3 { print $2 }')
[ -n "$l5" ] && [ "$l5" = "$l3" ] && ok skipped_range_consumes_its_data || fail skipped_range_consumes_its_data "plain it5 $l5, skipped it3 $l3"

# a skipped range is skipped once, even when a checkpoint falls after it and the run resumes
SK=(--train-iters 8 --log-interval 1 --eval-iters 0 --skip-train-iteration-range 3-4 --save-interval 4)
tr "${SK[@]}" --save sk1 >sk1.out 2>&1
tr "${SK[@]}" --save sk2 --exit-interval 3 >sk2a.out 2>&1
tr "${SK[@]}" --save sk2 --load sk2 >sk2b.out 2>&1
! grep -q Skipped sk2b.out && cmp -s sk1/global_step8/rank_tp00_pp000.safetensors sk2/global_step8/rank_tp00_pp000.safetensors &&
	ok skip_range_is_not_repeated_after_resume || fail skip_range_is_not_repeated_after_resume "$(grep -h Skipped sk2b.out; ls sk1 sk2)"

# --- loss spikes: a learning rate that blows up ---
tr --train-iters 60 --log-interval 1 --eval-iters 0 --lr 3 --min-lr 3 --clip-grad 0 --spike-policy skip --spike-factor 1.5 >sp.out 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'loss spike at iteration [0-9]*: lm loss .* is above 1.5 x its running mean .*: update skipped' sp.out &&
	grep -qE 'number of skipped iterations: +[1-9]' sp.out &&
	ok spike_policy_skip_drops_the_update || fail spike_policy_skip_drops_the_update "exit $rc: $(grep -m2 -i spike sp.out)"
tr --train-iters 60 --log-interval 1 --eval-iters 0 --lr 3 --min-lr 3 --clip-grad 0 --spike-policy rollback --spike-factor 1.5 --save rb --save-interval 5 >rb.out 2>&1
rc=$?
grep -q 'rolled back to rb/global_step[0-9]* (iteration [0-9]*) and skipped the [0-9]* samples' rb.out &&
	ok spike_policy_rollback_reloads_and_skips_the_data || fail spike_policy_rollback_reloads_and_skips_the_data "exit $rc: $(grep -m3 -i -e spike -e roll rb.out)"

# --- BigScience's weighted split paths: one train group, named validation groups ---
cp meg-gpt2-openwebtext_text_document.bin other.bin && cp meg-gpt2-openwebtext_text_document.idx other.idx
W=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
	--micro-batch-size 2 --global-batch-size 4 --lr 1e-3 --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --device cpu --threads 1 --train-iters 6 --log-interval 3
	--eval-interval 3 --eval-iters 1 --tensorboard-dir wtb)
"$TR" "${W[@]}" --train-weighted-split-paths "TRAIN: 0.7 0:0.9 meg-gpt2-openwebtext_text_document, 0.3 0:0.9 other" \
	--valid-weighted-split-paths "VALID-A: 1 0.9:1 meg-gpt2-openwebtext_text_document" "VALID-B: 1 0.95:1 other" >w.out 2>w.err
rc=$?
[ $rc = 0 ] && ok weighted_split_paths_train || fail weighted_split_paths_train "exit $rc: $(tail -3 w.err)"
check weighted_split_train_range grep -q '^TRAIN: other: train split, sequences \[0, 900)' w.out
check weighted_split_valid_range grep -q '^VALID-B: other: valid split, sequences \[950, 1000)' w.out
check named_validation_lines grep -qE '^ VALID-A loss at iteration 3 \| lm loss value: [0-9.]+E[-+][0-9]+ \| lm loss PPL: ' w.out
check named_validation_second_set grep -q '^ VALID-B loss at iteration 6 |' w.out
"$PY" "$TOP/tests/ref/tfevents-read.py" wtb >wtb.txt 2>&1
check named_validation_tensorboard_prefix grep -qF 'lm-loss-validation/VALID-B/lm loss validation	6	' wtb.txt
printf '"TRAIN: 0.7 0:0.9 meg-gpt2-openwebtext_text_document, 0.3 0:0.9 other"\n' >train-splits.txt
printf '"VALID-A: 1 0.9:1 meg-gpt2-openwebtext_text_document" "VALID-B: 1 0.95:1 other"\n' >valid-splits.txt
"$TR" "${W[@]}" --train-weighted-split-paths-path train-splits.txt --valid-weighted-split-paths-path valid-splits.txt >w2.out 2>&1
diff <(losses w.out) <(losses w2.out) >/dev/null && grep -q '^ VALID-B loss at iteration 6 |' w2.out &&
	ok weighted_split_paths_from_files_same_run || fail weighted_split_paths_from_files_same_run "$(diff <(losses w.out) <(losses w2.out) | head -3)"
expect_rc weighted_split_bad_range_exit_2 2 "$TR" "${W[@]}" --train-weighted-split-paths "TRAIN: 1 0.9:0.1 other"
contains weighted_split_bad_range_message "$T/err" 'START:END with 0 <= START < END <= 1'

# --- the sample-index cache goes where --data-cache-path says, not beside read-only data ---
mkdir -p ro cache && cp meg-gpt2-openwebtext_text_document.bin meg-gpt2-openwebtext_text_document.idx ro/
"$TR" "${MODEL[@]}" --data-path ro/meg-gpt2-openwebtext_text_document --data-cache-path cache \
	--train-iters 6 --eval-iters 0 >dc.out 2>&1
[ $? = 0 ] && ls cache/*_lmtk_indexmap_*.map >/dev/null 2>&1 && [ "$(ls ro | wc -l)" = 2 ] &&
	ok data_cache_path_holds_the_index || fail data_cache_path_holds_the_index "$(ls ro cache; tail -2 dc.out)"

# --- data in a directory this user cannot write (someone else's, or a read-only filesystem) ---
# The caches go to the user's own cache directory, said in one start-up line; a cache the data's
# owner built beside it is used first; with no cache directory at all the run still trains.  As
# root a mode does not stop writes, so the directory is a tmpfs remounted read-only.
rodir=$T/rodata RO=$T/rodata/meg-gpt2-openwebtext_text_document
mkdir -p "$rodir"
if [ "$(id -u)" = 0 ]; then
	mount -t tmpfs -o size=16m lmtk-test "$rodir" 2>/dev/null &&
		ro() { mount -o "remount,$1" "$rodir"; } || ro() { return 1; }
else
	ro() { if [ "$1" = ro ]; then chmod a-w "$rodir"; else chmod u+w "$rodir"; fi; }
fi
if ! { ro rw && cp meg-gpt2-openwebtext_text_document.bin meg-gpt2-openwebtext_text_document.idx "$rodir/" &&
	ro ro && ! touch "$rodir/probe" 2>/dev/null; }; then
	skip read_only_data_falls_back_to_own_cache "cannot make a read-only directory here (a tmpfs needs root)"
else
	rot() { "$TR" "${MODEL[@]}" --data-path "$RO" --train-iters 6 --eval-iters 0 "$@"; }
	XDG_CACHE_HOME=$T/xdg1 rot >ro1.out 2>&1
	rc=$?
	[ $rc = 0 ] && ok read_only_data_trains || fail read_only_data_trains "exit $rc: $(tail -3 ro1.out)"
	contains read_only_data_says_where_caches_go ro1.out \
		"^$RO: $rodir is not writable \(Read-only file system|Permission denied\): its index caches go to $T/xdg1/lmtk instead \(--data-cache-path picks the place\)$"
	check read_only_data_said_once [ "$(grep -c 'is not writable' ro1.out)" = 1 ]
	check read_only_data_cache_in_own_dir sh -c "ls '$T'/xdg1/lmtk/meg-gpt2-openwebtext_text_document_lmtk_indexmap_*.map >/dev/null &&
		[ \$(ls '$rodir' | wc -l) = 2 ]"
	XDG_CACHE_HOME=$T/xdg1 rot >ro2.out 2>&1
	contains read_only_data_next_run_uses_own_cache ro2.out "^$RO: train split, .*, index from its cache$"
	env -u XDG_CACHE_HOME -u HOME "$TR" "${MODEL[@]}" --data-path "$RO" --train-iters 6 --eval-iters 0 >ro3.out 2>&1
	rc=$?
	[ $rc = 0 ] && grep -q "is not writable (.*) and there is no \$HOME or \$XDG_CACHE_HOME: its index is built in memory on every run; pass --data-cache-path DIR to keep it$" ro3.out &&
		grep -q 'index built, not cached' ro3.out && ok read_only_data_without_home_trains_uncached ||
		fail read_only_data_without_home_trains_uncached "exit $rc: $(grep -E 'writable|index' ro3.out | head -3)"
	# the owner builds the cache beside the data, then the data becomes read-only
	ro rw && XDG_CACHE_HOME=$T/xdg2 rot >ro4.out 2>&1 && ro ro
	check writable_data_keeps_caches_beside_it sh -c "! grep -q 'not writable' ro4.out &&
		ls '$rodir'/*_lmtk_indexmap_*.map >/dev/null && [ ! -e '$T/xdg2/lmtk' ]"
	XDG_CACHE_HOME=$T/xdg3 rot >ro5.out 2>&1
	check read_only_data_uses_the_owners_cache sh -c "grep -q '^$RO: train split, .*, index from its cache$' ro5.out &&
		[ -z \"\$(ls '$T/xdg3/lmtk' 2>/dev/null)\" ]"
fi
[ "$(id -u)" = 0 ] && umount -l "$rodir" 2>/dev/null

# fp16: dynamic loss scaling runs (the CPU computes in fp32) and the log line shows the scale
tr --train-iters 8 --log-interval 2 --eval-iters 0 --fp16 --initial-loss-scale 65536 >fp.out 2>&1
check fp16_log_line_has_the_loss_scale grep -qE '\| lm loss: [0-9.E+-]+ \| loss scale: 65536\.0 \| grad norm' fp.out

# --- bad input ---
expect_rc token_ids_outside_the_vocabulary_exit_2 2 "$TR" --num-layers 2 --hidden-size 64 --num-attention-heads 4 \
	--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 \
	--data-path meg-gpt2-openwebtext_text_document --vocab-size 100 --train-iters 4 --eval-iters 0 --device cpu
contains token_ids_outside_the_vocabulary_message "$T/err" 'holds token id [0-9]+, outside the vocabulary of 100'
expect_rc another_model_is_refused_on_load 2 tr --train-iters 20 --eval-iters 0 --load h --hidden-size 128 --num-attention-heads 4
contains another_model_message_names_the_flag "$T/err" -- '--hidden-size is 64 in the checkpoint, 128 in this run'
expect_rc rollback_needs_save 2 tr --train-iters 4 --spike-policy rollback
contains rollback_needs_save_message "$T/err" -- '--spike-policy rollback needs --save'
bin_help=$("$TR" --help)
grep -qE '^  -[A-Za-z], ' <<<"$bin_help" && fail no_accidental_short_options "$(grep -E '^  -[A-Za-z], ' <<<"$bin_help" | head -2)" || ok no_accidental_short_options
expect_rc missing_data_is_exit_2 2 tr --train-iters 2 --data-path nowhere
contains missing_data_names_the_file "$T/err" 'nowhere'
expect_rc tp_without_the_ranks_is_refused 2 tr --train-iters 2 --tensor-model-parallel-size 2 --nodes 1 --gpus-per-node 2
expect_rc no_gpu_is_a_clear_error 2 tr --train-iters 2 --device cuda
contains no_gpu_message_names_device "$T/err" -- '--device cuda'

# --- the index maps' progress line (lib/progress.h), forced: on stderr, ending on all the entries
# of doc_idx, sample_idx and shuffle_idx (epochs x documents + 2 x samples), computed here from
# the .idx file and Megatron's split and epoch rules; stdout the same with it on and off
LMTK_PROGRESS=1 tr --train-iters 6 --eval-iters 0 --data-cache-path pcache1 >pon.out 2>pon.err
rc=$?
LMTK_PROGRESS=0 tr --train-iters 6 --eval-iters 0 --data-cache-path pcache0 >poff.out 2>poff.err
[ $rc$? = 00 ] && ok index_progress_runs_exit_0 || fail index_progress_runs_exit_0 "$(tail -2 pon.err poff.err)"
read -r want ns < <("$PY" - meg-gpt2-openwebtext_text_document.idx <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:9] == b"MMIDIDX\x00\x00"
n = struct.unpack("<Q", b[18:26])[0]
sizes = struct.unpack("<%di" % n, b[34:34 + 4 * n])
idx = [0]
for w in (949, 50, 1):
    idx.append(idx[-1] + int(round(w / 1000 * float(n))))
idx = [0] + [i - (idx[-1] - n) for i in idx[1:]]
tpe, docs, seq, want = sum(sizes[idx[0]:idx[1]]), idx[1] - idx[0], 64, 6 * 4
e = 1
while (e * tpe - 1) // seq < want:
    e += 1
ns = (e * tpe - 1) // seq
print(e * docs + 2 * ns, ns)
PY
)
contains index_progress_ends_at_all_the_entries pon.err "^train: building the sample index: $want of $want entries \\(100%\\), [0-9]+ entries/s, ETA 0:00:00, $ns samples, 1 epoch\$"
lacks index_progress_not_on_stdout pon.out 'building the sample index'
lacks index_progress_not_drawn_when_off poff.err 'building the sample index'
check index_progress_stdout_same_on_and_off cmp <(sed -E 's/[0-9]+\.[0-9]+/N/g' pon.out) <(sed -E 's/[0-9]+\.[0-9]+/N/g' poff.out)
rm -rf "$T"
