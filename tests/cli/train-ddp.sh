#!/usr/bin/env bash
# train's DP gradient buckets (src/train/run/buckets.c) over the NCCL transport on the CPU executor
# (tests/cuda-exec: ranks are processes, streams and events as CUDA's), and over MPI on the CPU:
#  - --overlap-grad-reduce with a bucket of one element (every layer its own bucket) and three
#    micro-batches per rank, every operation run as soon as it is queued (LMTK_CUDA_EXEC_EAGER): the same losses and grad norms as one rank, and the checkpoint of the
#    plain DP=2 run byte for byte - a bucket reduced before the last micro-batch's backward had
#    finished its layers would miss gradients; two such runs are bit-identical (the fixed order);
#  - the overlap is real: in the last iteration the buckets' NCCL calls are queued on a second
#    stream before the backward's last kernels (the embeddings') are queued on the first, and
#    without the flag nothing goes to a second stream;
#  - ZeRO-1 is Megatron's distributed optimizer: one reduce-scatter per (padded) bucket on the
#    bucket stream and one all-gather of its chunks after the step, and it still saves the plain
#    DP=2 run's bytes; one rank's losses, and its checkpoint within fp32's order of sums;
#  - every rank of a DP=2 x TP=2 run, and of each stage of DP=2 x PP=2, queues the same NCCL
#    calls in the same order across its two streams and its communicators;
#  - DP=2 x PP=2 (the tied embedding's sum between stages before its DP sum) and DP=2 x TP=2 (the
#    replicated tensors' TP average after their DP sum) overlapped and under ZeRO-1 save the bytes
#    of the plain runs of their layouts;
#  - the MPI transport (CPU) with --overlap-grad-reduce gives the plain MPI run's losses exactly.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
TR=$BIN/train
cd "$T" || exit 3
if [ ! -s "$EXEC" ] || ! nm -D --defined-only "$EXEC" | grep -qw lmtk_dist_nccl; then
	fail cuda_executor_with_nccl_built "$EXEC is missing or lacks lmtk_dist_nccl"
	exit 0
fi
MEG=$(tiny_dataset) || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.* .
export LMTK_CUDA_PLUGIN=$EXEC LMTK_RENDEZVOUS_DIR=$T/rdv LMTK_CUDA_EXEC_NCCL_TIMEOUT=60
mkdir -p rdv
M=(--num-layers 2 --num-attention-heads 4 --hidden-size 64 --seq-length 32 --max-position-embeddings 32
	--micro-batch-size 2 --global-batch-size 12 --lr 1e-3 --data-path meg-gpt2-openwebtext_text_document
	--vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt"
	--log-interval 1 --eval-iters 0 --train-iters 3 --save-interval 3)
OV=(--overlap-grad-reduce --ddp-bucket-size 1)
# ranks NAME NP FLAGS...: train on CUDA with M and FLAGS as NP srun tasks (tests/lib.sh
# srun_ranks)
ranks() { srun_ranks "$1" "$2" "$TR" "${M[@]}" --device cuda "${@:3}"; }
curve() { sed -n 's/.*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2/p' "$1"; }
ck() { echo "$1/global_step3/rank_tp00_pp00${2:-0}.safetensors"; }
# near A B: every tensor within 1e-3 of its largest magnitude (one rank adds the micro-batches'
# gradients one by one, DP=2 per rank first: fp32 is not associative)
near() {
	"$PY" - "$1" "$2" <<'PYEOF'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == '__metadata__':
            continue
        raw = b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]]
        if v['dtype'] == 'F32':
            out[k] = np.frombuffer(raw, np.float32)
        elif v['dtype'] == 'BF16':
            out[k] = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert sorted(a) == sorted(b) and len(a) > 10, (len(a), len(b))
for k in a:
    d = np.abs(a[k] - b[k]).max()
    assert d <= 1e-3 * max(np.abs(a[k]).max(), 1e-30), (k, d)
PYEOF
}
# qseq LOG: the NCCL calls a rank queued, in order, each with its stream (the executor's trace)
qseq() {
	awk '/^cuda-exec: nccl: queued / { sub(/^cuda-exec: nccl: queued /, ""); p = p $0 "; "; next }
	     /^cuda-exec: queued (nccl|an NCCL group)/ && p != "" { print p "stream " $NF; p = "" }' "$1"
}
# last_iter LOG: what rank 0 queued in the last iteration's last backward, from the one before's
# embedding backward (the word embedding's: the backward's last GEMM-free kernel) to its own
last_iter() {
	awk -v N="$(grep -c 'queued embed_bwd_wte_k' "$1")" \
		'/queued embed_bwd_wte_k/ { n++ } n == N - 1 || (n == N && /queued embed_bwd_wte_k/)' "$1"
}

