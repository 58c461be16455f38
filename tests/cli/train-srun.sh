#!/usr/bin/env bash
# train over several ranks on the local 2-node cluster, launched the way a SLURM run launches it:
# 4 ranks, 2 on each of n1 and n2, as (DP,TP) = (2,2) give the same run as one process - the same
# losses and gradient norms, iteration by iteration - started by `srun --mpi=pmix` (the ranks'
# MPI_Init finds the job through SLURM's PMIx server) and by Open MPI's `mpirun` inside an
# allocation (it reads the allocation and starts its daemons with srun).  Then
# slurm/setup-test-n2.slurm, as sbatch runs it: its layout (2 nodes x 2 tasks, TP=2) comes from
# the allocation; SIGUSR1 to its batch shell stops all 4 ranks at one iteration, they save it,
# and a second job resumes there in the same layout, on the same curve as one rank.
#
# On this cluster n1 and n2 are one host, which costs two settings a real cluster does not need:
# - OMPI_MCA_btl=self,tcp: Open MPI's shared-memory transport (vader) names its segments after
#   the host and the rank's local index, so n1's and n2's ranks 0 and 1 would share segments.
# - srun --mpi=pmix needs a TmpFS per node (TmpFS=DIR/tmp/%n in slurm.conf): SLURM's PMIx
#   plugin makes TmpFS/spmix_appdir_UID_JOB.STEP on each node, and with one directory for both
#   the second node's step fails ("Cannot create directory ... File exists") before any rank
#   starts.  Without it the srun cases are skipped and setup-test-n2.slurm runs with
#   LAUNCHER=mpirun.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
MEG=$(tiny_dataset) || exit 3   # a dataset to train on; the reference one is not needed
cd "$T" || exit 3
if ! sinfo >/dev/null 2>&1; then
	skip srun_runs "no local SLURM cluster: sinfo fails with SLURM_CONF=${SLURM_CONF:-unset} (tests/run.sh starts one)"
	rm -rf "$T"
	exit 0
fi
if ! command -v mpirun >/dev/null || [ ! -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	skip srun_runs "no mpirun or no build/lib/lmtk/train-mpi.so (Open MPI: make deps installs it)"
	rm -rf "$T"
	exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp \
	OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
PMIX=
case $(scontrol show config 2>/dev/null | sed -n 's/^TmpFS *= *//p') in
*%n*) srun --mpi=list 2>&1 | grep -qw pmix && PMIX=1 ;;
esac
NOPMIX="the cluster's TmpFS is one directory for n1 and n2 (slurm.conf TmpFS=DIR/tmp/%n is needed), or srun lacks --mpi=pmix"

mkdir -p data
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx data/
MODEL="--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64"
TRAIN="--micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 2 --lr-decay-style cosine
	--device cpu --threads 1 --log-interval 1 --eval-interval 10 --eval-iters 1 --hidden-dropout 0
	--attention-dropout 0"
