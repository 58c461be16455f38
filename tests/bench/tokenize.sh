#!/usr/bin/env bash
# tokenize against its peers on the same >= 50 MB English corpus, in one run: HF tokenizers (npm,
# native) and tiktoken (npm, WASM), single-threaded, one document per call, GPT-2's vocabulary;
# then tokenize's scaling with --workers.  Speeds are UTF-8 text bytes per second of wall time;
# tokenize's time includes loading the vocabulary and parsing the JSON lines, the peers' only the
# encode calls, so the ratios are conservative.  Also checks all three agree on the token count.
#   last lines: "tokenize: N MB: 1 worker X MB/s = A x tiktoken, B x HF; 2 workers Y MB/s"
# The corpus needs the OpenWebText documents beside the checkout (CI's ../shared, or LMTK_OWT);
# without them (a bare clone) it says so and exits 0: speeds on another corpus would not compare.
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OWT=${LMTK_OWT:-$TOP/../shared/data/megatron/openwebtext-1000.jsonl}
if [ ! -r "$OWT" ]; then
	echo "bench: tokenize: the bench corpus's OpenWebText documents are not here ($OWT; set LMTK_OWT): skipped"
	exit 0
fi
export LMTK_OWT=$OWT
CACHE=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}
mkdir -p "$CACHE"
export LMTK_NODE_MODULES=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}
C=$CACHE/bench.jsonl
bash "$TOP/tests/ref/corpus.sh" --bench "$C" >&2
bash "$TOP/tests/ref/gpt2-files.sh" "$CACHE/gpt2" >&2
G=$CACHE/gpt2
text_mb=$(/usr/bin/python3 -c 'import json,sys
print(sum(len(json.loads(l)["text"].encode()) for l in open(sys.argv[1], encoding="utf-8")) / 1e6)' "$C")

peers=$(node "$TOP/tests/bench/peers.js" "$C")
echo "$peers" >&2
hf=$(awk '$1 == "hf" { print $2 }' <<<"$peers")
tt=$(awk '$1 == "tiktoken" { print $2 }' <<<"$peers")
peer_tokens=$(awk '$1 == "tiktoken" { print $4 }' <<<"$peers")

run() {  # WORKERS -> MB/s (best of 3)
	local best=0 t0 t1 s
	for _ in 1 2 3; do
		t0=$(date +%s.%N)
		"$TOP/bin/tokenize" --quiet --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" \
			--workers "$1" < "$C" > "$CACHE/bench.stream"
		t1=$(date +%s.%N)
		s=$(awk -v a="$t0" -v b="$t1" -v mb="$text_mb" 'BEGIN { printf "%.1f", mb / (b - a) }')
		best=$(awk -v a="$best" -v b="$s" 'BEGIN { print (b > a ? b : a) }')
	done
	echo "$best"
}
w1=$(run 1)
ours_tokens=$("$TOP/bin/tokenize" --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --format text < "$C" 2>/dev/null | wc -w)
[ "$ours_tokens" = "$peer_tokens" ] || { echo "tokenize: token count $ours_tokens != tiktoken's $peer_tokens" >&2; exit 1; }
scaling=""
for w in 2 4; do scaling="$scaling; $w workers $(run $w) MB/s"; done
awk -v mb="$text_mb" -v w1="$w1" -v tt="$tt" -v hf="$hf" -v sc="$scaling" 'BEGIN {
	printf "tokenize: %.1f MB of text, GPT-2 vocab: 1 worker %.1f MB/s = %.1fx tiktoken (%.1f MB/s), %.1fx HF tokenizers (%.1f MB/s)%s\n",
		mb, w1, w1 / tt, tt, w1 / hf, hf, sc }'
