#!/usr/bin/env bash
# train --model-type t5 (Megatron-LM's T5Model).
# The model against an independent PyTorch T5 in Megatron's structure, tests/ref/t5-ref.py: the C
# side (build/tests/train_t5 --dump) initialises a tiny T5 from its seed, makes T5Dataset-shaped
# micro-batches (padding in the encoder and the decoder, the loss on the decoder's real
# positions) and writes its logits, loss, every gradient, the optimizer steps' losses and
# gradient norms and the final weights; the reference computes the same in float64 with
# Megatron's three masks (-10000 fill) and compares:
#   - CPU, AdamW, 10 steps (fp32 tolerances); CPU, the post-LN residual, 10 steps of LAMB
#   - TP=2 over two MPI ranks (replicated tensors bit-identical across the ranks)
#   - the CUDA backend through the CPU executor at bf16 tolerances, both lengths over a tile
#   - the comparison catches wrong models: the cross-attention's mask ignored, the decoder not
#     causal, the encoder causal, the decoder's positions continuing the encoder's or missing,
#     key_value's halves swapped
# Then bin/train on a sentence dataset written here (each sentence one word repeated, so a masked
# span is what its neighbours are):
#   - a run learns; the log line has lm loss and no sop loss; validation; TensorBoard
#   - resume is bit-exact (dropout on), so is --checkpoint-activations; the checkpoint has
#     Megatron's names
#   - TP=2 and DP=2 over MPI give the one-rank run's losses
#   - ckpt-merge-tp merges the TP=2 checkpoint and the merged one resumes as TP=2 does, re-split
#     to TP=2 too; ckpt-sync-ln checks its replicated tensors; --format hf is refused (exit 2,
#     saying why), --target-pp 2 too
#   - bin/train on the CUDA executor, bf16 and fp16: the CPU's losses
#   - --dry-run's parameter count is the model's; misuse exits 2 naming the flag
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
DUMP=$TOP/build/tests/train_t5
REF=$TOP/tests/ref/t5-ref.py
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
TR=$BIN/train
cd "$T" || exit 3
havetorch=1
"$PY" -c 'import torch' 2>/dev/null || havetorch=0
mpi=0
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	mpi=1
fi

