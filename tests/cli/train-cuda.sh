#!/usr/bin/env bash
# The CUDA backend.  Everywhere nvcc exists: the plugin was compiled and exports its entry point
# (CI compiles every CUDA file even without a GPU).  Where a GPU is present: the same PyTorch
# comparison as tests/cli/train-model.sh with bf16 tolerances (bf16 weights and activations,
# fp32 master weights and gradients), for the GPT-2 and BLOOM shapes, and a short real run.
# Without a GPU those cases skip and say so.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
SO=$TOP/build/lib/lmtk/train-cuda.so
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
cd "$T" || exit 3
if [ -n "$NVCC" ]; then
	[ -s "$SO" ] && ok cuda_backend_compiled || fail cuda_backend_compiled "nvcc is $NVCC but $SO is missing"
	nm -D --defined-only "$SO" 2>/dev/null | grep -qw lmtk_ops_cuda &&
		ok cuda_backend_exports_its_entry_point || fail cuda_backend_exports_its_entry_point "no lmtk_ops_cuda in $SO"
else
	skip cuda_backend_compiled "no nvcc on this machine"
fi
export LMTK_CUDA_PLUGIN=$SO

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
"$TOP/build/tests/train_model" --dump gpt2.json gpt2 >probe.out 2>&1
rc=$?
if [ $rc = 4 ]; then
	skip cuda_matches_pytorch "no GPU here: $(head -c 300 probe.out)"
	rm -rf "$T"
	exit 0
fi
for m in gpt2 bloom; do
	if ! "$TOP/build/tests/train_model" --dump "$m.json" "$m" >"$m.dump" 2>&1; then
		fail "cuda_${m}_dumps" "$(head -c 400 "$m.dump")"
		continue
	fi
	"$PY" "$TOP/tests/ref/gpt-ref.py" --config "$m.json" --weights "$m/init.safetensors" \
		--batch "$m/batch.safetensors" --compare "$m/c.safetensors" --tolerance bf16 >"$m.cmp" 2>&1
	rc=$?
	[ $rc = 0 ] && ok "cuda_${m}_logits_loss_grads_and_10_steps_match_pytorch_bf16" ||
		fail "cuda_${m}_logits_loss_grads_and_10_steps_match_pytorch_bf16" "exit $rc: $(tail -6 "$m.cmp")"
done
MEG=$(tiny_dataset) || exit 3   # a dataset to train on; the reference one is not needed
cp "$MEG"/meg-gpt2-openwebtext_text_document.* .
"$TOP/bin/train" --num-layers 2 --hidden-size 128 --num-attention-heads 4 --seq-length 128 \
	--max-position-embeddings 128 --micro-batch-size 8 --global-batch-size 16 --train-iters 60 \
	--lr 1e-3 --data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json" \
	--merge-file "$MEG/gpt2-tiny-merges.txt" --log-interval 10 --eval-iters 0 --device cuda >run.out 2>&1
rc=$?
first=$(grep -m1 '^ iteration ' run.out | sed 's/.*lm loss: \([^ ]*\) .*/\1/')
last=$(grep '^ iteration ' run.out | tail -1 | sed 's/.*lm loss: \([^ ]*\) .*/\1/')
[ $rc = 0 ] && "$PY" -c "import sys; sys.exit(not float('$last') < float('$first') - 0.5)" &&
	ok cuda_training_run_learns || fail cuda_training_run_learns "exit $rc, loss $first -> $last: $(tail -3 run.out)"
rm -rf "$T"
