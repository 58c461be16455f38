#!/usr/bin/env bash
# train --device cuda over several ranks: the NCCL transport (src/train/cuda/dist_nccl.cu) through
# the CPU executor's NCCL (tests/cuda-exec/nccl.cpp: ranks are processes, reductions in rank order).
# Ranks are started by this script with the environment srun gives its tasks (SLURM_PROCID,
# SLURM_LOCALID, SLURM_NTASKS, SLURM_JOB_ID, ...), so they meet through the file rendezvous, as on
# a GPU machine without MPI; and, where mpirun is installed, by mpirun (ids over MPI).
#  - each rank binds its GPU: local rank modulo the visible GPUs, and says so;
#  - DP=2 is the one-rank run with the same global batch: the same losses, and a checkpoint equal
#    bit for bit but for the tied word embedding, whose two gradient terms per micro-batch one
#    rank adds one by one and DP=2 adds per rank first (fp32 is not associative);
#  - PP=2 with one micro-batch is the one-rank run bit for bit (the merged checkpoint's bytes),
#    and with four (1F1B, NCCL send/receive both ways, evaluation through the pipeline) the same
#    losses and validation losses; TP=2, DP=2 x TP=2 and TP=2 x PP=2 track one rank within bf16's
#    rounding of the partial sums, and their replicated tensors are bit-identical across TP ranks
#    (ckpt-merge-tp refuses otherwise); TP=2 under --fp16 sums fp16 and tracks one fp16 rank; PP=4 (the tied embedding's first-last pair a communicator
#    of its own) is one rank but for that order; ZeRO-1 changes no byte; a stopped and resumed
#    DP=2 run saves the bytes of the run straight through;
#  - a rank that never comes: the others stop within the bounded wait, naming it, exit 3.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
TR=$BIN/train
cd "$T" || exit 3
if [ ! -s "$EXEC" ]; then
	fail cuda_executor_built "$EXEC is missing (make builds it from src/train/cuda and tests/cuda-exec)"
	exit 0
fi
if ! nm -D --defined-only "$EXEC" | grep -qw lmtk_dist_nccl; then
	fail executor_plugin_exports_the_nccl_transport "no lmtk_dist_nccl in $EXEC"
	exit 0
fi
SO=$TOP/build/lib/lmtk/train-cuda.so
if [ -s "$SO" ] && [ -f "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h" ]; then
	nm -D --defined-only "$SO" | grep -qw lmtk_dist_nccl && ldd "$SO" | grep -q libnccl &&
		ok cuda_plugin_has_the_nccl_transport_and_links_libnccl ||
		fail cuda_plugin_has_the_nccl_transport_and_links_libnccl "$(nm -D --defined-only "$SO" | grep lmtk)"
fi
MEG=$(tiny_dataset) || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.* .
export LMTK_CUDA_PLUGIN=$EXEC LMTK_RENDEZVOUS_DIR=$T/rdv LMTK_CUDA_EXEC_NCCL_TIMEOUT=60
mkdir -p rdv
M=(--num-layers 2 --num-attention-heads 4 --hidden-size 64 --seq-length 32 --max-position-embeddings 32
	--micro-batch-size 2 --lr 1e-3 --data-path meg-gpt2-openwebtext_text_document
	--vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt"
	--log-interval 1 --eval-iters 0 --device cuda --train-iters 4 --save-interval 4)
# ranks NAME NP FLAGS...: train with M and FLAGS as NP srun tasks (tests/lib.sh srun_ranks)
ranks() { srun_ranks "$1" "$2" "$TR" "${M[@]}" "${@:3}"; }
curve() { sed -n 's/.*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2/p' "$1"; }
# close CURVE_A CURVE_B TOL: as many iterations, each loss and grad norm within TOL (relative)
close() {
	"$PY" - <(curve "$1") <(curve "$2") "$3" <<'PYEOF'
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) and a, (len(a), len(b))
for x, y in zip(a, b):
    for u, v in zip(x, y):
        assert abs(float(u) - float(v)) <= float(sys.argv[3]) * abs(float(u)), (x, y)
