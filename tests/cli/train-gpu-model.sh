#!/usr/bin/env bash
# The step-time model's ground (tests/bench/train-gpu-model.sh, tests/bench/gpu-model.py):
#  - train --profile brackets iterations [--profile-step-start, --profile-step-end) with
#    cudaProfilerStart/Stop as Megatron-LM does, and the executor's LMTK_CUDA_EXEC_PROFILE records
#    exactly that iteration's work (the launches of two iterations are twice one's);
#  - the bytes it counts per kernel are a kernel's compulsory traffic: the layer norm's and
#    AdamW's equal what their buffers hold, computed here from the shapes alone;
#  - the model's extension from four small runs (1-2 layers, micro-batch 1-2) to a bigger one
#    predicts that run's launches and GEMM calls exactly and its bytes within 5% (gpu-model.py
#    --check against a 3-layer, micro-batch-3 run);
#  - train --dry-run's analytic twin of the model (src/train/plan/gpumodel.c) reads gpu-model.py's
#    table (share/lmtk/gpu-model.tsv), and prices the same operations the same way: per operation (kernel by name, GEMM by
#    shape, memsets, copies, host syncs) its count, bytes and FLOPs and its predicted time agree
#    with gpu-model.py's prediction from the executor's records - counts exactly, times within 3%,
#    bytes and FLOPs within 0.1% - on an H100 and an A100 at the profiled run (3 layers,
#    micro-batch 3), and all four extended to 6 layers and micro-batch 512 (where the
#    time is the bytes', not the launches'); and a different run does not agree;
#  - --profile is refused on the CPU backend and with an empty range.
. "$(dirname "$0")/../lib.sh"
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
if [ ! -s "$EXEC" ]; then
	skip train_gpu_model "the executor plugin is not built (no CUDA toolkit headers)"
	exit 0
fi
cd "$T" || exit 3
python3 "$TOP/tests/ref/rand-dataset.py" rand 64 200 20000 3 || exit 3
C=64 HEADS=4 SEQ=32
run() {   # run OUT LAYERS MICRO_BATCH ITERS START END [more flags]
	local out=$1 l=$2 b=$3 it=$4 s=$5 e=$6
	shift 6
	LMTK_CUDA_EXEC_PROFILE=$T/$out LMTK_CUDA_EXEC_PROFILE_CAPTURE=api LMTK_CUDA_PLUGIN=$EXEC \
		"$BIN/train" --num-layers "$l" --hidden-size $C --num-attention-heads $HEADS \
		--seq-length $SEQ --max-position-embeddings $SEQ --micro-batch-size "$b" \
		--global-batch-size "$b" --train-iters "$it" --lr 1e-4 --bf16 --data-path rand \
		--vocab-file vocab.json --merge-file merges.txt --split 1000,0,0 --eval-iters 0 \
		--log-interval 1 --device cuda --profile --profile-step-start "$s" \
		--profile-step-end "$e" "$@" >"$out.log" 2>&1
}
for lb in "1 1" "2 1" "1 2" "2 2" "3 3"; do
	set -- $lb
	run "p-$1-$2.jsonl" $1 $2 3 1 2 || { fail train_gpu_model_runs "$(tail -3 "p-$1-$2.jsonl.log")"; exit 0; }
done
run two.jsonl 1 1 4 1 3 || fail train_gpu_model_runs "$(tail -3 two.jsonl.log)"
run none.jsonl 1 1 2 5 6 || fail train_gpu_model_runs "$(tail -3 none.jsonl.log)"
ok train_gpu_model_runs

# the range: one iteration's records, twice that for two; nothing when the range is past the run
python3 - p-1-1.jsonl two.jsonl none.jsonl <<'PYEOF' && ok profile_range_is_megatron_lms_iterations || fail profile_range_is_megatron_lms_iterations "see above"
import json, os, sys
one = [json.loads(l) for l in open(sys.argv[1])]
two = [json.loads(l) for l in open(sys.argv[2])]
k1 = [o["name"] for o in one if o["op"] == "kernel"]
k2 = [o["name"] for o in two if o["op"] == "kernel"]
adam = [n for n in k1 if n.split("<")[0] == "adamw_multi_k"]   # one launch, whatever its type
ok = bool(k1) and k2 == k1 + k1 and len(adam) == 1
ok &= not os.path.exists(sys.argv[3]) or os.path.getsize(sys.argv[3]) == 0
if not ok:
    print("# one iteration: %d kernels (%d AdamW), two: %d" % (len(k1), len(adam), len(k2)))
sys.exit(0 if ok else 1)
PYEOF

