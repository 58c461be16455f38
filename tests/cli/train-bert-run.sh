#!/usr/bin/env bash
# train --model-type bert, run through bin/train on a sentence dataset (Megatron's _text_sentence
# layout, doc_idx over sentences) written here: documents of 2-6 sentences, each sentence one word
# repeated and the next sentence the next word of a 300-word vocabulary, so a masked token is
# what its neighbours are.
#   - a run learns (the lm loss falls) and prints Megatron's BERT log line (lm loss, then sop
#     loss), validation line (each loss's value and PPL) and TensorBoard tags
#   - --bert-no-binary-head: no sop loss anywhere, no pooler or binary head in the checkpoint
#   - resume is bit-exact (dropout on): 8 iterations straight == 4, stop, 4 more
#   - TP=2, PP=2 and DP=2 over MPI give the one-rank run's losses
#   - the CUDA backend through the executor keeps to the CPU's losses (bf16 tolerance)
#   - --dry-run's parameter count is the model's; misuse exits 2 naming the flag
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
TR=$BIN/train
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
cd "$T" || exit 3

"$PY" - <<'PYEOF' || { fail bert_dataset_written "python3 failed"; exit 0; }
import random, struct
rnd = random.Random(5)
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["w%d" % i for i in range(300)]
open("vocab.txt", "w").write("".join(t + "\n" for t in vocab))
sents, doc_idx = [], [0]
for d in range(400):
    k = rnd.randrange(300)
    for s in range(rnd.randint(2, 6)):
        n = rnd.randint(4, 12)
        sents.append([5 + (k + s) % 300] * n)
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

B=(--model-type bert --tokenizer-type BertWordPieceLowerCase --vocab-file vocab.txt
	--data-path sent_text_sentence --split 90,8,2 --num-layers 2 --hidden-size 32
	--num-attention-heads 2 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 4
	--global-batch-size 8 --device cpu --threads 1)
brt() { "$TR" "${B[@]}" "$@"; }

# --- learns; the log line, validation, TensorBoard -----------------------------------------------
brt --train-iters 200 --lr 5e-3 --lr-decay-style constant --log-interval 20 --eval-interval 200 \
	--eval-iters 2 --tensorboard-dir tb --hidden-dropout 0 --attention-dropout 0 \
	--micro-batch-size 8 >learn.out 2>&1
rc=$?
lmsop() { grep '^ iteration ' "$1" | sed 's/.*lm loss: \([^ ]*\) | sop loss: \([^ ]*\) |.*/\1 \2/'; }
if [ $rc = 0 ] && "$PY" - <(lmsop learn.out) <<'PYEOF' 2>learn.err
import sys
r = [[float(x) for x in l.split()] for l in open(sys.argv[1])]
assert len(r) == 10, r
assert r[-1][0] < r[0][0] - 0.5, ("lm loss", r)     # measured 5.67 -> 4.9 (ln 305 = 5.72)
assert all(0.5 < x[1] < 0.9 for x in r), ("sop loss", r)   # a 2-way CE: ln 2 untrained
PYEOF
then ok bert_run_learns
else fail bert_run_learns "exit $rc: $(tail -1 learn.err) $(tail -2 learn.out)"; fi
contains bert_log_line_has_lm_then_sop_loss learn.out \
	'^ iteration +20/ +200 \| .* \| lm loss: [0-9.]+E[-+][0-9]+ \| sop loss: [0-9.]+E[-+][0-9]+ \| grad norm:'
contains bert_validation_line_has_both_losses learn.out \
	'validation loss at iteration 200 \| lm loss value: [0-9.E+-]+ \| lm loss PPL: [0-9.E+-]+ \| sop loss value: [0-9.E+-]+ \| sop loss PPL: [0-9.E+-]+ \|'
