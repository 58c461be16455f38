#!/usr/bin/python3
"""bert-samples.py - Megatron-LM's BERT and T5 samples, recomputed in Python with numpy.

An independent reference for src/train/data/bertdata.c, written from what Megatron-LM's
megatron/data/{dataset_utils,bert_dataset,t5_dataset}.py and helpers.cpp (build_mapping) do (as
of fabad461, 2022), not from the C: every draw of a sample comes from numpy's own
RandomState (shuffle of a list, choice with p, geometric, random, randint); helpers.cpp's
std::mt19937 is a RandomState too (an integer seed seeds both alike, and randint(0, 2**32,
uint64) is the raw 32-bit output) and its std::mt19937_64 is the few lines of MT19937-64 below,
checked against the C++ standard's value for the 10000th output.

  bert-samples.py dump PREFIX VOCAB KIND SPLIT WHICH NUM_SAMPLES SEQ DEC SEED MASK_PROB
                       SHORT_PROB EXTRA_IDS NPRINT
      KIND bert | bert-nobinary | t5; prints the split, the samples mapping (every row) and the
      first NPRINT samples (tokens, types, labels, masks; T5's three (S, S) masks row by row)
  bert-samples.py make PREFIX VOCAB SEED DOCS DTYPE
      writes a sentence dataset (PREFIX.bin/.idx, Megatron's MMIDIDX with doc_idx over
      sentences; DTYPE uint16 or int32) and a WordPiece vocab.txt with "##" pieces: documents of
      0 to 9 sentences of 1 to 40 tokens (a third "##" pieces, a few [CLS], [SEP] and [MASK]),
      a few with a sentence over 512 tokens; int32 data has a vocabulary of 70,000 more ids
      and [PAD] at id 1, an ordinary word being id 0
"""
import struct
import sys

import numpy as np

LONG_SENTENCE = 512


# --- the data ---------------------------------------------------------------------------------

class Sentences:
    def __init__(self, prefix):
        idx = open(prefix + ".idx", "rb").read()
        assert idx[:9] == b"MMIDIDX\x00\x00", "not an MMIDIDX index"
        version, code, n, d = struct.unpack("<QBQQ", idx[9:34])
        assert version == 1
        self.dtype = {8: np.uint16, 4: np.int32}[code]
        self.sizes = np.frombuffer(idx, dtype=np.int32, count=n, offset=34)
        self.pointers = np.frombuffer(idx, dtype=np.int64, count=n, offset=34 + 4 * n)
        self.doc_idx = np.frombuffer(idx, dtype=np.int64, count=d, offset=34 + 12 * n)
        assert self.doc_idx[-1] == n
        self.bin = np.memmap(prefix + ".bin", dtype=np.uint8, mode="r")

    def __getitem__(self, i):
        return np.frombuffer(self.bin, dtype=self.dtype, count=int(self.sizes[i]),
                             offset=int(self.pointers[i]))


class Vocab:
    """What _BertWordPieceTokenizer gives the datasets."""

    def __init__(self, path, extra_ids):
        vocab = {}
        with open(path, "r") as f:
            for index, line in enumerate(f):
                vocab[line.strip()] = index
        self.inv = {v: k for k, v in vocab.items()}
        self.cls, self.sep = vocab["[CLS]"], vocab["[SEP]"]
        self.pad, self.mask = vocab["[PAD]"], vocab["[MASK]"]
        for tok in ["[BOS]", "[EOS]"] + ["<extra_id_%d>" % i for i in range(extra_ids)]:
            if tok not in vocab:
                self.inv[len(vocab)] = tok
                vocab[tok] = len(vocab)
        self.bos, self.eos = vocab["[BOS]"], vocab["[EOS]"]
        self.sentinels = [vocab["<extra_id_%d>" % i] for i in range(extra_ids)]
        self.ids = list(self.inv.keys())


def split_of(s, size):
    sep = "," if "," in s else "/" if "/" in s else None
    parts = [float(x) for x in (s.split(sep) if sep else [s])]
    parts = (parts + [0.0, 0.0, 0.0])[:3]
    total = sum(parts)
    bounds = [0]
    for p in parts:
        bounds.append(bounds[-1] + int(round(p / total * float(size))))
    diff = bounds[-1] - size
    return [bounds[0]] + [b - diff for b in bounds[1:]]


