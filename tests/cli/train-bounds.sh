#!/usr/bin/env bash
# Every number a flag gives train is checked against its range before it is used: sizes have
# limits (their products fit in 64 bits, so no count wraps negative and no division by zero),
# probabilities are in [0, 1), --threads is bounded; flags inert only in combination with others
# are named in the start-up line, by --dry-run as by a run.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
DRY=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
	--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --train-iters 10
	--lr 1e-3 --vocab-size 1000 --nodes 1 --gpus-per-node 1 --dry-run)
RUN=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
	--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --eval-iters 0)

# --- sizes: refused with their limit (exit 2), never a negative count or a signal ---
expect_rc huge_hidden_size_refused 2 "$TR" "${DRY[@]}" --hidden-size 6000000000
contains huge_hidden_size_names_its_limit "$T/err" '^train: --hidden-size: 6000000000 is above the limit of 1048576'
lacks huge_hidden_size_prints_no_negative_count "$T/out" 'parameters +-'
expect_rc hidden_size_2_to_40_is_no_signal 2 "$TR" "${DRY[@]}" --hidden-size 1099511627776 --gpu-model h100
expect_rc huge_layer_count_refused 2 "$TR" "${DRY[@]}" --num-layers 99999999999
expect_rc huge_micro_batch_refused 2 "$TR" "${DRY[@]}" --micro-batch-size 4294967296
# each flag within its limit, their product beyond 64 bits: the plan says so, nothing wraps
expect_rc product_beyond_64_bits_refused 2 "$TR" "${DRY[@]}" --train-iters 1099511627776 \
	--global-batch-size 1073741824 --micro-batch-size 2 --seq-length 16777216 --max-position-embeddings 16777216
contains product_beyond_64_bits_named "$T/err" '--train-iters x --global-batch-size x --seq-length tokens: .*beyond the 2\^62'
lacks product_beyond_64_bits_no_zero_schedule "$T/err" 'warmup \(0 samples.*decay \(0 samples'
# the largest model every limit allows still plans with no negative number
"$TR" --num-layers 65536 --hidden-size 1048576 --num-attention-heads 65536 --ffn-hidden-size 4194304 \
	--seq-length 16777216 --max-position-embeddings 16777216 --micro-batch-size 1048576 \
	--global-batch-size 1073741824 --train-iters 100 --lr 1e-3 --vocab-size 1073741823 --dry-run \
	--nodes 1 --gpus-per-node 1 --gpu-model a100 >max.out 2>max.err
rc=$?
[ $rc = 0 ] && ! grep -Eq '(^| )-[0-9]' max.out && ok largest_model_plans_without_wrapping ||
	fail largest_model_plans_without_wrapping "exit $rc: $(grep -E '(^| )-[0-9]' max.out | head -3) $(head -3 max.err)"

# --- probabilities and threads ---
expect_rc hidden_dropout_above_1_refused 2 "$TR" "${DRY[@]}" --hidden-dropout 1.5
contains hidden_dropout_message "$T/err" "^train: --hidden-dropout: '1.5' is not a probability in \[0, 1\)"
expect_rc attention_dropout_of_1_refused 2 "$TR" "${DRY[@]}" --attention-dropout 1
expect_rc dropout_0_accepted 0 "$TR" "${DRY[@]}" --hidden-dropout 0 --attention-dropout 0.99
expect_rc threads_100000_refused 2 "$TR" "${RUN[@]}" --train-iters 2 --threads 100000
contains threads_message_names_limit "$T/err" '^train: --threads: 100000 is above the limit of 4096'

# --- flags inert only in combination: named, by --dry-run and by a run alike ---
expect_rc inert_combination_dry_run 0 "$TR" "${DRY[@]}" --initial-loss-scale 1024 --hysteresis 3 \
	--override-lr-scheduler --tensorboard-log-interval 5 --log-timers-to-tensorboard --cpu-tdp 100 \
	--carbon-intensity 300 --pp-partition-method 'type:transformer|embedding'
for f in initial-loss-scale hysteresis override-lr-scheduler tensorboard-log-interval \
	log-timers-to-tensorboard cpu-tdp carbon-intensity pp-partition-method; do
	contains "dry_run_names_inert_$f" "$T/err" "no effect here: .*--$f \("
done
contains inert_scaler_reason "$T/err" '--initial-loss-scale \(without --fp16 there is no loss scaler'
"$TR" "${RUN[@]}" --train-iters 2 --min-loss-scale 2 --use-checkpoint-lr-scheduler \
	--no-log-loss-scale-to-tensorboard >run.out 2>run.err
rc=$?
[ $rc = 0 ] && grep -q '^train: accepted, no effect here: .*--min-loss-scale (without --fp16' run.out &&
	grep -q -- '--use-checkpoint-lr-scheduler (without --load' run.out &&
	grep -q -- '--no-log-loss-scale-to-tensorboard (without --tensorboard-dir' run.out &&
	ok run_names_inert_combinations || fail run_names_inert_combinations "exit $rc: $(grep 'no effect' run.out) $(tail -2 run.err)"
# where they act, they are not named
expect_rc active_flags_not_named 0 "$TR" "${DRY[@]}" --fp16 --initial-loss-scale 1024 --tensorboard-dir tb \
	--log-timers-to-tensorboard
lacks active_flags_not_named_in_line "$T/err" 'no effect here:.*--(initial-loss-scale|log-timers-to-tensorboard)'

# --- every input path a flag names exists before training: a missing --merge-file is an error ---
expect_rc missing_merge_file_refused 2 "$TR" "${RUN[@]}" --train-iters 2 --merge-file "$T/no-such-merges.txt"
contains missing_merge_file_named "$T/err" "--merge-file $T/no-such-merges.txt: No such file or directory"
expect_rc missing_merge_file_dry_run_too 2 "$TR" "${RUN[@]}" --train-iters 2 --merge-file "$T/no-such-merges.txt" --dry-run --nodes 1 --gpus-per-node 1

# --- --dry-run sees every error a run would stop on, and a run reports them all at once ---
expect_rc dry_run_reports_setup_errors 2 "$TR" "${DRY[@]}" --lamb-layerwise-noise 0.1 --spike-policy rollback \
	--position-embedding-type rotary --kv-channels 8
contains dry_run_names_lamb_noise_without_lamb "$T/err" "--lamb-layerwise-noise is LAMB's: it needs --optimizer lamb \(not adam\)"
contains dry_run_names_rollback_without_save "$T/err" "--spike-policy rollback needs --save"
contains dry_run_names_rotary "$T/err" "--position-embedding-type rotary is not implemented"
contains dry_run_names_kv_channels "$T/err" "--kv-channels other than hidden/heads is not implemented"
expect_rc run_reports_them_all_at_once 2 "$TR" "${RUN[@]}" --train-iters 2 --lamb-layerwise-noise 0.1 --spike-policy rollback
contains run_names_the_second_error_too "$T/err" '--spike-policy rollback needs --save'
contains run_counts_both "$T/err" '2 errors in the flags: nothing trained'
