#!/usr/bin/env bash
# ckpt-pt.sh - is the .pt reader (src/ckpt/pt.h) disk-bound?  Reading every tensor of a ~1 GiB
# torch.save file (CKPT_PT_BENCH_TENSORS tensors, default 16, of 32 Mi bf16 elements = 64 MiB
# each) converted to float 2^20 elements at a time, as a checkpoint conversion reads them
# (build/tests/ckpt_pt read FILE 1048576 noxor), against `cat FILE > /dev/null`, both from a
# warm page cache (the file is read once first), CKPT_PT_BENCH_RUNS times each (default 3),
# alternately; medians are compared.  The reads include libzip's CRC-32 of every storage (read
# whole, in order: checked at its end).  The file is written with the real torch.save under
# ${TMPDIR:-/tmp} and removed at the end.  Fails if the reader fails or, in a run before the
# timed ones, the XOR of the floats' bits it read is not the one torch computes for the same
# tensors.  Last line:
#   bench: ckpt-pt: 16 x 64 MiB bf16, 1.07 GB: read 0.52 s (2064 MB/s), cat 0.21 s, ratio 2.5
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUNS=${CKPT_PT_BENCH_RUNS:-3}
N=${CKPT_PT_BENCH_TENSORS:-16}
NAME=ckpt-pt
READER=$TOP/build/tests/ckpt_pt
PY=/usr/bin/python3

die() { echo "$NAME: $*" >&2; exit 1; }
[ -x "$READER" ] || die "$READER is not built (make build/tests/ckpt_pt)"
"$PY" -c 'import torch, numpy' 2>/dev/null || die "python3-torch and python3-numpy are needed (make deps)"
D=$(mktemp -d "${TMPDIR:-/tmp}/lmtk-bench-pt.XXXXXX")
trap 'rm -rf "$D"' EXIT
F=$D/big.pt

want=$("$PY" - "$F" "$N" <<'EOF'
import sys, numpy as np, torch
path, n = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(1)
sd, x = {}, np.uint32(0)
for i in range(n):
    t = torch.randn(32 << 20, generator=g).to(torch.bfloat16)
    sd["layers.%d.weight" % i] = t
    x ^= np.bitwise_xor.reduce(t.float().numpy().view(np.uint32))
torch.save(sd, path)
print("%08x" % x)
EOF
)
bytes=$(stat -c %s "$F")
out=$("$READER" read "$F") || die "the reader failed"
got=${out##* }
[ "$got" = "$want" ] || die "read XOR $got, torch says $want ($out)"

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
tr=() tc=()
for ((r = 0; r < RUNS; r++)); do
	t0=$(now)
	"$READER" read "$F" 1048576 noxor >/dev/null || die "the reader failed"
	t1=$(now)
	cat "$F" > /dev/null
	t2=$(now)
	tr+=("$(echo "$t1 - $t0" | bc -l)")
	tc+=("$(echo "$t2 - $t1" | bc -l)")
done
read_s=$(printf '%s\n' "${tr[@]}" | median)
cat_s=$(printf '%s\n' "${tc[@]}" | median)
echo "$NAME: runs read ${tr[*]} / cat ${tc[*]} s ($out)" >&2
awk -v n="$N" -v b="$bytes" -v r="$read_s" -v c="$cat_s" 'BEGIN {
	printf "bench: ckpt-pt: %d x 64 MiB bf16, %.2f GB: read %.2f s (%.0f MB/s), cat %.2f s, ratio %.1f (warm cache)\n",
		n, b / 1e9, r, b / 1e6 / r, c, r / c }'
