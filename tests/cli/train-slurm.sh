#!/usr/bin/env bash
# slurm/train.slurm on the local cluster: a 3-task job array (--array=1-3%1) of a tiny model on
# Megatron's test corpus, in the script's default layout (1 node x 1 task, TP=1: one rank;
# tests/cli/train-srun.sh runs setup-test-n2.slurm's 2 nodes x 2 ranks).  Task 1 trains until
# SLURM's time-limit warning (SIGUSR1 to the batch shell, which forwards it to train), saves and
# exits 0; task 2 resumes from exactly that checkpoint and stops when the kill switch appears;
# task 3 finds the kill switch and exits 0 without starting train.  First, without SLURM:
# train.slurm and setup-test-n2.slurm are what slurm/mkslurm.sh makes of slurm/train.slurm.in, so
# the two cannot drift apart, and a layout that TP does not divide is refused before train starts.
. "$(dirname "$0")/../lib.sh"
MEG=$(tiny_dataset) || exit 3   # a dataset to train on; the reference one is not needed
MARK='^# ---- The rest is the same in every script generated'

# --- one template, two scripts ---------------------------------------------------------------
mkdir -p "$T/gen"
if bash "$TOP/slurm/mkslurm.sh" "$T/gen" 2>"$T/gen.err"; then
	check train_slurm_is_generated_from_template cmp "$T/gen/train.slurm" "$TOP/slurm/train.slurm"
	check setup_test_n2_is_generated_from_template \
		cmp "$T/gen/setup-test-n2.slurm" "$TOP/slurm/setup-test-n2.slurm"
else
	fail slurm_scripts_generate "mkslurm.sh failed: $(head -c 400 "$T/gen.err")"
fi
shared() { sed -n "/$MARK/,\$p" "$1"; }
shared "$TOP/slurm/train.slurm" >"$T/shared-train"
shared "$TOP/slurm/setup-test-n2.slurm" >"$T/shared-n2"
check train_and_setup_test_share_launcher_and_traps sh -c "cmp -s '$T/shared-train' '$T/shared-n2' &&
	grep -q 'trap .on_signal USR1. USR1' '$T/shared-train' && grep -q 'LAUNCH\[@\]' '$T/shared-train'"
check setup_test_n2_asks_for_2_nodes grep -qx '#SBATCH --nodes=2' "$TOP/slurm/setup-test-n2.slurm"
check setup_test_n2_runs_2_ranks_per_node_with_tp2 sh -c "grep -qx '#SBATCH --ntasks-per-node=2' '$TOP/slurm/setup-test-n2.slurm' &&
	grep -qx 'TP=\${TP:-2}' '$TOP/slurm/setup-test-n2.slurm'"
check train_slurm_runs_1_rank_per_node_with_tp1 sh -c "grep -qx '#SBATCH --ntasks-per-node=1' '$TOP/slurm/train.slurm' &&
	grep -qx 'TP=\${TP:-1}' '$TOP/slurm/train.slurm'"
check train_slurm_asks_for_usr1_before_time_limit grep -qx '#SBATCH --signal=B:USR1@600' "$TOP/slurm/train.slurm"
check slurm_scripts_parse sh -c "bash -n '$TOP/slurm/train.slurm' && bash -n '$TOP/slurm/setup-test-n2.slurm'"

# --- the layout, outside SLURM: one process, which TP=2 cannot split -----------------------------
mkdir -p "$T/lay"
expect_rc layout_that_tp_does_not_divide_is_refused 2 env LMTK="$TOP" DATA_PATH="$T/lay/d" VOCAB=v MERGES=m \
	CHECKPOINT_PATH="$T/lay/ckpt" TENSORBOARD_PATH="$T/lay/tb" LOGS_PATH="$T/lay/logs" KILL_SWITCH_PATH="$T/lay/ks" \
	bash "$TOP/slurm/setup-test-n2.slurm"
contains layout_refusal_names_tp_and_the_tasks "$T/out" \
	"^setup-test-n2.slurm: 1 rank \(1 node x 1\): not a multiple of TP=2 x PP=1; set TP and PP"
lacks layout_refusal_starts_nothing "$T/out" "^train:|^srun"

# --- the job array ---------------------------------------------------------------------------
if ! sinfo >/dev/null 2>&1; then
	fail slurm_cluster_available "sinfo fails with SLURM_CONF=${SLURM_CONF:-unset}"
	exit 1
fi
P=ts$$
GBS=8
mkdir -p "$T/data"
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx "$T/data/"
export LMTK=$TOP DATA_PATH=$T/data/meg-gpt2-openwebtext_text_document \
	VOCAB=$MEG/gpt2-tiny-vocab.json MERGES=$MEG/gpt2-tiny-merges.txt \
	CHECKPOINT_PATH=$T/ckpt TENSORBOARD_PATH=$T/tb LOGS_PATH=$T/logs KILL_SWITCH_PATH=$T/kill-switch \
	MODEL_ARGS="--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
		--max-position-embeddings 64" \
	TRAIN_ARGS="--micro-batch-size 4 --global-batch-size $GBS --train-iters 20000 --lr 1e-3
		--log-interval 10 --eval-interval 1000 --eval-iters 2 --save-interval 100
		--device cpu --threads 1"
