#!/usr/bin/env bash
# slurm/ckpt-backup.slurm: the newest checkpoint of a save directory (a tiny model's, re-split to
# TP=2 PP=2: five files) copied to a second directory, verified against the manifest's CRC-32C,
# put in place atomically.  A backup killed half way leaves no step under its final name and is
# finished by the next run without copying again what it had; a corrupt source is refused and
# the previous backup stays; a copy damaged on the way is copied again; the source step is held
# with the readers' lock meanwhile; older backups are pruned; it runs as a batch job too.
. "$(dirname "$0")/../lib.sh"
BK=$TOP/slurm/ckpt-backup.slurm
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
export LMTK=$TOP
MODEL=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 1 --global-batch-size 1 --lr 1e-3
	--lr-warmup-iters 2 --lr-decay-iters 1000 --data-path meg-gpt2-openwebtext_text_document
	--vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt"
	--split 949,50,1 --device cpu --threads 1 --eval-iters 0)
# step N of the run, re-split to TP=2 PP=2, saved into S as train would (latest moved last)
S=$T/save D=$T/backup
mkdir -p "$S"
step_to() {  # N
	"$BIN/train" "${MODEL[@]}" --train-iters "$1" --save run --load run --save-interval "$1" >train$1.out 2>&1 &&
		rm -rf split && "$BIN/ckpt-merge-tp" --input run --output split --target-tp 2 --target-pp 2 2>split.err &&
		mv split/global_step$1 "$S/" && echo "global_step$1" >"$S/latest"
}
step_to 4 || { fail make_a_checkpoint "$(tail -3 train4.out split.err)"; exit 0; }
intact() { "$BIN/ckpt-sync-ln" --verify "$1" >/dev/null 2>&1; }
same() {  # the backup's files are the source's
	local f
	for f in "$S/$1"/*; do cmp -s "$f" "$D/$1/${f##*/}" || return 1; done
}
nfiles=$(ls "$S/global_step4" | wc -l)

# --- a first backup ---
expect_rc backup_exits_0 0 bash "$BK" "$S" "$D"
[ "$(cat "$D/latest")" = global_step4 ] && [ "$(cat "$D/latest_checkpointed_iteration.txt")" = 4 ] &&
	same global_step4 && intact "$D" && ok backup_is_the_step_and_latest_names_it ||
	fail backup_is_the_step_and_latest_names_it "$(ls -a "$D" "$D/global_step4")"
check backup_leaves_no_partial sh -c "! ls -a '$D' | grep -q partial"
contains backup_says_what_it_did "$T/err" "^ckpt-backup: $S/global_step4 -> $D/global_step4: [0-9]+ bytes copied and verified in [0-9]+ s$"
expect_rc watchdog_sees_the_newest_backed_up 0 "$BIN/fs-watchdog" --checkpoint "$S,$D" --max-age 1h
expect_rc backup_again_is_a_no_op 0 bash "$BK" "$S" "$D"
contains backup_again_says_so "$T/err" "$D/global_step4 is there already"

# a copier that logs what it copies, and can be slow
cat >copier <<'EOF'
#!/bin/sh
echo "${1##*/}" >>"${COPIER_LOG:-/dev/null}"
cp "$1" "$2" && sleep "${COPIER_SLEEP:-0}"
EOF
chmod +x copier
export CKPT_BACKUP_COPY=$T/copier CKPT_BACKUP_JOBS=1

# --- killed half way: nothing under the final name; the next run finishes it ---
step_to 6 || { fail make_a_second_checkpoint "$(tail -3 train6.out split.err)"; exit 0; }
expect_rc watchdog_sees_the_newest_not_backed_up 1 "$BIN/fs-watchdog" --checkpoint "$S,$D" --max-age 1h
COPIER_LOG=$T/copied1 COPIER_SLEEP=2 setsid bash "$BK" "$S" "$D" >kill.out 2>&1 &
pid=$!
wait_for 20 sh -c "ls '$D/.global_step6.partial' 2>/dev/null | grep -q safetensors"
# while it copies, the step is held: a pruner cannot have it
if flock -x -n "$S/global_step6/.lock" true; then held=0; else held=1; fi
kill -9 -- -$pid 2>/dev/null
wait $pid 2>/dev/null
[ $held = 1 ] && ok backup_holds_the_source_steps_lock || fail backup_holds_the_source_steps_lock "a pruner could lock $S/global_step6"
had=$(ls "$D/.global_step6.partial" 2>/dev/null | tr '\n' ' ')
[ ! -e "$D/global_step6" ] && [ "$(cat "$D/latest")" = global_step4 ] && intact "$D" && [ -n "$had" ] &&
	[ "$(ls "$D/.global_step6.partial" | wc -l)" -lt "$nfiles" ] &&
	ok killed_backup_leaves_no_step_under_its_final_name || fail killed_backup_leaves_no_step_under_its_final_name "$(ls -a "$D"; cat kill.out)"
