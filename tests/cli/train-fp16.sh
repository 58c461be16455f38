#!/usr/bin/env bash
# train --fp16 on the CPU: Megatron's dynamic loss scaler sees the overflows fp16 gradients would
# have (an element beyond 65504 once scaled; the CPU computes in fp32 - on a GPU the arithmetic
# is real fp16, and tests/cli/train-cuda.sh runs it against this one through the executor), so a
# run from the default 2^32 skips and halves at its start as Megatron's fp16 runs do; the scale
# follows a transcription of Megatron's DynamicGradScaler (hysteresis, window, backoff, growth,
# min) iteration by iteration; the scale never becomes infinite.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
M=(--num-layers 2 --num-attention-heads 4 --hidden-size 64 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 4 --global-batch-size 8 --lr 1e-3
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --log-interval 1 --eval-iters 0 --fp16
	--device cpu --threads 1)
# "scale skipped" per iteration
scales() { sed -n 's/.*loss scale: \([^ ]*\) .*number of skipped iterations: *\([0-9]*\) .*/\1 \2/p' "$1"; }
# the scaler, transcribed from megatron/optimizer/grad_scaler.py DynamicGradScaler.update
scaler() {  # scaler FILE INITIAL WINDOW HYSTERESIS
	"$PY" - "$@" <<'PYEOF'
import sys
rows = [l.split() for l in open(sys.argv[1])]
scale, window, hyst = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tracker, growth = hyst, 0
assert rows, "no log lines"
for i, (logged, skipped) in enumerate(rows, 1):
    if skipped == "1":                  # found_inf
        growth = 0
        tracker -= 1
        if tracker <= 0:
            scale = max(scale * 0.5, 1.0)
    else:
        growth += 1
        if growth == window:
            growth = 0
            tracker = hyst
            scale = scale * 2.0
    assert float(logged) == scale, (i, logged, scale)
PYEOF
}
"$TR" "${M[@]}" --train-iters 30 --loss-scale-window 4 >big.out 2>&1
scales big.out >big.s
[ "$(head -1 big.s | cut -d' ' -f2)" = 1 ] && ok overflow_at_2_32_skips_the_first_step || fail overflow_at_2_32_skips_the_first_step "$(head -2 big.s)"
scaler big.s 4294967296 4 2 2>sc.err && ok scale_follows_megatrons_scaler_from_2_32 || fail scale_follows_megatrons_scaler_from_2_32 "$(tail -1 sc.err)"
"$TR" "${M[@]}" --train-iters 16 --loss-scale-window 2 --initial-loss-scale 16384 >grow.out 2>&1
scales grow.out >grow.s
grep -q ' 0$' grow.s && grep -q ' 1$' grow.s && ok scale_grows_and_overflows || fail scale_grows_and_overflows "$(tr '\n' ';' <grow.s)"
scaler grow.s 16384 2 2 2>sg.err && ok scale_follows_megatrons_scaler_growing || fail scale_follows_megatrons_scaler_growing "$(tail -1 sg.err)"
"$TR" "${M[@]}" --train-iters 16 --loss-scale-window 2 --initial-loss-scale 16384 --hysteresis 1 >h1.out 2>&1
scales h1.out >h1.s
scaler h1.s 16384 2 1 2>sh.err && ok scale_follows_megatrons_scaler_hysteresis_1 || fail scale_follows_megatrons_scaler_hysteresis_1 "$(tail -1 sh.err)"
# a scale near fp32's largest: overflows (fp16 could not hold any scaled gradient), halves,
# and stays finite
"$TR" "${M[@]}" --train-iters 6 --loss-scale-window 1 --initial-loss-scale 3e38 >huge.out 2>&1
lacks scale_never_infinite huge.out 'loss scale: inf'
# a window's doubling is for the next step: the gradients are unscaled by the scale they were
# scaled with (Megatron: unscale, then grad_scaler.update).  Scaling by powers of two is exact in
# fp32, so with SGD (an update proportional to the gradient) a run whose scale doubles every step
# trains exactly as one whose scale never moves
"$TR" "${M[@]}" --train-iters 6 --optimizer sgd --initial-loss-scale 4 --loss-scale-window 1 >dbl.out 2>&1
"$TR" "${M[@]}" --train-iters 6 --optimizer sgd --initial-loss-scale 4 --loss-scale-window 1000 >fix.out 2>&1
lossnorm() { sed -n 's/.* lm loss: \([^ ]*\) .* grad norm: \([^ ]*\) .*/\1 \2/p' "$1"; }
if [ "$(scales dbl.out | tail -1 | cut -d" " -f1)" = 256.0 ] && [ "$(lossnorm dbl.out | wc -l)" = 6 ] &&
   [ "$(lossnorm dbl.out)" = "$(lossnorm fix.out)" ]; then
	ok doubling_scale_unscales_by_the_scale_used
else
	fail doubling_scale_unscales_by_the_scale_used "$(scales dbl.out | tr '\n' ';') | $(lossnorm dbl.out | tr '\n' ';') vs $(lossnorm fix.out | tr '\n' ';')"
fi
# Megatron's hysteresis tracker goes below 0 in a streak of overflows (it is only reset by a
# window of good steps): a checkpoint saved in such a streak (from 2^32 the first 4 steps overflow,
# leaving it at -2) is resumed, and the resumed run's scales and losses are the unbroken run's
"$TR" "${M[@]}" --train-iters 6 --lr-decay-iters 6 --loss-scale-window 4 >whole.out 2>&1
"$TR" "${M[@]}" --train-iters 4 --lr-decay-iters 6 --loss-scale-window 4 --save ck --save-interval 4 >first.out 2>&1
h=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["optimizer"]["hysteresis_left"])' \
	ck/global_step4/manifest.json 2>&1)
if [ "$h" -lt 0 ] 2>/dev/null; then
	ok hysteresis_below_zero_saved_as_megatrons
else
	fail hysteresis_below_zero_saved_as_megatrons "hysteresis_left: $h ($(tail -2 first.out))"
fi
"$TR" "${M[@]}" --train-iters 6 --lr-decay-iters 6 --loss-scale-window 4 --load ck >second.out 2>&1
if [ "$(scales second.out)" = "$(scales whole.out | tail -2)" ] &&
   [ "$(lossnorm second.out)" = "$(lossnorm whole.out | tail -2)" ]; then
	ok resumes_a_save_with_hysteresis_below_zero
else
	fail resumes_a_save_with_hysteresis_below_zero "$(tail -2 second.out)"
fi
rm -rf "$T"