PYEOF
}
# ckcmp A.safetensors B.safetensors: tensors byte-identical but the tied word embedding (master
# weight and both Adam moments), which must be within 1e-4 of its largest magnitude
ckcmp() {
	"$PY" - "$1" "$2" <<'PYEOF'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: (v['dtype'], b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]]) for k, v in h.items() if k != '__metadata__'}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert sorted(a) == sorted(b)
tied = {k for k in a if k.endswith('word_embeddings.weight')}
assert len(tied) == 3, tied
same = [k for k in a if k not in tied and a[k] == b[k]]
assert len(same) == len(a) - 3, [k for k in a if k not in tied and a[k] != b[k]][:4]
for k in tied:
    assert a[k][0] == 'F32', (k, a[k][0])
    x = np.frombuffer(a[k][1], np.float32); y = np.frombuffer(b[k][1], np.float32)
    assert np.abs(x - y).max() <= 1e-4 * np.abs(x).max(), (k, np.abs(x - y).max())
print(len(same), 'tensors bit-identical; the tied embedding within 1e-4')
PYEOF
}
# the files live in rdv's private subdirectory (train(1): made 0700): anything in either counts
RDV_SUB=rdv/.lmtk-rendezvous-$(id -u)
leftovers() { { ls -A rdv | grep -vxF "${RDV_SUB#rdv/}"; ls -A "$RDV_SUB" 2>/dev/null; } | wc -l; }

# --- one rank, the reference --------------------------------------------------------------------
"$TR" "${M[@]}" --global-batch-size 4 --save one >one.out 2>&1 || fail one_rank_runs "$(tail -3 one.out)"

# --- DP=2: binding, the banner, the same run ----------------------------------------------------
RANKS_ENV="LMTK_CUDA_EXEC_DEVICES=2" ranks dp2 2 --global-batch-size 4 --save dp2
rc=$?
if [ $rc = 0 ] && grep -q 'DP=2 TP=1 PP=1, collectives over NCCL (unique ids via files in ' dp2.0; then
	ok dp2_runs_over_nccl_met_through_files
else
	fail dp2_runs_over_nccl_met_through_files "exit $rc: $(tail -3 dp2.0 dp2.1)"
fi
grep -q '^train: rank 0 of 2: GPU cuda:0 (local rank 0 from SLURM_LOCALID, modulo 2 visible GPUs)' dp2.0 &&
	grep -q '^train: rank 1 of 2: GPU cuda:1 (local rank 1 from SLURM_LOCALID, modulo 2 visible GPUs)' dp2.1 &&
	ok each_rank_binds_local_rank_modulo_visible_gpus_and_says_so ||
	fail each_rank_binds_local_rank_modulo_visible_gpus_and_says_so "$(grep -h 'GPU cuda' dp2.0 dp2.1)"
# one visible GPU (srun --gpus-per-task=1): every rank's is cuda:0
RANKS_ENV="LMTK_CUDA_EXEC_DEVICES=1" ranks vis1 2 --global-batch-size 4 --train-iters 1
grep -q 'rank 1 of 2: GPU cuda:0 (local rank 1 from SLURM_LOCALID, modulo 1 visible GPU)' vis1.1 &&
	ok one_visible_gpu_per_task_binds_cuda_0 || fail one_visible_gpu_per_task_binds_cuda_0 "$(grep -h 'GPU cuda' vis1.*)"
[ -n "$(curve one.out)" ] && [ "$(curve one.out)" = "$(curve dp2.0)" ] &&
	ok dp2_losses_and_grad_norms_equal_one_rank || fail dp2_losses_and_grad_norms_equal_one_rank "$(diff <(curve one.out) <(curve dp2.0) | head -4)"
ckcmp one/global_step4/rank_tp00_pp000.safetensors dp2/global_step4/rank_tp00_pp000.safetensors >dp2.cmp 2>&1 &&
	ok dp2_checkpoint_equals_one_rank_bit_for_bit_but_the_tied_embedding_order ||
	fail dp2_checkpoint_equals_one_rank_bit_for_bit_but_the_tied_embedding_order "$(tail -2 dp2.cmp)"