"$TR" "${M[@]}" --device cuda --save one >one.out 2>&1 || fail one_rank_runs "$(tail -3 one.out)"
ranks dp2 2 --save dp2 || fail dp2_runs "$(tail -3 dp2.0 dp2.1)"
# EAGER: each operation runs when queued, so a bucket's sum runs before the backward's later
# kernels, as it may on a GPU (the executor otherwise runs the second stream at the next sync)
RANKS_ENV="LMTK_CUDA_EXEC_TRACE=1 LMTK_CUDA_EXEC_EAGER=1" ranks ov 2 "${OV[@]}" --save ov
rc=$?
[ $rc = 0 ] && grep -q 'DP=2 TP=1 PP=1' ov.0 && ok overlapped_dp2_runs || fail overlapped_dp2_runs "exit $rc: $(grep -v cuda-exec ov.0 | tail -3)"
[ -n "$(curve one.out)" ] && [ "$(curve one.out)" = "$(curve ov.0)" ] &&
	ok overlapped_buckets_losses_and_grad_norms_equal_one_rank ||
	fail overlapped_buckets_losses_and_grad_norms_equal_one_rank "$(diff <(curve one.out) <(curve ov.0) | head -4)"
cmp -s "$(ck dp2)" "$(ck ov)" && ok overlapped_buckets_checkpoint_equals_plain_dp2_byte_for_byte ||
	fail overlapped_buckets_checkpoint_equals_plain_dp2_byte_for_byte "$(cmp "$(ck dp2)" "$(ck ov)" 2>&1)"
ranks ov2 2 "${OV[@]}" --save ov2
cmp -s "$(ck ov)" "$(ck ov2)" && [ "$(curve ov.0)" = "$(curve ov2.0)" ] &&
	ok overlapped_runs_are_bit_identical || fail overlapped_runs_are_bit_identical "$(cmp "$(ck ov)" "$(ck ov2)" 2>&1)"

# the overlap: NCCL on stream 2 queued before the last iteration's embedding backward on stream 1
last_iter ov.0 >ov.last
n2=$(grep -c 'queued ncclReduceScatter on stream 2' ov.last)
[ "$n2" -ge 2 ] && [ "$(tail -1 ov.last | grep -c 'embed_bwd_wte_k.* on stream 1')" = 1 ] &&
	ok buckets_queued_on_a_second_stream_before_the_backward_ends ||
	fail buckets_queued_on_a_second_stream_before_the_backward_ends "$n2 reduce-scatters on stream 2 before the last embedding backward: $(grep 'stream 2' ov.0 | head -3)"
RANKS_ENV="LMTK_CUDA_EXEC_TRACE=1" ranks plain 2 --train-iters 1
grep -q 'queued embed_bwd_wte_k' plain.0 && ! grep -q 'on stream 2' plain.0 &&
	ok without_the_flag_one_stream || fail without_the_flag_one_stream "$(grep -m3 'stream 2' plain.0)"

# ZeRO-1: a reduce onto each shard's owner, the same bytes
RANKS_ENV="LMTK_CUDA_EXEC_TRACE=1 LMTK_CUDA_EXEC_EAGER=1" ranks z1 2 "${OV[@]}" --zero-stage 1 --save z1
rc=$?
[ $rc = 0 ] && cmp -s "$(ck dp2)" "$(ck z1)" && [ "$(curve one.out)" = "$(curve z1.0)" ] &&
	ok zero1_overlapped_checkpoint_equals_plain_dp2_byte_for_byte ||
	fail zero1_overlapped_checkpoint_equals_plain_dp2_byte_for_byte "exit $rc: $(cmp "$(ck dp2)" "$(ck z1)" 2>&1; grep -v cuda-exec z1.0 | tail -2)"
near "$(ck one)" "$(ck z1)" >z1.cmp 2>&1 && ok zero1_checkpoint_tracks_one_rank ||
	fail zero1_checkpoint_tracks_one_rank "$(tail -2 z1.cmp)"
# Megatron's distributed optimizer: per iteration one reduce-scatter per bucket on the bucket
# stream (nothing else there, no reduce per shard), and the optimizer's fp32 all-gathers of the
# buckets' chunks (the same counts) on the compute stream
qseq z1.0 >z1.q
nb=$(sed -n 's/^train: ZeRO-1: \([0-9]*\) buckets .*/\1/p' z1.0)
chunks() { sed -n "s/^$1(count \([0-9]*\), ncclFloat32[,)].*; stream $2\$/\1/p" z1.q | sort -n | uniq -c; }
[ "${nb:-0}" -gt 1 ] && [ "$(grep -c 'stream 2$' z1.q)" = $((3 * nb)) ] &&
	[ "$(grep -c '^ncclReduceScatter(count [0-9]*, ncclFloat32, ncclSum) .*; stream 2$' z1.q)" = $((3 * nb)) ] &&
	[ "$(chunks ncclReduceScatter 2)" = "$(chunks ncclAllGather 1 | grep -F -x -f <(chunks ncclReduceScatter 2))" ] &&
	ok zero1_one_reduce_scatter_and_one_all_gather_per_bucket ||
	fail zero1_one_reduce_scatter_and_one_all_gather_per_bucket "$nb buckets: $(sed 's/(count [0-9]*/(/' z1.q | sort | uniq -c | head -8)"

