#!/usr/bin/env bash
# ckpt-merge-tp --format hf: an export that AutoTokenizer.from_pretrained and generate() load as
# it is.  A GPT-2 run trained with relative --vocab-file/--merge-file paths, exported from another
# directory, has its tokenizer files and a tokenizer.json that HF's own tokenizer code (npm
# `tokenizers`, tests/ref/hf-encode.js) turns into the ids lmtk's tokenize gives, on a few hundred
# real documents; config.json, generation_config.json and the special-token files name the run's
# end of document (<|endoftext|>'s id, read here from the vocab with Python's json).  A BLOOM run
# with a tokenizer directory gets that tokenizer.json and special_tokens_map.json as they are and
# their ids (eos, bos, pad) in the configs; a BERT gets BertTokenizerFast's WordPiece
# tokenizer.json, which HF reads into tokenize's ids.  A tokenizer file changed since training is
# not copied, and the export says so; a merges file no BPE reads gives no tokenizer.json, named by
# line.  An existing export is replaced with --force, and refused
# without it (exit 2, naming --force).
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
MT=$BIN/ckpt-merge-tp
TK=$BIN/tokenize
MEG=$(tiny_dataset) || exit 3
export LMTK_NODE_MODULES=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}
cd "$T" || exit 3
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT

# documents: 300 of Megatron's own jsonl where this checkout has it, else of the project's corpus
if [ -n "$MEG_REF" ]; then
	head -300 "$MEG_REF/openwebtext-1000.jsonl" >docs.jsonl
else
	skip hf_export_ids_on_megatrons_documents "the Megatron dataset is not here (../shared/data/megatron, or set LMTK_MEGATRON_DIR): the project's own documents instead"
	# less any document holding a literal <|endoftext|>: HF reads it as the special token, lmtk
	# spells it out as Megatron does (ckpt-merge-tp(1)), a known difference, not what is tested
	grep -vF '<|endoftext|>' "$MEG/openwebtext-1000.jsonl" | head -300 >docs.jsonl
fi
have_node=1
if ! command -v node >/dev/null || [ ! -d "$LMTK_NODE_MODULES/tokenizers" ]; then
	have_node=0
	skip hf_tokenizers_peer "no node or no $LMTK_NODE_MODULES/tokenizers (make deps installs them)"
fi
# same_ids NAME OURS THEIRS: equal, else the first differing document
same_ids() {
	if [ -s "$2" ] && cmp -s "$2" "$3"; then ok "$1"; return; fi
	fail "$1" "$(diff <(tr ' ' '\n' <"$2" | head -c 20000000) <(tr ' ' '\n' <"$3" | head -c 20000000) | head -4 | tr '\n' ' ')"
}

COMMON=(--seq-length 32 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4
	--lr 1e-3 --train-iters 2 --data-path meg-gpt2-openwebtext_text_document --split 949,50,1
	--device cpu --threads 1 --eval-iters 0 --save ckpt --save-interval 2)

# --- GPT-2: relative tokenizer paths at training time, the export made from elsewhere ---
mkdir run elsewhere
cp "$MEG"/gpt2-tiny-vocab.json "$MEG"/gpt2-tiny-merges.txt "$MEG"/meg-gpt2-openwebtext_text_document.* run/ || exit 3
(cd run && "$BIN/train" "${COMMON[@]}" --num-layers 1 --hidden-size 32 --num-attention-heads 2 \
	--vocab-file gpt2-tiny-vocab.json --merge-file gpt2-tiny-merges.txt >train.log 2>&1) ||
	{ fail gpt_trains "$(tail -3 run/train.log)"; exit 1; }
(cd elsewhere && "$MT" ../run/ckpt --output ../gpt.hf --format hf >../gpt.out 2>../gpt.err)
rc=$?
[ $rc = 0 ] && ok gpt_hf_export_from_another_directory_exits_0 || fail gpt_hf_export_from_another_directory_exits_0 "exit $rc: $(cat gpt.err)"
missing=
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json \
	special_tokens_map.json vocab.json merges.txt; do
	[ -s gpt.hf/$f ] || missing="$missing $f"
