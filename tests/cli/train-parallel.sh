#!/usr/bin/env bash
# train over several ranks (mpirun --oversubscribe on the CPU): data, tensor and pipeline
# parallelism give the same run as one process - the same losses and gradient norms, iteration
# by iteration - for (DP,TP,PP) = (2,1,1), (1,2,1), (2,2,1), (1,1,2), (1,1,4), (1,2,2), (2,1,2)
# and BLOOM's pipeline partition, ZeRO-1 on and off; replicated tensors (layer norms, row-parallel biases,
# positions) and their Adam moments stay bit-identical across TP ranks after many steps at a
# high learning rate (the 176B layer-norm desync cannot happen); a run resumes in its layout.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
MEG=$(tiny_dataset) || exit 3   # a dataset to train on; the reference one is not needed
cd "$T" || exit 3
if ! command -v mpirun >/dev/null || [ ! -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	skip parallel_runs "no mpirun or no build/lib/lmtk/train-mpi.so (Open MPI: make deps installs it)"
	exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx .
M=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
	--micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 2 --lr-decay-style cosine
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --device cpu --threads 1 --log-interval 1
	--eval-interval 10 --eval-iters 1 --hidden-dropout 0 --attention-dropout 0)
run() { local np=$1; shift; if [ "$np" = 1 ]; then "$TR" "${M[@]}" "$@"; else mpirun --oversubscribe -np "$np" "$TR" "${M[@]}" "$@"; fi; }
curve() { grep '^ iteration ' "$1" | sed 's/.*iteration *\([0-9]*\)\/.*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2 \3/'; }
# same CURVE_A CURVE_B: every iteration's loss and grad norm within fp32 tolerance (relative 1e-5)
same() {
	"$PY" - "$1" "$2" <<'PYEOF'
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 20, (len(a), len(b))
for x, y in zip(a, b):
    assert x[0] == y[0]
    for u, v in zip(x[1:], y[1:]):
        assert abs(float(u) - float(v)) <= 1e-5 * abs(float(u)) + 1e-3 * (len(u) < 8), (x, y)
PYEOF
}
run 1 --train-iters 20 >p1.out 2>&1 || fail one_rank_runs "$(tail -3 p1.out)"
curve p1.out >c1
for layout in "2 1" "2 2" "4 2"; do
	set -- $layout
	np=$1 tp=$2 dp=$(($1 / $2))
	name=dp${dp}_tp${tp}
	run $np --train-iters 20 --tensor-model-parallel-size $tp >$name.out 2>&1
	rc=$?
	grep -q "DP=$dp TP=$tp PP=1" $name.out && [ $rc = 0 ] || { fail "${name}_runs" "exit $rc: $(grep -v '^ iter' $name.out | tail -3)"; continue; }
	curve $name.out >c.$name
	same c1 c.$name 2>$name.err && ok "${name}_matches_one_rank_for_20_steps" || fail "${name}_matches_one_rank_for_20_steps" "$(tail -1 $name.err)"
	v1=$(grep -m1 'validation loss at iteration 10' p1.out | sed 's/.*value: \([^ ]*\) .*/\1/')
	v2=$(grep -m1 'validation loss at iteration 10' $name.out | sed 's/.*value: \([^ ]*\) .*/\1/')
	[ -n "$v1" ] && [ "$v1" = "$v2" ] && ok "${name}_validation_matches" || fail "${name}_validation_matches" "$v1 vs $v2"
	[ "$(grep -c '^ iteration ' $name.out)" = 20 ] && ok "${name}_one_log_line_per_iteration" || fail "${name}_one_log_line_per_iteration" "$(grep -c '^ iteration ' $name.out) lines"
done