# --- helpers.cpp build_mapping ------------------------------------------------------------------

class MT64:
    """std::mt19937_64"""
    M64 = (1 << 64) - 1

    def __init__(self, seed):
        self.x = [seed & self.M64]
        for i in range(1, 312):
            p = self.x[-1]
            self.x.append((6364136223846793005 * (p ^ (p >> 62)) + i) & self.M64)
        self.i = 312

    def __call__(self):
        if self.i == 312:
            x = self.x
            for k in range(312):
                y = (x[k] & 0xFFFFFFFF80000000) | (x[(k + 1) % 312] & 0x7FFFFFFF)
                x[k] = x[(k + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
            self.i = 0
        y = self.x[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000 & self.M64
        y ^= (y << 37) & 0xFFF7EEE000000000 & self.M64
        y ^= y >> 43
        return y


def check_mt64():
    g = MT64(5489)
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042, "MT19937-64 does not match the C++ standard"


def samples_mapping(doc_idx, sizes, num_samples, max_len, short_prob, seed, min_sent):
    num_epochs = np.iinfo(np.int32).max - 1
    ratio = int(round(1.0 / short_prob)) if short_prob > 0 else 0
    rng = np.random.RandomState(seed)  # std::mt19937(seed): the same outputs

    def target():
        if ratio == 0:
            return max_len
        r = int(rng.randint(0, 2**32, dtype=np.uint64))
        return 2 + r % (max_len - 1) if r % ratio == 0 else max_len

    rows = []
    for epoch in range(num_epochs):
        if len(rows) >= num_samples:
            break
        assert epoch == 0 or rows, "no sample in an epoch"
        for d in range(len(doc_idx) - 1):
            first, last = int(doc_idx[d]), int(doc_idx[d + 1])
            left = last - first
            if left > 1 and any(int(sizes[s]) > LONG_SENTENCE for s in range(first, last)):
                continue
            if left < min_sent:
                continue
            start, length, count, t = first, 0, 0, target()
            for s in range(first, last):
                length += int(sizes[s])
                count += 1
                left -= 1
                if (length >= t and left > 1 and count >= min_sent) or left == 0:
                    rows.append((start, s + 1, t))
                    start, length, count, t = s + 1, 0, 0, target()
    g = MT64(seed + 1)
    for i in range(len(rows) - 1, 0, -1):
        j = g() % (i + 1)
        rows[i], rows[j] = rows[j], rows[i]
    return rows


# --- a sample ----------------------------------------------------------------------------------

def mask_tokens(tokens, vocab, prob, max_pred, rng, t5):
    """create_masked_lm_predictions: (output tokens, [(pos, label)], spans [[pos...]])"""
    words = []  # lists of positions; a "##" piece continues the word before it
    for i, t in enumerate(tokens):
        if t == vocab.cls or t == vocab.sep:
            continue
        piece = vocab.inv[int(t)]
        if words and piece.startswith("##"):
            words[-1].append(i)
        else:
            words.append([i])
    out = list(tokens)
    if prob == 0:
        return out, [], []
    limit = min(max_pred, max(1, int(round(len(tokens) * prob))))
    max_n = 10 if t5 else 3
    ngrams = np.arange(1, max_n + 1, dtype=np.int64)
    if not t5:
        pvals = 1. / np.arange(1, max_n + 1)
        pvals /= pvals.sum(keepdims=True)
    cands = [[words[k:k + n] for n in ngrams] for k in range(len(words))]
    rng.shuffle(cands)
    masked, spans, covered = [], [], set()
    for c in cands:
        if len(masked) >= limit:
            break
        if t5:
            n = min(rng.geometric(0.2), max_n)
        else:
            n = rng.choice(ngrams[:len(c)], p=pvals[:len(c)] / pvals[:len(c)].sum(keepdims=True))
        while True:
            positions = [p for w in c[n - 1] for p in w]
            if len(masked) + len(positions) <= limit or n == 1:
                break
            n -= 1
        if len(masked) + len(positions) > limit:
            continue
        if any(p in covered for p in positions):
            continue
        for p in positions:
            covered.add(p)
            if t5 or rng.random() < 0.8:
                out[p] = vocab.mask
            elif rng.random() < 0.5:
                out[p] = tokens[p]
            else:
                out[p] = vocab.ids[rng.randint(0, len(vocab.ids))]
            masked.append((p, tokens[p]))
        spans.append(positions)
    masked.sort()
    spans.sort(key=lambda s: s[0])
    return out, masked, spans


def bert_sample(ds, vocab, row, idx, a):
    first, end, target = row
    sents = [list(ds[s]) for s in range(first, end)]
    rng = np.random.RandomState((a.seed + idx) % 2**32)
    is_random = False
    if a.binary:
        assert len(sents) > 1
        cut = rng.randint(1, len(sents)) if len(sents) >= 3 else 1
        seg_a = [t for s in sents[:cut] for t in s]
        seg_b = [t for s in sents[cut:] for t in s]
        if rng.random() < 0.5:
            seg_a, seg_b, is_random = seg_b, seg_a, True
    else:
        seg_a, seg_b = [t for s in sents for t in s], []
    assert len(seg_a) > 0
    truncated = len(seg_a) + len(seg_b) > target
    while len(seg_a) + len(seg_b) > target:
        seg = seg_a if len(seg_a) > len(seg_b) else seg_b
        if rng.random() < 0.5:
            seg.pop(0)
        else:
            seg.pop()
    tokens = [vocab.cls] + seg_a + [vocab.sep] + (seg_b + [vocab.sep] if seg_b else [])
    types = [0] * (len(seg_a) + 2) + ([1] * (len(seg_b) + 1) if seg_b else [])
    out, masked, _ = mask_tokens(tokens, vocab, a.mask_prob, a.mask_prob * target, rng, False)
    pad = a.seq - len(out)
    assert pad >= 0
    labels, loss = [-1] * a.seq, [0] * a.seq
    for p, lab in masked:
        labels[p], loss[p] = lab, 1
    return {"is_random": int(is_random), "truncated": int(truncated),
            "tokens": out + [vocab.pad] * pad, "types": types + [vocab.pad] * pad,
            "labels": labels, "padding_mask": [1] * len(out) + [0] * pad, "loss_mask": loss}


def t5_sample(ds, vocab, row, idx, a):
    first, end, target = row
    tokens = [t for s in range(first, end) for t in ds[s]]
    truncated = len(tokens) > target
    tokens = tokens[:target]
    rng = np.random.RandomState(a.seed + idx)
    out, masked, spans = mask_tokens(tokens, vocab, a.mask_prob, a.mask_prob * target, rng, True)
    assert len(spans) <= len(vocab.sentinels)
    enc, dec_in, dec_out, start = [], [vocab.bos], [], 0
    for k, positions in enumerate(spans):
        flag = vocab.sentinels[k]
        dec_in += [flag] + [tokens[p] for p in positions]
        dec_out += [flag] + [tokens[p] for p in positions]
        enc += out[start:positions[0]] + [flag]
        start = positions[-1] + 1
    enc += out[start:]
    dec_out.append(vocab.eos)
    assert len(enc) <= a.seq and len(dec_in) <= a.dec
    enc_np = np.array(enc + [vocab.pad] * (a.seq - len(enc)), dtype=np.int64)
    dec_np = np.array(dec_in + [vocab.pad] * (a.dec - len(dec_in)), dtype=np.int64)

    def attention(src, tgt):  # make_attention_mask
        return ((tgt[None, :] >= 1) * (src[:, None] >= 1)).astype(np.int64)

    history = (np.arange(a.dec)[None, :] <= np.arange(a.dec)[:, None]).astype(np.int64)
    return {"truncated": int(truncated), "enc": enc_np.tolist(), "dec": dec_np.tolist(),
            "labels": dec_out + [-1] * (a.dec - len(dec_in)),
            "loss_mask": [1] * len(dec_in) + [0] * (a.dec - len(dec_in)),
            "enc_mask": attention(enc_np, enc_np), "dec_mask": attention(dec_np, dec_np) * history,
            "enc_dec_mask": attention(dec_np, enc_np)}


def line(name, values):
    print(name, " ".join(str(int(v)) for v in values))


def rows_of(name, m):
    print(name, " ".join("".join(str(int(x)) for x in r) for r in m))


def dump(argv):
    class A:
        pass
    a = A()
    (prefix, vocab_path, kind, split, which, num, seq, dec, seed, mprob, sprob, extra,
     nprint) = argv
    a.kind, a.seq, a.dec, a.seed = kind, int(seq), int(dec), int(seed)
    a.mask_prob, a.binary = float(mprob), kind == "bert"
    check_mt64()
    ds = Sentences(prefix)
    vocab = Vocab(vocab_path, int(extra))
    bounds = split_of(split, len(ds.doc_idx) - 1)
    line("split", bounds)
    w = int(which)
    docs = ds.doc_idx[bounds[w]:bounds[w + 1] + 1]
    max_len = a.seq - (2 if kind == "t5" else 3)
    rows = samples_mapping(docs, ds.sizes, int(num), max_len, float(sprob), a.seed,
                           2 if a.binary else 1)
    print("samples", len(rows))
    line("mapping", [x for r in rows for x in r])
    for i in range(min(int(nprint), len(rows))):
        if kind == "t5":
            s = t5_sample(ds, vocab, rows[i], i, a)
            print("sample", i, "truncated", s["truncated"])
            for k in ("enc", "dec", "labels", "loss_mask"):
                line(k, s[k])
            for k in ("enc_mask", "dec_mask", "enc_dec_mask"):
                rows_of(k, s[k])
        else:
            s = bert_sample(ds, vocab, rows[i], i, a)
            print("sample", i, "is_random", s["is_random"], "truncated", s["truncated"])
            for k in ("tokens", "types", "labels", "padding_mask", "loss_mask"):
                line(k, s[k])


# --- a test dataset ---------------------------------------------------------------------------

def make(argv):
    prefix, vocab_path, seed, ndocs, dtype = argv
    rng = np.random.RandomState(int(seed))
    words = ["w%d" % i for i in range(300)]
    pieces = ["##p%d" % i for i in range(100)]
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = special + words + pieces
    if dtype == "int32":
        # ids over uint16's range (Megatron writes int32 then), and [PAD] not 0: an ordinary
        # word is id 0, which T5's masks (id >= 1) count as padding
        vocab = ["zero"] + special + words + pieces + ["x%d" % i for i in range(70000)]
    with open(vocab_path, "w") as f:
        f.write("".join(t + "\n" for t in vocab))
    ids = {t: i for i, t in enumerate(vocab)}
    word_ids = [ids[w] for w in words] + ([0] * 10 if dtype == "int32" else [])
    piece_ids = [ids[p] for p in pieces]
    odd_ids = [ids["[CLS]"], ids["[SEP]"], ids["[MASK]"]]
    docs = []
    for d in range(int(ndocs)):
        nsent = int(rng.randint(0, 10))
        doc = []
        for s in range(nsent):
            n = int(rng.randint(1, 41)) if rng.random() > 0.02 else 600
            toks = []
            for _ in range(n):
                r = rng.random()
                if r < 0.3 and toks:
                    toks.append(piece_ids[rng.randint(0, len(piece_ids))])
                elif r < 0.31:  # [CLS], [SEP] or [MASK] in the text
                    toks.append(odd_ids[rng.randint(0, 3)])
                elif r < 0.33:
                    toks.append(len(vocab) - 1 - int(rng.randint(0, 50)))
                else:
                    toks.append(word_ids[rng.randint(0, len(word_ids))])
            doc.append(toks)
        docs.append(doc)
    code, width, fmt = (8, 2, "<%dH") if dtype == "uint16" else (4, 4, "<%di")
    sizes, pointers, doc_idx, off = [], [], [0], 0
    with open(prefix + ".bin", "wb") as f:
        for doc in docs:
            for s in doc:
                f.write(struct.pack(fmt % len(s), *s))
                sizes.append(len(s))
                pointers.append(off)
                off += width * len(s)
            doc_idx.append(len(sizes))
    n = len(sizes)
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, code, n, len(doc_idx)))
        f.write(struct.pack("<%di" % n, *sizes) + struct.pack("<%dq" % n, *pointers)
                + struct.pack("<%dq" % len(doc_idx), *doc_idx))


if __name__ == "__main__":
    if len(sys.argv) == 15 and sys.argv[1] == "dump":
        dump(sys.argv[2:])
    elif len(sys.argv) == 7 and sys.argv[1] == "make":
        make(sys.argv[2:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
