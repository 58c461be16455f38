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
# Hugging Face tokenizers keeps model.vocab's id for an added token the vocabulary has and numbers
# the others after the vocabulary in file order, whatever id the file gives them: a file that
# says otherwise is refused (these used to give the id in the file, which HF never gives)
"$PY" - <<'EOF2'
import json
vocab = {chr(c): i for i, c in enumerate(range(ord("a"), ord("z") + 1))}
def at(content, id): return {"id": id, "content": content, "special": True, "normalized": False}
def save(name, added, v=vocab):
    json.dump({"model": {"type": "BPE", "vocab": v, "merges": []}, "added_tokens": added}, open(name, "w"))
save("collide.json", [at("<x>", 3)])                      # 3 is 'd'
save("relabel.json", [at("d", 5)])                        # 'd' is 3 in model.vocab
save("swapped.json", [at("<x>", 27), at("<y>", 26)])      # HF: <x> 26, <y> 27
save("hfids.json", [at("<x>", 26), at("d", 3), at("<y>", 27), at("<x>", 26)])
save("hole.json", [], dict(vocab, ab=100))
EOF2
quick 2 added_token_on_a_vocab_id_refused $TK --tokenizer-name-or-path collide.json
contains added_token_on_a_vocab_id_named "$T/err" "^tokenize: collide.json: added token '<x>' has id 3, but Hugging Face tokenizers numbers it 26"
quick 2 added_token_relabelled_refused $TK --tokenizer-name-or-path relabel.json
contains added_token_relabelled_named "$T/err" "added token 'd' has id 5, but model.vocab gives it id 3$"
quick 2 added_tokens_out_of_order_refused $TK --tokenizer-name-or-path swapped.json
contains added_tokens_out_of_order_named "$T/err" "added token '<x>' has id 27, but Hugging Face tokenizers numbers it 26"
echo '{"text": "a<x>d<y>"}' >hfids.jsonl
quick 0 added_tokens_with_hf_ids_accepted $TK --tokenizer-name-or-path hfids.json --format text hfids.jsonl
check added_tokens_give_hf_ids [ "$(cat "$T/out")" = "0 26 3 27" ]
quick 2 hf_vocab_hole_refused $TK --tokenizer-name-or-path hole.json
contains hf_vocab_hole_named "$T/err" "token 'ab' has id 100, but the vocabulary has 27 tokens: ids run from 0 to 26$"

# --- an empty vocabulary ---
echo '{}' >empty.json
quick 2 empty_vocab_refused $TK --vocab-file empty.json --merge-file merges.txt
contains empty_vocab_named "$T/err" '^tokenize: empty.json: the vocabulary is empty$'
echo '{"model": {"type": "BPE", "vocab": {}, "merges": []}}' >empty-hf.json
quick 2 empty_hf_vocab_refused $TK --tokenizer-name-or-path empty-hf.json
contains empty_hf_vocab_named "$T/err" '^tokenize: empty-hf.json: model.vocab is empty$'

# --- sizes read from files are checked against the file before anything is sized by them ---
MEG=$(tiny_dataset) || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin data.bin && cp "$MEG"/meg-gpt2-openwebtext_text_document.idx data.idx
"$PY" - <<'EOF'
import struct, shutil
b = bytearray(open("data.idx", "rb").read())
for name, off in (("hugen", 18), ("huged", 26)):   # N and D of the MMIDIDX header
    c = bytearray(b); struct.pack_into("<Q", c, off, 1 << 60)
    open(name + ".idx", "wb").write(c); shutil.copy("data.bin", name + ".bin")
EOF
M=(--num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 16 --max-position-embeddings 16
	--micro-batch-size 1 --global-batch-size 1 --lr 1e-3 --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --device cpu --eval-iters 0 --data-cache-path "$T")
quick 2 idx_huge_count_refused_by_train "$BIN/train" "${M[@]}" --train-iters 1 --data-path hugen
contains idx_huge_count_named "$T/err" 'hugen.idx: N = 1152921504606846976 and D = 1001 are impossibly large'
quick 2 idx_huge_doc_count_refused_by_mkindex "$BIN/mkindex" info huged
contains idx_huge_doc_count_named "$T/err" 'huged.idx: N = 1000 and D = 1152921504606846976 are impossibly large'
# the .bin's name for the prefix trains on the pair; the prefix with a key's dataset beside it is named
cp data.bin d_text_document.bin && cp data.idx d_text_document.idx
quick 0 data_path_takes_the_bin_file "$BIN/train" "${M[@]}" --train-iters 1 --data-path d_text_document.bin
quick 2 data_path_output_prefix_refused "$BIN/train" "${M[@]}" --train-iters 1 --data-path d
contains data_path_output_prefix_suggests "$T/err" 'd\.idx: No such file or directory; did you mean d_text_document\?'
# a checkpoint shard whose safetensors header lies: its length, a tensor's offsets, a shape whose
# element count wraps 64 bits (2^31 x 2^31 float32 = 2^64 bytes = 0 after wrapping)
"$BIN/train" "${M[@]}" --train-iters 2 --data-path data --save ck --save-interval 2 >ck.out 2>&1 ||
	fail checkpoint_for_probes "$(tail -2 ck.out)"
