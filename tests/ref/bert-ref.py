#!/usr/bin/python3
"""PyTorch numerical reference for lmtk's BERT (Megatron-LM's BertModel, 2021-22).

    tests/ref/bert-ref.py --config CFG.json --weights INIT.safetensors --batch BATCH.safetensors
                          [--write OUT.safetensors] [--compare C.safetensors]
                          [--tolerance fp32|bf16] [--tol GROUP=LIMIT ...] [--only GROUP,...]
                          [--mutate WHAT]

Run it with Debian's /usr/bin/python3 (torch + numpy).  The file format, the optimizers (AdamW as
apex FusedAdam, LAMB as apex FusedLAMB, SGD), Megatron's gradient clipping and the comparison
with its tolerance profiles are tests/ref/gpt-ref.py's, imported from it; the model is written
here from Megatron-LM's megatron/model/bert_model.py, language_model.py and transformer.py and
pretrain_bert.py's loss, nothing of it from the C side.  Shapes B, T, C, NH, HD = C/NH, F, V,
Vp as gpt-ref.py's; K token types:

    h      = wte[tokens] + wpe[0..T-1] + tte[types]            Embedding (no layer norm)
    mask   = (pad[:, None, :] * pad[:, :, None]) < 0.5          bert_extended_attention_mask:
                                                                 (B,T,T), True where query i or
                                                                 key j is padding
    per layer, pre-LN (post-LN residual with apply_residual_connection_post_layernorm):
      qkv  = LN1(h) @ Wqkv.T + b   [NH, 3, HD] grouped
      s    = q.k / sqrt(HD), masked_fill(mask, -10000) (FusedScaleMaskSoftmax), softmax over
             ALL keys - bidirectional; a padded query's row is all -10000: uniform
      h    = h + (s @ v) @ Wo.T + bo;  h = h + gelu_tanh(LN2(h) @ W1.T + b1) @ W2.T + b2
    h      = LN_f(h)
    lm     = LN_h(gelu(h @ Wd.T + bd)) @ wte.T + lm_bias       BertLMHead; gelu is torch's erf
                                                                 GeLU, the tanh one with
                                                                 "openai_gelu"
    pooled = tanh(h[:, 0] @ Wp.T + bp)                          Pooler (only with the binary head)
    sop    = pooled @ Wb.T + bb                                 binary head (B,2)
    lm loss  = sum(CE(lm[..., :V], labels) * loss_mask) / sum(loss_mask)   (labels -1 where
               loss_mask is 0; padded vocab columns outside the softmax, lmtk's choice as
               gpt-ref.py's)
    sop loss = mean over B of CE(sop, is_random)
    loss     = lm loss + sop loss (lm loss alone without the binary head)
Weight decay as Megatron's _get_params_for_weight_decay_optimization: every parameter but
biases (lm_head.bias included) and LayerNorm's.

Config (JSON): gpt-ref.py's keys (position_embedding_type must be "learned", embed_layernorm
false) plus num_tokentypes (int >= 0), binary_head (bool), openai_gelu (bool, default false).
Weights: gpt-ref.py's with tokentype_embeddings.weight [K,C] (K > 0), pooler.dense.{weight [C,C],
bias [C]} and binary_head.{weight [2,C], bias [2]} (binary head), lm_head.dense.{weight [C,C],
bias [C]}, lm_head.layernorm.{weight,bias} [C], lm_head.bias [Vp].
Batch: tokens, types, labels, loss_mask, padding_mask I32 [S,B,T]; is_random I32 [S,B].
Items (as gpt-ref.py's, batch 0 at the initial weights unless noted): logits [B,T,Vp] (compared
at real positions only: at padded ones lmtk's attention differs from Megatron's without
changing any loss or gradient, see src/train/model/bert.c; both sides are zeroed there),
loss, lm_loss, sop_loss [1], grad.NAME, losses, lm_losses, sop_losses, grad_norms [S],
final.NAME.

--mutate WHAT computes a deliberately WRONG reference, to show that the comparison catches the
mistake; --mutations A,B,... tries each in turn (on the --only groups) and exits 0 only if every
one of them is caught (some item over tolerance).  The mutations: causal (a causal mask on top of the padding mask), no_tokentypes (types ignored),
pooler_linear (no tanh), head_gelu (the other GeLU in the LM head), no_lm_bias (lm_head.bias
left out), padding_ignored (no padding mask), sop_sum (the sop loss summed over the samples).

Tolerances are gpt-ref.py's profiles, lm_loss and sop_loss as loss, the per-step ones as
losses - except that under the bf16 profile the sop loss gets the losses' limit (1e-2) and the
per-step sop losses twice that: it is a mean over the B samples of a 2-way cross-entropy of
bf16 logits (pooled, tanh and the head each rounded to 2^-9), not an average over many tokens
(measured through the CUDA executor: 4.7e-3 and 7e-3).

    tests/ref/bert-ref.py --many FILE
runs each line of FILE, "OUT ARGS...", as its own invocation with its output in OUT and a last
line "exit N" there (one Python start for several comparisons); exits with the worst N.

Exit status: 0 within tolerance (or --write only), 1 over tolerance, 2 bad input.
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

PROG = "bert-ref"
_spec = importlib.util.spec_from_file_location(
    "gpt_ref", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt-ref.py"))
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)
BadInput = G.BadInput

MUTATIONS = ("causal", "no_tokentypes", "pooler_linear", "head_gelu", "no_lm_bias",
             "padding_ignored", "sop_sum")


def config_load(path):
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    except ValueError as e:
        raise BadInput(f"{path}: not JSON: {e}")
    cfg = G.config_check(cfg, path)
    if cfg["position_embedding_type"] != "learned" or cfg["embed_layernorm"]:
        raise BadInput(f"{path}: BERT has learned positions and no embedding layer norm")
    for k, t in (("num_tokentypes", int), ("binary_head", bool), ("openai_gelu", bool)):
        v = cfg.setdefault(k, t(0) if t is int else False)
        if not isinstance(v, t) or (t is int and (isinstance(v, bool) or v < 0)):
            raise BadInput(f"{path}: {k} = {v!r} is not a {t.__name__}")
    return cfg


def param_specs(cfg):
    C, F_, L, K = (cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["num_layers"],
                   cfg["num_tokentypes"])
    ps = [("word_embeddings.weight", (cfg["padded_vocab_size"], C), True),
          ("position_embeddings.weight", (cfg["max_position_embeddings"], C), True)]
    if K:
        ps.append(("tokentype_embeddings.weight", (K, C), True))
    ps += [s for s in G.param_specs(dict(cfg, position_embedding_type="alibi",
                                         embed_layernorm=False))
           if s[0].startswith("layers.") or s[0].startswith("final_layernorm.")]
    if cfg["binary_head"]:
        ps += [("pooler.dense.weight", (C, C), True), ("pooler.dense.bias", (C,), False)]
    ps += [("lm_head.dense.weight", (C, C), True), ("lm_head.dense.bias", (C,), False),
           ("lm_head.layernorm.weight", (C,), False), ("lm_head.layernorm.bias", (C,), False),
           ("lm_head.bias", (cfg["padded_vocab_size"],), False)]
    if cfg["binary_head"]:
        ps += [("binary_head.weight", (2, C), True), ("binary_head.bias", (2,), False)]
    return ps


def weights_check(cfg, tensors, path):
    specs = param_specs(cfg)
    for n, shape, _ in specs:
        if n not in tensors:
            raise BadInput(f"{path}: missing tensor {n}")
        if tuple(tensors[n].shape) != shape:
            raise BadInput(f"{path}: tensor {n} has shape {list(tensors[n].shape)}, "
                           f"config wants {list(shape)}")
    extra = sorted(set(tensors) - {n for n, _, _ in specs})
    if extra:
        raise BadInput(f"{path}: unexpected tensor {extra[0]}")


BATCH = ("tokens", "types", "labels", "loss_mask", "padding_mask")


def batch_check(cfg, b, path):
    for n in BATCH + ("is_random",):
        if n not in b:
            raise BadInput(f"{path}: missing tensor {n}")
        if b[n].dtype.kind not in "iu":
            raise BadInput(f"{path}: tensor {n} is not integer")
    S, B, T = b["tokens"].shape
    for n in BATCH:
        if b[n].shape != (S, B, T):
            raise BadInput(f"{path}: tensor {n} is {list(b[n].shape)}, want {[S, B, T]}")
    if b["is_random"].shape != (S, B):
        raise BadInput(f"{path}: is_random is {list(b['is_random'].shape)}, want {[S, B]}")
    if T > cfg["seq_length"] or T > cfg["max_position_embeddings"]:
        raise BadInput(f"{path}: T = {T} is longer than the config allows")
    if b["tokens"].min() < 0 or b["tokens"].max() >= cfg["padded_vocab_size"]:
        raise BadInput(f"{path}: tokens outside [0, padded_vocab_size)")
    K = max(cfg["num_tokentypes"], 1)
    if b["types"].min() < 0 or b["types"].max() >= K:
        raise BadInput(f"{path}: types outside [0, {K})")
    lab = b["labels"][b["loss_mask"] != 0]
    if lab.size and (lab.min() < 0 or lab.max() >= cfg["vocab_size"]):
        raise BadInput(f"{path}: a loss-masked label outside [0, vocab_size)")
    if not np.all(b["padding_mask"][:, :, 0] == 1):
        raise BadInput(f"{path}: position 0 ([CLS]) must be a real token")
    return {n: torch.from_numpy(np.asarray(b[n], dtype=np.int64)) for n in BATCH + ("is_random",)}


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def attention(x, w, b, nh, mask, rd):
    """x (B,T,C); mask (B,T,T) bool, True = masked (filled with -10000 before the softmax)."""
    B, T, C = x.shape
    hd = C // nh
    qkv = rd(x @ w.T + b).view(B, T, nh, 3, hd)
    q, k, v = (qkv[:, :, :, i].permute(0, 2, 1, 3) for i in range(3))
    s = rd((q @ k.transpose(-1, -2)) / math.sqrt(hd))
    s = s.masked_fill(mask.unsqueeze(1), -10000.0)
    att = rd(torch.softmax(s, dim=-1))
    return rd(att @ v).permute(0, 2, 1, 3).reshape(B, T, C)


def forward(P, cfg, bt, mutate=None, rd=G.no_round, wrd=G.no_round):
    """-> lm logits (B,T,Vp), sop logits (B,2) or None"""
    W = lambda n: wrd(P[n])
    C, eps, NH = cfg["hidden_size"], cfg["layernorm_epsilon"], cfg["num_attention_heads"]
    ln = lambda x, n: rd(F.layer_norm(x, (C,), W(n + ".weight"), W(n + ".bias"), eps))
    tokens, types, pad = bt["tokens"], bt["types"], bt["padding_mask"]
    B, T = tokens.shape
    h = W("word_embeddings.weight")[tokens] + W("position_embeddings.weight")[:T].unsqueeze(0)
    if cfg["num_tokentypes"] and mutate != "no_tokentypes":
        h = h + W("tokentype_embeddings.weight")[types]
    h = rd(h)
    pm = pad.to(h.dtype)
    mask = (pm.unsqueeze(1) * pm.unsqueeze(2)) < 0.5
    if mutate == "padding_ignored":
        mask = torch.zeros(B, T, T, dtype=torch.bool)
    if mutate == "causal":
        mask = mask | torch.ones(T, T, dtype=torch.bool).triu(1)
    post = cfg["apply_residual_connection_post_layernorm"]
    for i in range(cfg["num_layers"]):
        p = f"layers.{i}."
        x = ln(h, p + "input_layernorm")
        y = attention(x, W(p + "attention.query_key_value.weight"),
                      W(p + "attention.query_key_value.bias"), NH, mask, rd)
        h = rd((x if post else h) + rd(y @ W(p + "attention.dense.weight").T +
                                       W(p + "attention.dense.bias")))
        x = ln(h, p + "post_attention_layernorm")
        m = rd(G.gelu_tanh(rd(x @ W(p + "mlp.dense_h_to_4h.weight").T +
                              W(p + "mlp.dense_h_to_4h.bias"))))
        h = rd((x if post else h) + rd(m @ W(p + "mlp.dense_4h_to_h.weight").T +
                                       W(p + "mlp.dense_4h_to_h.bias")))
    h = ln(h, "final_layernorm")
    tanh_gelu = cfg["openai_gelu"] != (mutate == "head_gelu")
    act = G.gelu_tanh if tanh_gelu else gelu_erf
    x = rd(act(rd(h @ W("lm_head.dense.weight").T + W("lm_head.dense.bias"))))
    x = ln(x, "lm_head.layernorm")
    lm = x @ W("word_embeddings.weight").T
    if mutate != "no_lm_bias":
        lm = lm + W("lm_head.bias")
    lm = rd(lm)
    sop = None
    if cfg["binary_head"]:
        pooled = rd(h[:, 0] @ W("pooler.dense.weight").T + W("pooler.dense.bias"))
        if mutate != "pooler_linear":
            pooled = rd(torch.tanh(pooled))
        sop = rd(pooled @ W("binary_head.weight").T + W("binary_head.bias"))
    return lm, sop


def losses_of(lm, sop, cfg, bt, mutate=None):
    V = cfg["vocab_size"]
    lg = lm[..., :V].float() if lm.dtype not in (torch.float32, torch.float64) else lm[..., :V]
    mask = bt["loss_mask"].reshape(-1).to(lg.dtype)
    labels = torch.where(bt["loss_mask"] != 0, bt["labels"], torch.full_like(bt["labels"], -1))
    ce = F.cross_entropy(lg.reshape(-1, V), labels.reshape(-1), ignore_index=-1,
                         reduction="none")
    lm_loss = torch.sum(ce * mask) / mask.sum()
    if sop is None:
        return lm_loss, lm_loss, torch.zeros((), dtype=lm_loss.dtype)
    sop_loss = F.cross_entropy(sop.to(lg.dtype), bt["is_random"],
                               reduction="sum" if mutate == "sop_sum" else "mean")
    return lm_loss + sop_loss, lm_loss, sop_loss


GROUP_OF = {"lm_loss": "loss", "sop_loss": "loss", "lm_losses": "losses",
            "sop_losses": "losses"}


def reference(cfg, weights, batch, dtype="float64", groups=G.GROUPS, mutate=None):
    specs = param_specs(cfg)
    names = [n for n, _, _ in specs]
    decay = [d for _, _, d in specs]
    tdt = torch.float64 if dtype == "float64" else torch.float32
    rd = G.bf16_round if dtype == "bf16" else G.no_round
    params = [torch.tensor(np.asarray(weights[n], dtype=np.float64), dtype=tdt).requires_grad_()
              for n in names]
    P = dict(zip(names, params))
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    optimizer = G.OPTIMIZERS[cfg.get("optimizer", "adam")]
    train = any(g in groups for g in ("losses", "grad_norms", "final"))
    S = batch["tokens"].shape[0] if train else 1
    out, hist = {}, {"losses": [], "lm_losses": [], "sop_losses": []}
    norms = []
    for k in range(S):
        bt = {n: v[k] for n, v in batch.items()}
        lm, sop = forward(P, cfg, bt, mutate, rd, rd)
        loss, lm_loss, sop_loss = losses_of(lm, sop, cfg, bt, mutate)
        grads = list(torch.autograd.grad(loss, params, allow_unused=True))
        grads = [g if g is not None else torch.zeros_like(p) for g, p in zip(grads, params)]
        if k == 0:
            if "logits" in groups:
                lg = lm.detach().to(tdt).clone()
                lg[bt["padding_mask"] == 0] = 0.0
                out["logits"] = lg.numpy()
            if "loss" in groups:
                out["loss"] = np.array([loss.item()])
                out["lm_loss"] = np.array([lm_loss.item()])
                out["sop_loss"] = np.array([sop_loss.item()])
            if "grads" in groups:
                for n, g in zip(names, grads):
                    out["grad." + n] = g.numpy().copy()
        hist["losses"].append(loss.item())
        hist["lm_losses"].append(lm_loss.item())
        hist["sop_losses"].append(sop_loss.item())
        if not train:
            break
        norms.append(G.clip_grads(grads, cfg["clip_grad"]))
        optimizer(params, grads, state, decay, cfg, k + 1, names)
    if "losses" in groups:
        for n, v in hist.items():
            out[n] = np.array(v)
    if "grad_norms" in groups:
        out["grad_norms"] = np.array(norms)
    if "final" in groups:
        for n, p in zip(names, params):
            out["final." + n] = p.detach().numpy().copy()
    npdt = np.float64 if dtype == "float64" else np.float32
    return {n: np.asarray(a, dtype=npdt) for n, a in out.items()}


def mask_logits(c, b):
    """C's logits at real positions only (see the comment at the top)"""
    if "logits" in c:
        c["logits"] = np.array(c["logits"])
        c["logits"][b["padding_mask"][0] == 0] = 0.0
    return c


