#!/usr/bin/env bash
# The model against PyTorch (tests/ref/gpt-ref.py, Debian's python3-torch): the C side
# (build/tests/train_model --dump) initialises a tiny model from its seed and writes the initial
# weights, the batches and its own logits, loss, every gradient, 10 AdamW steps' losses and grad
# norms and the final weights; the reference loads the same weights and batches, computes the
# same in float64, and compares with fp32 tolerances.  Two shapes: GPT-2 style (learned
# positions) and BLOOM style (ALiBi, an odd head count, the embedding layer norm).  Then the
# same comparison must FAIL when the C side is wrong on purpose (a perturbed gradient), so the
# comparison itself is shown to be able to fail.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
DUMP=$TOP/build/tests/train_model
export LMTK_CUDA_PLUGIN=$TOP/build/lib/lmtk/train-cuda.so
REF=$TOP/tests/ref/gpt-ref.py
cd "$T" || exit 3
if ! "$PY" -c 'import torch' 2>/dev/null; then
	skip model_matches_pytorch "python3-torch is not installed (make deps installs it)"
	exit 0
fi

cfg() {   # cfg NAME POS EMBED_LN LAYERS HIDDEN HEADS [EXTRA JSON KEYS]
	cat >"$1.json" <<JSON
{${7:-} "num_layers": $4, "hidden_size": $5, "num_attention_heads": $6, "ffn_hidden_size": $((4 * $5)),
 "seq_length": 24, "max_position_embeddings": 32, "vocab_size": 100, "padded_vocab_size": 128,
 "position_embedding_type": "$2", "embed_layernorm": $3, "layernorm_epsilon": 1e-5,
 "hidden_dropout": 0, "attention_dropout": 0, "lr": 2e-3, "adam_beta1": 0.9, "adam_beta2": 0.95,
 "adam_eps": 1e-8, "weight_decay": 0.1, "clip_grad": 1.0, "init_method_std": 0.02, "seed": 7,
 "micro_batch_size": 3, "steps": 10}
JSON
}
cfg gpt2 learned false 2 64 4
cfg bloom alibi true 3 80 5
# Megatron's document masks (eod every few tokens, as in packed samples) and the post-LN residual;
# the first also with --embedding-lr-mult 3 (the word embedding at 3x the lr, the positions not)
cfg gpt2docs learned false 2 64 4 '"embedding_lr_mult": 3, "eod": 7, "eod_mask_loss": true, "reset_position_ids": true, "reset_attention_mask": true,'
cfg bloompost alibi true 2 80 5 '"eod": 7, "reset_attention_mask": true, "apply_residual_connection_post_layernorm": true,'
# LAMB (apex FusedLAMB: Megatron's clipping off, so FusedLAMB's own clip at norm 1.0 acts on these
# gradients of norm ~2; the trust ratio on the weights with decay only) and SGD with momentum
cfg gpt2lamb learned false 2 64 4 '"optimizer": "lamb",'
sed -i 's/"clip_grad": 1.0/"clip_grad": 0/; s/"lr": 2e-3/"lr": 5e-3/; s/"adam_eps": 1e-8/"adam_eps": 1e-6/' gpt2lamb.json
cfg bloomsgd alibi true 2 80 5 '"optimizer": "sgd", "sgd_momentum": 0.9, "embedding_lr_mult": 3,'
sed -i "s/\"lr\": 2e-3/\"lr\": 0.3/" bloomsgd.json
# the large-batch study's variants: LAMB with layer-wise noise (half the RMS of each tensor's
# update, the draws from the reference's own Philox) and a word embedding (= the tied output
# layer) at 4x the lr, the position embeddings not (SGD above: the embedding at 3x)
cfg gpt2lambvar learned false 2 64 4 '"optimizer": "lamb", "lamb_layerwise_noise": 0.5, "embedding_lr_mult": 4,'
sed -i 's/"clip_grad": 1.0/"clip_grad": 0/; s/"lr": 2e-3/"lr": 5e-3/; s/"adam_eps": 1e-8/"adam_eps": 1e-6/' gpt2lambvar.json

for m in gpt2 bloom gpt2docs bloompost gpt2lamb bloomsgd gpt2lambvar; do
	opt=adamw
	case $m in *lamb*) opt=lamb ;; *sgd) opt=sgd ;; esac
	if ! "$DUMP" --dump "$m.json" "$m" >"$m.dump" 2>&1; then
		fail "${m}_model_dumps" "$(head -c 400 "$m.dump")"
		continue
	fi
	# SGD moves the layer norms' weights (near 1.0) by ~1e-4 over the run, so fp32's spacing
	# there (1.2e-7) is ~1e-3 of the update: final weights get 5e-3 of their update
	tol=()
	[ $opt = sgd ] && tol=(--tol final=5e-3)
	"$PY" "$REF" --config "$m.json" --weights "$m/init.safetensors" --batch "$m/batch.safetensors" \
		--compare "$m/c.safetensors" "${tol[@]}" >"$m.cmp" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q "within tolerance" "$m.cmp"; then
		ok "${m}_logits_loss_grads_and_10_${opt}_steps_match_pytorch"
	else
		fail "${m}_logits_loss_grads_and_10_${opt}_steps_match_pytorch" "exit $rc: $(grep -v within "$m.cmp" | tail -5)"
	fi
	for item in logits loss losses grad_norms; do
		contains "${m}_compares_$item" "$m.cmp" "^$item +maxdiff"
	done
	# every parameter's gradient and final value was compared
	n=$(grep -c '^grad\.[a-z_.0-9]* ' "$m.cmp"); f=$(grep -c '^final\.[a-z_.0-9]* ' "$m.cmp")
	case $m in
	gpt2*) want=$((2 + 2 * 12 + 2)) ;;
	bloompost | bloomsgd) want=$((1 + 2 + 2 * 12 + 2)) ;;
	*) want=$((1 + 2 + 3 * 12 + 2)) ;;
	esac
	if [ "$n" = "$want" ] && [ "$f" = "$want" ]; then ok "${m}_every_parameter_compared"
	else fail "${m}_every_parameter_compared" "$n gradients and $f final tensors, wanted $want"; fi
done

# The comparison fails when the C side is wrong: one gradient element nudged by 1%.
"$PY" - bloom/c.safetensors bad.safetensors <<'PYEOF'
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
b = open(src, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
t = h['grad.layers.1.attention.query_key_value.weight']
off = 8 + n + t['data_offsets'][0]
vals = list(struct.unpack_from('<%df' % 64, b, off))
i = max(range(64), key=lambda k: abs(vals[k]))
b = bytearray(b)
struct.pack_into('<f', b, off + 4 * i, vals[i] * 1.01)
open(dst, 'wb').write(b)
PYEOF
"$PY" "$REF" --config bloom.json --weights bloom/init.safetensors --batch bloom/batch.safetensors \
	--compare bad.safetensors --only grads >bad.cmp 2>&1
rc=$?
if [ $rc = 1 ] && grep -q 'grad.layers.1.attention.query_key_value.weight' bad.cmp; then
	ok comparison_fails_on_a_one_percent_gradient_error
else
	fail comparison_fails_on_a_one_percent_gradient_error "exit $rc: $(tail -3 bad.cmp)"
fi
rm -rf "$T"
