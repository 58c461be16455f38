#!/usr/bin/env bash
# Megatron's BERT and T5 samples against numpy: tests/ref/bert-samples.py (an independent Python
# version of Megatron-LM's samples mapping, BertDataset and T5Dataset, drawing from numpy's own
# RandomState) and the C side (BERTDATA_DUMP=1 build/tests/train_bertdata, i.e.
# src/train/data/bertdata.c) print the split, every row of the samples mapping and the first
# samples (tokens, types, labels, padding and loss masks, is_random; T5's encoder and decoder
# sequences, labels, loss mask and its three attention masks in full) for sentence datasets the
# reference writes (documents of 0-9 sentences, "##" pieces, [CLS]/[SEP]/[MASK] inside the text,
# sentences over 512 tokens); the outputs must be identical byte for byte.  The keys cover BERT
# with and without the binary head, T5, the train and valid splits, uint16 and int32 data,
# other seeds, mask and short-sequence probabilities, extra ids, [PAD] not at id 0 and a word
# at id 0, and truncation; then a different seed shows the comparison can fail.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
REF=$TOP/tests/ref/bert-samples.py
DUMP=$TOP/build/tests/train_bertdata
cd "$T" || exit 3
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT  # run.sh removes LMTK_TMP itself

if [ ! -x "$DUMP" ]; then
	skip bertdata_matches_numpy "$DUMP not built (make build/tests/train_bertdata)"
	exit 0
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
	skip bertdata_matches_numpy "python3-numpy is not installed (make deps installs it)"
	exit 0
fi

# same NAME ARGS...: C and numpy print the same bytes, and NPRINT samples of them
same() {
	local n=$1; shift
	BERTDATA_DUMP=1 "$DUMP" "$@" >"$n.c" 2>"$n.cerr"
	local crc=$?
	"$PY" "$REF" dump "$@" >"$n.py" 2>"$n.pyerr"
	local prc=$?
	local want=${!#} got
	got=$(grep -c '^sample [0-9]' "$n.py")
	if [ $crc != 0 ] || [ $prc != 0 ]; then
		fail "$n" "exit C $crc, numpy $prc: $(head -c 300 "$n.cerr") $(tail -c 300 "$n.pyerr")"
	elif [ "$got" != "$want" ]; then
		fail "$n" "numpy printed $got samples, not $want"
	elif cmp -s "$n.c" "$n.py"; then
		ok "$n"
	else
		fail "$n" "first difference: $(diff <(tr ' ' '\n' <"$n.c") <(tr ' ' '\n' <"$n.py") | head -5 | tr '\n' ' ')"
	fi
}

"$PY" "$REF" make u16 u16.txt 7 300 uint16 || { fail bertdata_dataset "bert-samples.py make"; exit 0; }
"$PY" "$REF" make i32 i32.txt 11 120 int32 || { fail bertdata_dataset "bert-samples.py make"; exit 0; }

#    NAME                       PREFIX VOCAB KIND SPLIT WHICH NUM SEQ DEC SEED MASK SHORT EXTRA NPRINT
same bert_binary_head_train     u16 u16.txt bert 949,50,1 0 500 64 0 1234 0.15 0.1 0 40
same bert_no_binary_head_train  u16 u16.txt bert-nobinary 949,50,1 0 500 64 0 1234 0.15 0.1 0 40
# 405 lines + [BOS], [EOS] and 106 extra ids: 513 ids that randint(0, 513) draws from, over a
# power of two, so a random word from fewer ids (vocab.txt's alone) would change the draws
same bert_binary_head_valid     u16 u16.txt bert "90, 10, 0" 1 100 48 0 31337 0.15 0.1 106 20
same bert_int32_long_masked     i32 i32.txt bert 1 0 300 128 0 7 0.3 0.3 0 20
same bert_no_short_sequences    i32 i32.txt bert-nobinary 1 0 100 24 0 99 0.15 0 0 20
same t5_train                   u16 u16.txt t5 949,50,1 0 500 64 32 1234 0.15 0.1 100 25
same t5_int32_truncated         i32 i32.txt t5 1 0 200 32 24 5 0.3 0.2 100 20

# the comparison can fail: another seed gives other samples (both sides agree on each)
BERTDATA_DUMP=1 "$DUMP" u16 u16.txt bert 949,50,1 0 500 64 0 1235 0.15 0.1 0 40 >seed.c 2>&1
if cmp -s seed.c bert_binary_head_train.py; then
	fail bertdata_seed_changes_samples "seed 1235 printed what seed 1234 did"
else
	ok bertdata_seed_changes_samples
fi
