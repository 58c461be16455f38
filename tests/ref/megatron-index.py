#!/usr/bin/python3
"""megatron-index.py - Megatron's GPT sample order, in numpy, as the peer of src/train/data/gptdata.c.

A port of what Megatron-DeepSpeed (bigscience-workshop/Megatron-DeepSpeed, megatron/data/)
computes, written from its semantics and sharing no code with lmtk:
  dataset_utils.py   get_train_valid_test_split_, analyze_data_prefix,
                     get_datasets_weights_and_num_samples
  gpt_dataset.py     _build_index_mappings, _num_epochs, _build_doc_idx, _build_shuffle_idx,
                     GPTDataset.__getitem__
  helpers.cpp        build_sample_idx, build_blending_indices (here in plain Python)
  blendable_dataset.py  BlendableDataset (size, weight normalisation with np.sum)
The random numbers come from numpy's own legacy np.random.RandomState, the real peer.

  megatron-index.py index PREFIX SPLIT WHICH NUM_SAMPLES SEQ SEED
      WHICH is 0 (train), 1 (valid) or 2 (test) of SPLIT ("949,50,1").  Prints the split, the
      epoch arithmetic, doc_idx, sample_idx, shuffle_idx and the tokens of some samples.
  megatron-index.py blend SPLIT WHICH NUM_SAMPLES SEQ SEED W1 PREFIX1 W2 PREFIX2 ...
      a --data-path blend: every dataset's index as above, then the blend's dataset_index and
      dataset_sample_index and the tokens of some of the first NUM_SAMPLES blended samples.
  megatron-index.py blend-only SIZE W1 W2 ...
      the weights as BlendableDataset normalises them and build_blending_indices' two arrays.
  megatron-index.py subset SRC OUT FIRST END [--reverse] [--dtype int32]
      writes OUT.bin/.idx (MMIDIDX v1) holding sequences [FIRST, END) of SRC.

The output format is the one `GPTDATA_DUMP=1 build/tests/train_gptdata` prints, so the two
can be compared with cmp.
"""
import math
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}


class Indexed:
    """MMapIndexedDataset: sizes, pointers and get(i, offset, length)."""

    def __init__(self, prefix):
        idx = open(prefix + ".idx", "rb").read()
        assert idx[:9] == MAGIC, prefix
        version, = struct.unpack("<Q", idx[9:17])
        assert version == 1
        self.dtype = np.dtype(DTYPES[idx[17]])
        n, d = struct.unpack("<QQ", idx[18:34])
        self.sizes = np.frombuffer(idx, dtype=np.int32, count=n, offset=34)
        self.pointers = np.frombuffer(idx, dtype=np.int64, count=n, offset=34 + 4 * n)
        self.doc_idx = np.frombuffer(idx, dtype=np.int64, count=d, offset=34 + 12 * n)
        self.code = idx[17]
        self.bin = np.memmap(prefix + ".bin", dtype=np.uint8, mode="r")

    def get(self, i, offset=0, length=None):
        ptr, size = int(self.pointers[i]), int(self.sizes[i])
        if length is None:
            length = size - offset
        ptr += offset * self.dtype.itemsize
        return np.frombuffer(self.bin, dtype=self.dtype, count=length, offset=ptr)


def split_indices(splits_string, size):
    """get_train_valid_test_split_"""
    if splits_string.find(",") != -1:
        splits = [float(s) for s in splits_string.split(",")]
    elif splits_string.find("/") != -1:
        splits = [float(s) for s in splits_string.split("/")]
    else:
        splits = [float(splits_string)]
    while len(splits) < 3:
        splits.append(0.)
    splits = splits[:3]
    total = sum(splits)
    assert total > 0.0
    splits = [s / total for s in splits]
    index = [0]
    for i, s in enumerate(splits):
        index.append(index[i] + int(round(s * float(size))))
    diff = index[-1] - size
    for i in range(1, len(index)):
        index[i] -= diff
    assert index[-1] == size
    return index


def num_epochs(tokens_per_epoch, seq_length, num_samples):
    epochs, total = 0, 0
    while True:
        epochs += 1
        total += tokens_per_epoch
        if (total - 1) // seq_length >= num_samples:
            return epochs