contains bert_startup_line_names_the_model learn.out '^train: BERT \(binary head, 2 token types\) model'
"$PY" "$TOP/tests/ref/tfevents-read.py" tb >tb.txt 2>tb.err
for tag in "lm-loss-training/lm loss" "lm-loss-training/sop loss" "lm-loss-training/sop loss vs samples" \
	"lm-loss-validation/lm loss validation" "lm-loss-validation/sop loss validation"; do
	grep -q "^$tag	" tb.txt && ok "bert_tensorboard_has_${tag// /_}" ||
		fail "bert_tensorboard_has_${tag// /_}" "$(cut -f1 tb.txt | sort -u | head -20 | tr '\n' ',')"
done

# --- --bert-no-binary-head -----------------------------------------------------------------------
brt --bert-no-binary-head --train-iters 2 --lr 1e-3 --log-interval 1 --eval-interval 2 --eval-iters 1 \
	--save nb --save-interval 2 >nb.out 2>&1
rc=$?
[ $rc = 0 ] && grep -q '^ iteration .* lm loss: ' nb.out && ! grep -q 'sop loss' nb.out &&
	ok bert_no_binary_head_logs_no_sop_loss || fail bert_no_binary_head_logs_no_sop_loss "exit $rc: $(tail -2 nb.out)"
names() { "$PY" - "$1" <<'PYEOF'
import glob, json, struct, sys
for f in sorted(glob.glob(sys.argv[1] + "/global_step*/*.safetensors")):
    b = open(f, "rb").read(8); n = struct.unpack("<Q", b)[0]
    h = json.loads(open(f, "rb").read(8 + n)[8:]); h.pop("__metadata__", None)
    print("\n".join(sorted(h)))
PYEOF
}
names nb >nb.names
grep -q 'lm_head.dense.weight' nb.names && ! grep -q 'pooler\|binary_head' nb.names &&
	ok bert_no_binary_head_checkpoint_has_no_pooler || fail bert_no_binary_head_checkpoint_has_no_pooler "$(grep -c . nb.names) names"

# --- resume is bit-exact ------------------------------------------------------------------------
R=(--train-iters 8 --lr 2e-3 --log-interval 1 --eval-interval 4 --eval-iters 1 --save-interval 4)
brt "${R[@]}" --save s >s.out 2>&1
brt "${R[@]}" --save h --exit-interval 4 >h1.out 2>&1; rc1=$?
brt "${R[@]}" --save h --load h >h2.out 2>&1; rc2=$?
names s >s.names
grep -q 'tokentype_embeddings.weight' s.names && grep -q 'binary_head.weight' s.names &&
	ok bert_checkpoint_has_megatrons_names || fail bert_checkpoint_has_megatrons_names "$(head -5 s.names)"
losses() { grep '^ iteration ' "$1" | sed 's/.*iteration *\([0-9]*\)\/.*lm loss: \([^ ]*\) | sop loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2 \3 \4/'; }
[ $rc1 = 0 ] && [ $rc2 = 0 ] && diff <(losses s.out | tail -4) <(losses h2.out) >/dev/null &&
	[ "$(losses h2.out | wc -l)" = 4 ] &&
	cmp -s s/global_step8/rank_tp00_pp000.safetensors h/global_step8/rank_tp00_pp000.safetensors &&
	ok bert_resume_is_bit_exact || fail bert_resume_is_bit_exact "rc $rc1 $rc2: $(diff <(losses s.out | tail -4) <(losses h2.out) | head -3)"
brt "${R[@]}" --load h --bert-no-binary-head --save h3 >h3.out 2>&1
rc=$?
[ $rc != 0 ] && grep -q 'another model' h3.out && ok bert_checkpoint_of_another_head_is_refused ||
	fail bert_checkpoint_of_another_head_is_refused "exit $rc: $(tail -2 h3.out)"