[ "$(leftovers)" = 0 ] && ok rendezvous_files_removed_once_the_ranks_met || fail rendezvous_files_removed_once_the_ranks_met "$(ls -A rdv)"
[ "$(stat -c '%a %u' "$RDV_SUB" 2>&1)" = "700 $(id -u)" ] && ok rendezvous_directory_is_the_users_own_0700 ||
	fail rendezvous_directory_is_the_users_own_0700 "$(ls -lAd rdv/.lmtk* 2>&1)"

# --- ZeRO-1 over NCCL: the same bytes -----------------------------------------------------------
ranks z1 2 --global-batch-size 4 --zero-stage 1 --save z1 ||
	fail zero1_runs "$(tail -3 z1.0 z1.1)"
cmp -s dp2/global_step4/rank_tp00_pp000.safetensors z1/global_step4/rank_tp00_pp000.safetensors &&
	ok dp2_zero1_checkpoint_equals_dp2_byte_for_byte || fail dp2_zero1_checkpoint_equals_dp2_byte_for_byte "$(tail -2 z1.0)"

# --- PP=2: one micro-batch bit for bit; four through 1F1B ---------------------------------------
"$TR" "${M[@]}" --global-batch-size 2 --save one_m1 >one_m1.out 2>&1
ranks pp2 2 --global-batch-size 2 --pipeline-model-parallel-size 2 --save pp2
rc=$?
"$BIN/ckpt-merge-tp" --input pp2 --output pp2m >pp2m.out 2>&1
[ $rc = 0 ] && cmp -s one_m1/global_step4/rank_tp00_pp000.safetensors pp2m/global_step4/rank_tp00_pp000.safetensors &&
	ok pp2_one_micro_batch_checkpoint_equals_one_rank_byte_for_byte ||
	fail pp2_one_micro_batch_checkpoint_equals_one_rank_byte_for_byte "exit $rc: $(tail -2 pp2.0 pp2m.out)"
E=(--global-batch-size 8 --eval-interval 2 --eval-iters 1)
"$TR" "${M[@]}" "${E[@]}" --save one_m4 >one_m4.out 2>&1
ranks pp2m4 2 "${E[@]}" --pipeline-model-parallel-size 2 --save pp2m4
rc=$?
vl() { grep 'validation loss at' "$1" | sed 's/.*lm loss value: \([^ ]*\) .*/\1/'; }
[ $rc = 0 ] && [ "$(curve one_m4.out)" = "$(curve pp2m4.0)" ] && [ "$(vl one_m4.out | wc -l)" = 4 ] &&
	[ "$(vl one_m4.out)" = "$(vl pp2m4.0)" ] && ok pp2_1f1b_four_micro_batches_and_evaluation_equal_one_rank ||
	fail pp2_1f1b_four_micro_batches_and_evaluation_equal_one_rank "exit $rc: $(diff <(curve one_m4.out; vl one_m4.out) <(curve pp2m4.0; vl pp2m4.0) | head -3; tail -2 pp2m4.1)"
"$BIN/ckpt-merge-tp" --input pp2m4 --output pp2m4m >pp2m4m.out 2>&1 &&
	ckcmp one_m4/global_step4/rank_tp00_pp000.safetensors pp2m4m/global_step4/rank_tp00_pp000.safetensors >pp2m4.cmp 2>&1 &&
	ok pp2_1f1b_checkpoint_equals_one_rank_but_the_tied_embedding_order ||
	fail pp2_1f1b_checkpoint_equals_one_rank_but_the_tied_embedding_order "$(tail -2 pp2m4m.out pp2m4.cmp)"

