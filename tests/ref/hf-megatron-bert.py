#!/usr/bin/python3
"""Does a Hugging Face export of a BERT give the checkpoint's outputs?

    tests/ref/hf-megatron-bert.py --hf HF_DIR --ckpt STEP_DIR [--seed N] [--batch-size B]
                                  [--tolerance X] [--hf-tolerance X]
                                  [--mutate WHAT | --mutations WHAT,WHAT...]

Two forwards over the same batch, in float64:
  - HF: MegatronBertForPreTraining / MegatronBertForMaskedLM as transformers runs it, written here
    from transformers' models/megatron_bert/modeling_megatron_bert.py and
    configuration_megatron_bert.py (transformers itself is not installed on these machines),
    over the EXPORTED files - config.json read as HF reads it (vocab_size, hidden_size,
    num_hidden_layers, num_attention_heads, intermediate_size, hidden_act, layer_norm_eps,
    max_position_embeddings, type_vocab_size, tie_word_embeddings), the weights by HF's names
    (model.safetensors, or model.safetensors.index.json and its files).  Loading is strict where
    from_pretrained is lenient: a missing weight (which HF would initialise at random) or an
    unexpected one is an error, except the decoder's, which the class ties to the word
    embeddings and cls.predictions.bias.
        h   = word[ids] + token_type[types] + position[0..T-1]      (no layer norm: Megatron's)
        per layer: h = h + attn(LN_a(h)) (query/key/value Linear, scores / sqrt(hd) + the
                   extended mask: finfo.min on padded KEYS), then h = h + out(act(inter(LN(h))))
        h   = LN_enc(h); pooled = tanh(pooler(h[:, 0]))
        prediction_logits = LayerNorm(act(dense(h))) @ word^T + cls.predictions.bias    [B,T,V]
        seq_relationship_logits = seq_relationship(pooled)                               [B,2]
  - the checkpoint: tests/ref/bert-ref.py's forward (Megatron's BertModel, the reference train
    is tested against) over the lmtk checkpoint's master weights (STEP_DIR, merged to TP=1 PP=1),
    its config from the manifest.
Compared at the real (unpadded) positions, over the real vocabulary.  Where the export cannot
be the model exactly - MegatronBert has one hidden_act for the MLP and the LM head, Megatron's
MLP GeLU is tanh and its LM head's erf unless --openai-gelu - the HF forward is also run with
the checkpoint's two GeLUs in place of hidden_act's ("hf+train"): that one must match within
--tolerance (so everything else is exact), the plain HF one within --hf-tolerance, and both
differences are printed.

--mutate WHAT makes a wrong export out of the right one, as a broken exporter would, to show
the comparison catches it: qkv_interleaved (query/key/value cut as three blocks of Megatron's
fused rows, not de-interleaved per head), bias_dropped (no cls.predictions.bias: HF then starts
it at zero), types_swapped (token-type rows exchanged), hidden_act_swapped (the other GeLU in
config.json: "gelu" for "gelu_new" and back).  --mutations tries each in turn and exits 0 only
if every one is caught (some output over tolerance).

Exit status: 0 within tolerance, 1 over, 2 bad input.
"""

import argparse
import importlib.util
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def load_module(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


B_REF = load_module("bert_ref", "bert-ref.py")
G = B_REF.G
BadInput = G.BadInput
MUTATIONS = ("qkv_interleaved", "bias_dropped", "types_swapped", "hidden_act_swapped")


# --- HF's side ---------------------------------------------------------------------------------

def act_fn(name):
    """transformers' ACT2FN for the names an export may carry"""
    if name == "gelu":
        return lambda x: F.gelu(x)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                                     (x + 0.044715 * torch.pow(x, 3.0))))
    raise BadInput(f"hidden_act {name!r} is not one this check knows")


