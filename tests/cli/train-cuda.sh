#!/usr/bin/env bash
# The CUDA backend, run: on the CPU executor (tests/cuda-exec, build/lib/lmtk/train-cuda-exec.so:
# the same .cu files compiled by the host compiler, every memory access of every kernel checked)
# in every `make check`, and on the GPU as well where there is one.
# 1. Every ops.h function against the CPU backend at bf16 tolerances on awkward shapes
#    (build/tests/train_cudaops), under two thread orders that must give identical bits.
# 2. The whole model, GPT-2 and BLOOM tiny shapes, against PyTorch with bf16 tolerances
#    (logits, loss, every gradient, 10 AdamW steps), as tests/cli/train-model.sh does for the CPU;
#    and the same bits under another thread order.
# 3. A short training run through bin/train --device cuda that must learn.
# 4. --fp16: the dynamic loss scaler's trajectory and skipped steps as the CPU backend's run.
# Where nvcc exists, the real plugin was also compiled and exports its entry point.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
SO=$TOP/build/lib/lmtk/train-cuda.so
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
cd "$T" || exit 3
if [ -n "$NVCC" ]; then
	[ -s "$SO" ] && ok cuda_backend_compiled || fail cuda_backend_compiled "nvcc is $NVCC but $SO is missing"
	nm -D --defined-only "$SO" 2>/dev/null | grep -qw lmtk_ops_cuda &&
		ok cuda_backend_exports_its_entry_point || fail cuda_backend_exports_its_entry_point "no lmtk_ops_cuda in $SO"
else
	skip cuda_backend_compiled "no nvcc on this machine"
fi
# The executor's NCCL test (tests/cuda-exec/nccltest.cu, run as build/tests/cuda_exec_nccl) uses only
# NCCL's and the runtime's API: where CUDA has the real nccl.h it compiles, and links against the
# real libnccl, as well as against the executor's headers.
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -f "$CUDA_HOME/include/nccl.h" ]; then
	if [ -e "$CUDA_HOME/lib64/libnccl.so" ]; then
		link=(-L"$CUDA_HOME/lib64" -lnccl -lcudart -o nccltest-real) name=_and_links_against_libnccl
	else
		link=(-fsyntax-only) name=
	fi
	if "${CXX:-g++}" -x c++ -std=c++17 -I"$CUDA_HOME/include" "$TOP/tests/cuda-exec/nccltest.cu" \
		"${link[@]}" >nccl-real.err 2>&1; then
		ok "exec_nccl_test_source_compiles_against_the_real_nccl_h$name"
	else
		fail exec_nccl_test_source_compiles_against_the_real_nccl_h "$(head -5 nccl-real.err)"
	fi
else
	skip exec_nccl_test_source_compiles_against_the_real_nccl_h "no $CUDA_HOME/include/nccl.h here"
fi

# a GPU here? (train_cudaops says skip when the real plugin cannot open one)
GPU=0
if [ -s "$SO" ] && LMTK_CUDA_PLUGIN=$SO "$TOP/build/tests/train_cudaops" --only converts 2>&1 | grep -q '^ok '; then
	GPU=1
fi
if [ ! -s "$EXEC" ]; then
	fail cuda_executor_built "$EXEC is missing (make builds it from src/train/cuda and tests/cuda-exec)"
	exit 0
fi

# --- 1. the ops, under two thread orders ---------------------------------------------------------
for order in forward reverse; do
	LMTK_CUDA_PLUGIN=$EXEC LMTK_CUDA_EXEC_ORDER=$order "$TOP/build/tests/train_cudaops" \
		--dump "ops-$order.bin" >"ops-$order.out" 2>&1
	rc=$?
	sed -E "s/^(ok|FAIL|skip) ([a-z0-9_]+)/\1 exec_\2_${order}_order/" "ops-$order.out"
	[ $rc = 0 ] || grep -q '^FAIL' "ops-$order.out" ||
		fail "exec_cuda_ops_run_${order}_order" "exit $rc: $(tail -5 "ops-$order.out")"
done
if [ -s ops-forward.bin ] && cmp -s ops-forward.bin ops-reverse.bin; then
	ok exec_cuda_ops_give_identical_bits_under_forward_and_reverse_thread_orders
