#!/usr/bin/env bash
# The CUDA backend, run: on the CPU executor (tests/cuda-exec, build/lib/lmtk/train-cuda-exec.so:
# the same .cu files compiled by the host compiler, every memory access of every kernel checked)
# in every `make check`, and on the GPU as well where there is one.
# 1. Every ops.h function against the CPU backend at bf16 tolerances on awkward shapes
#    (build/tests/train_cudaops), under two thread orders that must give identical bits; and
#    again with fp16 activations (--fp16, train --fp16's arithmetic) at fp16's tolerances.
# 2. The whole model, GPT-2 and BLOOM tiny shapes, against PyTorch with bf16 tolerances
#    (logits, loss, every gradient, 10 AdamW steps), as tests/cli/train-model.sh does for the CPU;
#    and the same bits under another thread order; GPT-2 in fp16 at fp16's tolerances.
# 3. A short training run through bin/train --device cuda that must learn; --fp16 runs in real
#    fp16 and its loss scaler backs off from a huge scale as the CPU's does.
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
# The attention backward's dQ chain takes key tiles from a ticket per head, so its waits end in
# any dispatch order: the reverse run above starts the last key tile first, and the executor runs
# each block to its end (a wait on a block not yet started is a deadlock there).  And a backward
# stopped midway (LMTK_CUDA_EXEC_ABANDON: its semaphores half counted, its tickets advanced)
# leaves nothing the next one trips over: it neither hangs nor differs from the CPU.
for order in forward random:3; do
	LMTK_CUDA_PLUGIN=$EXEC LMTK_CUDA_EXEC_ORDER=$order LMTK_CUDA_EXEC_ABANDON=attn_bwd_mma_k:2 \
		timeout 600 "$TOP/build/tests/train_cudaops" --only abandoned >"ops-abandon-$order.out" 2>&1
	rc=$?
	grep -q '^ok cuda_attention_backward_after_an_abandoned_one' "ops-abandon-$order.out" &&
		grep -q 'ABANDON: launch #[0-9]* attn_bwd_mma_k.* stops after 2 of its 6 blocks' "ops-abandon-$order.out" &&
		ok "exec_attention_backward_after_one_abandoned_midway_matches_cpu_${order%%:*}_order" ||
		fail "exec_attention_backward_after_one_abandoned_midway_matches_cpu_${order%%:*}_order" \
			"exit $rc: $(grep -v '^# NV' "ops-abandon-$order.out" | tail -3)"
done
# the same cases on the fp16 kernels (train --fp16), at fp16's tolerance, 8 times bf16's
LMTK_CUDA_PLUGIN=$EXEC LMTK_CUDA_EXEC_ORDER=random:5 "$TOP/build/tests/train_cudaops" --fp16 \
	>ops-fp16.out 2>&1
rc=$?
sed -E "s/^(ok|FAIL|skip) ([a-z0-9_]+)/\1 exec_fp16_\2/" ops-fp16.out
[ $rc = 0 ] || grep -q '^FAIL' ops-fp16.out || fail exec_fp16_cuda_ops_run "exit $rc: $(tail -5 ops-fp16.out)"

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
# cublasLtMatmul itself refusing one shape (the executor's LMTK_CUDA_EXEC_LT_FAIL; the cases'
# 37 x 64 -> 96 layers' forward GEMM, m=96 n=37 k=64, fused with GeLU and plain):
# NOT_SUPPORTED - the shape falls back, said once per kind of GEMM with what it runs instead,
# and the numbers still match the CPU's
LMTK_CUDA_PLUGIN=$EXEC LMTK_CUDA_EXEC_LT_FAIL=unsupported:96,37,64 "$TOP/build/tests/train_cudaops" \
	--only cuda_matmul >ops-ltunsup.out 2>&1
rc=$?
sed -nE "s/^(ok|FAIL|skip) ([a-z0-9_]+)/\1 exec_\2_where_cublaslt_answers_not_supported/p" ops-ltunsup.out
w='^train: cuda: warning: cuBLASLt has no algorithm for the'
n_fwd=$(grep -c "$w linear forward GEMM m=96 n=37 k=64 (op(A) T, op(B) N, lda 64, ldb 64, ldd 96; .* epilogue BIAS; .*CUBLAS_STATUS_NOT_SUPPORTED); this shape runs cublasGemmEx and a separate bias add" ops-ltunsup.out)
n_gelu=$(grep -c "$w GeLU-fused forward GEMM m=96 n=37 k=64 .*epilogue GELU_AUX_BIAS.*; this shape runs the unfused GEMM, bias and GeLU kernels" ops-ltunsup.out)
n_all=$(grep -c "$w" ops-ltunsup.out)
[ $rc = 0 ] && [ "$n_fwd" = 1 ] && [ "$n_gelu" = 1 ] && [ "$n_all" = 2 ] &&
	ok exec_cublaslt_not_supported_warns_once_per_shape_with_its_fallback ||
	fail exec_cublaslt_not_supported_warns_once_per_shape_with_its_fallback \
		"exit $rc, warnings: forward $n_fwd, gelu $n_gelu, all $n_all: $(grep -v '^# NV' ops-ltunsup.out | head -3)"
