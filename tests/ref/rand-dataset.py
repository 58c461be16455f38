#!/usr/bin/python3
"""rand-dataset.py PREFIX DOCS LENGTH VOCAB SEED - a Megatron dataset (PREFIX.bin, PREFIX.idx,
uint16 ids, one document per sample of LENGTH random ids below VOCAB) and, beside it, a
vocab.json of VOCAB made-up tokens and an empty merges.txt: for the benchmarks and tests where
only the shapes matter (the speed of a step, what it launches), not the text."""
import json
import os
import random
import struct
import sys

p, n, L, V, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
random.seed(seed)
with open(p + ".bin", "wb") as f:
    for _ in range(n):
        f.write(struct.pack("<%dH" % L, *[random.randrange(V) for _ in range(L)]))
with open(p + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, n, n + 1))
    f.write(struct.pack("<%di" % n, *[L] * n) + struct.pack("<%dq" % n, *[i * L * 2 for i in range(n)])
            + struct.pack("<%dq" % (n + 1), *range(n + 1)))
d = os.path.dirname(os.path.abspath(p))
with open(os.path.join(d, "vocab.json"), "w") as f:
    json.dump({"t%d" % i: i for i in range(V)}, f)
open(os.path.join(d, "merges.txt"), "w").close()
