#!/usr/bin/env bash
# train --optimizer lamb / sgd through bin/train (the optimizers' arithmetic is checked against
# PyTorch references in train-model.sh, and CUDA against the CPU in train_cudaops):
#  - a run learns; a run saved and resumed half way ends with the same weights and moments, to
#    the byte, as the run that went straight through (LAMB's step count and SGD's first-step
#    momentum survive the checkpoint);
#  - the checkpoint names its kind, and resuming it with another optimizer is refused with the
#    flag that resumes it, while --finetune takes its weights;
#  - LAMB with 8-bit Adam is refused; LAMB through the CUDA executor learns as on the CPU.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
cd "$T" || exit 3
MEG=$(tiny_dataset) || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx .
M=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
	--micro-batch-size 2 --global-batch-size 4 --lr 5e-3 --min-lr 5e-4 --lr-decay-style cosine
	--lr-warmup-iters 1 --data-path meg-gpt2-openwebtext_text_document
	--vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt"
	--device cpu --threads 1 --log-interval 1 --eval-iters 0 --weight-decay 0.1 --clip-grad 0)
loss() { grep '^ iteration ' "$1" | sed -n "$2p" | sed 's/.*lm loss: \([^ ]*\) .*/\1/'; }

for opt in lamb sgd; do
	"$TR" "${M[@]}" --optimizer $opt --train-iters 8 --save $opt-a --save-interval 8 >$opt-a.out 2>&1 &&
	"$TR" "${M[@]}" --optimizer $opt --train-iters 8 --exit-interval 4 --save $opt-b --save-interval 4 \
		>$opt-b1.out 2>&1 &&
	"$TR" "${M[@]}" --optimizer $opt --train-iters 8 --save $opt-b --load $opt-b --save-interval 4 \
		>$opt-b2.out 2>&1 || { fail ${opt}_runs "$(tail -3 $opt-a.out $opt-b1.out $opt-b2.out)"; continue; }
	first=$(loss $opt-a.out 1) last=$(loss $opt-a.out 8)
	if python3 -c "import sys; sys.exit(not float('$last') < float('$first') - 0.1)"; then
		ok ${opt}_run_learns
	else
		fail ${opt}_run_learns "loss $first -> $last"
	fi
	if cmp -s $opt-a/global_step8/rank_tp00_pp000.safetensors $opt-b/global_step8/rank_tp00_pp000.safetensors; then
		ok ${opt}_resume_is_bit_exact
	else
		fail ${opt}_resume_is_bit_exact "the resumed run's step-8 checkpoint differs"
	fi
	contains ${opt}_manifest_names_the_kind $opt-a/global_step8/manifest.json "\"kind\": *\"$opt\""
done
# LAMB is not AdamW: the same flags with Adam end elsewhere
"$TR" "${M[@]}" --train-iters 8 >adam.out 2>&1
if [ "$(loss adam.out 8)" != "$(loss lamb-a.out 8)" ] && [ "$(loss sgd-a.out 8)" != "$(loss lamb-a.out 8)" ]; then
	ok lamb_and_sgd_are_not_adamw
else
	fail lamb_and_sgd_are_not_adamw "iteration 8: adam $(loss adam.out 8), lamb $(loss lamb-a.out 8), sgd $(loss sgd-a.out 8)"
fi

expect_rc adam_resume_of_lamb_refused 3 "$TR" "${M[@]}" --train-iters 10 --load lamb-a
contains adam_resume_refusal_names_the_flag "$T/err" "optimizer state is LAMB's.*resume it with --optimizer lamb"
expect_rc finetune_takes_lamb_weights 0 "$TR" "${M[@]}" --train-iters 2 --load lamb-a --finetune
expect_rc lamb_with_bnb_refused 2 "$TR" "${M[@]}" --optimizer lamb --use-bnb-optimizer --train-iters 8
contains lamb_with_bnb_says_why "$T/err" "two optimizers"
"$TR" "${M[@]}" --sgd-momentum 0.5 --train-iters 1 --lr-warmup-iters 0 >mom.out 2>&1
contains sgd_momentum_without_sgd_is_named "mom.out" "^train: --sgd-momentum: no effect without --optimizer sgd"
expect_rc unknown_optimizer_refused 2 "$TR" "${M[@]}" --optimizer adafactor --train-iters 8
contains unknown_optimizer_names_the_choices "$T/err" "adam, lamb, sgd"

# LAMB on the CUDA backend through the executor: the CPU run's losses within bf16's reach
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
if [ -s "$EXEC" ]; then
	LMTK_CUDA_PLUGIN=$EXEC "$TR" "${M[@]}" --optimizer lamb --train-iters 8 --device cuda --bf16 \
		>lamb-cuda.out 2>&1 || fail lamb_cuda_run "$(tail -3 lamb-cuda.out)"
	python3 - <<PYEOF && ok lamb_cuda_tracks_cpu || fail lamb_cuda_tracks_cpu "cpu $(loss lamb-a.out 8), cuda $(loss lamb-cuda.out 8)"
import sys
c = [float(x) for x in """$(grep '^ iteration ' lamb-a.out | sed 's/.*lm loss: \([^ ]*\) .*/\1/')""".split()]
g = [float(x) for x in """$(grep '^ iteration ' lamb-cuda.out | sed 's/.*lm loss: \([^ ]*\) .*/\1/')""".split()]
sys.exit(not (len(c) == len(g) == 8 and all(abs(a - b) < 0.05 * a for a, b in zip(c, g)) and g[-1] < g[0] - 0.1))
PYEOF
else
	skip lamb_cuda_tracks_cpu "the executor plugin is not built"
fi
