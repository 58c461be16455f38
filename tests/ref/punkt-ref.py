#!/usr/bin/python3
"""punkt-ref.py - NLTK's Punkt (Debian's python3-nltk), the peer of tokenize --split-sentences and
--train-punkt, and an independent writer of the sentence datasets Megatron's preprocessor makes.

  punkt-ref.py train [--json-keys K ...] [--plain] < INPUT > PARAMS.json
      PunktTrainer(text).get_params(), where text is the documents' texts joined by blank lines
      (what tokenize --train-punkt trains on), written as lmtk's parameter file.
  punkt-ref.py dump PARAMS.json
      the four tables, one entry a line, sorted: "abbrev 'dr'", "colloc 'j' 'bach'",
      "starter 'but'", "ortho 'the' 34" (repr()s), zero contexts left out: two files hold the
      same parameters iff their dumps are equal.
  punkt-ref.py split PARAMS.json [--keep-newlines] [--json-keys K ...] [--plain] < INPUT > SENTENCES
      for each document, {"KEY": [sentence, ...]} per line, as tokenize --format sentences writes
      it: PunktSentenceTokenizer(params).tokenize(text), or with --keep-newlines Megatron's
      CustomLanguageVars (its class, copied from tools/preprocess_data.py).
  punkt-ref.py same SENTENCES_A SENTENCES_B
      exit 0 if equal, else 1 and the first difference (document, sentence, both texts).
  punkt-ref.py flatten KEY < SENTENCES > FLAT.jsonl
      one {"text": sentence} line per sentence of KEY, for tests/ref/hf-encode.js.
  punkt-ref.py megatron SENTENCES IDS KEY VOCAB_SIZE EOD|none PREFIX
      PREFIX_KEY_sentence.bin/.idx as Megatron's preprocess_data.py (2021-22, the BERT studies')
      writes them from those sentences and their ids (IDS: one line per sentence of FLAT, from
      hf-encode.js without --append-eod): sentences without ids dropped, EOD appended to the
      last, each sentence one item (add_item), end_document() after each document with a
      sentence; the dtype is best_fitting_dtype(VOCAB_SIZE).  The writer is
      MMapIndexedDatasetBuilder's, written from megatron/data/indexed_dataset.py.
  punkt-ref.py pickle PARAMS.json > PICKLE
      a pickled PunktSentenceTokenizer with those parameters, as nltk_data's english.pickle is
      one (for share/lmtk/punkt-from-pickle.py's test).
"""
import json
import struct
import sys

# nltk and numpy are imported by the commands that use them: the others run often and start fast


def custom_language_vars():
    from nltk.tokenize.punkt import PunktLanguageVars

    class CustomLanguageVars(PunktLanguageVars):
        """Megatron-LM tools/preprocess_data.py, verbatim"""

        _period_context_fmt = r"""
        \S*                          # some word material
        %(SentEndChars)s             # a potential sentence ending
        \s*                       #  <-- THIS is what I changed
        (?=(?P<after_tok>
            %(NonWord)s              # either other punctuation
            |
            (?P<next_tok>\S+)     #  <-- Normally you would have \s+ here
        ))"""

    return CustomLanguageVars()


def arg_keys(argv):
    keys = []
    if "--json-keys" in argv:
        i = argv.index("--json-keys") + 1
        while i < len(argv) and not argv[i].startswith("--"):
            keys.append(argv[i])
            i += 1
    return keys or ["text"]


def documents(argv):
    """(key, text) lists per document of stdin, as tokenize reads it"""
    plain = "--plain" in argv
    keys = arg_keys(argv)
    data = sys.stdin.buffer.read().decode("utf-8")
    if plain:
        lines = data.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for line in lines:
            yield [("text", line)]
        return
    for line in data.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip(" \t"):
            continue
        d = json.loads(line)
        yield [(k, d[k]) for k in keys]


def params_to_json(p, trained_on):
    return {
        "format": "lmtk-punkt-params 1",
        "trained_on": trained_on,
        "abbrev_types": sorted(p.abbrev_types, key=lambda s: s.encode()),
        "collocations": sorted(([a, b] for a, b in p.collocations),
                               key=lambda c: (c[0].encode(), c[1].encode())),
        "sent_starters": sorted(p.sent_starters, key=lambda s: s.encode()),
        "ortho_context": [[k, v] for k, v in sorted(p.ortho_context.items(), key=lambda kv: kv[0].encode()) if v],
    }


def params_of_json(path):
    from nltk.tokenize.punkt import PunktParameters
    j = json.load(open(path, encoding="utf-8"))
    assert j["format"] == "lmtk-punkt-params 1", path
    p = PunktParameters()
    p.abbrev_types = set(j["abbrev_types"])
    p.collocations = set(tuple(c) for c in j["collocations"])
    p.sent_starters = set(j["sent_starters"])
    for k, v in j["ortho_context"]:
        p.ortho_context[k] = v
    return p


