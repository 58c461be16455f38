#!/bin/bash
# mkslurm.sh - write slurm/train.slurm and slurm/setup-test-n2.slurm from slurm/train.slurm.in.
#
#   bash slurm/mkslurm.sh [OUTDIR]      (default: this script's directory, i.e. slurm/)
#
# The training job array and its 2-node test setup are one script with other sizes, as in the
# BigScience runs; generating both from one template keeps them from drifting apart (a fix to the
# signal handling or the kill switch reaches both).  Only the header and the settings' defaults
# differ: the {{KEY}} placeholders below.  Both outputs are committed, so that `sbatch
# slurm/train.slurm` works from a checkout; tests/cli/train-slurm.sh regenerates them and fails
# when they differ from what is committed.
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
		text=${text//"{{${kv%%=*}}}"/"${kv#*=}"}
	done
	if [[ $text == *'{{'* ]]; then
		echo "mkslurm.sh: $file: placeholder left: $(grep -o '{{[A-Z_]*}}' <<<"$text" | head -1)" >&2
		exit 1
	fi
	printf '%s\n' "$text" >"$OUT/$file.tmp"
	chmod 755 "$OUT/$file.tmp"
	mv "$OUT/$file.tmp" "$OUT/$file"
}

render train.slurm \
	SCRIPT=train.slurm \
	JOB_NAME=train \
	NODES=1 \
	TASKS_PER_NODE=1 \
	TP=1 \
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
	TP=2 \
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