"$PY" - <<'EOF'
import json, os, shutil, struct
d = "ck/global_step2"; f = "rank_tp00_pp000.safetensors"
b = open(os.path.join(d, f), "rb").read()
n = struct.unpack_from("<Q", b, 0)[0]; h = json.loads(b[8:8 + n])
k = next(x for x in h if x != "__metadata__")
def header(hh):
    j = json.dumps(hh).encode(); j += b" " * ((8 - len(j) % 8) % 8)
    return struct.pack("<Q", len(j)) + j + b[8 + n:]
cases = {"hdrlen": struct.pack("<Q", 1 << 62) + b[8:]}
h2 = json.loads(json.dumps(h)); o = h2[k]["data_offsets"][0]; h2[k]["data_offsets"] = [o, 1 << 60]; cases["offsets"] = header(h2)
h3 = json.loads(json.dumps(h)); o = h3[k]["data_offsets"][0]; h3[k]["shape"] = [1 << 31, 1 << 31]; h3[k]["data_offsets"] = [o, o]
cases["wrap"] = header(h3)
for name, data in cases.items():
    shutil.rmtree("ck_" + name, ignore_errors=True); shutil.copytree("ck", "ck_" + name)
    open(os.path.join("ck_" + name, "global_step2", f), "wb").write(data)
EOF
for c in hdrlen offsets wrap; do
	quick 2 "safetensors_${c}_refused_by_ckpt_merge_tp" "$BIN/ckpt-merge-tp" --input ck_$c/global_step2 --output out_$c
	contains "safetensors_${c}_names_the_shard" "$T/err" "ck_$c/global_step2/rank_tp00_pp000.safetensors: "
	check "safetensors_${c}_writes_nothing" [ ! -e out_$c ]
done
contains safetensors_wrap_named "$T/err" "its shape has more elements than the file's [0-9]+ data bytes"
quick 2 safetensors_wrap_refused_by_train_load "$BIN/train" "${M[@]}" --train-iters 3 --data-path data --load ck_wrap
contains safetensors_wrap_load_named "$T/err" "ck_wrap/global_step2/rank_tp00_pp000.safetensors: .*its shape has more elements"
# a token stream whose document claims 2^32-1 ids and then ends (found by make fuzz: the reader
# used to allocate the 16 GB first); with 1 GB of address space it must still say "truncated"
printf 'LMTKTOK1\1\0\0\0\x88\x13\0\0\x87\x13\0\0\1\0\0\0\4\0\0\0text\0\0\0\0\xff\xff\xff\xff\1\0\0\0' >huge.tok
quick 2 token_stream_huge_length_refused sh -c "ulimit -v 1000000; exec '$BIN/mkindex' --output-prefix hugetok < huge.tok"
contains token_stream_huge_length_says_truncated "$T/err" '^mkindex: <stdin>: truncated token stream at byte 44 \(in a document\)'

# a manifest whose model is larger than its shards could hold: refused before tables are sized
"$PY" - <<'EOF'
import json, shutil
m = json.load(open("ck/global_step2/manifest.json"))
m["model"]["num_layers"] = 1 << 30
shutil.rmtree("ck_layers", ignore_errors=True); shutil.copytree("ck", "ck_layers")
json.dump(m, open("ck_layers/global_step2/manifest.json", "w"))
EOF
quick 2 manifest_huge_layers_refused_by_ckpt_merge_tp "$BIN/ckpt-merge-tp" --input ck_layers/global_step2 --output out_layers
contains manifest_huge_layers_named "$T/err" 'ck_layers/global_step2/manifest.json: model of 1073741824 layers and sizes up to 5120 cannot be held by the [0-9]+ bytes of its shards'
quick 2 manifest_huge_layers_refused_by_ckpt_sync_ln "$BIN/ckpt-sync-ln" ck_layers/global_step2 --check
rm -rf "$T"
