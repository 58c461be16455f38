#!/usr/bin/python3
"""punkt-from-pickle.py - NLTK's pretrained Punkt parameters as a file for tokenize --punkt-params.

    share/lmtk/punkt-from-pickle.py ~/nltk_data/tokenizers/punkt/english.pickle > english.json
    share/lmtk/punkt-from-pickle.py ~/nltk_data/tokenizers/punkt_tab/english > english.json
    tokenize --split-sentences --punkt-params english.json ...

Megatron's preprocessor splits sentences with nltk.load("tokenizers/punkt/english.pickle"); lmtk
runs the same algorithm (see tokenize(1)) but cannot ship that file.  Where you have it (from
nltk_data: nltk.download("punkt")), this turns its four tables into lmtk's JSON, and tokenize
then splits exactly as Megatron did.  Unpickling needs NLTK installed (Debian: python3-nltk);
run it only on a pickle you trust, as any pickle.  NLTK 3.9 ships the same tables as text
instead (nltk.download("punkt_tab"): a directory per language of abbrev_types.txt,
collocations.tab, sent_starters.txt and ortho_context.tab), which needs no NLTK to read.
"""
import json
import os
import pickle
import sys
from types import SimpleNamespace


def punkt_tab(d):
    """NLTK 3.9's punkt_tab/LANG directory: one entry a line, pairs separated by a tab"""
    def lines(name):
        with open(os.path.join(d, name), encoding="utf-8") as f:
            return [l[:-1] if l.endswith("\n") else l for l in f if l != "\n"]

    def pair(name, line):
        if "\t" not in line:
            sys.exit("punkt-from-pickle: %s/%s: no tab in %r" % (d, name, line))
        return line.rsplit("\t", 1)
    ortho = {}
    for line in lines("ortho_context.tab"):
        k, v = pair("ortho_context.tab", line)
        ortho[k] = int(v)
    return SimpleNamespace(abbrev_types=set(lines("abbrev_types.txt")),
                           collocations={tuple(pair("collocations.tab", l)) for l in lines("collocations.tab")},
                           sent_starters=set(lines("sent_starters.txt")), ortho_context=ortho)


def main(argv):
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        sys.exit(__doc__)
    if os.path.isdir(argv[0]):
        p = punkt_tab(argv[0])
    else:
        with open(argv[0], "rb") as f:
            obj = pickle.load(f)
        p = getattr(obj, "_params", obj)   # a PunktSentenceTokenizer, or its PunktParameters
        for attr in ("abbrev_types", "collocations", "sent_starters", "ortho_context"):
            if not hasattr(p, attr):
                sys.exit("punkt-from-pickle: %s holds no Punkt parameters (no %s)" % (argv[0], attr))
    b = lambda s: s.encode("utf-8", "surrogatepass")
    out = {
        "format": "lmtk-punkt-params 1",
        "trained_on": "NLTK's " + argv[0].rstrip("/").rsplit("/", 1)[-1],
        "abbrev_types": sorted(p.abbrev_types, key=b),
        "collocations": sorted(([x, y] for x, y in p.collocations), key=lambda c: (b(c[0]), b(c[1]))),
        "sent_starters": sorted(p.sent_starters, key=b),
        "ortho_context": [[k, v] for k, v in sorted(p.ortho_context.items(), key=lambda kv: b(kv[0])) if v],
    }
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


main(sys.argv[1:])