# INVALID_VALUE - a bug in the call, not a shape to reroute: the run stops (exit 3) naming the
# whole GEMM, and nothing falls back
LMTK_CUDA_PLUGIN=$EXEC LMTK_CUDA_EXEC_LT_FAIL=invalid:96,37,64 "$TOP/build/tests/train_cudaops" \
	--only cuda_matmul_matches >ops-ltinval.out 2>&1
rc=$?
[ $rc = 3 ] && grep -q '^train: cuda: cublasLtMatmul refused the linear forward GEMM m=96 n=37 k=64 (op(A) T, op(B) N, lda 64, ldb 64, ldd 96; A, B bf16, D bf16; epilogue BIAS; pointers aligned to .*): CUBLAS_STATUS_INVALID_VALUE, a bug' ops-ltinval.out &&
	! grep -q '^ok \|warning' ops-ltinval.out &&
	ok exec_cublaslt_invalid_value_stops_naming_the_gemm ||
	fail exec_cublaslt_invalid_value_stops_naming_the_gemm "exit $rc: $(grep -v '^# NV' ops-ltinval.out | tail -3)"

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
	# --fp16: the GPT-2 shape in real fp16 against PyTorch at fp16's tolerance (bf16's / 8),
	# which the bf16 run above does not meet
	sed 's/"device": "cuda"/"device": "cuda", "fp16": true/' gpt2.json >gpt2-fp16.json
	ref() {   # ref CONFIG DUMPDIR TOLERANCE
		"$PY" "$TOP/tests/ref/gpt-ref.py" --config "$1" --weights "$2/init.safetensors" \
			--batch "$2/batch.safetensors" --compare "$2/c.safetensors" --tolerance "$3"
	}
	if LMTK_CUDA_PLUGIN=$EXEC "$TOP/build/tests/train_model" --dump gpt2-fp16.json exec-fp16-gpt2 \
		>exec-fp16-gpt2.dump 2>&1 && ref gpt2-fp16.json exec-fp16-gpt2 fp16 >exec-fp16-gpt2.cmp 2>&1; then
		ok exec_cuda_fp16_gpt2_logits_loss_grads_and_10_steps_match_pytorch_fp16
	else
		fail exec_cuda_fp16_gpt2_logits_loss_grads_and_10_steps_match_pytorch_fp16 \
			"$(tail -3 exec-fp16-gpt2.dump exec-fp16-gpt2.cmp)"
	fi
	[ -s exec-gpt2/c.safetensors ] && ! ref gpt2.json exec-gpt2 fp16 >/dev/null 2>&1 &&
		ok fp16_tolerance_discriminates_the_bf16_run ||
		fail fp16_tolerance_discriminates_the_bf16_run "the bf16 run met fp16's tolerance"
	if [ $GPU = 1 ]; then
		model_vs_pytorch gpu "$SO"
	else
		skip gpu_cuda_matches_pytorch "no GPU here"
	fi
fi

# --- 3. training learns ---------------------------------------------------------------------------
cuda_exec_unshadowed   # the kernels ran under the race shadow in 1 and 2
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
# a curriculum through the executor: micro-batches cut to 8, 16, 24 ... as on the CPU backend,
# with the same lengths and the CPU's losses within bf16's tolerance
cat >cl.json <<'JSON'
{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
 "curriculum_learning": {"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8,
  "max_difficulty": 32, "schedule_type": "fixed_linear",
  "schedule_config": {"total_curriculum_step": 4, "difficulty_step": 8}}}
JSON
CL=(--num-layers 2 --num-attention-heads 4 --hidden-size 64 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 4 --global-batch-size 8 --train-samples 48
	--lr 3e-3 --lr-warmup-samples 8 --data-path meg-gpt2-openwebtext_text_document
	--vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt"
	--log-interval 1 --eval-iters 0 --deepspeed --deepspeed_config cl.json)
