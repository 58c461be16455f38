#!/usr/bin/env bash
# tokenize (and tokenize | mkindex) against the real peers: Megatron's own .bin/.idx, and Hugging
# Face tokenizers (npm `tokenizers`, run here through tests/ref/hf-encode.js) on ~20 MB of real
# multilingual text (tests/ref/corpus.sh) with GPT-2's real vocabulary and with BLOOM-style
# tokenizers trained by HF's own trainer (tests/ref/train-bloom.js).
. "$(dirname "$0")/../lib.sh"
TK=$BIN/tokenize
MK=$BIN/mkindex
MEG=$(tiny_dataset) || exit 3   # vocab, merges and documents the project makes (tests/lib.sh)
CACHE=${LMTK_CACHE:-/var/tmp/lmtk-cache}
mkdir -p "$CACHE"
export LMTK_NODE_MODULES=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}

# same_ids NAME OURS THEIRS: equal, else the first differing document and token position
same_ids() {
	if cmp -s "$2" "$3"; then ok "$1"; return; fi
	local d
	d=$(awk 'NR == FNR { a[FNR] = $0; next }
		{ if (a[FNR] != $0) { n = split(a[FNR], x, " "); m = split($0, y, " ");
		  for (i = 1; i <= n || i <= m; i++) if (x[i] != y[i]) break;
		  printf "document %d, token %d: ours %s, reference %s", FNR, i, (i <= n ? x[i] : "(end)"), (i <= m ? y[i] : "(end)"); exit } }' "$2" "$3")
	fail "$1" "${d:-the outputs differ in length}"
}

# --- usage ----------------------------------------------------------------------------------
expect_rc usage_no_tokenizer 2 $TK --format text
contains usage_no_tokenizer_says_what "$T/err" 'no tokenizer'
expect_rc help_exits_0 0 $TK --help
contains help_lists_append_eod "$T/out" -- '--append-eod'

# --- Megatron: tokenize | mkindex reproduces Megatron's preprocessor byte for byte ----------
# (the dataset Megatron itself wrote, when this checkout has it beside it: CI's ../shared)
if [ -n "$MEG_REF" ]; then
	$TK --vocab-file "$MEG_REF/gpt2-tiny-vocab.json" --merge-file "$MEG_REF/gpt2-tiny-merges.txt" --append-eod \
		< "$MEG_REF/openwebtext-1000.jsonl" 2>"$T/tk.err" | $MK --output-prefix "$T/ref" 2>"$T/mk.err"
	check megatron_bin_byte_identical cmp "$T/ref_text_document.bin" "$MEG_REF/meg-gpt2-openwebtext_text_document.bin"
	check megatron_idx_byte_identical cmp "$T/ref_text_document.idx" "$MEG_REF/meg-gpt2-openwebtext_text_document.idx"
	contains summary_line "$T/tk.err" '^tokenize: 1000 documents, 1361845 tokens, [0-9.]+ MiB in [0-9.]+ s \([0-9.]+ MiB/s\), 0 bad lines$'
	$TK --vocab-file "$MEG_REF/gpt2-tiny-vocab.json" --merge-file "$MEG_REF/gpt2-tiny-merges.txt" --append-eod --workers 3 \
		< "$MEG_REF/openwebtext-1000.jsonl" 2>/dev/null | $MK --output-prefix "$T/ref3" 2>/dev/null
	check megatron_identical_with_3_workers cmp "$T/ref3_text_document.bin" "$MEG_REF/meg-gpt2-openwebtext_text_document.bin"
else
	skip megatron_byte_identical "the Megatron-written dataset is not here (../shared/data/megatron, or set LMTK_MEGATRON_DIR)"
fi
# the same pipeline on the project's own documents: any worker count gives the same bytes
$TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" --append-eod \
	< "$MEG/openwebtext-1000.jsonl" 2>"$T/tk.err" | $MK --output-prefix "$T/meg" 2>"$T/mk.err"
contains summary_line_counts_documents "$T/tk.err" '^tokenize: 1000 documents, [0-9]+ tokens, [0-9.]+ MiB in [0-9.]+ s \([0-9.]+ MiB/s\), 0 bad lines$'
$TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" --append-eod --workers 3 \
	< "$MEG/openwebtext-1000.jsonl" 2>/dev/null | $MK --output-prefix "$T/meg3" 2>/dev/null
# the progress line (lib/progress.h): none into a file unless LMTK_PROGRESS=1 asks; then whole
# lines with done of total, the rate and the ETA (the input's size known: a file on stdin)
for i in 1 2 3 4; do cat "$MEG/openwebtext-1000.jsonl"; done > "$T/owt4.jsonl"
mib=$(awk -v b="$(stat -c %s "$T/owt4.jsonl")" 'BEGIN { printf "%.2f", b / 1048576 }')
$TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" --workers 1 \
	< "$T/owt4.jsonl" 2>"$T/noprog.err" >/dev/null
lacks progress_not_drawn_into_a_file "$T/noprog.err" 'reading|ETA'
LMTK_PROGRESS=1 $TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" --workers 1 \
	< "$T/owt4.jsonl" 2>"$T/prog.err" >/dev/null
contains progress_forced_has_rate_and_eta "$T/prog.err" "^tokenize: reading [0-9.]+ (B|KiB|MiB) of ${mib/./\\.} MiB \\([0-9]+%\\), [0-9.]+ (B|KiB|MiB)/s, ETA [0-9]+:[0-9]{2}:[0-9]{2}, [0-9]+ documents, [0-9]+ tokens\$"
lacks progress_forced_into_a_file_has_no_carriage_return "$T/prog.err" $'\r'
contains progress_forced_ends_with_the_summary "$T/prog.err" '^tokenize: 4000 documents, [0-9]+ tokens, [0-9.]+ MiB in [0-9.]+ s \([0-9.]+ MiB/s\), 0 bad lines$'
check identical_with_3_workers cmp "$T/meg3_text_document.bin" "$T/meg_text_document.bin"
# ...and it ends on the whole input: a last line at 100% whose total is the file's size
contains progress_forced_ends_at_100_percent_of_the_input "$T/prog.err" "^tokenize: reading ${mib/./\\.} MiB of ${mib/./\\.} MiB \\(100%\\), [0-9.]+ (KiB|MiB)/s, ETA 0:00:00, 4000 documents, [0-9]+ tokens\$"
# files named on the command line: the total is their sizes together
mib2=$(awk -v b="$(( $(stat -c %s "$T/owt4.jsonl") + $(stat -c %s "$MEG/openwebtext-1000.jsonl") ))" 'BEGIN { printf "%.2f", b / 1048576 }')
LMTK_PROGRESS=1 $TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" \
	"$T/owt4.jsonl" "$MEG/openwebtext-1000.jsonl" 2>"$T/prog2.err" >/dev/null
contains progress_total_is_the_named_files_together "$T/prog2.err" "^tokenize: reading ${mib2/./\\.} MiB of ${mib2/./\\.} MiB \\(100%\\), [0-9.]+ (KiB|MiB)/s, ETA 0:00:00, 5000 documents, "
# progress never touches the data: the stream, and tokenize | mkindex, are the same bytes with
# the line forced on and off
TKG=($TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" --append-eod --workers 2)
LMTK_PROGRESS=1 "${TKG[@]}" < "$T/owt4.jsonl" 2>"$T/pon.err" >"$T/pon.stream"
LMTK_PROGRESS=0 "${TKG[@]}" < "$T/owt4.jsonl" 2>/dev/null >"$T/poff.stream"
check progress_on_gives_the_same_stream cmp "$T/pon.stream" "$T/poff.stream"
contains progress_on_was_drawn "$T/pon.err" '^tokenize: reading .*\(100%\)'
LMTK_PROGRESS=1 "${TKG[@]}" < "$T/owt4.jsonl" 2>"$T/ppt.err" | LMTK_PROGRESS=1 $MK --output-prefix "$T/pon" 2>"$T/ppm.err"
"${TKG[@]}" < "$T/owt4.jsonl" 2>/dev/null | LMTK_PROGRESS=0 $MK --output-prefix "$T/poff" 2>/dev/null
check progress_on_pipeline_bin_identical cmp "$T/pon_text_document.bin" "$T/poff_text_document.bin"
check progress_on_pipeline_idx_identical cmp "$T/pon_text_document.idx" "$T/poff_text_document.idx"
contains progress_on_pipeline_mkindex_drew_it "$T/ppm.err" '^mkindex: reading [0-9.]+ (KiB|MiB), [0-9.]+ (KiB|MiB)/s, 4000 documents$'
# --decode's progress: the bytes of the stream read, to 100% of the file's size; the text is the
# same without it
TKD=($TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" --decode)
LMTK_PROGRESS=1 "${TKD[@]}" "$T/pon.stream" >"$T/pdec.txt" 2>"$T/pdec.err"
"${TKD[@]}" "$T/pon.stream" >"$T/dec0.txt" 2>/dev/null
check decode_with_progress_same_text cmp "$T/pdec.txt" "$T/dec0.txt"
sb=$(binsize "$(stat -c %s "$T/pon.stream")")
contains decode_progress_ends_at_the_streams_size "$T/pdec.err" "^tokenize: decoding $sb of $sb \\(100%\\), [0-9.]+ (B|KiB|MiB)/s, ETA 0:00:00\$"

# --- the peers ------------------------------------------------------------------------------
if [ ! -d "$LMTK_NODE_MODULES/tokenizers" ]; then
	fail hf_peer_installed "no $LMTK_NODE_MODULES/tokenizers: run make deps"
	exit 1
fi
C=$CACHE/test.jsonl
bash "$TOP/tests/ref/corpus.sh" "$C" >"$T/corpus.log" 2>&1 || { fail corpus_built "$(tail -3 "$T/corpus.log")"; exit 1; }
check corpus_is_10MB_or_more [ "$(stat -c %s "$C")" -ge 10000000 ]
bash "$TOP/tests/ref/gpt2-files.sh" "$CACHE/gpt2" >"$T/gpt2.log" 2>&1 || { fail gpt2_files "$(tail -3 "$T/gpt2.log")"; exit 1; }
G=$CACHE/gpt2
if [ ! -f "$CACHE/tok/.done" ] || [ "$CACHE/tok/.done" -ot "$C" ]; then
	node "$TOP/tests/ref/train-bloom.js" "$C" "$CACHE/tok" >"$T/train.log" 2>&1 && touch "$CACHE/tok/.done" ||
		{ fail bloom_trained "$(tail -3 "$T/train.log")"; exit 1; }
fi

# variants of the trained tokenizer that reach the other model and pre-tokenizer paths:
# ignore_merges; a generic Split regex (Oniguruma) before BLOOM's; String/Contiguous/inverted
# Splits and ByteLevel with add_prefix_space and its own regex; and a Split whose pattern the
# PCRE2 translation before libonig got wrong: [[:alpha:]] is Alphabetic (Indic vowel signs and
# virama are; PCRE2 read \p{L}), and an empty match after a match, not where it ended, counts
/usr/bin/python3 - "$CACHE/tok/bloom/tokenizer.json" "$T" <<'PY'
import copy, json, sys
j = json.load(open(sys.argv[1]))
bloom_split = j["pre_tokenizer"]["pretokenizers"][0]
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
def split(kind, pat, behavior, invert=False):
    return {"type": "Split", "pattern": {kind: pat}, "behavior": behavior, "invert": invert}
v = {}
v["ignore_merges"] = copy.deepcopy(j); v["ignore_merges"]["model"]["ignore_merges"] = True
v["split_regex"] = copy.deepcopy(j)
v["split_regex"]["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    split("Regex", "\\p{N}{1,3}", "Isolated"), bloom_split, bl]}
v["split_oniguruma"] = copy.deepcopy(j)
v["split_oniguruma"]["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    split("Regex", "[[:alpha:]]+|(?=\\p{N})", "Isolated"), bloom_split, bl]}
v["split_behaviors"] = copy.deepcopy(j)
v["split_behaviors"]["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    split("String", "\n", "MergedWithNext"), split("Regex", "[\\p{P}\\p{S}]+", "Contiguous"),
    split("Regex", "\\s+", "MergedWithPrevious", True),
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
for k, t in v.items():
    json.dump(t, open(f"{sys.argv[2]}/{k}.json", "w"), ensure_ascii=False)
PY

# GPT-2's real vocab, Megatron's flags: a literal "<|endoftext|>" in text is text (as Megatron)
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --append-eod --format text < "$C" > "$T/ours.txt" 2>/dev/null
hf_encode --vocab "$G/vocab.json" --merges "$G/merges.txt" --megatron --append-eod < "$C" > "$T/hf.txt" 2>/dev/null
same_ids gpt2_vocab_merges_ids_equal_hf "$T/ours.txt" "$T/hf.txt"
check corpus_has_literal_endoftext grep -q '<|endoftext|>' "$C"
# the same vocab as a tokenizer.json: the literal is the special token (as HF)
for name in gpt2:$G/tokenizer.json bloom:$CACHE/tok/bloom/tokenizer.json bloom_added_tokens:$CACHE/tok/bloom-added/tokenizer.json \
	byte_fallback:$CACHE/tok/byte-fallback/tokenizer.json unk_fused:$CACHE/tok/unk/tokenizer.json \
	ignore_merges:$T/ignore_merges.json split_regex:$T/split_regex.json \
	split_oniguruma_posix_alpha_empty_match:$T/split_oniguruma.json \
	split_string_contiguous_inverted_prefix_space:$T/split_behaviors.json; do
	n=${name%%:*} f=${name#*:}
	$TK --tokenizer-name-or-path "$f" --append-eod --format text --workers 2 < "$C" > "$T/ours-$n.txt" 2>"$T/err-$n.txt" ||
		fail "${n}_tokenizes" "$(cat "$T/err-$n.txt")"
	hf_encode --tokenizer "$f" --append-eod < "$C" > "$T/hf-$n.txt" 2>/dev/null
	same_ids "${n}_tokenizer_json_ids_equal_hf" "$T/ours-$n.txt" "$T/hf-$n.txt"
done
check special_token_differs_between_flag_sets test "$(cmp -s "$T/ours.txt" "$T/ours-gpt2.txt"; echo $?)" = 1

# several keys; plain text
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --json-keys text title --format text < "$C" > "$T/k.txt" 2>/dev/null
hf_encode --vocab "$G/vocab.json" --merges "$G/merges.txt" --megatron --json-keys text title < "$C" > "$T/k-hf.txt" 2>/dev/null
same_ids two_json_keys_equal_hf "$T/k.txt" "$T/k-hf.txt"
head -c 2000000 "$G/merges.txt" | tail -n +2 > "$T/plain.txt"   # real text lines: the merges file
printf 'caf\xc3\xa9  \xe2\x80\x83 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd\r\n\n   \n' >> "$T/plain.txt"
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --plain --format text < "$T/plain.txt" > "$T/p.txt" 2>/dev/null
hf_encode --vocab "$G/vocab.json" --merges "$G/merges.txt" --megatron --plain < "$T/plain.txt" > "$T/p-hf.txt" 2>/dev/null
same_ids plain_text_equal_hf "$T/p.txt" "$T/p-hf.txt"

# --- parallel output is identical whatever the worker count ---------------------------------
for w in 1 2 5; do
	$TK --tokenizer-name-or-path "$CACHE/tok/bloom-added/tokenizer.json" --append-eod --workers $w < "$C" > "$T/w$w.stream" 2>/dev/null
done
check workers_2_stream_equals_workers_1 cmp "$T/w1.stream" "$T/w2.stream"
check workers_5_stream_equals_workers_1 cmp "$T/w1.stream" "$T/w5.stream"

# --- several keys give Megatron's per-key datasets ------------------------------------------
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --json-keys text title --append-eod < "$C" 2>/dev/null |
	$MK --output-prefix "$T/multi" 2>/dev/null
check per_key_datasets test -s "$T/multi_text_document.bin" -a -s "$T/multi_title_document.idx"

# --- decode: ids back to the documents' text ------------------------------------------------
/usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1], encoding="utf-8"):
    sys.stdout.buffer.write(json.loads(l)["text"].encode("utf-8") + b"\n")' "$C" > "$T/texts"
/usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1], encoding="utf-8"):
    t = json.loads(l)["text"]
    if t: sys.stdout.buffer.write(t.encode("utf-8") + b"\n")' "$C" > "$T/texts-nonempty"
$TK --tokenizer-name-or-path "$CACHE/tok/bloom/tokenizer.json" --decode < "$T/ours-bloom.txt" > "$T/dec.txt" 2>"$T/dec.err"
# text ids carry the EOD (</s>) at each document's end: drop it from the decoded text
sed 's|</s>$||' "$T/dec.txt" > "$T/dec2.txt"
check decode_text_ids_gives_documents_back cmp "$T/dec2.txt" "$T/texts"
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" < "$C" 2>/dev/null > "$T/g.stream"
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --decode "$T/g.stream" > "$T/dec3.txt" 2>/dev/null
# (the stream, like Megatron's dataset, has no empty documents)
check decode_stream_gives_documents_back cmp "$T/dec3.txt" "$T/texts-nonempty"
$MK dump "$T/meg_text_document" 2>/dev/null | $TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" --decode > "$T/dec4.txt" 2>/dev/null
/usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1], encoding="utf-8"): sys.stdout.write(json.loads(l)["text"] + "<|endoftext|>\n")' "$MEG/openwebtext-1000.jsonl" > "$T/owt.txt"
check decode_megatron_index_documents cmp "$T/dec4.txt" "$T/owt.txt"
expect_rc decode_unknown_id_exits_2 2 sh -c "echo '1 2 99999999' | $TK --vocab-file $G/vocab.json --merge-file $G/merges.txt --decode"
contains decode_unknown_id_named "$T/err" '<stdin>:1: id 99999999 is not in the vocabulary'

# --- Megatron's EOD rule: only after a document that produced tokens ------------------------
printf '{"text": "a"}\n{"text": ""}\n{"text": "b c"}\n' > "$T/eod.jsonl"
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --append-eod --format text < "$T/eod.jsonl" > "$T/eod.txt" 2>/dev/null
check eod_after_documents_with_tokens_only [ "$(cat "$T/eod.txt" | tr '\n' '|')" = "64 50256||65 269 50256|" ]
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --append-eod < "$T/eod.jsonl" 2>/dev/null | $MK --output-prefix "$T/eod" 2>/dev/null
$MK info "$T/eod_text_document" > "$T/info.txt" 2>&1
contains empty_document_skipped_in_dataset "$T/info.txt" '(documents|sequences):? +2\b'

# --- bad input: file:line and exit 2, or counted with --skip-bad-lines -----------------------
printf '{"text": "fine"}\n{"text": "also fine"}\n{"text": "broken\n{"title": "no text"}\n{"text": 42}\n{"text": "bad \xff byte"}\n' > "$T/bad.jsonl"
expect_rc malformed_json_exits_2 2 $TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --format text "$T/bad.jsonl"
contains malformed_json_names_line "$T/err" "^tokenize: $T/bad.jsonl:3: malformed JSON at column [0-9]+: unterminated string"
check lines_before_the_bad_one_written [ "$(wc -l < "$T/out")" = 2 ]
expect_rc skip_bad_lines_exits_0 0 $TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --format text --skip-bad-lines "$T/bad.jsonl"
contains skip_bad_lines_counts "$T/err" "skipped 4 bad lines; the first: $T/bad.jsonl:3:"
check skip_bad_lines_keeps_good_ones [ "$(wc -l < "$T/out")" = 2 ]
printf '{"title": "x"}\n' > "$T/nokey.jsonl"
expect_rc missing_key_exits_2 2 $TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --format text "$T/nokey.jsonl"
contains missing_key_named "$T/err" "nokey.jsonl:1: no key 'text'"
printf '{"text": 42}\n' > "$T/num.jsonl"
expect_rc non_string_exits_2 2 $TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --format text "$T/num.jsonl"
contains non_string_named "$T/err" "num.jsonl:1: key 'text' is not a string"
printf '{"text": "bad \xff byte"}\n' > "$T/utf.jsonl"
expect_rc invalid_utf8_json_exits_2 2 $TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --format text "$T/utf.jsonl"
contains invalid_utf8_json_named "$T/err" "utf.jsonl:1: malformed JSON at column 15: invalid UTF-8"
printf 'ok\nbad \xc3\x28 here\n' > "$T/utf.txt"
expect_rc invalid_utf8_plain_exits_2 2 $TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --plain --format text "$T/utf.txt"
contains invalid_utf8_plain_named "$T/err" "utf.txt:2: invalid UTF-8 at byte 5"
printf '{"text": "\\ud800 lone"}\n' > "$T/sur.jsonl"
expect_rc lone_surrogate_exits_2 2 $TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --format text "$T/sur.jsonl"
# a stream cut by a bad line is refused by mkindex: nothing half-indexed
$TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" "$T/bad.jsonl" 2>/dev/null | $MK --output-prefix "$T/cut" 2>"$T/cut.err"
check cut_stream_refused_by_mkindex [ ! -e "$T/cut_text_document.idx" ]
contains cut_stream_says_truncated "$T/cut.err" 'truncated'

# --- tokenizer files that do not fit --------------------------------------------------------
expect_rc vocab_merges_mismatch_exits_2 2 $TK --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$G/merges.txt" --format text "$T/eod.jsonl"
contains vocab_merges_mismatch_names_line "$T/err" "merges.txt:[0-9]+: merge .* is not in the vocabulary; do --vocab-file and --merge-file belong together\?"
/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["normalizer"]={"type":"NFKC"}; json.dump(j, open(sys.argv[2],"w"))' \
	"$CACHE/tok/bloom/tokenizer.json" "$T/nfkc.json"
expect_rc normalizer_refused 2 $TK --tokenizer-name-or-path "$T/nfkc.json" --format text "$T/eod.jsonl"
contains normalizer_named "$T/err" "normalizer 'NFKC' is not supported"
/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["pre_tokenizer"]={"type":"Whitespace"}; json.dump(j, open(sys.argv[2],"w"))' \
	"$CACHE/tok/bloom/tokenizer.json" "$T/ws.json"
expect_rc unsupported_pretokenizer_refused 2 $TK --tokenizer-name-or-path "$T/ws.json" --format text "$T/eod.jsonl"
contains unsupported_pretokenizer_named "$T/err" "pre-tokenizer 'Whitespace' is not supported"
# a Split pattern Oniguruma refuses (a class escape cannot start a range), which the reference
# refuses too; the PCRE2 translation took it
/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["pre_tokenizer"]["pretokenizers"][0]["pattern"]={"Regex":"[\\w-z]+"}; json.dump(j, open(sys.argv[2],"w"))' \
	"$CACHE/tok/bloom/tokenizer.json" "$T/badsplit.json"
expect_rc bad_split_pattern_exits_2 2 $TK --tokenizer-name-or-path "$T/badsplit.json" --format text "$T/eod.jsonl"
contains bad_split_pattern_named "$T/err" "badsplit\.json: Split pattern '\[\\\\w-z\]\+': unmatched range specifier in char-class"
hf_encode --tokenizer "$T/badsplit.json" < "$T/eod.jsonl" > /dev/null 2>"$T/hf-bad.err"
contains bad_split_pattern_refused_by_hf "$T/hf-bad.err" 'unmatched range specifier in char-class'
expect_rc missing_input_file_exits_3 3 $TK --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" --format text "$T/nonexistent.jsonl"