else
	fail exec_cuda_ops_give_identical_bits_under_forward_and_reverse_thread_orders \
		"$(cmp ops-forward.bin ops-reverse.bin 2>&1 | head -1)"
fi

if [ $GPU = 1 ]; then   # the same cases on the GPU itself
	LMTK_CUDA_PLUGIN=$SO "$TOP/build/tests/train_cudaops" >ops-gpu.out 2>&1
	rc=$?
	sed -E "s/^(ok|FAIL|skip) ([a-z0-9_]+)/\1 gpu_\2/" ops-gpu.out
	[ $rc = 0 ] || grep -q '^FAIL' ops-gpu.out || fail gpu_cuda_ops_run "exit $rc: $(tail -5 ops-gpu.out)"
else
	skip gpu_cuda_ops_match_cpu "no GPU here"
fi

# where cuBLASLt offers no algorithm (odd shapes on some GPUs), matmul falls back to cublasGemmEx
LMTK_CUDA_PLUGIN=$EXEC LMTK_CUDA_EXEC_LT_NOALGO=1 "$TOP/build/tests/train_cudaops" --only matmul \
	>ops-gemmex.out 2>&1
sed -E "s/^(ok|FAIL|skip) ([a-z0-9_]+)/\1 exec_\2_through_the_cublasgemmex_fallback/" ops-gemmex.out

# --- 2. the model against PyTorch -----------------------------------------------------------------
cfg() {   # cfg NAME POS EMBED_LN LAYERS HIDDEN HEADS
	cat >"$1.json" <<JSON
{"num_layers": $4, "hidden_size": $5, "num_attention_heads": $6, "ffn_hidden_size": $((4 * $5)),
 "seq_length": 64, "max_position_embeddings": 64, "vocab_size": 100, "padded_vocab_size": 128,
 "position_embedding_type": "$2", "embed_layernorm": $3, "layernorm_epsilon": 1e-5,
 "hidden_dropout": 0, "attention_dropout": 0, "lr": 2e-3, "adam_beta1": 0.9, "adam_beta2": 0.95,
 "adam_eps": 1e-6, "weight_decay": 0.1, "clip_grad": 1.0, "init_method_std": 0.1, "seed": 7,
 "micro_batch_size": 3, "steps": 10, "device": "cuda"}
JSON
}
cfg gpt2 learned false 2 128 4
cfg bloom alibi true 2 160 5

model_vs_pytorch() {   # model_vs_pytorch LABEL PLUGIN (env: the executor's settings)
	local label=$1 m rc
	for m in gpt2 bloom; do
		if ! LMTK_CUDA_PLUGIN=$2 "$TOP/build/tests/train_model" --dump "$m.json" "$label-$m" \
			>"$label-$m.dump" 2>&1; then
			fail "${label}_cuda_${m}_dumps" "$(head -c 400 "$label-$m.dump")"
			continue
		fi
		"$PY" "$TOP/tests/ref/gpt-ref.py" --config "$m.json" --weights "$label-$m/init.safetensors" \
			--batch "$label-$m/batch.safetensors" --compare "$label-$m/c.safetensors" \
			--tolerance bf16 >"$label-$m.cmp" 2>&1
		rc=$?
		[ $rc = 0 ] && ok "${label}_cuda_${m}_logits_loss_grads_and_10_steps_match_pytorch_bf16" ||
			fail "${label}_cuda_${m}_logits_loss_grads_and_10_steps_match_pytorch_bf16" "exit $rc: $(tail -6 "$label-$m.cmp")"
	done
}
if ! "$PY" -c 'import torch' 2>/dev/null; then
	skip cuda_matches_pytorch "python3-torch is not installed (make deps installs it)"
