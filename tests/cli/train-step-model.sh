#!/usr/bin/env bash
# The step model of train --dry-run (src/train/plan/gpumodel.c) earns its trust on the system it
# replaces: --step-model megatron-deepspeed, on tr11's flags (slurm/examples/tr11-176B-ml.slurm:
# BLOOM-176B, TP 4 x PP 12 x DP 8 on 48 nodes of 8 A100 80GB, checkpoint-activations, bf16) must
# give BigScience's measured throughputs within 15%, with the one set of hardware parameters of
# share/lmtk/gpu-model.tsv:
#   GBS 2048, MBS 2: 149 TFLOPs per GPU, 105.2 s per iteration (the bloom model card; tr11 logs)
#   GBS 16, MBS 2 (the ramp-up's start): 8.04 TFLOPs, 15.2 s
#   GBS 192, MBS 1: about 73 TFLOPs
# (TFLOPs as Megatron-DeepSpeed logs them: 24 x 4 B s L h^2 (1 + s/6h + V/16Lh) per iteration
# with checkpointing.)  And the Python twin (tests/bench/gpu-model.py) reads the same table and
# prices every GEMM the way train does: the same time for every GEMM and batched GEMM of both
# step models, on both devices.  No GPU and no executor needed.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "'$2' != '$3'"; fi; }
cd "$T" || exit 3
BLOOM=(--tensor-model-parallel-size 4 --pipeline-model-parallel-size 12
	--pp-partition-method 'type:transformer|embedding' --num-layers 70 --hidden-size 14336
	--num-attention-heads 112 --seq-length 2048 --max-position-embeddings 2048
	--train-samples 220_000_000 --tokenizer-type PretrainedFromHF --tokenizer-name-or-path
	bigscience/bloom --vocab-size 250680 --embed-layernorm --bf16 --position-embedding-type alibi
	--checkpoint-activations --pad-vocab-size-to 250880 --optimizer adam --lr 6e-5
	--nodes 48 --gpus-per-node 8 --gpu-model a100)
js() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1]))["time"]["step_model"]; print(eval(sys.argv[2]))' "$@"; }
within() {   # within NAME GOT WANT PERCENT
	check "$1" "$PY" -c 'import sys; g, w, p = map(float, sys.argv[1:]); sys.exit(not abs(g / w - 1) <= p / 100)' "$2" "$3" "$4"
}
for pt in "2 2048 105.2 149" "2 16 15.2 8.04" "1 192 20.1 73"; do
	set -- $pt
	"$BIN/train" --dry-run "${BLOOM[@]}" --micro-batch-size "$1" --global-batch-size "$2" \
		--step-model megatron-deepspeed --format json >"mds-$2.json" 2>"mds-$2.err" ||
		fail bloom176b_megatron_deepspeed_dry_run "$(cat "mds-$2.err")"
	"$BIN/train" --dry-run "${BLOOM[@]}" --micro-batch-size "$1" --global-batch-size "$2" \
		--format json >"lmtk-$2.json" 2>/dev/null
	within "bloom176b_megatron_deepspeed_gbs$2_mbs$1_tflops_within_15pct_of_$4" \
		"$(js "mds-$2.json" 'd["tflops_per_gpu"]')" "$4" 15
	[ "$2" = 192 ] || within "bloom176b_megatron_deepspeed_gbs$2_iteration_within_15pct_of_$3s" \
		"$(js "mds-$2.json" 'd["iteration_seconds"]')" "$3" 15
done
same bloom176b_json_names_the_step_model "$(js mds-2048.json 'd["step_model"]') $(js lmtk-2048.json 'd["step_model"]')" \
	"megatron-deepspeed lmtk"
# the same hardware parameters, lmtk's own kernels: fused epilogues and no materialised scores
check bloom176b_lmtk_step_faster_than_megatron_deepspeeds "$PY" -c '
import json, sys
a, b = (json.load(open(f))["time"]["step_model"] for f in sys.argv[1:])
sys.exit(not (a["iteration_seconds"] < b["iteration_seconds"] and a["peaks"] == b["peaks"] and
              a["efficiencies"] == b["efficiencies"]))' lmtk-2048.json mds-2048.json

