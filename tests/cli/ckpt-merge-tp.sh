#!/usr/bin/env bash
# ckpt-merge-tp on checkpoints that train writes: two tiny models trained on the real Megatron
# dataset (../shared/data/megatron), GPT-2 style and BLOOM style (ALiBi, embedding layer norm, 6
# heads).  Re-splitting to TP 2 gives each rank Megatron's slices; TP 1 -> 2 -> 1 and through TP/PP
# layouts that re-pad the vocabulary is the original byte for byte; train resumes from the results
# with exactly the losses of the original; checkpoints that a parallel train writes (TP, PP, both,
# mpirun) merge and split back to train's own files byte for byte, and both directions resume; the
# HF export gives the checkpoint's logits (through tests/ref/gpt-ref.py --hf, and through HF
# transformers itself where it is installed); drifted replicated tensors are refused unless
# --average; damaged shards are named and leave no output; a full disk is exit 3.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
MT=$BIN/ckpt-merge-tp
REF=$TOP/tests/ref/gpt-ref.py
MEG=$(tiny_dataset) || exit 3   # a dataset to train on; the reference one is not needed
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
	skip ckpt_merge_tp "python3-numpy is not installed (make deps installs it)"
	exit 0
fi

COMMON=(--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4
	--lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --adam-beta2 0.95
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1)
GPT=(--num-layers 2 --hidden-size 64 --num-attention-heads 4)
BLOOM=(--num-layers 2 --hidden-size 96 --num-attention-heads 6 --position-embedding-type alibi
	--embed-layernorm)
trn() { local m=$1; shift; if [ $m = gpt ]; then "$BIN/train" "${COMMON[@]}" "${GPT[@]}" "$@"
	else "$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" "$@"; fi; }
losses() { grep '^ iteration ' "$1" | sed 's/.*iteration *\([0-9]*\)\/.*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2 \3/'; }
no_output() { [ ! -e "$1" ] && ! ls -a "$(dirname "$1")" | grep -q "^\.$(basename "$1")\.tmp"; }
# manifest_bytes STEP: the bytes of its shards' data sections, as binsize prints them
manifest_bytes() { binsize "$("$PY" -c 'import json, sys; print(sum(f["bytes"] for f in json.load(open(sys.argv[1]))["files"].values()))' "$1/manifest.json")"; }

# safetensors and CRC-32C for the tests' own edits of shards (nothing but json, struct, numpy)
cat >st.py <<'EOF'
import json, struct
import numpy as np
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(data, crc=0):
    crc ^= 0xffffffff
    for b in data:
        crc = T[(crc ^ b) & 0xff] ^ (crc >> 8)
    return crc ^ 0xffffffff
def load(path):
    """{name: array} (copies; BF16 as float32) and the metadata"""
    b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    dt = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "BF16": "<u2"}
    out = {}
    for k, v in h.items():
        a = np.frombuffer(b, dt[v["dtype"]], int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0])
        if v["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[k] = a.reshape(v["shape"]).copy()
    return out, meta, h
def save(path, tensors, meta=None):
    """tensors in file order, F32 (I32 for ints); returns the CRC-32C and size of the data"""
    h, pos, blobs = {}, 0, []
    if meta:
        h["__metadata__"] = meta
    for k, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        h[k] = {"dtype": "I32" if a.dtype == np.int32 else "F32", "shape": list(a.shape),
                "data_offsets": [pos, pos + len(raw)]}
        pos += len(raw); blobs.append(raw)
    hb = json.dumps(h, sort_keys=True, separators=(",", ":")).encode(); hb += b" " * (-len(hb) % 8)
    data = b"".join(blobs)
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + data)
    return crc32c(data), len(data)
def resave(step, shard, tensors, meta):
    """rewrite a shard of a checkpoint and its manifest entry"""
    crc, n = save(f"{step}/{shard}", tensors, meta)
    m = json.load(open(f"{step}/manifest.json"))
    m["files"][shard] = {"bytes": n, "crc32c": "%08x" % crc}
    open(f"{step}/manifest.json", "w").write(json.dumps(m, indent=1) + "\n")
def ordered(path):
    """tensors in file (offset) order"""
    t, meta, h = load(path)
    return {k: t[k] for k in sorted(t, key=lambda k: h[k]["data_offsets"][0])}, meta
EOF
export PYTHONPATH=$T

for m in gpt bloom; do
	trn $m --train-iters 8 --exit-interval 6 --save $m --save-interval 3 >$m.train 2>&1 ||
		{ fail "${m}_train_writes_a_checkpoint" "$(tail -3 $m.train)"; continue; }
	S=$m/global_step6

	# --- TP 1 -> 2: two shards, each rank holding Megatron's slices ---
	if LMTK_PROGRESS=1 "$MT" --input $m --output $m.tp2 --target-tp 2 2>$m.tp2.err >$m.tp2.out &&
		[ -s $m.tp2/global_step6/rank_tp01_pp000.safetensors ] &&
		[ "$(cat $m.tp2/latest)" = global_step6 ]; then ok "${m}_splits_to_tp2"
	else fail "${m}_splits_to_tp2" "$(cat $m.tp2.err)"; fi
	# its progress (LMTK_PROGRESS=1 into a file): verifying the input's data sections, writing
	# the output's (the manifests' bytes), each to 100% with the rate and ETA 0:00:00; no stdout
	ib=$(manifest_bytes $S) tb=$(manifest_bytes $m.tp2/global_step6)
	contains "${m}_progress_verifying_ends_at_the_inputs_bytes" $m.tp2.err "^ckpt-merge-tp: verifying $ib of $ib \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
	contains "${m}_progress_writing_ends_at_the_outputs_bytes" $m.tp2.err "^ckpt-merge-tp: writing $tb of $tb \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
	check "${m}_progress_not_on_stdout" [ ! -s $m.tp2.out ]
	"$PY" - $S $m.tp2/global_step6 <<'EOF' >$m.slices 2>&1 && ok "${m}_tp2_ranks_hold_megatrons_slices" || fail "${m}_tp2_ranks_hold_megatrons_slices" "$(tail -3 $m.slices)"
