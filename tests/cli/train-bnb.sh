#!/usr/bin/env bash
# train --use-bnb-optimizer: bitsandbytes' 8-bit Adam with StableEmbedding, against an independent
# PyTorch reference written from the paper (tests/ref/bnb-ref.py):
# 1. the dynamic maps' 256 values, block-wise quantize/dequantize (exact codes), three 8-bit and
#    32-bit Adam steps on random tensors (exact codes, fp32-rounding parameters), through
#    build/tests/train_bnb --ref;
# 2. the run: 8-bit state allocated and reported (bytes = the --dry-run plan's, about 2 B/param
#    for the 8-bit tensors, 8 for AdamW), StableEmbedding (embedding layer norm, xavier-uniform
#    word embedding), the checkpoint holds uint8 codes + block absmax + the maps, the second
#    moment's largest element in every block is code 1.0 (requantized with the new absmax);
# 3. 50 steps from the same weights track the 32-bit Adam run (AdamW at weight decay 0, the same
#    update) within 1e-3 relative loss at every step while differing from it; the first two
#    losses are equal (the first update reads the fresh fp32 moments, as bitsandbytes' kernel does);
# 4. resume is bit-exact; --load refuses a checkpoint of the other optimizer (exit 3), --finetune
#    takes its weights (the CUDA backend's kernels: train-cuda.sh and train_cudaops);
# 5. TP2 tracks one rank; ZeRO-1 over DP2 moves the shard cut to a block start, and the saved
#    optimizer tensors are byte-identical to DP2 without ZeRO.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
UNIT=$TOP/build/tests/train_bnb
cd "$T" || exit 3
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
	skip bnb_reference "no torch/numpy in $PY (Debian's python3-torch)"
	exit 0
fi

# --- 1. the quantization and the step against the reference --------------------------------------
if [ -x "$UNIT" ]; then
	mkdir ref && "$PY" "$TOP/tests/ref/bnb-ref.py" gen ref && "$UNIT" --ref ref &&
		"$PY" "$TOP/tests/ref/bnb-ref.py" check ref
else
	fail bnb_reference "$UNIT is missing (make build/tests/train_bnb)"
fi

# --- 2. a run -------------------------------------------------------------------------------------
MEG=$(tiny_dataset) || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx .
M=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
	--micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --lr-decay-style cosine
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --device cpu --threads 1 --log-interval 1
	--eval-interval 1000 --eval-iters 1 --hidden-dropout 0 --attention-dropout 0 --weight-decay 0)
losses() { grep '^ iteration ' "$1" | sed 's/.*lm loss: \([^ ]*\) .*/\1/'; }
# st.py FILE: "name dtype shape" per tensor; st.py FILE NAME: the tensor's raw bytes as hex
cat >st.py <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
meta = h.pop("__metadata__", {})
def data(name):
    s, e = h[name]["data_offsets"]
    return b[8 + n + s:8 + n + e]
EOF

"$TR" "${M[@]}" --train-iters 1 --use-bnb-optimizer --save i0 --save-interval 1 >i0.out 2>&1 ||
	fail bnb_run "$(tail -3 i0.out)"
line=$(grep '^train: optimizer:' i0.out)
read -r bytes n8 nblk n32 < <(echo "$line" | sed -E 's/.* ([0-9]+) bytes of state .*: ([0-9]+) in 8-bit blocks of 2048 \(([0-9]+) absmax each moment\), ([0-9]+) with fp32.*/\1 \2 \3 \4/')
[ -n "$n8" ] && [ "$n8" -gt 0 ] && [ "$bytes" = $((2 * n8 + 8 * nblk + 8 * n32)) ] &&
	ok bnb_startup_line_reports_8bit_state_bytes || fail bnb_startup_line_reports_8bit_state_bytes "$line"
plan=$("$TR" --dry-run --format json --nodes 1 --gpus-per-node 1 "${M[@]}" --train-iters 1 --use-bnb-optimizer 2>/dev/null |
	"$PY" -c 'import json,sys; d=json.load(sys.stdin); print(int(d["layout"]["stages"][0]["optimizer_bytes"]), d["memory"]["optimizer"])')
