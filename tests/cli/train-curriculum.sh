#!/usr/bin/env bash
# train with DeepSpeed's sequence-length curriculum (the tr8b-104B-cl recipe): the lengths, the
# consumed tokens and the token-decayed learning rate of every iteration against an independent
# transcription of DeepSpeed's scheduler and Megatron-DeepSpeed's loop and AnnealingLR
# (tests/ref/curriculum-ref.py), for the three schedules; the TensorBoard tag; evaluation at the
# full length; a resume that is bit-exact; the dry-run's tokens; the config's errors.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
REF=$TOP/tests/ref/curriculum-ref.py
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3

MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
	--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
	--min-lr 1e-4 --lr-decay-style cosine --lr-warmup-samples 8 --lr-decay-tokens 2000
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--attention-dropout 0.1 --hidden-dropout 0.1 --log-interval 1)
ds() {  # ds FILE SCHEDULE_JSON [TYPE]: a DeepSpeed config with that curriculum block
	cat >"$1" <<JSON
{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "gradient_clipping": 1.0,
 "curriculum_learning": {"enabled": true, "curriculum_type": "${3:-seqlen}", $2}}
JSON
}
ds linear.json '"min_difficulty": 16, "max_difficulty": 64, "schedule_type": "fixed_linear",
  "schedule_config": {"total_curriculum_step": 8, "difficulty_step": 8}'
ds root.json '"min_difficulty": 12, "max_difficulty": 56, "schedule_type": "fixed_root",
  "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 4, "root_degree": 2}'
ds discrete.json '"min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_discrete",
  "schedule_config": {"difficulty": [8, 40, 24, 64], "max_step": [2, 4, 6]}'

# log lines -> "it seqlen consumed_tokens lr"
fields() {
	sed -n 's/^ iteration *\([0-9]*\)\/.*consumed tokens: *\([0-9]*\) .*learning rate: \([^ ]*\) .*curriculum seqlen: *\([0-9]*\) .*/\1 \4 \2 \3/p' "$1"
}

for s in linear root discrete; do
	"$TR" "${MODEL[@]}" --train-samples 48 --deepspeed --deepspeed_config $s.json \
		--tensorboard-dir tb-$s >$s.out 2>$s.err
	rc=$?
	[ $rc = 0 ] && ok "${s}_run_exits_0" || fail "${s}_run_exits_0" "exit $rc: $(tail -3 $s.err)"
	fields $s.out >$s.got
	"$PY" "$REF" $s.json 12 4 64 1e-3 1e-4 8 2000 cosine >$s.want
	if [ -s $s.got ] && cmp -s $s.got $s.want; then ok "${s}_lengths_tokens_lr_are_deepspeeds"
	else fail "${s}_lengths_tokens_lr_are_deepspeeds" "$(diff $s.want $s.got | head -6)"; fi
done
# the schedules do cut: the first iteration's length is the curriculum's, not --seq-length
check linear_starts_at_16 grep -q '^ iteration        1/.*curriculum seqlen:    16 |' linear.out
check discrete_goes_down_and_up grep -q '^ iteration        5/.*curriculum seqlen:    24 |' discrete.out
# TensorBoard: Megatron-DeepSpeed's tag, one value per iteration
if "$PY" "$TOP/tests/ref/tfevents-read.py" tb-linear >tb.txt 2>tb.err; then
	awk -F'\t' '$1 == "curriculum_seqlen" {printf "%d %d\n", $2, $3}' tb.txt >tb.got
	awk '{printf "%d %s\n", $1, $2}' linear.want >tb.want
	if [ -s tb.got ] && cmp -s tb.got tb.want; then ok tensorboard_curriculum_seqlen
	else fail tensorboard_curriculum_seqlen "$(diff tb.want tb.got | head -4)"; fi
else
	fail tensorboard_curriculum_seqlen "the reader failed: $(tail -2 tb.err)"
fi

# evaluation runs at the full --seq-length: the curriculum run's own evaluation of a checkpoint
# equals the evaluation without a curriculum
"$TR" "${MODEL[@]}" --train-samples 12 --deepspeed --deepspeed_config linear.json --save ck \
	--save-interval 3 --eval-interval 1000 >ck.out 2>&1
"$TR" "${MODEL[@]}" --train-samples 12 --deepspeed --deepspeed_config linear.json --load ck \
	--eval-only True --eval-iters 2 >ev-cl.out 2>ev-cl.err
"$TR" "${MODEL[@]}" --train-samples 12 --load ck --eval-only True --eval-iters 2 >ev-full.out 2>ev-full.err
a=$(grep -m1 'validation loss at' ev-cl.out | sed 's/.*lm loss value: \([^ ]*\) .*/\1/')
b=$(grep -m1 'validation loss at' ev-full.out | sed 's/.*lm loss value: \([^ ]*\) .*/\1/')
[ -n "$a" ] && [ "$a" = "$b" ] && ok evaluation_is_at_full_length || fail evaluation_is_at_full_length "with the curriculum '$a', without '$b': $(tail -2 ev-cl.err)"