LMTK_CUDA_PLUGIN=$EXEC "$TOP/bin/train" "${CL[@]}" --device cuda >cl-exec.out 2>&1
"$TOP/bin/train" "${CL[@]}" --device cpu --threads 1 >cl-cpu.out 2>&1
lens() { sed -n 's/.*lm loss: \([^ ]*\) .*curriculum seqlen: *\([0-9]*\) .*/\2 \1/p' "$1"; }
if "$PY" - <(lens cl-cpu.out) <(lens cl-exec.out) <<'PYEOF' 2>cl.err
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 6, (len(a), len(b))
assert [x[0] for x in a] == ["8", "16", "24", "32", "32", "32"], a
for x, y in zip(a, b):
    assert x[0] == y[0] and abs(float(x[1]) - float(y[1])) <= 2e-2 * float(x[1]), (x, y)
PYEOF
then ok exec_curriculum_matches_cpu
else fail exec_curriculum_matches_cpu "$(tail -1 cl.err); $(tail -2 cl-exec.out)"; fi
# dropout through the fused residual + layer norm kernels: the executor's run keeps to the CPU
# backend's losses and gradient norms iteration by iteration (the masks are the same Philox
# draws on both backends, so a mask keyed to the wrong layer or site shows here)
DR=(--num-layers 3 --num-attention-heads 4 --hidden-size 64 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 4 --global-batch-size 8 --train-iters 6
	--lr 1e-3 --hidden-dropout 0.3 --attention-dropout 0 --data-path meg-gpt2-openwebtext_text_document
	--vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt"
	--log-interval 1 --eval-iters 0)
LMTK_CUDA_PLUGIN=$EXEC "$TOP/bin/train" "${DR[@]}" --device cuda >dr-exec.out 2>&1
"$TOP/bin/train" "${DR[@]}" --device cpu --threads 1 >dr-cpu.out 2>&1
"$TOP/bin/train" "${DR[@]}" --device cpu --threads 1 --hidden-dropout 0.25 >dr-other.out 2>&1
lg() { sed -n 's/.*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2/p' "$1"; }
drcheck() {   # drcheck A B TOL: every iteration's loss and grad norm within TOL (relative)
	"$PY" - <(lg "$1") <(lg "$2") "$3" <<'PYEOF'
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
tol = float(sys.argv[3])
assert len(a) == len(b) == 6, (len(a), len(b))
for x, y in zip(a, b):
    for u, v in zip(x, y):
        assert abs(float(u) - float(v)) <= tol * abs(float(u)), (x, y)
PYEOF
}
drcheck dr-cpu.out dr-exec.out 1e-2 2>dr.err && ok exec_dropout_matches_cpu || fail exec_dropout_matches_cpu "$(tail -1 dr.err)"
# and the comparison tells masks apart: the same run with other masks (rate 0.25) fails it
drcheck dr-cpu.out dr-other.out 1e-2 2>/dev/null && fail dropout_comparison_discriminates "other masks passed" || ok dropout_comparison_discriminates
# --fp16 through the executor: real fp16 arithmetic (half activations and weights), so from a
# huge initial scale the loss scaler's overflows are genuine - the scaled gradient of the logits,
# (softmax - 1) x 2^24 / 256 tokens, is beyond fp16's 65504 and the gradient norm comes out
# inf or nan, where the CPU (fp32 arithmetic, Megatron's overflow test on values beyond 65504)
# sees finite ones - and yet the scaler backs off and skips the same iterations to the same
# final scale as the CPU's; the losses of the applied steps and the finite gradient norms keep
# to the CPU's within fp16's tolerance (1e-3 relative, about two roundings to fp16; measured:
# a few 1e-6).  A backend that computed in bf16 here would show no overflow at 2^24.
FP=(--num-layers 2 --num-attention-heads 4 --hidden-size 64 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 4 --global-batch-size 8 --train-iters 14
	--lr 1e-3 --data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --log-interval 1 --eval-iters 0 --fp16
	--loss-scale-window 4 --initial-loss-scale 16777216)
