#!/usr/bin/env bash
# train --optimizer lamb / sgd through bin/train (the optimizers' arithmetic is checked against
# PyTorch references in train-model.sh, and CUDA against the CPU in train_cudaops):
#  - a run learns; a run saved and resumed half way ends with the same weights and moments, to
#    the byte, as the run that went straight through (LAMB's step count and SGD's first-step
#    momentum survive the checkpoint);
#  - the checkpoint names its kind, and resuming it with another optimizer is refused with the
#    flag that resumes it, while --finetune takes its weights;
#  - LAMB with 8-bit Adam is refused.
# The large-batch study's variants (train-model.sh checks their arithmetic against PyTorch):
#  - --lamb-layerwise-noise: a run with noise resumes bit-exactly (the draws are counter-based,
#    nothing is stored); LAMB through the CUDA executor learns as on the CPU and draws the CPU's
#    noise (its losses are far closer to the CPU's noisy run than the noise moves them); over
#    TP=2 x PP=2 the replicated tensors and the tied embedding copies stay bit-identical
#    (ckpt-sync-ln); refused without --optimizer lamb;
#  - --embedding-lr-mult / --alpha: TP=2 equals TP=1 with it (AdamW); with 8-bit Adam one step
#    moves only the word embedding differently; the start-up lines name a value that does nothing.
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
losses() { grep '^ iteration ' "$1" | sed 's/.*lm loss: \([^ ]*\) .*/\1/'; }

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

expect_rc adam_resume_of_lamb_refused 2 "$TR" "${M[@]}" --train-iters 10 --load lamb-a
contains adam_resume_refusal_names_the_flag "$T/err" "optimizer state is LAMB's.*resume it with --optimizer lamb"
expect_rc finetune_takes_lamb_weights 0 "$TR" "${M[@]}" --train-iters 2 --load lamb-a --finetune
expect_rc lamb_with_bnb_refused 2 "$TR" "${M[@]}" --optimizer lamb --use-bnb-optimizer --train-iters 8
contains lamb_with_bnb_says_why "$T/err" "two optimizers"
"$TR" "${M[@]}" --sgd-momentum 0.5 --train-iters 1 --lr-warmup-iters 0 >mom.out 2>&1
contains sgd_momentum_without_sgd_is_named "mom.out" "^train: --sgd-momentum: no effect without --optimizer sgd"
expect_rc unknown_optimizer_refused 2 "$TR" "${M[@]}" --optimizer adafactor --train-iters 8
contains unknown_optimizer_names_the_choices "$T/err" "adam, lamb, sgd"

# --- the study's variants: LAMB with layer-wise noise, the word embedding at ALPHA x the lr ---
V=(--optimizer lamb --lamb-layerwise-noise 0.3 --embedding-lr-mult 2)
ONE=(--train-iters 1 --lr-warmup-iters 0)
"$TR" "${M[@]}" "${V[@]}" --train-iters 8 --save var-a --save-interval 8 >var-a.out 2>&1 &&
"$TR" "${M[@]}" "${V[@]}" --train-iters 8 --exit-interval 4 --save var-b --save-interval 4 \
	>var-b1.out 2>&1 &&
"$TR" "${M[@]}" "${V[@]}" --train-iters 8 --save var-b --load var-b --save-interval 4 \
	>var-b2.out 2>&1 || fail lamb_noise_runs "$(tail -3 var-a.out var-b1.out var-b2.out)"
if cmp -s var-a/global_step8/rank_tp00_pp000.safetensors var-b/global_step8/rank_tp00_pp000.safetensors; then
	ok lamb_noise_resume_is_bit_exact
else
	fail lamb_noise_resume_is_bit_exact "the resumed noisy run's step-8 checkpoint differs"
fi
"$TR" "${M[@]}" --optimizer lamb --embedding-lr-mult 2 --train-iters 8 >var-quiet.out 2>&1
if [ "$(loss var-a.out 8)" != "$(loss var-quiet.out 8)" ] && [ "$(loss var-quiet.out 8)" != "$(loss lamb-a.out 8)" ]; then
	ok lamb_noise_and_embedding_lr_mult_change_the_run
else
	fail lamb_noise_and_embedding_lr_mult_change_the_run "iteration 8: noise $(loss var-a.out 8), none $(loss var-quiet.out 8), alpha 1 $(loss lamb-a.out 8)"
fi
contains lamb_noise_named_at_start_up var-a.out "^train: --lamb-layerwise-noise 0.3: each tensor's update u gets 0.3 x"
contains embedding_lr_mult_named_at_start_up var-a.out "^train: --embedding-lr-mult 2: the word embedding, the tied output layer with it, learns at 2 x"
"$TR" "${M[@]}" --optimizer lamb --lamb-layerwise-noise 0 --alpha 1 "${ONE[@]}" >noop.out 2>&1
contains lamb_noise_zero_is_named noop.out "^train: --lamb-layerwise-noise 0: no effect"
contains alpha_one_is_named noop.out "^train: --alpha 1: no effect"
expect_rc lamb_noise_with_adam_refused 2 "$TR" "${M[@]}" --lamb-layerwise-noise 0.1 "${ONE[@]}"
contains lamb_noise_refusal_says_why "$T/err" "--lamb-layerwise-noise is LAMB's: it needs --optimizer lamb \(not adam\)"
expect_rc lamb_noise_with_sgd_refused 2 "$TR" "${M[@]}" --optimizer sgd --lamb-layerwise-noise 0.1 "${ONE[@]}"
contains lamb_noise_with_sgd_says_why "$T/err" "it needs --optimizer lamb \(not sgd\)"
expect_rc negative_noise_refused 2 "$TR" "${M[@]}" --optimizer lamb --lamb-layerwise-noise -0.1 "${ONE[@]}"
contains negative_noise_says_why "$T/err" "lamb-layerwise-noise.*'-0.1' is not a number >= 0"
expect_rc negative_alpha_refused 2 "$TR" "${M[@]}" --alpha -1 "${ONE[@]}"
contains negative_alpha_says_why "$T/err" "alpha.*'-1' is not a number >= 0"
# 8-bit Adam: after one step only the word embedding differs from the run without the multiplier
# (its 32-bit Adam; the position embeddings and every 8-bit tensor took the same first step)
for a in 1 3; do
	"$TR" "${M[@]}" --use-bnb-optimizer --embedding-lr-mult $a "${ONE[@]}" \
		--save bnb$a --save-interval 1 >bnb$a.out 2>&1 || fail bnb_embedding_lr_mult_runs "$(tail -3 bnb$a.out)"
