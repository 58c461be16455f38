#!/usr/bin/env bash
# mkindex against its peers: Megatron's own .bin/.idx (CI's ../shared/data/megatron, or
# LMTK_MEGATRON_DIR), rebuilt byte for byte from a token stream written by an independent writer
# (tests/tokstream.py) and read back with numpy; merge of two halves back into the whole; check on
# corrupted copies; nothing left behind by a cut stream, a bad id, kill -9 or a full filesystem.
# Without Megatron's files (a bare clone) the same cases run on the project's own dataset
# (tests/lib.sh tiny_dataset: tokenize | mkindex of 1000 documents, the same shape), with the
# numbers numpy reads from it instead of Megatron's; only the identity with Megatron is skipped.
# info --json and check --json are read by Python's json and compared with the .idx/.bin bytes.
. "$(dirname "$0")/../lib.sh"
MK=$BIN/mkindex
PY=/usr/bin/python3
TS=$TOP/tests/tokstream.py
cd "$T" || exit 3

ts() { "$PY" "$TS" "$@"; }
# facts(PREFIX): what the files hold, read here with struct per shared/spec/megatron-data.md
IDXPY='
import struct
def facts(p):
    b = open(p + ".idx", "rb").read()
    code = b[17]
    n, d = struct.unpack_from("<QQ", b, 18)
    sizes = struct.unpack_from("<%di" % n, b, 34)
    doc = struct.unpack_from("<%dq" % d, b, 34 + 12 * n)
    fmt = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 8: "H"}[code]
    bb = open(p + ".bin", "rb").read()
    ids = struct.unpack("<%d%s" % (len(bb) // struct.calcsize(fmt), fmt), bb)
    return dict(code=code, n=n, docs=d - 1, sizes=sizes, per=[doc[i + 1] - doc[i] for i in range(d - 1)],
                ids=ids, idx_bytes=len(b), bin_bytes=len(bb))
'
# empty_dir NAME DIR: nothing at all in DIR, hidden temporaries included
empty_dir() { if [ -z "$(ls -A "$2")" ]; then ok "$1"; else fail "$1" "left behind: $(ls -A "$2" | tr '\n' ' ')"; fi; }

# --- usage ---
expect_rc usage_no_prefix_exits_2 2 $MK </dev/null
contains usage_no_prefix_says_so "$T/err" '^mkindex: --output-prefix is required$'
contains usage_is_one_line "$T/err" '^usage: mkindex --output-prefix PREFIX .*< STREAM'
check usage_has_no_more_lines [ "$(wc -l < "$T/err")" = 2 ]
expect_rc usage_bad_dtype_exits_2 2 $MK --output-prefix x --dtype float32
contains usage_bad_dtype_names_flag "$T/err" "^mkindex: --dtype: 'float32' is not one of"
expect_rc usage_extra_operand_exits_2 2 $MK --output-prefix x extra
expect_rc usage_check_without_prefix_exits_2 2 $MK check
expect_rc usage_merge_needs_an_input_exits_2 2 $MK merge out
expect_rc usage_doc_and_range_exits_2 2 $MK dump x --doc 1 --range 1:2
expect_rc usage_bad_range_exits_2 2 $MK dump x --range 1-2
expect_rc help_exits_0 0 $MK --help
contains help_lists_subcommands "$T/out" 'mkindex merge OUT IN\.\.\.'
contains help_lists_output_prefix "$T/out" '--output-prefix PREFIX'
expect_rc help_of_subcommand_exits_0 0 $MK check --help
contains help_of_check_lists_vocab "$T/out" '--vocab-size N'
expect_rc help_of_info_lists_json 0 $MK info --help
contains help_of_info_says_json "$T/out" '^ +--json +print the description as one JSON object'
expect_rc help_of_check_lists_json 0 $MK check --help
contains help_of_check_says_json "$T/out" '^ +--json +print the findings'
$MK --help >"$T/help.txt"
contains help_lists_check_json "$T/help.txt" 'mkindex check PREFIX \[--vocab-size N\] \[--json\]'
expect_rc usage_json_is_not_for_dump 2 $MK dump x --json
contains man_has_json_output_section "$TOP/man/man1/mkindex.1" '^\.SH JSON OUTPUT$'
expect_rc version_exits_0 0 $MK --version
contains version_names_lmtk "$T/out" '^mkindex \(lmtk\) [0-9]'
for page in man1/mkindex.1 man5/lmtk-tokens.5; do
	check "man_${page#*/}_renders_without_warnings" [ -z "$(groff -man -Tutf8 -ww -z "$TOP/man/$page" 2>&1)" ]
done

# --- small streams: naming, dtype choice, empty documents, keys ---
printf '1 2 3\n\n4\n65498\n' | ts write --vocab 65499 > s1.tok
expect_rc build_small_exits_0 0 $MK --output-prefix s1 < s1.tok
check build_uses_megatron_names [ -f s1_text_document.bin -a -f s1_text_document.idx -a ! -e s1.idx ]
check empty_document_skipped_numpy "$PY" -c "import sys; sys.exit(0 if '$(ts readidx s1_text_document)' == '3 4 8 5 5 65498 ok' else 1)"
contains summary_counts_skipped "$T/err" 's1_text_document\.\{bin,idx\}: 3 documents \(1 empty skipped\), 5 tokens, uint16'
printf '1 2 3\n65499\n' | ts write --vocab 65500 > s2.tok
$MK --output-prefix s2 < s2.tok 2>/dev/null
check dtype_int32_from_vocab_65500 [ "$(ts readidx s2_text_document)" = "2 3 4 4 4 65499 ok" ]
$MK --output-prefix s3 --dtype int32 < s1.tok 2>/dev/null
check dtype_override_int32 [ "$(ts readidx s3_text_document | cut -d' ' -f3)" = 4 ]
check dtype_override_same_ids [ "$($MK dump s3_text_document)" = "$($MK dump s1_text_document)" ]
printf 'text\t1 2\ncode\t3 4 5\ntext\t6\n' | ts write --vocab 100 --keys text,code > keys.tok
expect_rc build_two_keys_exits_0 0 $MK --output-prefix kk < keys.tok
check two_keys_give_two_datasets [ "$(ls kk_*)" = "kk_code_document.bin
kk_code_document.idx
kk_text_document.bin
kk_text_document.idx" ]
check two_keys_text_docs [ "$($MK dump kk_text_document | tr '\n' '|')" = "1 2|6|" ]
# a file's name for the prefix; the prefix mkindex was given for the names it wrote
expect_rc info_takes_the_idx_file 0 $MK info s1_text_document.idx
contains info_of_the_idx_file_names_the_prefix "$T/out" '^prefix +s1_text_document$'
check dump_takes_the_bin_file [ "$($MK dump s1_text_document.bin 2>&1)" = "$($MK dump s1_text_document)" ]
expect_rc check_takes_the_idx_file 0 $MK check s1_text_document.idx
contains check_of_the_idx_file_says_ok "$T/out" '^s1_text_document: ok: 3 sequences'
expect_rc info_of_the_output_prefix_exits_2 2 $MK info s1
contains info_of_the_output_prefix_suggests "$T/err" '^mkindex: s1\.idx: No such file or directory; did you mean s1_text_document\?$'
expect_rc check_of_the_output_prefix_exits_2 2 $MK check kk
contains check_of_two_keys_suggests_both "$T/err" '^mkindex: kk\.idx: No such file or directory; did you mean kk_code_document or kk_text_document\?$'
expect_rc merge_into_a_bin_name 0 $MK merge m2.bin s1_text_document.idx kk_text_document.bin
check merge_into_a_bin_name_writes_the_pair [ -f m2.bin -a -f m2.idx -a ! -e m2.bin.bin ]
check merge_into_a_bin_name_has_both [ "$($MK dump m2 | tr '\n' '|')" = "1 2 3|4|65498|1 2|6|" ]
check two_keys_code_docs [ "$($MK dump kk_code_document | tr '\n' '|')" = "3 4 5|" ]
printf '7 8\n' | ts write --vocab 100 --keys content > content.tok
$MK --output-prefix one < content.tok 2>/dev/null
check single_key_named_by_key [ -f one_content_document.idx -a -f one_content_document.bin ]

# --- --json on a dataset of sentences, written here from the spec: 3 documents of 2, 1, 3 ---
"$PY" - <<'EOF'
import struct
sizes, doc = [2, 1, 3, 1, 2, 4], [0, 2, 3, 6]
ids = list(range(1, sum(sizes) + 1))
ptr = [2 * sum(sizes[:i]) for i in range(len(sizes))]
open("sent.bin", "wb").write(struct.pack("<%dH" % len(ids), *ids))
open("sent.idx", "wb").write(b"MMIDIDX\0\0" + struct.pack("<QBQQ", 1, 8, len(sizes), len(doc)) +
    struct.pack("<%di" % len(sizes), *sizes) + struct.pack("<%dq" % len(ptr), *ptr) +
    struct.pack("<%dq" % len(doc), *doc))
EOF
expect_rc info_json_sentences_exits_0 0 $MK info sent --json
json_ok info_json_counts_documents_and_sequences_apart "$T/out" "$IDXPY
f = facts('sent')
assert (j['documents'], j['sequences']) == (f['docs'], f['n']) == (3, 6), (j['documents'], j['sequences'])
assert j['sequences_per_document'] == {'min': min(f['per']), 'mean': 2.0, 'max': max(f['per'])}, j['sequences_per_document']
assert j['tokens'] == sum(f['sizes']) and j['ids'] == {'min': min(f['ids']), 'max': max(f['ids'])}, j['ids']
assert j['lengths'] == {'min': 1, 'mean': 13 / 6, 'max': 4}, j['lengths']
assert [(r['min'], r['max'], r['sequences']) for r in j['length_histogram']] == [(1, 1, 2), (2, 3, 3), (4, 7, 1)]
"
expect_rc check_json_sentences_exits_0 0 $MK check sent --json --vocab-size 14
json_ok check_json_sentences_is_ok "$T/out" "
assert j['ok'] is True and j['problem_count'] == 0 and j['problems'] == [] and j['error'] is None
assert (j['sequences'], j['documents'], j['tokens'], j['dtype']) == (6, 3, 13, 'uint16')
assert j['ids_checked'] is True and j['vocab_size'] == 14
"
expect_rc check_json_sentences_id_over_vocab_exits_1 1 $MK check sent --json --vocab-size 13
json_ok check_json_names_the_id_over_vocab "$T/out" "
assert j['ok'] is False and j['problem_count'] == 1 and j['problem_counts'] == {'ids': 1}
p = j['problems'][0]
# id 13 is the last token: sequence 5 (4 tokens), its token 3, byte 2 * 12 of the .bin
assert (p['file'], p['kind'], p['sequence'], p['token'], p['byte'], p['id']) == ('sent.bin', 'ids', 5, 3, 24, 13), p
"
# a report that cannot be written is exit 3, as every other output
$MK info sent --json >/dev/full 2>"$T/err"
check info_json_to_a_full_stdout_exits_3 [ $? = 3 ]
contains info_json_to_a_full_stdout_says_so "$T/err" '^mkindex: stdout: could not write the JSON report: No space left on device$'
# a name that is not UTF-8 is still a valid JSON string (U+FFFD for the stray byte)
cp sent.idx $'s\xffnt.idx' && cp sent.bin $'s\xffnt.bin'
expect_rc info_json_non_utf8_name_exits_0 0 $MK info $'s\xffnt' --json
json_ok info_json_non_utf8_name_is_valid_json "$T/out" "assert j['prefix'] == 's\ufffdnt' and j['documents'] == 3, j['prefix']"

# --- bad input: exit 2, and nothing written ---
mkdir bad
printf '1 2\n3 4\n' | ts write --vocab 100 --no-end > bad.tok
expect_rc cut_stream_exits_2 2 $MK --output-prefix bad/x < bad.tok
contains cut_stream_says_truncated "$T/err" 'truncated token stream at byte [0-9]+ .*nothing written'
empty_dir cut_stream_leaves_nothing bad
printf '1 2\n3 100 4\n' | ts write --vocab 100 > bad.tok
expect_rc id_at_vocab_exits_2 2 $MK --output-prefix bad/x < bad.tok
contains id_at_vocab_names_it "$T/err" 'id 100 at byte [0-9]+ is outside the vocabulary \(size 100\)'
empty_dir id_at_vocab_leaves_nothing bad
printf '1 2\n3 60 4\n' | ts write --vocab 100 > bad.tok
expect_rc id_over_vocab_size_flag_exits_2 2 $MK --output-prefix bad/x --vocab-size 50 < bad.tok
contains id_over_vocab_size_flag_names_it "$T/err" "id 60 \(key 'text', document 1, token 1\) >= --vocab-size 50"
printf '1 70000\n' | ts write --vocab 100000 > bad.tok
expect_rc id_not_fitting_dtype_exits_2 2 $MK --output-prefix bad/x --dtype uint16 < bad.tok
contains id_not_fitting_dtype_names_it "$T/err" 'id 70000 \(document 0, token 1\) does not fit dtype uint16'
cat s1.tok s2.tok > bad.tok
expect_rc two_streams_glued_exits_2 2 $MK --output-prefix bad/x < bad.tok
contains two_streams_glued_says_so "$T/err" 'data after the end marker'
printf 'not a stream at all' > bad.tok
expect_rc not_a_stream_exits_2 2 $MK --output-prefix bad/x < bad.tok
contains not_a_stream_says_magic "$T/err" 'bad magic'
empty_dir bad_input_leaves_nothing bad
expect_rc missing_output_dir_exits_3 3 $MK --output-prefix nodir/x < s1.tok
# a failed run leaves an existing dataset as it was
cp s1_text_document.idx keep.idx
printf '1 2\n' | ts write --vocab 100 --no-end | $MK --output-prefix s1 2>/dev/null
check failed_run_keeps_old_dataset cmp s1_text_document.idx keep.idx

# --- a real dataset: Megatron's, else the project's own of the same shape ---
# Megatron's numbers are pinned; for the project's dataset they are what numpy reads from it
# (tokstream.py, written from the spec, sharing no code with mkindex).
if [ -n "$MEG_REF" ]; then
	MEGDIR=$MEG_REF PEER=megatron
else
	skip megatron_byte_identity "the Megatron-written dataset is not here (../shared/data/megatron, or set LMTK_MEGATRON_DIR): the files mkindex writes are compared with the project's own dataset (tokenize | mkindex), not with Megatron's"
	MEGDIR=$(tiny_dataset) || exit 3
	PEER=tiny_dataset
fi
MEG=$MEGDIR/meg-gpt2-openwebtext_text_document
if [ ! -f "$MEG.idx" ]; then
	fail dataset_present "$MEG.idx not found"
else
	ts dump "$MEG" > all.numpy.txt
	if [ $PEER = megatron ]; then
		TOKENS=1361845 LENGTHS='min 193, mean 1361\.8, max 21809' IDS='0\.\.4999'
		FIRST4999='sequence 0, token 1410 \(byte 2820\)' N4999=1000 PTR10=18616
	else
		# the same numbers as numpy reads them (its dump: one line per document, one sequence each)
		nums() { awk "$1" all.numpy.txt; }
		TOKENS=$(nums '{ t += NF } END { print t }')
		LENGTHS=$(nums '{ t += NF; if (NR == 1 || NF < lo) lo = NF; if (NF > hi) hi = NF }
			END { printf "min %d, mean %.1f, max %d", lo, t / NR, hi }' | sed 's/\./\\./')
		IDS=$(tr ' ' '\n' <all.numpy.txt | sort -n | sed -n '1p;$p' | paste -sd' ' | sed 's/ /\\.\\./')
		# <|endoftext|> (4999): how often, and the first one's sequence, token and byte in the .bin
		N4999=$(tr ' ' '\n' <all.numpy.txt | grep -c '^4999$')
		FIRST4999=$(nums '{ for (i = 1; i <= NF; i++) if ($i == 4999) {
			printf "sequence %d, token %d \\(byte %d\\)", NR - 1, i - 1, 2 * (t + i - 1); exit } t += NF }')
		PTR10=$(nums 'NR <= 10 { t += NF } END { print 2 * t }')
	fi
	expect_rc info_real_exits_0 0 $MK info "$MEG"
	cp "$T/out" info.txt
	contains info_real_documents info.txt '^documents +1000$'
	contains info_real_sequences info.txt '^sequences +1000$'
	contains info_real_tokens info.txt "^tokens +$TOKENS\$"
	contains info_real_dtype info.txt '^dtype +uint16 \(8\)$'
	contains info_real_ids info.txt "^ids +$IDS\$"
	contains info_real_idx_bytes info.txt '^idx bytes +20042$'
	contains info_real_bin_bytes info.txt "^bin bytes +$((2 * TOKENS))\$"
	contains info_real_lengths info.txt "^lengths +$LENGTHS "
	check info_histogram_sums_to_N [ "$(awk '$1 ~ /^[0-9]+\.\.[0-9]+$/ { s += $2 } END { print s }' info.txt)" = 1000 ]
	# numpy, reading the files per the spec, is the independent reader
	check numpy_reads_the_spec_numbers [ "$(ts readidx "$MEG")" = "1000 1001 8 $TOKENS $TOKENS 4999 ok" ]
	check info_tokens_equal_numpy [ "$(awk '/^tokens/ { print $2 }' info.txt)" = "$(ts readidx "$MEG" | cut -d' ' -f4)" ]
	# --json: the same facts, against the .idx/.bin bytes as Python reads them
	expect_rc info_json_real_exits_0 0 $MK info "$MEG" --json
	json_ok info_json_counts_equal_the_files "$T/out" "$IDXPY
f = facts(sys.argv[3])
assert (j['documents'], j['sequences']) == (f['docs'], f['n']), (j['documents'], j['sequences'], f['docs'], f['n'])
assert j['tokens'] == sum(f['sizes']) == len(f['ids']), j['tokens']
assert (j['format'], j['version'], j['dtype'], j['dtype_code']) == ('MMIDIDX', 1, 'uint16', f['code'])
assert (j['idx_bytes'], j['bin_bytes']) == (f['idx_bytes'], f['bin_bytes']), (j['idx_bytes'], j['bin_bytes'])
assert j['ids'] == {'min': min(f['ids']), 'max': max(f['ids'])}, j['ids']
assert (j['lengths']['min'], j['lengths']['max']) == (min(f['sizes']), max(f['sizes'])), j['lengths']
assert abs(j['lengths']['mean'] - sum(f['sizes']) / f['n']) < 1e-9, j['lengths']
assert j['sequences_per_document'] == {'min': 1, 'mean': 1.0, 'max': 1}
rows = [(r['min'], r['max'], r['sequences']) for r in j['length_histogram']]
assert all(c == sum(1 for s in f['sizes'] if lo <= s <= hi) for lo, hi, c in rows), rows
assert sum(c for _, _, c in rows) == f['n'] and j['sequence_mode_array'] is False
assert (j['prefix'], j['idx_path'], j['bin_path']) == (sys.argv[3], sys.argv[3] + '.idx', sys.argv[3] + '.bin')
" "$MEG"

	expect_rc check_real_exits_0 0 $MK check "$MEG" --vocab-size 5000
	contains check_real_says_ok "$T/out" ": ok: 1000 sequences, 1000 documents, $TOKENS tokens, dtype uint16 \(8\), every id"
	# <|endoftext|> is 4999: with a vocabulary of 4999 each document's last id is out of range
	expect_rc check_vocab_too_small_exits_1 1 $MK check "$MEG" --vocab-size 4999
	contains check_vocab_names_first_id "$T/out" "text_document\.bin: $FIRST4999: id 4999 >= vocab size 4999\$"
	contains check_vocab_counts_rest "$T/out" "\.\.\. and $((N4999 - 10)) more ids outside 0\.\.4998\$"
	contains check_vocab_total "$T/out" ": $N4999 problems\$"
	expect_rc check_json_real_exits_0 0 $MK check "$MEG" --vocab-size 5000 --json
	json_ok check_json_real_is_ok "$T/out" "$IDXPY
f = facts(sys.argv[3])
assert j['ok'] is True and j['problem_count'] == 0 and j['problems'] == [] and j['problem_counts'] == {}, j['problems']
assert (j['sequences'], j['documents'], j['tokens'], j['dtype_code']) == (f['n'], f['docs'], sum(f['sizes']), f['code'])
assert j['vocab_size'] == 5000 and j['ids_checked'] is True and j['error'] is None
" "$MEG"
	expect_rc check_json_vocab_too_small_exits_1 1 $MK check "$MEG" --vocab-size 4999 --json
	json_ok check_json_names_each_bad_id "$T/out" "$IDXPY
f = facts(sys.argv[3])
bad, t = [], 0   # every id >= 4999, in order: (sequence, token in it, byte in the .bin)
for q, s in enumerate(f['sizes']):
    bad += [(q, k, 2 * (t + k)) for k in range(s) if f['ids'][t + k] >= 4999]
    t += s
assert j['ok'] is False and j['problem_count'] == len(bad) == j['problem_counts']['ids'], (j['problem_count'], len(bad))
assert [(p['sequence'], p['token'], p['byte']) for p in j['problems']] == bad[:j['shown_per_kind']] and len(bad) > 10
assert all(p['id'] == 4999 and p['kind'] == 'ids' and p['file'] == sys.argv[3] + '.bin' for p in j['problems'])
" "$MEG"

	# dump, against numpy's reading of the same files
	$MK dump "$MEG" > all.txt
	check dump_one_line_per_document [ "$(wc -l < all.txt)" = 1000 ]
	check dump_equals_numpy cmp all.txt all.numpy.txt
	check dump_doc_is_that_line [ "$($MK dump "$MEG" --doc 999)" = "$(sed -n 1000p all.txt)" ]
	check dump_range_is_those_lines [ "$($MK dump "$MEG" --range 10:13)" = "$(sed -n 11,13p all.txt)" ]
	check dump_open_range [ "$($MK dump "$MEG" --range 998: | wc -l)" = 2 ]
	# its progress (forced into a file): the bytes of .bin dumped, to 100%; stdout as without it
	LMTK_PROGRESS=1 $MK dump "$MEG" >pall.txt 2>pd.err
	check dump_with_progress_same_stdout cmp pall.txt all.txt
	bin=$(binsize "$(stat -c %s "$MEG.bin")")
	contains dump_progress_ends_at_the_bin_size pd.err "^mkindex: dumping $bin of $bin \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
	LMTK_PROGRESS=1 $MK dump "$MEG" --doc 999 >/dev/null 2>pd.err   # uint16: 2 bytes a token
	one=$(binsize $((2 * $(sed -n 1000p all.txt | wc -w))))
	contains dump_doc_progress_is_that_documents_bytes pd.err "^mkindex: dumping $one of $one \(100%\)"
	expect_rc dump_doc_out_of_range_exits_2 2 $MK dump "$MEG" --doc 1000
	contains dump_doc_out_of_range_says_count "$T/err" 'it has 1000 \(0\.\.999\)'

	# the round trip: dump -> independent stream writer -> mkindex == Megatron's files
	ts write --vocab 5000 --eod 4999 < all.txt > all.tok
	expect_rc build_real_exits_0 0 $MK --output-prefix meg-gpt2-openwebtext < all.tok
	check build_real_bin_identical_to_$PEER cmp meg-gpt2-openwebtext_text_document.bin "$MEG.bin"
	check build_real_idx_identical_to_$PEER cmp meg-gpt2-openwebtext_text_document.idx "$MEG.idx"
	cat all.tok | $MK --output-prefix piped 2>/dev/null
	check build_from_a_pipe_identical cmp piped_text_document.idx "$MEG.idx"

	# merge: two halves back into the whole
	head -500 all.txt | ts write --vocab 5000 --eod 4999 > a.tok
	tail -n +501 all.txt | ts write --vocab 5000 --eod 4999 > b.tok
	$MK --output-prefix a < a.tok 2>/dev/null
	$MK --output-prefix b < b.tok 2>/dev/null
	check half_a_has_500_docs [ "$(ts readidx a_text_document | cut -d' ' -f1,2)" = "500 501" ]
	expect_rc merge_halves_exits_0 0 $MK merge merged a_text_document b_text_document
	check merge_bin_identical_to_$PEER cmp merged.bin "$MEG.bin"
	check merge_idx_identical_to_$PEER cmp merged.idx "$MEG.idx"
	# progress (LMTK_PROGRESS=1 into a file): merge counts both files' bytes, check --vocab-size
	# the .bin's; each ends at 100% of that, with the rate and ETA 0:00:00; stdout and the files
	# are what they are without it
	both=$(binsize $(( $(stat -c %s "$MEG.bin") + $(stat -c %s "$MEG.idx") )))
	LMTK_PROGRESS=1 $MK merge pmerged a_text_document b_text_document >pm.out 2>pm.err
	check merge_with_progress_bin_identical cmp pmerged.bin merged.bin
	check merge_with_progress_idx_identical cmp pmerged.idx merged.idx
	check merge_progress_not_on_stdout [ ! -s pm.out ]
	contains merge_progress_ends_at_both_files_bytes pm.err "^mkindex: merging $both of $both \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
	check merge_progress_then_the_summary grep -q ': 2 datasets merged: ' <(tail -1 pm.err)
	$MK check "$MEG" --vocab-size 5000 >pc0.out 2>/dev/null
	LMTK_PROGRESS=1 $MK check "$MEG" --vocab-size 5000 >pc.out 2>pc.err
	check check_with_progress_same_stdout cmp pc.out pc0.out
	bin=$(binsize "$(stat -c %s "$MEG.bin")")
	contains check_progress_ends_at_the_bin_size pc.err "^mkindex: checking ids $bin of $bin \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
	$MK --output-prefix a32 --dtype int32 < a.tok 2>/dev/null
	mkdir mix
	expect_rc merge_mixed_dtype_exits_2 2 $MK merge mix/m a_text_document a32_text_document
	contains merge_mixed_dtype_names_file "$T/err" 'a32_text_document\.idx: dtype int32 \(4\), but a_text_document\.idx is uint16 \(8\)'
	empty_dir merge_mixed_dtype_leaves_nothing mix

	# --- check on corrupted copies: exit 1 and the field, the index, expected vs found ---
	mkdir c
	corrupt() {  # corrupt NAME PYTHON-STATEMENT-ON-bytearray-b
		cp "$MEG.idx" "c/$1.idx"; cp "$MEG.bin" "c/$1.bin"
		"$PY" -c "
import struct
p = 'c/$1.idx'; b = bytearray(open(p, 'rb').read())
$2
open(p, 'wb').write(b)"
	}
	corrupt trunc 'b = b[:20000]'
	expect_rc check_truncated_idx_exits_1 1 $MK check c/trunc
	contains check_truncated_idx_says_where "$T/out" 'c/trunc\.idx: file is 20000 bytes, expected 34 \+ 12\*N \+ 8\*D = 20042 \(N = 1000, D = 1001\): truncated inside doc_idx, at entry 995 of 1001$'
	corrupt shortbin 'pass'
	truncate -s 1000000 c/shortbin.bin
	expect_rc check_short_bin_exits_1 1 $MK check c/shortbin
	contains check_short_bin_says_which_sequence "$T/out" "c/shortbin\.bin: is 1000000 bytes, expected $((2 * TOKENS)) \($TOKENS tokens x 2 bytes\): it ends inside sequence [0-9]+ of 1000"
	corrupt order 'b[34 + 12000 + 8 * 3:34 + 12000 + 8 * 4] = struct.pack("<q", 1)'
	expect_rc check_non_monotone_exits_1 1 $MK check c/order
	contains check_non_monotone_says_where "$T/out" 'c/order\.idx: doc_idx\[3\] = 1 is less than doc_idx\[2\] = 2: must not decrease$'
	corrupt magic 'b[0:7] = b"NOTIDX!"'
	expect_rc check_bad_magic_exits_1 1 $MK check c/magic
	contains check_bad_magic_shows_bytes "$T/out" 'c/magic\.idx: magic is 4e 4f 54 49 44 58 21 00 00, expected 4d 4d 49 44 49 44 58 00 00'
	corrupt version 'b[9:17] = struct.pack("<Q", 2)'
	expect_rc check_bad_version_exits_1 1 $MK check c/version
	contains check_bad_version_says_it "$T/out" 'c/version\.idx: version is 2, expected 1'
	corrupt size 'b[34 + 4 * 7:34 + 4 * 8] = struct.pack("<i", -5)'
	expect_rc check_negative_size_exits_1 1 $MK check c/size
	contains check_negative_size_says_it "$T/out" 'c/size\.idx: sizes\[7\] = -5: negative$'
	contains check_caps_repeated_problems "$T/out" '\.\.\. and [0-9]+ more pointers problems$'
	corrupt ptr 'b[34 + 4000 + 8 * 10:34 + 4000 + 8 * 11] = struct.pack("<q", 7)'
	expect_rc check_bad_pointer_exits_1 1 $MK check c/ptr
	contains check_bad_pointer_expected_vs_found "$T/out" "c/ptr\.idx: pointers\[10\] = 7, expected $PTR10 \(sizes\[0\.\.10\) x 2 bytes\)\$"
	corrupt seqmode 'b += bytes(1000)'
	expect_rc check_sequence_mode_array_exits_0 0 $MK check c/seqmode
	contains check_sequence_mode_array_noted "$T/out" 'note: .*sequence-mode array'
	corrupt nobin 'pass'
	rm c/nobin.bin
	expect_rc check_missing_bin_exits_3 3 $MK check c/nobin
	contains check_missing_bin_names_it "$T/err" 'c/nobin\.bin: No such file or directory'
	expect_rc check_missing_idx_exits_3 3 $MK check c/nothing
	mkdir c/dir.idx
	expect_rc check_idx_directory_exits_3 3 $MK check c/dir
	# --json on the corrupted copies: the same fault, the same exit status as the text
	expect_rc check_json_non_monotone_exits_1 1 $MK check c/order --json
	json_ok check_json_non_monotone_names_the_fault "$T/out" "
p = [p for p in j['problems'] if p['kind'] == 'doc_idx']
assert j['ok'] is False and p and (p[0]['file'], p[0]['message']) == ('c/order.idx',
    'doc_idx[3] = 1 is less than doc_idx[2] = 2: must not decrease'), j['problems']
assert j['problem_count'] == sum(j['problem_counts'].values()) >= 1
assert j['sequences'] is None and j['documents'] is None   # a broken .idx's counts are not believed
"
	expect_rc check_json_truncated_exits_1 1 $MK check c/trunc --json
	json_ok check_json_truncated_says_where "$T/out" "
assert j['ok'] is False and any(p['file'] == 'c/trunc.idx' and 'truncated inside doc_idx, at entry 995 of 1001' in p['message']
                                for p in j['problems']), j['problems']
"
	expect_rc check_json_negative_size_exits_1 1 $MK check c/size --json
	json_ok check_json_caps_repeated_problems "$T/out" "
c = j['problem_counts']
assert c['pointers'] > 10 and sum(p['kind'] == 'pointers' for p in j['problems']) == 10 == j['shown_per_kind'], c
assert j['problem_count'] == sum(c.values()) == len(j['problems']) + sum(n - 10 for n in c.values() if n > 10)
assert {'file': 'c/size.idx', 'kind': 'sizes', 'message': 'sizes[7] = -5: negative'} in j['problems']
"
	expect_rc check_json_sequence_mode_exits_0 0 $MK check c/seqmode --json
	json_ok check_json_sequence_mode_is_a_note "$T/out" "
assert j['ok'] is True and j['problems'] == [] and any('sequence-mode array' in n['message'] for n in j['notes']), j['notes']
"
	expect_rc check_json_missing_bin_exits_3 3 $MK check c/nobin --json
	json_ok check_json_missing_bin_is_one_object_naming_it "$T/out" "
assert j['ok'] is False and j['error'].startswith('c/nobin.bin: No such file or directory'), j['error']
"
	contains check_json_missing_bin_warns_on_stderr "$T/err" 'c/nobin\.bin: No such file or directory'
	expect_rc info_json_on_corrupt_exits_2 2 $MK info c/order --json
	check info_json_on_corrupt_prints_nothing [ ! -s "$T/out" ]
	expect_rc info_on_corrupt_exits_2 2 $MK info c/order
	contains info_on_corrupt_points_to_check "$T/err" "doc_idx\[3\] = 1 is less .*run 'mkindex check c/order'"
	expect_rc dump_on_corrupt_exits_2 2 $MK dump c/trunc
	expect_rc merge_of_corrupt_exits_2 2 $MK merge c/out a_text_document c/ptr
	check merge_of_corrupt_writes_nothing [ ! -e c/out.idx -a ! -e c/out.bin ]

	# random truncations and byte flips: findings or refusals, never a crash
	"$PY" - "$MEG" "$MK" > fuzz.txt <<'EOF'
import random, subprocess, sys
meg, mk = sys.argv[1], sys.argv[2]
idx, binb = open(meg + ".idx", "rb").read(), open(meg + ".bin", "rb").read()
rng = random.Random(7)
bad = []
for i in range(60):
    b, bb = bytearray(idx), binb
    k = i % 3
    if k == 0:
        b = b[:rng.randrange(len(b))]
    elif k == 1:
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    else:
        for _ in range(3):
            b[rng.randrange(34)] = rng.randrange(256)
        bb = binb[:rng.randrange(len(binb))]
    open("fz.idx", "wb").write(b); open("fz.bin", "wb").write(bb)
    for args, allowed in ((["check", "fz", "--vocab-size", "5000"], (0, 1)), (["info", "fz"], (0, 2)),
                          (["dump", "fz"], (0, 2)), (["merge", "fzm", "fz"], (0, 2))):
        r = subprocess.run([mk] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode not in allowed:
            bad.append("%d %s: exit %d %s" % (i, args[0], r.returncode, r.stderr[-200:]))
print("\n".join(bad) if bad else "none")
EOF
	check fuzzed_files_never_crash [ "$(cat fuzz.txt)" = none ]
fi

# --- kill -9 and a dying producer: no .idx, no .bin, no temporary ---
mkdir k1 k2
mkfifo slow.fifo
ts slow --vocab 5000 --docs 100 --delay 0.1 > slow.fifo 2>/dev/null &
prod=$!
$MK --output-prefix k1/out < slow.fifo 2>/dev/null &
pid=$!
# mid-write: its .bin is an open, nameless file in k1
writing() { ls -l /proc/$pid/fd 2>/dev/null | grep -q "$T/k1/#.*(deleted)"; }
check kill9_mkindex_was_writing wait_for 10 writing
kill -9 $pid
wait $pid 2>/dev/null
wait $prod 2>/dev/null
empty_dir kill9_leaves_nothing k1
ts slow --vocab 5000 --docs 100 --delay 0.1 > producer.tok &
prod=$!
sleep 0.5
kill -9 $prod
wait $prod 2>/dev/null
expect_rc dead_producer_exits_2 2 $MK --output-prefix k2/out < producer.tok
contains dead_producer_says_truncated "$T/err" 'truncated token stream.*did the producer die'
empty_dir dead_producer_leaves_nothing k2

# --- streaming: memory does not grow with the corpus ---
ts gen --bytes 200000000 --vocab 50257 > big.tok
"$PY" - "$MK" > rss.txt <<'EOF'
import resource, subprocess, sys
with open("big.tok", "rb") as f:
    r = subprocess.run([sys.argv[1], "--output-prefix", "big"], stdin=f, stderr=subprocess.DEVNULL)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
EOF
read -r big_rc big_rss < rss.txt
check big_stream_builds [ "$big_rc" = 0 ]
check big_stream_rss_under_40MB [ "$big_rss" -lt 40 ]   # 100 MB of .bin: held, it would show
echo "    200 MB stream: max RSS ${big_rss} MB"
expect_rc big_stream_checks_ok 0 $MK check big_text_document --vocab-size 50257
rm -f big.tok big_text_document.*

# --- a full filesystem: exit 3, nothing left ---
mkdir full
if mount -t tmpfs -o size=1m lmtk-test full 2>/dev/null; then
	ts gen --bytes 5000000 --vocab 50257 > five.tok
	expect_rc full_filesystem_exits_3 3 $MK --output-prefix full/x < five.tok
	contains full_filesystem_says_so "$T/err" 'No space left on device; nothing written'
	empty_dir full_filesystem_leaves_nothing full
	umount -l full
else
	skip full_filesystem "cannot mount tmpfs (need root)"
fi

rm -rf "$T"
