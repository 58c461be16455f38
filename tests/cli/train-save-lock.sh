#!/usr/bin/env bash
# One run per --save directory: train holds SAVE/.lmtk-save.lock (lib/lock.h) from start-up to
# exit, so a second run on the same --save is refused (exit 2, naming the holder's pid and host)
# before it trains - it would otherwise take the first run's save in progress for a crash's
# leftover and remove it - and the first run saves on undisturbed.  --dry-run takes no lock;
# --load D --save D resumes.  Where no lock can be had (a filesystem without flock: an
# LD_PRELOAD'ed flock that fails with ENOLCK here), a save removes only the temporaries of this
# host's dead processes, never a live one's or another host's.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
HOST=$(hostname)

MODEL=(--num-layers 1 --hidden-size 8 --num-attention-heads 2 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 1 --global-batch-size 1 --lr 1e-3
	--min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 4 --lr-decay-iters 100000
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1)
steps() { ls -d "$1"/global_step* 2>/dev/null | sed 's,.*global_step,,' | sort -n | tr '\n' ' '; }

# --- two runs on one --save: the first saves every iteration and is stopped (SIGSTOP) in the
# middle of a save - its temporary directory there - while the second starts ---
"$TR" "${MODEL[@]}" --train-iters 40 --save s --save-interval 1 >a.out 2>a.err &
A=$!
if ! wait_for 60 test -s s/latest; then
	fail first_run_saves "no s/latest after 60 s: $(tail -3 a.err)"
	kill "$A" 2>/dev/null
	exit 1
fi
kill -STOP "$A"
for i in $(seq 300); do
	ls -d s/.global_step*.tmp.* >/dev/null 2>&1 && break
	kill -CONT "$A"; sleep 0.0$((RANDOM % 10)); kill -STOP "$A"
done
tmp=$(ls -d s/.global_step*.tmp.* 2>/dev/null | head -1)
[ -n "$tmp" ] || skip first_run_stopped_mid_save "never caught it inside a save; the refusal is still tested"
expect_rc second_run_on_same_save_exits_2 2 "$TR" "${MODEL[@]}" --train-iters 3 --save s --save-interval 1
contains second_run_names_the_holder "$T/err" \
	"--save s is in use by another run \\(pid $A on $HOST since [0-9-]+ [0-9:]+\\): it holds s/\\.lmtk-save\\.lock"
lacks second_run_trained_nothing "$T/out" 'iteration +1/'
[ -z "$tmp" ] || check first_run_save_in_progress_untouched [ -d "$tmp" ]
kill -CONT "$A"
wait "$A"; rc=$?
check first_run_completes_exit_0 [ "$rc" = 0 ]
check first_run_saved_every_step [ "$(steps s)" = "$(seq 1 40 | tr '\n' ' ')" ]
check first_run_latest_is_its_last [ "$(cat s/latest)" = global_step40 ]
lacks first_run_no_failed_save a.err 'could not|cannot|No such file'

# --- the lock held by anyone (here this shell through flock(1), which records no holder); the
# first run let go when it ended, and cleared its record ---
check ended_run_cleared_its_record [ ! -s s/.lmtk-save.lock ]
exec 9>>s/.lmtk-save.lock && flock -n 9 || fail hold_the_lock "flock(1) could not take s/.lmtk-save.lock"
expect_rc held_lock_refuses_exit_2 2 "$TR" "${MODEL[@]}" --train-iters 41 --load s --save s --save-interval 1
contains held_lock_unknown_holder "$T/err" 'in use by another run \(holder unknown\)'
# two ranks (mpirun): rank 0 finds it held, and every rank stops before training, none hangs,
# and the refusal is said once, not once per rank
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
		timeout 120 mpirun --oversubscribe -np 2 "$TR" "${MODEL[@]}" --global-batch-size 2 \
		--train-iters 41 --load s --save s --save-interval 1 >mpi.out 2>&1 9>&-
	check two_ranks_held_lock_exit_2 [ $? = 2 ]
	# both stop (exit 2 above, nothing trained below); the refusal is rank 0's, said once
	check two_ranks_refusal_said_once [ "$(grep -c 'in use by another run' mpi.out)" = 1 ]
	lacks two_ranks_trained_nothing mpi.out 'iteration +1/'
