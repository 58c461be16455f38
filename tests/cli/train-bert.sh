#!/usr/bin/env bash
# BERT (Megatron-LM's BertModel) against an independent PyTorch model, tests/ref/bert-ref.py:
# the C side (build/tests/train_model --dump) initialises a tiny BERT from its seed, makes
# BertDataset-shaped micro-batches (padding, two segments, 20% of the positions loss-masked,
# is_random) and writes its logits, lm and sop losses, every gradient, 10 optimizer steps'
# losses and gradient norms and the final weights; the reference computes the same in float64
# with Megatron's own padding mask (-10000 fill) and compares.
#   - CPU, binary head, two token types, AdamW (fp32 tolerances)
#   - CPU, --bert-no-binary-head shape, no token types, the post-LN residual, --openai-gelu, and
#     10 steps of LAMB (apex FusedLAMB's algorithm, gpt-ref.py's lamb_step)
#   - TP=2 over two MPI ranks (vocab-parallel LM head and cross-entropy, replicated pooler and
#     heads bit-identical across the ranks, 3 AdamW steps), the same reference
#   - the CUDA backend through the CPU executor at bf16 tolerances (3 AdamW steps), with samples
#     longer than an attention tile (keys cut inside the second tile)
#   - the comparison catches a wrong model: a causal mask left on, token types dropped, a pooler
#     without tanh, the other GeLU in the LM head, the padding mask ignored, the sop loss summed
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
DUMP=$TOP/build/tests/train_model
REF=$TOP/tests/ref/bert-ref.py
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
cd "$T" || exit 3
if ! "$PY" -c 'import torch' 2>/dev/null; then
	skip bert_matches_pytorch "python3-torch is not installed (make deps installs it)"
	exit 0
fi

cfg() {   # cfg NAME SEQ HIDDEN HEADS [EXTRA JSON KEYS]
	cat >"$1.json" <<JSON
{"model_type": "bert", ${5:-} "num_layers": 2, "hidden_size": $3, "num_attention_heads": $4,
 "ffn_hidden_size": $((4 * $3)), "seq_length": $2, "max_position_embeddings": $(($2 + 8)),
 "vocab_size": 100, "padded_vocab_size": 128, "position_embedding_type": "learned",
 "embed_layernorm": false, "layernorm_epsilon": 1e-5, "hidden_dropout": 0, "attention_dropout": 0,
 "lr": 2e-3, "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-6, "weight_decay": 0.1,
 "clip_grad": 1.0, "init_method_std": 0.1, "seed": 7, "micro_batch_size": 3, "steps": 10}
JSON
}
cfg bert 24 64 4 '"num_tokentypes": 2, "binary_head": true,'
cfg bertlamb 24 64 4 '"num_tokentypes": 0, "binary_head": false, "openai_gelu": true,
 "apply_residual_connection_post_layernorm": true, "optimizer": "lamb",'
sed -i 's/"clip_grad": 1.0/"clip_grad": 0/; s/"lr": 2e-3/"lr": 5e-3/' bertlamb.json
cfg berttp2 24 64 4 '"num_tokentypes": 2, "binary_head": true, "tp": 2,'
sed -i 's/"steps": 10/"steps": 3/' berttp2.json   # TP's gradients; the steps are TP1's
cfg bertcuda 80 64 2 '"num_tokentypes": 2, "binary_head": true, "device": "cuda",'
sed -i 's/"steps": 10/"steps": 3/' bertcuda.json   # the executor is slow: logits, grads, 3 steps