import json, sys, st
import numpy as np
full, _, _ = st.load(sys.argv[1] + "/rank_tp00_pp000.safetensors")
r0, _, _ = st.load(sys.argv[2] + "/rank_tp00_pp000.safetensors")
r1, _, _ = st.load(sys.argv[2] + "/rank_tp01_pp000.safetensors")
man = json.load(open(sys.argv[2] + "/manifest.json"))
assert man["layout"] == {"tp": 2, "pp": 1, "dp": 1}, man["layout"]
assert sorted(man["files"]) == ["rank_tp00_pp000.safetensors", "rank_tp01_pp000.safetensors"]
assert set(full) == set(r0) == set(r1)
for k, f in full.items():
    n = k.split(".", 1)[1] if k.startswith("exp_avg") else k
    if n.endswith(("query_key_value.weight", "query_key_value.bias", "dense_h_to_4h.weight",
                   "dense_h_to_4h.bias", "word_embeddings.weight")):     # column/vocab parallel
        h = f.shape[0] // 2
        assert (r0[k] == f[:h]).all() and (r1[k] == f[h:]).all(), k
    elif n.endswith(("attention.dense.weight", "dense_4h_to_h.weight")):  # row parallel
        h = f.shape[1] // 2
        assert (r0[k] == f[:, :h]).all() and (r1[k] == f[:, h:]).all(), k
    else:                                                                  # replicated
        assert (r0[k] == f).all() and (r1[k] == f).all(), k
print("ok", len(full))
EOF

	# --- 2 -> 1, and through other layouts: the original byte for byte ---
	"$MT" --input $m.tp2 --output $m.tp1 2>$m.tp1.err
	if cmp -s $S/rank_tp00_pp000.safetensors $m.tp1/global_step6/rank_tp00_pp000.safetensors &&
		cmp -s $S/manifest.json $m.tp1/global_step6/manifest.json; then ok "${m}_tp1_to_tp2_to_tp1_is_bit_exact"
	else fail "${m}_tp1_to_tp2_to_tp1_is_bit_exact" "$(cat $m.tp1.err; cmp $S/rank_tp00_pp000.safetensors $m.tp1/global_step6/rank_tp00_pp000.safetensors)"; fi
	# gpt: TP 4 x PP 2; bloom: TP 3 x PP 2, whose vocabulary Megatron pads to 5376 (384 * 14)
	tpx=$([ $m = gpt ] && echo 4 || echo 3)
	"$MT" --input $m.tp2 --output $m.x --target-tp $tpx --target-pp 2 2>$m.x.err &&
		"$MT" --input $m.x --output $m.x1 2>>$m.x.err
	if cmp -s $S/rank_tp00_pp000.safetensors $m.x1/global_step6/rank_tp00_pp000.safetensors &&
		cmp -s $S/manifest.json $m.x1/global_step6/manifest.json; then ok "${m}_tp${tpx}_pp2_round_trip_is_bit_exact"
	else fail "${m}_tp${tpx}_pp2_round_trip_is_bit_exact" "$(cat $m.x.err)"; fi
	"$PY" - $m.x/global_step6 $tpx <<'EOF' >$m.pp 2>&1 && ok "${m}_pp2_stages_hold_their_layers_and_the_tied_embeddings" || fail "${m}_pp2_stages_hold_their_layers_and_the_tied_embeddings" "$(tail -3 $m.pp)"
import json, sys, st
step, tp = sys.argv[1], int(sys.argv[2])
man = json.load(open(step + "/manifest.json"))
assert man["layout"]["tp"] == tp and man["layout"]["pp"] == 2
assert man["model"]["padded_vocab_size"] == (5120 if tp == 4 else 5376), man["model"]["padded_vocab_size"]
for r in range(tp):
    s0, _, _ = st.load(f"{step}/rank_tp{r:02d}_pp000.safetensors")
    s1, _, _ = st.load(f"{step}/rank_tp{r:02d}_pp001.safetensors")
    n0 = {k for k in s0 if not k.startswith("exp_avg")}
    n1 = {k for k in s1 if not k.startswith("exp_avg")}
    assert all(k.startswith("layers.0.") or "embed" in k for k in n0), sorted(n0)
    assert all(k.startswith("layers.1.") or k.startswith("final_") or k == "word_embeddings.weight" for k in n1), sorted(n1)
    assert "final_layernorm.weight" in n1 and "word_embeddings.weight" in n0 & n1
    assert (s0["word_embeddings.weight"] == s1["word_embeddings.weight"]).all()
    assert s0["word_embeddings.weight"].shape[0] * tp == man["model"]["padded_vocab_size"]