# four stages: the tied embedding's pair (first and last stage) is a communicator of its own
"$TR" "${M[@]}" "${E[@]}" --num-layers 4 --save one_l4 >one_l4.out 2>&1
ranks pp4 4 "${E[@]}" --num-layers 4 --pipeline-model-parallel-size 4 --save pp4
rc=$?
"$BIN/ckpt-merge-tp" --input pp4 --output pp4m >pp4m.out 2>&1
[ $rc = 0 ] && [ "$(curve one_l4.out)" = "$(curve pp4.0)" ] &&
	ckcmp one_l4/global_step4/rank_tp00_pp000.safetensors pp4m/global_step4/rank_tp00_pp000.safetensors >pp4.cmp 2>&1 &&
	ok pp4_equals_one_rank_but_the_tied_embedding_order ||
	fail pp4_equals_one_rank_but_the_tied_embedding_order "exit $rc: $(tail -1 pp4.cmp pp4m.out pp4.3)"

# --- a DP=2 run stopped and resumed is the run straight through ---------------------------------
ranks res1 2 --global-batch-size 4 --save res --save-interval 2 --exit-interval 2 &&
	ranks res2 2 --global-batch-size 4 --save res --load res --save-interval 2
rc=$?
[ $rc = 0 ] && grep -q 'resumed from res/global_step2' res2.0 &&
	cmp -s dp2/global_step4/rank_tp00_pp000.safetensors res/global_step4/rank_tp00_pp000.safetensors &&
	ok dp2_resume_is_bit_exact || fail dp2_resume_is_bit_exact "exit $rc: $(grep -h 'train:' res2.0 | tail -2)"

# --- TP=2, DP=2 x TP=2, TP=2 x PP=2: bf16 partial sums; replicas bit-identical ------------------
for layout in "2 2 1" "4 2 1" "4 2 2"; do
	set -- $layout
	np=$1 tp=$2 pp=$3 dp=$(($1 / $2 / $3))
	name=dp${dp}_tp${tp}_pp${pp}
	ranks $name $np --global-batch-size 4 --tensor-model-parallel-size $tp --pipeline-model-parallel-size $pp --save $name
	rc=$?
	if [ $rc != 0 ] || ! grep -q "DP=$dp TP=$tp PP=$pp, collectives over NCCL" $name.0; then
		fail "${name}_runs" "exit $rc: $(tail -2 $name.*)"
		continue
	fi
	close one.out $name.0 5e-3 2>$name.err && ok "${name}_tracks_one_rank_within_bf16" ||
		fail "${name}_tracks_one_rank_within_bf16" "$(tail -1 $name.err)"
	"$BIN/ckpt-merge-tp" --input $name --output $name.m >$name.merge 2>&1 &&
		ok "${name}_replicated_tensors_bit_identical_across_tp_ranks" ||
		fail "${name}_replicated_tensors_bit_identical_across_tp_ranks" "$(tail -2 $name.merge)"
done
# DP=2 x TP=2 is TP=2 with the global batch split: its losses are TP=2's
[ -n "$(curve dp1_tp2_pp1.0)" ] && [ "$(curve dp1_tp2_pp1.0)" = "$(curve dp2_tp2_pp1.0)" ] &&
	ok dp2_tp2_losses_equal_tp2 || fail dp2_tp2_losses_equal_tp2 "$(diff <(curve dp1_tp2_pp1.0) <(curve dp2_tp2_pp1.0) | head -3)"
# and the comparison tells runs apart: another learning rate fails it
sed 's/lm loss: 8\.4/lm loss: 8.5/' one.out >other.out
close one.out other.out 5e-3 2>/dev/null && fail bf16_tracking_discriminates "a changed loss passed" || ok bf16_tracking_discriminates
# --fp16: the activations are fp16, and so are TP's partial sums (ncclFloat16): TP=2 tracks one
# rank of --fp16 within fp16's rounding (a sum in another type would read fp16 bits as bf16)
F16=(--global-batch-size 4 --train-iters 3 --fp16 --initial-loss-scale 4096)
"$TR" "${M[@]}" "${F16[@]}" >one16.out 2>&1
ranks tp2fp16 2 "${F16[@]}" --tensor-model-parallel-size 2
rc=$?
if [ $rc = 0 ] && grep -q 'computes in fp16' tp2fp16.0 && grep -q 'computes in fp16' one16.out &&
	close one16.out tp2fp16.0 1e-3 2>tp2fp16.err; then
	ok tp2_fp16_sums_in_fp16_and_tracks_one_rank
