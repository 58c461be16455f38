#!/usr/bin/env bash
# train --save-keep N --save-keep-every M on a small tmpfs: a tiny model saves every iteration
# and is killed with kill -9 at random instants, then resumed with --load, again and again.
# After every kill the step `latest` names is intact (its files match the manifest's CRC-32C) and
# is the one the next run resumes from, and the steps on disk are the policy's; a step a reader
# holds (the readers' lock, STEPDIR/.lock) is not removed until it is let go, and the readers
# (ckpt-sync-ln, ckpt-merge-tp, train --load) wait while a pruner holds a step.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3

# half a megabyte per checkpoint (the 5120-row embedding dominates); the schedule does not
# depend on --train-iters, so runs of different lengths resume each other
MODEL=(--num-layers 1 --hidden-size 8 --num-attention-heads 2 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 1 --global-batch-size 1 --lr 1e-3
	--min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 4 --lr-decay-iters 100000
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1)
KEEP=(--save-interval 1 --save-keep 2 --save-keep-every 3)

# --- flags ---
expect_rc save_keep_needs_save 2 "$TR" "${MODEL[@]}" --train-iters 2 --save-keep 2
contains save_keep_needs_save_message "$T/err" '--save-keep prunes the checkpoints of --save'
expect_rc save_keep_every_needs_save_keep 2 "$TR" "${MODEL[@]}" --train-iters 2 --save s0 \
	--save-interval 1 --save-keep-every 3
contains save_keep_every_needs_save_keep_message "$T/err" '--save-keep-every .*give --save-keep too'
expect_rc save_keep_zero_is_refused 2 "$TR" "${MODEL[@]}" --train-iters 2 --save s0 --save-interval 1 --save-keep 0
check save_keep_in_help sh -c "'$TR' --help | grep -q -- '--save-keep-every M'"

# --- --dry-run counts the checkpoints kept: 100 iterations saved every 10, the newest 2 and every
# 30th (30, 60, 90) kept, and the one being saved: 6 of 10, 12 bytes a parameter ---
"$TR" "${MODEL[@]}" --train-iters 100 --save s0 --save-interval 10 --save-keep 2 --save-keep-every 30 --nodes 1 --gpus-per-node 1 \
	--dry-run --format json >dry.json 2>dry.err
/usr/bin/python3 - dry.json <<'EOF' && ok dry_run_counts_the_kept_checkpoints || fail dry_run_counts_the_kept_checkpoints "$(head -c 300 dry.err)"
import json, sys
c = json.load(open(sys.argv[1]))["checkpoint"]
d = c["on_disk"]
assert d["saves"] == 10 and d["kept_at_most"] == 6, d
assert d["bytes"] == 6 * 12 * c["params"], (d, c["params"])
EOF
"$TR" "${MODEL[@]}" --train-iters 100 --save s0 --save-interval 10 --nodes 1 --gpus-per-node 1 --dry-run >dry.txt 2>&1
check dry_run_without_save_keep_keeps_all grep -qE '^  on disk: 10 saves of lmtk.s 12 B/param +[0-9.]+  all kept: see --save-keep$' dry.txt

# --- the small filesystem ---
mkdir -p fs
if mount -t tmpfs -o size=128m lmtk-keep fs 2>mount.err; then
	ON="a 128 MiB tmpfs"
else
	skip keep_on_a_small_tmpfs "cannot mount tmpfs here (need root): $(cat mount.err); on $T instead"
	ON=$T
fi
S=fs/save

# keep(L): the steps the policy keeps when latest is L, given the steps present (one per line)
keep_of() {  # L STEPS...
	local l=$1 s; shift
	for s in "$@"; do
		if [ "$s" -gt "$l" ] || [ "$s" -ge $((l - 1)) ] || [ $((s % 3)) = 0 ]; then echo "$s"; fi
	done
}
steps() { ls "$S" 2>/dev/null | sed -n 's/^global_step\([0-9][0-9]*\)$/\1/p' | sort -n; }

