#!/usr/bin/python3
"""tokstream.py - an independent writer of lmtk token streams and reader of Megatron .idx files,
for tests and benchmarks.  Written from the formats' definitions (src/lib/tokstream.h,
shared/spec/megatron-data.md), sharing no code with mkindex.

  tokstream.py write --vocab V [--eod E] [--keys text,...] [--no-end] [--cut BYTES] < TEXT > STREAM
      TEXT is one document per line, ids separated by spaces (mkindex dump's format); with
      several keys each line is "KEY<TAB>ids".  --no-end leaves out the end marker, --cut stops
      after BYTES bytes of output (a producer that died).
  tokstream.py gen --bytes N --vocab V [--seed S] > STREAM
      about N bytes of random documents (lengths 1..4095), fast (numpy), for benchmarks.
  tokstream.py slow --vocab V --docs N --delay SECONDS > STREAM
      N documents of 65536 ids, sleeping between them: a slow producer.
  tokstream.py readidx PREFIX
      parses PREFIX.idx/.bin with numpy and prints "N D dtype sum(sizes) len(bin) max(id) ok|BAD"
      (ok: the .bin size, the pointers and the doc_idx ends agree with the sizes).
  tokstream.py dump PREFIX
      one document per line (doc_idx -> sequences -> tokens), ids separated by spaces.
"""
import os
import struct
import sys
import time

import numpy as np

MAGIC = b"LMTKTOK1"
END = 0xFFFFFFFF


def header(vocab, eod, keys):
    h = MAGIC + struct.pack("<IIII", 1, vocab, eod, len(keys))
    for k in keys:
        b = k.encode()
        h += struct.pack("<I", len(b)) + b
    return h


def record(key, ids):
    a = np.asarray(ids, dtype="<u4")
    return struct.pack("<II", key, len(a)) + a.tobytes()


def arg(name, default=None, conv=str):
    if name in sys.argv:
        return conv(sys.argv[sys.argv.index(name) + 1])
    return default


def write():
    vocab = arg("--vocab", conv=int)
    eod = arg("--eod", 0xFFFFFFFF, int)
    keys = arg("--keys", "text").split(",")
    cut = arg("--cut", None, int)
    parts = [header(vocab, eod, keys)]
    for line in sys.stdin:
        line = line.rstrip("\n")
        key = 0
        if len(keys) > 1:
            name, line = line.split("\t", 1)
            key = keys.index(name)
        parts.append(record(key, [int(t) for t in line.split()]))
    if "--no-end" not in sys.argv:
        parts.append(struct.pack("<II", END, 0))
    data = b"".join(parts)
    if cut is not None:
        data = data[:cut]
    sys.stdout.buffer.write(data)


def gen():
    total = arg("--bytes", conv=int)
    vocab = arg("--vocab", conv=int)
    rng = np.random.default_rng(arg("--seed", 1, int))
    out = sys.stdout.buffer
    out.write(header(vocab, vocab - 1, ["text"]))
    written = 0
    while written < total:
        # a batch of documents at once: one big id array, split by lengths
        lens = rng.integers(1, 4096, size=4096)
        ids = rng.integers(0, vocab, size=int(lens.sum()), dtype=np.uint32)
        recs = np.empty(int(lens.sum()) + 2 * len(lens), dtype="<u4")
        pos = 0
        start = 0
        for n in lens:
            recs[pos] = 0
            recs[pos + 1] = n
            recs[pos + 2:pos + 2 + n] = ids[start:start + n]
            pos += 2 + n
            start += n
        out.write(recs.tobytes())
        written += recs.nbytes
    out.write(struct.pack("<II", END, 0))


def slow():
    vocab = arg("--vocab", conv=int)
    out = sys.stdout.buffer
    out.write(header(vocab, 0xFFFFFFFF, ["text"]))
    out.flush()
    ids = np.arange(65536, dtype=np.uint32) % vocab
    for _ in range(arg("--docs", conv=int)):
        out.write(record(0, ids))
        out.flush()
        time.sleep(arg("--delay", conv=float))
    out.write(struct.pack("<II", END, 0))


def load(prefix):
    b = open(prefix + ".idx", "rb").read()
    assert b[:9] == b"MMIDIDX\x00\x00", "magic"
    version, code, n, d = struct.unpack("<QBQQ", b[9:34])
    assert version == 1, "version"
    dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}[code]
    sizes = np.frombuffer(b, np.int32, n, 34)
    pointers = np.frombuffer(b, np.int64, n, 34 + 4 * n)
    doc_idx = np.frombuffer(b, np.int64, d, 34 + 12 * n)
    assert len(b) == 34 + 12 * n + 8 * d, "file size"
    item = np.dtype(dtype).itemsize
    expect = np.concatenate([[0], np.cumsum(sizes.astype(np.int64))[:-1]]) * item if n else sizes
    ok = (os.path.getsize(prefix + ".bin") == int(sizes.sum()) * item
          and np.array_equal(pointers, expect) and doc_idx[0] == 0 and doc_idx[-1] == n)
    tokens = np.fromfile(prefix + ".bin", dtype=dtype)
    return n, d, code, sizes, doc_idx, tokens, ok


def readidx():
    n, d, code, sizes, doc_idx, tokens, ok = load(sys.argv[2])
    print(n, d, code, int(sizes.sum()), len(tokens), int(tokens.max()) if len(tokens) else -1,
          "ok" if ok else "BAD")


def dump():
    n, d, code, sizes, doc_idx, tokens, ok = load(sys.argv[2])
    starts = np.concatenate([[0], np.cumsum(sizes.astype(np.int64))])
    out = sys.stdout
    for k in range(d - 1):
        a, b = starts[doc_idx[k]], starts[doc_idx[k + 1]]
        out.write(" ".join(map(str, tokens[a:b].tolist())) + "\n")


if __name__ == "__main__":
    {"write": write, "gen": gen, "slow": slow, "readidx": readidx, "dump": dump}[sys.argv[1]]()
