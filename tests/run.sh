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

LMTK_TMP=$(mktemp -d /tmp/lmtk-check.XXXXXX)
export LMTK_TMP
passed=0 failed=0 skipped=0
failures=()

. tests/fixtures/fixtures.sh
cleanup() {
	fixtures_stop "$LMTK_TMP"
	# tests mount tmpfs filesystems under LMTK_TMP; never rm -rf through a mount
	grep -F " $LMTK_TMP/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	rm -rf "$LMTK_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

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
for t in "${tests[@]}"; do
	[ -e "$t" ] || continue
	case "$t" in
	*.sh) cmd=(bash "$t") ;;
	*)    cmd=("$t") ;;
	esac
	echo "== $t"
	t0=$SECONDS
	out=$(timeout 900 "${cmd[@]}" 2>&1; echo "__rc $?")
	rc=${out##*__rc }
	out=${out%__rc *}
	count <<<"$out"
	if [ "$rc" != 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
		failed=$((failed + 1)); failures+=("FAIL $t: exited with status $rc")
		echo "FAIL $t: exited with status $rc"
	fi
	echo "   ($t took $((SECONDS - t0)) s)"
done

echo
for f in "${failures[@]+"${failures[@]}"}"; do echo "$f"; done
[ "$skipped" -gt 0 ] && echo "$skipped skipped (see 'skip' lines above for why)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