else
	skip two_ranks_held_lock "no mpirun or no build/lib/lmtk/train-mpi.so"
fi
expect_rc dry_run_takes_no_lock 0 "$TR" "${MODEL[@]}" --train-iters 41 --load s --save s --save-interval 1 \
	--nodes 1 --gpus-per-node 1 --dry-run
exec 9>&-

# --- the lock free again: --load s --save s resumes and saves ---
expect_rc resume_same_dir_exit_0 0 "$TR" "${MODEL[@]}" --train-iters 42 --load s --save s --save-interval 1
contains resume_same_dir_resumed "$T/out" 'resumed from .*global_step40: iteration 40'
check resume_same_dir_saved [ "$(cat s/latest)" = global_step42 ]

# --- a lock file that is a symbolic link: refused, the file it names untouched ---
mkdir -p l && echo precious >precious && ln -s "$T/precious" l/.lmtk-save.lock
expect_rc symlink_lock_exit_2 2 "$TR" "${MODEL[@]}" --train-iters 1 --save l --save-interval 1
contains symlink_lock_says_why "$T/err" 'l/\.lmtk-save\.lock: is a symbolic link; refusing'
check symlink_lock_target_untouched [ "$(cat precious)" = precious ]
check symlink_lock_nothing_saved [ ! -e l/latest ]

# --- no flock: only this host's dead processes' temporaries are removed ---
if ! printf '#include <errno.h>\nint flock(int fd, int op) { (void)fd; (void)op; errno = ENOLCK; return -1; }\n' >noflock.c ||
	! cc -shared -fPIC -o noflock.so noflock.c 2>cc.err; then
	skip no_flock_cleanup "cannot build an LD_PRELOAD shim: $(head -c 200 cc.err)"
	exit 0
fi
sleep 60 &
LIVE=$!
true &
DEAD=$!
wait "$DEAD"
mkdir -p n/.global_step7.tmp.$DEAD@$HOST n/.global_step7.tmp.old.$DEAD@$HOST \
	n/.global_step7.tmp.$LIVE@$HOST n/.global_step8.tmp.$DEAD@elsewhere.example.org \
	n/.global_step9.tmp.12345
LD_PRELOAD=$T/noflock.so "$TR" "${MODEL[@]}" --train-iters 1 --save n --save-interval 1 >"$T/out" 2>"$T/err"
check no_flock_run_exit_0 [ $? = 0 ]
contains no_flock_says_so "$T/err" 'warning: --save n: n/\.lmtk-save\.lock: this filesystem cannot lock files.*a second run saving here is not detected'
check no_flock_saved [ "$(cat n/latest 2>/dev/null)" = global_step1 ]
check no_flock_dead_owner_temp_removed [ ! -e n/.global_step7.tmp.$DEAD@$HOST ]
check no_flock_dead_owner_old_temp_removed [ ! -e n/.global_step7.tmp.old.$DEAD@$HOST ]
check no_flock_live_owner_temp_kept [ -d n/.global_step7.tmp.$LIVE@$HOST ]
check no_flock_other_host_temp_kept [ -d n/.global_step8.tmp.$DEAD@elsewhere.example.org ]
check no_flock_ownerless_temp_kept [ -d n/.global_step9.tmp.12345 ]
# with the lock, no other run can be saving here: every leftover goes
expect_rc locked_run_exit_0 0 "$TR" "${MODEL[@]}" --train-iters 2 --load n --save n --save-interval 1
check locked_run_removes_every_temp [ -z "$(ls -A n | grep '\.tmp\.')" ]
kill "$LIVE"; wait "$LIVE" 2>/dev/null
exit 0