# pipeline parallelism (1F1B): 4 layers over 2 and 4 stages, with TP, with DP, and BLOOM's
# 'type:transformer|embedding' partition
M+=(--num-layers 4)
run 1 --train-iters 20 >q1.out 2>&1; curve q1.out >cq1
for layout in "2 1 2" "4 1 4" "4 2 2" "4 1 2"; do
	set -- $layout
	np=$1 tp=$2 pp=$3 dp=$(($1 / $2 / $3))
	name=dp${dp}_tp${tp}_pp${pp}
	run $np --train-iters 20 --tensor-model-parallel-size $tp --pipeline-model-parallel-size $pp >$name.out 2>&1
	rc=$?
	grep -q "DP=$dp TP=$tp PP=$pp" $name.out && [ $rc = 0 ] || { fail "${name}_runs" "exit $rc: $(grep -v '^ iter' $name.out | tail -3)"; continue; }
	curve $name.out >c.$name
	same cq1 c.$name 2>$name.err && ok "${name}_matches_one_rank_for_20_steps" || fail "${name}_matches_one_rank_for_20_steps" "$(tail -1 $name.err)"
done
run 2 --train-iters 20 --pipeline-model-parallel-size 2 --pp-partition-method 'type:transformer|embedding' >pe.out 2>&1
curve pe.out >c.pe
same cq1 c.pe 2>pe.err && ok pp2_transformer_embedding_partition_matches || fail pp2_transformer_embedding_partition_matches "$(tail -1 pe.err; tail -2 pe.out)"
run 4 --train-iters 20 --pipeline-model-parallel-size 2 --tensor-model-parallel-size 2 --save rp --save-interval 10 --exit-interval 10 >rp1.out 2>&1
run 4 --train-iters 20 --pipeline-model-parallel-size 2 --tensor-model-parallel-size 2 --save rp --load rp --save-interval 10 >rp2.out 2>&1
{ curve rp1.out; curve rp2.out; } >c.rp
grep -q 'resumed from rp/global_step10' rp2.out && same cq1 c.rp 2>rp.err && [ -s rp/global_step20/rank_tp01_pp001.safetensors ] &&
	ok tp2_pp2_resumes_in_its_layout || fail tp2_pp2_resumes_in_its_layout "$(tail -1 rp.err; grep -h 'train:' rp2.out | tail -2)"
# the tied word embeddings of the first and last stage stay identical
"$PY" - rp/global_step20 <<'PYEOF' >tied.out 2>&1 && ok pp_tied_embeddings_identical_on_first_and_last_stage || fail pp_tied_embeddings_identical_on_first_and_last_stage "$(tail -2 tied.out)"
import json, struct, sys
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]] for k, v in h.items() if k != '__metadata__'}
for tp in (0, 1):
    a = load('%s/rank_tp%02d_pp000.safetensors' % (sys.argv[1], tp)); z = load('%s/rank_tp%02d_pp001.safetensors' % (sys.argv[1], tp))
    for k in ('word_embeddings.weight', 'exp_avg.word_embeddings.weight', 'exp_avg_sq.word_embeddings.weight'):
        assert a[k] == z[k], k
    assert 'layers.0.input_layernorm.weight' in a and 'layers.3.input_layernorm.weight' in z and 'final_layernorm.weight' in z
PYEOF
M=("${M[@]:0:${#M[@]}-2}")

# BLOOM style (ALiBi with each rank's slopes, the embedding LN, 6 heads): TP=2 is TP=1
B=(--position-embedding-type alibi --embed-layernorm --hidden-size 96 --num-attention-heads 6 --train-iters 20)
run 1 "${B[@]}" >b1.out 2>&1; curve b1.out >cb1
run 2 "${B[@]}" --tensor-model-parallel-size 2 >b2.out 2>&1; curve b2.out >cb2
same cb1 cb2 2>b.err && ok bloom_tp2_matches_one_rank || fail bloom_tp2_matches_one_rank "$(tail -1 b.err; tail -2 b2.out)"