print("ok")
EOF

	# --- train resumes from the merged checkpoints, with the original's losses ---
	cp -r $m orig.$m
	trn $m --train-iters 8 --load orig.$m >$m.res0 2>&1
	trn $m --train-iters 8 --load $m.tp1 >$m.res1 2>&1; rc1=$?
	trn $m --train-iters 8 --load $m.x1 >$m.res2 2>&1; rc2=$?
	if [ $rc1 = 0 ] && [ $rc2 = 0 ] && grep -q "resumed from $m.tp1/global_step6: iteration 6" $m.res1 &&
		grep -q "resumed from $m.x1/global_step6: iteration 6" $m.res2; then ok "${m}_train_resumes_from_the_merged_checkpoints"
	else fail "${m}_train_resumes_from_the_merged_checkpoints" "rc $rc1 $rc2: $(grep train: $m.res1 $m.res2 | tail -3)"; fi
	if [ "$(losses $m.res0 | wc -l)" = 2 ] && diff <(losses $m.res0) <(losses $m.res1) >/dev/null &&
		diff <(losses $m.res0) <(losses $m.res2) >/dev/null; then ok "${m}_merged_checkpoint_gives_trains_losses_exactly"
	else fail "${m}_merged_checkpoint_gives_trains_losses_exactly" "$(losses $m.res0 | head -2) vs $(losses $m.res1 | head -2)"; fi

	# --- HF export (from the TP=2 checkpoint: merged on the way) ---
	mkdir -p $m.ref
	"$PY" - $S $m.ref <<'EOF' || fail "${m}_reference_inputs" "python"
import json, sys, st
import numpy as np
step, out = sys.argv[1], sys.argv[2]
mo = json.load(open(step + "/manifest.json"))["model"]
sd, _, _ = st.load(step + "/rank_tp00_pp000.safetensors")
st.save(out + "/w.safetensors", {k: v for k, v in sd.items() if not k.startswith("exp_avg")})
cfg = {k: mo[k] for k in ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size",
       "seq_length", "max_position_embeddings", "vocab_size", "padded_vocab_size",
       "position_embedding_type", "embed_layernorm", "layernorm_epsilon")}
cfg.update(hidden_dropout=0.0, attention_dropout=0.0, lr=1e-3, adam_beta1=0.9, adam_beta2=0.95,
           adam_eps=1e-8, weight_decay=0.01, clip_grad=1.0)
json.dump(cfg, open(out + "/c.json", "w"))
rng = np.random.default_rng(7)
tok = rng.integers(0, mo["vocab_size"], (1, 2, 24)).astype(np.int32)
st.save(out + "/b.safetensors", {"tokens": tok, "targets": np.roll(tok, -1, axis=2)})
EOF
	"$PY" "$REF" --config $m.ref/c.json --weights $m.ref/w.safetensors --batch $m.ref/b.safetensors \
		--only logits,loss --write $m.ref/ref.safetensors >$m.ref/w.out 2>&1 || fail "${m}_reference_logits" "$(tail -3 $m.ref/w.out)"
	if LMTK_PROGRESS=1 "$MT" --input $m.tp2 --output $m.hf --format hf 2>$m.hf.err; then ok "${m}_hf_export_exits_0"
	else fail "${m}_hf_export_exits_0" "$(cat $m.hf.err)"; fi
	# its progress: exporting model.safetensors' data section (its size less the header), to 100%
	hb=$(binsize "$("$PY" -c 'import os, struct, sys; f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; print(os.path.getsize(sys.argv[1]) - 8 - n)' $m.hf/model.safetensors)")
	contains "${m}_progress_exporting_ends_at_the_models_tensor_bytes" $m.hf.err "^ckpt-merge-tp: exporting $hb of $hb \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
	"$PY" - $m.hf $m "$MEG" <<'EOF' >$m.hfnames 2>&1 && ok "${m}_hf_export_has_hfs_names_shapes_and_config" || fail "${m}_hf_export_has_hfs_names_shapes_and_config" "$(tail -3 $m.hfnames)"
import filecmp, json, os, sys, st
d, m, meg = sys.argv[1:]
t, meta, h = st.load(d + "/model.safetensors")
assert meta == {"format": "pt"}, meta
c = json.load(open(d + "/config.json"))
L, V = 2, 5000
if m == "gpt":
    C, F = 64, 256
    names = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [64, C],
             "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
    for i in range(L):
        p = f"transformer.h.{i}."
        names.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C], p + "ln_2.weight": [C],
                      p + "ln_2.bias": [C], p + "attn.c_attn.weight": [C, 3 * C],
                      p + "attn.c_attn.bias": [3 * C], p + "attn.c_proj.weight": [C, C],
                      p + "attn.c_proj.bias": [C], p + "mlp.c_fc.weight": [C, F],
                      p + "mlp.c_fc.bias": [F], p + "mlp.c_proj.weight": [F, C],
                      p + "mlp.c_proj.bias": [C]})
    want = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": C, "n_layer": L,
            "n_head": 4, "n_positions": 64, "n_inner": F, "vocab_size": V,
            "activation_function": "gelu_new", "tie_word_embeddings": True,
            "layer_norm_epsilon": 1e-5}
