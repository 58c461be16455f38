#!/usr/bin/env bash
# An interrupted `make check` stops every fixture it started.  tests/run.sh is run (under make, as
# `make check` runs it) on a list of one test that waits, in a session of its own, and its whole
# process group is sent what Ctrl-C sends (INT) or `timeout 60 make check` sends (TERM): while the
# test runs with the fixtures up, while the fixtures are still starting (the SLURM cluster's
# munged up, slurmctld not yet), and Ctrl-C pressed twice, the second while the run stops them.
# Then no process whose command line names that run's scratch directory (its SMTP sink, lighttpd,
# lfs-server.py, munged, slurmctld, slurmd) may be left, nor the test it was running.  These are
# this test's own fixtures, in its own directory: the run that runs this test keeps its own;
# anything left is killed by pid at the end.
# lmtk-test: uses-fixtures (its cluster takes the port lock; it must not slow a fixture test)
. "$(dirname "$0")/../lib.sh"
cd "$T" || exit 3
for c in setsid make; do
	command -v $c >/dev/null || { skip check_interrupt "no $c"; exit 0; }
done
[ "$(id -u)" = 0 ] || { skip check_interrupt "the SLURM fixture needs root"; exit 0; }

cat >waits.sh <<'EOS'
echo "ok waits_started"
echo $$ >"$MARK"
sleep 600
EOS
# the recipe as the Makefile's check has it: a plain command, which make runs without a shell, so
# that make's own TERM reaches run.sh too (GNU make passes it on to its children)
printf 'run:\n\t@bash $(TOP)/tests/run.sh $(LIST)\n' >run.mk

# left DIR: pids of processes whose command line names DIR (never this shell's)
left() {
	local p a
	for p in /proc/[0-9]*; do   # no fork a process: a few hundred of them
		[ "${p#/proc/}" = $$ ] && continue
		a=()
		{ mapfile -d '' -t a <"$p/cmdline"; } 2>/dev/null
		[[ "${a[*]+${a[*]}}" == *"$1"* ]] && echo "${p#/proc/}"
	done
}
# in_session SID: some process is still in that session (make, run.sh, its tests)
in_session() { ps -e -o sid= | awk -v s="$1" '$1 == s { f = 1 } END { exit !f }'; }
pids_to_kill=()   # the sessions this test started (make's pid)
finish() {  # this test's leftovers, by pid: only what names one of its own directories
	local p
	for p in "${pids_to_kill[@]+"${pids_to_kill[@]}"}"; do kill -KILL -- "-$p" 2>/dev/null; done
	for d in "$T"/r*/; do
		[ -d "$d" ] || continue
		for p in $(left "$d"); do kill -KILL "$p" 2>/dev/null; done
	done
	for f in "$T"/*.started; do   # the waits.sh runs, if still there
		[ -f "$f" ] || continue
		p=$(cat "$f")
		{ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -qF waits.sh && kill -KILL "$p"
	done
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# interrupt CASE SIGNAL WHEN: runs make in its own session, waits for WHEN (a file under the run's
# scratch directory, a glob; or "test": the test running, so the fixtures are up), sends SIGNAL to
# its process group, and checks what is left
interrupt() {
	local name=$1 sig=$2 when=$3 tmp lmtk
	runs=$((${runs:-0} + 1))
	tmp=$T/r$runs   # short: the run's sockets live under it
	mkdir -p "$tmp"
	# a background job of a script starts with INT ignored, which a shell cannot trap: make, as
	# from a terminal, gets the default back
	LMTK_CHECK_TMPDIR=$tmp MARK=$T/$name.started setsid env --default-signal=INT,QUIT make --no-print-directory \
		-f run.mk TOP="$TOP" LIST="$T/waits.sh" run >"$name.out" 2>&1 </dev/null &
	local pg=$!
	pids_to_kill+=("$pg")
	# the run's scratch directory: run.sh makes it with mktemp under LMTK_CHECK_TMPDIR
	reached() {
		if [ "$when" = test ]; then [ -s "$T/$name.started" ]; else compgen -G "$lmtk/$when" >/dev/null; fi
	}
	for _ in $(seq 1200); do
		lmtk=$(echo "$tmp"/lmtk-check.*)
		[ -d "$lmtk" ] && reached && break
		kill -0 "$pg" 2>/dev/null || break
		sleep 0.1
	done
	if ! reached; then
		fail "${name}_leaves_no_fixture" "the run never reached $when: $(tail -5 "$name.out")"
		return
	fi
	kill -"$sig" -- "-$pg"
	# pressed again (Ctrl-C twice), while the run is stopping its fixtures
	[ -n "${again:-}" ] && sleep "$again" && kill -"$sig" -- "-$pg" 2>/dev/null
	# make returns at once; run.sh's clean-up goes on (the cluster's stop waits up to 5 s a
	# daemon): wait for every process of the session, 90 s at most
	for _ in $(seq 900); do in_session "$pg" || break; sleep 0.1; done
	local rest w
	rest=$(left "$tmp/")
	# the test run.sh was running (waits.sh: its pid in MARK), if it had started
	w=$(cat "$T/$name.started" 2>/dev/null)
	[ -n "$w" ] && { tr '\0' ' ' <"/proc/$w/cmdline"; } 2>/dev/null | grep -qF waits.sh && rest="$rest $w"
	if [ -z "$rest" ]; then
		ok "${name}_leaves_no_fixture"
	else
		fail "${name}_leaves_no_fixture" "left running: $(for p in $rest; do { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null; echo; done | cut -c1-120 | tr '\n' ';')"
	fi
	[ ! -e "$lmtk" ] && ok "${name}_removes_the_scratch_directory" ||
		fail "${name}_removes_the_scratch_directory" "$(ls -A "$lmtk" | head -5 | tr '\n' ' ')"
}

interrupt int_while_a_test_runs INT test
interrupt term_while_a_test_runs TERM test
interrupt term_while_the_cluster_starts TERM "slurm/munged.pid"
again=1 interrupt int_twice_while_a_test_runs INT test