def main(argv):
    ap = argparse.ArgumentParser(prog="bert-ref.py", description="PyTorch reference for lmtk's "
                                 "BERT (see the comment at the top of this file).")
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--write", metavar="OUT")
    ap.add_argument("--compare", metavar="C")
    ap.add_argument("--tolerance", choices=sorted(G.TOLERANCES), default="fp32")
    ap.add_argument("--tol", action="append", default=[], metavar="GROUP=LIMIT")
    ap.add_argument("--only", help="comma-separated subset of " + ",".join(G.GROUPS))
    ap.add_argument("--dtype", choices=("float64", "float32", "bf16"), default="float64")
    ap.add_argument("--mutate", choices=MUTATIONS)
    ap.add_argument("--mutations", metavar="A,B,...")
    ap.add_argument("--threads", type=int)
    a = ap.parse_args(argv)
    if not a.write and not a.compare:
        ap.error("nothing to do: give --write and/or --compare")
    groups = G.GROUPS
    if a.only:
        groups = tuple(g.strip() for g in a.only.split(",") if g.strip())
        for g in groups:
            if g not in G.GROUPS:
                ap.error(f"--only: unknown group {g!r}")
    tols = dict(G.TOLERANCES[a.tolerance])
    for t in a.tol:
        g, _, v = t.partition("=")
        try:
            if g not in G.GROUPS:
                raise ValueError
            tols[g] = float(v)
        except ValueError:
            ap.error(f"--tol {t!r}: want GROUP=LIMIT with GROUP one of {','.join(G.GROUPS)}")
    for n, g in GROUP_OF.items():
        tols[n] = tols[g]
    if a.tolerance == "bf16":
        tols["sop_loss"] = tols["losses"]
        tols["sop_losses"] = 2 * tols["losses"]
    muts = []
    if a.mutations:
        muts = [m.strip() for m in a.mutations.split(",") if m.strip()]
        for m in muts:
            if m not in MUTATIONS:
                ap.error(f"--mutations: unknown {m!r} (have {','.join(MUTATIONS)})")
        if not a.compare or a.write or a.mutate:
            ap.error("--mutations goes with --compare, without --write or --mutate")
    if a.threads:
        torch.set_num_threads(a.threads)
    cfg = config_load(a.config)
    w, _ = G.st_read(a.weights)
    weights_check(cfg, w, a.weights)
    b, _ = G.st_read(a.batch)
    batch = batch_check(cfg, b, a.batch)
    if muts:
        c, _ = G.st_read(a.compare)
        c = mask_logits(c, b)
        caught = 0
        for m in muts:
            ref = reference(cfg, w, batch, a.dtype, groups, m)
            rows = G.compare_items(ref, {n: v for n, v in c.items() if n in ref}, a.compare,
                                   cfg["vocab_size"], cfg["hidden_size"] //
                                   cfg["num_attention_heads"], tols, w,
                                   cfg["lr"] * batch["tokens"].shape[0])
            bad = [r["name"] for r in rows if not r["ok"]]
            caught += bool(bad)
            print(f"mutation {m}: " + (f"caught, {len(bad)} of {len(rows)} items over "
                                        f"tolerance ({' '.join(bad[:4])}...)" if bad else
                                        "NOT caught: every item within tolerance"))
        return 0 if caught == len(muts) else 1
    ref = reference(cfg, w, batch, a.dtype, groups, a.mutate)
    if a.write:
        G.st_write(a.write, ref, {"producer": "tests/ref/bert-ref.py", "dtype": a.dtype,
                                  "config": json.dumps(cfg, sort_keys=True)})
    if not a.compare:
        return 0
    c, _ = G.st_read(a.compare)
    c = {n: v for n, v in mask_logits(c, b).items() if n in ref}
    rows = G.compare_items(ref, c, a.compare, cfg["vocab_size"],
                           cfg["hidden_size"] // cfg["num_attention_heads"], tols, w,
                           cfg["lr"] * batch["tokens"].shape[0])
    G.PROG = PROG
    return 0 if G.print_rows(rows, a.tolerance) else 1


def run_one(argv):
    try:
        return main(argv)
    except BadInput as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2


def run_many(path):
    """--many FILE: one run per line, "OUT ARGS...": its output (stdout and stderr) goes to OUT,
    followed by a line "exit N" - one Python start for a test's several comparisons."""
    import contextlib
    import shlex
    worst = 0
    for line in open(path):
        words = shlex.split(line)
        if not words:
            continue
        with open(words[0], "w") as out, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out):
            try:
                rc = run_one(words[1:])
            except SystemExit as e:   # argparse
                rc = e.code if isinstance(e.code, int) else 2
            print(f"exit {rc}")
        worst = max(worst, rc)
    return worst


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--many":
        sys.exit(run_many(sys.argv[2]))
    sys.exit(run_one(sys.argv[1:]))
