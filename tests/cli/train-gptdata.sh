#!/usr/bin/env bash
# Megatron's GPT sample order against numpy: tests/ref/megatron-index.py (a numpy port of
# Megatron-DeepSpeed's _build_index_mappings, build_sample_idx and build_blending_indices, with
# numpy's own RandomState) and the C side (GPTDATA_DUMP=1 build/tests/train_gptdata, i.e.
# src/train/data/gptdata.c) print the split, the epoch arithmetic, doc_idx, sample_idx, shuffle_idx
# and the tokens of 40-odd samples for the same Megatron-written dataset and key; the outputs must
# be identical byte for byte.  The keys cover one epoch, exactly one epoch, several epochs with
# and without a separate last epoch, each split of a split string, long sequences, an int32
# dataset, a three-dataset blend and the blend's pairwise weight normalisation; then the index
# cache (built, hit, corrupt, stale) gives the same bytes, and a wrong seed shows the comparison
# can fail.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
REF=$TOP/tests/ref/megatron-index.py
DUMP=$TOP/build/tests/train_gptdata
# the dataset Megatron wrote when this checkout has it beside it (CI's ../shared), else the
# project's own (tests/lib.sh tiny_dataset): the sample counts of the epoch cases follow it
MEGDIR=${MEG_REF:-$(tiny_dataset)} || exit 3
MEG=$MEGDIR/meg-gpt2-openwebtext_text_document
cd "$T" || exit 3
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT  # run.sh removes LMTK_TMP itself

if [ ! -x "$DUMP" ]; then
	skip gptdata_matches_numpy "$DUMP not built (make build/tests/train_gptdata)"
	exit 0
fi
if [ ! -f "$MEG.idx" ]; then
	skip gptdata_matches_numpy "$MEG.idx not found (set LMTK_MEGATRON_DIR)"
	exit 0
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
	skip gptdata_matches_numpy "python3-numpy is not installed (make deps installs it)"
	exit 0
fi

# same NAME MODE ARGS...: C and numpy print the same bytes (and something at all)
same() {
	local n=$1; shift
	GPTDATA_DUMP=1 "$DUMP" "$@" >"$n.c" 2>"$n.cerr"
	local crc=$?
	"$PY" "$REF" "$@" >"$n.py" 2>"$n.pyerr"
	local prc=$?
	if [ $crc != 0 ] || [ $prc != 0 ]; then
		fail "$n" "exit C $crc, numpy $prc: $(head -c 300 "$n.cerr") $(tail -c 300 "$n.pyerr")"
	elif [ ! -s "$n.py" ]; then
		fail "$n" "numpy printed nothing"
	elif cmp -s "$n.c" "$n.py"; then
		ok "$n"
	else
		fail "$n" "first difference: $(diff <(tr ' ' '\n' <"$n.c") <(tr ' ' '\n' <"$n.py") | head -5 | tr '\n' ' ')"
	fi
}
# epochs_are NAME FILE WORDS: the epoch line says the case covers what it is meant to
epochs_are() { if grep -q "^epochs $3 " "$2"; then ok "$1"; else fail "$1" "$(grep -m1 ^epochs "$2")"; fi; }

# --- one dataset (uint16, 1000 documents; the reference: 1,303,056 train tokens, 10,180 samples
#     of 128 per epoch, and 8 epochs of seq 2048 for 5000 samples) ---
if [ -n "$MEG_REF" ]; then
	E=10180 N3=30060 N3S=30000 N2K=5000
else   # the samples per epoch, as numpy counts them (ns), and the same cases built from them
	ns() { "$PY" "$REF" index "$MEG" "$1" 0 1 "$2" 1234 2>/dev/null | sed -n 's/^epochs .* ns \([0-9]*\).*/\1/p'; }
	E=$(ns 949,50,1 128) E2K=$(ns 1 2048)
	[ -n "$E" ] && [ -n "$E2K" ] || { fail gptdata_epoch_sizes "numpy gave no sample count"; exit 1; }
	N3=$((3 * E - 10)) N3S=$((E * 5 / 2)) N2K=$((7 * E2K + E2K / 2))
