#!/usr/bin/env bash
# fs-walk.sh - fs-watchdog's tree walk against `du -sb` on a tree of a million files.
#
# The tree (FS_WALK_DIRS x FS_WALK_FILES empty files, every 10th with up to 8 KiB)
# is built once and kept under ${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/tree, since
# building it takes longer than the benchmark.  Caches are not dropped: both tools
# are warmed once and then timed alternately, FS_WALK_RUNS runs each, and the
# medians compared.  This measures the syscall-bound, warm-cache case the walk is
# built for; a cold-cache run measures the disk instead.  Fails if the two
# disagree on the byte total.  Last line:
#   fs-walk: 1000000 files: du -sb 4.21 s, fs-watchdog 1.90 s, speedup 2.2x
# FS_WALK_CMD replaces the fs-watchdog command (the tree is appended to it); its
# output must contain the byte total as a word, as `fs-watchdog --verbose` does.
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}
TREE=$BENCH/tree
NDIRS=${FS_WALK_DIRS:-1000}
NFILES=${FS_WALK_FILES:-1000}
RUNS=${FS_WALK_RUNS:-3}
NAME="fs-walk"

die() { echo "$NAME: $*" >&2; exit 1; }

# make_tree: files are created with raw os.open/os.write, about 15 s per million;
# the stamp outside the tree records its shape, so a changed shape rebuilds it.
make_tree() {
  local stamp="$BENCH/tree.done" want="$NDIRS x $NFILES v1"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
  echo "$NAME: building $NDIRS x $NFILES tree in $TREE (once)" >&2
  rm -rf "$TREE" "$stamp"
  mkdir -p "$TREE"
  python3 - "$TREE" "$NDIRS" "$NFILES" <<'EOF'
import os, sys
top, ndirs, nfiles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
junk = b"x" * 8192
flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
for d in range(ndirs):
    path = os.path.join(top, "d%04d" % d)
    os.mkdir(path)
    dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    for f in range(nfiles):
        fd = os.open("file-%06d" % f, flags, 0o644, dir_fd=dfd)
        if f % 10 == 0:
            os.write(fd, junk[: (d * 7919 + f * 104729) % 8193])
        os.close(fd)
    os.close(dfd)
EOF
  echo "$want" > "$stamp"
}

# timed OUTFILE CMD...: runs CMD with its output in OUTFILE, prints the seconds it took.
timed() {
  local out=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" > "$out" 2>&1 || true    # fs-watchdog's exit status reports the budget, not the walk
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

make_tree
if [ -n "${FS_WALK_CMD:-}" ]; then
  # shellcheck disable=SC2206  # a command line with arguments, split on purpose
  fsw=($FS_WALK_CMD "$TREE")
else
  [ -x "$TOP/bin/fs-watchdog" ] || die "bin/fs-watchdog is not built (run make)"
  fsw=("$TOP/bin/fs-watchdog" --verbose --budget "$TREE:1P")
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

timed "$tmp/du.out" du -sb "$TREE" > /dev/null
timed "$tmp/fsw.out" "${fsw[@]}" > /dev/null
du_t=() fsw_t=()
for ((i = 0; i < RUNS; i++)); do
  du_t+=("$(timed "$tmp/du.out" du -sb "$TREE")")
  fsw_t+=("$(timed "$tmp/fsw.out" "${fsw[@]}")")
done

bytes=$(awk 'NR == 1 { print $1 }' "$tmp/du.out")
case $bytes in ''|*[!0-9]*) die "du -sb failed: $(head -c 400 "$tmp/du.out")" ;; esac
grep -Eq "(^|[^0-9])$bytes([^0-9]|$)" "$tmp/fsw.out" ||
  die "fs-watchdog does not report du's $bytes bytes: $(head -c 400 "$tmp/fsw.out")"

du_m=$(median "${du_t[@]}")
fsw_m=$(median "${fsw_t[@]}")
echo "$NAME: du -sb runs ${du_t[*]} s; fs-watchdog runs ${fsw_t[*]} s" >&2
awk -v n=$((NDIRS * NFILES)) -v d="$du_m" -v f="$fsw_m" -v name="$NAME" 'BEGIN {
  printf "%s: %d files: du -sb %.2f s, fs-watchdog %.2f s, speedup %.1fx\n", name, n, d, f, (f > 0 ? d / f : 0) }'
