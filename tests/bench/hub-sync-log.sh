#!/usr/bin/env bash
# hub-sync-log.sh - what an hourly sync of a growing training log costs: bytes sent per sync.
#
# A main log in Megatron-DeepSpeed's format (the iteration line the BigScience runs printed,
# with memory reports, checkpoint saves and warnings among them, generated deterministically)
# grows by HUB_LOG_GROWTH bytes (default 1 MiB) an "hour", HUB_LOG_HOURS times (default 1000:
# about 1 GB at the end), and hub-sync pushes it after every step to the local git + LFS server
# (tests/fixtures/git-server.sh).  Bytes sent are hub-sync's own count (-v: the pack it pushed,
# the LFS bytes it uploaded).  The old scheme - the whole log in LFS, uploaded again every
# hour - is the sum of the log's sizes.  HUB_LOG_SEGMENT sets --segment-size (default 8M).
# A sync that fails or sends LFS bytes fails the benchmark.  At the end the segments in the
# server's repository are concatenated and compared with the log.  Last line:
#   hub-sync-log: 1000 syncs, log 1000 MiB: sent 0.44 GiB, 0.45 MiB/sync (max 0.96 MiB); whole file each hour 489 GiB: 1124x more
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
GROWTH=${HUB_LOG_GROWTH:-1048576}
HOURS=${HUB_LOG_HOURS:-1000}
SEG=${HUB_LOG_SEGMENT:-8M}
FX=$TOP/tests/fixtures/git-server.sh
NAME=hub-sync-log

die() { echo "$NAME: $*" >&2; exit 1; }
[ -x "$TOP/bin/hub-sync" ] || die "bin/hub-sync is not built (run make)"

own_server=
if [ -z "${LMTK_GIT_URL:-}" ]; then
	own_server=$(mktemp -d "${TMPDIR:-/tmp}/hub-sync-log.XXXXXX")
	eval "$(bash "$FX" start "$own_server")" || die "the git server fixture did not start"
fi
G=$LMTK_GIT_DIR
work=$(mktemp -d "${TMPDIR:-/tmp}/hub-sync-log-work.XXXXXX")
cleanup() {
	rm -rf "$work" "$G/repos/log$$" "$G/lfs/log$$"
	[ -n "$own_server" ] && { bash "$FX" stop "$own_server"; rm -rf "$own_server"; }
	return 0
}
trap cleanup EXIT
export GIT_TERMINAL_PROMPT=0 HOME=$work/home
mkdir -p "$HOME"
git config --global user.name bench && git config --global user.email bench@example.org
printf '%s\n' "$LMTK_GIT_TOKEN" >"$work/token" && chmod 600 "$work/token"
g() { git -c credential.helper= -c 'credential.helper=!f() { echo username=x; echo "password=$LMTK_GIT_TOKEN"; }; f' "$@"; }

url=$(bash "$FX" create "$G" "log$$/run")
g clone -q "$url" "$work/run" 2>/dev/null
mkdir -p "$work/run/logs/main"
LOG=$work/run/logs/main/main_log.txt

# grow N: append N bytes of log, continuing where the last call stopped (state in $work/gen)
grow() {
	/usr/bin/python3 - "$LOG" "$1" "$work/gen" <<'EOF'
import os, random, sys
path, n, state = sys.argv[1], int(sys.argv[2]), sys.argv[3]
it = int(open(state).read()) if os.path.exists(state) else 1
r = random.Random(it)
out, size = [], 0
while size < n:
    if it % 1000 == 0:
        l = "saving checkpoint at iteration %8d to /gpfsscratch/rech/six/commun/checkpoints/tr11-176B-ml/checkpoints/main\n" % it
    elif it % 97 == 0:
        l = "[Rank %d] (after %d iterations) memory (MB) | allocated: %.1f | max allocated: %.1f | reserved: %.1f | max reserved: %.1f\n" % (
            r.randrange(384), it, 20000 + r.random() * 4000, 50000 + r.random() * 9000, 60000 + r.random() * 9000, 70000 + r.random() * 9000)
    elif it % 301 == 0:
        l = "[W ProcessGroupNCCL.cpp:1569] Rank %d using best-guess GPU %d to perform barrier as devices used by this process are currently unknown.\n" % (r.randrange(384), r.randrange(8))
    else:
        l = (" iteration %8d/  115311 | consumed samples: %12d | consumed tokens: %14d | elapsed time per iteration (s): %.2f"
             " | learning rate: %.3E | global batch size:  2048 | lm loss: %.6E | grad norm: %.3f | num zeros: 0.0"
             " | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: %.3f | TFLOPs: %.2f |\n") % (
            it, it * 2048, it * 2048 * 2048, 100 + r.random() * 8, 6e-5 * min(1, it / 375), 2.2 + r.random() * 0.4,
            0.2 + r.random() * 0.5, 19 + r.random() * 1.5, 148 + r.random() * 3)
    out.append(l)
    size += len(l)
    it += 1
with open(path, "a") as f:
    f.write("".join(out))
open(state, "w").write(str(it))
EOF
}

total=0 max=0 whole=0
t0=$(date +%s)
for ((h = 1; h <= HOURS; h++)); do
	grow "$GROWTH"
	"$TOP/bin/hub-sync" --repo-path "$work/run" --token-file "$work/token" --segment-size "$SEG" \
		--patterns 'logs/*/*.txt' -v >"$work/out" 2>"$work/err" || { cat "$work/err" >&2; die "sync $h failed"; }
	grep -q 'uploaded [1-9][0-9]* LFS' "$work/err" && die "sync $h uploaded LFS objects: $(cat "$work/err")"
	sent=$(sed -n 's/.*push: \([0-9]*\) bytes.*/\1/p' "$work/err")
	[ -n "$sent" ] || die "sync $h: no push byte count: $(cat "$work/err")"
	size=$(stat -c %s "$LOG")
	total=$((total + sent)) whole=$((whole + size))
	[ "$sent" -gt "$max" ] && max=$sent
	if [ $((h % 100)) = 0 ] || [ "$h" = "$HOURS" ]; then
		echo "$NAME: hour $h: log $((size >> 20)) MiB, $(ls "$work"/run/.git/index >/dev/null; git -C "$work/run" ls-files | grep -c 'main_log.txt.[0-9]') segments, this sync sent $sent bytes, $(( $(date +%s) - t0 )) s so far" >&2
	fi
done
# the server's copy, read from its repository: a clone would make the server's git delta-search
# a gigabyte of log text first (minutes; the Hub's own gc does that once, not per clone)
remote_log() {
	local gd=$G/repos/log$$/run.git p
	git --git-dir="$gd" ls-tree --name-only main logs/main/ | grep 'main_log.txt.[0-9]' | sort |
		while read -r p; do git --git-dir="$gd" cat-file blob "main:$p"; done
}
cmp -s <(remote_log) "$LOG" || die "the server's segments do not rebuild the log"
awk -v n="$HOURS" -v t="$total" -v m="$max" -v w="$whole" -v s="$size" -v name="$NAME" 'BEGIN {
	printf "%s: %d syncs, log %.0f MiB: sent %.2f GiB, %.2f MiB/sync (max %.2f MiB); whole file each hour %.0f GiB: %.0fx more\n",
		name, n, s / 1048576, t / 1073741824, t / n / 1048576, m / 1048576, w / 1073741824, w / t }'
