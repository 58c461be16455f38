#!/usr/bin/env bash
# A step over several GPU ranks without host synchronisation (src/train/run/iter.c: the step's
# scalars stay on the device and their sums over the ranks are queued there, dist.h dev_reduce),
# on the CUDA executor and its NCCL (ranks as processes, met through the file rendezvous):
#  - inside the --profile range of rank 0, every host synchronisation train makes leaves work
#    queued on the device (LMTK_CUDA_EXEC_SYNCS: "CALL QUEUED") for DP=2 with ZeRO-1, for PP=2
#    through 1F1B and for TP=2 (the vocabulary-parallel cross-entropy's statistics combined on
#    the device); the same runs made synchronous (LMTK_TRAIN_SYNC_STEP=1) drain it several
#    times a step, which shows the log sees such waits;
#  - the deferred step changes nothing a user sees: with clipping active, DP=2 with ZeRO-1,
#    PP=2 (two micro-batches) and TP=2 give the synchronous runs' log lines and checkpoints,
#    byte for byte;
#  - a decision one rank makes reaches every rank with the step: SIGUSR1 sent to rank 1 alone
#    stops both ranks after the same iteration, saved, exit 0; a dataset whose ids lie outside
#    the vocabulary stops both ranks with exit 2, naming why, and nothing hangs.
. "$(dirname "$0")/../lib.sh"
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
if [ ! -s "$EXEC" ]; then
	skip train_nosync_ranks "the executor plugin is not built (no CUDA toolkit headers)"
	exit 0
fi
cd "$T" || exit 3
python3 "$TOP/tests/ref/rand-dataset.py" rand 64 200 20000 3 || exit 3
mkdir -p big && python3 "$TOP/tests/ref/rand-dataset.py" big/big 64 200 30000 5 || exit 3
export LMTK_CUDA_PLUGIN=$EXEC LMTK_RENDEZVOUS_DIR=$T/rdv LMTK_CUDA_EXEC_NCCL_TIMEOUT=60 LMTK_CUDA_EXEC_DEVICES=2
mkdir -p rdv
M=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 2 --lr 1e-3 --bf16 --data-path rand
	--vocab-file vocab.json --merge-file merges.txt --split 1000,0,0 --eval-iters 0
	--log-interval 1 --device cuda --clip-grad 0.05)
ranks() { srun_ranks "$1" "$2" "$BIN/train" "${M[@]}" "${@:3}"; }
strip() {   # the log lines without the wall-clock fields
	grep -E '^ iteration|^train: done|skipped' "$1" | sed -E 's/[0-9.]+ s$//;
		s/(elapsed time per iteration \(s\)|samples per second|TFLOPs|MFU): [0-9.%]+//g;
		s/ time remaining: [^|]*\|//'
}