DATA=(--data-path "$T/data/meg-gpt2-openwebtext_text_document" --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt")
# shellcheck disable=SC2206
M=($MODEL $TRAIN "${DATA[@]}")
curve() { grep '^ iteration ' "$1" | sed 's/.*iteration *\([0-9]*\)\/.*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2 \3/'; }
# same CURVE_A CURVE_B N: N iterations, every loss and grad norm within fp32 tolerance (relative
# 1e-5), as in train-parallel.sh
same() {
	"$PY" - "$1" "$2" "$3" <<'PYEOF'
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
n = int(sys.argv[3])
assert len(a) == len(b) == n, (len(a), len(b), n)
for x, y in zip(a, b):
    assert x[0] == y[0]
    for u, v in zip(x[1:], y[1:]):
        assert abs(float(u) - float(v)) <= 1e-5 * abs(float(u)) + 1e-3 * (len(u) < 8), (x, y)
PYEOF
}
# dp2_tp2 NAME OUT RC: a 4-rank run of 20 iterations that matches one rank
dp2_tp2() {
	if [ "$3" != 0 ] || ! grep -q '4 ranks: DP=2 TP=2 PP=1' "$2"; then
		fail "$1" "exit $3: $(grep -v '^ iter' "$2" | tail -4)"
		return
	fi
	curve "$2" >"$2.curve"
	same c20 "$2.curve" 20 2>"$2.err" && ok "$1" || fail "$1" "$(tail -1 "$2.err")"
}

# one rank: the reference (this also builds the data's index cache, which the ranks then share)
"$TR" "${M[@]}" --train-iters 20 >p20.out 2>&1 || fail one_rank_runs "$(tail -3 p20.out)"
"$TR" "${M[@]}" --train-iters 40 >p40.out 2>&1 || fail one_rank_runs "$(tail -3 p40.out)"
curve p20.out >c20
curve p40.out >c40

# Debian 12's Open MPI 4.1.4 TCP transport, on this one loaded host, rarely fails a connect
# between two ranks at start-up ("Open MPI failed to TCP connect to a peer MPI process", its
# errno misreported as 115, see open-mpi/ompi#10734 and #13110) and a rank then dies of
# SIGSEGV before train has printed a line (once in about 20 full runs of this test; not seen in
# 10 reruns under load with core dumps on, so where it crashes is not known).  A run that fails so - that message, and no line of train's - is
# started once more, saying so; any other failure fails its checks.
ompi_tcp_flake() { grep -q 'Open MPI failed to TCP connect' "$1" 2>/dev/null && ! grep -q '^train: ' "$1"; }
# again NAME CMD...: CMD, and once more when it failed so (its output in NAME); its status
again() {
	local name=$1 rc
	shift
	"$@" >"$name" 2>&1
	rc=$?
	if [ $rc != 0 ] && ompi_tcp_flake "$name"; then
		echo "# $name: Open MPI's TCP connect failure at start-up: run again"
		"$@" >"$name" 2>&1
		rc=$?
	fi
	return $rc
}

JOBS=()
trap '[ ${#JOBS[@]} = 0 ] || scancel "${JOBS[@]}" 2>/dev/null' EXIT

# --- srun: one task per rank, MPI bootstrapped from SLURM's PMIx ------------------------------
if [ -n "$PMIX" ]; then
	again s.out timeout 300 srun --mpi=pmix --nodes=2 --ntasks-per-node=2 --kill-on-bad-exit=1 --time=5 \
		"$TR" "${M[@]}" --train-iters 20 --tensor-model-parallel-size 2
	dp2_tp2 srun_pmix_2_nodes_x_2_dp2_tp2_matches_one_rank s.out $?
else
	skip srun_pmix_2_nodes_x_2_dp2_tp2_matches_one_rank "$NOPMIX"
fi

# --- mpirun inside an allocation of 2 nodes x 2 tasks -----------------------------------------
again m.out timeout 300 salloc --nodes=2 --ntasks-per-node=2 --time=5 \
	mpirun "$TR" "${M[@]}" --train-iters 20 --tensor-model-parallel-size 2
dp2_tp2 mpirun_in_allocation_2_nodes_x_2_dp2_tp2_matches_one_rank m.out $?

# --- slurm/setup-test-n2.slurm: stopped by SIGUSR1 in one job, resumed by the next ------------
export LMTK=$TOP DATA_PATH=$T/data/meg-gpt2-openwebtext_text_document \
	VOCAB=$MEG/gpt2-tiny-vocab.json MERGES=$MEG/gpt2-tiny-merges.txt \
	CHECKPOINT_PATH=$T/ckpt TENSORBOARD_PATH=$T/tb LOGS_PATH=$T/logs KILL_SWITCH_PATH=$T/kill-switch \
	MODEL_ARGS="$MODEL" TRAIN_ARGS="$TRAIN --train-iters 40 --save-interval 1000"
unset TP PP
if [ -n "$PMIX" ]; then unset LAUNCHER; else export LAUNCHER=mpirun; fi
P=n2s$$
# job 1: stopped by SIGUSR1 to the batch shell once it has logged 5 iterations (started
# again once on Open MPI's start-up failure, as above)
for attempt in 1 2; do
	rm -f j1
	sbatch --parsable --wait --job-name="$P" --output="$T/%x-%j.out" "$TOP/slurm/setup-test-n2.slurm" >j1 2>j1.err &
	SB=$!
	if ! wait_for 30 test -s j1; then
		fail n2_job1_submits "$(cat j1.err)"
		exit 1
	fi
	J1=$(cat j1)
	JOBS+=("$J1")
	OUT1=$T/$P-$J1.out
	logged5() { grep -q '^ iteration *5/' "$OUT1" 2>/dev/null; }
	if wait_for 120 logged5; then
		scancel --batch --signal=USR1 "$J1"
		break
	fi
	scancel "$J1"
	if [ $attempt = 1 ] && { wait $SB; ompi_tcp_flake "$OUT1"; }; then
		echo "# job $J1 hit Open MPI's TCP connect failure at start-up (see tests/cli/train-srun.sh): submitted again"
		continue
	fi
	fail n2_job1_trains "$(tail -c 1500 "$OUT1" 2>&1; cat j1.err)"
	break
done
wait $SB
rc=$?
LAYOUT="^setup-test-n2.slurm: layout: 4 ranks \(2 nodes x 2\): DP=2 TP=2 PP=1$"
contains n2_script_derives_layout_from_allocation "$OUT1" "$LAYOUT"
contains n2_train_runs_dp2_tp2 "$OUT1" "^train: .* 4 ranks: DP=2 TP=2 PP=1, collectives over MPI$"
if [ -n "$PMIX" ]; then
	contains n2_script_launches_srun_pmix "$OUT1" \
		"^setup-test-n2.slurm: srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks=4 --ntasks-per-node=2 "
else
	skip n2_script_launches_srun_pmix "$NOPMIX; this run used LAUNCHER=mpirun"
fi
K=$(sed -n 's/^train: stopping at iteration \([0-9]*\) on SIGUSR1$/\1/p' "$OUT1")
check n2_job1_exits_0_after_sigusr1 [ "$rc" = 0 ]
check n2_all_ranks_stop_at_one_iteration_printed_once sh -c "[ \"\$(grep -c '^train: stopping at iteration' '$OUT1')\" = 1 ] &&
	[ -n '$K' ] && [ '$K' -lt 40 ]"
check n2_every_tp_rank_saves_the_stop sh -c "[ \"\$(cat '$T/ckpt/latest')\" = global_step$K ] &&
	[ -s '$T/ckpt/global_step$K/rank_tp00_pp000.safetensors' ] && [ -s '$T/ckpt/global_step$K/rank_tp01_pp000.safetensors' ]"
contains n2_script_waits_for_train "$OUT1" "^setup-test-n2.slurm: train exited with status 0 after SIGUSR1;"

# job 2: resumes at K in the same layout and runs to 40
J2=$(sbatch --parsable --wait --job-name="$P" --output="$T/%x-%j.out" "$TOP/slurm/setup-test-n2.slurm" 2>j2.err)
rc=$?
J2=${J2%%[!0-9]*}
OUT2=$T/$P-$J2.out
check n2_job2_exits_0 [ "$rc" = 0 ]
contains n2_job2_resumes_where_job1_stopped "$OUT2" "^train: resumed from $T/ckpt/global_step$K: iteration $K, "
{ curve "$OUT1"; curve "$OUT2"; } >c.n2
same c40 c.n2 40 2>n2.err && ok n2_stop_and_resume_across_jobs_matches_one_rank ||
	fail n2_stop_and_resume_across_jobs_matches_one_rank "$(tail -1 n2.err; grep -hv '^ iter' "$OUT2" | tail -3)"
rm -rf "$T"
