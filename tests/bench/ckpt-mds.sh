#!/usr/bin/env bash
# ckpt-mds.sh - is the Megatron-DeepSpeed conversion disk-bound?  Converting a DeepSpeed pipeline
# checkpoint of a GPT-2 124M-shaped model (12 layers x 768, 12 heads, 50432 x 768 word
# embeddings; TP=2 PP=2, ZeRO over DP=2: bf16 layer files plus the bf16 optimizer's fp32 master
# and moment partitions, 2.24 GB of .pt files) into an lmtk checkpoint with its optimizer state
# (ckpt-merge-tp --from megatron-deepspeed --optimizer, TP=1 PP=1), against cp of the same step
# directory.
#
# The checkpoint is made once under ${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/ckpt-mds: train runs 2
# iterations of the 124M shape (seq 128, on the CPU, the tiny vocabulary padded to 50432 rows:
# GPT-2's 50304 is not a multiple of 128 x TP=2, and a DeepSpeed checkpoint at TP=2 would hold
# Megatron's padding) and saves; tests/ref/mds-ckpt.py write-ds rewrites that step with the real
# torch.save as DeepSpeed lays it out.  Then, CKPT_MDS_BENCH_RUNS times (default 3), alternately:
#   cp:      cp -r ds/global_step2 copy && sync copy/*   (the same bytes in, fsynced out)
#   convert: ckpt-merge-tp --from megatron-deepspeed ds --output lmtk --optimizer
#            (reads every pickle, un-partitions masters and moments, writes TP=1, fsyncs)
#   read:    cat ds/global_step2/* > /dev/null           (what reading alone costs)
# each from a cold page cache (sync; echo 3 > /proc/sys/vm/drop_caches) when this is allowed
# (root), else from a warm one (all inputs read once first); the line says which.  Medians are
# compared; MB/s is input bytes (the .pt files) per second (10^6).  Fails if a conversion fails
# or its result is not train's original TP=1 shard byte for byte.  Last line (a 2-core VM):
#   bench: ckpt-mds: DeepSpeed TP=2 PP=2 DP=2 -> lmtk TP=1, 125M params, 2.24 GB: convert 3.01 s
#   (743 MB/s), cp 3.40 s (660 MB/s), ratio 0.89 (convert/cp); read alone 1.34 s; cold cache, median of 3
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/ckpt-mds
RUNS=${CKPT_MDS_BENCH_RUNS:-3}
MEG=${LMTK_MEGATRON_DIR:-$TOP/../shared/data/megatron}
PY=/usr/bin/python3
# without the reference dataset (a bare clone): the project's own, built by tests/ref/tiny-dataset.sh
if [ ! -f "$MEG/meg-gpt2-openwebtext_text_document.idx" ]; then
	MEG=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/tiny-dataset
	"$TOP/tests/ref/tiny-dataset.sh" "$MEG" >/dev/null 2>&1 || { echo "${0##*/}: could not build $MEG" >&2; exit 1; }
fi
MT=$TOP/bin/ckpt-merge-tp
NAME=ckpt-mds

die() { echo "$NAME: $*" >&2; exit 1; }
[ -x "$MT" ] && [ -x "$TOP/bin/train" ] || die "bin/ckpt-merge-tp or bin/train is not built (run make)"
"$PY" -c 'import torch, numpy' 2>/dev/null || die "python3-torch and python3-numpy are needed (make deps)"
mkdir -p "$BENCH"
cd "$BENCH"

if [ ! -s ds/latest ] || [ ! -s tp1/global_step2/manifest.json ]; then
	echo "$NAME: training a 124M-shaped model for 2 iterations and writing it as DeepSpeed would (once)" >&2
	rm -rf tp1 ds
	cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx .
	TRAIN=("$TOP/bin/train" --num-layers 12 --hidden-size 768 --num-attention-heads 12
		--seq-length 128 --max-position-embeddings 1024 --pad-vocab-size-to 50432
		--micro-batch-size 1 --global-batch-size 1 --lr 1e-4 --train-iters 2
		--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
		--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 2
		--eval-iters 0 --save tp1 --save-interval 2)
	echo "$NAME: ${TRAIN[*]}" >&2
	"${TRAIN[@]}" > train.log 2>&1 || die "train failed: $(tail -3 train.log)"
	"$PY" "$TOP/tests/ref/mds-ckpt.py" write-ds tp1/global_step2 ds --tp 2 --pp 2 --dp 2 > write.log 2>&1 ||
		die "mds-ckpt.py write-ds failed: $(tail -3 write.log)"
fi
bytes=$(cat ds/global_step2/*.pt | wc -c)
params=$("$PY" -c "import json; m = json.load(open('tp1/global_step2/manifest.json'))['files']; print(round(sum(v['bytes'] for v in m.values()) / 12 / 1e6))")
trap 'rm -rf "$BENCH"/copy "$BENCH"/lmtk' EXIT

cache=cold
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; }
if ! drop; then
	cache=warm
	drop() { cat ds/global_step2/* > /dev/null; }
fi
timed() {   # timed CMD...: the seconds CMD took; the benchmark fails if CMD fails
	local t0 t1
	t0=$(date +%s.%N)
	"$@" || die "failed: $*"
	t1=$(date +%s.%N)
	echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}
run_cp() { cp -r ds/global_step2 copy && sync copy/*; }
run_convert() { "$MT" --from megatron-deepspeed ds --output lmtk --optimizer 2> convert.log; }
run_read() { cat ds/global_step2/* > /dev/null; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "$NAME: cp:      cp -r ds/global_step2 copy && sync copy/*" >&2
echo "$NAME: convert: $MT --from megatron-deepspeed ds --output lmtk --optimizer" >&2
echo "$NAME: read:    cat ds/global_step2/* > /dev/null" >&2
cp_t=() cv_t=() rd_t=()
for ((i = 0; i < RUNS; i++)); do
	rm -rf copy lmtk
	drop
	cp_t+=("$(timed run_cp)")
	rm -rf copy
	drop
	cv_t+=("$(timed run_convert)")
	cmp -s lmtk/global_step2/rank_tp00_pp000.safetensors tp1/global_step2/rank_tp00_pp000.safetensors ||
		die "the converted shard is not train's original TP=1 shard: $(tail -2 convert.log)"
	rm -rf lmtk
	drop
	rd_t+=("$(timed run_read)")
	echo "$NAME: run $((i + 1)): cp ${cp_t[i]} s, convert ${cv_t[i]} s, read ${rd_t[i]} s" >&2
done
cp_m=$(median "${cp_t[@]}") cv_m=$(median "${cv_t[@]}") rd_m=$(median "${rd_t[@]}")
awk -v b="$bytes" -v p="$params" -v c="$cp_m" -v m="$cv_m" -v r="$rd_m" -v cache="$cache" -v n="$RUNS" 'BEGIN {
	printf "bench: ckpt-mds: DeepSpeed TP=2 PP=2 DP=2 -> lmtk TP=1, %dM params, %.2f GB: convert %.2f s (%.0f MB/s), cp %.2f s (%.0f MB/s), ratio %.2f (convert/cp); read alone %.2f s; %s cache, median of %d\n",
		p, b / 1e9, m, b / m / 1e6, c, b / c / 1e6, m / c, r, cache, n }'