else:
    C, F = 96, 384
    names = {"transformer.word_embeddings.weight": [V, C],
             "transformer.word_embeddings_layernorm.weight": [C],
             "transformer.word_embeddings_layernorm.bias": [C],
             "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
    for i in range(L):
        p = f"transformer.h.{i}."
        names.update({p + "input_layernorm.weight": [C], p + "input_layernorm.bias": [C],
                      p + "self_attention.query_key_value.weight": [3 * C, C],
                      p + "self_attention.query_key_value.bias": [3 * C],
                      p + "self_attention.dense.weight": [C, C], p + "self_attention.dense.bias": [C],
                      p + "post_attention_layernorm.weight": [C],
                      p + "post_attention_layernorm.bias": [C],
                      p + "mlp.dense_h_to_4h.weight": [F, C], p + "mlp.dense_h_to_4h.bias": [F],
                      p + "mlp.dense_4h_to_h.weight": [C, F], p + "mlp.dense_4h_to_h.bias": [C]})
    want = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": C,
            "n_layer": L, "n_head": 6, "vocab_size": V, "layer_norm_epsilon": 1e-5,
            "apply_residual_connection_post_layernorm": False, "slow_but_exact": False,
            "tie_word_embeddings": True}
got = {k: v["shape"] for k, v in h.items()}
assert got == names, (sorted(set(got) ^ set(names)), [k for k in got if k in names and got[k] != names[k]])
for k, v in want.items():
    assert c.get(k) == v, (k, c.get(k), v)
assert filecmp.cmp(d + "/vocab.json", meg + "/gpt2-tiny-vocab.json", shallow=False)
assert filecmp.cmp(d + "/merges.txt", meg + "/gpt2-tiny-merges.txt", shallow=False)
print("ok")
EOF
	"$PY" "$REF" --config $m.ref/c.json --hf $m.hf --batch $m.ref/b.safetensors --only logits,loss \
		--compare $m.ref/ref.safetensors >$m.hf.cmp 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q '^logits  maxdiff 0.000e+00' $m.hf.cmp; then ok "${m}_hf_export_gives_the_checkpoints_logits"
	else fail "${m}_hf_export_gives_the_checkpoints_logits" "exit $rc: $(tail -3 $m.hf.cmp)"; fi
	# sharded, bf16
	"$MT" --input $m.tp2 --output $m.hfs --format hf --dtype bf16 --max-shard-size 200KB 2>$m.hfs.err
	n=$(ls $m.hfs/model-*-of-*.safetensors 2>/dev/null | wc -l)
	"$PY" - $m.hfs <<'EOF' >$m.hfs.idx 2>&1 && [ "$n" -ge 2 ] && ok "${m}_hf_export_shards_with_an_index" || fail "${m}_hf_export_shards_with_an_index" "$n files: $(cat $m.hfs.err; tail -2 $m.hfs.idx)"
import json, os, sys, st
d = sys.argv[1]
idx = json.load(open(d + "/model.safetensors.index.json"))
files = sorted(set(idx["weight_map"].values()))
n = len(files)
assert files == ["model-%05d-of-%05d.safetensors" % (i + 1, n) for i in range(n)], files
total = 0
for f in files:
    t, meta, h = st.load(d + "/" + f)
    assert meta == {"format": "pt"} and all(v["dtype"] == "BF16" for v in h.values())
    assert all(idx["weight_map"][k] == f for k in t)
    data = sum(v["data_offsets"][1] - v["data_offsets"][0] for v in h.values())
    assert data <= 200000 or len(t) == 1, (f, data)   # HF's rule: full, or one big tensor
    total += data
assert idx["metadata"]["total_size"] == total, (idx["metadata"], total)
assert json.load(open(d + "/config.json"))["torch_dtype"] == "bfloat16"
EOF
	"$PY" "$REF" --config $m.ref/c.json --hf $m.hfs --batch $m.ref/b.safetensors --only logits,loss \
		--compare $m.ref/ref.safetensors --tolerance bf16 >$m.hfs.cmp 2>&1 &&
		ok "${m}_hf_bf16_shards_give_the_logits_at_bf16_precision" || fail "${m}_hf_bf16_shards_give_the_logits_at_bf16_precision" "$(tail -3 $m.hfs.cmp)"

	# HF transformers itself, where it is installed (the GPU machines)
	HFPY=
	for p in "$PY" python3; do "$p" -c 'import transformers, torch' 2>/dev/null && { HFPY=$p; break; }; done
	if [ -n "$HFPY" ]; then
		"$HFPY" - $m.hf $m.ref <<'EOF' >$m.tf 2>&1 && ok "${m}_transformers_loads_the_export_with_the_same_logits" || fail "${m}_transformers_loads_the_export_with_the_same_logits" "$(tail -4 $m.tf)"
import sys, torch, st
import numpy as np
import transformers
d, r = sys.argv[1:]
arch = __import__("json").load(open(d + "/config.json"))["architectures"][0]
model = getattr(transformers, arch).from_pretrained(d, torch_dtype=torch.float32).eval()
b, _, _ = st.load(r + "/b.safetensors")
ref, _, _ = st.load(r + "/ref.safetensors")
tok = torch.tensor(np.asarray(b["tokens"][0]).astype(np.int64))
with torch.no_grad():
    lg = model(tok).logits.double().numpy()
want = ref["logits"][..., :lg.shape[-1]].astype(np.float64)
assert lg.shape == want.shape, (lg.shape, want.shape)
rel = np.abs(lg - want).max() / np.abs(want).max()
print(arch, "max rel diff", rel)
assert rel < 1e-4, rel
EOF
	else
		skip "${m}_transformers_loads_the_export_with_the_same_logits" "HF transformers is not installed here (the GPU machines have it)"
	fi
done