COPIER_LOG=$T/copied2 bash "$BK" "$S" "$D" >resume.out 2>&1
rc=$?
[ $rc = 0 ] && [ "$(cat "$D/latest")" = global_step6 ] && same global_step6 && intact "$D" &&
	! ls -a "$D" | grep -q partial && ok next_run_completes_the_killed_backup ||
	fail next_run_completes_the_killed_backup "exit $rc: $(cat resume.out)"
contains resume_says_so resume.out "resuming the partial copy $D/.global_step6.partial"
again=
for f in $had; do grep -qx "$f" copied2 && again="$again $f"; done
[ -z "$again" ] && [ "$(wc -l <copied2)" = $((nfiles - $(echo $had | wc -w))) ] &&
	ok resumed_backup_copies_only_what_was_missing || fail resumed_backup_copies_only_what_was_missing "had: $had; copied again: $(tr '\n' ' ' <copied2)"

# --- a corrupt source: refused, the previous backup stays ---
step_to 8 || { fail make_a_third_checkpoint "$(tail -3 train8.out split.err)"; exit 0; }
/usr/bin/python3 -c "
p = '$S/global_step8/rank_tp01_pp001.safetensors'
b = bytearray(open(p, 'rb').read()); b[-40] ^= 0x10; open(p, 'wb').write(b)"
expect_rc corrupt_source_is_refused 1 bash "$BK" "$S" "$D"
contains corrupt_source_names_the_file "$T/err" "rank_tp01_pp001\.safetensors: checksum mismatch"
contains corrupt_source_says_what_stays "$T/err" "$S/global_step8 is corrupt .*: not backed up; $D keeps global_step6$"
[ "$(cat "$D/latest")" = global_step6 ] && [ ! -e "$D/global_step8" ] && intact "$D" &&
	! ls -a "$D" | grep -q partial && ok corrupt_source_leaves_the_previous_backup ||
	fail corrupt_source_leaves_the_previous_backup "$(ls -a "$D")"

# --- a copy damaged on the way (the source is intact): copied again, once ---
step_to 10 || { fail make_a_fourth_checkpoint "$(tail -3 train10.out split.err)"; exit 0; }
cat >badcopier <<'EOF'
#!/bin/sh
cp "$1" "$2" || exit 1
case $1 in */rank_tp00_pp001.safetensors)
	[ -e "$BAD_ONCE" ] && exit 0
	: >"$BAD_ONCE"
	/usr/bin/python3 -c "
import sys; p = sys.argv[1]
b = bytearray(open(p, 'rb').read()); b[-8] ^= 1; open(p, 'wb').write(b)" "$2" ;;
esac
EOF
chmod +x badcopier
BAD_ONCE=$T/bad-once CKPT_BACKUP_COPY=$T/badcopier bash "$BK" "$S" "$D" >damaged.out 2>&1
rc=$?
[ $rc = 0 ] && [ "$(cat "$D/latest")" = global_step10 ] && same global_step10 && intact "$D" &&
	ok damaged_copy_is_copied_again || fail damaged_copy_is_copied_again "exit $rc: $(cat damaged.out)"
contains damaged_copy_says_which damaged.out "the copy of rank_tp00_pp001\.safetensors differs from $S/global_step10, which is intact: copying again"
# older backups beyond CKPT_BACKUP_KEEP (2) are gone
[ ! -e "$D/global_step4" ] && [ -d "$D/global_step6" ] && [ -d "$D/global_step10" ] &&
	! ls -a "$D" | grep -q deleting && ok older_backups_beyond_keep_are_removed ||
	fail older_backups_beyond_keep_are_removed "$(ls -a "$D")"

# --- usage, and one backup at a time ---
expect_rc no_save_dir_is_usage 2 bash "$BK" "$T/nothing" "$D"
mkdir -p empty
expect_rc save_without_latest_is_usage 2 bash "$BK" empty "$D"
contains save_without_latest_says_so "$T/err" "empty/latest: missing"
expect_rc dest_is_save_is_usage 2 bash "$BK" "$S" "$S"
(exec 9>>"$D/.ckpt-backup.lock" && flock 9 && exec sleep 30) &
holder=$!
wait_for 10 sh -c "! flock -n '$D/.ckpt-backup.lock' true"
expect_rc second_backup_at_once_exits_3 3 bash "$BK" "$S" "$D"
contains second_backup_names_the_lock "$T/err" "another backup is running"
kill $holder; wait $holder 2>/dev/null

# --- as a batch job (cron.daily), configured by its environment ---
if sinfo >/dev/null 2>&1; then
	step_to 12 || { fail make_a_fifth_checkpoint "$(tail -3 train12.out)"; exit 0; }
	J=$(CKPT_BACKUP_SAVE=$S CKPT_BACKUP_DEST=$D CKPT_BACKUP_COPY=cp sbatch --parsable --output="$T/job.out" "$BK")
	wait_for 60 sh -c "[ -z \"\$(squeue --noheader --jobs=$J 2>/dev/null)\" ]"
	[ "$(cat "$D/latest")" = global_step12 ] && same global_step12 && ok backup_runs_as_a_batch_job ||
		fail backup_runs_as_a_batch_job "$(cat "$T/job.out")"
else
	skip backup_runs_as_a_batch_job "no SLURM cluster here (tests/run.sh starts one)"
fi
exit 0