# compulsory bytes, from the shapes: the layer norm reads x (N,C) bf16 and its weight and bias,
# writes y and fp32 mean and rstd per row; AdamW reads master, grad, both moments (fp32) and
# writes master, both moments and the bf16 copy, for every parameter
python3 - p-3-3.jsonl $C $SEQ 20000 <<'PYEOF' && ok profile_bytes_are_the_buffers_compulsory_traffic || fail profile_bytes_are_the_buffers_compulsory_traffic "see above"
import json, sys
ops = [json.loads(l) for l in open(sys.argv[1])]
C, T, V = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
L, B = 3, 3
N = B * T
Vp = (V + 127) // 128 * 128
P = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
ln = [o for o in ops if o["op"] == "kernel" and o["name"].startswith("ln_fwd_k")]
ad = [o for o in ops if o["op"] == "kernel" and o["name"].startswith("adamw_multi_k")]
sec = lambda b: (b + 31) // 32 * 32
want_ln = (N * C * 2 + 2 * sec(C * 2), N * C * 2 + 2 * N * 4)
bad = [o for o in ln if (o["rd"], o["wr"]) != want_ln]
want_ad = (P * 16, P * 14)
ok = ln and not bad and len(ad) == 1 and abs(ad[0]["rd"] - want_ad[0]) <= 64 * 32 and \
    abs(ad[0]["wr"] - want_ad[1]) <= 64 * 32
if not ok:
    print("# ln_fwd: want %s, got %s; adamw: want %s, got %s" % (
        want_ln, [(o["rd"], o["wr"]) for o in ln][:3], want_ad,
        [(o["rd"], o["wr"]) for o in ad]))
sys.exit(0 if ok else 1)
PYEOF

# the model's extension, against a run it did not see
if python3 "$TOP/tests/bench/gpu-model.py" --name tiny --layers 3 --hidden $C --heads $HEADS \
	--seq $SEQ --batch 3 --params 1 --run-seq $SEQ --check p-3-3.jsonl \
	p-1-1.jsonl p-2-1.jsonl p-1-2.jsonl p-2-2.jsonl >check.out 2>&1; then
	ok gpu_model_extension_predicts_a_bigger_run
else
	fail gpu_model_extension_predicts_a_bigger_run "$(head -c 600 check.out)"
fi
# and the check can fail: the same runs against a 2-layer run
if python3 "$TOP/tests/bench/gpu-model.py" --name tiny --layers 3 --hidden $C --heads $HEADS \
	--seq $SEQ --batch 3 --params 1 --run-seq $SEQ --check p-2-2.jsonl \
	p-1-1.jsonl p-2-1.jsonl p-1-2.jsonl p-2-2.jsonl >check2.out 2>&1; then
	fail gpu_model_check_notices_a_different_run "$(tail -1 check2.out)"
else
	ok gpu_model_check_notices_a_different_run
fi

# the step model of train --dry-run against gpu-model.py: first the shared table
dry() {   # dry OUT LAYERS MICRO_BATCH GPU: the dry-run plan of that run, as JSON
	"$BIN/train" --dry-run --format json --num-layers "$2" --hidden-size $C \
		--num-attention-heads $HEADS --seq-length $SEQ --max-position-embeddings $SEQ \
		--micro-batch-size "$3" --global-batch-size "$3" --train-iters 3 --lr 1e-4 --bf16 \
		--data-path rand --vocab-file vocab.json --merge-file merges.txt --split 1000,0,0 \
		--nodes 1 --gpus-per-node 1 --gpu-model "$4" >"$1" 2>"$1.err"
}
dry c-3-3-h100.json 3 3 h100 && dry c-3-3-a100.json 3 3 a100 && dry c-6-512-a100.json 6 512 a100 &&
	dry c-4-3-h100.json 4 3 h100 || fail step_model_dry_runs "$(cat c-*.err)"
python3 - "$TOP/tests/bench/gpu-model.py" c-3-3-h100.json c-3-3-a100.json <<'PYEOF' && ok step_model_table_is_gpu_model_pys || fail step_model_table_is_gpu_model_pys "see above"
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("gm", sys.argv[1])
gm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gm)
bad = []
for f in sys.argv[2:]:
    s = json.load(open(f))["time"]["step_model"]
    dev = gm.DEVICES[s["device"]]
    for k, v in s["peaks"].items():
        if dev[k] != v:
            bad.append("%s %s: %r here, %r in gpu-model.py" % (s["device"], k, v, dev[k]))
    e = s["efficiencies"]
    want = dict(gemm_train=gm.EFF["gemm_train"], simt=gm.EFF["simt"], hbm=gm.EFF["hbm"],
                k_half=gm.K_HALF, split_k=gm.SPLIT_K, gap_s=gm.GAP, sync_s=gm.SYNC,
                tiles=[list(t) for t in gm.TILES])
    for k, v in want.items():
        if e[k] != v:
            bad.append("%s: %r here, %r in gpu-model.py" % (k, e[k], v))
for b in bad:
    print("# " + b)
