#!/usr/bin/env bash
# mkindex weights: a catalogue of datasets and ratios -> Megatron-DeepSpeed's weighted split
# paths.  Every group mkindex prints is compared with the groups an independent Python reading of
# the same catalogue expects (BigScience's load_ratios_meg_ds_format.py semantics: train reads
# every dataset's [0, 0.95) at its ratio, valid their [0.95, 1] at the same ratios, plus one
# valid_NAME group per dataset, NAME its directory): the weights as numbers (exactly the JSON's
# doubles), the ranges, the prefixes, the names and their order; in both outputs, the flags for
# a shell and the one line of a -path file.  Then train takes them: --dry-run accepts them, and a
# real two-iteration run on two datasets builds every set from them and logs a loss per
# validation set.  A bad catalogue is exit 2 naming the file and line or the entry and key.
. "$(dirname "$0")/../lib.sh"
MK=$BIN/mkindex
PY=/usr/bin/python3
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT  # run.sh removes LMTK_TMP itself
cd "$T" || exit 3

# --- the weights, against an independent reading ---------------------------------------------
# ratios that a careless printer would change: 17 significant digits, an exponent, an integer,
# 0.1 + 0.2, a large one; a dataset with its own "name"; a prefix with a ':' (allowed)
cat >cat.json <<'EOF'
[
  {"dataset_path": "/data/merged/ar/catalogue_ar_text_document", "ratio": 0.0330676168743166},
  {"dataset_path": "/data/merged/indic-bn/catalogue_bn_text_document", "ratio": 1e-05},
  {"ratio": 3, "dataset_path": "rel/code/code_text_document"},
  {"dataset_path": "/data/merged/en/oscar_text_document", "ratio": 0.30000000000000004,
   "name": "oscar-en"},
  {"dataset_path": "/data/en/wiki/wiki:2022_text_document", "ratio": 123456789.125}
]
EOF
# expect.py CATALOGUE SPLIT START END PER_DATASET < GROUPS (NUL-separated): compares the groups
# mkindex printed for SPLIT with the catalogue's; prints what differs, exit 1
cat >expect.py <<'EOF'
import json, sys
cat, split, start, end, per = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
entries = json.load(open(cat))
def name_of(e):
    if "name" in e:
        return e["name"]
    parts = e["dataset_path"].split("/")
    return parts[-2] if len(parts) > 1 else parts[0]
want = [(split, [(float(e["ratio"]), e["dataset_path"]) for e in entries])]
if per and split != "train":
    want += [(split + "_" + name_of(e), [(1.0, e["dataset_path"])]) for e in entries]
got_raw = [g for g in sys.stdin.read().split("\0") if g]
bad = []
if len(got_raw) != len(want):
    bad.append("%d groups, wanted %d: %r" % (len(got_raw), len(want), got_raw))
for g, (wname, wmembers) in zip(got_raw, want):
    name, _, rest = g.partition(":")     # Megatron: the name is before the first ':'
    if name.strip() != wname:
        bad.append("group %r: name %r, wanted %r" % (g, name.strip(), wname))
    members = [m.split() for m in rest.split(",")]
    if len(members) != len(wmembers):
        bad.append("group %r: %d datasets, wanted %d" % (g, len(members), len(wmembers)))
        continue
    for m, (ww, wp) in zip(members, wmembers):
        if len(m) != 3:
            bad.append("group %r: %r is not 'W S:E PREFIX'" % (g, m))
            continue
        s, e = m[1].split(":")
        if float(m[0]) != ww or m[2] != wp or float(s) != start or float(e) != end:
            bad.append("group %r: %r, wanted weight %r, range %r:%r, prefix %r" % (g, m, ww, start, end, wp))
if bad:
    print("\n".join(bad))
    sys.exit(1)