else
	fail tp2_fp16_sums_in_fp16_and_tracks_one_rank "exit $rc: $(tail -1 tp2fp16.err; tail -2 tp2fp16.0)"
fi

# --- torchrun (and the deepspeed launcher): RANK of WORLD_SIZE, met under MASTER_ADDR:PORT --------
# torchrun --no-python runs each rank with these, inside an srun task whose SLURM_* it inherits
# (SLURM_STEP_NUM_TASKS=1: one torchrun per node) - the inner launcher's must win
torch_env() {
	echo "SLURM_JOB_ID=77 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=1" \
		"SLURM_STEP_NUM_TASKS=1 PMI_RANK=0 PMI_SIZE=1 RANK=$1 LOCAL_RANK=$1 WORLD_SIZE=$2" \
		"LOCAL_WORLD_SIZE=$2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + RANKS_JOB))" \
		"TORCHELASTIC_RUN_ID=none LMTK_CUDA_EXEC_DEVICES=2"
}
RANKS_JOB=$((RANKS_JOB + 1))
launch_ranks torch 2 torch_env "$TR" "${M[@]}" --global-batch-size 4 --save torch
rc=$?
[ $rc = 0 ] && grep -q 'DP=2 TP=1 PP=1, collectives over NCCL (unique ids via files in ' torch.0 &&
	grep -q '^train: rank 1 of 2: GPU cuda:1 (local rank 1 from LOCAL_RANK, modulo 2 visible GPUs)' torch.1 &&
	cmp -s dp2/global_step4/rank_tp00_pp000.safetensors torch/global_step4/rank_tp00_pp000.safetensors &&
	ok torchrun_ranks_meet_and_train_as_srun_ranks_do ||
	fail torchrun_ranks_meet_and_train_as_srun_ranks_do "exit $rc: $(grep -h -e 'DP=' -e 'rank . of' -e 'train:' torch.0 torch.1 | tail -4)"
[ "$(leftovers)" = 0 ] && ok torchrun_rendezvous_files_removed || fail torchrun_rendezvous_files_removed "$(ls -A rdv "$RDV_SUB")"
# over two nodes the files must be where both nodes look: neither --save nor LMTK_RENDEZVOUS_DIR
env -u LMTK_RENDEZVOUS_DIR RANK=0 LOCAL_RANK=0 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=n1 \
	MASTER_PORT=29500 LMTK_CUDA_EXEC_DEVICES=2 "$TR" "${M[@]}" --global-batch-size 8 >tnodes.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'over several nodes (4 ranks, 2 on this node).*LMTK_RENDEZVOUS_DIR' tnodes.out &&
	ok torchrun_over_nodes_without_a_shared_directory_is_told_why ||
	fail torchrun_over_nodes_without_a_shared_directory_is_told_why "exit $rc: $(tail -1 tnodes.out)"
env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 "$TR" "${M[@]}" --global-batch-size 4 >tnoaddr.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'MASTER_ADDR and MASTER_PORT, which both set, are not set' tnoaddr.out &&
	ok torchrun_without_master_addr_is_told_why || fail torchrun_without_master_addr_is_told_why "exit $rc: $(tail -1 tnoaddr.out)"
# the CPU backend's ranks meet through MPI only: refused, not N runs of one rank each
env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 "$TR" "${M[@]/cuda/cpu}" \
	--global-batch-size 4 >tcpu.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q "CPU backend's ranks meet through MPI: launch them with mpirun or srun" tcpu.out &&
	ok torchrun_on_the_cpu_backend_is_refused || fail torchrun_on_the_cpu_backend_is_refused "exit $rc: $(tail -1 tcpu.out)"