def hf_config(d):
    path = os.path.join(d, "config.json")
    try:
        with open(path) as f:
            c = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: {e}")
    if c.get("model_type") != "megatron-bert":
        raise BadInput(f"{path}: model_type {c.get('model_type')!r}, not 'megatron-bert'")
    arch = (c.get("architectures") or [None])[0]
    if arch not in ("MegatronBertForPreTraining", "MegatronBertForMaskedLM"):
        raise BadInput(f"{path}: architectures {c.get('architectures')!r}")
    # MegatronBertConfig's defaults where the file is silent
    d_ = dict(vocab_size=29056, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
              intermediate_size=4096, hidden_act="gelu", max_position_embeddings=512,
              type_vocab_size=2, layer_norm_eps=1e-12, tie_word_embeddings=True,
              position_embedding_type="absolute")
    d_.update(c)
    if d_["position_embedding_type"] != "absolute":
        raise BadInput(f"{path}: position_embedding_type {d_['position_embedding_type']!r}")
    d_["arch"] = arch
    return d_


def hf_weights(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = ["model.safetensors"]
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for fn in files:
        t, meta = G.st_read(os.path.join(d, fn))
        if meta.get("format") != "pt":
            raise BadInput(f"{d}/{fn}: metadata format {meta.get('format')!r}: from_pretrained "
                           "wants 'pt'")
        w.update(t)
    return w


def hf_expected(c):
    """{name: shape} of the class's state dict, the tied decoder left out"""
    C, I, V, L = (c["hidden_size"], c["intermediate_size"], c["vocab_size"],
                  c["num_hidden_layers"])
    e = {"bert.embeddings.word_embeddings.weight": (V, C),
         "bert.embeddings.position_embeddings.weight": (c["max_position_embeddings"], C),
         "bert.embeddings.token_type_embeddings.weight": (c["type_vocab_size"], C),
         "bert.encoder.ln.weight": (C,), "bert.encoder.ln.bias": (C,),
         "cls.predictions.transform.dense.weight": (C, C),
         "cls.predictions.transform.dense.bias": (C,),
         "cls.predictions.transform.LayerNorm.weight": (C,),
         "cls.predictions.transform.LayerNorm.bias": (C,), "cls.predictions.bias": (V,)}
    for i in range(L):
        p = f"bert.encoder.layer.{i}."
        for n, s in (("attention.ln.weight", (C,)), ("attention.ln.bias", (C,)),
                     ("attention.self.query.weight", (C, C)), ("attention.self.query.bias", (C,)),
                     ("attention.self.key.weight", (C, C)), ("attention.self.key.bias", (C,)),
                     ("attention.self.value.weight", (C, C)), ("attention.self.value.bias", (C,)),
                     ("attention.output.dense.weight", (C, C)),
                     ("attention.output.dense.bias", (C,)), ("ln.weight", (C,)),
                     ("ln.bias", (C,)), ("intermediate.dense.weight", (I, C)),
                     ("intermediate.dense.bias", (I,)), ("output.dense.weight", (C, I)),
                     ("output.dense.bias", (C,))):
            e[p + n] = s
    if c["arch"] == "MegatronBertForPreTraining":
        e.update({"bert.pooler.dense.weight": (C, C), "bert.pooler.dense.bias": (C,),
                  "cls.seq_relationship.weight": (2, C), "cls.seq_relationship.bias": (2,)})
    return e


def hf_load(d):
    c = hf_config(d)
    w = hf_weights(d)
    want = hf_expected(c)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    missing = sorted(set(want) - set(w))
    extra = sorted(set(w) - set(want) - tied)
    if missing:
        raise BadInput(f"{d}: missing weights (HF would initialise them at random): {missing[:4]}")
    if extra:
        raise BadInput(f"{d}: weights the class does not have: {extra[:4]}")
    for n, s in want.items():
        if tuple(w[n].shape) != s:
            raise BadInput(f"{d}: {n} has shape {list(w[n].shape)}, the config says {list(s)}")
    if not c["tie_word_embeddings"]:
        raise BadInput(f"{d}: tie_word_embeddings is false: the export ties the decoder")
    return c, {n: torch.tensor(np.asarray(w[n], dtype=np.float64)) for n in want}


def hf_forward(c, W, ids, types, attn_mask, acts=None):
    """MegatronBertForPreTraining.forward (eval: no dropout) -> prediction, seq_relationship.
    acts: (MLP GeLU, LM head GeLU) in place of config.hidden_act's (the "hf+train" run)"""
    C, NH, eps = c["hidden_size"], c["num_attention_heads"], c["layer_norm_eps"]
    act, hact = acts or (act_fn(c["hidden_act"]),) * 2
    hd = C // NH
    B, T = ids.shape
    lin = lambda x, n: x @ W[n + ".weight"].T + W[n + ".bias"]
    ln = lambda x, n: F.layer_norm(x, (C,), W[n + ".weight"], W[n + ".bias"], eps)
    h = (W["bert.embeddings.word_embeddings.weight"][ids] +
         W["bert.embeddings.token_type_embeddings.weight"][types] +
         W["bert.embeddings.position_embeddings.weight"][torch.arange(T)][None])
    ext = (1.0 - attn_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
    split = lambda x: x.view(B, T, NH, hd).permute(0, 2, 1, 3)
    for i in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        x = ln(h, p + "attention.ln")
        q, k, v = (split(lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        s = q @ k.transpose(-1, -2) / math.sqrt(hd) + ext
        ctx = (torch.softmax(s, dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        h = h + lin(ctx, p + "attention.output.dense")
        x = ln(h, p + "ln")
        h = h + lin(act(lin(x, p + "intermediate.dense")), p + "output.dense")
    h = ln(h, "bert.encoder.ln")
    x = ln(hact(lin(h, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    pred = x @ W["bert.embeddings.word_embeddings.weight"].T + W["cls.predictions.bias"]
    sop = None
    if c["arch"] == "MegatronBertForPreTraining":
        pooled = torch.tanh(lin(h[:, 0], "bert.pooler.dense"))
        sop = lin(pooled, "cls.seq_relationship")
    return pred, sop


def mutate(c, W, what):
    C, NH = c["hidden_size"], c["num_attention_heads"]
    hd = C // NH
    if what == "qkv_interleaved":
        for i in range(c["num_hidden_layers"]):
            p = f"bert.encoder.layer.{i}.attention.self."
            for part in ("weight", "bias"):
                q, k, v = (W[p + n + "." + part] for n in ("query", "key", "value"))
                rest = q.shape[1:]
                fused = torch.stack([t.reshape(NH, hd, *rest) for t in (q, k, v)], 1)
                fused = fused.reshape(3 * C, *rest)   # Megatron's [heads, 3, hd] rows
                for j, n in enumerate(("query", "key", "value")):
                    W[p + n + "." + part] = fused[j * C:(j + 1) * C].clone()
    elif what == "bias_dropped":
        W["cls.predictions.bias"] = torch.zeros_like(W["cls.predictions.bias"])
    elif what == "types_swapped":
        W["bert.embeddings.token_type_embeddings.weight"] = \
            W["bert.embeddings.token_type_embeddings.weight"].flip(0).clone()
    elif what == "hidden_act_swapped":
        c["hidden_act"] = "gelu_new" if c["hidden_act"] == "gelu" else "gelu"


# --- the checkpoint's side ---------------------------------------------------------------------

def ckpt_forward(step, ids, types, pad):
    with open(os.path.join(step, "manifest.json")) as f:
        man = json.load(f)
    if man["layout"]["tp"] != 1 or man["layout"]["pp"] != 1:
        raise BadInput(f"{step}: TP={man['layout']['tp']} PP={man['layout']['pp']}: merge it first")
    mo = man["model"]
    if mo.get("model_type") != "bert":
        raise BadInput(f"{step}: not a BERT checkpoint")
    cfg = {k: mo[k] for k in ("num_layers", "hidden_size", "num_attention_heads",
                              "num_tokentypes", "binary_head", "layernorm_epsilon")}
    cfg["openai_gelu"] = bool(mo.get("openai_gelu", False))
    cfg["apply_residual_connection_post_layernorm"] = \
        bool(mo.get("apply_residual_connection_post_layernorm", False))
    w, _ = G.st_read(os.path.join(step, "rank_tp00_pp000.safetensors"))
    P = {n: torch.tensor(np.asarray(a, dtype=np.float64)) for n, a in w.items()
         if not n.startswith("exp_avg")}
    bt = {"tokens": ids, "types": types, "padding_mask": pad}
    with torch.no_grad():
        lm, sop = B_REF.forward(P, cfg, bt)
    return lm[..., :mo["vocab_size"]], sop, cfg


def batch(c, seed, B):
    """[CLS] a.. [SEP] b.. [SEP] [PAD].. as BertDataset lays a sample out; lengths vary"""
    rng = np.random.default_rng(seed)
    T, V, K = c["max_position_embeddings"], c["vocab_size"], c["type_vocab_size"]
    ids = rng.integers(5, V, (B, T))
    types = np.zeros((B, T), dtype=np.int64)
    pad = np.zeros((B, T), dtype=np.int64)
    for b in range(B):
        n = T if b == 0 else int(rng.integers(T // 3, T))
        cut = int(rng.integers(1, n - 1))
        ids[b, 0] = 2
        pad[b, :n] = 1
        if K > 1:
            types[b, cut:n] = 1
        ids[b, n:] = 0
    return torch.tensor(ids), torch.tensor(types), torch.tensor(pad)


def main(argv):
    ap = argparse.ArgumentParser(prog="hf-megatron-bert.py", description=__doc__.split("\n")[0])
    ap.add_argument("--hf", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--batch-size", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=1e-6)
    ap.add_argument("--hf-tolerance", type=float, default=1e-6)
    ap.add_argument("--mutate", choices=MUTATIONS)
    ap.add_argument("--mutations", metavar="WHAT,...")
    a = ap.parse_args(argv)
    if a.mutations:
        muts = [m for m in a.mutations.split(",") if m]
        bad = [m for m in muts if m not in MUTATIONS]
        if bad or a.mutate:
            ap.error(f"--mutations: {bad[0]!r} is not one of {','.join(MUTATIONS)}" if bad
                     else "--mutate or --mutations, not both")
        caught = 0
        for m in muts:
            ok = compare(a, m, quiet=True)
            caught += not ok
            print(f"mutation {m}: " + ("NOT caught: every output within tolerance" if ok
                                       else "caught"))
        return 0 if caught == len(muts) else 1
    return 0 if compare(a, a.mutate) else 1


def compare(a, what, quiet=False):
    """the two forwards, printed; True when within tolerance"""
    c, W = hf_load(a.hf)
    if what:
        mutate(c, W, what)
    ids, types, pad = batch(c, a.seed, a.batch_size)
    want_lm, want_sop, cfg = ckpt_forward(a.ckpt, ids, types, pad)
    if (want_sop is None) != (c["arch"] == "MegatronBertForMaskedLM"):
        raise BadInput(f"{a.hf}: {c['arch']} for a model with{'' if want_sop is not None else 'out'}"
                       " the binary head")
    real = pad.bool()
    # train's GeLUs: the MLP's tanh (Megatron's fused bias-gelu), the LM head's erf or tanh
    trained = (B_REF.G.gelu_tanh, B_REF.G.gelu_tanh if cfg["openai_gelu"] else B_REF.gelu_erf)
    x = torch.tensor([1.5], dtype=torch.float64)
    if all(act_fn(c["hidden_act"])(x) == f(x) for f in trained):
        runs = [("hf", None, min(a.tolerance, a.hf_tolerance))]
    else:
        runs = [("hf", None, a.hf_tolerance), ("hf+train", trained, a.tolerance)]
    ok = True
    with torch.no_grad():
        for label, head, tol in runs:
            lm, sop = hf_forward(c, W, ids, types, pad, head)
            if lm.shape != want_lm.shape:
                raise BadInput(f"prediction_logits {list(lm.shape)}, the checkpoint's "
                               f"{list(want_lm.shape)}")
            d = (lm - want_lm)[real].abs().max().item()
            rel = d / want_lm[real].abs().max().item()
            good = d <= tol
            if not quiet:
                print(f"{label:8s} prediction_logits        maxdiff {d:.3e} (relative {rel:.1e}, "
                      f"tolerance {tol:.0e}) {'ok' if good else 'OVER'}")
            ok &= good
            if sop is not None:
                d = (sop - want_sop).abs().max().item()
                good = d <= tol
                if not quiet:
                    print(f"{label:8s} seq_relationship_logits  maxdiff {d:.3e} "
                          f"(tolerance {tol:.0e}) {'ok' if good else 'OVER'}")
                ok &= good
    if not quiet:
        print("within tolerance" if ok else "OVER tolerance")
    return ok


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"hf-megatron-bert: {e}", file=sys.stderr)
        sys.exit(2)