# --- checkpoints that train writes over several ranks (mpirun, where Open MPI is installed) ---
# TP=2, PP=2, and TP=2 x PP=2 with BLOOM's 'type:transformer|embedding' partition, 4 layers:
# merged to TP=1 and split back with ckpt-merge-tp, every file is train's own byte for byte
# (shapes, tensor order within each stage, the tied embeddings on the last stage, the layers'
# stages, manifest); train resumes from the merge in one process with the losses the parallel run
# goes on with, and a parallel train resumes from a split made by ckpt-merge-tp.
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	P4=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --hidden-dropout 0 --attention-dropout 0)
	mp() { local np=$1; shift; mpirun --oversubscribe -np "$np" "$BIN/train" "${COMMON[@]}" "${P4[@]}" --train-iters 8 "$@"; }
	for lay in "tp2 2 --tensor-model-parallel-size 2" "pp2 2 --pipeline-model-parallel-size 2" \
		"tp2pp2e 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --pp-partition-method type:transformer|embedding"; do
		set -- $lay
		n=$1 np=$2; shift 2
		mp $np "$@" --exit-interval 6 --save $n --save-interval 3 >$n.train 2>&1 ||
			{ fail "train_${n}_writes_a_checkpoint" "$(grep -v '^ iter' $n.train | tail -3)"; continue; }
		back=(--target-tp 1 --target-pp 1)
		case $n in
		tp2) back=(--target-tp 2) ;;
		pp2) back=(--target-pp 2) ;;
		tp2pp2e) back=(--target-tp 2 --target-pp 2 --pp-partition-method 'type:transformer|embedding') ;;
		esac
		"$MT" --input $n --output $n.1 2>$n.err && "$MT" --input $n.1 --output $n.back "${back[@]}" 2>>$n.err
		same=1
		for f in $n/global_step6/*; do cmp -s $f $n.back/global_step6/${f##*/} || same=0; done
		[ $same = 1 ] && [ "$(ls $n/global_step6 | wc -l)" = "$(ls $n.back/global_step6 | wc -l)" ] &&
			ok "train_${n}_checkpoint_merged_and_split_back_is_trains_byte_for_byte" ||
			fail "train_${n}_checkpoint_merged_and_split_back_is_trains_byte_for_byte" "$(cat $n.err; ls $n.back/global_step6)"
		mp $np "$@" --load $n >$n.cont 2>&1
		"$BIN/train" "${COMMON[@]}" "${P4[@]}" --train-iters 8 --load $n.1 >$n.res 2>&1; rc=$?
		"$PY" - <(losses $n.cont) <(losses $n.res) <<'EOF' >$n.cmp 2>&1 && [ $rc = 0 ] && ok "train_resumes_from_the_merged_${n}_checkpoint_with_its_losses" || fail "train_resumes_from_the_merged_${n}_checkpoint_with_its_losses" "exit $rc: $(tail -2 $n.cmp)"
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 2, (a, b)
for x, y in zip(a, b):   # the same up to the order of sums across ranks (fp32)
    assert x[0] == y[0] and all(abs(float(u) - float(v)) <= 1e-5 * abs(float(u)) + 2e-3 * (i == 2) for i, (u, v) in enumerate(zip(x[1:], y[1:]), 1)), (x, y)
EOF
	done
	# the other way: a parallel run from a split that ckpt-merge-tp made of a one-rank checkpoint
	"$BIN/train" "${COMMON[@]}" "${P4[@]}" --train-iters 8 --exit-interval 6 --save one --save-interval 3 >one.train 2>&1
	"$MT" --input one --output one.tp2pp2 --target-tp 2 --target-pp 2 2>one.err
	"$BIN/train" "${COMMON[@]}" "${P4[@]}" --train-iters 8 --load one >one.res 2>&1
	mp 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --load one.tp2pp2 >one.par 2>&1; rc=$?
	"$PY" - <(losses one.res) <(losses one.par) <<'EOF' >one.cmp 2>&1 && [ $rc = 0 ] && grep -q 'resumed from one.tp2pp2/global_step6' one.par && ok parallel_train_resumes_from_a_split_by_ckpt_merge_tp || fail parallel_train_resumes_from_a_split_by_ckpt_merge_tp "exit $rc: $(grep -v '^ iter' one.par | tail -2; tail -1 one.cmp)"
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 2, (a, b)
for x, y in zip(a, b):
    assert x[0] == y[0] and all(abs(float(u) - float(v)) <= 1e-5 * abs(float(u)) + 2e-3 * (i == 2) for i, (u, v) in enumerate(zip(x[1:], y[1:]), 1)), (x, y)
EOF
else
	skip train_parallel_checkpoints "no mpirun or no build/lib/lmtk/train-mpi.so (Open MPI: make deps installs it)"
fi

# a wrong export is caught: GPT-2's c_attn left in Megatron's [heads, 3, hd] order
if [ -d gpt.hf ]; then
	cp -r gpt.hf gpt.bad
	"$PY" - gpt.bad <<'EOF'