# the report says which model and which MFU count, with tokens/s beside it
"$BIN/train" --dry-run "${BLOOM[@]}" --micro-batch-size 2 --global-batch-size 2048 \
	--step-model megatron-deepspeed >mds.txt 2>/dev/null
contains step_model_text_names_megatron_deepspeed mds.txt '^  step model +megatron-deepspeed '
contains step_model_text_mfu_is_llmc_count mds.txt "^  MFU +[0-9.]+%  llm.c's count: 6N \+ 6 L h s FLOPs per token.*PaLM's 6N \+ 12 L h s: [0-9.]+%"
contains step_model_text_tokens_per_s mds.txt '^  tokens/s +[0-9]+  [0-9]+ per GPU$'
check step_model_mfu_is_llmc_formula "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
s, m = d["time"]["step_model"], d["model"]
N, L, h, T = m["params"]["total"], 70, 14336, 2048
want = (6 * N + 6 * L * h * T) * s["tokens_per_s"] / (384 * 312e12)
tok = 2048 * T / s["iteration_seconds"]
sys.exit(not (abs(s["mfu"] / want - 1) < 1e-9 and abs(s["tokens_per_s"] / tok - 1) < 1e-9 and s["mfu_palm"] > s["mfu"]))' mds-2048.json
expect_rc step_model_unknown_exits_2 2 "$BIN/train" --dry-run "${BLOOM[@]}" --micro-batch-size 2 \
	--global-batch-size 2048 --step-model deepspeed
contains step_model_unknown_named "$T/err" "^train: --step-model: 'deepspeed' is not one of lmtk, megatron-deepspeed"

# the Python twin: the same table (what train reports is the file's) and the same GEMM prices
"$BIN/train" --dry-run --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 \
	--max-position-embeddings 1024 --micro-batch-size 16 --global-batch-size 16 --train-iters 100 \
	--lr 1e-4 --bf16 --tokenizer-type PretrainedFromHF --tokenizer-name-or-path gpt2 --vocab-size 50257 \
	--nodes 1 --gpus-per-node 1 --gpu-model h100 --format json >gpt2-350m-h100.json 2>/dev/null
"$PY" - "$TOP/tests/bench/gpu-model.py" gpt2-350m-h100.json mds-2048.json mds-192.json lmtk-2048.json <<'PYEOF' >twin.out 2>&1
import importlib.util, json, re, sys
spec = importlib.util.spec_from_file_location("gm", sys.argv[1])
gm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gm)
bad, n, na = [], 0, 0
# B x heads per GPU, T, head dim of each run (GPT-2 350M: 16 x 16 heads; BLOOM: MBS x 112 / TP 4)
ATT_SHAPE = {"gpt2-350m-h100.json": (16 * 16, 1024, 64), "mds-2048.json": (2 * 28, 2048, 128),
             "mds-192.json": (28, 2048, 128), "lmtk-2048.json": (2 * 28, 2048, 128)}
