#!/usr/bin/env bash
# Bad input found by probing the programs (issue 13, "hard to break"): each case once hung, or
# was accepted and gave a silent wrong answer.  Now each is refused at once, exit 2, naming the
# file and what is wrong, before anything is sized by the bad value.
. "$(dirname "$0")/../lib.sh"
TK=$BIN/tokenize
PY=/usr/bin/python3
cd "$T" || exit 3

# quick RC NAME CMD...: exit status RC within 10 s (a hang is a failure, not a wait)
quick() {
	local want=$1 name=$2
	shift 2
	timeout 10 "$@" >"$T/out" 2>"$T/err" </dev/null
	local rc=$?
	if [ $rc = 124 ]; then fail "$name" "still running after 10 s"
	elif [ $rc = "$want" ]; then ok "$name"
	else fail "$name" "exit $rc, wanted $want: $(head -c 300 "$T/err")"; fi
}

printf '#version: 0.2\n' >merges.txt
# --- a vocabulary id that cannot belong to it ---
"$PY" -c 'import json; json.dump({"a": 0, "b": 1, "ab": 4000000000}, open("huge.json", "w"))'
quick 2 vocab_huge_id_refused $TK --vocab-file huge.json --merge-file merges.txt
contains vocab_huge_id_named "$T/err" "^tokenize: huge.json: token 'ab' has id 4000000000, but the vocabulary has 3 tokens: ids run from 0 to 2$"
"$PY" -c 'import json; json.dump({"a": 0, "b": 1, "c": 3}, open("hole.json", "w"))'
quick 2 vocab_id_past_the_count_refused $TK --vocab-file hole.json --merge-file merges.txt
contains vocab_id_past_the_count_named "$T/err" "token 'c' has id 3, but the vocabulary has 3 tokens"
# a tokenizer.json whose added token's id is far beyond the vocabulary
mkdir -p hf
"$PY" - <<'EOF'
import json
vocab = {chr(c): i for i, c in enumerate(range(ord("a"), ord("z") + 1))}
tj = {"model": {"type": "BPE", "vocab": vocab, "merges": []},
      "added_tokens": [{"id": 99999999, "content": "<big>", "special": True}]}
json.dump(tj, open("hf/tokenizer.json", "w"))
tj["added_tokens"][0]["id"] = 26
json.dump(tj, open("ok.json", "w"))
EOF
quick 2 added_token_huge_id_refused $TK --tokenizer-name-or-path hf
contains added_token_huge_id_named "$T/err" "token '<big>' has id 99999999, but the vocabulary has 27 tokens"
echo '{"text": "abc"}' >doc.jsonl
quick 0 added_token_next_id_accepted $TK --tokenizer-name-or-path ok.json --input doc.jsonl

# --- an empty vocabulary ---
echo '{}' >empty.json
quick 2 empty_vocab_refused $TK --vocab-file empty.json --merge-file merges.txt
contains empty_vocab_named "$T/err" '^tokenize: empty.json: the vocabulary is empty$'
echo '{"model": {"type": "BPE", "vocab": {}, "merges": []}}' >empty-hf.json
quick 2 empty_hf_vocab_refused $TK --tokenizer-name-or-path empty-hf.json
contains empty_hf_vocab_named "$T/err" '^tokenize: empty-hf.json: model.vocab is empty$'
rm -rf "$T"