import sys, st
import numpy as np
d = sys.argv[1]
t, meta = st.ordered(d + "/model.safetensors")
for k in [k for k in t if k.endswith("attn.c_attn.weight")]:
    C = t[k].shape[0]; NH = 4
    w = t[k].reshape(C, 3, NH, C // NH)                 # [in, 3, heads, hd]
    t[k] = w.transpose(0, 2, 1, 3).reshape(C, 3 * C)  # [in, heads, 3, hd]
st.save(d + "/model.safetensors", t, meta)
EOF
	"$PY" "$REF" --config gpt.ref/c.json --hf gpt.bad --batch gpt.ref/b.safetensors --only logits,loss \
		--compare gpt.ref/ref.safetensors >bad.cmp 2>&1
	rc=$?
	[ $rc = 1 ] && grep -q 'OVER' bad.cmp && ok hf_comparison_fails_on_the_wrong_qkv_order ||
		fail hf_comparison_fails_on_the_wrong_qkv_order "exit $rc: $(tail -2 bad.cmp)"
fi

# --- a model no HF class holds: refused before anything is written ---
cp -r orig.gpt noclass
"$PY" - noclass/global_step6/manifest.json <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); m["model"]["embed_layernorm"] = True
open(sys.argv[1], "w").write(json.dumps(m, indent=1) + "\n")
EOF
expect_rc hf_refuses_a_model_without_an_hf_class 2 "$MT" --input noclass --output noclass.hf --format hf &&
	contains hf_refusal_says_why "$T/err" 'no Hugging Face class'
no_output noclass.hf && ok refused_export_leaves_nothing || fail refused_export_leaves_nothing "$(ls -a)"
# a GPT-2-style model with the post-LN residual: GPT2LMHeadModel cannot hold it
cp -r orig.gpt postln
"$PY" - postln/global_step6/manifest.json <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); m["model"]["apply_residual_connection_post_layernorm"] = True
open(sys.argv[1], "w").write(json.dumps(m, indent=1) + "\n")
EOF
expect_rc hf_refuses_a_post_ln_gpt2 2 "$MT" --input postln --output postln.hf --format hf &&
	contains hf_post_ln_refusal_says_why "$T/err" 'GPT2LMHeadModel adds the residual before the layer norm'

# --- replicated tensors that drifted apart on one rank: refused, unless --average ---
cp -r gpt.tp2 drift
"$PY" - drift/global_step6 >drift.want <<'EOF'
import sys, st
import numpy as np
step = sys.argv[1]; sh = "rank_tp01_pp000.safetensors"
t, meta = st.ordered(f"{step}/{sh}")
d = np.float32(2.0 ** -10)
for k, i in (("layers.0.input_layernorm.weight", [1, 5]), ("exp_avg.layers.1.mlp.dense_4h_to_h.bias", [0]),
             ("exp_avg_sq.final_layernorm.weight", [3])):
    x = t[k].copy(); x[i] += d; t[k] = x
    print(k)
st.resave(step, sh, t, meta)
EOF
expect_rc merge_refuses_drifted_replicated_tensors 1 "$MT" --input drift --output drift.m1
contains refusal_names_the_weight "$T/err" 'layers\.0\.input_layernorm\.weight weight: copies differ by up to 9\.765625..e-04 \(tp01'
contains refusal_names_the_exp_avg "$T/err" 'layers\.1\.mlp\.dense_4h_to_h\.bias exp_avg: copies differ'
contains refusal_names_the_exp_avg_sq "$T/err" 'final_layernorm\.weight exp_avg_sq: copies differ'
contains refusal_says_what_to_do "$T/err" '3 replicated tensor buffers differ across ranks: not merged.*ckpt-sync-ln --fix.*--average'
no_output drift.m1 && ok refused_merge_leaves_nothing || fail refused_merge_leaves_nothing "$(ls -a)"
expect_rc merge_accepts_drift_within_tolerance 0 "$MT" --input drift --output drift.tol --tolerance 0.001
expect_rc merge_refuses_drift_beyond_tolerance 1 "$MT" --input drift --output drift.tol2 --tolerance 0.0009
expect_rc merge_with_average_exits_0 0 "$MT" --input drift --output drift.avg --average
"$PY" - gpt/global_step6 drift.avg/global_step6 <<'EOF' >avg.out 2>&1 && ok average_is_the_mean_of_the_ranks_copies || fail average_is_the_mean_of_the_ranks_copies "$(tail -3 avg.out)"
import sys, st
import numpy as np
a, _, _ = st.load(sys.argv[1] + "/rank_tp00_pp000.safetensors")   # the original: rank 0's copies
m, _, _ = st.load(sys.argv[2] + "/rank_tp00_pp000.safetensors")   # merged with --average
d = np.float32(2.0 ** -10)
edits = {"layers.0.input_layernorm.weight": [1, 5], "exp_avg.layers.1.mlp.dense_4h_to_h.bias": [0],
         "exp_avg_sq.final_layernorm.weight": [3]}
assert set(a) == set(m)
for k in a:
    if k in edits:
        x1 = a[k].copy(); x1[edits[k]] += d                            # rank 1's copy
        want = ((a[k].astype(np.float64) + x1.astype(np.float64)) / 2).astype(np.float32)
        assert (m[k] == want).all() and (m[k] != a[k]).any(), k
    else:
        assert (m[k] == a[k]).all(), k                                 # everything else as it was
print("ok")
EOF

# --- damaged input: named precisely, nothing written ---
cp -r gpt.tp2 flip
"$PY" -c "
p = 'flip/global_step6/rank_tp01_pp000.safetensors'
b = bytearray(open(p, 'rb').read()); b[-100] ^= 0x40; open(p, 'wb').write(b)"
expect_rc bit_flip_is_bad_input 2 "$MT" --input flip --output flip.out &&
	contains bit_flip_names_the_shard "$T/err" 'flip/global_step6/rank_tp01_pp000\.safetensors: checksum mismatch'
