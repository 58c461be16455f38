#!/usr/bin/env bash
# The one option parser (src/lib/opt.c) as every program meets it: options and file operands in
# any order, a several-values flag that ends at a file (the file is an operand), "did you mean"
# for a misspelled flag in every program, an ambiguous abbreviation naming its candidates, and
# the flags users bring from Megatron's preprocess_data.py or the old watchdog scripts answered
# with where they belong - all exit 2.  Plus tokenize's dead end of a run that read lines and
# found none of its keys.  A byte-level vocabulary made here; no fixtures.
. "$(dirname "$0")/../lib.sh"
TK=$BIN/tokenize
MK=$BIN/mkindex
cd "$T" || exit 3

/usr/bin/python3 - <<'EOF' || exit 3
import json
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
vocab["<|endoftext|>"] = 256
json.dump(vocab, open("vocab.json", "w"))
open("merges.txt", "w").write("#version: 0.2\n")
EOF
printf '{"text": "one doc", "meta": "m"}\n{"text": "two"}\n{"text": "three docs here", "meta": "n"}\n' >corpus.jsonl
GPT2=(--vocab-file vocab.json --merge-file merges.txt)

# --- the sbatch line: --json-keys KEY then the corpus, stdin /dev/null ----------------------
# (the corpus used to be read as a second key: "0 documents", an empty dataset, exit 0 twice)
$TK "${GPT2[@]}" --append-eod --json-keys text corpus.jsonl </dev/null 2>tk.err | $MK --output-prefix x 2>mk.err
check json_keys_then_file_pipeline_exits_0 [ "${PIPESTATUS[0]}${PIPESTATUS[1]}" = 00 ]
$MK info x_text_document >info.out 2>&1
contains json_keys_then_file_reads_the_file_as_input info.out '^documents +3$'
expect_rc json_keys_two_keys_then_file_exits_0 0 $TK "${GPT2[@]}" --json-keys text meta corpus.jsonl --format text --skip-bad-lines </dev/null
# a key that is no file stays a key; the file after it is still an operand
contains json_keys_two_keys_then_file_reads_the_file "$T/err" "skipped 1 bad lines; the first: corpus.jsonl:2: no key 'meta'"
expect_rc file_then_json_keys_exits_0 0 $TK corpus.jsonl "${GPT2[@]}" --json-keys text --format text </dev/null
check file_then_json_keys_three_documents [ "$(wc -l <"$T/out")" = 3 ]
expect_rc json_keys_without_a_key_exits_2 2 $TK "${GPT2[@]}" --json-keys --append-eod corpus.jsonl
contains json_keys_without_a_key_says_so "$T/err" '^tokenize: --json-keys needs a value \(KEY\.\.\.\)$'

# --- none of the keys in any line: an error naming the keys the lines have ----------------------
expect_rc missing_key_exits_2 2 $TK "${GPT2[@]}" --json-keys txt corpus.jsonl --format text
contains missing_key_names_the_lines_keys "$T/err" "^tokenize: corpus.jsonl:1: no key 'txt' \(--json-keys\); the line's keys: 'text', 'meta'$"
expect_rc missing_key_in_every_line_skipped_exits_2 2 $TK "${GPT2[@]}" --json-keys txt --skip-bad-lines corpus.jsonl --format text
contains missing_key_in_every_line_is_no_document "$T/err" "^tokenize: no document: all 3 lines read were bad; the first: corpus.jsonl:1: no key 'txt'.*'text', 'meta'$"
$TK "${GPT2[@]}" --json-keys txt --skip-bad-lines corpus.jsonl 2>/dev/null | $MK --output-prefix none 2>mk.err
check missing_key_in_every_line_mkindex_refuses [ "${PIPESTATUS[1]}" != 0 ] && [ ! -e none_txt_document.idx ]
expect_rc missing_key_in_every_line_train_punkt_exits_2 2 $TK --train-punkt --json-keys txt --skip-bad-lines corpus.jsonl
contains missing_key_train_punkt_says_so "$T/err" "no document: all 3 lines read were bad"
printf '{"text": "a"}\n{"txt": "b"}\n' >mixed.jsonl
expect_rc some_lines_with_the_key_still_exit_0 0 $TK "${GPT2[@]}" --skip-bad-lines mixed.jsonl --format text