# a resume continues bit-exactly: 12 iterations straight = 5, save, resume to 12
"$TR" "${MODEL[@]}" --train-samples 48 --deepspeed --deepspeed_config discrete.json --save rs \
	--save-interval 5 --exit-interval 5 >rs1.out 2>&1
"$TR" "${MODEL[@]}" --train-samples 48 --deepspeed --deepspeed_config discrete.json --load rs \
	>rs2.out 2>&1
strip() { grep '^ iteration' "$1" | sed 's/elapsed time per iteration (s): [0-9.]* |//; s/samples per second.*//'; }
if [ "$(strip rs2.out)" = "$(strip discrete.out | tail -7)" ] && [ -n "$(strip rs2.out)" ]; then
	ok resume_is_bit_exact
else
	fail resume_is_bit_exact "$(diff <(strip discrete.out | tail -7) <(strip rs2.out) | head -4)"
fi

# the dry-run plans the run's tokens with the curriculum; --train-tokens stops on them
"$TR" --dry-run --nodes 1 --gpus-per-node 1 "${MODEL[@]}" --train-samples 48 --deepspeed --deepspeed_config linear.json \
	--format json >plan.json 2>plan.err
want=$(tail -1 linear.want | cut -d' ' -f3)
got=$("$PY" -c 'import json,sys; print(json.load(open("plan.json"))["schedule"]["tokens"])' 2>/dev/null)
[ "$got" = "$want" ] && ok dry_run_tokens_follow_the_curriculum || fail dry_run_tokens_follow_the_curriculum "plan $got, run $want"
full=$("$PY" -c 'import json; print(json.load(open("plan.json"))["schedule"]["curriculum"]["full_from_iteration"])' 2>/dev/null)
wantfull=$(awk '$2 == 64 {print $1; exit}' linear.want)
[ "$full" = "$wantfull" ] && ok dry_run_names_the_full_length_iteration || fail dry_run_names_the_full_length_iteration "plan $full, reference $wantfull"
# --train-tokens 1000: Megatron-DeepSpeed stops once consumed tokens reach it
"$TR" "${MODEL[@]}" --train-samples 400 --train-tokens 1000 --deepspeed --deepspeed_config linear.json \
	--eval-iters 0 >tt.out 2>tt.err
last=$(fields tt.out | tail -1 | cut -d' ' -f1)
wantlast=$("$PY" "$REF" linear.json 100 4 64 1e-3 1e-4 8 2000 cosine | awk '$3 >= 1000 {print $1; exit}')
[ -n "$last" ] && [ "$last" = "$wantlast" ] && ok train_tokens_stop_counts_curriculum_tokens || fail train_tokens_stop_counts_curriculum_tokens "stopped at $last, reference $wantlast"

# errors: the config's block is checked as DeepSpeed asserts it, before anything trains
bad() {  # bad NAME BLOCK PATTERN [TYPE]
	ds "$1.json" "$2" "${4:-}"
	"$TR" "${MODEL[@]}" --train-samples 8 --deepspeed --deepspeed_config "$1.json" >"$1.out" 2>"$1.err"
	local rc=$?
	if [ $rc = 2 ] && grep -Eq -- "$3" "$1.err"; then ok "refuses_$1"; else fail "refuses_$1" "exit $rc: $(tail -2 "$1.err")"; fi
}
bad max_over_seq '"min_difficulty": 16, "max_difficulty": 128, "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 8, "difficulty_step": 8}' 'max_difficulty 128 exceeds --seq-length 64'
bad custom '"min_difficulty": 16, "max_difficulty": 64, "schedule_type": "custom", "schedule_config": {}' 'schedule_type "custom"'
bad discrete_lengths '"min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_discrete", "schedule_config": {"difficulty": [8, 64], "max_step": [2, 4]}' 'difficulty needs one more'
bad no_total '"min_difficulty": 16, "max_difficulty": 64, "schedule_type": "fixed_linear", "schedule_config": {"difficulty_step": 8}' 'total_curriculum_step'
bad root_without_degree '"min_difficulty": 16, "max_difficulty": 64, "schedule_type": "fixed_root", "schedule_config": {"total_curriculum_step": 8, "difficulty_step": 8}' 'root_degree'
bad starts_at_zero '"min_difficulty": 4, "max_difficulty": 64, "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 8, "difficulty_step": 8}' 'starts at sequence length 0'
bad typo '"min_difficulty": 16, "max_difficulty": 64, "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 8, "difficulty_step": 8}, "min_difficult": 3' 'min_difficult: unknown'
bad type_vocab '"min_difficulty": 16, "max_difficulty": 64, "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 8, "difficulty_step": 8}' 'curriculum_type: not "seqlen"' vocabularyrarity
expect_rc flag_without_deepspeed_exits_2 2 "$TR" "${MODEL[@]}" --train-samples 8 --curriculum-learning
# without --deepspeed, Megatron-DeepSpeed never reads the file: the curriculum is off, and said so
"$TR" "${MODEL[@]}" --train-samples 16 --deepspeed_config linear.json >off.out 2>off.err
lacks no_curriculum_without_deepspeed off.out 'curriculum seqlen'
contains file_named_without_deepspeed off.out 'linear.json: without --deepspeed'
rm -rf "$T"
