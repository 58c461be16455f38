#!/usr/bin/env bash
# mkindex.sh - is mkindex disk-bound?  mkindex on a ~1 GB token stream against dd copying the
# same stream into the same directory.
#
# The stream (random documents of 1..4095 ids, MKINDEX_BENCH_BYTES bytes, vocabulary
# MKINDEX_BENCH_VOCAB: 50257 gives a uint16 .bin, 250880 an int32 one) is generated once by
# tests/tokstream.py and kept under ${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}.  Both commands read
# the stream from the page cache (warmed once) and fsync what they write into the same
# directory: `dd bs=8M conv=fsync` reads N bytes and writes N; mkindex reads N, converts, and
# writes N/2 (uint16) or N (int32) plus the .idx.  Each runs MKINDEX_BENCH_RUNS times,
# alternately; the medians are compared.  MB/s is stream bytes per second (10^6).  Fails if
# mkindex fails or its dataset does not pass `mkindex check`.  Last line:
#   mkindex: 1.00 GB stream: mkindex 850 MB/s, cp 900 MB/s, ratio 0.94
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}
BYTES=${MKINDEX_BENCH_BYTES:-1000000000}
VOCAB=${MKINDEX_BENCH_VOCAB:-50257}
RUNS=${MKINDEX_BENCH_RUNS:-5}
NAME=mkindex
MK=$TOP/bin/mkindex
STREAM=$BENCH/mkindex-$BYTES-$VOCAB.tok
OUT=$BENCH/mkindex-out

die() { echo "$NAME: $*" >&2; exit 1; }
[ -x "$MK" ] || die "bin/mkindex is not built (run make)"
mkdir -p "$BENCH" "$OUT"

if [ ! -f "$STREAM" ]; then
  echo "$NAME: generating a $BYTES-byte token stream in $STREAM (once)" >&2
  /usr/bin/python3 "$TOP/tests/tokstream.py" gen --bytes "$BYTES" --vocab "$VOCAB" > "$STREAM.part"
  mv "$STREAM.part" "$STREAM"
fi
size=$(stat -c %s "$STREAM")
trap 'rm -f "$OUT"/copy "$OUT"/bench_text_document.*' EXIT

# timed CMD...: runs CMD, prints the seconds it took; fails the benchmark if CMD fails
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" || die "failed: $*"
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}
run_dd() { dd if="$STREAM" of="$OUT/copy" bs=8M conv=fsync status=none; }
run_mk() { "$MK" --output-prefix "$OUT/bench" < "$STREAM" 2> "$OUT/mkindex.err"; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

cat "$STREAM" > /dev/null   # warm the page cache for both
dd_t=() mk_t=()
for ((i = 0; i < RUNS; i++)); do
  rm -f "$OUT/copy" "$OUT"/bench_text_document.*
  sync
  dd_t+=("$(timed run_dd)")
  rm -f "$OUT/copy"
  sync
  mk_t+=("$(timed run_mk)")
done
"$MK" check "$OUT/bench_text_document" > /dev/null || die "the dataset fails mkindex check"

dd_m=$(median "${dd_t[@]}")
mk_m=$(median "${mk_t[@]}")
tail -2 "$OUT/mkindex.err" | head -1 >&2
echo "$NAME: dd runs ${dd_t[*]} s; mkindex runs ${mk_t[*]} s" >&2
awk -v b="$size" -v d="$dd_m" -v m="$mk_m" -v name="$NAME" 'BEGIN {
  mr = b / 1e6 / m; dr = b / 1e6 / d
  printf "%s: %.2f GB stream: mkindex %.0f MB/s, cp %.0f MB/s, ratio %.2f\n", name, b / 1e9, mr, dr, mr / dr }'