else
	LMTK_CUDA_EXEC_ORDER=random:11 model_vs_pytorch exec "$EXEC"
	# a whole step, 10 AdamW steps included, gives the same bits whatever the thread order
	LMTK_CUDA_PLUGIN=$EXEC LMTK_CUDA_EXEC_ORDER=reverse "$TOP/build/tests/train_model" --dump gpt2.json \
		exec-reverse-gpt2 >exec-reverse-gpt2.dump 2>&1
	if [ -s exec-gpt2/c.safetensors ] && cmp -s exec-gpt2/c.safetensors exec-reverse-gpt2/c.safetensors; then
		ok exec_cuda_gpt2_training_gives_identical_bits_under_random_and_reverse_thread_orders
	else
		fail exec_cuda_gpt2_training_gives_identical_bits_under_random_and_reverse_thread_orders \
			"$(cmp exec-gpt2/c.safetensors exec-reverse-gpt2/c.safetensors 2>&1; tail -2 exec-reverse-gpt2.dump)"
	fi
	if [ $GPU = 1 ]; then
		model_vs_pytorch gpu "$SO"
	else
		skip gpu_cuda_matches_pytorch "no GPU here"
	fi
fi

# --- 3. training learns ---------------------------------------------------------------------------
MEG=$(tiny_dataset) || exit 3   # a dataset to train on; the reference one is not needed
cp "$MEG"/meg-gpt2-openwebtext_text_document.* .
learns() {   # learns LABEL PLUGIN TRAIN-FLAGS...
	local label=$1 plugin=$2 rc first last
	shift 2
	LMTK_CUDA_PLUGIN=$plugin "$TOP/bin/train" --num-layers 2 --num-attention-heads 4 "$@" \
		--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json" \
		--merge-file "$MEG/gpt2-tiny-merges.txt" --log-interval 10 --eval-iters 0 --device cuda >"$label.out" 2>&1
	rc=$?
	first=$(grep -m1 '^ iteration ' "$label.out" | sed 's/.*lm loss: \([^ ]*\) .*/\1/')
	last=$(grep '^ iteration ' "$label.out" | tail -1 | sed 's/.*lm loss: \([^ ]*\) .*/\1/')
	[ $rc = 0 ] && "$PY" -c "import sys; sys.exit(not float('$last') < float('$first') - 0.5)" &&
		ok "${label}_cuda_training_run_learns" ||
		fail "${label}_cuda_training_run_learns" "exit $rc, loss $first -> $last: $(tail -3 "$label.out")"
}
learns exec "$EXEC" --hidden-size 64 --seq-length 32 --max-position-embeddings 32 \
	--micro-batch-size 4 --global-batch-size 8 --train-iters 20 --lr 3e-3
if [ $GPU = 1 ]; then
	learns gpu "$SO" --hidden-size 128 --seq-length 128 --max-position-embeddings 128 \
		--micro-batch-size 8 --global-batch-size 16 --train-iters 60 --lr 1e-3
fi