# --- no host synchronisation that drains the device (iterations 3..5 of rank 0), and the same
# logs and checkpoints as the synchronous step ------------------------------------------------
prof=(--train-iters 6 --profile --profile-step-start 2 --profile-step-end 5 --save-interval 6)
for layout in "dp2z --global-batch-size 4 --zero-stage 1" "pp2 --global-batch-size 4 --pipeline-model-parallel-size 2" \
	"tp2 --global-batch-size 2 --tensor-model-parallel-size 2"; do
	set -- $layout
	name=$1
	shift
	rm -f syncs-$name-d syncs-$name-s
	RANKS_ENV="LMTK_CUDA_EXEC_SYNCS=$T/syncs-$name-d" ranks $name-d 2 "$@" "${prof[@]}" --save ck-$name-d
	rc=$?
	RANKS_ENV="LMTK_TRAIN_SYNC_STEP=1 LMTK_CUDA_EXEC_SYNCS=$T/syncs-$name-s" ranks $name-s 2 "$@" "${prof[@]}" --save ck-$name-s
	rc2=$?
	if [ $rc != 0 ] || [ $rc2 != 0 ]; then
		fail "${name}_step_makes_no_host_sync_that_drains_the_device" "exit $rc/$rc2: $(tail -n 2 $name-d.0 $name-d.1 $name-s.0)"
		continue
	fi
	n=$(wc -l <syncs-$name-d)
	idle=$(awk '$NF == 0' syncs-$name-d | wc -l)
	idle_sync=$(awk '$NF == 0' syncs-$name-s | wc -l)
	if grep -q 'the step is not deferred\|read back as it runs' $name-d.0; then
		fail "${name}_step_makes_no_host_sync_that_drains_the_device" "$(grep -h 'deferred\|read back' $name-d.0)"
	elif [ "$idle" -eq 0 ] && [ "$n" -le 3 ] && [ "$idle_sync" -ge 3 ]; then
		ok "${name}_step_makes_no_host_sync_that_drains_the_device"
	else
		fail "${name}_step_makes_no_host_sync_that_drains_the_device" \
			"deferred: $n syncs in 3 iterations, $idle with nothing queued: $(head -5 syncs-$name-d | tr '\n' ';'); synchronous: $idle_sync draining"
	fi
	strip $name-d.0 >a.txt
	strip $name-s.0 >b.txt
	same=1 files=0
	for f in ck-$name-s/global_step6/*.safetensors; do
		files=$((files + 1))
		cmp -s "$f" "ck-$name-d/${f#ck-$name-s/}" || same=0
	done
	clipped=$(grep -c 'grad norm: [1-9]' a.txt)
	if [ $same = 1 ] && [ $files -ge 1 ] && [ -s "${f/ck-$name-s/ck-$name-d}" ] && [ "$clipped" -ge 6 ] && cmp -s a.txt b.txt; then
		ok "${name}_deferred_step_gives_the_synchronous_logs_and_checkpoints"
	else
		fail "${name}_deferred_step_gives_the_synchronous_logs_and_checkpoints" \
			"$files checkpoint files, same $same, clipped $clipped: $(diff a.txt b.txt | head -4)"
	fi
done

# --- a signal on one rank stops both after the same iteration -----------------------------------
RANKS_JOB=$((RANKS_JOB + 1))
pids=()
for r in 0 1; do
	env SLURM_JOB_ID=$RANKS_JOB SLURM_STEP_ID=0 SLURM_PROCID=$r SLURM_LOCALID=$r SLURM_NTASKS=2 \
		SLURM_STEP_NUM_TASKS=2 "$BIN/train" "${M[@]}" --global-batch-size 4 --train-iters 200 \
		--save ck-sig --save-interval 1000 >sig.$r 2>&1 &
	pids+=($!)
done
end=$((SECONDS + 120))
until grep -qE '^ iteration +3/' sig.0 || [ $SECONDS -ge $end ]; do sleep 0.2; done
kill -USR1 "${pids[1]}"
st0=0 st1=0
wait "${pids[0]}" || st0=$?
wait "${pids[1]}" || st1=$?
s0=$(sed -n 's/^train: stopping at iteration \([0-9]*\) on \(.*\)$/\1 \2/p' sig.0)
# rank 0 speaks for the run; rank 1 saw the signal itself.  Had the ranks stopped after
# different iterations, one would wait in a collective the other never joins (exit 3)
if [ $st0 = 0 ] && [ $st1 = 0 ] && [ "${s0#* }" = "a signal on another rank" ] &&
   [ "$(cat ck-sig/latest 2>/dev/null)" = "global_step${s0%% *}" ] && [ "${s0%% *}" -lt 200 ]; then
	ok a_signal_on_one_rank_stops_every_rank_after_the_same_iteration_saved
else
	fail a_signal_on_one_rank_stops_every_rank_after_the_same_iteration_saved \
		"exit $st0/$st1; rank 0: '$s0', latest $(cat ck-sig/latest 2>&1): $(tail -n 1 sig.0 sig.1)"
fi

# --- ids outside the vocabulary: both ranks stop, exit 2 ----------------------------------------
start=$SECONDS
ranks bad 2 --global-batch-size 4 --train-iters 4 --data-path big/big
rc=$?
if [ $rc = 2 ] && [ $((SECONDS - start)) -lt 100 ] && grep -q 'outside the vocabulary of 20000' bad.0 &&
   grep -q 'outside the vocabulary of 20000' bad.1 && ! grep -q '^ iteration' bad.0; then
	ok ids_outside_the_vocabulary_stop_every_rank_with_exit_2
else
	fail ids_outside_the_vocabulary_stop_every_rank_with_exit_2 "exit $rc after $((SECONDS - start)) s: $(tail -n 2 bad.0 bad.1)"
fi
