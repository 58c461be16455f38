#!/usr/bin/env bash
# The checkpoint tools on BERT checkpoints that train --model-type bert writes (a sentence
# dataset and vocab.txt from tests/ref/bert-samples.py): ckpt-merge-tp re-splits them - TP 2 ->
# 1 -> 2 and TP 2 x PP 2 -> 1 -> 2 give train's own files byte for byte, train resumes from a
# merged one; ckpt-sync-ln --check compares their replicated tensors (the pooler, the LM head's
# dense and layer norm, the binary head beside GPT's) and --fix repairs a drifted one; a model
# type the tools do not know is refused (exit 2, naming it and the file).  The HF export
# (MegatronBertForPreTraining, MegatronBertForMaskedLM without the binary head) gives the
# checkpoint's prediction and seq_relationship logits: tests/ref/hf-megatron-bert.py runs HF's
# MegatronBert forward (written from transformers' modeling code) over the exported files and
# compares with tests/ref/bert-ref.py's Megatron BERT over the checkpoint - exactly with
# --openai-gelu, and within the documented GeLU difference without; four broken exports
# (q/k/v not de-interleaved, the bias dropped, token types swapped, the other GeLU) are caught.
# A post-LN BERT is refused with exit 2, saying why.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
MT=$BIN/ckpt-merge-tp
SL=$BIN/ckpt-sync-ln
HFREF=$TOP/tests/ref/hf-megatron-bert.py
cd "$T" || exit 3
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT
if ! "$PY" -c 'import numpy' 2>/dev/null; then
	skip ckpt_bert "python3-numpy is not installed (make deps installs it)"
	exit 0
fi
"$PY" "$TOP/tests/ref/bert-samples.py" make sent vocab.txt 7 300 uint16 >/dev/null 2>&1 ||
	{ fail ckpt_bert_dataset "bert-samples.py make"; exit 0; }

COMMON=(--model-type bert --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
	--max-position-embeddings 40 --micro-batch-size 2 --global-batch-size 4 --lr 1e-2
	--data-path sent --vocab-file vocab.txt --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1 --save-interval 4 --train-iters 4)
trn() { local out=$1; shift; "$BIN/train" "${COMMON[@]}" --save "$out" "$@" >"$out.log" 2>&1 ||
	fail "${out}_trains" "$(tail -3 "$out.log")"; }
same_step() {   # same_step NAME DIR_A DIR_B: the same files (the reader lock aside), byte for byte
	local f
	[ "$(ls "$2")" = "$(ls "$3")" ] && [ -s "$2/manifest.json" ] ||
		{ fail "$1" "files: $(ls "$2" | tr '\n' ' ') vs $(ls "$3" | tr '\n' ' ')"; return; }
	for f in "$2"/*; do
		cmp -s "$f" "$3/${f##*/}" || { fail "$1" "${f##*/} differs"; return; }
	done
	ok "$1"
}
trn bert --tokenizer-type BertWordPieceLowerCase --openai-gelu
trn bertd --tokenizer-type BertWordPieceLowerCase
trn nobin --tokenizer-type BertWordPieceCase --bert-no-binary-head --num-tokentypes 0
trn postln --tokenizer-type BertWordPieceLowerCase --apply-residual-connection-post-layernorm

# --- re-splitting ---
"$MT" bert --output bert.tp2 --target-tp 2 2>err1 && "$MT" bert.tp2 --output bert.tp1 2>>err1
same_step bert_tp1_to_tp2_to_tp1_is_bit_exact bert/global_step4 bert.tp1/global_step4
"$PY" - bert/global_step4 bert.tp2/global_step4 <<'EOF' >split.out 2>&1 && ok bert_tp2_gives_each_rank_megatrons_slices || fail bert_tp2_gives_each_rank_megatrons_slices "$(tail -3 split.out)"
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: np.frombuffer(b, "<f4", int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0])
            .reshape(v["shape"]) for k, v in h.items()}
full = load(sys.argv[1] + "/rank_tp00_pp000.safetensors")
r0 = load(sys.argv[2] + "/rank_tp00_pp000.safetensors")
r1 = load(sys.argv[2] + "/rank_tp01_pp000.safetensors")
assert set(full) == set(r0) == set(r1)
vocab = ("word_embeddings.weight", "lm_head.bias", "query_key_value.weight", "query_key_value.bias",
         "dense_h_to_4h.weight", "dense_h_to_4h.bias")