# --- the model against PyTorch ------------------------------------------------------------------
cfg() {   # cfg NAME ENC DEC HIDDEN HEADS [EXTRA JSON KEYS]
	cat >"$1.json" <<JSON
{"model_type": "t5", ${6:-} "num_layers": 2, "hidden_size": $4, "num_attention_heads": $5,
 "ffn_hidden_size": $((4 * $4)), "encoder_seq_length": $2, "decoder_seq_length": $3,
 "max_position_embeddings": $(($2 + $3)), "vocab_size": 100, "padded_vocab_size": 128,
 "position_embedding_type": "learned", "embed_layernorm": false, "layernorm_epsilon": 1e-5,
 "hidden_dropout": 0, "attention_dropout": 0, "lr": 2e-3, "adam_beta1": 0.9, "adam_beta2": 0.95,
 "adam_eps": 1e-6, "weight_decay": 0.1, "clip_grad": 1.0, "init_method_std": 0.1, "seed": 7,
 "micro_batch_size": 3, "steps": 10}
JSON
}
dumped() {   # dumped NAME TOLERANCE [dump command prefix...]: dumps, queues the comparison
	local m=$1 tol=$2
	shift 2
	if ! "$@" "$DUMP" --dump "$m.json" "$m" >"$m.dump" 2>&1; then
		fail "${m}_model_dumps" "$(head -c 400 "$m.dump")"
		return 1
	fi
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
}
if [ $havetorch = 1 ]; then
	cfg t5 20 10 64 4
	cfg t5lamb 20 10 64 4 '"apply_residual_connection_post_layernorm": true, "optimizer": "lamb",'
	sed -i 's/"clip_grad": 1.0/"clip_grad": 0/; s/"lr": 2e-3/"lr": 5e-3/' t5lamb.json
	cfg t5tp2 20 10 64 4 '"tp": 2,'
	sed -i 's/"steps": 10/"steps": 3/' t5tp2.json   # TP's gradients; the steps are TP1's
	cfg t5cuda 80 70 64 2 '"device": "cuda",'   # both lengths over a 64-row tile
	sed -i 's/"steps": 10/"steps": 2/; s/"micro_batch_size": 3/"micro_batch_size": 2/' t5cuda.json
	: >many.txt
	dumped t5 fp32
	dumped t5lamb fp32
	[ $mpi = 1 ] && dumped t5tp2 fp32 mpirun --oversubscribe -np 2
	if [ -s "$EXEC" ]; then
		LMTK_CUDA_PLUGIN=$EXEC dumped t5cuda bf16 env LMTK_CUDA_EXEC_ORDER=random:11
	else
		fail cuda_executor_built "$EXEC is missing"
	fi
	[ -s t5/c.safetensors ] && echo "mut.out --config t5.json --weights t5/init.safetensors" \
		"--batch t5/batch.safetensors --compare t5/c.safetensors --only logits,loss,grads" \
		"--mutations cross_mask_ignored,decoder_not_causal,encoder_causal,positions_continued,decoder_no_positions,kv_swapped" >>many.txt
	"$PY" "$REF" --many many.txt >many.out 2>&1

	verdict t5 t5_logits_loss_grads_and_10_adamw_steps_match_pytorch
	for item in logits loss losses grad_norms; do
		contains "t5_compares_$item" t5.cmp "^$item +maxdiff"
	done
	n=$(grep -c '^grad\.[a-z_.0-9]* ' t5.cmp); f=$(grep -c '^final\.[a-z_.0-9]* ' t5.cmp)
	# word, position; 2 x 12 encoder; its LN 2; 2 x 20 decoder; its LN 2; lm_head.bias
	want=$((2 + 2 * 12 + 2 + 2 * 20 + 2 + 1))
	[ "$n" = "$want" ] && [ "$f" -ge "$want" ] && ok t5_every_parameter_compared ||
		fail t5_every_parameter_compared "$n gradients and $f final tensors, wanted $want"
	verdict t5lamb t5_post_ln_10_lamb_steps_match_pytorch
	if [ $mpi = 1 ]; then
		verdict t5tp2 t5_tp2_matches_pytorch
		contains t5_tp2_replicated_tensors_are_bit_identical_across_ranks t5tp2.dump \
			"replicated tensors bit-identical across 2 TP ranks: yes"
		cmp -s t5/init.safetensors t5tp2/init.safetensors && ok t5_tp2_initialises_the_tp1_model ||
			fail t5_tp2_initialises_the_tp1_model "init.safetensors differ"
	else
		skip t5_tp2_matches_pytorch "no mpirun or no build/lib/lmtk/train-mpi.so"
	fi
	[ -s "$EXEC" ] && verdict t5cuda exec_cuda_t5_matches_pytorch_bf16
	grep -q '^exit 0$' mut.out && [ "$(grep -c ': caught' mut.out)" = 6 ] &&
		ok t5_comparison_catches_six_wrong_models ||
		fail t5_comparison_catches_six_wrong_models "$(grep -v ': caught' mut.out | tail -3)"
else
	skip t5_matches_pytorch "python3-torch is not installed (make deps installs it)"
fi

# --- bin/train on a sentence dataset -----------------------------------------------------------
"$PY" - <<'PYEOF' || { fail t5_dataset_written "python3 failed"; exit 0; }
import random, struct
rnd = random.Random(5)
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["w%d" % i for i in range(300)]
open("vocab.txt", "w").write("".join(t + "\n" for t in vocab))
sents, doc_idx = [], [0]
for d in range(400):
    k = rnd.randrange(300)
    for s in range(rnd.randint(2, 6)):
        sents.append([5 + (k + s) % 300] * rnd.randint(4, 12))
    doc_idx.append(len(sents))
with open("sent_text_sentence.bin", "wb") as f:
    for s in sents:
        f.write(struct.pack("<%dH" % len(s), *s))
sizes = [len(s) for s in sents]
ptrs, off = [], 0
for n in sizes:
    ptrs.append(off)
    off += 2 * n