fi
same one_epoch_partial        index "$MEG" 949,50,1 0 1000 128 1234
epochs_are one_epoch_partial_is_one_epoch one_epoch_partial.py "1 separate 0"
same one_epoch_exactly        index "$MEG" 949,50,1 0 $E 128 1234
epochs_are one_epoch_exactly_is_one_epoch one_epoch_exactly.py "1 separate 0"
same two_epochs_separate_last index "$MEG" 949,50,1 0 $((E * 3 / 2)) 128 1234
epochs_are two_epochs_separate_last_is_so two_epochs_separate_last.py "2 separate 1"
# reference: 30060 - 20360 = 9700 >= int(0.95 * 10180) = 9671: the last epoch is shuffled with the rest
same three_epochs_whole_last  index "$MEG" 949,50,1 0 $N3 128 1234
epochs_are three_epochs_whole_last_is_so three_epochs_whole_last.py "3 separate 0"
same three_epochs_separate_seed42 index "$MEG" 949,50,1 0 $N3S 128 42
epochs_are three_epochs_separate_seed42_is_so three_epochs_separate_seed42.py "3 separate 1"
same valid_split_many_epochs  index "$MEG" 949,50,1 1 2000 128 1234
same test_split_one_document  index "$MEG" 969,30,1 2 300 64 99
same slash_split_seq256       index "$MEG" 98/2 0 21100 256 7
same whole_dataset_seq2048    index "$MEG" 1 0 $N2K 2048 1234
epochs_are whole_dataset_seq2048_is_eight_epochs whole_dataset_seq2048.py "8 separate 1"

# --- datasets cut from it: int32 and reversed, and a blend of three ---
"$PY" "$REF" subset "$MEG" head 0 400
"$PY" "$REF" subset "$MEG" tail32 300 1000 --reverse --dtype int32
same int32_dataset            index tail32 949,50,1 0 9000 128 5
same blend_of_three_train     blend 949,50,1 0 20000 128 1234 0.3 "$MEG" 0.5 head 0.2 tail32
same blend_of_three_valid     blend 969,30,1 1 500 64 99 1 "$MEG" 2 head 3 tail32
# twelve weights: np.sum sums them pairwise, not left to right
same blend_weights_pairwise   blend-only 100000 0.1 0.2 0.3 0.05 0.15 0.12 0.08 0.011 0.333 0.07 0.9 1e-3
same blend_weights_ten        blend-only 5000 0.632 0.817 0.566 0.635 0.812 0.927 0.913 0.825 0.094 0.361

# --- the cache gives the same bytes; a corrupt or stale one is rebuilt, never trusted ---
cp "$MEG.bin" meg.bin && cp "$MEG.idx" meg.idx
mkdir -p cache
KEY=(949,50,1 0 30000 128 1234)
"$PY" "$REF" index meg "${KEY[@]}" >cache.py
cached() {  # cached NAME VERDICT: through the cache, same bytes as numpy, the verdict on stderr
	GPTDATA_DUMP=1 "$DUMP" index meg "${KEY[@]}" "$T/cache" >"$1.c" 2>"$1.err"
	if ! cmp -s "$1.c" cache.py; then fail "$1" "differs from numpy"
	elif ! grep -Eq "^cache: $2" "$1.err"; then fail "$1" "wanted 'cache: $2', got: $(cat "$1.err")"
	else ok "$1"; fi
}
cached cache_first_run_builds 'built: .*none yet'
check cache_is_one_file_next_to_nothing_else [ "$(ls -A cache)" = meg_lmtk_indexmap_30000ns_128sl_1234s_0-949.map ]
cached cache_second_run_hits 'hit$'
MAP=cache/meg_lmtk_indexmap_30000ns_128sl_1234s_0-949.map
printf '\x55' | dd of="$MAP" bs=1 seek=100000 conv=notrunc 2>/dev/null
cached cache_flipped_byte_is_rebuilt 'built: .*checksum mismatch'
cached cache_rebuilt_then_hits 'hit$'
truncate -s 4096 "$MAP"
cached cache_truncated_is_rebuilt 'built: .*truncated'
touch -d '2001-01-01' meg.bin
cached cache_changed_data_is_stale 'built: .*changed since it was built'
check cache_leaves_no_temporaries [ "$(ls -A cache | wc -l)" = 1 ]

# --- the comparison can fail: another seed must not match ---
GPTDATA_DUMP=1 "$DUMP" index "$MEG" 949,50,1 0 1000 128 1235 >seed1235.c 2>/dev/null
if cmp -s seed1235.c one_epoch_partial.py; then
	fail comparison_can_fail "seed 1235 printed what numpy printed for seed 1234"
else
	ok comparison_can_fail
fi
