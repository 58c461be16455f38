#!/usr/bin/env bash
# train-gpu.sh - everything lmtk checks and measures on a GPU, as one script (sized for under 8
# minutes on one H100, not yet run on one; `bash tests/bench/train-gpu.sh` on a machine with a
# GPU, CUDA and torch):
#  1. builds what it needs for this GPU's architecture only (nvidia-smi's compute capability):
#     train, the CUDA plugin and the ops test (TRAIN_BENCH_NO_BUILD=1 uses what is built);
#  2. every ops.h function of the real plugin against the CPU backend, in bf16 and in fp16
#     (build/tests/train_cudaops; the same cases the CPU executor runs in make check);
#  3. train on one GPU (bf16, the CUDA backend) against PyTorch on the same GPU (bf16 autocast
#     + scaled_dot_product_attention + torch.compile + fused AdamW: tests/bench/train-torch-gpu.py),
#     GPT-2 124M and 350M shapes, seq 1024, in one run, and train again with --cuda-graph;
#     tokens/s and MFU (model FLOPs 6N + 12LCT per token against the GPU's dense bf16 peak, 989
#     TFLOP/s for H100/H200 SXM; TRAIN_BENCH_PEAK to change).
# Without a GPU it says so and exits 0.  Exit 1 when a build or an ops check fails.
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${TRAIN_BENCH_PYTHON:-python3}
PEAK=${TRAIN_BENCH_PEAK:-989}
B=${TRAIN_BENCH_BATCH:-16}
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "bench: train-gpu: no GPU on this machine (nvidia-smi finds none): skipped"
	exit 0
fi
cd "$TOP" || exit 1
if [ "${TRAIN_BENCH_NO_BUILD:-0}" = 0 ]; then
	cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
	case $cc in [0-9][0-9]) ;; *) echo "train-gpu: cannot read the GPU's compute capability ('$cc')" >&2; exit 1 ;; esac
	echo "bench: train-gpu: building for sm_$cc"
	make -j"$(nproc)" --no-print-directory CUDA_ARCH="-gencode arch=compute_$cc,code=sm_$cc" \
		bin/train build/lib/lmtk/train-cuda.so build/tests/train_cudaops >"${TMPDIR:-/tmp}/train-gpu-build.log" 2>&1 ||
		{ echo "train-gpu: the build failed:" >&2; tail -20 "${TMPDIR:-/tmp}/train-gpu-build.log" >&2; exit 1; }
fi
[ -x "$TOP/bin/train" ] && [ -s "$TOP/build/lib/lmtk/train-cuda.so" ] || { echo "train-gpu: build first (make)" >&2; exit 1; }
bad=0
for prec in "" --fp16; do
	LMTK_CUDA_PLUGIN=$TOP/build/lib/lmtk/train-cuda.so "$TOP/build/tests/train_cudaops" $prec \
		>"${TMPDIR:-/tmp}/train-gpu-ops.out" 2>&1
	rc=$?
	o=${TMPDIR:-/tmp}/train-gpu-ops.out
	echo "bench: train-gpu: ops against the CPU backend ${prec:-(bf16)}: $(grep -c '^ok' "$o") passed, $(grep -c '^FAIL' "$o") failed, $(grep -c '^skip' "$o") skipped, exit $rc"
	grep '^FAIL\|^skip\|^# ' "$o" | head -20
	# on a GPU nothing may be skipped: a skip means the plugin found no device
	[ $rc = 0 ] && [ "$(grep -c '^ok' "$o")" -gt 0 ] && ! grep -q '^skip' "$o" || bad=1
done
W=$(mktemp -d /tmp/train-gpu.XXXXXX)
trap 'rm -rf "$W"' EXIT
# a synthetic Megatron dataset of random GPT-2 ids: only the ids' range matters for speed
/usr/bin/env python3 - "$W/rand" <<'PYEOF'
import struct, sys, random
p = sys.argv[1]; random.seed(1); n = 2000; L = 2048
sizes = [L] * n
with open(p + ".bin", "wb") as f:
    for _ in range(n):
        f.write(struct.pack("<%dH" % L, *[random.randrange(50257) for _ in range(L)]))
ptr = [i * L * 2 for i in range(n)]
with open(p + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, n, n + 1))
    f.write(struct.pack("<%di" % n, *sizes) + struct.pack("<%dq" % n, *ptr) + struct.pack("<%dq" % (n + 1), *range(n + 1)))
PYEOF
/usr/bin/env python3 -c "import json; json.dump({'t%d' % i: i for i in range(50257)}, open('$W/vocab.json', 'w'))"
: > "$W/merges.txt"
printf '| model | PyTorch tokens/s | MFU | train tokens/s | MFU | ratio | train --cuda-graph tokens/s | MFU |\n|---|---|---|---|---|---|---|---|\n'
trainrun() {   # trainrun LAYERS HIDDEN HEADS [flags]: "tokens/s MFU" of the last logged iteration
	"$TOP/bin/train" --num-layers $1 --hidden-size $2 --num-attention-heads $3 --seq-length 1024 \
		--max-position-embeddings 1024 --micro-batch-size $B --global-batch-size $B --train-iters 25 \
		--lr 6e-4 --data-path "$W/rand" --vocab-file "$W/vocab.json" --merge-file "$W/merges.txt" \
		--log-interval 5 --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --bf16 \
		--device cuda --peak-tflops $PEAK "${@:4}" > "$W/train.out" 2>&1 ||
		{ echo "train-gpu: train ${*:4} failed: $(tail -n 2 "$W/train.out")" >&2; echo "? ?"; return; }
	local l sps mfu
	l=$(grep '^ iteration' "$W/train.out" | tail -1)
	sps=$(sed 's/.*samples per second: \([0-9.]*\).*/\1/' <<<"$l")
	mfu=$(sed -n 's/.*MFU: \([0-9.]*\)%.*/\1/p' <<<"$l")
	echo "$(awk -v s="${sps:-0}" 'BEGIN { printf "%.0f", s * 1024 }') ${mfu:-?}%"
}
for shape in "124M 12 768 12" "350M 24 1024 16"; do
	set -- $shape
	t=$("$PY" "$TOP/tests/bench/train-torch-gpu.py" --layers $2 --hidden $3 --heads $4 --seq 1024 \
		--batch $B --peak-tflops $PEAK 2>/dev/null | awk '/^torch-gpu/ { print $3, $5 }')
	read -r ttok mfu <<<"$(trainrun $2 $3 $4)"
	read -r gtok gmfu <<<"$(trainrun $2 $3 $4 --cuda-graph)"
	read -r ptok pmfu <<<"$t"
	echo "| GPT-2 $1, B=$B T=1024, bf16 | ${ptok:-?} | ${pmfu:-?} | $ttok | $mfu | $(awk -v a="$ttok" -v b="${ptok:-0}" 'BEGIN { if (b > 0 && a > 0) printf "%.2f", a / b; else print "?" }') | $gtok | $gmfu |"
done
echo "bench: train-gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
exit $bad