# Each task may run 2 minutes and is warned 60 s before that.  slurmctld looks at time limits and
# warning signals every 30 s (PERIODIC_TIMEOUT), so SIGUSR1 reaches the batch shell 30 to 60 s into
# the task (measured here, slurm 22.05): after train has started and saved, and well before the
# limit.  This is the path a real run takes; `scancel --batch --signal=USR1` would be quicker but
# would skip SLURM's own signal delivery, the thing the #SBATCH line relies on.
J=$(sbatch --parsable --job-name="$P" --array=1-3%1 --time=2 --signal=B:USR1@60 \
	--output="$T/%x-%A_%a.out" "$TOP/slurm/train.slurm")
trap 'scancel "$J" 2>/dev/null' EXIT
OUT1=$T/$P-${J}_1.out OUT2=$T/$P-${J}_2.out OUT3=$T/$P-${J}_3.out

# rec N: array task N's one-line scontrol record (SLURM forgets ended jobs after MinJobAge=30 s,
# and there is no accounting for sacct: take it as soon as the task ends)
rec() { scontrol -o show job "${J}_$1" 2>/dev/null; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
ended() {
	case $(field JobState "$(rec "$1")") in
	COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | DEADLINE) return 0 ;;
	esac
	return 1
}
poll() { local end=$((SECONDS + $1)); shift; until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.5; done; }
# completed NAME RECORD: the task ended COMPLETED with exit code 0
completed() {
	local s
	s="$(field JobState "$2") $(field ExitCode "$2")"
	if [ "$s" = "COMPLETED 0:0" ]; then ok "$1"; else fail "$1" "state/exit '$s'"; fi
}

# task 1: trains, is warned, saves, exits 0
poll 200 ended 1
R1=$(rec 1)
completed array_task1_completes_exit_0 "$R1"
contains task1_layout_is_one_rank "$OUT1" "^train.slurm: layout: 1 rank \(1 node x 1\): DP=1 TP=1 PP=1$"
contains task1_srun_starts_one_task "$OUT1" \
	"^train.slurm: srun --mpi=pmix --kill-on-bad-exit=1 --nodes=1 --ntasks=1 --ntasks-per-node=1 $TOP/bin/train "
contains task1_batch_shell_gets_usr1_and_forwards_it "$OUT1" "^train.slurm: got SIGUSR1: asking train to save and stop"
contains task1_train_stops_on_sigusr1 "$OUT1" "^train: stopping at iteration [0-9]+ on SIGUSR1$"
lacks task1_ends_before_time_limit "$OUT1" "DUE TO TIME LIMIT"
K=$(sed -n 's/^train: stopping at iteration \([0-9]*\) on SIGUSR1$/\1/p' "$OUT1")
SAVED=$(sed -n 's/^saved checkpoint at iteration *\([0-9]*\) to .*/\1/p' "$OUT1" | tail -1)
check task1_last_save_is_where_it_stopped sh -c "[ -n '$K' ] && [ '$SAVED' = '$K' ] &&
	[ \"\$(cat '$T/ckpt/latest')\" = global_step$K ]"
contains task1_script_waits_for_train "$OUT1" "^train.slurm: train exited with status 0 after SIGUSR1"

# task 2: resumes from task 1's checkpoint; once it has logged, the kill switch stops it
has_logged() { grep -q '^ iteration ' "$OUT2" 2>/dev/null; }
if poll 90 has_logged; then ok task2_starts_and_logs; else fail task2_starts_and_logs "$(tail -c 400 "$OUT2" 2>&1)"; fi
touch "$KILL_SWITCH_PATH"
contains task2_resumes_where_task1_stopped "$OUT2" \
	"^train: resumed from $T/ckpt/global_step$K: iteration $K, $((K * GBS)) samples consumed$"
read -r I C < <(sed -n 's/^ iteration *\([0-9]*\)\/ *[0-9]* | consumed samples: *\([0-9]*\) .*/\1 \2/p' "$OUT2" | head -1)
check task2_consumed_samples_continue sh -c "[ '${I:-0}' -gt '${K:-0}' ] && [ '${I:-0}' -le $((${K:-0} + 10)) ] &&
	[ '${C:-x}' = $((${I:-0} * GBS)) ]"
poll 60 ended 2
R2=$(rec 2)
completed array_task2_completes_exit_0 "$R2"
contains task2_stops_on_kill_switch "$OUT2" "^train: stopping at iteration [0-9]+ on the kill switch$"

# task 3: the kill switch is there: exit 0 at once, train never started
poll 60 ended 3
R3=$(rec 3)
completed array_task3_completes_exit_0 "$R3"
contains task3_sees_kill_switch "$OUT3" \
	"^train.slurm: job [0-9]+ \(array task 3 of $J\): kill switch $T/kill-switch exists: exiting without training"
lacks task3_never_starts_train "$OUT3" "^train:|^ iteration|^srun"
RT3=$(field RunTime "$R3")   # HH:MM:SS
check task3_exits_at_once [ "$(date -u -d "1970-01-01 ${RT3:-23:59:59}" +%s)" -le 5 ]

# main_log.txt: every task's lines, appended in order
check main_log_has_all_tasks_in_order sh -c "grep -o 'array task [123] of $J' '$LOGS_PATH/main_log.txt' | uniq |
	tr '\n' , | grep -qx 'array task 1 of $J,array task 2 of $J,array task 3 of $J,'"
contains main_log_has_task1_stop "$LOGS_PATH/main_log.txt" "^train: stopping at iteration $K on SIGUSR1$"
check tensorboard_events_per_training_task [ "$(ls "$T/tb" | grep -c '^events\.out\.tfevents\.')" = 2 ]