for f in sys.argv[2:]:
    s = json.load(open(f))["time"]["step_model"]
    dev = gm.DEVICES[s["device"]]
    for k in ("tc", "hbm", "sms", "mamf", "clock", "mma_sync", "smem_sm", "nvlink", "nic"):
        if s["peaks"][k] != dev[k]:
            bad.append("%s %s: train %r, gpu-model.py %r" % (f, k, s["peaks"][k], dev[k]))
    e = s["efficiencies"]
    for k, v in (("gemm_train", gm.EFF["gemm_train"]), ("hbm", gm.EFF["hbm"]), ("k_half", gm.K_HALF),
                 ("split_k", gm.SPLIT_K), ("gap_s", gm.GAP), ("sync_s", gm.SYNC)):
        if e[k] != v:
            bad.append("%s %s: train %r, gpu-model.py %r" % (f, k, e[k], v))
    if [tuple(t) for t in e["tiles"]] != gm.TILES:
        bad.append("%s tiles: train %r, gpu-model.py %r" % (f, e["tiles"], gm.TILES))
    for o in s["ops"]:
        a = re.match(r"(attn_fwd_mma_k|attn_bwd_mma_k)<", o["op"])
        if a:   # the attention kernels by their structure: B x heads, T, head dim from the run
            units, pipe, struct = gm.ATTN[a.group(1)]
            heads, T, HD = ATT_SHAPE[f]
            t = max(gm.attn_seconds(dev, gm.attn_kernel(struct), heads, T, HD),
                    o["bytes"] / o["count"] / (dev["hbm"] * gm.EFF["hbm"])) + gm.GAP
            na += 1
            if abs(t * o["count"] - o["seconds"]) > 1e-9 * o["seconds"]:
                bad.append("%s %s: train %.6g s, gpu-model.py %.6g s" % (f, o["op"], o["seconds"], t * o["count"]))
            continue
        m = re.match(r"(gemm|bmm) (\d+)x(\d+)x(\d+)(?: x(\d+))? ", o["op"])
        if not m:
            continue
        M, N, K = int(m.group(2)), int(m.group(3)), int(m.group(4))
        B = int(m.group(5) or 1)
        fl, by = o["flops"] / o["count"], o["bytes"] / o["count"]
        t = max(fl / (dev["tc"] * gm.gemm_eff(dev, M, N, K, B)), by / (dev["hbm"] * gm.EFF["hbm"])) + gm.GAP
        n += 1
        if abs(t * o["count"] - o["seconds"]) > 1e-9 * o["seconds"]:
            bad.append("%s %s: train %.6g s, gpu-model.py %.6g s" % (f, o["op"], o["seconds"], t * o["count"]))
for b in bad[:8]:
    print("# " + b)
print("# %d GEMMs and %d attention kernels compared, %d disagreements" % (n, na, len(bad)))
sys.exit(1 if bad or n < 20 or na < 4 else 0)
PYEOF
if [ $? = 0 ]; then ok python_twin_reads_the_table_and_prices_every_gemm_and_attention_kernel_as_train
else fail python_twin_reads_the_table_and_prices_every_gemm_and_attention_kernel_as_train "$(cat twin.out)"; fi

# The attention kernels' constants are fit to FlashAttention-2's causal forward on an H100 at
# head dim 128 (FlashAttention-3 paper, fig. 5); the same constants must price its head-dim-64
# curve too: all twelve published points within 5%, from the table's own copy of them
"$PY" - "$TOP/share/lmtk/gpu-model.tsv" gpt2-350m-h100.json <<'PYEOF' >fa2.out 2>&1
import json, sys
tsv = dict(l.rstrip("\n").split("\t", 1) for l in open(sys.argv[1]) if "\t" in l and l[0] != "#")
ref = json.load(open(sys.argv[2]))["time"]["step_model"]["attention"]["fa2_causal_forward"]
bad = 0
for hd in (128, 64):
    want = [float(x) for x in tsv["attn.ref.fa2_%d.tflops" % hd].split()]
    got = ref["h100_hd%d" % hd]
    for w, g in zip(want, got):
        err = g["tflops"] / w - 1
        print("# head dim %d, T %5d: published %3.0f TFLOP/s, priced %5.1f (%+.1f%%)" % (hd, g["seq"], w, g["tflops"], 100 * err))
        bad += abs(err) > 0.05
sys.exit(1 if bad or len(want) != 6 or len(got) != 6 else 0)
PYEOF
if [ $? = 0 ]; then ok attention_model_prices_flashattention2s_published_h100_curves_within_5pct
else fail attention_model_prices_flashattention2s_published_h100_curves_within_5pct "$(cat fa2.out)"; fi
# the what-if kernels are priced beside the step: the kernels train runs are no slower than
# the ones they replaced, and the report names them
check attention_variants_priced_beside_the_step "$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))["time"]["step_model"]
v = s["attention"]["variants"]
sys.exit(not (len(v) >= 2 and "before" in v[0]["kernels"] and
              all(x["iteration_seconds"] > 0 for x in v) and
              s["iteration_seconds"] <= v[0]["iteration_seconds"]))' gpt2-350m-h100.json