def doc_idx_of(documents, epochs, rng, separate_last_epoch):
    if not separate_last_epoch or epochs == 1:
        a = np.mgrid[0:epochs, 0:len(documents)][1]
        a[:] = documents
        a = a.reshape(-1).astype(np.int32)
        rng.shuffle(a)
        return a
    first = doc_idx_of(documents, epochs - 1, rng, False)
    last = doc_idx_of(documents, 1, rng, False)
    return np.concatenate((first, last))


def sample_idx_of(sizes, doc_idx, seq_length, epochs, tokens_per_epoch):
    """build_sample_idx, helpers.cpp's loop in Python (on lists: numpy scalars are slow)"""
    ns = (epochs * tokens_per_epoch - 1) // seq_length
    sizes = sizes.tolist()
    doc_idx = doc_idx.tolist()
    out = [0, 0]
    d, off = 0, 0
    for _ in range(ns):
        rem = seq_length + 1
        while rem != 0:
            length = sizes[doc_idx[d]] - off
            rem -= length
            if rem <= 0:
                off += rem + length - 1
                rem = 0
            else:
                d += 1
                off = 0
        out += [d, off]
    return np.array(out, dtype=np.int32).reshape(-1, 2)


def shuffle_idx_of(num_samples, total_size, rng):
    dtype = np.uint32
    if total_size >= (np.iinfo(np.uint32).max - 1):
        dtype = np.int64
    first = np.arange(start=0, stop=num_samples, step=1, dtype=dtype)
    rng.shuffle(first)
    if num_samples == total_size:
        return first
    last = np.arange(start=num_samples, stop=total_size, step=1, dtype=dtype)
    rng.shuffle(last)
    return np.concatenate((first, last))


class GPT:
    """GPTDataset over documents [start, end) of ds"""

    def __init__(self, ds, start, end, num_samples, seq_length, seed):
        self.ds = ds
        documents = np.arange(start=start, stop=end, step=1, dtype=np.int32)
        sizes = ds.sizes
        tpe = np.sum(sizes[documents])
        epochs = num_epochs(tpe, seq_length, num_samples)
        rng = np.random.RandomState(seed=seed)
        separate = False
        nm1 = None
        if epochs > 1:
            nm1 = ((epochs - 1) * tpe - 1) // seq_length
            last = num_samples - nm1
            assert last >= 0
            per = (tpe - 1) // seq_length
            assert last <= per, "Megatron's assert: last epoch has too many samples"
            separate = last < int(0.95 * per)
        self.doc_idx = doc_idx_of(documents, epochs, rng, separate)
        assert self.doc_idx.dtype == np.int32 and sizes.dtype == np.int32
        self.sample_idx = sample_idx_of(sizes, self.doc_idx, seq_length, epochs, int(tpe))
        n_ = nm1 if separate else self.sample_idx.shape[0] - 1
        self.shuffle_idx = shuffle_idx_of(n_, self.sample_idx.shape[0] - 1, rng)
        self.epochs, self.separate, self.tpe = epochs, separate, int(tpe)

    def __len__(self):
        return self.sample_idx.shape[0] - 1

    def __getitem__(self, idx):
        idx = self.shuffle_idx[idx]
        df, dl = self.sample_idx[idx][0], self.sample_idx[idx + 1][0]
        of, ol = self.sample_idx[idx][1], self.sample_idx[idx + 1][1]
        if df == dl:
            return self.ds.get(self.doc_idx[df], offset=of, length=ol - of + 1)
        parts = [self.ds.get(self.doc_idx[df], offset=of)]
        for i in range(df + 1, dl):
            parts.append(self.ds.get(self.doc_idx[i]))
        parts.append(self.ds.get(self.doc_idx[dl], length=ol + 1))
        return np.concatenate(parts)


def blending_indices(weights, size):
    """build_blending_indices, helpers.cpp's loop in Python"""
    weights = [float(w) for w in weights]
    n = len(weights)
    count = [0] * n
    di, dsi = [], []
    for i in range(size):
        x = max(float(i), 1.0)
        best, best_err = 0, weights[0] * x - float(count[0])
        for j in range(1, n):
            e = weights[j] * x - float(count[j])
            if e > best_err:
                best, best_err = j, e
        di.append(best)
        dsi.append(count[best])
        count[best] += 1
    return di, dsi


def blend_normalise(weights):
    """BlendableDataset.__init__"""
    w = np.array(weights, dtype=np.float64)
    s = np.sum(w)
    assert s > 0.0
    w /= s
    return w