done
[ -z "$missing" ] && cmp -s gpt.hf/vocab.json run/gpt2-tiny-vocab.json && cmp -s gpt.hf/merges.txt run/gpt2-tiny-merges.txt &&
	ok gpt_hf_export_has_what_autotokenizer_and_generate_read || fail gpt_hf_export_has_what_autotokenizer_and_generate_read "missing:$missing; $(ls gpt.hf | tr '\n' ' ')"
"$PY" - gpt.hf run/gpt2-tiny-vocab.json <<'EOF' >gpt.cfg 2>&1 && ok gpt_hf_configs_name_the_runs_end_of_document || fail gpt_hf_configs_name_the_runs_end_of_document "$(tail -3 gpt.cfg)"
import json, sys
d, vocab = sys.argv[1:]
v = json.load(open(vocab))
eos = v["<|endoftext|>"]                        # Megatron's GPT2BPETokenizer's end of document
c = json.load(open(d + "/config.json"))
g = json.load(open(d + "/generation_config.json"))
assert c["eos_token_id"] == eos and c["bos_token_id"] == eos, (c.get("eos_token_id"), c.get("bos_token_id"), eos)
assert "pad_token_id" not in c, c["pad_token_id"]   # GPT-2's tokenizer has none
assert g["eos_token_id"] == eos and g["bos_token_id"] == eos and "pad_token_id" not in g, g
assert c["vocab_size"] == len(v), (c["vocab_size"], len(v))
m = json.load(open(d + "/special_tokens_map.json"))
assert m == {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}, m
t = json.load(open(d + "/tokenizer_config.json"))
assert t["tokenizer_class"] == "GPT2Tokenizer" and t["eos_token"] == "<|endoftext|>" and t["model_max_length"] == 64, t
j = json.load(open(d + "/tokenizer.json"))
assert j["model"]["type"] == "BPE" and j["model"]["vocab"] == v, "the vocab"
assert list(j["model"]["vocab"].values()) == sorted(v.values()), "the vocab is not in id order"
merges = [l for l in open(d + "/merges.txt", encoding="utf-8").read().split("\n")[1:] if l]
assert j["model"]["merges"] == merges, "the merges"
assert j["added_tokens"] == [{"id": eos, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": True, "special": True}], j["added_tokens"]
assert j["pre_tokenizer"]["type"] == "ByteLevel" and j["pre_tokenizer"]["add_prefix_space"] is False
assert j["decoder"]["type"] == "ByteLevel" and j["normalizer"] is None
print("ok")
EOF
if [ $have_node = 1 ]; then
	# HF's tokenizer over the exported tokenizer.json = lmtk's over the run's vocab and merges
	"$TK" --vocab-file run/gpt2-tiny-vocab.json --merge-file run/gpt2-tiny-merges.txt --append-eod --format text <docs.jsonl >ours.txt 2>tk.err
	hf_encode --tokenizer gpt.hf/tokenizer.json --append-eod <docs.jsonl >hf.txt 2>hf.err ||
		fail gpt_hf_encode_runs "$(tail -2 hf.err)"
	[ "$(wc -l <hf.txt)" = 300 ] && same_ids gpt_hf_tokenizer_json_gives_tokenizes_ids_on_300_documents ours.txt hf.txt ||
		fail gpt_hf_tokenizer_json_gives_tokenizes_ids_on_300_documents "$(wc -l <hf.txt) lines"
fi

# --- an existing export: refused without --force (exit 2, naming it), replaced with it ---
touch gpt.hf/stale
expect_rc hf_export_over_an_existing_one_is_refused 2 "$MT" run/ckpt --output gpt.hf --format hf &&
	contains hf_export_refusal_names_force "$T/err" 'gpt\.hf: exists and is not empty.*--force'
[ -e gpt.hf/stale ] && ok refused_export_leaves_the_old_one || fail refused_export_leaves_the_old_one "$(ls gpt.hf)"
# refused before the checkpoint is read: a damaged shard is not what it reports
cp -r run/ckpt damaged && truncate -s 1000 damaged/global_step2/rank_tp00_pp000.safetensors
expect_rc existing_export_is_refused_before_reading 2 "$MT" damaged --output gpt.hf --format hf &&
	contains existing_export_refusal_comes_first "$T/err" 'gpt\.hf: exists and is not empty'
lacks existing_export_refusal_reads_nothing "$T/err" 'truncated|checksum'

expect_rc hf_export_with_force_exits_0 0 "$MT" run/ckpt --output gpt.hf --format hf --force
[ ! -e gpt.hf/stale ] && [ -s gpt.hf/tokenizer.json ] && [ -s gpt.hf/model.safetensors ] &&
	[ -z "$(ls -a | grep '^\.gpt\.hf\.tmp')" ] && ok force_replaces_the_export_whole || fail force_replaces_the_export_whole "$(ls -a gpt.hf .)"
mkdir notexport && echo mine >notexport/notes
expect_rc force_refuses_a_directory_that_is_no_export 2 "$MT" run/ckpt --output notexport --format hf --force &&
	contains force_refusal_says_why "$T/err" 'notexport: exists, is not empty and has no config\.json'
[ "$(cat notexport/notes)" = mine ] && ok force_leaves_a_directory_that_is_no_export || fail force_leaves_a_directory_that_is_no_export "$(ls notexport)"

# --- a tokenizer file changed since training: not copied, said so; no tokenizer.json from it ---
echo "x y" >>run/gpt2-tiny-merges.txt
expect_rc hf_export_with_a_changed_merge_file_exits_0 0 "$MT" run/ckpt --output changed.hf --format hf
[ ! -e changed.hf/merges.txt ] && [ ! -e changed.hf/tokenizer.json ] && cmp -s changed.hf/vocab.json run/gpt2-tiny-vocab.json &&
	ok changed_merge_file_is_not_copied_nor_used || fail changed_merge_file_is_not_copied_nor_used "$(ls changed.hf)"
contains changed_merge_file_is_named "$T/err" "merge-file $T/run/gpt2-tiny-merges\.txt: [0-9]+ bytes, the manifest records [0-9]+: not the file train read; not copied"
# a merges file that train took as it was but no BPE can read: named by line, no tokenizer.json
mkdir badrun
cp "$MEG"/gpt2-tiny-vocab.json "$MEG"/meg-gpt2-openwebtext_text_document.* badrun/
{ head -3 "$MEG/gpt2-tiny-merges.txt"; echo "one two three"; } >badrun/merges.txt
(cd badrun && "$BIN/train" "${COMMON[@]}" --num-layers 1 --hidden-size 32 --num-attention-heads 2 \
	--vocab-file gpt2-tiny-vocab.json --merge-file merges.txt >train.log 2>&1) || fail badrun_trains "$(tail -3 badrun/train.log)"
expect_rc hf_export_with_an_unreadable_merge_file_exits_0 0 "$MT" badrun/ckpt --output bad.hf --format hf &&
	contains unreadable_merge_file_is_named_by_line "$T/err" 'merges\.txt:4: not two tokens separated by one space: no tokenizer\.json written'
[ ! -e bad.hf/tokenizer.json ] && [ -s bad.hf/merges.txt ] && ok unreadable_merge_file_gives_no_tokenizer_json ||
	fail unreadable_merge_file_gives_no_tokenizer_json "$(ls bad.hf)"

# --- BLOOM with a tokenizer directory: its files as they are, their ids in the configs ---
mkdir bloom tokdir
cp "$MEG"/meg-gpt2-openwebtext_text_document.* bloom/
"$PY" - "$MEG/gpt2-tiny-vocab.json" "$MEG/gpt2-tiny-merges.txt" tokdir <<'EOF' || fail bloom_tokenizer_dir "python"
import json, sys
vocab, merges, out = sys.argv[1:]
v = json.load(open(vocab))
m = [l for l in open(merges, encoding="utf-8").read().split("\n")[1:] if l]
n = len(v)
added = [{"id": v["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False, "lstrip": False,
          "rstrip": False, "normalized": False, "special": True},
         {"id": n, "content": "<pad>", "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True},
         {"id": n + 1, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True}]
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
     "pre_tokenizer": bl, "post_processor": bl, "decoder": bl,
     "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
               "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": v, "merges": m}}
json.dump(j, open(out + "/tokenizer.json", "w"), ensure_ascii=False)
json.dump({"bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<pad>"}, open(out + "/special_tokens_map.json", "w"))
EOF
(cd bloom && "$BIN/train" "${COMMON[@]}" --num-layers 1 --hidden-size 48 --num-attention-heads 2 \
	--position-embedding-type alibi --embed-layernorm --tokenizer-type PretrainedFromHF \
	--tokenizer-name-or-path ../tokdir >train.log 2>&1) || fail bloom_trains "$(tail -3 bloom/train.log)"
(cd elsewhere && "$MT" ../bloom/ckpt --output ../bloom.hf --format hf >/dev/null 2>../bloom.err) ||
	fail bloom_hf_export_exits_0 "$(cat bloom.err)"
cmp -s bloom.hf/tokenizer.json tokdir/tokenizer.json && cmp -s bloom.hf/special_tokens_map.json tokdir/special_tokens_map.json &&
	ok bloom_hf_export_has_the_runs_tokenizer_files || fail bloom_hf_export_has_the_runs_tokenizer_files "$(ls bloom.hf | tr '\n' ' ')"
"$PY" - bloom.hf tokdir <<'EOF' >bloom.cfg 2>&1 && ok bloom_hf_configs_name_the_tokenizers_eos_bos_and_pad || fail bloom_hf_configs_name_the_tokenizers_eos_bos_and_pad "$(tail -3 bloom.cfg)"
import json, sys
d, tok = sys.argv[1:]
j = json.load(open(tok + "/tokenizer.json"))
ids = {a["content"]: a["id"] for a in j["added_tokens"]}
want = {"eos_token_id": ids["<|endoftext|>"], "bos_token_id": ids["<s>"], "pad_token_id": ids["<pad>"]}
c = json.load(open(d + "/config.json"))
g = json.load(open(d + "/generation_config.json"))
for k, v in want.items():
    assert c.get(k) == v and g.get(k) == v, (k, c.get(k), g.get(k), v)
assert c["architectures"] == ["BloomForCausalLM"] and c["vocab_size"] == len(j["model"]["vocab"]) + 2, c
t = json.load(open(d + "/tokenizer_config.json"))
assert t["tokenizer_class"] == "PreTrainedTokenizerFast" and t["eos_token"] == "<|endoftext|>" and t["pad_token"] == "<pad>", t
print("ok")
EOF
# the tokenizer.json file alone (no special_tokens_map.json): tokenize's eos rule (</s>, else
# <|endoftext|>, ...), BLOOM's <s> as bos, <pad> as pad; the tokenizer_config.json written
(cd bloom && rm -rf ckpt && "$BIN/train" "${COMMON[@]}" --num-layers 1 --hidden-size 48 --num-attention-heads 2 \
	--position-embedding-type alibi --embed-layernorm --tokenizer-type PretrainedFromHF \
	--tokenizer-name-or-path ../tokdir/tokenizer.json >train2.log 2>&1) || fail bloom_trains_with_a_file "$(tail -3 bloom/train2.log)"
"$MT" bloom/ckpt --output bloomf.hf --format hf 2>bloomf.err || fail bloom_file_hf_export_exits_0 "$(cat bloomf.err)"
"$PY" - bloomf.hf tokdir <<'EOF' >bloomf.cfg 2>&1 && ok bloom_hf_without_a_map_finds_eos_bos_and_pad || fail bloom_hf_without_a_map_finds_eos_bos_and_pad "$(tail -3 bloomf.cfg)"
import json, sys
d, tok = sys.argv[1:]
ids = {a["content"]: a["id"] for a in json.load(open(tok + "/tokenizer.json"))["added_tokens"]}
c = json.load(open(d + "/config.json"))
assert (c["eos_token_id"], c["bos_token_id"], c["pad_token_id"]) == (ids["<|endoftext|>"], ids["<s>"], ids["<pad>"]), c
m = json.load(open(d + "/special_tokens_map.json"))
assert m == {"bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<pad>"}, m
print("ok")
EOF

# --- BERT: BertTokenizerFast's tokenizer.json, read by HF into tokenize's ids ---
# the samples' vocab.txt (its ids are the dataset's), then the documents' 3000 commonest words and
# every character, alone and as a "##" piece, so that WordPiece has real words to split
if "$PY" "$TOP/tests/ref/bert-samples.py" make sent vocab.txt 7 300 uint16 >/dev/null 2>&1 &&
	"$PY" - vocab.txt docs.jsonl <<'EOF'; then
import collections, json, re, sys, unicodedata
vocab, docs = sys.argv[1:]
have = open(vocab, encoding="utf-8").read().split("\n")[:-1]
words, chars = collections.Counter(), set()
for line in open(docs, encoding="utf-8"):
    t = unicodedata.normalize("NFD", json.loads(line)["text"].lower())
    t = "".join(c for c in t if unicodedata.category(c) != "Mn")
    for w in re.findall(r"\w+|[^\w\s]", t):
        words[w] += 1
        chars.update(w)
extra = [w for w, _ in words.most_common(3000)] + sorted(chars) + ["##" + c for c in sorted(chars)]
seen = set(have)
with open(vocab, "a", encoding="utf-8") as f:
    for w in extra:
        if w not in seen:
            seen.add(w)
            f.write(w + "\n")
EOF
	"$BIN/train" --model-type bert --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 32 \
		--max-position-embeddings 40 --micro-batch-size 2 --global-batch-size 4 --lr 1e-2 --data-path sent \
		--vocab-file vocab.txt --tokenizer-type BertWordPieceLowerCase --split 949,50,1 --device cpu --threads 1 \
		--eval-iters 0 --train-iters 2 --save bert --save-interval 2 >bert.log 2>&1 || fail bert_trains "$(tail -3 bert.log)"
	expect_rc bert_hf_export_exits_0 0 "$MT" bert --output bert.hf --format hf
	"$PY" - bert.hf <<'EOF' >bert.cfg 2>&1 && ok bert_hf_export_has_a_wordpiece_tokenizer_json || fail bert_hf_export_has_a_wordpiece_tokenizer_json "$(tail -3 bert.cfg)"
import json, sys
d = sys.argv[1]
toks = open(d + "/vocab.txt", encoding="utf-8").read().split("\n")[:-1]
j = json.load(open(d + "/tokenizer.json"))
assert j["model"]["type"] == "WordPiece" and j["model"]["vocab"] == {t: i for i, t in enumerate(toks)}
assert j["normalizer"]["type"] == "BertNormalizer" and j["normalizer"]["lowercase"] is True
assert j["post_processor"]["special_tokens"]["[CLS]"]["ids"] == [toks.index("[CLS]")]
m = json.load(open(d + "/special_tokens_map.json"))
assert m["pad_token"] == "[PAD]" and m["mask_token"] == "[MASK]", m
print("ok")
EOF
	if [ $have_node = 1 ]; then
		"$TK" --tokenizer-type BertWordPieceLowerCase --vocab-file vocab.txt --format text <docs.jsonl >bert-ours.txt 2>tk.err
		hf_encode --tokenizer bert.hf/tokenizer.json <docs.jsonl >bert-hf.txt 2>hf.err || fail bert_hf_encode_runs "$(tail -2 hf.err)"
		n=$(tr ' ' '\n' <bert-ours.txt | sort -u | wc -l)   # real words, not all [UNK]
		[ "$n" -gt 1000 ] && same_ids bert_hf_tokenizer_json_gives_tokenizes_ids_on_300_documents bert-ours.txt bert-hf.txt ||
			{ [ "$n" -gt 1000 ] || fail bert_hf_tokenizer_json_gives_tokenizes_ids_on_300_documents "only $n distinct ids"; }
	fi
else
	fail bert_dataset "tests/ref/bert-samples.py make"
fi

# --- --help and the man page name --force; the man page lists the export's files ---
"$MT" --help >help.txt 2>&1
contains help_names_force help.txt '^ +--force'
for f in tokenizer.json tokenizer_config.json special_tokens_map.json generation_config.json; do
	grep -q "$f" "$TOP/man/man1/ckpt-merge-tp.1" || missing_man="${missing_man:-} $f"
done
[ -z "${missing_man:-}" ] && ok man_page_lists_the_exports_files || fail man_page_lists_the_exports_files "missing:$missing_man"