EOF
# same NAME SPLIT START END PER_DATASET GROUPFILE: ok when GROUPFILE (NUL-separated) is as expected
same() {
	if "$PY" expect.py cat.json "$2" "$3" "$4" "$5" <"$6" >diff.out 2>&1; then ok "$1"
	else fail "$1" "$(head -c 600 diff.out)"; fi
}
# flag_groups FLAG < ARGS (one per line, NUL-separated): the values after FLAG, NUL-separated
flag_groups() { "$PY" -c 'import sys
a = sys.stdin.read().split("\0")[:-1]
i = a.index(sys.argv[1]) + 1
while i < len(a) and not a[i].startswith("--"):
    sys.stdout.write(a[i] + "\0"); i += 1' "$1"; }

expect_rc weights_exits_0 0 "$MK" weights cat.json
cp "$T/out" flags.out
check weights_prints_nothing_on_stderr [ ! -s "$T/err" ]
# the shell reads the flags back as words (what eval in a script does)
if eval "set -- $(cat flags.out)" 2>eval.err; then
	printf '%s\0' "$@" >args
	check weights_flags_are_train_then_valid [ "$(printf '%s\n' "$@" | grep -c '^--')" = 2 \
		-a "${1:-}" = --train-weighted-split-paths ]
	flag_groups --train-weighted-split-paths <args >g.train
	flag_groups --valid-weighted-split-paths <args >g.valid
	same weights_train_group_matches_python train 0 0.95 1 g.train
	same weights_valid_groups_match_python valid 0.95 1 1 g.valid
else
	fail weights_flags_parse_in_a_shell "$(cat eval.err)"
fi

# --split: the line of a -path file, "GROUP" "GROUP"... (train's reader splits at '" "')
for s in train valid; do
	expect_rc "weights_split_${s}_exits_0" 0 "$MK" weights cat.json --split "$s"
	check "weights_split_${s}_is_one_line" [ "$(wc -l <"$T/out")" = 1 ]
	"$PY" -c 'import sys; l = sys.stdin.read().rstrip("\n")
assert l[0] == "\"" and l[-1] == "\"", l
sys.stdout.write("\0".join(l[1:-1].split("\" \"")) + "\0")' <"$T/out" >"g.$s.file" 2>pyerr ||
		fail "weights_split_${s}_is_double_quoted_groups" "$(cat pyerr)"
done
same weights_split_train_matches_python train 0 0.95 1 g.train.file
same weights_split_valid_matches_python valid 0.95 1 1 g.valid.file

# other ranges, a test split, and no per-dataset sets
expect_rc weights_ranges_exit_0 0 "$MK" weights cat.json --train-range 0:0.9 --valid-range 0.9:0.97 \
	--test-range 0.97:1 --no-per-dataset
if eval "set -- $(cat "$T/out")"; then
	printf '%s\0' "$@" >args
	flag_groups --train-weighted-split-paths <args >g.train
	flag_groups --valid-weighted-split-paths <args >g.valid
	flag_groups --test-weighted-split-paths <args >g.test
	same weights_train_range_is_given_one train 0 0.9 0 g.train
	same weights_valid_range_is_given_one_without_per_dataset valid 0.9 0.97 0 g.valid
	same weights_test_range_gives_test_group test 0.97 1 0 g.test
fi
expect_rc weights_split_test_exits_0 0 "$MK" weights cat.json --split test --test-range 0.99:1
"$PY" -c 'import sys; l = sys.stdin.read().rstrip("\n"); sys.stdout.write("\0".join(l[1:-1].split("\" \"")) + "\0")' \
	<"$T/out" >g.test.file
same weights_split_test_has_per_dataset_groups test 0.99 1 1 g.test.file
expect_rc weights_overlap_warns_exits_0 0 "$MK" weights cat.json --train-range 0:0.96
contains weights_overlap_warning_names_ranges "$T/err" '^mkindex: warning: the train range overlaps the valid range'

# --- usage ------------------------------------------------------------------------------------
expect_rc weights_without_catalogue_exits_2 2 "$MK" weights
contains weights_without_catalogue_prints_usage "$T/err" '^usage: mkindex weights CATALOGUE.json'
expect_rc weights_split_test_needs_test_range 2 "$MK" weights cat.json --split test
contains weights_split_test_says_test_range "$T/err" '^mkindex: --split test needs --test-range'
expect_rc weights_bad_split_exits_2 2 "$MK" weights cat.json --split eval
contains weights_bad_split_names_flag "$T/err" "^mkindex: --split: 'eval' is not one of train, valid, test"
for r in 0.5:0.2 0:1.5 x:1 0.1 -0.1:0.5 0.2:; do
	expect_rc "weights_bad_range_${r//[^0-9a-z]/_}_exits_2" 2 "$MK" weights cat.json --valid-range "$r"
	contains "weights_bad_range_${r//[^0-9a-z]/_}_names_flag" "$T/err" "^mkindex: --valid-range: '$r'"
done
expect_rc weights_help_exits_0 0 "$MK" weights --help
contains weights_help_describes_catalogue "$T/out" 'dataset_path.*ratio'
contains weights_help_lists_test_range "$T/out" '--test-range S:E'
expect_rc mkindex_help_lists_weights 0 "$MK" --help
contains mkindex_help_names_weights "$T/out" 'mkindex weights CATALOGUE.json'
MANWIDTH=100 man -l "$TOP/man/man1/mkindex.1" >man.out 2>&1
check man_documents_weights_with_example_catalogue sh -c 'grep -q "mkindex weights catalogue.json" man.out &&
	grep -q "\"dataset_path\": \"en/oscar\", \"ratio\": 0.7" man.out && grep -q -- "--no-per-dataset" man.out'
check man_page_renders_without_warnings [ -z "$(groff -man -Tutf8 -ww -z "$TOP/man/man1/mkindex.1" 2>&1)" ]

# --- a bad catalogue: exit 2, the file and the line or entry and key, nothing on stdout ----------
# bad NAME JSON PATTERN: the catalogue JSON is refused with a message matching PATTERN
bad() {
	printf '%s\n' "$2" >"$1.json"
	if expect_rc "weights_refuses_$1" 2 "$MK" weights "$1.json"; then
		contains "weights_$1_message" "$T/err" "^mkindex: $1.json$3"
		check "weights_$1_prints_nothing" [ ! -s "$T/out" ]
	fi
}
bad syntax '[
  {"dataset_path": "a/x", "ratio": 0.5},
  {"dataset_path": "b/x", "ratio": 0.5,}
]' ':3:[0-9]+: '
bad duplicate_key '[
  {"dataset_path": "a/x", "ratio": 0.5, "ratio": 0.7}
]' ':2:[0-9]+: .*duplicate'
bad not_a_list '{"dataset_path": "a/x", "ratio": 1}' ': not a JSON list'
bad empty '[]' ': the catalogue lists no datasets'
bad entry_not_object '[{"dataset_path": "a/x", "ratio": 1}, ["b/x", 1]]' ': \[1\]: not an object'
bad ratio_string '[{"dataset_path": "a/x", "ratio": 1}, {"dataset_path": "b/x", "ratio": "0.5"}]' \
	': \[1\]\.ratio: not a number'