# ckpt-merge-tp reads it as a BERT (tests/cli/ckpt-bert.sh tests the checkpoint tools in full)
"$BIN/ckpt-merge-tp" h --output merged >merge.out 2>&1
rc=$?
[ $rc = 0 ] && cmp -s h/global_step8/rank_tp00_pp000.safetensors merged/global_step8/rank_tp00_pp000.safetensors &&
	ok bert_checkpoint_merges_with_ckpt_merge_tp_as_it_is ||
	fail bert_checkpoint_merges_with_ckpt_merge_tp_as_it_is "exit $rc: $(tail -2 merge.out)"

# --- parallel layouts -----------------------------------------------------------------------------
P=(--train-iters 3 --lr 3e-3 --log-interval 1 --eval-interval 3 --eval-iters 1 --hidden-dropout 0
	--attention-dropout 0)
brt "${P[@]}" >p1.out 2>&1
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	same() {
		"$PY" - <(losses "$1") <(losses "$2") <<'PYEOF'
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 3, (a, b)
for x, y in zip(a, b):
    for u, v in zip(x[1:], y[1:]):
        assert abs(float(u) - float(v)) <= 1e-5 * abs(float(u)) + 1e-3 * (len(u) < 8), (x, y)
PYEOF
	}
	for lay in "tp2 --tensor-model-parallel-size 2" "pp2 --pipeline-model-parallel-size 2" "dp2"; do
		set -- $lay
		n=$1
		shift
		mpirun --oversubscribe -np 2 "$TR" "${B[@]}" "${P[@]}" "$@" >"$n.out" 2>&1
		same p1.out "$n.out" 2>"$n.err" && ok "bert_${n}_matches_one_rank" ||
			fail "bert_${n}_matches_one_rank" "$(tail -1 "$n.err") $(grep -i error "$n.out" | head -2)"
	done
else
	skip bert_parallel_layouts "no mpirun or no build/lib/lmtk/train-mpi.so"
fi

# --- the CUDA backend through the executor --------------------------------------------------------
if [ -s "$EXEC" ]; then
	LMTK_CUDA_PLUGIN=$EXEC "$TR" "${B[@]}" "${P[@]}" --device cuda >cu.out 2>&1
	if "$PY" - <(losses p1.out) <(losses cu.out) <<'PYEOF' 2>cu.err
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 3, (a, b)
for x, y in zip(a, b):
    for u, v in zip(x[1:], y[1:]):
        assert abs(float(u) - float(v)) <= 2e-2 * abs(float(u)), (x, y)
PYEOF
	then ok exec_cuda_bert_run_matches_cpu
	else fail exec_cuda_bert_run_matches_cpu "$(tail -1 cu.err) $(tail -2 cu.out)"; fi
fi

# --- the plan and misuse --------------------------------------------------------------------------
"$TR" "${B[@]}" --train-iters 3 --lr 1e-3 --dry-run --format json --nodes 1 --gpus-per-node 1 >dry.json 2>dry.err
want=$(sed -n 's/^train: BERT .* model, \([0-9]*\) parameters.*/\1/p' p1.out)
got=$("$PY" -c 'import json,sys; print(json.load(open("dry.json"))["model"]["params"]["total"])' 2>/dev/null)
[ -n "$want" ] && [ "$want" = "$got" ] && ok bert_dry_run_counts_the_models_parameters ||
	fail bert_dry_run_counts_the_models_parameters "dry-run $got, the model $want"
expect_rc bert_flag_without_bert_is_refused 2 "$TR" --num-layers 2 --hidden-size 32 \
	--num-attention-heads 2 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 4 \
	--train-iters 2 --lr 1e-3 --vocab-size 100 --bert-no-binary-head --dry-run --nodes 1 --gpus-per-node 1 &&
	contains bert_flag_without_bert_names_it "$T/out" 'bert-no-binary-head is a BERT flag'
expect_rc bert_with_alibi_is_refused 2 brt --train-iters 2 --lr 1e-3 --position-embedding-type alibi &&
	grep -q 'alibi is not in Megatron' "$T/err" && ok bert_with_alibi_names_the_flag ||
	fail bert_with_alibi_names_the_flag "$(head -3 "$T/err")"
rm -rf "$T"