row = ("attention.dense.weight", "dense_4h_to_h.weight")
seen = set()
for k, f in full.items():
    n = k.split(".", 1)[1] if k.startswith("exp_avg") else k
    if n.endswith(vocab):
        h = f.shape[0] // 2
        assert (r0[k] == f[:h]).all() and (r1[k] == f[h:]).all(), k
    elif n.endswith(row):
        h = f.shape[1] // 2
        assert (r0[k] == f[:, :h]).all() and (r1[k] == f[:, h:]).all(), k
    else:
        assert (r0[k] == f).all() and (r1[k] == f).all(), k
        seen.add(n)
for n in ("pooler.dense.weight", "lm_head.dense.weight", "lm_head.layernorm.bias",
          "binary_head.weight", "tokentype_embeddings.weight"):
    assert n in seen, n
print("ok", len(full))
EOF

have_mpi=
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	have_mpi=1
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	mpirun --oversubscribe -np 2 "$BIN/train" "${COMMON[@]}" --tokenizer-type BertWordPieceLowerCase \
		--tensor-model-parallel-size 2 --save tp2 >tp2.log 2>&1 || fail tp2_trains "$(tail -3 tp2.log)"
	mpirun --oversubscribe -np 4 "$BIN/train" "${COMMON[@]}" --tokenizer-type BertWordPieceLowerCase \
		--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --save tp2pp2 >tp2pp2.log 2>&1 ||
		fail tp2pp2_trains "$(tail -3 tp2pp2.log)"
	"$MT" tp2 --output tp2.m1 2>err2 && "$MT" tp2.m1 --output tp2.m2 --target-tp 2 2>>err2
	same_step bert_trains_tp2_to_tp1_to_tp2_is_bit_exact tp2/global_step4 tp2.m2/global_step4
	"$MT" tp2pp2 --output tp2pp2.m1 2>err3 &&
		"$MT" tp2pp2.m1 --output tp2pp2.m2 --target-tp 2 --target-pp 2 2>>err3
	same_step bert_trains_tp2_pp2_to_tp1_to_tp2_pp2_is_bit_exact tp2pp2/global_step4 tp2pp2.m2/global_step4
	"$PY" - tp2pp2/global_step4 <<'EOF' >pp.out 2>&1 && ok bert_pp2_last_stage_holds_the_heads_and_tied_embeddings || fail bert_pp2_last_stage_holds_the_heads_and_tied_embeddings "$(tail -3 pp.out)"
import json, struct, sys
def names(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    return {k for k in json.loads(b[8:8 + n]) if k != "__metadata__" and not k.startswith("exp_avg")}
s0 = names(sys.argv[1] + "/rank_tp01_pp000.safetensors")
s1 = names(sys.argv[1] + "/rank_tp01_pp001.safetensors")
assert {"word_embeddings.weight", "position_embeddings.weight", "tokentype_embeddings.weight"} <= s0, s0
assert not any(k.startswith(("lm_head", "pooler", "binary_head", "final_")) for k in s0), s0
assert {"lm_head.bias", "lm_head.dense.weight", "pooler.dense.bias", "binary_head.weight",
        "final_layernorm.weight", "word_embeddings.weight"} <= s1, s1
print("ok")
EOF
	# train resumes from the merged TP=1 checkpoint (the layout is train's own)
	"$BIN/train" "${COMMON[@]}" --tokenizer-type BertWordPieceLowerCase --train-iters 5 \
		--use-checkpoint-lr-scheduler --load tp2.m1 --save resumed >resumed.log 2>&1 &&
		grep -q "resumed from tp2.m1/global_step4: iteration 4" resumed.log &&
		grep -q "^ iteration        5/" resumed.log && ok bert_train_resumes_from_the_merged_checkpoint ||
		fail bert_train_resumes_from_the_merged_checkpoint "$(grep train: resumed.log | tail -3)"

	# --- ckpt-sync-ln: the replicated tensors, BERT's heads among them ---
	expect_rc sync_ln_check_bert_tp2_is_clean 0 "$SL" tp2 --check
	for n in pooler.dense.weight lm_head.dense.bias lm_head.layernorm.weight binary_head.bias \
		tokentype_embeddings.weight; do
		grep -q "^$n  *exp_avg_sq " "$T/out" || { fail sync_ln_compares_berts_heads "no $n in $(head -c 300 "$T/out")"; break; }
	done && ok sync_ln_compares_berts_heads
	lacks sync_ln_leaves_vocab_parallel_lm_head_bias_alone "$T/out" '^lm_head\.bias '
	cp -r tp2 drift
	"$PY" - drift/global_step4 <<'EOF' || fail drift_setup "python"
import json, struct, sys, zlib
step = sys.argv[1]; shard = "rank_tp01_pp000.safetensors"
b = bytearray(open(f"{step}/{shard}", "rb").read()); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); o = 8 + n + h["lm_head.dense.bias"]["data_offsets"][0]
v = struct.unpack("<f", b[o:o + 4])[0]; b[o:o + 4] = struct.pack("<f", v + 0.25)
open(f"{step}/{shard}", "wb").write(b)
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
crc = 0xffffffff
for x in bytes(b[8 + n:]):
    crc = T[(crc ^ x) & 0xff] ^ (crc >> 8)
