#!/usr/bin/env bash
# The .pt reader (src/ckpt/pt.h) on files the real torch.save wrote (tests/ref/pt-cases.py):
# every value it returns equals what torch.load sees - ints and strings exactly, floats and
# tensor elements bit for bit, tensors' dtype, shape, strides, storage offset and shared storage
# keys - for nested containers, OrderedDict, Namespace, int keys, int64's edges, every tensor
# dtype and view (offsets, transposes, slices, stride 0, shared storages), nn.Parameter,
# torch.Size, dtypes, numpy and torch RNG states, and the shape of a Megatron model_states file;
# tensors read 1, 7 or all elements at a time agree.  Bad files are refused with their reason:
# truncated, legacy format, a custom class, os.system (not run), protocol 4's FRAME, an int
# beyond int64, big-endian, a tensor past its storage, a missing storage.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
DUMP=$TOP/build/tests/ckpt_pt
if [ ! -x "$DUMP" ]; then
	skip ckpt_pt "$DUMP not built (make build/tests/ckpt_pt)"
	exit 0
fi
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
	skip ckpt_pt "python3-torch or python3-numpy is not installed (make deps installs them)"
	exit 0
fi
cd "$T" || exit 3
"$PY" "$TOP/tests/ref/pt-cases.py" write . >write.log 2>&1 || { fail pt_cases_written "$(tail -3 write.log)"; exit 1; }

# same NAME A.json B.json: the two JSON trees are equal (the first difference otherwise)
cat >same.py <<'EOF'
import json, sys
def diff(x, y, path):
    if type(x) != type(y):
        return "%s: %.200r vs %.200r" % (path or "/", x, y)
    if isinstance(x, dict):
        if sorted(x) != sorted(y):
            return "%s: keys %s vs %s" % (path or "/", sorted(x), sorted(y))
        return next((d for k in x for d in [diff(x[k], y[k], path + "/" + k)] if d), None)
    if isinstance(x, list):
        if len(x) != len(y):
            return "%s: %d vs %d items" % (path or "/", len(x), len(y))
        return next((d for i in range(len(x)) for d in [diff(x[i], y[i], "%s/%d" % (path, i))] if d), None)
    return None if x == y else "%s: %.200r vs %.200r" % (path or "/", x, y)
d = diff(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), "")
print(d or "")
sys.exit(1 if d else 0)
EOF
same() {
	local why
	if why=$("$PY" same.py "$2" "$3"); then ok "$1"; else fail "$1" "C vs Python at $why"; fi
}

for f in values megatron; do
	"$PY" "$TOP/tests/ref/pt-cases.py" expect $f.pt >$f.py.json 2>$f.py.err ||
		{ fail ${f}_python_view "$(tail -2 $f.py.err)"; continue; }
	for chunk in all 7 1; do
		if [ $chunk = all ]; then "$DUMP" dump $f.pt >$f.$chunk.json 2>$f.err
		else "$DUMP" dump $f.pt $chunk >$f.$chunk.json 2>$f.err; fi
		rc=$?
		[ $rc = 0 ] || { fail ${f}_read_chunk_$chunk "exit $rc: $(head -c 400 $f.err)"; continue; }
		same ${f}_equals_torch_load_chunk_$chunk $f.$chunk.json $f.py.json
	done
done

# the comparison itself must see a difference: one element of one tensor changed
"$PY" - values.all.json >changed.json <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
t = v["dict"][0][1]["value"]["dict"][0][1]["tensor"]
t["data"] = ("00" if t["data"][:2] != "00" else "01") + t["data"][2:]
print(json.dumps(v))
EOF
if "$PY" same.py changed.json values.py.json >/dev/null; then
	fail comparison_sees_one_changed_byte "a changed tensor byte compared equal"
else
	ok comparison_sees_one_changed_byte
fi

# bad files: exit 2 and the reason
head -c $(($(stat -c %s small.pt) / 2)) small.pt >truncated.pt
bad() {  # NAME FILE PATTERN...
	local n=$1 f=$2
	shift 2
	expect_rc "$n" 2 "$DUMP" dump "$f" || return
	local i=0
	for p in "$@"; do i=$((i + 1)); contains "${n}_says_why_$i" "$T/err" "$p"; done
}
bad truncated_zip truncated.pt "truncated\.pt: a damaged or truncated zip"
bad legacy_format legacy.pt "legacy PyTorch file" "_use_new_zipfile_serialization=False" "torch >= 1\.6"
bad custom_class custom.pt "custom/data\.pkl offset [0-9]+ \(GLOBAL\): global '__main__\.Custom' is not one"
bad os_system evil.pt "global 'posix\.system' is not one" "never runs a pickle's code"
check os_system_never_ran test ! -e pwned
bad protocol_4_frame proto4.pt "proto4/data\.pkl offset 2 \(FRAME\): opcode 0x95 FRAME is not one"
bad int_beyond_int64 huge.pt "\(LONG1\): an integer of 9 bytes beyond int64"
bad big_endian big-endian.pt "byteorder says 'big'"
bad tensor_past_its_storage overrun.pt "storage offset 250 reaches element 253 of storage '0', which holds 12"
bad storage_missing nostorage.pt "\(BINPERSID\): storage '0' has no entry small/data/0"
exit 0