with open("sent_text_sentence.idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(sizes), len(doc_idx)))
    f.write(struct.pack("<%di" % len(sizes), *sizes) + struct.pack("<%dq" % len(ptrs), *ptrs))
    f.write(struct.pack("<%dq" % len(doc_idx), *doc_idx))
PYEOF

M=(--model-type t5 --tokenizer-type BertWordPieceLowerCase --vocab-file vocab.txt
	--vocab-extra-ids 20 --data-path sent_text_sentence --split 90,8,2 --num-layers 2
	--hidden-size 32 --num-attention-heads 2 --encoder-seq-length 32 --decoder-seq-length 16
	--max-position-embeddings 32 --micro-batch-size 4 --global-batch-size 8 --device cpu
	--threads 1)
t5() { "$TR" "${M[@]}" "$@"; }
losses() {   # iteration, lm loss, grad norm (fp16 puts the loss scale between them)
	grep '^ iteration ' "$1" |
		sed 's/.*iteration *\([0-9]*\)\/.*lm loss: \([^ ]*\) |.* grad norm: \([^ ]*\) .*/\1 \2 \3/'
}

t5 --train-iters 60 --lr 5e-3 --lr-decay-style constant --log-interval 10 --eval-interval 60 \
	--eval-iters 2 --tensorboard-dir tb >learn.out 2>&1
rc=$?
if [ $rc = 0 ] && "$PY" - <(losses learn.out) <<'PYEOF' 2>learn.err
import sys
r = [[float(x) for x in l.split()] for l in open(sys.argv[1])]
assert len(r) == 6, r
assert r[-1][1] < r[0][1] - 0.8, r    # measured 4.94 -> 3.79 (ln 327 = 5.79)
PYEOF
then ok t5_run_learns
else fail t5_run_learns "exit $rc: $(tail -1 learn.err) $(tail -2 learn.out)"; fi
contains t5_log_line_has_lm_loss learn.out \
	'^ iteration +10/ +60 \| .* \| lm loss: [0-9.]+E[-+][0-9]+ \| grad norm:'
lacks t5_log_line_has_no_sop_loss learn.out 'sop loss'
contains t5_validation_line learn.out \
	'validation loss at iteration 60 \| lm loss value: [0-9.E+-]+ \| lm loss PPL: [0-9.E+-]+ \| *$'
contains t5_startup_line_names_the_model learn.out \
	'^train: T5 \(encoder of 32 and decoder of 16 tokens, 2 layers each\) model'
contains t5_reads_t5dataset_samples learn.out \
	'sent_text_sentence: train split, documents \[0, 360\): [0-9]+ T5 samples of 32 \+ 16 tokens'
"$PY" "$TOP/tests/ref/tfevents-read.py" tb >tb.txt 2>tb.err
grep -q '^lm-loss-training/lm loss	' tb.txt && grep -q '^lm-loss-validation/lm loss validation	' tb.txt &&
	ok t5_tensorboard_has_lm_loss || fail t5_tensorboard_has_lm_loss "$(cut -f1 tb.txt | sort -u | head -8 | tr '\n' ',')"

# resume: 8 iterations straight == 4, stop, 4 more (dropout on, the default 0.1)
R=(--train-iters 8 --lr 3e-3 --log-interval 1 --eval-interval 8 --eval-iters 1 --save-interval 4)
t5 "${R[@]}" --save s >s.out 2>&1
t5 "${R[@]}" --save h --exit-interval 4 >h1.out 2>&1; rc1=$?
t5 "${R[@]}" --save h --load h >h2.out 2>&1; rc2=$?
[ $rc1 = 0 ] && [ $rc2 = 0 ] && diff <(losses s.out | tail -4) <(losses h2.out) >/dev/null &&
	[ "$(losses h2.out | wc -l)" = 4 ] &&
	cmp -s s/global_step8/rank_tp00_pp000.safetensors h/global_step8/rank_tp00_pp000.safetensors &&
	ok t5_resume_is_bit_exact || fail t5_resume_is_bit_exact "rc $rc1 $rc2: $(diff <(losses s.out | tail -4) <(losses h2.out) | head -3)"
"$PY" - s/global_step8/rank_tp00_pp000.safetensors >names.txt <<'PYEOF'
import json, struct, sys
b = open(sys.argv[1], "rb"); n = struct.unpack("<Q", b.read(8))[0]
h = json.loads(b.read(n)); h.pop("__metadata__", None); print("\n".join(sorted(h)))
PYEOF
grep -qx 'decoder.layers.1.inter_attention.key_value.weight' names.txt &&
	grep -qx 'encoder.final_layernorm.bias' names.txt && grep -qx 'lm_head.bias' names.txt &&
	grep -qx 'exp_avg_sq.decoder.layers.0.post_inter_attention_layernorm.weight' names.txt &&
	ok t5_checkpoint_has_megatrons_names || fail t5_checkpoint_has_megatrons_names "$(head -5 names.txt)"
grep -q '"model_type": "t5"' s/global_step8/manifest.json && ok t5_manifest_names_the_model ||
	fail t5_manifest_names_the_model "$(grep -m1 model_type s/global_step8/manifest.json)"

# --checkpoint-activations: each stack's chunks recomputed, the same bits (dropout on)
t5 "${R[@]}" --checkpoint-activations >ck.out 2>&1
diff <(losses s.out) <(losses ck.out) >/dev/null && [ "$(losses ck.out | wc -l)" = 8 ] &&
	ok t5_recompute_is_bit_exact || fail t5_recompute_is_bit_exact "$(diff <(losses s.out) <(losses ck.out) | head -3)"

# the parallel layouts, and the checkpoint through ckpt-merge-tp
if [ $mpi = 1 ]; then
	P=(--train-iters 4 --lr 3e-3 --log-interval 1 --eval-interval 4 --eval-iters 1)
	t5 "${P[@]}" >p1.out 2>&1
	same() {   # same A B: the losses and grad norms of two files of losses() lines agree
		"$PY" - "$1" "$2" <<'PYEOF'
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) >= 2, (a, b)
for x, y in zip(a, b):
    for u, v in zip(x, y):
        assert abs(float(u) - float(v)) <= 1e-5 * abs(float(u)) + 1e-3 * (len(u) < 8), (x, y)
PYEOF
	}
	losses p1.out >p1.l
	head -2 p1.l >p1.first2
	tail -2 p1.l >p1.last2
	# TP=2 for 2 of the 4 iterations (its checkpoint), DP=2 for all 4
	mpirun --oversubscribe -np 2 "$TR" "${M[@]}" "${P[@]}" --tensor-model-parallel-size 2 \
		--save ctp2 --save-interval 2 --exit-interval 2 >tp2.out 2>&1
	losses tp2.out >tp2.l
	same p1.first2 tp2.l 2>tp2.err && ok t5_tp2_matches_one_rank ||
		fail t5_tp2_matches_one_rank "$(tail -1 tp2.err) $(grep -i error tp2.out | head -2)"
	mpirun --oversubscribe -np 2 "$TR" "${M[@]}" "${P[@]}" >dp2.out 2>&1
	losses dp2.out >dp2.l
	same p1.l dp2.l 2>dp2.err && ok t5_dp2_matches_one_rank ||
		fail t5_dp2_matches_one_rank "$(tail -1 dp2.err) $(grep -i error dp2.out | head -2)"
	# the TP=2 checkpoint merged to TP=1 resumes as the one-rank run goes on; re-split to TP=2
	# it resumes so too
	"$BIN/ckpt-merge-tp" ctp2 --output m1 >merge.out 2>&1 && t5 "${P[@]}" --load m1 >m1.out 2>&1 &&
		losses m1.out >m1.l && same p1.last2 m1.l 2>m1.err &&
		ok t5_tp2_checkpoint_merged_resumes_as_one_rank ||
		fail t5_tp2_checkpoint_merged_resumes_as_one_rank "$(tail -1 merge.out) $(tail -1 m1.err) $(tail -1 m1.out)"
	"$BIN/ckpt-merge-tp" m1 --output m2 --target-tp 2 >split.out 2>&1 &&
		mpirun --oversubscribe -np 2 "$TR" "${M[@]}" "${P[@]}" --tensor-model-parallel-size 2 \
			--load m2 >m2.out 2>&1 && losses m2.out >m2.l && same p1.last2 m2.l 2>m2.err &&
		ok t5_merged_checkpoint_resplit_to_tp2_resumes ||
		fail t5_merged_checkpoint_resplit_to_tp2_resumes "$(tail -1 split.out) $(tail -1 m2.err) $(tail -1 m2.out)"
	"$BIN/ckpt-sync-ln" ctp2 >sync.out 2>&1 &&
		grep -q 'replicated tensor buffers are equal across ranks (bit-exact)' sync.out &&
		grep -q '^decoder.layers.1.post_inter_attention_layernorm.bias ' sync.out &&
		ok t5_ckpt_sync_ln_checks_the_replicated_tensors ||
		fail t5_ckpt_sync_ln_checks_the_replicated_tensors "$(tail -1 sync.out)"
	expect_rc t5_hf_export_is_refused 2 "$BIN/ckpt-merge-tp" ctp2 --output hf --format hf &&
		contains t5_hf_refusal_says_why "$T/err" \
			'T5ForConditionalGeneration has relative position buckets.*keep the lmtk checkpoint'
	[ ! -e hf ] && ok t5_hf_refusal_writes_nothing || fail t5_hf_refusal_writes_nothing "hf exists"
	expect_rc t5_pipeline_resplit_is_refused 2 "$BIN/ckpt-merge-tp" ctp2 --output pp --target-pp 2