# --- a rank that never comes --------------------------------------------------------------------
RANKS_JOB=$((RANKS_JOB + 1))
start=$SECONDS
for r in 0 1; do
	env SLURM_JOB_ID=$RANKS_JOB SLURM_STEP_ID=0 SLURM_PROCID=$r SLURM_LOCALID=$r SLURM_NTASKS=3 SLURM_STEP_NUM_TASKS=3 \
		LMTK_RENDEZVOUS_TIMEOUT=2 "$TR" "${M[@]}" --global-batch-size 6 >late.$r 2>&1 &
done
st0=0 st1=0
wait %1 || st0=$?
wait %2 || st1=$?
if [ $st0 = 3 ] && [ $st1 = 3 ] && [ $((SECONDS - start)) -lt 30 ] &&
	grep -q 'rendezvous in .*: 1 of 3 ranks never arrived within 2 s (LMTK_RENDEZVOUS_TIMEOUT): rank 2;' late.0 &&
	grep -q 'rank 1 of 3: rank 0 did not see every rank arrive within 2 s' late.1; then
	ok a_missing_rank_stops_the_others_within_the_bounded_wait_naming_it
else
	fail a_missing_rank_stops_the_others_within_the_bounded_wait_naming_it "exit $st0/$st1 after $((SECONDS - start)) s: $(tail -1 late.0 late.1)"
fi
[ "$(leftovers)" = 0 ] && ok a_failed_rendezvous_leaves_no_files || fail a_failed_rendezvous_leaves_no_files "$(ls -A rdv)"
# without SLURM's step names the ranks cannot meet: said, exit 2
env -u SLURM_JOB_ID SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 "$TR" "${M[@]}" \
	--global-batch-size 4 >nojob.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'SLURM_JOB_ID.* is not set' nojob.out && ok ranks_without_a_job_id_are_told_why ||
	fail ranks_without_a_job_id_are_told_why "exit $rc: $(tail -1 nojob.out)"
env -u SLURM_LOCALID SLURM_JOB_ID=9 SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 "$TR" "${M[@]}" \
	--global-batch-size 4 >noloc.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'cannot pick its GPU' noloc.out && ok a_rank_without_a_local_index_is_told_why ||
	fail a_rank_without_a_local_index_is_told_why "exit $rc: $(tail -1 noloc.out)"
# torchrun's and deepspeed's LOCAL_RANK is read before srun's inherited SLURM_LOCALID; not an index: said
env LOCAL_RANK=one SLURM_LOCALID=0 SLURM_JOB_ID=9 SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 \
	"$TR" "${M[@]}" --global-batch-size 4 >badloc.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'LOCAL_RANK=one is not a local rank' badloc.out && ok a_local_rank_that_is_not_an_index_is_named ||
	fail a_local_rank_that_is_not_an_index_is_named "exit $rc: $(tail -1 badloc.out)"

# --- mpirun: ids over MPI -----------------------------------------------------------------------
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	env -u LMTK_RENDEZVOUS_DIR mpirun --oversubscribe -np 2 -x LMTK_CUDA_PLUGIN -x LMTK_CUDA_EXEC_DEVICES=2 \
		"$TR" "${M[@]}" --global-batch-size 4 --save mpi >mpi.out 2>&1
	rc=$?
	[ $rc = 0 ] && grep -q 'collectives over NCCL (unique ids via MPI)' mpi.out &&
		grep -q 'rank 1 of 2: GPU cuda:1 (local rank 1 from OMPI_COMM_WORLD_LOCAL_RANK' mpi.out &&
		cmp -s dp2/global_step4/rank_tp00_pp000.safetensors mpi/global_step4/rank_tp00_pp000.safetensors &&
		ok mpirun_dp2_meets_over_mpi_and_equals_the_srun_style_run ||
		fail mpirun_dp2_meets_over_mpi_and_equals_the_srun_style_run "exit $rc: $(grep -v '^ iter' mpi.out | tail -3)"
else
	skip mpirun_dp2_meets_over_mpi "no mpirun or no build/lib/lmtk/train-mpi.so"
fi

rm -rf "$T"