def train(argv):
    from nltk.tokenize.punkt import PunktTrainer
    texts = [t for doc in documents(argv) for _, t in doc]
    p = PunktTrainer("\n\n".join(texts)).get_params()
    json.dump(params_to_json(p, "NLTK PunktTrainer: %d texts" % len(texts)), sys.stdout, ensure_ascii=False,
              indent=1)
    sys.stdout.write("\n")


def dump(argv):
    j = json.load(open(argv[0], encoding="utf-8"))
    lines = ["abbrev %r" % a for a in j["abbrev_types"]]
    lines += ["colloc %r %r" % (a, b) for a, b in j["collocations"]]
    lines += ["starter %r" % s for s in j["sent_starters"]]
    lines += ["ortho %r %d" % (k, v) for k, v in j["ortho_context"] if v]
    for line in sorted(lines):
        print(line)


def split(argv):
    from nltk.tokenize.punkt import PunktSentenceTokenizer
    p = params_of_json(argv[0])
    tok = PunktSentenceTokenizer(p, lang_vars=custom_language_vars() if "--keep-newlines" in argv else None)
    out = sys.stdout
    for doc in documents(argv[1:]):
        out.write(json.dumps({k: tok.tokenize(t) for k, t in doc}, ensure_ascii=False) + "\n")


def same(argv):
    a = open(argv[0], encoding="utf-8").read().split("\n")
    b = open(argv[1], encoding="utf-8").read().split("\n")
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y:
            continue
        x, y = json.loads(x), json.loads(y)
        if x == y:
            continue
        for k in x:
            for j, (s, t) in enumerate(zip(x[k], y.get(k, []))):
                if s != t:
                    at = next((c for c in range(min(len(s), len(t))) if s[c] != t[c]), min(len(s), len(t)))
                    print("document %d, key %s, sentence %d (%d and %d characters) differs at %d: %r != %r"
                          % (i + 1, k, j, len(s), len(t), at, s[max(0, at - 60):at + 60], t[max(0, at - 60):at + 60]))
                    sys.exit(1)
            if len(x[k]) != len(y.get(k, [])):
                print("document %d, key %s: %d sentences != %d" % (i + 1, k, len(x[k]), len(y.get(k, []))))
                sys.exit(1)
        print("document %d differs: %r != %r" % (i + 1, a[i][:300], b[i][:300]))
        sys.exit(1)
    if len(a) != len(b):
        print("%d lines != %d lines" % (len(a), len(b)))
        sys.exit(1)


def flatten(argv):
    for line in sys.stdin:
        for s in json.loads(line)[argv[0]]:
            sys.stdout.write(json.dumps({"text": s}) + "\n")


def megatron(argv):
    import numpy as np
    sents_path, ids_path, key, vocab, eod, prefix = argv
    vocab = int(vocab)
    eod = None if eod == "none" else int(eod)
    dtype, code = (np.uint16, 8) if vocab < 65500 else (np.int32, 4)   # best_fitting_dtype
    ids = open(ids_path).read().split("\n")
    n = 0
    sizes, doc_idx = [], [0]
    with open(prefix + "_%s_sentence.bin" % key, "wb") as binf:
        for line in open(sents_path, encoding="utf-8"):
            doc = []
            for _ in json.loads(line)[key]:
                s = [int(x) for x in ids[n].split()]
                n += 1
                if s:
                    doc.append(s)
            if doc and eod is not None:
                doc[-1].append(eod)
            if not doc:
                continue
            for s in doc:                      # add_item
                a = np.array(s, dtype=dtype)
                binf.write(a.tobytes(order="C"))
                sizes.append(a.size)
            doc_idx.append(len(sizes))         # end_document
    pointers, address = [], 0
    for s in sizes:
        pointers.append(address)
        address += s * np.dtype(dtype).itemsize
    with open(prefix + "_%s_sentence.idx" % key, "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(sizes)) + struct.pack("<Q", len(doc_idx)))
        f.write(np.array(sizes, dtype=np.int32).tobytes(order="C"))
        f.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        f.write(np.array(doc_idx, dtype=np.int64).tobytes(order="C"))


def to_pickle(argv):
    import pickle
    from nltk.tokenize.punkt import PunktSentenceTokenizer
    sys.stdout.buffer.write(pickle.dumps(PunktSentenceTokenizer(params_of_json(argv[0]))))


def main(argv):
    cmds = {"train": train, "dump": dump, "split": split, "same": same, "flatten": flatten,
            "megatron": megatron, "pickle": to_pickle}
    if not argv or argv[0] not in cmds:
        sys.exit(__doc__)
    cmds[argv[0]](argv[1:])


main(sys.argv[1:])
