#!/usr/bin/env bash
# The test runner behind `make check`.
#
# Starts the fixtures once (an SMTP sink, a git smart-HTTP + LFS server, and a local SLURM
# cluster: munge, slurmctld, slurmd n1 and n2 on 127.0.0.1), runs every unit test binary (build/tests/*) and every shell test
# (tests/cli/*.sh, or the ones named as arguments), and stops the fixtures by pid on the way out,
# whatever happened.  Tests print "ok NAME", "FAIL NAME: why" or "skip NAME: why"; the last line
# is "N passed, N failed" and the exit status is non-zero if anything failed.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
export TOP
cd "$TOP" || exit 3

# LMTK_CHECK_TMPDIR: where (default /tmp; tests/cli/check-interrupt.sh runs one of its own in its
# directory).  Not TMPDIR: the fixtures' sockets must stay short (108 bytes).
LMTK_TMP=$(mktemp -d "${LMTK_CHECK_TMPDIR:-/tmp}/lmtk-check.XXXXXX")
export LMTK_TMP
passed=0 failed=0 skipped=0
# OpenMP threads that wait for work sleep instead of spinning (libgomp spins for a while by
# default).  train uses every online CPU unless told otherwise, and the tests run two at a time on
# CI's two cores: a spinning thread burns the time slice its partner (or the other test) needs,
# which made a 10-iteration CPU run take 11 s instead of 0.7 s.  The numbers are the same either
# way; tests/lib.sh sets it too, for a test run alone.  Likewise Open MPI's ranks yield the CPU
# while they wait for a message (mpi_yield_when_idle) instead of polling flat out: the tests run
# 2 and 4 ranks (mpirun --oversubscribe, srun) on those two cores, and a 4-rank TP=2 run took
# 4.3-5.1 s polling, 1.6 s yielding.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
failures=()