[ "$plan" = "$bytes bnb-adam8bit" ] && ok bnb_dry_run_plans_the_bytes_allocated || fail bnb_dry_run_plans_the_bytes_allocated "plan '$plan', allocated $bytes"
"$TR" "${M[@]}" --train-iters 1 --embed-layernorm >w0.out 2>&1
wline=$(grep '^train: optimizer:' w0.out)
wbytes=$(echo "$wline" | sed -E 's/.*AdamW, ([0-9]+) bytes.* for ([0-9]+) weights.*/\1 \2/')
set -- $wbytes
[ "$1" = $((8 * $2)) ] && [ "$bytes" -lt "$1" ] && [ $((2 * n8 + 8 * nblk)) -lt $((n8 * 21 / 10)) ] &&
	ok bnb_state_is_about_2_bytes_per_8bit_parameter_against_adamw_8 ||
	fail bnb_state_is_about_2_bytes_per_8bit_parameter_against_adamw_8 "bnb $bytes ($n8 8-bit), AdamW: $wline"
"$TR" --dry-run --nodes 1 --gpus-per-node 1 "${M[@]}" --train-iters 1 --use-bnb-optimizer >dr.txt 2>&1
contains bnb_dry_run_names_the_optimizer dr.txt 'optimizer \(bnb 8-bit Adam, [0-9.]+ B/param\)'
contains bnb_dry_run_counts_stable_embeddings_layer_norm dr.txt 'embedding layer norm +128 +StableEmbedding'

"$PY" - i0/global_step1/rank_tp00_pp000.safetensors i0/global_step1/manifest.json "$TOP/tests/ref" >ck.out 2>&1 <<'EOF'
import json, math, sys
import numpy as np
exec(open("st.py").read())
sys.path.insert(0, sys.argv[3])
import importlib.util
spec = importlib.util.spec_from_file_location("bnbref", sys.argv[3] + "/bnb-ref.py")
ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
man = json.load(open(sys.argv[2]))
def res(name, good, why=""):
    print(f"ok {name}" if good else f"FAIL {name}: {why}")
res("bnb_manifest_says_the_optimizer_and_stable_embedding",
    man["optimizer"]["kind"] == "bnb-adam8bit" and man["model"]["embed_layernorm"] is True, str(man["optimizer"]))
res("bnb_checkpoint_has_the_embedding_layer_norm", "embed_layernorm.weight" in h and "exp_avg.embed_layernorm.weight" in h)
# StableEmbedding's init: U(-a, a), a = sqrt(6 / (Vp + C)); one step of lr 1e-3 moves it by <= ~1e-3
w = np.frombuffer(data("word_embeddings.weight"), np.float32)
a = math.sqrt(6.0 / (5120 + 64))
res("bnb_word_embedding_is_xavier_uniform",
    a * 0.99 < np.abs(w).max() < a + 2e-3 and abs(w.std() - a / math.sqrt(3)) < 0.02 * a,
    f"max {np.abs(w).max()}, std {w.std()}, a {a}")
