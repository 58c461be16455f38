#!/usr/bin/env bash
# ckpt-merge.sh - is ckpt-merge-tp disk-bound?  Merging a TP=2 checkpoint of a GPT-2 124M-shaped
# model (12 layers x 768, 12 heads, 50304 x 768 word embeddings: 124M parameters, 1.49 GB of
# fp32 weights and Adam moments) against cp of the same step directory.
#
# The checkpoint is made once under ${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/ckpt-merge: train
# runs 2 iterations (seq 128, on the CPU, with the tiny vocabulary padded to GPT-2's 50304 by
# --pad-vocab-size-to, which gives the 124M shape) and saves, and ckpt-merge-tp re-splits it to
# TP=2.  Then, CKPT_MERGE_BENCH_RUNS times (default 3), alternately:
#   cp:    cp -r tp2/global_step2 copy && sync copy/*     (the same bytes in, the same out, fsynced)
#   merge: ckpt-merge-tp --input tp2 --output merged      (verifies every CRC, compares the
#                                                          replicated tensors, writes TP=1, fsyncs)
#   read:  cat tp2/global_step2/* > /dev/null             (what reading alone costs)
# each from a cold page cache (sync; echo 3 > /proc/sys/vm/drop_caches) when this is allowed
# (root), else from a warm one (all inputs read once first); the line says which.  Medians are
# compared; MB/s is input bytes per second (10^6).  Fails if a merge fails or its result is not
# the original TP=1 shard byte for byte.  Last line:
#   bench: ckpt-merge: TP=2 -> 1, 124M params, 1.49 GB: merge 8.9 s (168 MB/s), cp 9.8 s, ratio 0.91 ...
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/ckpt-merge
RUNS=${CKPT_MERGE_BENCH_RUNS:-3}
MEG=${LMTK_MEGATRON_DIR:-$TOP/../shared/data/megatron}
# without the reference dataset (a bare clone): the project's own, built by tests/ref/tiny-dataset.sh
if [ ! -f "$MEG/meg-gpt2-openwebtext_text_document.idx" ]; then
	MEG=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/tiny-dataset
	"$TOP/tests/ref/tiny-dataset.sh" "$MEG" >/dev/null 2>&1 || { echo "${0##*/}: could not build $MEG" >&2; exit 1; }
fi
MT=$TOP/bin/ckpt-merge-tp
NAME=ckpt-merge

die() { echo "$NAME: $*" >&2; exit 1; }
[ -x "$MT" ] && [ -x "$TOP/bin/train" ] || die "bin/ckpt-merge-tp or bin/train is not built (run make)"
mkdir -p "$BENCH"
cd "$BENCH"

if [ ! -s tp2/global_step2/manifest.json ]; then
	echo "$NAME: training a 124M-shaped model for 2 iterations and re-splitting it to TP=2 (once)" >&2
	rm -rf tp1 tp2
	cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx .
	TRAIN=("$TOP/bin/train" --num-layers 12 --hidden-size 768 --num-attention-heads 12
		--seq-length 128 --max-position-embeddings 1024 --pad-vocab-size-to 50304
		--micro-batch-size 1 --global-batch-size 1 --lr 1e-4 --train-iters 2
		--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
		--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 2
		--eval-iters 0 --save tp1 --save-interval 2)
	echo "$NAME: ${TRAIN[*]}" >&2
	"${TRAIN[@]}" > train.log 2>&1 || die "train failed: $(tail -3 train.log)"
	"$MT" --input tp1 --output tp2 --target-tp 2 2> split.log || die "re-split failed: $(cat split.log)"
fi
bytes=$(cat tp2/global_step2/*.safetensors | wc -c)
params=$(/usr/bin/python3 -c "import json; m = json.load(open('tp1/global_step2/manifest.json'))['files']; print(round(sum(v['bytes'] for v in m.values()) / 12 / 1e6))")
trap 'rm -rf "$BENCH"/copy "$BENCH"/merged' EXIT

cache=cold
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; }
if ! drop; then
	cache=warm
	drop() { cat tp2/global_step2/* > /dev/null; }
fi
timed() {   # timed CMD...: the seconds CMD took; the benchmark fails if CMD fails
	local t0 t1
	t0=$(date +%s.%N)
	"$@" || die "failed: $*"
	t1=$(date +%s.%N)
	echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}
run_cp() { cp -r tp2/global_step2 copy && sync copy/*; }
run_merge() { "$MT" --input tp2 --output merged 2> merge.log; }
run_read() { cat tp2/global_step2/* > /dev/null; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "$NAME: cp:    cp -r tp2/global_step2 copy && sync copy/*" >&2
echo "$NAME: merge: $MT --input tp2 --output merged" >&2
echo "$NAME: read:  cat tp2/global_step2/* > /dev/null" >&2
cp_t=() mg_t=() rd_t=()
for ((i = 0; i < RUNS; i++)); do
	rm -rf copy merged
	drop
	cp_t+=("$(timed run_cp)")
	rm -rf copy
	drop
	mg_t+=("$(timed run_merge)")
	cmp -s merged/global_step2/rank_tp00_pp000.safetensors tp1/global_step2/rank_tp00_pp000.safetensors ||
		die "the merged shard is not the original TP=1 shard"
	rm -rf merged
	drop
	rd_t+=("$(timed run_read)")
	echo "$NAME: run $((i + 1)): cp ${cp_t[i]} s, merge ${mg_t[i]} s, read ${rd_t[i]} s" >&2
done
cp_m=$(median "${cp_t[@]}") mg_m=$(median "${mg_t[@]}") rd_m=$(median "${rd_t[@]}")
awk -v b="$bytes" -v p="$params" -v c="$cp_m" -v m="$mg_m" -v r="$rd_m" -v cache="$cache" -v n="$RUNS" 'BEGIN {
	printf "bench: ckpt-merge: TP=2 -> 1, %dM params, %.2f GB: merge %.2f s (%.0f MB/s), cp %.2f s (%.0f MB/s), ratio %.2f (merge/cp); read alone %.2f s; %s cache, median of %d\n",
		p, b / 1e9, m, b / m / 1e6, c, b / c / 1e6, m / c, r, cache, n }'