bad ratio_negative '[{"dataset_path": "a/x", "ratio": -0.25}]' ': \[0\]\.ratio: -0\.25 is not a positive number'
bad ratio_zero '[{"dataset_path": "a/x", "ratio": 0}]' ': \[0\]\.ratio: 0 is not a positive number'
bad no_ratio '[{"dataset_path": "a/x", "ratio": 1}, {"dataset_path": "b/x"}]' ': \[1\]: no "ratio"'
bad no_path '[{"ratio": 1}]' ': \[0\]: no "dataset_path"'
bad unknown_key '[{"dataset_path": "a/x", "ratios": 1}]' ': \[0\]: unknown key "ratios"'
bad path_not_string '[{"dataset_path": 7, "ratio": 1}]' ': \[0\]\.dataset_path: not a non-empty string'
bad path_empty '[{"dataset_path": "", "ratio": 1}]' ': \[0\]\.dataset_path: not a non-empty string'
bad path_blank '[{"dataset_path": "my data/x", "ratio": 1}]' ": \[0\]\.dataset_path: 'my data/x' holds a blank"
bad path_comma '[{"dataset_path": "a/x,y", "ratio": 1}]' ": \[0\]\.dataset_path: 'a/x,y' holds ','"
bad path_quote '[{"dataset_path": "a/x\"y", "ratio": 1}]' ": \[0\]\.dataset_path: 'a/x\"y' holds '\"'"
bad name_colon '[{"dataset_path": "a/x", "ratio": 1, "name": "en:web"}]' ": \[0\]\.name: 'en:web' holds ':'"
bad dir_colon '[{"dataset_path": "web:en/x", "ratio": 1}]' \
	": \[0\]\.dataset_path: 'web:en/x' holds ':'.*give the entry a \"name\""