def line(name, values):
    values = list(values)
    print("%s %d:%s" % (name, len(values), "".join(" %d" % v for v in values)))


def which_samples(n):
    step = max(1, n // 40)
    return sorted(set(list(range(0, n, step)) + [n - 1])) if n else []


def print_gpt(g):
    print("epochs %d separate %d tokens_per_epoch %d ns %d" %
          (g.epochs, int(g.separate), g.tpe, len(g)))
    line("doc_idx", g.doc_idx.tolist())
    line("sample_idx", g.sample_idx.reshape(-1).tolist())
    line("shuffle_idx", g.shuffle_idx.tolist())
    for i in which_samples(len(g)):
        line("sample %d" % i, g[i].tolist())


def main(argv):
    if len(argv) >= 7 and argv[0] == "index":
        prefix, split, which = argv[1], argv[2], int(argv[3])
        ns, seq, seed = int(argv[4]), int(argv[5]), int(argv[6])
        ds = Indexed(prefix)
        s = split_indices(split, ds.sizes.shape[0])
        print("split %d %d %d %d" % tuple(s))
        print_gpt(GPT(ds, s[which], s[which + 1], ns, seq, seed))
    elif len(argv) >= 8 and argv[0] == "blend":
        split, which = argv[1], int(argv[2])
        ns, seq, seed = int(argv[3]), int(argv[4]), int(argv[5])
        pairs = argv[6:]
        assert len(pairs) % 2 == 0
        # analyze_data_prefix: weights normalised with a Python loop
        weights = [float(w) for w in pairs[0::2]]
        total = 0.0
        for w in weights:
            total += w
        weights = [w / total for w in weights]
        gpts = []
        for k, (w, prefix) in enumerate(zip(weights, pairs[1::2])):
            want = int(math.ceil(ns * w * 1.005))
            ds = Indexed(prefix.strip())
            s = split_indices(split, ds.sizes.shape[0])
            print("dataset %d weight %.17g num_samples %d split %d %d" %
                  (k, w, want, s[which], s[which + 1]))
            g = GPT(ds, s[which], s[which + 1], want, seq, seed)
            print_gpt(g)
            gpts.append(g)
        size = sum(len(g) for g in gpts)
        w = blend_normalise(weights)
        print("blend size %d weights%s" % (size, "".join(" %.17g" % v for v in w.tolist())))
        di, dsi = blending_indices(w, size)
        line("dataset_index", di)
        line("dataset_sample_index", dsi)
        # training reads the first NUM_SAMPLES; further on a dataset may run out (its share of
        # the blend's size exceeds what it built), and Megatron would raise IndexError there
        for i in which_samples(min(size, ns)):
            line("blended %d" % i, gpts[di[i]][dsi[i]].tolist())
    elif len(argv) >= 3 and argv[0] == "blend-only":
        size = int(argv[1])
        w = blend_normalise([float(x) for x in argv[2:]])
        print("weights%s" % "".join(" %.17g" % v for v in w.tolist()))
        di, dsi = blending_indices(w, size)
        line("dataset_index", di)
        line("dataset_sample_index", dsi)
    elif len(argv) >= 5 and argv[0] == "subset":
        src, out, first, end = Indexed(argv[1]), argv[2], int(argv[3]), int(argv[4])
        order = list(range(first, end))
        if "--reverse" in argv:
            order.reverse()
        dtype, code = src.dtype, src.code
        if "--dtype" in argv and argv[argv.index("--dtype") + 1] == "int32":
            dtype, code = np.dtype(np.int32), 4
        docs = [src.get(i).astype(dtype) for i in order]
        sizes = np.array([len(d) for d in docs], dtype=np.int32)
        pointers = np.zeros(len(docs), dtype=np.int64)
        if len(docs) > 1:
            pointers[1:] = np.cumsum(sizes[:-1].astype(np.int64)) * dtype.itemsize
        with open(out + ".bin", "wb") as f:
            for d in docs:
                f.write(d.tobytes())
        with open(out + ".idx", "wb") as f:
            f.write(MAGIC + struct.pack("<Q", 1) + bytes([code]))
            f.write(struct.pack("<QQ", len(docs), len(docs) + 1))
            f.write(sizes.tobytes() + pointers.tobytes())
            f.write(np.arange(len(docs) + 1, dtype=np.int64).tobytes())
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
