#!/usr/bin/env bash
# ckpt-merge-tp --from hf: a Hugging Face model directory becomes an lmtk checkpoint at iteration
# 0 that train --load --finetune continues.
# Round trip: GPT-2, BLOOM and BERT models that train wrote, exported (--format hf) and imported
# back, have the same weights bit for bit - at TP 1 PP 1, and imported at TP 2 PP 2 and merged
# back - the padded vocabulary zeros, Adam's moments zero, the model flags and the tokenizer
# recorded; a --finetune run from the original and from the import sees the same first loss.
# Independently written models (tests/ref/hf-models.py: random weights, config.json as
# transformers spells it, safetensors written with struct + json, sharded with an index,
# pytorch_model.bin by torch.save with GPT-2's buffers and a tied lm_head.weight; F32, BF16 and
# F16; the base models' names without "transformer.") import, and train's first loss on a batch
# equals hf-models.py's forward as transformers computes it on the same tokens; a BERT's outputs
# equal HF's MegatronBert forward (tests/ref/hf-megatron-bert.py).  Bad input - an architecture
# lmtk cannot hold, a missing tensor, a shape config.json does not make, hostile config numbers,
# a link out of the directory, an untied output layer - is refused with exit 2 naming the file
# and leaves no output.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
MT=$BIN/ckpt-merge-tp
HFM=$TOP/tests/ref/hf-models.py
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT
if ! "$PY" -c 'import numpy' 2>/dev/null; then
	skip ckpt_hf_import "python3-numpy is not installed (make deps installs it)"
	exit 0
fi
have_torch=1
"$PY" -c 'import torch' 2>/dev/null || have_torch=0
no_output() { [ ! -e "$1" ] && ! ls -a "$(dirname "$1")" | grep -q "^\.$(basename "$1")\.tmp"; }
cp "$MEG"/meg-gpt2-openwebtext_text_document.* . || exit 3

# same_weights NAME ORIG_STEP NEW_STEP: every parameter equal, bit for bit (the word embeddings'
# and BERT's LM-head bias's real rows; the new padded rows zeros), the new moments zeros, the
# model's shape fields the same
cat >same.py <<'EOF'
import json, struct, sys
import numpy as np
def load(step):
    out = {}
    for f in json.load(open(step + "/manifest.json"))["files"]:
        b = open(step + "/" + f, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
        h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
        for k, v in h.items():
            a = np.frombuffer(b, "<f4", int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0])
            out.setdefault(k, a.reshape(v["shape"]))   # the tied copy on the last stage: the same
    return out
a, b = sys.argv[1:3]
ma, mb = (json.load(open(s + "/manifest.json"))["model"] for s in (a, b))
for k in ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "vocab_size",
          "max_position_embeddings", "position_embedding_type", "embed_layernorm",
          "layernorm_epsilon", "model_type", "num_tokentypes", "binary_head", "openai_gelu",
          "apply_residual_connection_post_layernorm"):
    assert ma.get(k) == mb.get(k), (k, ma.get(k), mb.get(k))
V = ma["vocab_size"]
wa, wb = load(a), load(b)
assert {k for k in wa if not k.startswith("exp_avg")} == {k for k in wb if not k.startswith("exp_avg")}, \
    sorted(set(wa) ^ set(wb))
for k, x in wa.items():
    if k.startswith("exp_avg"):
        continue
    y = wb[k]
    if k in ("word_embeddings.weight", "lm_head.bias"):
        assert not y[V:].any(), k + ": padded rows not zero"
        x, y = x[:V], y[:V]
    assert x.shape == y.shape, (k, x.shape, y.shape)
    assert np.array_equal(x.view(np.uint32), y.view(np.uint32)), (k, float(np.abs(x - y).max()))
assert not any(v.any() for k, v in wb.items() if k.startswith("exp_avg")), "moments not zero"
print("ok", len(wa))
EOF
same_weights() {
	"$PY" same.py "$2" "$3" >"$1.same" 2>&1 && ok "$1" || fail "$1" "$(tail -2 "$1.same")"
}