# --- 4. fp16: Megatron's dynamic loss scaler on the CUDA backend ---------------------------------
# --fp16 computes in bf16 on the CUDA backend (fp32 on the CPU one) and runs Megatron's scaler on
# the gradients' norm (optim.c: sumsq, then a non-finite norm is an overflow: skip the step, spend
# hysteresis, halve).  Both backends have fp32's exponent range, so the fp16 default 2^32 never
# overflows here: the runs start near the float limit so that the scaler acts.  A: default
# weights, the window doubles the scale every 2 clean steps until 2^128 = inf, whose gradients
# are Inf/NaN: those steps are skipped (and, as in Megatron, inf halved stays inf). B: weights of
# std 2, whose gradients overflow on each of the 5 batches already at 2^124 on both backends (at
# 2^123 not all do through the executor), while the run's scales go 2^127, 2^126, 2^125: every
# step skipped, the scale halved after each 2 overflows (hysteresis 2).  The loss-scale trajectory and the skipped steps must be the CPU run's step for
# step, and the losses and gradient norms of the steps taken within bf16's 1e-2.
fp16_run() {   # fp16_run LABEL DEVICE PLUGIN FLAGS...
	local label=$1 dev=$2 plugin=$3
	shift 3
	LMTK_CUDA_PLUGIN=$plugin "$TOP/bin/train" --num-layers 2 --num-attention-heads 4 --hidden-size 64 \
		--seq-length 32 --max-position-embeddings 32 --micro-batch-size 4 --global-batch-size 8 \
		--lr 3e-3 --data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json" \
		--merge-file "$MEG/gpt2-tiny-merges.txt" --log-interval 1 --eval-iters 0 --fp16 \
		--device "$dev" "$@" >"$label-$dev.out" 2>&1
}
fp16_case() {   # fp16_case LABEL WHAT PLUGIN FLAGS...: the test is named PLUGIN's way (exec, gpu)
	local label=$1 what=$2 plugin=$3 rc1 rc2 why pre=exec
	shift 3
	[ "$plugin" = "$SO" ] && pre=gpu label=gpu-$label
	fp16_run "$label" cpu "$plugin" "$@"
	rc1=$?
	fp16_run "$label" cuda "$plugin" "$@"
	rc2=$?
	if [ $rc1 != 0 ] || [ $rc2 != 0 ]; then
		fail "${pre}_cuda_fp16_${label#gpu-}_${what}" "exit $rc1 (cpu), $rc2 (cuda): $(tail -2 "$label-cuda.out")"
		return
	fi
	if why=$("$PY" - "$label-cpu.out" "$label-cuda.out" 2>&1 <<'PYEOF'
import re, sys
def steps(path):
    out = []
    for line in open(path):
        if not line.startswith(" iteration "):
            continue
        f = dict(re.findall(r"\| ([a-z ]+): +([^|]+?) (?=\|)", line))
        loss = f.get("lm loss")
        out.append((int(line.split()[1].split("/")[0]), float(f["loss scale"]),
                    int(f["number of skipped iterations"]), None if loss is None else float(loss),
                    float(f["grad norm"])))
    return out
cpu, cu = steps(sys.argv[1]), steps(sys.argv[2])
if len(cpu) != len(cu) or not cpu:
    sys.exit(f"{len(cpu)} iteration lines on the CPU, {len(cu)} through the executor")
for a, b in zip(cpu, cu):
    it = a[0]
    if a[1] != b[1] or a[2] != b[2]:
        sys.exit(f"iteration {it}: CPU loss scale {a[1]:g}, {a[2]} skipped; CUDA {b[1]:g}, {b[2]} skipped")
    if (a[3] is None) != (b[3] is None):
        sys.exit(f"iteration {it}: lm loss {a[3]} on the CPU, {b[3]} through the executor")
    if a[3] is not None and (abs(a[3] - b[3]) > 1e-2 * abs(a[3]) or abs(a[4] - b[4]) > 1e-2 * abs(a[4])):
        sys.exit(f"iteration {it}: lm loss {a[3]} / grad norm {a[4]} on the CPU, {b[3]} / {b[4]} through the executor")
print(" ".join(f"{s:g}{'(skip)' if k else ''}" for _, s, k, _, _ in cpu))
PYEOF
	); then
		ok "${pre}_cuda_fp16_${label#gpu-}_${what}"
		echo "  loss scales: $why"
	else
		fail "${pre}_cuda_fp16_${label#gpu-}_${what}" "$why"
	fi
}
for plugin in "$EXEC" $([ $GPU = 1 ] && echo "$SO"); do   # on the GPU too, where there is one
	fp16_case grow loss_scale_grows_then_overflows_and_skips_as_the_cpu_run "$plugin" --train-iters 11 \
		--initial-loss-scale "$("$PY" -c 'print(2.0**124)')" --loss-scale-window 2
	fp16_case halve overflows_halve_the_scale_after_hysteresis_as_the_cpu_run "$plugin" --train-iters 5 \
		--initial-loss-scale "$("$PY" -c 'print(2.0**127)')" --init-method-std 2.0
done
# the runs above must have seen what they are about: growth, overflows, skips and halvings
if grep -q 'skipped iterations:   1' grow-cuda.out 2>/dev/null && grep -q 'skipped iterations:   0' grow-cuda.out &&
	[ "$(grep -c 'skipped iterations:   1' halve-cuda.out 2>/dev/null)" = 5 ]; then
	ok exec_cuda_fp16_runs_saw_clean_steps_and_overflows
else
	fail exec_cuda_fp16_runs_saw_clean_steps_and_overflows "see grow-cuda.out, halve-cuda.out in $T"
fi
rm -rf "$T"