. tests/fixtures/fixtures.sh
declare -A pid_of=()   # running tests: pid -> index in the list
kill_tree() { local c; for c in $(pgrep -P "$1"); do kill_tree "$c"; done; kill "$1" 2>/dev/null; }
# Stops everything the run started, however it ends.  An interrupt (Ctrl-C: INT to make's whole
# process group; `timeout 60 make check`: TERM to make and its group) reaches this shell, the
# tests' subshells and a fixture script still starting, but not what runs in a process group or
# session of its own: each test under timeout(1) (which makes one), and the daemons (setsid).  So
# the tests are stopped by process group (OUTS/N.pg, written as each starts: its subshell may die
# first), the fixtures by their pid files, then whatever still names LMTK_TMP on its command line
# (a daemon forked between its start and its pid file).  A second signal (Ctrl-C pressed again,
# or the TERM timeout sends both to make and to the group) must not cut this short: INT, TERM
# and HUP are ignored from here on, by this shell and by the stop scripts it runs.
cleanup() {
	local p f
	trap '' INT TERM HUP PIPE
	for f in "$LMTK_TMP"/.run/*.pg; do
		[ -f "$f" ] && p=$(<"$f") && [ -n "$p" ] && kill -TERM -- "-$p" 2>/dev/null
	done
	for p in "${!pid_of[@]}"; do kill_tree "$p"; done
	fixtures_stop "$LMTK_TMP"
	for f in "$LMTK_TMP"/.run/*.pg; do
		[ -f "$f" ] && p=$(<"$f") && [ -n "$p" ] && kill -KILL -- "-$p" 2>/dev/null
	done
	# tests mount tmpfs filesystems under LMTK_TMP; never rm -rf through a mount
	grep -F " $LMTK_TMP/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	rm -rf "$LMTK_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- fixtures ---------------------------------------------------------------------------------
fixtures_start "$LMTK_TMP"

# --- tests ------------------------------------------------------------------------------------
count() {  # reads protocol lines from stdin, echoes them, updates the counters
	local line
	while IFS= read -r line; do
		case "$line" in
		"ok "*)   passed=$((passed + 1)); echo "$line" ;;
		"FAIL "*) failed=$((failed + 1)); failures+=("$line"); echo "$line" ;;
		"skip "*) skipped=$((skipped + 1)); echo "$line" ;;
		*)        echo "    $line" ;;
		esac
	done
}


tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
	tests=(build/tests/* tests/cli/*.sh)
fi

# Tests run LMTK_CHECK_JOBS at a time (default 2: one per core of CI's machine; a test mostly waits
# on a child, a server or a sleep part of the time).  Each test's output is kept in a file and
# printed whole, in the order of the list, so the log reads as a sequential run's.  Tests that use
# the shared fixtures (the SLURM cluster, the SMTP sink, the git server) never overlap one
# another: they count jobs, mails and pushes.  Everything else a test writes is under its own
# mktemp directory; shared caches are built under a lock (tests/ref/tiny-dataset.sh) or renamed
# into place.
jobs_max=${LMTK_CHECK_JOBS:-2}
uses_fixtures() {
	case "$1" in *.sh) grep -Eq 'sbatch|srun|squeue|scontrol|salloc|sinfo|mail_|LMTK_SMTP|LMTK_GIT|^# lmtk-test: uses-fixtures' "$1" ;; *) false ;; esac
}
# The slowest tests (CI's times, slowest first) start first, the rest in the list's order: a long
# test started last would run alone at the end, one core idle.  What matters is the wall time of
# the whole run; each test's output is still printed in the list's order.  Keep it roughly in
# step with the "(X took N s)" lines of a CI log; a test not named here simply starts in turn.
slow_first=(tests/cli/train-cuda.sh tests/cli/train-parallel.sh tests/cli/train-nosync.sh
	tests/cli/train-nccl.sh tests/cli/train-srun.sh tests/cli/ckpt-mds-kinds.sh
	tests/cli/ckpt-hf-import.sh tests/cli/hub-sync.sh tests/cli/ckpt-merge-tp.sh
	tests/cli/train-recompute.sh tests/cli/train-ddp.sh tests/cli/cron.sh
	tests/cli/train-nosync-ranks.sh tests/cli/tokenize.sh tests/cli/ckpt-mds.sh
	tests/cli/tokenize-split.sh tests/cli/git-server.sh)
# (not check-interrupt.sh: started beside train-cuda.sh, its nested run's clean-up once took
# longer than the 90 s it allows; in the list's order it has passed every run)
n=${#tests[@]}
declare -a state=()    # index -> "" pending, "run", "done"
declare -a fixt=()
declare -a order=()    # indices in the order they may start
declare -A early=()
for ((i = 0; i < n; i++)); do
	state[i]=
	if uses_fixtures "${tests[i]}"; then fixt[i]=1; else fixt[i]=0; fi
done
for t in "${slow_first[@]}"; do
	for ((i = 0; i < n; i++)); do
		[ "${tests[i]}" = "$t" ] && [ -z "${early[$i]+x}" ] && { order+=("$i"); early[$i]=1; break; }
	done
done
for ((i = 0; i < n; i++)); do [ -n "${early[$i]+x}" ] || order+=("$i"); done
running=0 fixt_busy=0 printed=0
OUTS=$LMTK_TMP/.run
mkdir -p "$OUTS" || exit 3

start_test() {  # index
	local i=$1 t=${tests[$1]} cmd
	case "$t" in
	*.sh) cmd=(bash "$t") ;;
	*)    cmd=("$t") ;;
	esac
	(
		t0=$SECONDS
		# timeout(1) puts the test in a process group of its own (its pid), which an
		# interrupt of make's group never reaches: cleanup() stops it by that
		timeout 900 "${cmd[@]}" >"$OUTS/$i" 2>&1 </dev/null &
		echo $! >"$OUTS/$i.pg"
		wait $!
		echo "__rc $?" >>"$OUTS/$i"
		rm -f "$OUTS/$i.pg"
		echo $((SECONDS - t0)) >"$OUTS/$i.time"
	) &
	pid_of[$!]=$i
	state[i]=run
	running=$((running + 1))
	[ "${fixt[i]}" = 1 ] && fixt_busy=1
}

report() {  # index: the test's protocol lines, counted
	local i=$1 t=${tests[$1]} out rc
	echo "== $t"
	out=$(<"$OUTS/$i")
	rc=${out##*__rc }
	out=${out%__rc *}
	count <<<"$out"
	if [ "$rc" != 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
		failed=$((failed + 1)); failures+=("FAIL $t: exited with status $rc")
		echo "FAIL $t: exited with status $rc"
	fi
	echo "   ($t took $(<"$OUTS/$i.time") s)"
}

while [ "$printed" -lt "$n" ]; do
	# start what may start: the first pending tests in start order, a fixture test only when no
	# other runs
	for ((k = 0; k < n && running < jobs_max; k++)); do
		i=${order[k]}
		[ -z "${state[i]}" ] || continue
		[ -e "${tests[i]}" ] || { state[i]=skip; continue; }
		if [ "${fixt[i]}" = 1 ] && [ "$fixt_busy" = 1 ]; then continue; fi
		start_test "$i"
	done
	if [ "$running" -gt 0 ]; then
		wait -n -p done_pid
		if [ -n "${done_pid:-}" ] && [ -n "${pid_of[$done_pid]+x}" ]; then
			j=${pid_of[$done_pid]}
			unset "pid_of[$done_pid]"
			state[j]=done
			running=$((running - 1))
			[ "${fixt[j]}" = 1 ] && fixt_busy=0
		fi
	fi
	# print, in order, every test that is finished
	while [ "$printed" -lt "$n" ] && { [ "${state[printed]}" = done ] || [ "${state[printed]}" = skip ]; }; do
		[ "${state[printed]}" = done ] && report "$printed"
		printed=$((printed + 1))
	done
done

echo
for f in "${failures[@]+"${failures[@]}"}"; do echo "$f"; done
[ "$skipped" -gt 0 ] && echo "$skipped skipped (see 'skip' lines above for why)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