# A dataset whose every training sample is the same 17 tokens (documents of a 16-token pattern
# repeated: every sample starts at a multiple of --seq-length 16), so a first loss does not
# depend on which samples the data position draws
"$PY" - <<'EOF' >rep.tok && "$BIN/mkindex" --output-prefix rep --vocab-size 5000 <rep.tok 2>mk.err ||
import random, struct, sys
random.seed(5)
Q = [random.randrange(4999) for _ in range(16)]
open("rep.q", "w").write(" ".join(map(str, Q)))
o = sys.stdout.buffer
o.write(b"LMTKTOK1" + struct.pack("<IIIII", 1, 5000, 0xffffffff, 1, 4) + b"text")
for d in range(64):
    o.write(struct.pack("<II", 0, 64) + struct.pack("<64I", *(Q * 4)))
o.write(struct.pack("<II", 0xffffffff, 0))
EOF
	{ fail repeated_dataset "$(cat mk.err)"; exit 0; }
FT=(--seq-length 16 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 2 --lr 1e-4
	--train-iters 1 --data-path rep_text_document --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1 --hidden-dropout 0 --attention-dropout 0 --finetune)
first_loss() { grep -o 'lm loss: [^ ]*' "$1" | head -1 | sed 's/lm loss: //'; }

# --- round trip: lmtk -> HF -> lmtk ---
COMMON=(--seq-length 32 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4
	--lr 1e-2 --train-iters 2 --data-path meg-gpt2-openwebtext_text_document --split 949,50,1
	--device cpu --threads 1 --eval-iters 0 --save-interval 2 --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt")
GPT=(--num-layers 2 --hidden-size 64 --num-attention-heads 4)
BLOOM=(--num-layers 2 --hidden-size 96 --num-attention-heads 6 --position-embedding-type alibi --embed-layernorm)
"$BIN/train" "${COMMON[@]}" "${GPT[@]}" --save gpt >gpt.log 2>&1 || fail gpt_trains "$(tail -3 gpt.log)"
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --save bloom >bloom.log 2>&1 || fail bloom_trains "$(tail -3 bloom.log)"
for m in gpt bloom; do
	"$MT" $m --output $m.hf --format hf 2>$m.hf.err || fail "${m}_exports" "$(cat $m.hf.err)"
	expect_rc "${m}_hf_import_exits_0" 0 "$MT" --from hf --input $m.hf --output $m.back
	contains "${m}_hf_import_says_what_it_wrote" "$T/err" "^ckpt-merge-tp: $m\.hf \(Hugging Face (GPT2LMHeadModel|BloomForCausalLM), .*\) -> $m\.back/global_step0 \(TP=1 PP=1, vocabulary 5000 padded to 5120\)"
	same_weights "${m}_lmtk_hf_lmtk_has_the_same_weights" $m/global_step2 $m.back/global_step0
	expect_rc "${m}_hf_import_at_tp2_pp2_exits_0" 0 "$MT" --from hf $m.hf --output $m.b22 --target-tp 2 --target-pp 2
	ls $m.b22/global_step0/rank_tp01_pp001.safetensors >/dev/null 2>&1 && "$MT" $m.b22 --output $m.b22m 2>/dev/null
	same_weights "${m}_hf_import_at_tp2_pp2_merges_back_to_the_same_weights" $m/global_step2 $m.b22m/global_step0
	"$PY" - $m.back/global_step0 "$T/$m.hf" <<'EOF' >$m.man 2>&1 && ok "${m}_hf_import_manifest_records_iteration_0_and_the_tokenizer" || fail "${m}_hf_import_manifest_records_iteration_0_and_the_tokenizer" "$(tail -2 $m.man)"
import hashlib, json, os, sys
step, hf = sys.argv[1:]
m = json.load(open(step + "/manifest.json"))
assert m["iteration"] == 0 and m["consumed_samples"] == 0 and m["optimizer"]["step"] == 0, m
assert m["layout"] == {"tp": 1, "pp": 1, "dp": 1}, m["layout"]
assert m["converted_from"]["format"] == "hf" and m["converted_from"]["path"] == os.path.realpath(hf)
t = m["tokenizer"]
assert t["type"] == "GPT2BPETokenizer", t
got = {f["role"]: f for f in t["files"]}
for role, name in (("vocab-file", "vocab.json"), ("merge-file", "merges.txt")):
    p = os.path.realpath(hf + "/" + name)
    assert got[role]["path"] == p and got[role]["sha256"] == hashlib.sha256(open(p, "rb").read()).hexdigest(), got
print("ok")
EOF
	# the first loss of a --finetune run from the original and from the import
	ARCH=("${GPT[@]}"); [ $m = bloom ] && ARCH=("${BLOOM[@]}")
	"$BIN/train" "${FT[@]}" "${ARCH[@]}" --vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" --load $m >$m.ft0 2>&1
	"$BIN/train" "${FT[@]}" "${ARCH[@]}" --vocab-file $m.hf/vocab.json --merge-file $m.hf/merges.txt --load $m.back >$m.ft1 2>&1
	l0=$(first_loss $m.ft0) l1=$(first_loss $m.ft1)
	[ -n "$l0" ] && [ "$l0" = "$l1" ] && ok "${m}_finetune_from_the_import_sees_the_originals_first_loss" ||
		fail "${m}_finetune_from_the_import_sees_the_originals_first_loss" "original $l0, import $l1: $(grep train: $m.ft1 | tail -2)"
done

# BERT: with the binary head and two token types (--openai-gelu: exported exactly), and without
# either (exported as MegatronBertForMaskedLM with one zero token-type row)
if "$PY" "$TOP/tests/ref/bert-samples.py" make sent vocab.txt 7 300 uint16 >/dev/null 2>&1; then
	BERT=(--model-type bert --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
		--max-position-embeddings 40 --micro-batch-size 2 --global-batch-size 4 --lr 1e-2
		--data-path sent --vocab-file vocab.txt --split 949,50,1 --device cpu --threads 1
		--eval-iters 0 --save-interval 2 --train-iters 2)
	"$BIN/train" "${BERT[@]}" --tokenizer-type BertWordPieceLowerCase --openai-gelu --save bert >bert.log 2>&1 ||
		fail bert_trains "$(tail -3 bert.log)"
	"$BIN/train" "${BERT[@]}" --tokenizer-type BertWordPieceCase --bert-no-binary-head --num-tokentypes 0 \
		--save nobin >nobin.log 2>&1 || fail nobin_trains "$(tail -3 nobin.log)"
	for m in bert nobin; do
		"$MT" $m --output $m.hf --format hf 2>$m.hf.err || fail "${m}_exports" "$(cat $m.hf.err)"
		expect_rc "${m}_hf_import_exits_0" 0 "$MT" --from hf $m.hf --output $m.back
		same_weights "${m}_lmtk_hf_lmtk_has_the_same_weights" $m/global_step2 $m.back/global_step0
		"$MT" --from hf $m.hf --output $m.b22 --target-tp 2 --target-pp 2 2>/dev/null && "$MT" $m.b22 --output $m.b22m 2>/dev/null
		same_weights "${m}_hf_import_at_tp2_pp2_merges_back_to_the_same_weights" $m/global_step2 $m.b22m/global_step0
	done
	"$PY" -c 'import json, sys; t = json.load(open(sys.argv[1]))["tokenizer"]; assert t["type"] == "BertWordPieceCase" and t["files"][0]["role"] == "vocab-file", t' \
		nobin.back/global_step0/manifest.json 2>/dev/null && ok bert_hf_import_records_vocab_txt_and_its_case ||
		fail bert_hf_import_records_vocab_txt_and_its_case "$(grep -o '"tokenizer".*' nobin.back/global_step0/manifest.json | head -c 300)"
else
	fail bert_dataset "bert-samples.py make"
fi

# --- models written independently: train's first loss = transformers' forward ---
if [ $have_torch = 0 ]; then
	skip hf_import_of_independent_models "python3-torch is not installed (make deps installs it): tests/ref/hf-models.py writes them with torch.save and runs their forward in torch"
else
	# NAME CLASS ARGS...: written by hf-models.py, GPT-2's tiny tokenizer beside
	for spec in "g_st gpt2 --format st" "g_sh gpt2 --format sharded --dtype bf16" \
		"g_bin gpt2 --format bin --dtype f16 --no-prefix" "b_st bloom --format st --dtype bf16 --heads 4" \
		"b_bin bloom --format bin --no-prefix --heads 4" "b_sh bloom --format sharded --dtype f16 --heads 4"; do
		set -- $spec
		n=$1 cls=$2; shift 2
		"$PY" "$HFM" write $cls $n "$@" >$n.w 2>&1 || { fail "${n}_written" "$(tail -2 $n.w)"; continue; }
		cp "$MEG/gpt2-tiny-vocab.json" $n/vocab.json && cp "$MEG/gpt2-tiny-merges.txt" $n/merges.txt
		expect_rc "${n}_hf_import_exits_0" 0 "$MT" --from hf --input $n --output $n.ck
		ARCH=(--num-layers 2 --hidden-size 64 --num-attention-heads 4)
		[ $cls = bloom ] && ARCH+=(--position-embedding-type alibi --embed-layernorm)
		"$BIN/train" "${FT[@]}" "${ARCH[@]}" --vocab-file $n/vocab.json --merge-file $n/merges.txt --load $n.ck >$n.ft 2>&1
		got=$(first_loss $n.ft)
		want=$("$PY" "$HFM" loss $n $(cat rep.q) 2>$n.ref.err)
		if [ -n "$got" ] && [ -n "$want" ] && "$PY" -c 'import sys; g, w = map(float, sys.argv[1:]); sys.exit(abs(g - w) > 2e-6 * abs(w))' "$got" "$want"; then
			ok "${n}_finetune_first_loss_is_the_hf_forwards"
		else
			fail "${n}_finetune_first_loss_is_the_hf_forwards" "train $got, HF forward $want: $(grep -h 'train:\|Error' $n.ft $n.ref.err | tail -2)"
		fi
		"$MT" --from hf $n --output $n.c22 --target-tp 2 --target-pp 2 2>/dev/null && "$MT" $n.c22 --output $n.c22m 2>/dev/null
		same_weights "${n}_hf_import_at_tp2_pp2_is_the_tp1_import" $n.ck/global_step0 $n.c22m/global_step0
	done
	# BERT: HF's MegatronBert forward over the files = Megatron's BERT over the import
	"$PY" "$HFM" write bert be_st --vocab 300 --positions 40 >/dev/null 2>&1 &&
		"$PY" "$HFM" write bert be_sh --vocab 300 --positions 40 --format sharded --tokentypes 3 >/dev/null 2>&1 ||
		fail bert_models_written "hf-models.py write bert"
	for n in be_st be_sh; do
		expect_rc "${n}_hf_import_exits_0" 0 "$MT" --from hf $n --output $n.ck
		"$PY" "$TOP/tests/ref/hf-megatron-bert.py" --hf $n --ckpt $n.ck/global_step0 >$n.cmp 2>&1 &&
			ok "${n}_import_gives_hfs_megatron_bert_outputs" || fail "${n}_import_gives_hfs_megatron_bert_outputs" "$(tail -3 $n.cmp)"
	done
	# --make-vocab-size-divisible-by: Megatron's padding, times the target TP
	"$MT" --from hf g_st --output g_st.d64 --make-vocab-size-divisible-by 64 2>/dev/null &&
		"$MT" --from hf g_st --output g_st.d64tp2 --make-vocab-size-divisible-by 64 --target-tp 2 2>/dev/null
	p1=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["padded_vocab_size"])' g_st.d64/global_step0/manifest.json 2>/dev/null)
	p2=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["padded_vocab_size"])' g_st.d64tp2/global_step0/manifest.json 2>/dev/null)
	[ "$p1" = 5056 ] && [ "$p2" = 5120 ] && ok make_vocab_size_divisible_by_pads_as_megatron ||
		fail make_vocab_size_divisible_by_pads_as_megatron "TP 1: $p1 (want 5056), TP 2: $p2 (want 5120)"

	# --- bad input: exit 2, named, nothing written ---
	bad() {   # bad NAME PATTERN DIR [ARGS]: refused with exit 2, the message matching, no output
		local n=$1 pat=$2 d=$3; shift 3
		expect_rc "$n" 2 "$MT" --from hf "$d" --output "$d.out" "$@" && contains "${n}_says_why" "$T/err" "$pat"
		no_output "$d.out" || fail "${n}_leaves_no_output" "$(ls -a "$d.out" 2>&1 | head -3)"
	}
	edit_cfg() {   # edit_cfg DIR PYTHON-STATEMENTS (on c, the config)
		cp -r g_st "$1" && "$PY" -c "import json, sys; c = json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[1], 'w'))" "$1/config.json"
	}
	edit_cfg arch 'c["architectures"] = ["LlamaForCausalLM"]; c["model_type"] = "llama"'
	bad unknown_architecture_is_refused 'arch/config\.json: architecture LlamaForCausalLM is not one lmtk holds: .*GPT2LMHeadModel, BloomForCausalLM' arch
	edit_cfg shape 'c["n_inner"] = 200'
	bad shape_config_does_not_make_is_refused 'shape/model\.safetensors: tensor transformer\.h\.0\.mlp\.c_fc\.weight is \[64, 256\]; config\.json makes it \[64, 200\]' shape
	i=0
	for h in 'c["n_layer"] = 1000000000' 'c["n_embd"] = -64' 'c["n_head"] = "4"' 'c["vocab_size"] = 1e300' \
		'c["n_positions"] = 2**40' 'c["layer_norm_epsilon"] = 5.0' 'c["n_inner"] = 2**31'; do
		i=$((i + 1))
		edit_cfg hostile$i "$h"
		key=$(echo "$h" | sed 's/c\["\([a-z_]*\)".*/\1/')
		bad hostile_config_number_${key}_is_refused "hostile$i/config\.json: $key is .*: not (an integer|a number) from" hostile$i
	done
	edit_cfg heads 'c["n_head"] = 5'
	bad heads_not_dividing_the_hidden_size_are_refused 'heads/config\.json: 5 heads do not divide the hidden size 64' heads
	cp -r g_st missing && "$PY" - missing/model.safetensors <<'EOF' || fail missing_setup python