else
	skip t5_parallel_layouts "no mpirun or no build/lib/lmtk/train-mpi.so"
fi

# --- bin/train's T5 on the CUDA backend through the executor, bf16 and fp16: the CPU's losses -----
if [ -s "$EXEC" ]; then
	t5 --train-iters 4 --lr 3e-3 --log-interval 1 --eval-interval 4 --eval-iters 1 >c1.out 2>&1
	for prec in bf16 fp16; do
		flags=(--bf16)
		[ $prec = fp16 ] && flags=(--fp16 --initial-loss-scale 1024)
		LMTK_CUDA_PLUGIN=$EXEC t5 --train-iters 4 --lr 3e-3 --log-interval 1 --eval-interval 4 \
			--eval-iters 1 --device cuda "${flags[@]}" >"c$prec.out" 2>&1
		if "$PY" - <(losses c1.out) <(losses "c$prec.out") <<'PYEOF' 2>"c$prec.err"
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 4, (a, b)
for x, y in zip(a, b):
    for u, v in zip(x[1:], y[1:]):
        assert abs(float(u) - float(v)) <= 2e-2 * abs(float(u)), (x, y)
PYEOF
		then ok "exec_cuda_${prec}_t5_run_matches_cpu"
		else fail "exec_cuda_${prec}_t5_run_matches_cpu" "$(tail -1 "c$prec.err") $(tail -2 "c$prec.out")"; fi
	done