LMTK_CUDA_PLUGIN=$EXEC "$TOP/bin/train" "${FP[@]}" --device cuda >fp-exec.out 2>&1
"$TOP/bin/train" "${FP[@]}" --device cpu --threads 1 >fp-cpu.out 2>&1
contains exec_fp16_says_it_computes_in_fp16 fp-exec.out '^train: --fp16: the cuda backend computes in fp16 '
# per iteration: loss (- when skipped), scale, grad norm, skipped, nan
fps() { sed -n 's/.*lm loss: \([^ ]*\) .*loss scale: \([^ ]*\) .*grad norm: \([^ ]*\) .*skipped iterations: *\([0-9]*\) .*nan iterations: *\([0-9]*\) .*/\1 \2 \3 \4 \5/p
	s/.*loss scale: \([^ ]*\) .*grad norm: \([^ ]*\) .*skipped iterations: *\([0-9]*\) .*nan iterations: *\([0-9]*\) .*/- \1 \2 \3 \4/p' "$1"; }
if "$PY" - <(fps fp-cpu.out) <(fps fp-exec.out) <(grep '^train: done' fp-cpu.out) \
	<(grep '^train: done' fp-exec.out) <<'PYEOF' 2>fp.err
import math, sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 14, (len(a), len(b))
fin = lambda s: math.isfinite(float(s))
assert b[0][3] == "1" and not fin(b[0][2]) and fin(a[0][2]), (a[0], b[0])  # a genuine overflow
assert sum(x[3] == "0" for x in a) >= 4, a                                # steps were applied
for x, y in zip(a, b):
    assert x[1] == y[1] and x[3] == y[3] and x[4] == y[4] == "0", (x, y)   # scale, skipped
    if x[0] != "-":
        assert abs(float(x[0]) - float(y[0])) <= 1e-3 * float(x[0]), (x, y)   # loss
    if fin(y[2]):
        assert abs(float(x[2]) - float(y[2])) <= 2e-3 * float(x[2]), (x, y)   # grad norm
done = [open(f).read().split(":", 1)[1].rsplit(",", 1)[0] for f in sys.argv[3:5]]
assert done[0] == done[1], done          # the skipped total and the final iteration
PYEOF
then ok exec_fp16_overflows_back_off_and_skip_as_the_cpus_scaler
else fail exec_fp16_overflows_back_off_and_skip_as_the_cpus_scaler "$(tail -1 fp.err)"; fi
# --use-bnb-optimizer through the executor: the CUDA backend's 8-bit and 32-bit Adam kernels
# (bnb.cu; bit for bit against the CPU's in train_cudaops) in a run - the same state allocated,
# the losses and gradient norms within bf16's tolerance of the CPU backend's, and a checkpoint
# with the same tensors (8-bit codes, absmax, fp32 moments of the embedding) as the CPU's
BN=(--num-layers 2 --num-attention-heads 4 --hidden-size 64 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 4 --global-batch-size 8 --train-iters 6
	--lr 3e-3 --data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --log-interval 1 --eval-iters 0 --use-bnb-optimizer
	--save-interval 6)
LMTK_CUDA_PLUGIN=$EXEC "$TOP/bin/train" "${BN[@]}" --device cuda --save bn-exec >bn-exec.out 2>&1
"$TOP/bin/train" "${BN[@]}" --device cpu --threads 1 --save bn-cpu >bn-cpu.out 2>&1
ob() { grep '^train: optimizer:' "$1" | sed 's/ allocated on this rank//'; }
if [ -n "$(ob bn-cpu.out)" ] && [ "$(ob bn-cpu.out)" = "$(ob bn-exec.out)" ] && drcheck bn-cpu.out bn-exec.out 1e-2 2>bn.err; then
	ok exec_bnb_optimizer_matches_cpu
else
	fail exec_bnb_optimizer_matches_cpu "$(tail -1 bn.err) $(ob bn-exec.out) $(tail -2 bn-exec.out)"
fi
tensors() {   # name dtype shape of every tensor of a checkpoint's step directory
	"$PY" - "$1" <<'PYEOF'
import glob, json, struct, sys
for f in sorted(glob.glob(sys.argv[1] + "/global_step6/*.safetensors")):
    b = open(f, "rb").read(8); n = struct.unpack("<Q", b)[0]
    h = json.loads(open(f, "rb").read(8 + n)[8:]); h.pop("__metadata__", None)
    for k in sorted(h): print(k, h[k]["dtype"], h[k]["shape"])
PYEOF
}
if [ -n "$(tensors bn-cpu)" ] && [ "$(tensors bn-cpu)" = "$(tensors bn-exec)" ] && tensors bn-exec | grep -q ' U8 '; then
	ok exec_bnb_checkpoint_has_the_cpu_tensors
else
	fail exec_bnb_checkpoint_has_the_cpu_tensors "$(diff <(tensors bn-cpu) <(tensors bn-exec) | head -3)"
fi
if [ $GPU = 1 ]; then
	learns gpu "$SO" --hidden-size 128 --seq-length 128 --max-position-embeddings 128 \
		--micro-batch-size 8 --global-batch-size 16 --train-iters 60 --lr 1e-3
fi

rm -rf "$T"