m = json.load(open(f"{step}/manifest.json"))
m["files"][shard]["crc32c"] = "%08x" % (crc ^ 0xffffffff)
json.dump(m, open(f"{step}/manifest.json", "w"), indent=1)
EOF
	expect_rc sync_ln_finds_a_drifted_lm_head_dense_bias 1 "$SL" drift --check &&
		contains sync_ln_names_the_drifted_bert_tensor "$T/out" '^lm_head\.dense\.bias +weight +2\.(4|5)[0-9]+e-01 +tp01'
	expect_rc merge_refuses_the_drifted_bert 1 "$MT" drift --output drift.m1
	expect_rc sync_ln_fixes_the_drift 0 "$SL" drift --fix --output fixed &&
		expect_rc sync_ln_fixed_bert_is_clean 0 "$SL" fixed --check

	# --- the export of a TP=2 checkpoint is the export of its merge ---
	"$MT" tp2 --output tp2.hf --format hf 2>/dev/null && "$MT" tp2.m1 --output tp2.m1.hf --format hf 2>/dev/null
	cmp -s tp2.hf/model.safetensors tp2.m1.hf/model.safetensors && [ -s tp2.hf/model.safetensors ] &&
		ok bert_hf_export_of_tp2_is_the_export_of_its_merge ||
		fail bert_hf_export_of_tp2_is_the_export_of_its_merge "$(ls tp2.hf tp2.m1.hf)"
else
	skip bert_tp2_pp2_round_trips "no mpirun or no build/lib/lmtk/train-mpi.so"
fi

# --- unknown model types are refused by name (T5 is known: tests/cli/train-t5.sh) ---
cp -r bert vit
sed -i 's/"model_type": "bert"/"model_type": "vit"/' vit/global_step4/manifest.json
expect_rc merge_refuses_an_unknown_model_type 2 "$MT" vit --output vit.m1 &&
	contains unknown_model_type_is_named_with_the_file "$T/err" 'vit/global_step4/manifest.json: model type "vit" is not one'
expect_rc sync_ln_refuses_an_unknown_model_type 2 "$SL" vit --check &&
	contains sync_ln_names_the_unknown_type "$T/err" '"vit"'
[ ! -e vit.m1 ] && ok unknown_type_leaves_no_output || fail unknown_type_leaves_no_output "$(ls)"
cp -r bert gptless
"$PY" - gptless/global_step4/manifest.json <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); del m["model"]["binary_head"]; json.dump(m, open(sys.argv[1], "w"))
EOF
expect_rc bert_without_binary_head_field_is_refused 2 "$MT" gptless --output x &&
	contains bert_missing_field_is_named "$T/err" 'model\.binary_head'

# --- HF export ---
if ! "$PY" -c 'import torch' 2>/dev/null; then
	skip bert_hf_export_gives_the_checkpoints_logits "python3-torch is not installed (make deps installs it)"
	exit 0