# replicated tensors stay bit-identical across TP ranks: 60 steps at lr 0.05
run 2 --train-iters 60 --lr 5e-2 --tensor-model-parallel-size 2 --save rep --save-interval 60 --eval-iters 0 >rep.out 2>&1
"$PY" - rep/global_step60 <<'PYEOF' >rep.cmp 2>&1
import json, struct, sys
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]] for k, v in h.items() if k != '__metadata__'}
a, b = load(sys.argv[1] + '/rank_tp00_pp000.safetensors'), load(sys.argv[1] + '/rank_tp01_pp000.safetensors')
rep = [k for k in a if any(s in k for s in ('layernorm', 'attention.dense.bias', 'dense_4h_to_h.bias', 'position_embeddings'))]
assert len(rep) >= 3 * (2 * 6 + 2 + 1), len(rep)
bad = [k for k in rep if a[k] != b[k]]
split = [k for k in a if 'query_key_value.weight' in k and not k.startswith('exp')]
differ = [k for k in split if a[k] != b[k]]
print(len(rep), "replicated tensors (weights and both Adam moments) compared;", len(bad), "differ")
assert not bad, bad[:3]
assert differ == split, "the shards of split tensors should differ"
PYEOF
[ $? = 0 ] && ok tp2_replicated_tensors_and_moments_bit_identical_after_60_steps || fail tp2_replicated_tensors_and_moments_bit_identical_after_60_steps "$(tail -2 rep.cmp; tail -2 rep.out)"

# resume in the (DP,TP) = (2,2) layout: stop at 10, resume to 20, the same curve as straight
run 4 --train-iters 20 --tensor-model-parallel-size 2 --save r22 --save-interval 10 --exit-interval 10 >r1.out 2>&1
run 4 --train-iters 20 --tensor-model-parallel-size 2 --save r22 --load r22 --save-interval 10 >r2.out 2>&1
{ curve r1.out; curve r2.out; } >c.r22
grep -q 'resumed from r22/global_step10' r2.out && same c1 c.r22 2>r22.err && ls r22/global_step20/rank_tp01_pp000.safetensors >/dev/null 2>&1 &&
	ok dp2_tp2_resumes_in_its_layout || fail dp2_tp2_resumes_in_its_layout "$(tail -1 r22.err; grep -h 'train:' r2.out | tail -2)"
# a TP=2 checkpoint refuses a TP=1 run, naming the way out
run 1 --train-iters 20 --load r22 >x.out 2>&1
grep -q 'saved with TP=2 PP=1, this run is TP=1 PP=1; re-shard it with ckpt-merge-tp' x.out &&
	ok other_layout_names_ckpt_merge_tp || fail other_layout_names_ckpt_merge_tp "$(tail -2 x.out)"
# ZeRO-1: the optimizer state sharded over DP changes nothing but memory - the same checkpoint
# bytes as without it, also across a stop and resume, and with TP
run 4 --train-iters 10 --tensor-model-parallel-size 2 --save zoff --save-interval 10 --eval-iters 0 >zoff.out 2>&1
run 4 --train-iters 10 --tensor-model-parallel-size 2 --zero-stage 1 --save zon --save-interval 5 --eval-iters 0 --exit-interval 5 >zon1.out 2>&1
run 4 --train-iters 10 --tensor-model-parallel-size 2 --zero-stage 1 --save zon --load zon --save-interval 5 --eval-iters 0 >zon2.out 2>&1
cmp -s zoff/global_step10/rank_tp00_pp000.safetensors zon/global_step10/rank_tp00_pp000.safetensors &&
	cmp -s zoff/global_step10/rank_tp01_pp000.safetensors zon/global_step10/rank_tp01_pp000.safetensors &&
	ok zero1_on_and_off_give_the_same_checkpoint_bytes_with_resume || fail zero1_on_and_off_give_the_same_checkpoint_bytes_with_resume "$(tail -2 zon2.out)"

# Dropout on, Megatron's document masks and the post-LN residual: every mask element is keyed
# by its sample's place in the global batch and its global head, so any layout - and any
# micro-batch size - draws the same masks and trains the same model.
D=(--num-layers 4 --hidden-dropout 0.1 --attention-dropout 0.1 --eod-mask-loss --reset-position-ids
	--reset-attention-mask --apply-residual-connection-post-layernorm --train-iters 20)