no_output flip.out && ok bit_flip_leaves_nothing || fail bit_flip_leaves_nothing "$(ls -a)"
cp -r gpt.tp2 trunc
truncate -s 100000 trunc/global_step6/rank_tp00_pp000.safetensors
expect_rc truncated_shard_is_bad_input 2 "$MT" --input trunc --output trunc.out &&
	contains truncated_shard_names_file_and_tensor "$T/err" "trunc/global_step6/rank_tp00_pp000\.safetensors: truncated: tensor '[a-z_.0-9]+' ends at byte"
no_output trunc.out && ok truncated_shard_leaves_nothing || fail truncated_shard_leaves_nothing "$(ls -a)"
cp -r gpt.tp2 miss
"$PY" - miss/global_step6 <<'EOF'
import sys, st
t, meta = st.ordered(sys.argv[1] + "/rank_tp01_pp000.safetensors")
del t["exp_avg_sq.layers.1.mlp.dense_4h_to_h.bias"]
st.resave(sys.argv[1], "rank_tp01_pp000.safetensors", t, meta)
EOF
expect_rc missing_tensor_is_bad_input 2 "$MT" --input miss --output miss.out &&
	contains missing_tensor_is_named "$T/err" 'miss/global_step6/rank_tp01_pp000\.safetensors: tensor exp_avg_sq\.layers\.1\.mlp\.dense_4h_to_h\.bias is missing'
cp -r gpt.tp2 shape
"$PY" - shape/global_step6 <<'EOF'
import sys, st
t, meta = st.ordered(sys.argv[1] + "/rank_tp00_pp000.safetensors")
t["layers.0.attention.dense.weight"] = t["layers.0.attention.dense.weight"].reshape(32, 64)
st.resave(sys.argv[1], "rank_tp00_pp000.safetensors", t, meta)
EOF
expect_rc wrong_shape_is_bad_input 2 "$MT" --input shape --output shape.out &&
	contains wrong_shape_is_named "$T/err" 'rank_tp00_pp000\.safetensors: tensor layers\.0\.attention\.dense\.weight has shape \[32, 64\]; at TP=2 the model needs \[64, 32\]'
cp -r gpt.tp2 gone
rm gone/global_step6/rank_tp01_pp000.safetensors
expect_rc missing_shard_is_bad_input 2 "$MT" --input gone --output gone.out &&
	contains missing_shard_is_named "$T/err" 'gone/global_step6/rank_tp01_pp000\.safetensors: missing'
no_output miss.out && no_output shape.out && no_output gone.out && ok damaged_inputs_leave_nothing ||
	fail damaged_inputs_leave_nothing "$(ls -a)"

# --- a full disk is an I/O error (exit 3) and leaves nothing (a 3 MiB tmpfs, where root may mount) ---
mkdir small
if mount -t tmpfs -o size=3m tmpfs small 2>/dev/null; then
	expect_rc full_disk_is_an_io_error 3 "$MT" --input gpt.tp2 --output small/out &&
		contains full_disk_says_so "$T/err" 'No space left on device; nothing written to small/out'
	[ -z "$(ls -A small)" ] && ok full_disk_leaves_nothing || fail full_disk_leaves_nothing "$(ls -a small)"
	umount small
else
	skip full_disk_is_an_io_error "cannot mount a small tmpfs here (not root?)"
fi

# --- a layout that does not fit the model is refused before anything is read; --padded-vocab-size ---
expect_rc tp_that_does_not_divide_the_heads_is_refused 2 "$MT" --input gpt --output x --target-tp 3 &&
	contains tp_refusal_names_the_heads "$T/err" 'cannot write TP=3: 4 attention heads cannot be split over TP=3'
"$MT" --input gpt --output pv --target-tp 2 --padded-vocab-size 5376 2>pv.err &&
	"$MT" --input pv --output pv1 --padded-vocab-size 5120 2>>pv.err
"$PY" -c "import json; assert json.load(open('pv/global_step6/manifest.json'))['model']['padded_vocab_size'] == 5376" &&
	cmp -s gpt/global_step6/rank_tp00_pp000.safetensors pv1/global_step6/rank_tp00_pp000.safetensors &&
	cmp -s gpt/global_step6/manifest.json pv1/global_step6/manifest.json && ok padded_vocab_grown_and_shrunk_back_is_bit_exact ||
	fail padded_vocab_grown_and_shrunk_back_is_bit_exact "$(cat pv.err)"

# --- the output must be new; usage ---
expect_rc existing_output_is_refused 2 "$MT" --input gpt --output gpt.tp2 &&
	contains existing_output_message "$T/err" 'exists and is not empty'
expect_rc missing_input_is_usage 2 "$MT" --output x
expect_rc hf_options_need_format_hf 2 "$MT" --input gpt --output x --dtype bf16
expect_rc no_such_checkpoint 2 "$MT" --input nothing-here --output x
expect_rc tokenizer_files_take_several_words 0 "$MT" --input gpt --output tok.hf --format hf --tokenizer-files "$MEG/gpt2-tiny-merges.txt" "$MEG/gpt2-tiny-vocab.json" --dtype bf16
[ -s tok.hf/gpt2-tiny-merges.txt ] && [ -s tok.hf/gpt2-tiny-vocab.json ] && ok tokenizer_files_are_copied || fail tokenizer_files_are_copied "$(ls tok.hf)"

# --- the tokenizer files an export copies: only those the manifest records, still the same ---
# train recorded them by absolute path, size and sha256 (lmtk-checkpoint(5)), hashed here by sha256sum
"$PY" - gpt/global_step6/manifest.json "$(readlink -f "$MEG/gpt2-tiny-vocab.json")" "$(sha256sum <"$MEG/gpt2-tiny-vocab.json" | cut -c1-64)" \
	"$(readlink -f "$MEG/gpt2-tiny-merges.txt")" "$(sha256sum <"$MEG/gpt2-tiny-merges.txt" | cut -c1-64)" <<'EOF' >rec.out 2>&1 &&