fi

# --- the plan and misuse --------------------------------------------------------------------------
t5 --train-iters 3 --lr 1e-3 --dry-run --format json --nodes 1 --gpus-per-node 1 \
	--assumed-tflops 100 >dry.json 2>dry.err
want=$(sed -n 's/^train: T5 .* model, \([0-9]*\) parameters.*/\1/p' learn.out)
got=$("$PY" -c 'import json; print(json.load(open("dry.json"))["model"]["params"]["total"])' 2>/dev/null)
[ -n "$want" ] && [ "$want" = "$got" ] && ok t5_dry_run_counts_the_models_parameters ||
	fail t5_dry_run_counts_the_models_parameters "dry-run $got, the model $want"
# FLOPs per (encoder) token, worked by hand for L 2, h 32, f 128, s 32, s_dec 16, Vp 384
fl=$("$PY" -c 'import json; print(round(json.load(open("dry.json"))["time"]["flops_per_token"]))' 2>/dev/null)
[ "$fl" = 337920 ] && ok t5_dry_run_flops_per_token_are_the_encoder_decoders ||
	fail t5_dry_run_flops_per_token_are_the_encoder_decoders "got $fl"
G=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 4 --train-iters 2 --lr 1e-3 --vocab-size 100
	--dry-run --nodes 1 --gpus-per-node 2)
expect_rc t5_flag_without_t5_is_refused 2 "$TR" "${G[@]}" --decoder-seq-length 16 &&
	contains t5_flag_without_t5_names_it "$T/err" 'decoder-seq-length is a T5 flag'
expect_rc t5_pipeline_is_refused 2 t5 --train-iters 2 --lr 1e-3 --pipeline-model-parallel-size 2 \
	--dry-run --nodes 1 --gpus-per-node 2 &&
	contains t5_pipeline_refusal_names_the_split_rank "$T/out" 'pipeline-model-parallel-split-rank'
expect_rc t5_both_seq_lengths_are_refused 2 t5 --seq-length 32 --train-iters 2 --lr 1e-3 &&
	contains t5_both_seq_lengths_named "$T/err" 'seq-length and --encoder-seq-length: give one'
expect_rc t5_bert_flag_is_refused 2 t5 --bert-no-binary-head --train-iters 2 --lr 1e-3 &&
	contains t5_bert_flag_named "$T/err" 'bert-no-binary-head is a BERT flag'
rm -rf "$T"