import json, struct, sys
p = sys.argv[1]; b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
del h["transformer.h.1.ln_2.bias"]
j = json.dumps(h).encode(); j += b" " * (-len(j) % 8)
open(p, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
EOF
	bad missing_tensor_is_refused 'missing: no tensor transformer\.h\.1\.ln_2\.bias, which GPT2LMHeadModel has' missing
	# a link out of the directory: the weights, a shard the index names, a tokenizer file
	mkdir outside linked && cp g_st/model.safetensors outside/ && cp g_st/config.json linked/ &&
		ln -s ../outside/model.safetensors linked/model.safetensors
	bad link_out_of_the_directory_is_refused 'linked/model\.safetensors: resolves to .*/outside/model\.safetensors, outside linked: a link out' linked
	cp -r g_sh escape && "$PY" -c 'import json, sys; p = sys.argv[1]; j = json.load(open(p)); k = next(iter(j["weight_map"])); j["weight_map"][k] = "../g_st/model.safetensors"; json.dump(j, open(p, "w"))' escape/model.safetensors.index.json
	bad index_naming_a_file_outside_is_refused 'escape/model\.safetensors\.index\.json: weight_map\..* is not a file name in the directory' escape
	cp -r g_st toklink && rm toklink/vocab.json && ln -s /etc/passwd toklink/vocab.json
	bad tokenizer_link_out_is_refused 'toklink/vocab\.json: resolves to /etc/passwd, outside toklink' toklink
	# untied: an lm_head.weight that is not the word embeddings
	"$PY" - <<'EOF' && bad untied_output_layer_is_refused 'untied/pytorch_model\.bin: lm_head\.weight differs from wte\.weight .*cannot hold another' untied || fail untied_setup python
import shutil, torch
shutil.copytree("g_bin", "untied")
sd = torch.load("untied/pytorch_model.bin")
sd["lm_head.weight"] = sd["wte.weight"].clone(); sd["lm_head.weight"][3, 5] += 1
torch.save(sd, "untied/pytorch_model.bin")
EOF
	mkdir noweights && cp g_st/config.json noweights/
	bad no_weights_are_refused 'noweights: no model\.safetensors, .*pytorch_model\.bin' noweights
	mkdir noconfig && cp g_st/model.safetensors noconfig/
	bad no_config_is_refused 'noconfig/config\.json: not there: not a Hugging Face model directory' noconfig
	cp -r g_st trunc && truncate -s 5000 trunc/model.safetensors
	bad truncated_safetensors_is_refused 'trunc/model\.safetensors' trunc
fi
expect_rc make_vocab_size_divisible_by_goes_with_from_hf 2 "$MT" gpt --output x --make-vocab-size-divisible-by 64
