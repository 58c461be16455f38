#!/usr/bin/python3
"""PyTorch numerical reference for lmtk's T5 (Megatron-LM's T5Model, 2021-22).

    tests/ref/t5-ref.py --config CFG.json --weights INIT.safetensors --batch BATCH.safetensors
                        [--write OUT.safetensors] [--compare C.safetensors]
                        [--tolerance fp32|bf16] [--tol GROUP=LIMIT ...] [--only GROUP,...]
                        [--mutate WHAT | --mutations A,B,...]

Run it with Debian's /usr/bin/python3 (torch + numpy).  The file format, the optimizers (AdamW as
apex FusedAdam, LAMB as apex FusedLAMB, SGD), Megatron's gradient clipping and the comparison
with its tolerance profiles are tests/ref/gpt-ref.py's, imported from it; the model is written
here from Megatron-LM's megatron/model/t5_model.py, language_model.py (add_decoder),
transformer.py (LayerType.decoder, AttnType.cross_attn) and pretrain_t5.py's loss, as of
fabad461 (September 2022), nothing of it from the C side.  Shapes: B samples, Te encoder and Td
decoder positions, C hidden, NH heads, HD = C/NH, F ffn, V vocab, Vp padded vocab, L layers in
each stack (that Megatron has one --num-layers for both):

    emb(ids)   = wte[ids] + wpe[0..T-1]               the one Embedding, for both inputs
                                                       (t5_position_ids: 0..T-1 each)
    enc_mask   = ~(ev_i & ev_j)          (B,Te,Te)    True = masked, as pretrain_t5.py's
    dec_mask   = ~(dv_i & dv_j & j <= i) (B,Td,Td)    get_batch (mask < 0.5) from T5Dataset's
    x_mask     = ~(dv_i & ev_j)          (B,Td,Te)    make_attention_mask (id >= 1 = real)
    attention  scores q.k / sqrt(HD), masked_fill(mask, -10000) (FusedScaleMaskSoftmax),
               softmax over ALL keys (a row with every key masked is uniform), @ v
    encoder layer (pre-LN; residual from the LN's output with the post-LN flag):
      h = h + SelfAttn(LN1(h); qkv [NH,3,HD] grouped, enc_mask) @ Wo.T + bo
      h = h + gelu_tanh(LN2(h) @ W1.T + b1) @ W2.T + b2
    e = encoder.final_layernorm(encoder layers(emb(text_enc)))
    decoder layer:
      h = h + SelfAttn(LN1(h), dec_mask) @ Wo.T + bo
      x = post_attention_layernorm(h)
      h = h + CrossAttn(q = x @ Wq.T + bq [NH,HD], kv = e @ Wkv.T + bkv [NH,2,HD] -> k, v;
                        x_mask) @ Wxo.T + bxo                        Megatron's inter_attention
      h = h + gelu_tanh(post_inter_attention_layernorm(h) @ W1.T + b1) @ W2.T + b2
    d = decoder.final_layernorm(decoder layers(emb(text_dec)))
    logits = d @ wte.T + lm_head.bias                                T5LMHead
    loss   = sum(CE(logits[..., :V], labels) * loss_mask) / sum(loss_mask)   pretrain_t5.py's
             loss_func, "lm loss" (padded vocab columns outside the softmax: lmtk's choice,
             as gpt-ref.py's)
Weight decay as Megatron's _get_params_for_weight_decay_optimization: every parameter but
biases (lm_head.bias included) and LayerNorm's.

Config (JSON): gpt-ref.py's keys (position_embedding_type must be "learned", embed_layernorm
false; seq_length is ignored) plus encoder_seq_length and decoder_seq_length.
Weights: word_embeddings.weight [Vp,C], position_embeddings.weight [P,C];
encoder.layers.{i}.<gpt-ref.py's twelve layer tensors>; encoder.final_layernorm.{weight,bias};
decoder.layers.{i}.<the same twelve> and inter_attention.query.{weight [C,C], bias [C]},
inter_attention.key_value.{weight [2C,C], bias [2C]}, inter_attention.dense.{weight [C,C],
bias [C]}, post_inter_attention_layernorm.{weight,bias} [C]; decoder.final_layernorm.*;
lm_head.bias [Vp].
Batch: text_enc, enc_valid I32 [S,B,Te]; text_dec, labels, loss_mask, dec_valid I32 [S,B,Td].
Items (as gpt-ref.py's, batch 0 at the initial weights unless noted): logits [B,Td,Vp]
(compared at real decoder positions only: at padded ones lmtk's attention differs from
Megatron's without changing the loss or any gradient, see src/train/model/t5.c; both sides are
zeroed there), loss [1], grad.NAME, losses, grad_norms [S], final.NAME.  The k rows of every
key_value.bias have an exactly-zero gradient (a constant added to every key of a query's row
shifts its scores equally), as query_key_value.bias's k rows: "final.*key_value.bias" is
checked on its v rows, "final.*key_value.bias[k]" against |diff| <= 2*lr*S.

--mutate WHAT computes a deliberately WRONG reference, to show that the comparison catches the
mistake; --mutations A,B,... tries each in turn (on the --only groups) and exits 0 only if every
one of them is caught.  The mutations: cross_mask_ignored (the cross-attention sees every
encoder position, padding too), decoder_not_causal (the decoder's self-attention sees its
later positions), encoder_causal (a causal mask on the encoder), positions_continued (the
decoder's positions continue after the encoder's, Te..Te+Td-1, as if one sequence: the table
needs Te+Td rows), decoder_no_positions (the decoder's input without position embeddings),
kv_swapped (key_value's rows read as [NH, v|k, HD]), no_lm_bias (lm_head.bias left out).

    tests/ref/t5-ref.py --many FILE
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

PROG = "t5-ref"
_spec = importlib.util.spec_from_file_location(
    "gpt_ref", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt-ref.py"))
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)
BadInput = G.BadInput

MUTATIONS = ("cross_mask_ignored", "decoder_not_causal", "encoder_causal", "positions_continued",
             "decoder_no_positions", "kv_swapped", "no_lm_bias")


def config_load(path):
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    except ValueError as e:
        raise BadInput(f"{path}: not JSON: {e}")
    cfg.setdefault("seq_length", cfg.get("encoder_seq_length", 1))
    cfg = G.config_check(cfg, path)
    if cfg["position_embedding_type"] != "learned" or cfg["embed_layernorm"]:
        raise BadInput(f"{path}: T5 has learned positions and no embedding layer norm")
    for k in ("encoder_seq_length", "decoder_seq_length"):
        v = cfg.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise BadInput(f"{path}: {k} = {v!r} is not a positive int")
        if v > cfg["max_position_embeddings"]:
            raise BadInput(f"{path}: {k} {v} > max_position_embeddings")
    return cfg


LAYER = ("input_layernorm.weight", "input_layernorm.bias",
         "attention.query_key_value.weight", "attention.query_key_value.bias",
         "attention.dense.weight", "attention.dense.bias",
         "post_attention_layernorm.weight", "post_attention_layernorm.bias",
         "mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.bias",
         "mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.bias")
CROSS = ("inter_attention.query.weight", "inter_attention.query.bias",
         "inter_attention.key_value.weight", "inter_attention.key_value.bias",
         "inter_attention.dense.weight", "inter_attention.dense.bias",
         "post_inter_attention_layernorm.weight", "post_inter_attention_layernorm.bias")


def param_specs(cfg):
    """[(name, shape, weight_decay?)] in the table's order"""
    C, F_, L = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["num_layers"]
    shape = {"query_key_value.weight": (3 * C, C), "query_key_value.bias": (3 * C,),
             "h_to_4h.weight": (F_, C), "h_to_4h.bias": (F_,), "4h_to_h.weight": (C, F_),
             "query.weight": (C, C), "query.bias": (C,), "key_value.weight": (2 * C, C),
             "key_value.bias": (2 * C,), "dense.weight": (C, C)}

    def spec(n):
        for suf, s in shape.items():
            if n.endswith(suf):
                return s
        return (C,)

    def decays(n):
        return n.endswith(".weight") and "layernorm" not in n

    ps = [("word_embeddings.weight", (cfg["padded_vocab_size"], C), True),
          ("position_embeddings.weight", (cfg["max_position_embeddings"], C), True)]
    for stack, names in (("encoder", LAYER), ("decoder", LAYER + CROSS)):
        for i in range(L):
            ps += [(f"{stack}.layers.{i}.{n}", spec(n), decays(n)) for n in names]
        ps += [(f"{stack}.final_layernorm.weight", (C,), False),
               (f"{stack}.final_layernorm.bias", (C,), False)]
    ps.append(("lm_head.bias", (cfg["padded_vocab_size"],), False))
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


