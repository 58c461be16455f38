#!/usr/bin/env bash
# train-gpu-model.sh - a model of the CUDA training step on an H100 SXM and an A100, from what
# the step launches: the CUDA backend runs on the CPU executor (tests/cuda-exec) with
# LMTK_CUDA_EXEC_PROFILE, which records every kernel (with the distinct 32-byte sectors it read
# and wrote: its compulsory DRAM traffic), every cuBLASLt GEMM (shape, types, epilogue), every
# copy and every NCCL call of one iteration that `train --profile` brackets with
# cudaProfilerStart/Stop.  tests/bench/gpu-model.py extends four such records (1 and 2 layers,
# micro-batch 1 and 2, at the real width and vocabulary and a short sequence) to the real layer
# count and B x T = 16 x 1024, and prices every operation against the device's published peaks
# (its header has the rules and the efficiency factors).  GPT-2 124M and 350M shapes.
# TRAIN_MODEL_BATCH changes B.  Takes about 10 minutes on 2 cores (the executor runs every GPU
# thread on the CPU).  No GPU needed; tests/bench/train-gpu.sh measures where one is lent.
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${TRAIN_MODEL_BATCH:-16}
RUN_T=64
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
[ -x "$TOP/bin/train" ] && [ -s "$EXEC" ] || { echo "train-gpu-model: build first (make)" >&2; exit 1; }
W=$(mktemp -d /tmp/train-gpu-model.XXXXXX)
trap 'rm -rf "$W"' EXIT
# a synthetic Megatron dataset of random GPT-2 ids and a 50257-entry vocabulary (GPT-2's size,
# padded to 50304 as Megatron pads it): only the shapes matter here
python3 "$TOP/tests/ref/rand-dataset.py" "$W/rand" 64 256 50257 1 || exit 3
cd "$W" || exit 1
profile() {   # profile OUT LAYERS HIDDEN HEADS MICRO_BATCH
	LMTK_CUDA_EXEC_SHADOW=0 LMTK_CUDA_EXEC_PROFILE=$W/$1 LMTK_CUDA_EXEC_PROFILE_CAPTURE=api \
	LMTK_CUDA_PLUGIN=$EXEC "$TOP/bin/train" --num-layers "$2" --hidden-size "$3" \
		--num-attention-heads "$4" --seq-length $RUN_T --max-position-embeddings 1024 \
		--micro-batch-size "$5" --global-batch-size "$5" --train-iters 2 --lr 1e-4 --bf16 \
		--data-path rand --vocab-file vocab.json --merge-file merges.txt --split 1000,0,0 \
		--eval-iters 0 --log-interval 1 --device cuda --profile --profile-step-start 1 \
		--profile-step-end 2 >"$W/$1.log" 2>&1 || { echo "train-gpu-model: train failed:" >&2; tail -5 "$W/$1.log" >&2; exit 1; }
}
for shape in "124M 12 768 12 124439808" "350M 24 1024 16 354823168"; do
	set -- $shape
	for l in 1 2; do
		for b in 1 2; do
			profile "$1-$l-$b.jsonl" $l $3 $4 $b
		done
	done
	python3 "$TOP/tests/bench/gpu-model.py" --name "GPT-2 $1" --layers $2 --hidden $3 --heads $4 \
		--seq 1024 --batch "$B" --params $5 --run-seq $RUN_T --json "$W/$1.json" \
		"$1-1-1.jsonl" "$1-2-1.jsonl" "$1-1-2.jsonl" "$1-2-2.jsonl" || exit 1
done