bad same_path '[{"dataset_path": "a/x", "ratio": 1}, {"dataset_path": "b/x", "ratio": 1}, {"dataset_path": "a/x", "ratio": 2}]' \
	': \[0\] and \[2\] both list a/x'
bad same_name '[{"dataset_path": "/d/en/oscar", "ratio": 1}, {"dataset_path": "/d/en/wiki", "ratio": 1}]' \
	": \[0\] and \[1\] would both name a set 'en' .*give one of them a \"name\""
# ... which a "name" resolves
printf '[{"dataset_path": "/d/en/oscar", "ratio": 1}, {"dataset_path": "/d/en/wiki", "ratio": 1, "name": "en-wiki"}]\n' >named.json
expect_rc weights_name_resolves_same_directory 0 "$MK" weights named.json
contains weights_name_is_used_for_the_set "$T/out" "'valid_en-wiki: 1 0.95:1 /d/en/wiki'"
expect_rc weights_missing_catalogue_exits_2 2 "$MK" weights no-such.json
contains weights_missing_catalogue_named "$T/err" '^mkindex: no-such.json: .*No such file'

# --- train takes them --------------------------------------------------------------------------
MEG=$(tiny_dataset) || exit 3
mkdir -p en fr
for d in en fr; do
	ln -s "$MEG/meg-gpt2-openwebtext_text_document.bin" "$d/owt_text_document.bin"
	ln -s "$MEG/meg-gpt2-openwebtext_text_document.idx" "$d/owt_text_document.idx"
done
printf '[{"dataset_path": "%s/en/owt_text_document", "ratio": 0.7},\n {"dataset_path": "%s/fr/owt_text_document", "ratio": 0.3}]\n' \
	"$T" "$T" >mix.json
TRAIN=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --max-position-embeddings 32
	--micro-batch-size 2 --global-batch-size 4 --train-iters 2 --eval-interval 2 --eval-iters 1
	--log-interval 1 --lr 1e-3 --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt"
	--data-cache-path "$T/cache" --device cpu --threads 1)
NSEQ=$("$PY" -c 'import struct, sys; d = open(sys.argv[1], "rb").read(); print(struct.unpack("<Q", d[18:26])[0])' \
	"$MEG/meg-gpt2-openwebtext_text_document.idx")
CUT=$("$PY" -c "print(round(0.95 * $NSEQ))")   # Megatron: [round(s N), round(e N))
if F=$("$MK" weights mix.json); then
	expect_rc train_dry_run_accepts_weights 0 eval '"$BIN/train" --dry-run --nodes 1 --gpus-per-node 1 "${TRAIN[@]}" '"$F"
	lacks train_dry_run_has_no_error_for_weights "$T/out" 'error'
	expect_rc train_runs_on_weights 0 eval '"$BIN/train" "${TRAIN[@]}" '"$F"
	for set in train valid; do
		for l in en fr; do
			[ $set = train ] && r="0, $CUT" || r="$CUT, $NSEQ"
			contains "train_builds_${set}_${l}_from_weights" "$T/out" \
				"^$set: $T/$l/owt_text_document: $set split, sequences \[$r\)"
		done
	done
	for l in en fr; do
		contains "train_builds_valid_${l}_alone" "$T/out" \
			"^valid_$l: $T/$l/owt_text_document: valid split, sequences \[$CUT, $NSEQ\)"
		contains "train_logs_valid_${l}_loss" "$T/out" "^ valid_$l loss at iteration 2 "
	done
else
	fail weights_of_mix "mkindex weights mix.json failed"
fi
# the -path files, as the 176B run used them
"$MK" weights mix.json --split train >train-splits.txt && "$MK" weights mix.json --split valid >valid-splits.txt
expect_rc train_runs_on_weights_files 0 "$BIN/train" "${TRAIN[@]}" \
	--train-weighted-split-paths-path train-splits.txt --valid-weighted-split-paths-path valid-splits.txt
contains train_files_build_valid_fr_alone "$T/out" "^valid_fr: $T/fr/owt_text_document: valid split, sequences \[$CUT, $NSEQ\)"
contains train_files_log_valid_en_loss "$T/out" "^ valid_en loss at iteration 2 "