ENC = ("text_enc", "enc_valid")
DEC = ("text_dec", "labels", "loss_mask", "dec_valid")


def batch_check(cfg, b, path):
    for n in ENC + DEC:
        if n not in b:
            raise BadInput(f"{path}: missing tensor {n}")
        if b[n].dtype.kind not in "iu":
            raise BadInput(f"{path}: tensor {n} is not integer")
    S, B, Te = b["text_enc"].shape
    Td = b["text_dec"].shape[2]
    for n in ENC:
        if b[n].shape != (S, B, Te):
            raise BadInput(f"{path}: tensor {n} is {list(b[n].shape)}, want {[S, B, Te]}")
    for n in DEC:
        if b[n].shape != (S, B, Td):
            raise BadInput(f"{path}: tensor {n} is {list(b[n].shape)}, want {[S, B, Td]}")
    if Te != cfg["encoder_seq_length"] or Td != cfg["decoder_seq_length"]:
        raise BadInput(f"{path}: lengths {Te}, {Td} are not the config's")
    for n in ("text_enc", "text_dec"):
        if b[n].min() < 0 or b[n].max() >= cfg["padded_vocab_size"]:
            raise BadInput(f"{path}: {n} outside [0, padded_vocab_size)")
    lab = b["labels"][b["loss_mask"] != 0]
    if lab.size and (lab.min() < 0 or lab.max() >= cfg["vocab_size"]):
        raise BadInput(f"{path}: a loss-masked label outside [0, vocab_size)")
    return {n: torch.from_numpy(np.asarray(b[n], dtype=np.int64)) for n in ENC + DEC}