done
if python3 - bnb1/global_step1/rank_tp00_pp000.safetensors bnb3/global_step1/rank_tp00_pp000.safetensors >bnb.cmp <<'PYEOF'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
a, b = load(sys.argv[1]), load(sys.argv[2])
diff = sorted(k for k in a if a[k] != b[k])
print("differ:", diff)
sys.exit(not ("word_embeddings.weight" in diff and all("word_embeddings.weight" in k for k in diff)))
PYEOF
then
	ok bnb_embedding_lr_mult_moves_only_the_word_embedding
else
	fail bnb_embedding_lr_mult_moves_only_the_word_embedding "$(cat bnb.cmp; tail -1 bnb3.out)"
fi

# layouts (mpirun on the CPU): TP=2 x PP=2 with the noise keeps every replica bit-identical
# (the TP ranks' layer norms and row-parallel biases, the two stages' word embeddings); TP=2
# with the multiplier equals TP=1
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	mpirun --oversubscribe -np 4 "$TR" "${M[@]}" "${V[@]}" --tensor-model-parallel-size 2 \
		--pipeline-model-parallel-size 2 --train-iters 8 --save t2p2 --save-interval 8 >t2p2.out 2>&1 ||
		fail lamb_noise_tp2_pp2_runs "$(tail -3 t2p2.out)"
	expect_rc lamb_noise_keeps_tp_replicas_and_tied_copies_identical 0 "$BIN/ckpt-sync-ln" t2p2/global_step8
	"$TR" "${M[@]}" --alpha 4 --train-iters 8 >alpha-tp1.out 2>&1
	mpirun --oversubscribe -np 2 "$TR" "${M[@]}" --alpha 4 --tensor-model-parallel-size 2 --train-iters 8 \
		>alpha-tp2.out 2>&1 || fail alpha_tp2_runs "$(tail -3 alpha-tp2.out)"
	if python3 - <(losses alpha-tp1.out) <(losses alpha-tp2.out) <(losses adam.out) <<'PYEOF'
import sys
one, two, base = ([float(x) for x in open(f)] for f in sys.argv[1:4])
sys.exit(not (len(one) == len(two) == len(base) == 8 and all(abs(a - b) <= 1e-5 * a for a, b in zip(one, two))
              and abs(one[-1] - base[-1]) > 0.1))
PYEOF
	then
		ok embedding_lr_mult_tp2_equals_tp1
	else
		fail embedding_lr_mult_tp2_equals_tp1 "iteration 8: $(loss alpha-tp1.out 8) vs $(loss alpha-tp2.out 8) (alpha 1: $(loss adam.out 8))"
	fi
else
	skip lamb_noise_keeps_tp_replicas_and_tied_copies_identical "no mpirun or no build/lib/lmtk/train-mpi.so"
fi

# LAMB on the CUDA backend through the executor, with the noise and the multiplier: the CPU run's
# losses within bf16's reach, and far closer to the CPU's noisy run than the noise moves it (other
# draws, or draws at other indices, would leave it about as far off as the run without noise)
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
if [ -s "$EXEC" ]; then
	LMTK_CUDA_PLUGIN=$EXEC "$TR" "${M[@]}" "${V[@]}" --train-iters 8 --device cuda --bf16 \
		>lamb-cuda.out 2>&1 || fail lamb_cuda_run "$(tail -3 lamb-cuda.out)"
	if python3 - <(losses var-a.out) <(losses lamb-cuda.out) <(losses var-quiet.out) >cuda.cmp <<'PYEOF'
import sys
c, g, q = ([float(x) for x in open(f)] for f in sys.argv[1:4])
ok = len(c) == len(g) == len(q) == 8 and all(abs(a - b) < 0.05 * a for a, b in zip(c, g)) and g[-1] < g[0] - 0.1
gap, noise = max(abs(a - b) for a, b in zip(c, g)), max(abs(a - b) for a, b in zip(c, q))
print("cuda vs cpu %.2e, the noise moves the cpu run %.2e" % (gap, noise))
sys.exit(not (ok and gap < noise / 5))
PYEOF
	then
		ok lamb_cuda_draws_the_cpus_noise
	else
		fail lamb_cuda_draws_the_cpus_noise "$(cat cuda.cmp); iteration 8: cpu $(loss var-a.out 8), cuda $(loss lamb-cuda.out 8), no noise $(loss var-quiet.out 8)"
	fi
else
	skip lamb_cuda_draws_the_cpus_noise "the executor plugin is not built"
fi