sys.exit(1 if bad else 0)
PYEOF
# then the operations, one by one: gpu-model.py on the four small runs, extended to the dry run's
# layers and micro-batch.  At the profiled run and extended to micro-batch 512 (16384 rows) counts,
# bytes, FLOPs and times agree: every buffer is per token or per weight, and the layer-norm
# backward's column-sum partials (norm.cu ln_bwd_k: slices of 32 rows, at most 512 of them) grow
# with the rows up to there, as the bias gradients' column sums over fixed slices did not
agree() {   # agree LAYERS MICRO_BATCH DEVICE C_JSON [times]: exit 0 when every op is within 3%
	python3 "$TOP/tests/bench/gpu-model.py" --name tiny --layers "$1" --hidden $C --heads $HEADS \
		--seq $SEQ --batch "$2" --params 1 --run-seq $SEQ --json "py-$1-$2.json" \
		p-1-1.jsonl p-2-1.jsonl p-1-2.jsonl p-2-2.jsonl >/dev/null || return 2
	python3 - "py-$1-$2.json" "$4" "$3" "${5:-all}" <<'PYEOF'
import json, sys
py = next(iter(json.load(open(sys.argv[1])).values()))[sys.argv[3]]["ops"]
c = json.load(open(sys.argv[2]))["time"]["step_model"]["ops"]
def rows(ops):
    t = {}
    for o in ops:
        r = t.setdefault(o["op"], [0.0, 0.0, 0.0, 0.0])
        for i, k in enumerate(("count", "bytes", "flops", "seconds")):
            r[i] += o[k]
    return t
a, b = rows(py), rows(c)
bad, worst = [], 0.0
for n in sorted(set(a) | set(b)):
    x, y = a.get(n, [0.0] * 4), b.get(n, [0.0] * 4)
    rel = [abs(p - q) / max(abs(p), abs(q)) if max(abs(p), abs(q)) else 0.0 for p, q in zip(x, y)]
    worst = max(worst, rel[3])
    # counts exactly; times within 3%; bytes and FLOPs, where compared, within 0.1% (only the
    # AdamW launch's segment table is counted differently: 32 bytes per tensor, of 43 MB)
    if abs(x[0] - y[0]) > 0.5 or rel[3] > 0.03 or (sys.argv[4] == "all" and max(rel[1:3]) > 0.001):
        bad.append("%s: gpu-model.py %.0f x, %.0f B, %.3g FLOP, %.2f us; train --dry-run %.0f x, "
                   "%.0f B, %.3g FLOP, %.2f us" % (n, x[0], x[1], x[2], x[3] * 1e6, y[0], y[1], y[2],
                                                   y[3] * 1e6))
for m in bad[:6]:
    print("# " + m)
print("# %s: %d operations, the largest time difference %.2f%%, %d beyond the tolerances" % (
    sys.argv[3], len(set(a) | set(b)), 100 * worst, len(bad)))
sys.exit(1 if bad else 0)
PYEOF
}
agree 3 3 "H100 SXM" c-3-3-h100.json >agree.out && agree 3 3 "A100 SXM" c-3-3-a100.json >>agree.out &&
	ok step_model_ops_agree_with_gpu_model_py_on_the_profiled_run ||
	fail step_model_ops_agree_with_gpu_model_py_on_the_profiled_run "$(cat agree.out)"
agree 6 512 "A100 SXM" c-6-512-a100.json >agree.out && ok step_model_ops_agree_with_gpu_model_py_extended ||
	fail step_model_ops_agree_with_gpu_model_py_extended "$(cat agree.out)"
# and the comparison can fail: a 4-layer dry run against gpu-model.py's 3 layers
if agree 3 3 "H100 SXM" c-4-3-h100.json >agree.out; then
	fail step_model_comparison_notices_another_run "$(tail -1 agree.out)"
else
	ok step_model_comparison_notices_another_run
fi

# refusals
expect_rc profile_refused_on_cpu 2 "$BIN/train" --num-layers 1 --hidden-size $C \
	--num-attention-heads $HEADS --seq-length $SEQ --max-position-embeddings $SEQ \
	--micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-4 --data-path rand \
	--vocab-file vocab.json --merge-file merges.txt --split 1000,0,0 --device cpu --profile
contains profile_refusal_names_the_backend "$T/err" "--profile.*cpu backend"
expect_rc profile_empty_range_refused 2 env LMTK_CUDA_PLUGIN=$EXEC "$BIN/train" --num-layers 1 \
	--hidden-size $C --num-attention-heads $HEADS --seq-length $SEQ --max-position-embeddings $SEQ \
	--micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-4 --data-path rand \
	--vocab-file vocab.json --merge-file merges.txt --split 1000,0,0 --device cuda --profile \
	--profile-step-start 3 --profile-step-end 3
# the range's flags without --profile do nothing, and say so
LMTK_CUDA_PLUGIN=$EXEC "$BIN/train" --num-layers 1 --hidden-size $C --num-attention-heads $HEADS \
	--seq-length $SEQ --max-position-embeddings $SEQ --micro-batch-size 1 --global-batch-size 1 \
	--train-iters 1 --lr 1e-4 --data-path rand --vocab-file vocab.json --merge-file merges.txt \
	--split 1000,0,0 --eval-iters 0 --device cuda --profile-step-start 0 --gpu-model h100 \
	--step-model megatron-deepspeed >norange.out 2>&1
contains profile_range_without_profile_is_named norange.out "^train: --profile-step-start.*no effect without --profile"
contains gpu_model_without_dry_run_is_named norange.out "^train: --gpu-model: no effect without --dry-run"
contains step_model_without_dry_run_is_named norange.out "^train: --step-model: no effect without --dry-run"