q8 = [k for k in h if k.startswith("exp_avg.") and h[k]["dtype"] == "U8"]
res("bnb_8bit_tensors_are_uint8_codes_with_block_absmax",
    "layers.0.mlp.dense_h_to_4h.weight" in [k[8:] for k in q8] and all(
        h["exp_avg_absmax." + k[8:]]["shape"] == [(math.prod(h[k]["shape"]) + 2047) // 2048] and
        h["exp_avg_sq." + k[8:]]["dtype"] == "U8" for k in q8), str(q8))
res("bnb_embedding_and_small_tensors_keep_fp32_state",
    h["exp_avg.word_embeddings.weight"]["dtype"] == "F32" and h["exp_avg_sq.layers.0.input_layernorm.weight"]["dtype"] == "F32"
    and "exp_avg_absmax.word_embeddings.weight" not in h)
for nm, signed in (("bnb.qmap_exp_avg", True), ("bnb.qmap_exp_avg_sq", False)):
    got = np.frombuffer(data(nm), np.float32)
    res(f"bnb_checkpoint_map_{'signed' if signed else 'unsigned'}_is_the_reference_map",
        np.array_equal(got, ref.dynamic_map(signed).numpy()))
# every block of the second moment holds its own maximum as code 255 (1.0): requantized with the new absmax
good = True
for k in q8:
    c = np.frombuffer(data("exp_avg_sq." + k[8:]), np.uint8)
    am = np.frombuffer(data("exp_avg_sq_absmax." + k[8:]), np.float32)
    for j in range(len(am)):
        if am[j] > 0 and c[j * 2048:(j + 1) * 2048].max() != 255:
            good = False
res("bnb_second_moment_blocks_hold_their_absmax_as_code_1", good)
EOF
rc=$?
cat ck.out
[ $rc = 0 ] || fail bnb_checkpoint_checks_ran "the checkpoint checks stopped: $(tail -1 ck.out)"

# --- 3. 50 steps against the 32-bit Adam run, from the same weights ------------------------------
"$TR" "${M[@]}" --train-iters 50 --lr-warmup-iters 5 --use-bnb-optimizer --load i0 --finetune >a8.out 2>&1 ||
	fail bnb_50_steps_run "$(tail -3 a8.out)"
"$TR" "${M[@]}" --train-iters 50 --lr-warmup-iters 5 --embed-layernorm --load i0 --finetune >a32.out 2>&1 ||
	fail adam32_50_steps_run "$(tail -3 a32.out)"
contains bnb_finetune_takes_the_weights_of_an_8bit_checkpoint a32.out 'loaded the weights of i0/global_step1 \(--finetune\)'
losses a8.out >l8
losses a32.out >l32
"$PY" - l8 l32 <<'EOF'
import sys
a = [l.strip() for l in open(sys.argv[1])]; b = [l.strip() for l in open(sys.argv[2])]
rel = [abs(float(x) - float(y)) / float(y) for x, y in zip(a, b)]
def res(name, good, why=""):
    print(f"ok {name}" if good else f"FAIL {name}: {why}")
res("bnb_50_steps_logged", len(a) == len(b) == 50, f"{len(a)} and {len(b)} losses")
res("bnb_first_update_equals_adam32s", a[:2] == b[:2], f"{a[:2]} vs {b[:2]}")
res("bnb_50_step_losses_track_adam32_within_1e-3", max(rel) <= 1e-3, f"max relative difference {max(rel)}")
res("bnb_50_step_losses_differ_from_adam32", max(rel) > 1e-6, f"max relative difference {max(rel)}: the 8-bit path did not run?")
EOF

# --- 4. resume, refusals --------------------------------------------------------------------------
"$TR" "${M[@]}" --train-iters 20 --use-bnb-optimizer --save full --save-interval 10 >full.out 2>&1
mkdir half && cp -r full/global_step10 half/ && echo global_step10 >half/latest
"$TR" "${M[@]}" --train-iters 20 --use-bnb-optimizer --load half --save half --save-interval 10 >half.out 2>&1
if cmp -s full/global_step20/rank_tp00_pp000.safetensors half/global_step20/rank_tp00_pp000.safetensors &&
	[ "$(losses full.out | tail -10)" = "$(losses half.out)" ]; then
	ok bnb_resume_is_bit_exact
else
	fail bnb_resume_is_bit_exact "the resumed run's losses or checkpoint differ"
fi
expect_rc adamw_load_refuses_a_bnb_checkpoint 2 "$TR" "${M[@]}" --train-iters 20 --embed-layernorm --load half
contains adamw_load_refusal_says_why "$T/err" "optimizer state is bitsandbytes' 8-bit Adam's.*resume it with --use-bnb-optimizer"
"$TR" "${M[@]}" --train-iters 2 --embed-layernorm --save wck --save-interval 2 >/dev/null 2>&1
expect_rc bnb_load_refuses_an_adamw_checkpoint 2 "$TR" "${M[@]}" --train-iters 4 --use-bnb-optimizer --load wck
contains bnb_load_refusal_says_why "$T/err" "optimizer state is AdamW's.*resume it with --optimizer adam"

# --- 5. ZeRO-1 cuts at block boundaries: the same bytes -------------------------------------------
if ! command -v mpirun >/dev/null || [ ! -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	skip bnb_zero1_matches_no_zero "no mpirun or no build/lib/lmtk/train-mpi.so"
	exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
# TP2: the vocabulary-split word embedding with StableEmbedding's layer norm (the chronicles' PR
# 182) trains as one rank does; the 8-bit blocks are each rank's own (bitsandbytes sees the local
# shard), so the losses track within 1e-4 rather than bit for bit
mpirun --oversubscribe -np 2 "$TR" "${M[@]}" --train-iters 20 --lr-warmup-iters 2 --use-bnb-optimizer \
	--tensor-model-parallel-size 2 >tp2.out 2>&1 || fail bnb_tp2_runs "$(tail -3 tp2.out)"
"$TR" "${M[@]}" --train-iters 20 --lr-warmup-iters 2 --use-bnb-optimizer >tp1.out 2>&1
losses tp1.out >lt1
losses tp2.out >lt2
"$PY" - lt1 lt2 <<'EOF'
import sys
a = [float(l) for l in open(sys.argv[1])]; b = [float(l) for l in open(sys.argv[2])]
rel = max(abs(x - y) / y for x, y in zip(a, b)) if len(a) == len(b) == 20 else 1
print("ok bnb_tp2_tracks_one_rank" if rel <= 1e-4 else f"FAIL bnb_tp2_tracks_one_rank: max relative difference {rel}")
EOF
# hidden 128, 4 layers: the even cut (parameter 728576) falls inside layer 0's attention.dense.weight
Z=("${M[@]}" --hidden-size 128 --num-layers 4 --train-iters 6 --use-bnb-optimizer --save-interval 6)
mpirun --oversubscribe -np 2 "$TR" "${Z[@]}" --save z0 >z0.out 2>&1 || fail bnb_dp2_runs "$(tail -3 z0.out)"
mpirun --oversubscribe -np 2 "$TR" "${Z[@]}" --zero-stage 1 --save z1 >z1.out 2>&1 || fail bnb_dp2_zero1_runs "$(tail -3 z1.out)"
# Megatron's distributed optimizer: every bucket padded to 2 chunks of whole 8-bit blocks, so the
# flat buffer (weights and padding) is a multiple of 2 x 2048 and each rank owns half of it
zl=$(grep '^train: ZeRO-1:' z1.out)
read -r pad own n < <(echo "$zl" | sed -E 's/.*\(([0-9]+) elements of padding, 8-bit tensors and chunks starting on blocks\).*: ([0-9]+) of ([0-9]+) weights$/\1 \2 \3/')
[ -n "$n" ] && [ "$pad" -gt 0 ] && [ $(((n + pad) % 4096)) = 0 ] && [ "$own" -le $(((n + pad) / 2)) ] &&
	ok bnb_zero1_chunks_are_whole_blocks || fail bnb_zero1_chunks_are_whole_blocks "$zl"
[ "$(losses z0.out)" = "$(losses z1.out)" ] && ok bnb_zero1_losses_match_no_zero || fail bnb_zero1_losses_match_no_zero "losses differ"
"$PY" - z0/global_step6/rank_tp00_pp000.safetensors z1/global_step6/rank_tp00_pp000.safetensors <<'EOF'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
a, b = load(sys.argv[1]), load(sys.argv[2])
opt = [k for k in a if k.startswith(("exp_avg", "bnb."))]
diff = [k for k in opt if a[k] != b.get(k)]
q8 = [k for k in opt if "absmax" in k]
ok = not diff and len(q8) > 0 and set(a) == set(b)
print("ok bnb_zero1_optimizer_tensors_byte_identical_to_no_zero" if ok else
      f"FAIL bnb_zero1_optimizer_tensors_byte_identical_to_no_zero: {len(diff)} of {len(opt)} differ: {diff[:3]}")
EOF