run 1 "${D[@]}" >d1.out 2>&1; curve d1.out >cd1
run 1 "${D[@]}" --hidden-dropout 0 --attention-dropout 0 >d0.out 2>&1; curve d0.out >cd0
same cd1 cd0 2>/dev/null && fail dropout_is_on "the curve with dropout equals the one without" || ok dropout_is_on
grep -q 'no effect here:.*eod-mask-loss\|reset-attention-mask' d1.out && fail document_masks_acted_on "$(grep 'no effect' d1.out)" || ok document_masks_acted_on
for layout in "2 1 1" "2 2 1" "2 1 2" "4 2 1"; do
	set -- $layout
	np=$1 tp=$2 pp=$3 dp=$(($1 / $2 / $3))
	name=dropout_dp${dp}_tp${tp}_pp${pp}
	run $np "${D[@]}" --tensor-model-parallel-size $tp --pipeline-model-parallel-size $pp >$name.out 2>&1
	rc=$?
	[ $rc = 0 ] || { fail "${name}_runs" "exit $rc: $(grep -v '^ iter' $name.out | tail -3)"; continue; }
	curve $name.out >c.$name
	same cd1 c.$name 2>$name.err && ok "${name}_matches_one_rank" || fail "${name}_matches_one_rank" "$(tail -1 $name.err)"
done
# the micro-batch size too (without --eod-mask-loss, whose loss is Megatron's mean of each
# micro-batch's sum(loss*mask)/sum(mask), so it depends on how samples are grouped)
D=(--num-layers 4 --hidden-dropout 0.1 --attention-dropout 0.1 --reset-position-ids
	--reset-attention-mask --apply-residual-connection-post-layernorm --train-iters 20)
run 1 "${D[@]}" >m2.out 2>&1; curve m2.out >cm2
run 1 "${D[@]}" --micro-batch-size 1 >m1.out 2>&1; curve m1.out >cm1
same cm2 cm1 2>m1.err && ok dropout_micro_batch_size_1_matches_2 || fail dropout_micro_batch_size_1_matches_2 "$(tail -1 m1.err)"
run 4 "${D[@]}" --micro-batch-size 1 --pipeline-model-parallel-size 2 >m4.out 2>&1; curve m4.out >cm4
same cm2 cm4 2>m4.err && ok dropout_dp2_pp2_micro_batch_size_1_matches_one_rank || fail dropout_dp2_pp2_micro_batch_size_1_matches_one_rank "$(tail -1 m4.err)"

# DeepSpeed's sequence-length curriculum (lengths going down and up) with dropout: DP2 x PP2 and
# TP2 cut their micro-batches as one rank does (the activations passed between stages too)
cat >cl.json <<'JSON'
{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
 "curriculum_learning": {"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8,
  "max_difficulty": 64, "schedule_type": "fixed_discrete",
  "schedule_config": {"difficulty": [16, 40, 24, 64], "max_step": [5, 10, 15]}}}
JSON
C=(--num-layers 4 --hidden-dropout 0.1 --attention-dropout 0.1 --train-iters 20 --deepspeed
	--deepspeed_config cl.json)
run 1 "${C[@]}" >cl1.out 2>&1; curve cl1.out >ccl1
grep -q 'curriculum seqlen:    24 |' cl1.out && ok curriculum_one_rank_runs || fail curriculum_one_rank_runs "$(tail -3 cl1.out)"
run 4 "${C[@]}" --pipeline-model-parallel-size 2 >cl4.out 2>&1; curve cl4.out >ccl4
same ccl1 ccl4 2>cl4.err && ok curriculum_dp2_pp2_matches_one_rank || fail curriculum_dp2_pp2_matches_one_rank "$(tail -1 cl4.err)"
run 2 "${C[@]}" --tensor-model-parallel-size 2 >clt.out 2>&1; curve clt.out >cclt
same ccl1 cclt 2>clt.err && ok curriculum_tp2_matches_one_rank || fail curriculum_tp2_matches_one_rank "$(tail -1 clt.err)"

# only rank 0 prints
[ "$(grep -c '^train: .* parameters' dp2_tp2.out)" = 1 ] && ok one_rank_prints || fail one_rank_prints "$(grep -c '^train: .* parameters' dp2_tp2.out) banners"
rm -rf "$T"
