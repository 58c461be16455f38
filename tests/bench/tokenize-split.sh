#!/usr/bin/env bash
# tokenize --split-sentences against NLTK's Punkt (Debian's python3-nltk), single-threaded, one
# document per call, the built-in parameters, on the ~20 MB multilingual test corpus (NLTK's
# period context and Megatron's --keep-newlines one) and on the >= 50 MB English bench corpus
# when the OpenWebText documents are beside the checkout (CI's ../shared, or LMTK_OWT).
# tokenize writes the sentences (--format sentences: no tokenizer, the split alone); its time
# includes reading and parsing the JSON lines and writing JSON, NLTK's only the tokenize()
# calls, so the ratios are conservative.  Then tokenize's scaling with --workers, and
# --train-punkt against PunktTrainer on the test corpus.  Also checks both find as many
# sentences.
#   last lines: "tokenize split: CORPUS N MB: 1 worker X MB/s = A x NLTK (Y MB/s); ..."
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OWT=${LMTK_OWT:-$TOP/../shared/data/megatron/openwebtext-1000.jsonl}
CACHE=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}
TCACHE=${LMTK_CACHE:-/var/tmp/lmtk-cache}
mkdir -p "$CACHE" "$TCACHE"
PARAMS=$TOP/share/lmtk/punkt-english.json
/usr/bin/python3 -c 'import nltk.tokenize.punkt' 2>/dev/null || { echo "bench: tokenize-split: no python3-nltk (make deps)" >&2; exit 1; }

bash "$TOP/tests/ref/corpus.sh" "$TCACHE/test.jsonl" >&2
runs="multilingual:$TCACHE/test.jsonl: multilingual:$TCACHE/test.jsonl:--keep-newlines"
if [ -r "$OWT" ]; then
	export LMTK_OWT=$OWT
	bash "$TOP/tests/ref/corpus.sh" --bench "$CACHE/bench.jsonl" >&2
	runs="english:$CACHE/bench.jsonl: $runs"
else
	echo "bench: tokenize-split: no OpenWebText documents ($OWT; set LMTK_OWT): English row skipped" >&2
fi

# NLTK: "MB/s sentences" over the tokenize() calls alone
nltk() {
	/usr/bin/python3 - "$@" <<'PY'
import json, sys, time
sys.path.insert(0, sys.argv[3])
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer, PunktLanguageVars
class CustomLanguageVars(PunktLanguageVars):   # Megatron-LM tools/preprocess_data.py
    _period_context_fmt = r"""
        \S*                          # some word material
        %(SentEndChars)s             # a potential sentence ending
        \s*                       #  <-- THIS is what I changed
        (?=(?P<after_tok>
            %(NonWord)s              # either other punctuation
            |
            (?P<next_tok>\S+)     #  <-- Normally you would have \s+ here
        ))"""
j = json.load(open(sys.argv[2], encoding="utf-8"))
p = PunktParameters()
p.abbrev_types, p.sent_starters = set(j["abbrev_types"]), set(j["sent_starters"])
p.collocations = set(tuple(c) for c in j["collocations"])
for k, v in j["ortho_context"]:
    p.ortho_context[k] = v
tok = PunktSentenceTokenizer(p, lang_vars=CustomLanguageVars() if sys.argv[4] else None)
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
mb = sum(len(t.encode()) for t in texts) / 1e6
t0 = time.perf_counter()
n = sum(len(tok.tokenize(t)) for t in texts)
print("%.2f %d %.2f" % (mb / (time.perf_counter() - t0), n, mb))
PY
}

run() {  # CORPUS FLAG WORKERS -> MB/s of text (best of 3)
	local best=0 t0 t1 s
	for _ in 1 2 3; do
		t0=$(date +%s.%N)
		"$TOP/bin/tokenize" --quiet --split-sentences $2 --format sentences --workers "$3" < "$1" > "$CACHE/split.jsonl"
		t1=$(date +%s.%N)
		s=$(awk -v a="$t0" -v b="$t1" -v mb="$mb" 'BEGIN { printf "%.1f", mb / (b - a) }')
		best=$(awk -v a="$best" -v b="$s" 'BEGIN { print (b > a ? b : a) }')
	done
	echo "$best"
}

for r in $runs; do
	IFS=: read -r name C flag <<<"$r"
	read -r peer peer_sents mb <<<"$(nltk "$C" "$PARAMS" "$TOP" "$flag")"
	w1=$(run "$C" "$flag" 1)
	ours_sents=$("$TOP/bin/tokenize" --split-sentences $flag --format sentences < "$C" 2>&1 >/dev/null |
		sed -n 's/.* documents, \([0-9]*\) sentences.*/\1/p')
	[ "$ours_sents" = "$peer_sents" ] || { echo "tokenize split: $ours_sents sentences != NLTK's $peer_sents" >&2; exit 1; }
	w2=$(run "$C" "$flag" 2)
	awk -v n="$name${flag:+ $flag}" -v mb="$mb" -v w1="$w1" -v w2="$w2" -v p="$peer" -v s="$peer_sents" 'BEGIN {
		printf "tokenize split: %s %.1f MB: 1 worker %.1f MB/s = %.1fx NLTK Punkt (%.2f MB/s), 2 workers %.1f MB/s; %d sentences, as NLTK\n",
			n, mb, w1, w1 / p, p, w2, s }'
done

# training: tokenize --train-punkt against PunktTrainer, same text, same parameters
C=$TCACHE/test.jsonl
t0=$(date +%s.%N)
"$TOP/bin/tokenize" --quiet --train-punkt -o "$CACHE/punkt-ours.json" "$C"
t1=$(date +%s.%N)
/usr/bin/python3 - "$C" "$CACHE/punkt-nltk.time" <<'PY'
import json, sys, time
from nltk.tokenize.punkt import PunktTrainer
text = "\n\n".join(json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8") if l.strip())
t0 = time.perf_counter()
PunktTrainer(text).get_params()
open(sys.argv[2], "w").write("%.2f %.2f\n" % (time.perf_counter() - t0, len(text.encode()) / 1e6))
PY
read -r nt tmb < "$CACHE/punkt-nltk.time"
awk -v a="$t0" -v b="$t1" -v nt="$nt" -v mb="$tmb" 'BEGIN {
	printf "tokenize --train-punkt: multilingual %.1f MB: %.2f s = %.1fx NLTK PunktTrainer (%.1f s)\n", mb, b - a, nt / (b - a), nt }'
