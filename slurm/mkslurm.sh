#!/bin/bash
# mkslurm.sh - write slurm/train.slurm, slurm/setup-test-n2.slurm and the BigScience presets
# slurm/examples/{tr1-13B,tr8b-104B,tr11-176B-ml}.slurm from slurm/train.slurm.in.
#
#   bash slurm/mkslurm.sh [OUTDIR]      (default: this script's directory, i.e. slurm/)
#
# The training job array, its 2-node test setup and the presets are one script with other sizes,
# as in the BigScience runs; generating them all from one template keeps them from drifting apart
# (a fix to the signal handling or the kill switch reaches every one).  Only the header and the
# settings' defaults differ: the {{KEY}} placeholders below; a placeholder alone on its line with
# an empty value takes the line with it.  The outputs are committed, so that `sbatch
# slurm/train.slurm` works from a checkout; tests/cli/train-slurm.sh and presets.sh regenerate
# them and fail when they differ from what is committed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE}
TEMPLATE=$HERE/train.slurm.in

# render FILE KEY=VALUE...: the template with every {{KEY}} replaced; any placeholder left is an error
render() {
	local file=$1 kv text
	shift
	text=$(cat "$TEMPLATE")
	for kv in "$@"; do
		[ -n "${kv#*=}" ] || text=${text//$'\n'"{{${kv%%=*}}}"$'\n'/$'\n'}
		text=${text//"{{${kv%%=*}}}"/"${kv#*=}"}
	done
	if [[ $text == *'{{'* ]]; then
		echo "mkslurm.sh: $file: placeholder left: $(grep -o '{{[A-Z_]*}}' <<<"$text" | head -1)" >&2
		exit 1
	fi
	mkdir -p "$(dirname "$OUT/$file")"
	printf '%s\n' "$text" >"$OUT/$file.tmp"
	chmod 755 "$OUT/$file.tmp"
	mv "$OUT/$file.tmp" "$OUT/$file"
}

render train.slurm \
	SCRIPT=train.slurm \
	JOB_NAME=train \
	NODES=1 \
	TASKS_PER_NODE=1 \
	SBATCH_GPUS= \
	TP=1 \
	PP=1 \
	DS_CONFIG= \
	TO_PREFIX=../../.. \
	TIME=20:00:00 \
	SIGNAL_LEAD=600 \
	DESCRIPTION="# The training job array, BigScience-style: submit the run's whole length at once, and let
# SLURM run it one task at a time, each resuming where the last one stopped:
#
#   DATA_PATH=\$WORK/data/meg-gpt2_text_document VOCAB=gpt2-vocab.json MERGES=gpt2-merges.txt \\
#       sbatch --array=1-10%1 --job-name=tr-350M slurm/train.slurm
#
# Ten tasks of up to 20 hours (--time) each.  The default model is a 350M-parameter GPT (24 layers,
# hidden 1024) on one GPU, bf16, with a batch-size ramp-up: set MODEL_ARGS/TRAIN_ARGS for yours.
# Add your cluster's GPU request (--gpus-per-node, --partition, --account) on the sbatch line.
# More ranks: --nodes and --ntasks-per-node (one per GPU) on the sbatch line, TP=N in the
# environment for tensor parallelism; DP is the rest (the layout, below).
# slurm/setup-test-n2.slurm is the same script on 2 nodes, with a tiny model, to try a setup." \
	MODEL_ARGS="--num-layers 24 --hidden-size 1024 --num-attention-heads 16
	--seq-length 2048 --max-position-embeddings 2048" \
	TRAIN_ARGS="--micro-batch-size 4 --global-batch-size 256 --rampup-batch-size 32 32 2_000_000
	--train-samples 50_000_000 --lr-decay-samples 45_000_000 --lr-warmup-samples 500_000
	--lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --clip-grad 1.0 --weight-decay 0.1
	--adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --bf16 --checkpoint-activations
	--log-interval 10 --save-interval 300 --eval-interval 1000 --eval-iters 5
	--log-timers-to-tensorboard --log-batch-size-to-tensorboard --log-validation-ppl-to-tensorboard"

render setup-test-n2.slurm \
	SCRIPT=setup-test-n2.slurm \
	JOB_NAME=setup-test-n2 \
	NODES=2 \
	TASKS_PER_NODE=2 \
	SBATCH_GPUS= \
	TP=2 \
	PP=1 \
	DS_CONFIG= \
	TO_PREFIX=../../.. \
	TIME=0:30:00 \
	SIGNAL_LEAD=300 \
	DESCRIPTION="# The 2-node test setup: slurm/train.slurm with a tiny model, short tasks and frequent saves,
# to try a cluster's setup (paths, modules, the launcher and MPI, stopping and resuming) in
# minutes before the real run is queued.  Two ranks per node, TP=2: (DP,TP) = (2,2), so both the
# tensor-parallel and the data-parallel collectives cross the network:
#
#   DATA_PATH=\$WORK/data/meg-gpt2_text_document VOCAB=gpt2-vocab.json MERGES=gpt2-merges.txt \\
#       sbatch --array=1-3%1 slurm/setup-test-n2.slurm
#
# Its directories are named after its own job name, so it never touches the real run's." \
	MODEL_ARGS="--num-layers 2 --hidden-size 64 --num-attention-heads 4
	--seq-length 256 --max-position-embeddings 256" \
	TRAIN_ARGS="--micro-batch-size 4 --global-batch-size 16 --train-samples 1_000_000
	--lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-samples 1000 --bf16
	--log-interval 10 --save-interval 50 --eval-interval 100 --eval-iters 2
	--log-timers-to-tensorboard --log-batch-size-to-tensorboard --log-validation-ppl-to-tensorboard"

# ---- The BigScience presets: each run's own model, batch, schedule, precision, layout and
# DeepSpeed config (slurm/examples/NAME.ds_config.json), from its training script in
# bigscience-workshop/bigscience.  Their flags that lmtk's train accepts with no effect here, or
# that a DeepSpeed config overrides, are left out, each named in the preset's description.
# One rank per GPU (--ntasks-per-node = GPUs per node), where BigScience started one launcher per
# node that forked a rank per GPU.
render examples/tr1-13B.slurm \
	SCRIPT=tr1-13B.slurm \
	JOB_NAME=tr1-13B \
	NODES=16 \
	TASKS_PER_NODE=4 \
	SBATCH_GPUS="#SBATCH --gpus-per-node=4" \
	TP=2 \
	PP=4 \
	DS_CONFIG=tr1-13B.ds_config.json \
	TO_PREFIX=../../../.. \
	TIME=20:00:00 \
	SIGNAL_LEAD=600 \
	DESCRIPTION="# BigScience's tr1-13B: a 13B-parameter GPT (40 layers, hidden 5120, 32 heads, GPT-2's vocabulary)
# on 300M samples of 2048 tokens, fp16, ZeRO-1, on nodes of 4 V100 32GB with TP=2, PP=4.  The
# batch ramps from 16 to 1024 by 16 over the first 5M samples, and every batch size on the way
# must be a multiple of MBS x DP: DP 16 at most, 32 nodes.  The run ramped up on 16 nodes (DP=8),
# which this script asks for, then went on with 64 and, for its last weeks, 128 (DP=64): once
# the batch has reached 1024 (DRY_RUN=1 says at which iteration), sbatch --nodes=64 or 128.
#
#   DATA_PATH=\$WORK/data/oscar-en/meg-gpt2_text_document VOCAB=gpt2-vocab.json MERGES=gpt2-merges.txt \\
#       sbatch --array=1-50%1 --account=... slurm/examples/tr1-13B.slurm
#
# Try it first with DRY_RUN=1 bash tr1-13B.slurm (the plan: parameters, memory per GPU, days).
# DeepSpeed's config is tr1-13B.ds_config.json beside this script (DS_CONFIG): its batch sizes
# must agree with --micro-batch-size and --global-batch-size (train checks them), and its fp16
# block is the loss scaler - a dynamic one from 2^12, which is why the run's --loss-scale 12 is
# not given (the config overrode it).  Its steps_per_print and wall_clock_breakdown, and the flags
# --tensorboard-queue-size, --data-impl and --distributed-backend, have no effect in lmtk and are
# left out." \
	MODEL_ARGS="--num-layers 40 --hidden-size 5120 --ffn-hidden-size 20480 --num-attention-heads 32
	--seq-length 2048 --max-position-embeddings 2048" \
	TRAIN_ARGS="--micro-batch-size 1 --global-batch-size 1024 --rampup-batch-size 16 16 5_000_000
	--train-samples 300_000_000 --fp16 --checkpoint-activations --seed 42
	--optimizer adam --adam-beta1 0.9 --adam-beta2 0.999 --adam-eps 1e-8 --lr 1e-4 --min-lr 1e-5
	--lr-decay-style cosine --lr-decay-samples 126_953_125 --lr-warmup-samples 216_320
	--clip-grad 1.0 --weight-decay 1e-1 --exit-duration-in-mins 1190 --split 949,50,1
	--log-interval 10 --save-interval 1500 --eval-interval 1000 --eval-iters 5
	--codecarbon-dir \${WORK:-\$HOME}/codecarbon/\$RUN
	--log-timers-to-tensorboard --log-batch-size-to-tensorboard --log-validation-ppl-to-tensorboard
	--zero-stage 1 --deepspeed-activation-checkpointing"

render examples/tr8b-104B.slurm \
	SCRIPT=tr8b-104B.slurm \
	JOB_NAME=tr8b-104B \
	NODES=128 \
	TASKS_PER_NODE=4 \
	SBATCH_GPUS="#SBATCH --gpus-per-node=4" \
	TP=4 \
	PP=32 \
	DS_CONFIG=tr8b-104B.ds_config.json \
	TO_PREFIX=../../../.. \
	TIME=20:00:00 \
	SIGNAL_LEAD=600 \
	DESCRIPTION="# BigScience's tr8b-104B: a 104B-parameter GPT (64 layers, hidden 11600, 80 heads, GPT-2's
# vocabulary, a LayerNorm after the embedding) on 300B tokens, fp16, ZeRO-1, on 128 nodes of 4
# V100 32GB (TP=4, PP=32, DP=4); its curriculum-learning experiment (tr8b-104B-cl), the one that
# kept the run's name: the sequence length grows from 64 to 2048 tokens over the first 36000
# iterations (the config's curriculum_learning block), in place of a batch-size ramp-up, and the
# learning rate decays over 260B tokens.
#
#   DATA_PATH=\$WORK/data/oscar-en/meg-gpt2_text_document VOCAB=gpt2-vocab.json MERGES=gpt2-merges.txt \\
#       sbatch --array=1-100%1 --account=... slurm/examples/tr8b-104B.slurm
#
# Try it first with DRY_RUN=1 bash tr8b-104B.slurm.  DeepSpeed's config is
# tr8b-104B.ds_config.json beside this script (DS_CONFIG): batch sizes, fp16's dynamic loss
# scaler from 2^12 (so the run's --loss-scale 12, which it overrode, is not given) and the
# curriculum.  Its steps_per_print and wall_clock_breakdown, and the flags
# --tensorboard-queue-size, --data-impl and --distributed-backend, have no effect in lmtk and are
# left out." \
	MODEL_ARGS="--num-layers 64 --hidden-size 11600 --num-attention-heads 80
	--seq-length 2048 --max-position-embeddings 2048 --init-method-std 0.006 --embed-layernorm" \
	TRAIN_ARGS="--micro-batch-size 1 --global-batch-size 2048
	--train-samples 600_000_000 --train-tokens 300_000_000_000 --fp16 --checkpoint-activations --seed 43
	--optimizer adam --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --lr 6e-5 --min-lr 6e-6
	--lr-warmup-samples 3_750_000 --lr-decay-tokens 260_000_000_000 --lr-decay-style cosine
	--clip-grad 1.0 --weight-decay 1e-1 --exit-duration-in-mins 1190 --split 949,50,1
	--log-interval 1 --save-interval 300 --eval-interval 150 --eval-iters 5
	--log-timers-to-tensorboard --log-batch-size-to-tensorboard --log-validation-ppl-to-tensorboard
	--zero-stage 1 --deepspeed-activation-checkpointing"

render examples/tr11-176B-ml.slurm \
	SCRIPT=tr11-176B-ml.slurm \
	JOB_NAME=tr11-176B-ml \
	NODES=48 \
	TASKS_PER_NODE=8 \
	SBATCH_GPUS="#SBATCH --gpus-per-node=8" \
	TP=4 \
	PP=12 \
	DS_CONFIG=tr11-176B-ml.ds_config.json \
	TO_PREFIX=../../../.. \
	TIME=100:00:00 \
	SIGNAL_LEAD=600 \
	DESCRIPTION="# BigScience's tr11-176B-ml, BLOOM: a 176B-parameter multilingual model (70 layers, hidden 14336,
# 112 heads, ALiBi positions, a LayerNorm after the embedding, BLOOM's 250880-entry padded
# vocabulary) on 450B tokens of the 46-language catalogue, bf16, on 48 nodes of 8 A100 80GB
# (TP=4, PP=12, DP=8): the batch ramps from 192 to 2048 by 16 over the first 9.8M samples.
# bf16 takes ZeRO stage 0 in its DeepSpeed config: DeepSpeed's bf16 optimizer shards the
# optimizer state itself, like stage 1.  (The run began with --micro-batch-size 1 and moved to 2,
# the value here, at a batch of 784; 2 divides every batch of the ramp-up at DP=8.)
#
#   CATALOGUE=\$WORK/catalogue.json TOKENIZER=\$WORK/bloom-tokenizer \\
#       sbatch --array=1-40%1 --account=... slurm/examples/tr11-176B-ml.slurm
#
# CATALOGUE is the data mix, a JSON list of {\"dataset_path\": PREFIX, \"ratio\": R} (mkindex(1)
# weights): every dataset's first 95% trains at its ratio, the rest validates, blended and per
# dataset; or set DATA_PATH instead.  Try it first with DRY_RUN=1 bash tr11-176B-ml.slurm.  Its
# tasks ran 100 hours (a special QoS); where the limit is lower, sbatch --time=20:00:00 and
# EXTRA_ARGS=\"--exit-duration-in-mins 1190\" (the later flag wins).  DeepSpeed's config is
# tr11-176B-ml.ds_config.json beside this script (DS_CONFIG); its steps_per_print and
# wall_clock_breakdown, and the flags --sync-tp-duplicated-parameters (replicated tensors are
# identical across TP ranks by construction here), --abort-on-unmet-fused-kernel-constraints,
# --num-workers, --valid-num-workers, --tensorboard-queue-size, --data-impl and
# --distributed-backend, have no effect in lmtk and are left out." \
	MODEL_ARGS="--num-layers 70 --hidden-size 14336 --num-attention-heads 112
	--seq-length 2048 --max-position-embeddings 2048 --position-embedding-type alibi
	--embed-layernorm --pad-vocab-size-to 250880 --init-method-std 0.0048
	--pp-partition-method type:transformer|embedding" \
	TRAIN_ARGS="--micro-batch-size 2 --global-batch-size 2048 --rampup-batch-size 192 16 9_765_625
	--train-samples 220_000_000 --bf16 --checkpoint-activations --seed 42
	--optimizer adam --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --lr 6e-5 --min-lr 6e-6
	--lr-decay-style cosine --lr-decay-samples 200_000_000 --lr-warmup-samples 183_105
	--clip-grad 1.0 --weight-decay 1e-1 --exit-duration-in-mins 5990
	--log-interval 1 --save-interval 100 --eval-interval 1000 --eval-iters 1
	--log-timers-to-tensorboard --log-batch-size-to-tensorboard --log-validation-ppl-to-tensorboard
	--zero-stage 0 --deepspeed-activation-checkpointing"
