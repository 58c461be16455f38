#!/usr/bin/python3
"""punkt-from-pickle.py - NLTK's pretrained Punkt parameters as a file for tokenize --punkt-params.

    share/lmtk/punkt-from-pickle.py ~/nltk_data/tokenizers/punkt/english.pickle > english.json
    tokenize --split-sentences --punkt-params english.json ...

Megatron's preprocessor splits sentences with nltk.load("tokenizers/punkt/english.pickle"); lmtk
runs the same algorithm (see tokenize(1)) but cannot ship that file.  Where you have it (from
nltk_data, or `python3 -c 'import nltk; nltk.download("punkt")'`), this turns its four tables
into lmtk's JSON, and tokenize then splits exactly as Megatron did.  Unpickling needs NLTK
installed (Debian: python3-nltk); run it only on a pickle you trust, as any pickle.
"""
import json
import pickle
import sys


def main(argv):
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        sys.exit(__doc__)
    with open(argv[0], "rb") as f:
        obj = pickle.load(f)
    p = getattr(obj, "_params", obj)   # a PunktSentenceTokenizer, or its PunktParameters
    for attr in ("abbrev_types", "collocations", "sent_starters", "ortho_context"):
        if not hasattr(p, attr):
            sys.exit("punkt-from-pickle: %s holds no Punkt parameters (no %s)" % (argv[0], attr))
    b = lambda s: s.encode("utf-8", "surrogatepass")
    out = {
        "format": "lmtk-punkt-params 1",
        "trained_on": "NLTK's " + argv[0].rsplit("/", 1)[-1],
        "abbrev_types": sorted(p.abbrev_types, key=b),
        "collocations": sorted(([x, y] for x, y in p.collocations), key=lambda c: (b(c[0]), b(c[1]))),
        "sent_starters": sorted(p.sent_starters, key=b),
        "ortho_context": [[k, v] for k, v in sorted(p.ortho_context.items(), key=lambda kv: b(kv[0])) if v],
    }
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


main(sys.argv[1:])