def attend(q, k, v, mask, rd):
    """q (B,NH,Tq,HD), k, v (B,NH,Tk,HD); mask (B,Tq,Tk) bool, True = masked"""
    hd = q.shape[-1]
    s = rd((q @ k.transpose(-1, -2)) / math.sqrt(hd))
    s = s.masked_fill(mask.unsqueeze(1), -10000.0)
    att = rd(torch.softmax(s, dim=-1))
    B, NH, Tq, _ = q.shape
    return rd(att @ v).permute(0, 2, 1, 3).reshape(B, Tq, NH * hd)


def self_attention(x, w, b, nh, mask, rd):
    B, T, C = x.shape
    qkv = rd(x @ w.T + b).view(B, T, nh, 3, C // nh)
    q, k, v = (qkv[:, :, :, i].permute(0, 2, 1, 3) for i in range(3))
    return attend(q, k, v, mask, rd)


def cross_attention(x, e, W, p, nh, mask, rd, mutate):
    B, Tq, C = x.shape
    Tk = e.shape[1]
    q = rd(x @ W(p + "query.weight").T + W(p + "query.bias")).view(B, Tq, nh, C // nh)
    kv = rd(e @ W(p + "key_value.weight").T + W(p + "key_value.bias")).view(B, Tk, nh, 2, C // nh)
    ki, vi = (1, 0) if mutate == "kv_swapped" else (0, 1)
    k, v = kv[:, :, :, ki].permute(0, 2, 1, 3), kv[:, :, :, vi].permute(0, 2, 1, 3)
    return attend(q.permute(0, 2, 1, 3), k, v, mask, rd)


def forward(P, cfg, bt, mutate=None, rd=G.no_round, wrd=G.no_round):
    """-> logits (B,Td,Vp)"""
    W = lambda n: wrd(P[n])
    C, eps, NH = cfg["hidden_size"], cfg["layernorm_epsilon"], cfg["num_attention_heads"]
    ln = lambda x, n: rd(F.layer_norm(x, (C,), W(n + ".weight"), W(n + ".bias"), eps))
    post = cfg["apply_residual_connection_post_layernorm"]
    enc, dec = bt["text_enc"], bt["text_dec"]
    ev, dv = bt["enc_valid"] != 0, bt["dec_valid"] != 0
    B, Te = enc.shape
    Td = dec.shape[1]
    wte, wpe = W("word_embeddings.weight"), W("position_embeddings.weight")
    enc_mask = ~(ev.unsqueeze(2) & ev.unsqueeze(1))
    causal = torch.ones(Td, Td, dtype=torch.bool).tril()
    dec_ok = dv.unsqueeze(2) & dv.unsqueeze(1)
    dec_mask = ~(dec_ok if mutate == "decoder_not_causal" else dec_ok & causal)
    x_mask = ~(dv.unsqueeze(2) & ev.unsqueeze(1))
    if mutate == "cross_mask_ignored":
        x_mask = torch.zeros(B, Td, Te, dtype=torch.bool)
    if mutate == "encoder_causal":
        enc_mask = enc_mask | torch.ones(Te, Te, dtype=torch.bool).triu(1)

    def mlp(h, x, p):
        m = rd(G.gelu_tanh(rd(x @ W(p + "mlp.dense_h_to_4h.weight").T +
                              W(p + "mlp.dense_h_to_4h.bias"))))
        return rd((x if post else h) + rd(m @ W(p + "mlp.dense_4h_to_h.weight").T +
                                          W(p + "mlp.dense_4h_to_h.bias")))

    def self_block(h, p, mask):
        x = ln(h, p + "input_layernorm")
        y = self_attention(x, W(p + "attention.query_key_value.weight"),
                           W(p + "attention.query_key_value.bias"), NH, mask, rd)
        return rd((x if post else h) + rd(y @ W(p + "attention.dense.weight").T +
                                          W(p + "attention.dense.bias")))

    h = rd(wte[enc] + wpe[:Te].unsqueeze(0))
    for i in range(cfg["num_layers"]):
        p = f"encoder.layers.{i}."
        h = self_block(h, p, enc_mask)
        h = mlp(h, ln(h, p + "post_attention_layernorm"), p)
    e = ln(h, "encoder.final_layernorm")

    h = wte[dec]
    if mutate == "positions_continued":
        h = h + wpe[Te:Te + Td].unsqueeze(0)
    elif mutate != "decoder_no_positions":
        h = h + wpe[:Td].unsqueeze(0)
    h = rd(h)
    for i in range(cfg["num_layers"]):
        p = f"decoder.layers.{i}."
        h = self_block(h, p, dec_mask)
        x = ln(h, p + "post_attention_layernorm")
        y = cross_attention(x, e, W, p + "inter_attention.", NH, x_mask, rd, mutate)
        h = rd((x if post else h) + rd(y @ W(p + "inter_attention.dense.weight").T +
                                       W(p + "inter_attention.dense.bias")))
        h = mlp(h, ln(h, p + "post_inter_attention_layernorm"), p)
    d = ln(h, "decoder.final_layernorm")
    lm = d @ wte.T
    if mutate != "no_lm_bias":
        lm = lm + W("lm_head.bias")
    return rd(lm)


def loss_of(lm, cfg, bt):
    V = cfg["vocab_size"]
    lg = lm[..., :V].float() if lm.dtype not in (torch.float32, torch.float64) else lm[..., :V]
    mask = bt["loss_mask"].reshape(-1).to(lg.dtype)
    labels = torch.where(bt["loss_mask"] != 0, bt["labels"], torch.full_like(bt["labels"], -1))
    ce = F.cross_entropy(lg.reshape(-1, V), labels.reshape(-1), ignore_index=-1,
                         reduction="none")
    return torch.sum(ce * mask) / mask.sum()


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
    S = batch["text_enc"].shape[0] if train else 1
    out, losses, norms = {}, [], []
    for k in range(S):
        bt = {n: v[k] for n, v in batch.items()}
        lm = forward(P, cfg, bt, mutate, rd, rd)
        loss = loss_of(lm, cfg, bt)
        grads = list(torch.autograd.grad(loss, params, allow_unused=True))
        grads = [g if g is not None else torch.zeros_like(p) for g, p in zip(grads, params)]
        if k == 0:
            if "logits" in groups:
                lg = lm.detach().to(tdt).clone()
                lg[bt["dec_valid"] == 0] = 0.0
                out["logits"] = lg.numpy()
            if "loss" in groups:
                out["loss"] = np.array([loss.item()])
            if "grads" in groups:
                for n, g in zip(names, grads):
                    out["grad." + n] = g.numpy().copy()
        losses.append(loss.item())
        if not train:
            break
        norms.append(G.clip_grads(grads, cfg["clip_grad"]))
        optimizer(params, grads, state, decay, cfg, k + 1, names)
    if "losses" in groups:
        out["losses"] = np.array(losses)
    if "grad_norms" in groups:
        out["grad_norms"] = np.array(norms)
    if "final" in groups:
        for n, p in zip(names, params):
            out["final." + n] = p.detach().numpy().copy()
    npdt = np.float64 if dtype == "float64" else np.float32
    return {n: np.asarray(a, dtype=npdt) for n, a in out.items()}


def compare(ref, c, c_path, cfg, tols, init, lr_steps):
    """gpt-ref.py's compare_items, but the final key_value.bias checked as its v rows, its k
    rows (no gradient, see the top) against 2 lr S"""
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    kvb = [n for n in ref if n.startswith("final.") and n.endswith("key_value.bias")
           and not n.endswith("query_key_value.bias")]
    rows = G.compare_items({n: v for n, v in ref.items() if n not in kvb},
                           {n: v for n, v in c.items() if n not in kvb}, c_path,
                           cfg["vocab_size"], hd, tols, init, lr_steps)
    for n in kvb:
        if n not in c:
            raise BadInput(f"{c_path}: missing tensor {n}")
        k = (np.arange(ref[n].shape[0]) // hd) % 2 == 0
        r0 = np.asarray(init[n[len("final."):]], np.float64)
        sub = G.compare_items({n: ref[n][~k]}, {n: np.asarray(c[n])[~k]}, c_path,
                              cfg["vocab_size"], hd, tols, {n[len("final."):]: r0[~k]}, lr_steps)
        kr = G.compare_items({"k": ref[n][k]}, {"k": np.asarray(c[n])[k]}, c_path,
                             cfg["vocab_size"], hd, dict(tols, k=2.0 * lr_steps))
        kr[0].update(name=n + "[k]", crit="abs", value=kr[0]["maxdiff"])
        kr[0]["ok"] = kr[0]["value"] <= kr[0]["limit"]
        rows += sub + kr
    return rows


def mask_logits(c, b):
    """C's logits at real decoder positions only (see the comment at the top)"""
    if "logits" in c:
        c["logits"] = np.array(c["logits"])
        c["logits"][b["dec_valid"][0] == 0] = 0.0
    return c


def main(argv):
    ap = argparse.ArgumentParser(prog="t5-ref.py", description="PyTorch reference for lmtk's "
                                 "T5 (see the comment at the top of this file).")
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
    if "positions_continued" in muts + [a.mutate] and \
            cfg["max_position_embeddings"] < cfg["encoder_seq_length"] + cfg["decoder_seq_length"]:
        raise BadInput("positions_continued needs max_position_embeddings >= the two lengths")
    lr_steps = cfg["lr"] * batch["text_enc"].shape[0]
    if muts:
        c, _ = G.st_read(a.compare)
        c = mask_logits(c, b)
        caught = 0
        for m in muts:
            ref = reference(cfg, w, batch, a.dtype, groups, m)
            rows = compare(ref, {n: v for n, v in c.items() if n in ref}, a.compare, cfg, tols,
                           w, lr_steps)
            bad = [r["name"] for r in rows if not r["ok"]]
            caught += bool(bad)
            print(f"mutation {m}: " + (f"caught, {len(bad)} of {len(rows)} items over "
                                        f"tolerance ({' '.join(bad[:4])}...)" if bad else
                                        "NOT caught: every item within tolerance"))
        return 0 if caught == len(muts) else 1
    ref = reference(cfg, w, batch, a.dtype, groups, a.mutate)
    if a.write:
        G.st_write(a.write, ref, {"producer": "tests/ref/t5-ref.py", "dtype": a.dtype,
                                  "config": json.dumps(cfg, sort_keys=True)})
    if not a.compare:
        return 0
    c, _ = G.st_read(a.compare)
    c = {n: v for n, v in mask_logits(c, b).items() if n in ref}
    rows = compare(ref, c, a.compare, cfg, tols, w, lr_steps)
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
