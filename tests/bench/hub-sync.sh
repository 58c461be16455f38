#!/usr/bin/env bash
# hub-sync.sh - hub-sync against `git add -A && git commit && git push` with git-lfs, on the
# same local smart-HTTP git + LFS server (tests/fixtures/git-server.sh), same data.
#
# The data - HUB_BENCH_SMALL small text files (default 1000, 1-9 KiB) and HUB_BENCH_LARGE_COUNT
# files of HUB_BENCH_LARGE_MB MiB of random bytes (default 4 x 512 MiB = 2 GiB) - is made once
# and kept under ${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/hub-sync.  Each run makes two empty
# repositories on the server, clones both, commits the Hub's .gitattributes line for *.bin
# (so git-lfs and hub-sync send the same files to LFS), copies the data into both clones (not
# timed; it leaves the data in the page cache for both), then times, alternately:
#   git:      git add -A && git commit -q && git push -q origin main   (git-lfs 3.3: clean
#             filter, pre-push upload with its default 8 concurrent transfers)
#   hub-sync: hub-sync --repo-path CLONE --patterns small large        (default 4 parallel uploads)
# Both must end with the same tree id (same files, same LFS pointers) and the server must hold
# every object.  HUB_BENCH_RUNS runs (default 1), medians compared.  Last line:
#   hub-sync: 1000 small + 4 x 512 MiB: git+git-lfs 30.1 s, hub-sync 15.4 s, speedup 2.0x
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}/hub-sync
NSMALL=${HUB_BENCH_SMALL:-1000}
NLARGE=${HUB_BENCH_LARGE_COUNT:-4}
LARGE_MB=${HUB_BENCH_LARGE_MB:-512}
RUNS=${HUB_BENCH_RUNS:-1}
FX=$TOP/tests/fixtures/git-server.sh
NAME=hub-sync

die() { echo "$NAME: $*" >&2; exit 1; }
[ -x "$TOP/bin/hub-sync" ] || die "bin/hub-sync is not built (run make)"
command -v git-lfs >/dev/null || die "git-lfs is not installed"

make_data() {
	local stamp=$BENCH/data.done want="$NSMALL small, $NLARGE x $LARGE_MB MiB v1"
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
	echo "$NAME: making $want in $BENCH/data (once)" >&2
	rm -rf "$BENCH/data" "$stamp"
	mkdir -p "$BENCH/data/small" "$BENCH/data/large"
	/usr/bin/python3 - "$BENCH/data/small" "$NSMALL" <<'EOF'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
r = random.Random(1)
for i in range(n):
    with open(os.path.join(d, "rank-%04d.txt" % i), "w") as f:
        for j in range(r.randint(10, 90)):
            f.write(" iteration %6d | lm loss %.6E | grad norm %.3f\n" % (j, r.random() * 3, r.random()))
EOF
	for ((i = 0; i < NLARGE; i++)); do
		head -c $((LARGE_MB << 20)) /dev/urandom >"$BENCH/data/large/shard-$i.bin"
	done
	echo "$want" >"$stamp"
}

# the server: the one tests/run.sh started, else our own, stopped at exit
own_server=
if [ -z "${LMTK_GIT_URL:-}" ]; then
	own_server=$(mktemp -d "${TMPDIR:-/tmp}/hub-sync-bench.XXXXXX")
	eval "$(bash "$FX" start "$own_server")" || die "the git server fixture did not start"
fi
G=$LMTK_GIT_DIR
work=$(mktemp -d "$BENCH.work.XXXXXX" 2>/dev/null || { mkdir -p "$BENCH" && mktemp -d "$BENCH.work.XXXXXX"; })
cleanup() {
	rm -rf "$work"
	[ -n "$own_server" ] && { bash "$FX" stop "$own_server"; rm -rf "$own_server"; }
	return 0
}
trap cleanup EXIT
export GIT_TERMINAL_PROMPT=0 HOME=$work/home
mkdir -p "$HOME"
git config --global user.name bench && git config --global user.email bench@example.org
printf '%s\n' "$LMTK_GIT_TOKEN" >"$work/token" && chmod 600 "$work/token"
g() { git -c credential.helper= -c 'credential.helper=!f() { echo username=x; echo "password=$LMTK_GIT_TOKEN"; }; f' "$@"; }

make_data

# prepare NAME: an empty server repository with the Hub's *.bin attribute, cloned, data copied in
prepare() {
	local url; url=$(bash "$FX" create "$G" "bench$$/$1")
	g clone -q "$url" "$work/$1" 2>/dev/null
	printf '*.bin filter=lfs diff=lfs merge=lfs -text\n' >"$work/$1/.gitattributes"
	git -C "$work/$1" add .gitattributes && git -C "$work/$1" commit -qm attributes
	g -C "$work/$1" push -q origin main 2>/dev/null
	cp -r "$BENCH/data/small" "$BENCH/data/large" "$work/$1/"
	sync
}

timed() {  # timed LOG CMD...: seconds CMD took; fails the benchmark if CMD fails
	local log=$1 t0 t1; shift
	t0=$(date +%s.%N)
	"$@" >"$log" 2>&1 || { cat "$log" >&2; die "failed: $*"; }
	t1=$(date +%s.%N)
	echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}

git_way() { cd "$1" && git add -A && git commit -qm data && g push -q origin main; }

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

git_t=() hs_t=()
for ((run = 0; run < RUNS; run++)); do
	prepare "git$run"
	prepare "hs$run"
	git_t+=("$(timed "$work/git$run.log" git_way "$work/git$run")")
	hs_t+=("$(timed "$work/hs$run.log" "$TOP/bin/hub-sync" --repo-path "$work/hs$run" --token-file "$work/token" \
		--patterns small large)")
	a=$(git -C "$work/git$run" rev-parse 'HEAD^{tree}') b=$(git -C "$work/hs$run" rev-parse 'HEAD^{tree}')
	[ "$a" = "$b" ] || die "run $run: different trees (git $a, hub-sync $b)"
	for r in "git$run" "hs$run"; do
		[ "$(git -C "$work/$r" rev-parse HEAD)" = "$(git -C "$work/$r" rev-parse origin/main)" ] || die "$r: not pushed"
		n=$(find "$G/lfs/bench$$/$r" -type f | wc -l)
		[ "$n" = "$NLARGE" ] || die "$r: the LFS server holds $n objects, not $NLARGE"
	done
	echo "$NAME: run $run: git+git-lfs ${git_t[-1]} s, hub-sync ${hs_t[-1]} s ($(tail -1 "$work/hs$run.log"))" >&2
	rm -rf "$work/git$run" "$work/hs$run" "$G/lfs/bench$$" "$G/repos/bench$$"
done
gm=$(median "${git_t[@]}") hm=$(median "${hs_t[@]}")
echo "$gm $hm" | awk -v s="$NSMALL" -v c="$NLARGE" -v m="$LARGE_MB" -v n="$NAME" \
	'{ printf "%s: %d small + %d x %d MiB: git+git-lfs %.1f s, hub-sync %.1f s, speedup %.1fx\n", n, s, c, m, $1, $2, $1 / $2 }'