# --- did you mean, in every program --------------------------------------------------------
expect_rc tokenize_misspelled_flag_exits_2 2 $TK --vocab-fle vocab.json
contains tokenize_misspelled_flag_did_you_mean "$T/err" "^tokenize: unknown option '--vocab-fle'; did you mean --vocab-file\?$"
contains tokenize_misspelled_flag_usage "$T/err" '^usage: tokenize '
# WANT TYPO PROGRAM ARGS...
for c in "output-prefix --output-prefx mkindex --output-prefx x" "doc --dco mkindex dump x --dco 1" \
	"num-layers --num-layerz train --num-layerz 2" "output --outptu ckpt-merge-tp --outptu x" \
	"tolerance --tolerence ckpt-sync-ln --tolerence 1" "repo-path --repo-pth hub-sync --repo-pth x" \
	"job-name --job-nam slurm-pulse --job-nam x" "check --chek fs-watchdog --chek /"; do
	set -- $c
	want=$1 typo=$2 p=$3
	shift 2
	expect_rc "${p}_misspelled_${want}_exits_2" 2 "$BIN/$@"
	contains "${p}_${want}_did_you_mean" "$T/err" "^$p: unknown option '$typo'; did you mean --$want\?$"
done
expect_rc far_from_every_flag_no_guess_exits_2 2 $TK --zzzzzzzzzz
contains far_from_every_flag_no_guess "$T/err" "^tokenize: unknown option '--zzzzzzzzzz'$"

# --- train: abbreviations as argparse, an ambiguous one names its candidates ------------------
expect_rc train_ambiguous_abbreviation_exits_2 2 "$BIN/train" --num-layer 2
contains train_ambiguous_abbreviation_names_candidates "$T/err" '^train: --num-layer is ambiguous: --num-layers, --num-layers-per-virtual-pipeline-stage\?$'

# --- flags from elsewhere --------------------------------------------------------------------
expect_rc tokenize_output_prefix_exits_2 2 $TK "${GPT2[@]}" --output-prefix foo corpus.jsonl
contains tokenize_output_prefix_shows_the_pipe "$T/err" '^tokenize: --output-prefix belongs to mkindex: tokenize \.\.\. \| mkindex --output-prefix foo$'
expect_rc tokenize_dataset_impl_exits_2 2 $TK "${GPT2[@]}" --dataset-impl mmap corpus.jsonl
contains tokenize_dataset_impl_says_mmap_always "$T/err" "^tokenize: --dataset-impl: mkindex always writes Megatron's mmap dataset"
expect_rc mkindex_dataset_impl_exits_2 2 $MK --output-prefix y --dataset-impl mmap
contains mkindex_dataset_impl_says_mmap_always "$T/err" "^mkindex: --dataset-impl: mkindex always writes Megatron's mmap dataset"
expect_rc mkindex_json_keys_exits_2 2 $MK --output-prefix y --json-keys text
contains mkindex_json_keys_belongs_to_tokenize "$T/err" '^mkindex: --json-keys belongs to tokenize: tokenize --json-keys text'
expect_rc slurm_pulse_no_email_exits_2 2 "$BIN/slurm-pulse" --job-name x --no-email
contains slurm_pulse_no_email_says_mail_to "$T/err" '^slurm-pulse: --no-email .*mail goes out only with --mail-to'
expect_rc fs_watchdog_no_email_exits_2 2 "$BIN/fs-watchdog" --check /:space=99% --no-email
contains fs_watchdog_no_email_says_mail_to "$T/err" '^fs-watchdog: --no-email .*mail goes out only with --mail-to'

# --- --help is still the table; "--" still ends the options ---------------------------------
expect_rc tokenize_help_exits_0 0 $TK --help
contains tokenize_help_lists_json_keys "$T/out" '^  +--json-keys KEY\.\.\. '
expect_rc train_help_hides_args_other_one_by_one 0 "$BIN/train" --help
lacks train_help_no_table_row_for_args_other "$T/out" '^  +--num-workers '
cp corpus.jsonl ./--text.jsonl
expect_rc double_dash_file_named_like_a_flag 0 $TK "${GPT2[@]}" --format text -- --text.jsonl
check double_dash_file_read [ "$(wc -l <"$T/out")" = 3 ]
rm -rf "$T"