# DP=2 x PP=2: the tied embedding's stage sum, then its DP sum, as before
ranks pp 4 --pipeline-model-parallel-size 2 --save pp || fail dp2_pp2_runs "$(tail -2 pp.0 pp.3)"
RANKS_ENV="LMTK_CUDA_EXEC_TRACE=1" ranks ppo 4 --pipeline-model-parallel-size 2 "${OV[@]}" --zero-stage 1 --save ppo
rc=$?
[ $rc = 0 ] && cmp -s "$(ck pp 0)" "$(ck ppo 0)" && cmp -s "$(ck pp 1)" "$(ck ppo 1)" &&
	ok dp2_pp2_overlapped_zero1_checkpoint_equals_plain_byte_for_byte ||
	fail dp2_pp2_overlapped_zero1_checkpoint_equals_plain_byte_for_byte "exit $rc: $(tail -2 ppo.0)"

# DP=2 x TP=2: the replicated tensors' TP average after every bucket's DP sum, as before
ranks tp 4 --tensor-model-parallel-size 2 --save tp || fail dp2_tp2_runs "$(tail -2 tp.0 tp.3)"
RANKS_ENV="LMTK_CUDA_EXEC_TRACE=1" ranks tpo 4 --tensor-model-parallel-size 2 "${OV[@]}" --zero-stage 1 --save tpo
rc=$?
[ $rc = 0 ] && cmp -s "$(ck tp)" "$(ck tpo)" &&
	cmp -s tp/global_step3/rank_tp01_pp000.safetensors tpo/global_step3/rank_tp01_pp000.safetensors &&
	ok dp2_tp2_overlapped_zero1_checkpoint_equals_plain_byte_for_byte ||
	fail dp2_tp2_overlapped_zero1_checkpoint_equals_plain_byte_for_byte "exit $rc: $(tail -2 tpo.0)"

# TP's and PP's collectives on the compute stream while DP's buckets run on the second: every
# rank of a stage queues the same calls (kind, count, type, communicator, stream) in the same
# order, so no two ranks start collectives of two communicators in opposite orders
# (dist_nccl.cu's header)
for r in 0 1 2 3; do qseq tpo.$r >tpo.q$r; qseq ppo.$r >ppo.q$r; done
[ "$(grep -c 'stream 2$' tpo.q0)" -gt 0 ] && [ "$(grep -c 'ncclAllGather(count [0-9]*, ncclBfloat16)' tpo.q0)" -gt 0 ] &&
	cmp -s tpo.q0 tpo.q1 && cmp -s tpo.q0 tpo.q2 && cmp -s tpo.q0 tpo.q3 &&
	[ "$(grep -c 'ncclSend' ppo.q0)" -gt 0 ] && cmp -s ppo.q0 ppo.q1 && cmp -s ppo.q2 ppo.q3 &&
	ok every_rank_of_a_stage_queues_its_collectives_in_one_order ||
	fail every_rank_of_a_stage_queues_its_collectives_in_one_order "$(diff tpo.q0 tpo.q1 | head -3; diff tpo.q0 tpo.q2 | head -3; diff ppo.q0 ppo.q1 | head -3)"

# the MPI transport: the buckets summed at once, the same numbers
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	mpirun --oversubscribe -np 2 "$TR" "${M[@]}" --device cpu --threads 1 >mpi.out 2>&1
	mpirun --oversubscribe -np 2 "$TR" "${M[@]}" --device cpu --threads 1 "${OV[@]}" --zero-stage 1 >mpio.out 2>&1
	rc=$?
	[ $rc = 0 ] && [ -n "$(curve mpi.out)" ] && [ "$(curve mpi.out)" = "$(curve mpio.out)" ] &&
		ok mpi_overlapped_zero1_equals_plain_mpi || fail mpi_overlapped_zero1_equals_plain_mpi "exit $rc: $(diff <(curve mpi.out) <(curve mpio.out) | head -3; tail -2 mpio.out)"
else
	skip mpi_overlapped_zero1_equals_plain_mpi "no mpirun or no train-mpi.so"
fi
[ "$({ ls -A rdv | grep -vxF ".lmtk-rendezvous-$(id -u)"; ls -A "rdv/.lmtk-rendezvous-$(id -u)" 2>/dev/null; } | wc -l)" = 0 ] ||
	fail rendezvous_files_removed "$(ls -AR rdv)"
rm -rf "$T"