fi
expect_rc bert_hf_export_exits_0 0 "$MT" bert --output bert.hf --format hf
"$PY" - bert.hf <<'EOF' >names.out 2>&1 && ok bert_hf_export_has_megatronberts_names_shapes_config_and_tokenizer || fail bert_hf_export_has_megatronberts_names_shapes_config_and_tokenizer "$(tail -3 names.out)"
import json, struct, sys
d = sys.argv[1]
b = open(d + "/model.safetensors", "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); assert h.pop("__metadata__") == {"format": "pt"}
got = {k: v["shape"] for k, v in h.items()}
C, F, V, P = 64, 256, 407, 40       # 405 lines of vocab.txt + [BOS], [EOS]
want = {"bert.embeddings.word_embeddings.weight": [V, C],
        "bert.embeddings.position_embeddings.weight": [P, C],
        "bert.embeddings.token_type_embeddings.weight": [2, C],
        "bert.encoder.ln.weight": [C], "bert.encoder.ln.bias": [C],
        "bert.pooler.dense.weight": [C, C], "bert.pooler.dense.bias": [C],
        "cls.predictions.transform.dense.weight": [C, C], "cls.predictions.transform.dense.bias": [C],
        "cls.predictions.transform.LayerNorm.weight": [C], "cls.predictions.transform.LayerNorm.bias": [C],
        "cls.predictions.bias": [V], "cls.seq_relationship.weight": [2, C],
        "cls.seq_relationship.bias": [2]}
for i in range(2):
    p = f"bert.encoder.layer.{i}."
    for q in ("query", "key", "value"):
        want[p + f"attention.self.{q}.weight"] = [C, C]; want[p + f"attention.self.{q}.bias"] = [C]
    want.update({p + "attention.ln.weight": [C], p + "attention.ln.bias": [C],
                 p + "attention.output.dense.weight": [C, C], p + "attention.output.dense.bias": [C],
                 p + "ln.weight": [C], p + "ln.bias": [C], p + "intermediate.dense.weight": [F, C],
                 p + "intermediate.dense.bias": [F], p + "output.dense.weight": [C, F],
                 p + "output.dense.bias": [C]})
assert got == want, (sorted(set(got) ^ set(want)), [k for k in got if k in want and got[k] != want[k]])
c = json.load(open(d + "/config.json"))
for k, v in {"architectures": ["MegatronBertForPreTraining"], "model_type": "megatron-bert",
             "vocab_size": V, "hidden_size": C, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": F, "hidden_act": "gelu_new", "max_position_embeddings": P,
             "type_vocab_size": 2, "layer_norm_eps": 1e-5, "tie_word_embeddings": True,
             "pad_token_id": 0, "torch_dtype": "float32"}.items():
    assert c.get(k) == v, (k, c.get(k), v)
vocab = open(d + "/vocab.txt").read().split("\n")
assert vocab[:-1] == open("vocab.txt").read().split("\n")[:-1] + ["[BOS]", "[EOS]"], vocab[-4:]
t = json.load(open(d + "/tokenizer_config.json"))
assert t["tokenizer_class"] == "BertTokenizer" and t["do_lower_case"] is True, t
assert t["additional_special_tokens"] == ["[BOS]", "[EOS]"], t
print("ok")
EOF
"$PY" "$HFREF" --hf bert.hf --ckpt bert/global_step4 >cmp.out 2>&1; rc=$?
[ $rc = 0 ] && grep -q '^hf  *prediction_logits .* ok$' cmp.out && grep -q '^hf  *seq_relationship_logits .* ok$' cmp.out &&
	ok bert_hf_export_gives_the_checkpoints_logits_exactly_with_openai_gelu ||
	fail bert_hf_export_gives_the_checkpoints_logits_exactly_with_openai_gelu "exit $rc: $(tail -4 cmp.out)"
"$PY" "$HFREF" --hf bert.hf --ckpt bert/global_step4 \
	--mutations qkv_interleaved,bias_dropped,types_swapped,hidden_act_swapped >mut.out 2>&1; rc=$?
for mu in qkv_interleaved bias_dropped types_swapped hidden_act_swapped; do
	grep -q "^mutation $mu: caught" mut.out && ok "bert_hf_comparison_catches_$mu" ||
		fail "bert_hf_comparison_catches_$mu" "exit $rc: $(grep "$mu" mut.out || tail -2 mut.out)"
done

# the erf LM head: "gelu", exact but for the MLPs' tanh GeLU (the documented difference)
"$MT" bertd --output bertd.hf --format hf 2>bertd.err
contains bert_hf_export_notes_the_gelu_difference bertd.err 'one GeLU'
"$PY" "$HFREF" --hf bertd.hf --ckpt bertd/global_step4 --hf-tolerance 1e-3 >cmpd.out 2>&1; rc=$?
[ $rc = 0 ] && grep -q '^hf+train prediction_logits .* ok$' cmpd.out && grep -q '"hidden_act": "gelu"' bertd.hf/config.json &&
	ok bert_hf_export_with_erf_head_is_exact_but_for_the_mlp_gelu ||
	fail bert_hf_export_with_erf_head_is_exact_but_for_the_mlp_gelu "exit $rc: $(tail -4 cmpd.out)"

# no binary head: MegatronBertForMaskedLM, a zero token-type row, the cased tokenizer
expect_rc bert_no_binary_head_exports 0 "$MT" nobin --output nobin.hf --format hf --dtype fp32
"$PY" "$HFREF" --hf nobin.hf --ckpt nobin/global_step4 --hf-tolerance 1e-3 >cmpn.out 2>&1; rc=$?
[ $rc = 0 ] && grep -q '"MegatronBertForMaskedLM"' nobin.hf/config.json &&
	grep -q '"type_vocab_size": 1' nobin.hf/config.json && grep -q '"do_lower_case": false' nobin.hf/tokenizer_config.json &&
	! grep -q 'pooler\|seq_relationship' nobin.hf/model.safetensors &&
	ok bert_no_binary_head_exports_maskedlm_with_the_logits ||
	fail bert_no_binary_head_exports_maskedlm_with_the_logits "exit $rc: $(tail -3 cmpn.out)"

# bf16 shards with an index
"$MT" bert --output bert.hfs --format hf --dtype bf16 --max-shard-size 100KB 2>/dev/null
n=$(ls bert.hfs/model-*-of-*.safetensors 2>/dev/null | wc -l)
"$PY" "$HFREF" --hf bert.hfs --ckpt bert/global_step4 --tolerance 1e-2 --hf-tolerance 1e-2 >cmps.out 2>&1; rc=$?
[ "$n" -ge 2 ] && [ -s bert.hfs/model.safetensors.index.json ] && [ $rc = 0 ] &&
	ok bert_hf_bf16_shards_give_the_logits_at_bf16_precision ||
	fail bert_hf_bf16_shards_give_the_logits_at_bf16_precision "$n files, exit $rc: $(tail -3 cmps.out)"

# post-LN: no class holds it, also when only the recorded command line says so
expect_rc bert_post_ln_export_is_refused 2 "$MT" postln --output postln.hf --format hf &&
	contains bert_post_ln_refusal_says_why "$T/err" 'apply-residual-connection-post-layernorm.*no Hugging Face class'
[ ! -e postln.hf ] && ok refused_export_leaves_nothing || fail refused_export_leaves_nothing "$(ls)"
"$PY" - postln/global_step4/manifest.json <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
del m["model"]["apply_residual_connection_post_layernorm"], m["model"]["openai_gelu"]
json.dump(m, open(sys.argv[1], "w"))
EOF
expect_rc bert_post_ln_of_an_older_manifest_is_refused_from_its_args 2 "$MT" postln --output postln.hf --format hf

# HF transformers itself, where it is installed (the GPU machines)
HFPY=
for p in "$PY" python3; do "$p" -c 'import transformers, torch' 2>/dev/null && { HFPY=$p; break; }; done
if [ -n "$HFPY" ]; then
	"$HFPY" - bert.hf "$HFREF" <<'EOF' >tf.out 2>&1 && ok transformers_loads_the_bert_export_with_the_same_logits || fail transformers_loads_the_bert_export_with_the_same_logits "$(tail -4 tf.out)"
import importlib.util, sys, torch, transformers
d, ref = sys.argv[1:]
spec = importlib.util.spec_from_file_location("h", ref); H = importlib.util.module_from_spec(spec)
spec.loader.exec_module(H)
c, W = H.hf_load(d)
ids, types, pad = H.batch(c, 7, 3)
model = transformers.MegatronBertForPreTraining.from_pretrained(d, torch_dtype=torch.float64).eval()
tok = transformers.AutoTokenizer.from_pretrained(d)
assert tok.convert_tokens_to_ids("[EOS]") == c["vocab_size"] - 1
with torch.no_grad():
    out = model(input_ids=ids, token_type_ids=types, attention_mask=pad)
    lm, sop = H.hf_forward(c, W, ids, types, pad)
d1 = (out.prediction_logits - lm)[pad.bool()].abs().max().item()
d2 = (out.seq_relationship_logits - sop).abs().max().item()
print("transformers vs hf-megatron-bert.py", d1, d2)
assert d1 < 1e-9 and d2 < 1e-9
EOF
else
	skip transformers_loads_the_bert_export_with_the_same_logits "HF transformers is not installed here (the GPU machines have it)"
fi