# the C side's dumps, then every comparison in one Python process (bert-ref.py --many)
dumped() {   # dumped NAME [dump command prefix...]: dumps, and queues NAME's comparison
	local m=$1
	shift
	if ! "$@" "$DUMP" --dump "$m.json" "$m" >"$m.dump" 2>&1; then
		fail "${m}_model_dumps" "$(head -c 400 "$m.dump")"
		return 1
	fi
	local tol=fp32
	[ "$m" = bertcuda ] && tol=bf16
	echo "$m.cmp --config $m.json --weights $m/init.safetensors --batch $m/batch.safetensors" \
		"--compare $m/c.safetensors --tolerance $tol" >>many.txt
}
verdict() {   # verdict NAME LABEL
	local m=$1 label=$2
	if [ ! -s "$m.cmp" ]; then
		fail "$label" "not compared"
		return
	fi
	if grep -q '^exit 0$' "$m.cmp" && grep -q "within tolerance" "$m.cmp"; then ok "$label"
	else fail "$label" "$(grep -v within "$m.cmp" | tail -5)"; fi
	for item in logits lm_loss sop_loss lm_losses grad_norms; do
		contains "${m}_compares_$item" "$m.cmp" "^$item +maxdiff"
	done
}
: >many.txt
dumped bert
dumped bertlamb
mpi=0
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	mpi=1
	dumped berttp2 mpirun --oversubscribe -np 2
fi
if [ -s "$EXEC" ]; then
	LMTK_CUDA_PLUGIN=$EXEC dumped bertcuda env LMTK_CUDA_EXEC_ORDER=random:11
else
	fail cuda_executor_built "$EXEC is missing"
fi
# the comparison can fail: each mistake, made in the reference, is caught
[ -s bert/c.safetensors ] && echo "mut.out --config bert.json --weights bert/init.safetensors" \
	"--batch bert/batch.safetensors --compare bert/c.safetensors --only logits,loss,grads" \
	"--mutations causal,no_tokentypes,pooler_linear,head_gelu,padding_ignored,sop_sum" >>many.txt
"$PY" "$REF" --many many.txt >many.out 2>&1

verdict bert bert_logits_lm_and_sop_loss_grads_and_10_adamw_steps_match_pytorch
n=$(grep -c '^grad\.[a-z_.0-9]* ' bert.cmp); f=$(grep -c '^final\.[a-z_.0-9]* ' bert.cmp)
# word, position, tokentype; 2 x 12; final LN 2; pooler 2; LM head 5; binary head 2
want=$((3 + 2 * 12 + 2 + 2 + 5 + 2))
[ "$n" = "$want" ] && [ "$f" = "$want" ] && ok bert_every_parameter_compared ||
	fail bert_every_parameter_compared "$n gradients and $f final tensors, wanted $want"
verdict bertlamb bert_no_binary_head_post_ln_10_lamb_steps_match_pytorch
grep -q '^grad\.pooler\|^grad\.binary_head\|^grad\.tokentype' bertlamb.cmp &&
	fail bert_no_binary_head_has_no_pooler "$(grep -m1 '^grad\.pooler\|^grad\.binary\|^grad\.tokentype' bertlamb.cmp)" ||
	ok bert_no_binary_head_has_no_pooler
if [ $mpi = 1 ]; then
	verdict berttp2 bert_tp2_matches_pytorch
	contains bert_tp2_replicated_heads_are_bit_identical_across_ranks berttp2.dump \
		"replicated tensors bit-identical across 2 TP ranks: yes"
	cmp -s bert/init.safetensors berttp2/init.safetensors && ok bert_tp2_initialises_the_tp1_model ||
		fail bert_tp2_initialises_the_tp1_model "init.safetensors differ"
else
	skip bert_tp2_matches_pytorch "no mpirun or no build/lib/lmtk/train-mpi.so"
fi
[ -s "$EXEC" ] && verdict bertcuda exec_cuda_bert_matches_pytorch_bf16
grep -q '^exit 0$' mut.out && [ "$(grep -c ': caught' mut.out)" = 6 ] && ok bert_comparison_catches_six_wrong_models ||
	fail bert_comparison_catches_six_wrong_models "$(grep -v ': caught' mut.out | tail -3)"
rm -rf "$T"