import json, os, sys
m = json.load(open(sys.argv[1]))
f = {x["role"]: x for x in m["tokenizer"]["files"]}
assert sorted(f) == ["merge-file", "vocab-file"], f
for role, path, sha in (("vocab-file", sys.argv[2], sys.argv[3]), ("merge-file", sys.argv[4], sys.argv[5])):
    assert f[role]["path"] == path and f[role]["sha256"] == sha and f[role]["size"] == os.path.getsize(path), f[role]
EOF
	ok train_records_the_tokenizer_files_by_path_size_and_sha256 || fail train_records_the_tokenizer_files_by_path_size_and_sha256 "$(tail -3 rec.out)"
# manifest_edit DIR PYTHON: the checkpoint DIR (a copy of gpt) with its manifest m edited (f: the
# recorded files by role)
manifest_edit() {
	rm -rf "$1" && cp -r gpt "$1" && "$PY" -c "import json, sys
p = sys.argv[1] + '/global_step6/manifest.json'; m = json.load(open(p))
f = {x['role']: x for x in m.get('tokenizer', {}).get('files', [])}
$2
json.dump(m, open(p, 'w'))" "$1"
}
# the same bytes elsewhere, private: copied, and the export's file is the export's mode (0644)
cp "$MEG/gpt2-tiny-merges.txt" mine-merges.txt && chmod 600 mine-merges.txt
manifest_edit tokmine "f['merge-file']['path'] = '$T/mine-merges.txt'"
expect_rc hf_export_copies_a_recorded_tokenizer_file_that_matches 0 "$MT" --input tokmine --output tokmine.hf --format hf &&
	cmp -s tokmine.hf/merges.txt "$MEG/gpt2-tiny-merges.txt" && [ "$(stat -c %a tokmine.hf/merges.txt)" = 644 ] &&
	ok hf_export_writes_the_tokenizer_0644_not_the_sources_mode || fail hf_export_writes_the_tokenizer_0644_not_the_sources_mode "$(ls -l tokmine.hf 2>&1)"
# a record (and a command line) pointing at another file: /etc/passwd is not copied, and said so
manifest_edit tokevil "f['merge-file']['path'] = '/etc/passwd'
m['args'] = m['args'].replace('--merge-file', '--tokenizer-name-or-path /etc/passwd --merge-file /etc/passwd --x')"
expect_rc hf_export_with_a_tokenizer_record_naming_another_file_exits_0 0 "$MT" --input tokevil --output tokevil.hf --format hf
[ ! -e tokevil.hf/merges.txt ] && [ ! -e tokevil.hf/tokenizer.json ] && ! grep -rqs '^root:' tokevil.hf &&
	cmp -s tokevil.hf/vocab.json "$MEG/gpt2-tiny-vocab.json" && ok hf_export_never_copies_a_file_the_record_or_args_names_that_is_not_trains ||
	fail hf_export_never_copies_a_file_the_record_or_args_names_that_is_not_trains "$(ls -l tokevil.hf)"
contains hf_export_says_which_tokenizer_file_it_skipped_and_why "$T/err" "merge-file /etc/passwd: [0-9]+ bytes, the manifest records [0-9]+: not the file train read; not copied"
# same size, other bytes
head -c "$(stat -c %s "$MEG/gpt2-tiny-merges.txt")" /dev/zero >zeros.txt
manifest_edit tokzero "f['merge-file']['path'] = '$T/zeros.txt'"
expect_rc hf_export_with_a_changed_tokenizer_file_exits_0 0 "$MT" --input tokzero --output tokzero.hf --format hf
[ ! -e tokzero.hf/merges.txt ] && ok hf_export_skips_a_tokenizer_file_whose_sha256_changed || fail hf_export_skips_a_tokenizer_file_whose_sha256_changed "$(ls tokzero.hf)"
contains hf_export_says_the_sha256_differs "$T/err" "merge-file $T/zeros.txt: its sha256 is not the one the manifest records"
# a checkpoint from before the record: no tokenizer, one line pointing at --tokenizer-files
manifest_edit tokold "del m['tokenizer']"
expect_rc hf_export_of_a_checkpoint_without_the_record_exits_0 0 "$MT" --input tokold --output tokold.hf --format hf
[ ! -e tokold.hf/merges.txt ] && [ ! -e tokold.hf/vocab.json ] && [ "$(grep -c 'records no tokenizer files' "$T/err")" = 1 ] &&
	grep -q 'give them with --tokenizer-files' "$T/err" && ok hf_export_without_the_record_copies_no_tokenizer_and_says_so ||
	fail hf_export_without_the_record_copies_no_tokenizer_and_says_so "$(ls tokold.hf; cat "$T/err")"

# --- --help and the man page document the same options ---
"$MT" --help >help.txt 2>&1
missing=
for o in $(grep -oE '^ +--[a-z-]+' help.txt | tr -d ' '); do
	grep -q -- "$(echo "$o" | sed 's/-/\\\\-/g')" "$TOP/man/man1/ckpt-merge-tp.1" || missing="$missing $o"
done
[ -z "$missing" ] && ok help_options_are_in_the_man_page || fail help_options_are_in_the_man_page "missing:$missing"
rm -rf "$T"