# --- kill -9 at random instants, resume, again ---
# An iteration and its save take milliseconds here, so each run is killed a random 0-9 ms after
# it logged a random iteration 1-12 past where it resumed: somewhere in a step, a save or a
# prune.  A run may go 40 iterations at most, so the steps kept forever stay few.
bad=0 rounds=0 prev_l=0 prev_extra= midway=0 midsave=0 midpublish=0
RANDOM=17   # a fixed seed: the instants are random but the same on every run of the test
for round in 1 2 3 4 5 6 7 8 9 10; do
	"$TR" "${MODEL[@]}" --train-iters $((prev_l + 40)) "${KEEP[@]}" --save "$S" --load "$S" >run$round.out 2>&1 &
	pid=$!
	at=$((prev_l + 1 + RANDOM % 12))
	end=$((SECONDS + 20))
	until grep -qE "^ iteration +$at/" run$round.out || [ $SECONDS -ge $end ]; do sleep 0.005; done
	sleep "0.00$((RANDOM % 10))"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	[ -e "$S/latest" ] || continue
	rounds=$((rounds + 1))
	latest=$(cat "$S/latest")
	l=${latest#global_step}
	# every round trains: none is refused by what the previous kill left
	if ! grep -q '^ iteration ' run$round.out; then
		bad=1; echo "# round $round trained nothing: $(grep -v '^ ' run$round.out | tail -2)"
	fi
	# this round's run resumed from the step the previous kill left in latest - or from the
	# one it was publishing, renamed into place but not yet in latest (.lmtk-publishing)
	if [ "$prev_l" -gt 0 ] && grep -q '^ iteration ' run$round.out &&
		! grep -q "^train: resumed from $S/global_step$prev_l: iteration $prev_l," run$round.out; then
		bad=1; echo "# round $round did not resume from global_step$prev_l: $(grep -m2 -e resumed -e 'cannot' run$round.out)"
	fi
	if grep -q 'cannot be loaded\|fell back' run$round.out; then
		bad=1; echo "# round $round: $(grep -m2 -e 'cannot be loaded' -e 'fell back' run$round.out)"
	fi
	# latest is intact: every file matches the manifest
	if ! "$BIN/ckpt-sync-ln" --verify "$S" >verify$round.out 2>&1; then
		bad=1; echo "# after kill $round, $latest does not verify: $(tail -2 verify$round.out)"
	fi
	# the kept set: everything the policy keeps is there; besides it only the step after latest
	# (renamed into place, latest not yet moved), latest-2 (the kill came between the publish
	# and the prune), and, when this round published only one step, the previous round's extras
	mapfile -t have < <(steps)
	mapfile -t want < <(keep_of "$l" "${have[@]}")
	for s in $(seq 1 "$l"); do
		if [ $((s % 3)) = 0 ] || [ "$s" -ge $((l - 1)) ]; then
			[ -d "$S/global_step$s" ] || { bad=1; echo "# after kill $round (latest $l): global_step$s, which the policy keeps, is missing"; }
		fi
	done
	extra=$(comm -23 <(printf '%s\n' "${have[@]}" | sort) <(printf '%s\n' "${want[@]}" | sort) | sort -n | tr '\n' ' ')
	for s in $extra; do
		case " $((l + 1)) $((l - 2)) $([ "$l" -le $((prev_l + 1)) ] && echo "$prev_extra") " in
		*" $s "*) ;;
		*) bad=1; echo "# after kill $round (latest $l): global_step$s should have been removed (have: ${have[*]})" ;;
		esac
	done
	[ -n "$extra" ] && midway=$((midway + 1))
	ls -a "$S" | grep -q '^\.global_step.*\.tmp\.' && midsave=$((midsave + 1))
	echo "# kill $round: latest $l${extra:+, also $extra}"
	prev_l=$l prev_extra=$extra
	if [ -f "$S/.lmtk-publishing" ]; then
		p=$(cat "$S/.lmtk-publishing") && [ -d "$S/$p" ] && prev_l=${p#global_step} &&
			midpublish=$((midpublish + 1)) && echo "# kill $round came while $p was published"
	fi
done
if [ $rounds -ge 3 ] && [ $bad = 0 ]; then
	ok kill_9_during_pruned_saves_keeps_latest_intact_and_the_policys_steps
else
	fail kill_9_during_pruned_saves_keeps_latest_intact_and_the_policys_steps "$rounds rounds with a checkpoint, on $ON; see the lines above"
fi
echo "# $rounds kills ($midsave during a save, $midway between a publish and its prune, $midpublish while publishing), latest global_step$prev_l, $(steps | wc -l) steps kept, $(du -sh "$S" | cut -f1) on $ON"
if [ ! -e "$S/latest" ]; then
	fail save_keep_runs "no run of $rounds saved anything: $(tail -3 run8.out)"
	exit 0
fi

# --- an uninterrupted run ends with exactly the policy's steps and no leftovers ---
l=$(sed 's/global_step//' "$S/latest")
# what a kill -9 inside a publish's link-and-rename of a small file leaves (outfile_sweep)
: >"$S/.latest.tmp.99999.0"; : >"$S/.latest_checkpointed_iteration.txt.tmp.Ab12Cd"
: >"$S/..lmtk-publishing.tmp.99999.3"   # the hidden name of a hidden file
"$TR" "${MODEL[@]}" --train-iters $((l + 7)) "${KEEP[@]}" --save "$S" --load "$S" >clean.out 2>&1
rc=$?
mapfile -t have < <(steps)
want=$(keep_of $((l + 7)) "${have[@]}" | tr '\n' ' ')
exp=$(for s in $(seq 1 $((l + 7))); do [ $((s % 3)) = 0 ] || [ "$s" -ge $((l + 6)) ] && echo "$s"; done | tr '\n' ' ')
[ $rc = 0 ] && [ "$(cat "$S/latest")" = "global_step$((l + 7))" ] && [ "${have[*]} " = "$exp" ] &&
	ok save_keep_leaves_the_newest_2_and_every_3rd || fail save_keep_leaves_the_newest_2_and_every_3rd "exit $rc; have ${have[*]}, want $exp"
left=$(ls -a "$S" | grep -e '\.deleting' -e '\.tmp' | tr '\n' ' ')
[ -z "$left" ] && ok no_deleting_or_tmp_leftovers || fail no_deleting_or_tmp_leftovers "left in $S: $left"
check removed_steps_are_logged grep -qE "^removed global_step[0-9]+( global_step[0-9]+)* from $S \(--save-keep 2 --save-keep-every 3\)$" clean.out
check every_kept_step_has_a_lock_file test -e "$S/global_step$((l + 7))/.lock"

# --- a step a reader holds is not removed; once let go, the next save removes it ---
l=$(sed 's/global_step//' "$S/latest")   # l+7 above; l-1 is kept now, dropped by the next save
h=$((l - 1)); [ $((h % 3)) = 0 ] && h=$l   # a step the policy will drop within 3 saves
(exec 9<"$S/global_step$h/.lock" && flock -s 9 && exec sleep 60) &   # $! holds the lock itself
holder=$!
wait_for 10 sh -c "! flock -x -n '$S/global_step$h/.lock' true"
"$TR" "${MODEL[@]}" --train-iters $((l + 4)) "${KEEP[@]}" --save "$S" --load "$S" >held.out 2>held.err
rc=$?
[ $rc = 0 ] && [ -d "$S/global_step$h" ] && [ -s "$S/global_step$h/manifest.json" ] &&
	ok a_held_step_is_not_removed || fail a_held_step_is_not_removed "exit $rc; $(steps | tr '\n' ' ')"
contains a_held_step_is_named "$T/held.err" "kept global_step$h for now: a reader holds its .lock"
kill $holder; wait $holder 2>/dev/null
"$TR" "${MODEL[@]}" --train-iters $((l + 5)) "${KEEP[@]}" --save "$S" --load "$S" >freed.out 2>&1
[ ! -e "$S/global_step$h" ] && grep -qE "^removed (global_step[0-9]+ )*global_step$h( .*)? from " freed.out &&
	ok a_step_let_go_is_removed_by_the_next_save || fail a_step_let_go_is_removed_by_the_next_save "$(steps | tr '\n' ' ')"

# --- readers wait while a pruner holds a step (then read it, or find it gone) ---
l=$(sed 's/global_step//' "$S/latest")
step=$S/global_step$l
waits() {  # NAME CMD...: CMD is still running 1 s into an exclusive hold of $step, then ends 0
	local n=$1; shift
	flock -x "$step/.lock" sleep 1.5 &
	local locker=$!
	wait_for 10 sh -c "! flock -s -n '$step/.lock' true"
	"$@" >"$T/$n.out" 2>&1 &
	local pid=$! t0=$SECONDS
	sleep 1
	if ! kill -0 $pid 2>/dev/null; then
		fail "$n" "finished while the step was locked: $(tail -2 "$T/$n.out")"
		wait $locker; return
	fi
	wait $pid; local rc=$?
	wait $locker
	[ $rc = 0 ] && ok "$n" || fail "$n" "exit $rc after the lock was let go: $(tail -2 "$T/$n.out")"
}
waits ckpt_sync_ln_waits_for_the_step_lock "$BIN/ckpt-sync-ln" --check "$step"
waits ckpt_merge_tp_waits_for_the_step_lock "$BIN/ckpt-merge-tp" --input "$step" --output merged
waits ckpt_sync_ln_verify_waits_for_the_step_lock "$BIN/ckpt-sync-ln" --verify "$S"
waits train_load_waits_for_the_step_lock "$TR" "${MODEL[@]}" --train-iters 1 --load "$S"

# a step removed while train --load waited for it: the load goes on with the step latest names now
mkdir -p r && cp -a "$S/global_step$l" "$S/latest" r/ && cp -a "$S/global_step$((l - 1))" r/
echo "global_step$((l - 1))" >r/latest   # the reader finds the older step first...
flock -x "r/global_step$((l - 1))/.lock" sh -c "sleep 1; mv r/global_step$((l - 1)) r/.gone; echo global_step$l >r/latest" &
locker=$!
wait_for 10 sh -c "! flock -s -n 'r/global_step$((l - 1))/.lock' true"
"$TR" "${MODEL[@]}" --train-iters 1 --load r >moved.out 2>&1   # ...which is renamed away under it
rc=$?
wait $locker
[ $rc = 0 ] && grep -q "^train: resumed from r/global_step$l: iteration $l," moved.out && ! grep -q 'cannot be loaded' moved.out &&
	ok load_follows_latest_when_its_step_is_pruned_under_it || fail load_follows_latest_when_its_step_is_pruned_under_it "exit $rc: $(grep -m3 -e resumed -e warning -e train: moved.out)"

[ "$ON" != "$T" ] && umount -l fs 2>/dev/null
exit 0
