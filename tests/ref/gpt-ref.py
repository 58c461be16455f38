#!/usr/bin/python3
"""PyTorch numerical reference for the lmtk GPT/BLOOM trainer (Megatron-DeepSpeed semantics).

    tests/ref/gpt-ref.py --config CFG.json --weights INIT.safetensors --batch BATCH.safetensors
                         [--write OUT.safetensors] [--compare C.safetensors]
                         [--tolerance fp32|bf16|fp16] [--tol GROUP=LIMIT ...] [--only GROUP,...]
                         [--dtype float64|float32|bf16] [--softmax-over-padded] [--threads N]
    tests/ref/gpt-ref.py --ref REF.safetensors [--weights INIT.safetensors] --compare C.safetensors
    tests/ref/gpt-ref.py --config CFG.json --hf HF_DIR --batch BATCH.safetensors [--write ...]
                         [--compare ...] (the same, the weights from a Hugging Face export)
                         [--tolerance ...] [--tol ...] [--only ...]

Run it with Debian's /usr/bin/python3 (torch + numpy); nothing else is needed, in particular no
transformers and no safetensors package: the file format is implemented here (st_read/st_write).

The model is written from shared/spec/megatron-train.md ("Model details", "Tensor-parallel layout"),
shapes B (batch), T (time), C (hidden), NH heads, HD = C/NH, F ffn, V vocab, Vp padded vocab:
    h = wte[tokens]                        (B,T,C)   wte = word_embeddings.weight (Vp,C)
    h = LN(h)                              only with "embed_layernorm" (eps = layernorm_epsilon)
    h = h + wpe[0..T-1]                    only with position_embedding_type "learned"
    per layer (pre-LN):
      qkv = LN1(h) @ Wqkv.T + b            (B,T,3C), features grouped [NH, 3, HD] (Megatron/BLOOM)
      s   = q.k / sqrt(HD) (+ slope_h * j for "alibi", j = key position), causal, softmax
      h   = h + (s @ v merged to (B,T,C) in head order) @ Wo.T + bo
      h   = h + gelu_tanh(LN2(h) @ W1.T + b1) @ W2.T + b2
    logits = LN_f(h) @ wte.T               (B,T,Vp), tied output embedding
    loss   = mean over the B*T tokens of cross-entropy(logits[..., :V], targets)
The padded vocab rows are left out of the softmax (lmtk's choice; Megatron's
vocab_parallel_cross_entropy keeps them: --softmax-over-padded does that). Dropouts must be 0.
Weight names and shapes (Linear weights are [out, in]; "learned"/"embed_layernorm" ones only then):
    word_embeddings.weight [Vp,C]   position_embeddings.weight [max_position_embeddings,C]
    embed_layernorm.{weight,bias} [C]   final_layernorm.{weight,bias} [C]
    layers.{i}.input_layernorm.{weight,bias} [C]   layers.{i}.post_attention_layernorm.* [C]
    layers.{i}.attention.query_key_value.weight [3C,C] .bias [3C]
    layers.{i}.attention.dense.weight [C,C] .bias [C]
    layers.{i}.mlp.dense_h_to_4h.weight [F,C] .bias [F]
    layers.{i}.mlp.dense_4h_to_h.weight [C,F] .bias [C]
Training: step k (k = 0..S-1) uses batch k: forward, backward, global grad norm
sqrt(sum g^2) over all parameters, Megatron's clip_grad_norm_fp32 (coeff = clip_grad/(norm+1e-6),
applied only when < 1; clip_grad <= 0 disables it), then AdamW as apex FusedAdam adam_w_mode
(= torch.optim.AdamW): bias-corrected moments, decoupled weight decay on every weight except
biases and LayerNorm parameters (embeddings are decayed), constant lr.  Or, with "optimizer"
"lamb" / "sgd", apex FusedLAMB / torch SGD (lamb_step, sgd_step).  "embedding_lr_mult" ALPHA:
word_embeddings.weight (the tied output layer too) steps at lr * ALPHA in any of them.
"lamb_layerwise_noise" STD (LAMB): each tensor's update u, after the trust ratio r was taken from
it, becomes u + STD ||u|| / sqrt(numel) z, z ~ N(0,1) from an independent Philox4x32-10 keyed by
"seed", the step and the tensor's name, at each element's row-major index (lamb_noise).

Inputs:
  --config   JSON with num_layers hidden_size num_attention_heads ffn_hidden_size seq_length
             max_position_embeddings vocab_size padded_vocab_size position_embedding_type
             ("learned"|"alibi") embed_layernorm layernorm_epsilon hidden_dropout attention_dropout
             lr adam_beta1 adam_beta2 adam_eps weight_decay clip_grad; optionally optimizer,
             sgd_momentum, embedding_lr_mult, lamb_layerwise_noise, seed (1234) and the
             document-mask keys (other keys are ignored).
  --weights  every tensor above, F32 or BF16 (also F16/F64), upcast; missing/extra ones are errors.
  --batch    "tokens" and "targets", I32 (or I64) [S,B,T]; T <= seq_length; tokens < Vp,
             targets < V.
Output items (--write writes them, --compare checks them; F64 at --dtype float64, else F32):
  logits [B,T,Vp]      batch 0, initial weights
  loss [1]             batch 0, initial weights
  grad.NAME            d loss / d NAME, batch 0, initial weights, before clipping
  losses [S]           loss of batch k before update k
  grad_norms [S]       global grad norm of step k, before clipping
  final.NAME           every parameter after the S updates
  (--write also records vocab_size, padded_vocab_size, steps, dtype and the config in
  __metadata__, which is what --ref reads instead of recomputing.)
--only GROUP,... restricts both to the groups logits, loss, grads, losses, grad_norms, final
(without losses, grad_norms and final only step 0's forward/backward runs).

Comparison: one line per item: name, max |c - ref|, max |ref|, rel = maxdiff / max(maxabs, 1e-30),
the criterion and verdict. "logits" covers [..., :V] and "logits.padded" the padded columns
[..., V:] (defined, as wte's padded rows are real weights, but outside the loss). Items over
tolerance (non-finite values always are) come last, then a summary line naming them. Tensors in C
that the reference does not have are ignored.
The criterion is rel <= limit, except for final.* items, which are checked on the update:
    upd = |c - ref|_2 / |ref - init|_2    (init from --weights)
Adam divides every gradient element by its own running magnitude, so an element whose gradient
is near rounding noise (|g| ~ adam_eps) gets a noisy step of up to ~lr: a max-abs criterion would
fail honest trainers, while a norm over the whole tensor still sees decay/clip/bias-correction bugs.
The k rows of each query_key_value.bias have a gradient that is exactly 0 (a constant added to all
keys shifts every score of a query equally; softmax ignores it), so their trajectory is pure
amplified noise: "final.*query_key_value.bias" is its q and v rows, and the k rows are reported as
"final.*query_key_value.bias[k]" against |diff| <= 2*lr*S, a sanity bound, not an accuracy check.

--dtype: the reference is float64 unless told; float32 is the same model in fp32; bf16 is NOT a
reference but emulates a bf16 trainer (weights, activations and their gradients rounded to bf16 at
op boundaries, so weight grads end up bf16 too; fp32 math inside each op, fp32 softmax, LN and
loss; fp32 master weights and AdamW). `--dtype bf16 --write x` then `--compare x` against the
float64 reference shows where an honest bf16 trainer lands; that sized the bf16 profile.

Tolerances (--tolerance fp32|bf16|fp16; --tol GROUP=LIMIT overrides one group). Worst values seen on 12
tiny models (L=2; C/NH = 64/4, 80/5, 96/12; alibi and learned; embed LN on/off; weight std 0.02..
0.1; V=100, Vp=128, T=16, B=2, S=10, lr 1e-3, clip active on some steps, adam_eps 1e-8 and 1e-6):
                 torch fp32                emulated bf16           fp32 limit  bf16 limit
    logits       5e-7                      1.4e-2 (padded 1.2e-2)  1e-4        5e-2
    loss         1.1e-7                    6e-4                    1e-5        5e-3
    grads        1.1e-6                    2.3e-2                  1e-4        8e-2
    losses       3.8e-7                    7.7e-4                  1e-5        1e-2
    grad_norms   5.6e-7                    2e-3                    1e-4        1e-2
    final (upd)  4e-5; 3.7e-4 at eps 1e-8  7.1e-2                  1e-3        2.5e-1
  fp32: about 100x above torch-fp32-vs-fp64, because a C trainer sums in other orders (sequential
  sums over B*T for weight grads, over C and F in matmuls: the error grows like sqrt(n)..n ulps),
  yet below what real bugs cost. Deliberate bugs on a C=80/NH=5 alibi model with weight std 0.1,
  adam_eps 1e-6 and clipping on half the steps fail by these factors (worst group): [3,NH,HD] qkv
  order 1e4, ALiBi slope exponent off by one 7e3, non-power-of-2 slopes by the naive formula 6e3,
  padded columns in the softmax 2e3, LayerNorm eps 1e-6 for 1e-5 10, erf GeLU for tanh 6, missing
  bias correction 5e3, eps inside the sqrt 3e2, L2 instead of decoupled decay 4e3, decay on every
  parameter 2e2, decay on nothing 30, no decay on embeddings 30, no clipping 80, clipping on
  every step 10, norm reported after clipping 3e3. Losses average B*T tokens, hence 1e-5. Final
  at 1e-3 has 25x margin with adam_eps 1e-6 but under 3x with 1e-8 (elements with |g| near eps
  are where Adam is most sensitive: d step/d g = lr eps/(|g|+eps)^2), so tests should use
  adam_eps >= 1e-6, or --tol final=5e-3. Longer reductions (C, F, B*T in the hundreds or more)
  may need --tol grads=1e-3.
  bf16: bf16 keeps 8 significant bits (unit roundoff 2^-9 = 2e-3); rounding at every op
  boundary gives the 1e-2-ish errors above, and the limits are 3-5x higher (more for the loss
  and losses, which are averages and drift over steps) so that correct trainers pass on other
  seeds and shapes. A reference comparison at bf16 catches gross bugs only (qkv order, ALiBi,
  padded softmax, missing bias correction, L2 decay); the fp32 profile is where semantics are
  proven. Note 2e-2 on logits/grads would fail the emulated trainer itself.
  fp16: bf16's limits divided by 8, fp16's 3 extra significant bits (unit roundoff 2^-12).  The
  CUDA backend under --fp16 (real fp16 activations, fp32 accumulation) on the GPT-2 shape of
  tests/cli/train-cuda.sh: logits 1.4e-3, loss 5.5e-6, grads 1.9e-3, losses 4.2e-5, grad_norms
  1.9e-4, final 7.6e-3, within these by 3.3x or more; its bf16 run fails logits, grads,
  grad_norms and final here (1.0e-2, 1.3e-2, 2.2e-3, 5.5e-2).
Tests should make the effects visible: weights large enough that GeLU and LayerNorm are not in
their linear range (std ~0.1), clip_grad between the steps' grad norms, weight_decay ~0.1.

--hf DIR takes the weights from a Hugging Face model directory (ckpt-merge-tp --format hf: config.json,
model.safetensors or model-0000K-of-0000N.safetensors + model.safetensors.index.json; F32 or BF16)
instead of --weights, and maps them back: GPT2LMHeadModel (transformer.wte/wpe/h.{i}.ln_1/attn.c_attn/
attn.c_proj/ln_2/mlp.c_fc/mlp.c_proj/ln_f) for learned positions without embed_layernorm,
BloomForCausalLM (transformer.word_embeddings(_layernorm)/h.{i}.input_layernorm/self_attention.
query_key_value/self_attention.dense/post_attention_layernorm/mlp.dense_h_to_4h/mlp.dense_4h_to_h/
ln_f) for alibi with embed_layernorm. GPT-2's Conv1D weights [in,out] are transposed back to [out,in]
and c_attn's [3, NH, HD] output order is put back into Megatron's [NH, 3, HD] (weight rows and bias);
BLOOM's tensors are Megatron's as they are. The export has no padded vocabulary rows: they come back
as zeros up to padded_vocab_size, so "logits.padded" is not compared in this mode. config.json must
agree with --config (sizes, vocab_size, the architecture). The point: the logits of an export equal
those of the checkpoint it came from (tests/cli/ckpt-merge-tp.sh).

Exit status: 0 every item within tolerance (or --write only), 1 some item over tolerance, 2 bad
input (usage, missing file or tensor, shape mismatch, malformed safetensors, bad config).

Examples (the C trainer writes c.st with the same item names):
  tests/ref/gpt-ref.py --config c.json --weights init.st --batch b.st --compare c.st
  tests/ref/gpt-ref.py --config c.json --weights init.st --batch b.st --write ref.st
  tests/ref/gpt-ref.py --ref ref.st --weights init.st --compare c.st
  tests/ref/gpt-ref.py --config c.json --weights init.st --batch b.st \\
      --compare c.st --tolerance bf16 --only logits,loss,grads
"""

import argparse
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

PROG = "gpt-ref"


class BadInput(Exception):
    """Anything that makes the run meaningless: exit status 2."""


# --- safetensors -------------------------------------------------------------------------------
# [u64 LE header length N][N bytes JSON header][data]. Header: {name: {"dtype", "shape",
# "data_offsets": [begin, end]}} with offsets relative to the data section, plus an optional
# "__metadata__" {str: str}. Like the reference implementation we require the tensors to tile the
# data section exactly (no overlap, no holes, nothing after the last one).

ST_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "BF16": "<u2", "I32": "<i4", "I64": "<i8"}


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even, the way torch and CUDA do (NaN kept a quiet NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def st_read(path):
    """Returns ({name: ndarray}, metadata); BF16 comes back as float32. Raises BadInput."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    if len(buf) < 8:
        raise BadInput(f"{path}: not a safetensors file (shorter than 8 bytes)")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8:
        raise BadInput(f"{path}: header length {n} runs past the end of the file "
                       f"({len(buf)} bytes)")

    def no_dups(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise BadInput(f"{path}: duplicate key in header")
        return dict(pairs)

    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"), object_pairs_hook=no_dups)
    except (UnicodeDecodeError, ValueError) as e:
        raise BadInput(f"{path}: header is not JSON: {e}")
    if not isinstance(header, dict):
        raise BadInput(f"{path}: header is not a JSON object")
    data = memoryview(buf)[8 + n:]
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in meta.items()):
        raise BadInput(f"{path}: __metadata__ must map strings to strings")
    spans, out = [], {}
    for name, e in header.items():
        where = f"{path}: tensor {name}"
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise BadInput(f"{where}: entry needs exactly dtype, shape, data_offsets")
        if e["dtype"] not in ST_DTYPES:
            raise BadInput(f"{where}: unsupported dtype {e['dtype']!r} "
                           f"(have {', '.join(ST_DTYPES)})")
        shape, offs = e["shape"], e["data_offsets"]
        if (not isinstance(shape, list) or
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise BadInput(f"{where}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offs) or
                not 0 <= offs[0] <= offs[1] <= len(data)):
            raise BadInput(f"{where}: data_offsets {offs!r} outside the data section "
                           f"({len(data)} bytes)")
        dt = np.dtype(ST_DTYPES[e["dtype"]])
        numel = math.prod(shape)
        if offs[1] - offs[0] != numel * dt.itemsize:
            raise BadInput(f"{where}: data_offsets span {offs[1] - offs[0]} bytes but "
                           f"{e['dtype']} {shape} needs {numel * dt.itemsize}")
        spans.append((offs[0], offs[1], name))
        a = np.frombuffer(data[offs[0]:offs[1]], dtype=dt).reshape(shape)
        out[name] = bf16_to_f32(a) if e["dtype"] == "BF16" else a.astype(dt.newbyteorder("="))
    pos = 0
    for b, e, name in sorted(spans):
        if b != pos:
            what = "overlaps the previous tensor" if b < pos else f"leaves a hole at byte {pos}"
            raise BadInput(f"{path}: tensor {name} {what}")
        pos = e
    if pos != len(data):
        raise BadInput(f"{path}: {len(data) - pos} bytes after the last tensor")
    return out, meta


def st_write(path, tensors, metadata=None, bf16=()):
    """tensors: {name: ndarray} in file order; names in bf16 are stored as BF16."""
    codes = {np.dtype(v): k for k, v in ST_DTYPES.items() if k != "BF16"}
    header, blobs, pos = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, a in tensors.items():
        a = np.asarray(a)
        if name in bf16:
            raw, code = f32_to_bf16(a).astype("<u2").tobytes(), "BF16"
        else:
            if a.dtype not in codes and a.dtype.newbyteorder("<") not in codes:
                raise ValueError(f"{name}: cannot store dtype {a.dtype}")
            le = a.astype(a.dtype.newbyteorder("<"))
            raw, code = le.tobytes(), codes[le.dtype]
        header[name] = {"dtype": code, "shape": list(a.shape),
                        "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the data section starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for raw in blobs:
            f.write(raw)


# --- config and parameters ---------------------------------------------------------------------

CONFIG_KEYS = {
    "num_layers": int, "hidden_size": int, "num_attention_heads": int, "ffn_hidden_size": int,
    "seq_length": int, "max_position_embeddings": int, "vocab_size": int,
    "padded_vocab_size": int, "position_embedding_type": str, "embed_layernorm": bool,
    "layernorm_epsilon": float, "hidden_dropout": float, "attention_dropout": float,
    "lr": float, "adam_beta1": float, "adam_beta2": float, "adam_eps": float,
    "weight_decay": float, "clip_grad": float,
}


# Megatron's --eod-mask-loss, --reset-position-ids, --reset-attention-mask (with the
# end-of-document id "eod") and --apply-residual-connection-post-layernorm; absent = off.
OPTIONAL_KEYS = {
    "eod": int, "eod_mask_loss": bool, "reset_position_ids": bool, "reset_attention_mask": bool,
    "apply_residual_connection_post_layernorm": bool,
}


def config_load(path):
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    except ValueError as e:
        raise BadInput(f"{path}: not JSON: {e}")
    return config_check(cfg, path)


def config_check(cfg, path="config"):
    if not isinstance(cfg, dict):
        raise BadInput(f"{path}: not a JSON object")
    for k, t in CONFIG_KEYS.items():
        if k not in cfg:
            raise BadInput(f"{path}: missing key {k}")
        v = cfg[k]
        ok = (isinstance(v, bool) if t is bool else
              isinstance(v, (int, float)) and not isinstance(v, bool) if t is float else
              isinstance(v, t) and not isinstance(v, bool))
        if not ok or (t is int and v <= 0):
            raise BadInput(f"{path}: {k} = {v!r} is not a {'positive ' if t is int else ''}"
                           f"{t.__name__}")
    if cfg["position_embedding_type"] not in ("learned", "alibi"):
        raise BadInput(f"{path}: position_embedding_type {cfg['position_embedding_type']!r}; "
                       "want learned or alibi")
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise BadInput(f"{path}: hidden_size {cfg['hidden_size']} not divisible by "
                       f"num_attention_heads {cfg['num_attention_heads']}")
    if cfg["padded_vocab_size"] < cfg["vocab_size"]:
        raise BadInput(f"{path}: padded_vocab_size < vocab_size")
    if cfg["hidden_dropout"] != 0 or cfg["attention_dropout"] != 0:
        raise BadInput(f"{path}: the reference is deterministic: set hidden_dropout and "
                       "attention_dropout to 0")
    for k, t in OPTIONAL_KEYS.items():
        v = cfg.setdefault(k, t(0) if t is not int else -1)
        if not isinstance(v, t) or (t is int and isinstance(v, bool)):
            raise BadInput(f"{path}: {k} = {v!r} is not a {t.__name__}")
    if cfg.setdefault("optimizer", "adam") not in OPTIMIZERS:
        raise BadInput(f"{path}: optimizer {cfg['optimizer']!r}; want adam, lamb or sgd")
    for k, d in (("sgd_momentum", 0.9), ("embedding_lr_mult", 1.0), ("lamb_layerwise_noise", 0.0),
                 ("seed", 1234)):
        v = cfg.setdefault(k, d)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise BadInput(f"{path}: {k} = {v!r} is not a number >= 0")
    if cfg["lamb_layerwise_noise"] and cfg["optimizer"] != "lamb":
        raise BadInput(f"{path}: lamb_layerwise_noise is LAMB's; the optimizer is "
                       f"{cfg['optimizer']}")
    if (cfg["eod_mask_loss"] or cfg["reset_position_ids"] or cfg["reset_attention_mask"]) \
            and not 0 <= cfg["eod"] < cfg["vocab_size"]:
        raise BadInput(f"{path}: the document masks need eod, an id below vocab_size")
    return cfg


def param_specs(cfg):
    """[(name, shape, weight_decay?)] in the canonical order. Megatron decays every weight but
    biases and LayerNorm parameters (_get_params_for_weight_decay_optimization)."""
    C, F_, L = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["num_layers"]
    ps = [("word_embeddings.weight", (cfg["padded_vocab_size"], C), True)]
    if cfg["position_embedding_type"] == "learned":
        ps.append(("position_embeddings.weight", (cfg["max_position_embeddings"], C), True))
    if cfg["embed_layernorm"]:
        ps += [("embed_layernorm.weight", (C,), False), ("embed_layernorm.bias", (C,), False)]
    for i in range(L):
        p = f"layers.{i}."
        ps += [(p + "input_layernorm.weight", (C,), False),
               (p + "input_layernorm.bias", (C,), False),
               (p + "attention.query_key_value.weight", (3 * C, C), True),
               (p + "attention.query_key_value.bias", (3 * C,), False),
               (p + "attention.dense.weight", (C, C), True),
               (p + "attention.dense.bias", (C,), False),
               (p + "post_attention_layernorm.weight", (C,), False),
               (p + "post_attention_layernorm.bias", (C,), False),
               (p + "mlp.dense_h_to_4h.weight", (F_, C), True),
               (p + "mlp.dense_h_to_4h.bias", (F_,), False),
               (p + "mlp.dense_4h_to_h.weight", (C, F_), True),
               (p + "mlp.dense_4h_to_h.bias", (C,), False)]
    ps += [("final_layernorm.weight", (C,), False), ("final_layernorm.bias", (C,), False)]
    return ps


def weights_check(cfg, tensors, path):
    specs = param_specs(cfg)
    want = {n for n, _, _ in specs}
    for n, shape, _ in specs:
        if n not in tensors:
            raise BadInput(f"{path}: missing tensor {n}")
        if tuple(tensors[n].shape) != shape:
            raise BadInput(f"{path}: tensor {n} has shape {list(tensors[n].shape)}, "
                           f"config wants {list(shape)}")
        if tensors[n].dtype.kind != "f":
            raise BadInput(f"{path}: tensor {n} is not floating point")
    extra = sorted(set(tensors) - want)
    if extra:
        raise BadInput(f"{path}: unexpected tensor {extra[0]} (position_embedding_type "
                       f"{cfg['position_embedding_type']}, embed_layernorm "
                       f"{cfg['embed_layernorm']}, num_layers {cfg['num_layers']}?)")


def batch_check(cfg, tensors, path, softmax_over_padded=False):
    for n in ("tokens", "targets"):
        if n not in tensors:
            raise BadInput(f"{path}: missing tensor {n}")
        a = tensors[n]
        if a.dtype.kind not in "iu" or a.ndim != 3 or 0 in a.shape:
            raise BadInput(f"{path}: tensor {n} must be integer [S,B,T], is "
                           f"{a.dtype} {list(a.shape)}")
    tok, tgt = tensors["tokens"], tensors["targets"]
    if tok.shape != tgt.shape:
        raise BadInput(f"{path}: tokens {list(tok.shape)} and targets {list(tgt.shape)} differ")
    T = tok.shape[2]
    if T > cfg["seq_length"]:
        raise BadInput(f"{path}: T = {T} > seq_length {cfg['seq_length']}")
    if cfg["position_embedding_type"] == "learned" and T > cfg["max_position_embeddings"]:
        raise BadInput(f"{path}: T = {T} > max_position_embeddings")
    vt = cfg["padded_vocab_size"] if softmax_over_padded else cfg["vocab_size"]
    if tok.min() < 0 or tok.max() >= cfg["padded_vocab_size"]:
        raise BadInput(f"{path}: tokens outside [0, padded_vocab_size)")
    if tgt.min() < 0 or tgt.max() >= vt:
        raise BadInput(f"{path}: targets outside [0, {vt})")
    return torch.from_numpy(tok.astype(np.int64)), torch.from_numpy(tgt.astype(np.int64))


# --- Hugging Face exports (--hf) ---------------------------------------------------------------

def hf_load(d, cfg):
    """The weights of a GPT2LMHeadModel / BloomForCausalLM directory under this file's names and
    layouts (see --hf in the comment at the top). Raises BadInput."""
    import os
    try:
        with open(os.path.join(d, "config.json")) as f:
            hc = json.load(f)
    except OSError as e:
        raise BadInput(f"{d}/config.json: {e.strerror}")
    except ValueError as e:
        raise BadInput(f"{d}/config.json: not JSON: {e}")
    gpt2 = cfg["position_embedding_type"] == "learned" and not cfg["embed_layernorm"]
    bloom = cfg["position_embedding_type"] == "alibi" and cfg["embed_layernorm"]
    arch = (hc.get("architectures") or [None])[0]
    want = "GPT2LMHeadModel" if gpt2 else "BloomForCausalLM" if bloom else None
    if want is None:
        raise BadInput("this config (position_embedding_type "
                       f"{cfg['position_embedding_type']}, embed_layernorm {cfg['embed_layernorm']})"
                       " has no Hugging Face class")
    if arch != want:
        raise BadInput(f"{d}/config.json: architectures {hc.get('architectures')}, the config "
                       f"wants {want}")
    C, NH, L, V, Vp = (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_layers"],
                       cfg["vocab_size"], cfg["padded_vocab_size"])
    keys = ({"n_embd": C, "n_head": NH, "n_layer": L, "vocab_size": V,
             "n_positions": cfg["max_position_embeddings"]} if gpt2 else
            {"hidden_size": C, "n_head": NH, "n_layer": L, "vocab_size": V})
    for k, v in keys.items():
        if hc.get(k) != v:
            raise BadInput(f"{d}/config.json: {k} = {hc.get(k)!r}, the config says {v}")
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        try:
            with open(index) as f:
                wmap = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError) as e:
            raise BadInput(f"{index}: unreadable ({e})")
        t = {}
        for fn in sorted(set(wmap.values())):
            part, _ = st_read(os.path.join(d, fn))
            t.update(part)
        for k, fn in wmap.items():
            if k not in t:
                raise BadInput(f"{d}/{fn}: tensor {k} is missing (the index names it)")
    else:
        t, _ = st_read(os.path.join(d, "model.safetensors"))
    t = dict(t)

    def take(name, shape):
        if name not in t:
            raise BadInput(f"{d}: tensor {name} is missing")
        a = np.asarray(t.pop(name), dtype=np.float32)
        if tuple(a.shape) != tuple(shape):
            raise BadInput(f"{d}: tensor {name} has shape {list(a.shape)}, want {list(shape)}")
        return a

    def padded(a):  # the export drops the padded vocabulary rows
        return np.concatenate([a, np.zeros((Vp - V, C), np.float32)])

    w, F_ = {}, cfg["ffn_hidden_size"]
    T = "transformer."
    if gpt2:
        w["word_embeddings.weight"] = padded(take(T + "wte.weight", (V, C)))
        w["position_embeddings.weight"] = take(T + "wpe.weight", (cfg["max_position_embeddings"], C))
        for i in range(L):
            h, q = f"{T}h.{i}.", f"layers.{i}."
            for x in ("weight", "bias"):
                w[q + "input_layernorm." + x] = take(h + "ln_1." + x, (C,))
                w[q + "post_attention_layernorm." + x] = take(h + "ln_2." + x, (C,))
            # Conv1D [in, out] -> Linear [out, in]; c_attn's out is [3, NH, HD] -> [NH, 3, HD]
            qkv = take(h + "attn.c_attn.weight", (C, 3 * C)).T.reshape(3, NH, C // NH, C)
            w[q + "attention.query_key_value.weight"] = qkv.transpose(1, 0, 2, 3).reshape(3 * C, C)
            qb = take(h + "attn.c_attn.bias", (3 * C,)).reshape(3, NH, C // NH)
            w[q + "attention.query_key_value.bias"] = qb.transpose(1, 0, 2).reshape(3 * C)
            w[q + "attention.dense.weight"] = take(h + "attn.c_proj.weight", (C, C)).T
            w[q + "attention.dense.bias"] = take(h + "attn.c_proj.bias", (C,))
            w[q + "mlp.dense_h_to_4h.weight"] = take(h + "mlp.c_fc.weight", (C, F_)).T
            w[q + "mlp.dense_h_to_4h.bias"] = take(h + "mlp.c_fc.bias", (F_,))
            w[q + "mlp.dense_4h_to_h.weight"] = take(h + "mlp.c_proj.weight", (F_, C)).T
            w[q + "mlp.dense_4h_to_h.bias"] = take(h + "mlp.c_proj.bias", (C,))
    else:
        w["word_embeddings.weight"] = padded(take(T + "word_embeddings.weight", (V, C)))
        for x in ("weight", "bias"):
            w["embed_layernorm." + x] = take(T + "word_embeddings_layernorm." + x, (C,))
        for i in range(L):
            h, q = f"{T}h.{i}.", f"layers.{i}."
            for hn, qn, shape in (
                    ("input_layernorm.weight", "input_layernorm.weight", (C,)),
                    ("input_layernorm.bias", "input_layernorm.bias", (C,)),
                    ("self_attention.query_key_value.weight", "attention.query_key_value.weight",
                     (3 * C, C)),
                    ("self_attention.query_key_value.bias", "attention.query_key_value.bias",
                     (3 * C,)),
                    ("self_attention.dense.weight", "attention.dense.weight", (C, C)),
                    ("self_attention.dense.bias", "attention.dense.bias", (C,)),
                    ("post_attention_layernorm.weight", "post_attention_layernorm.weight", (C,)),
                    ("post_attention_layernorm.bias", "post_attention_layernorm.bias", (C,)),
                    ("mlp.dense_h_to_4h.weight", "mlp.dense_h_to_4h.weight", (F_, C)),
                    ("mlp.dense_h_to_4h.bias", "mlp.dense_h_to_4h.bias", (F_,)),
                    ("mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.weight", (C, F_)),
                    ("mlp.dense_4h_to_h.bias", "mlp.dense_4h_to_h.bias", (C,))):
                w[q + qn] = take(h + hn, shape)
    for x in ("weight", "bias"):
        w["final_layernorm." + x] = take(T + "ln_f." + x, (C,))
    t.pop("lm_head.weight", None)   # tied to the word embeddings, if a writer kept it
    if t:
        raise BadInput(f"{d}: unexpected tensor {sorted(t)[0]}")
    return {k: np.ascontiguousarray(v) for k, v in w.items()}


# --- model -------------------------------------------------------------------------------------

def alibi_slopes(n):
    """Per head, from the spec: n a power of two: start = 2^(-8/n), slope_h = start^(h+1);
    otherwise p = 2^floor(log2 n) and slopes(p) ++ slopes(2p)[0::2][:n-p]."""
    def pow2(m):
        start = 2.0 ** (-8.0 / m)
        return [start ** (h + 1) for h in range(m)]
    if n & (n - 1) == 0:
        return pow2(n)
    p = 1 << (n.bit_length() - 1)
    return pow2(p) + pow2(2 * p)[0::2][:n - p]


def no_round(x):
    return x


def bf16_round(x):
    """Emulates storing an activation in bf16: the autograd of .to() rounds the gradient too."""
    return x.to(torch.bfloat16).to(x.dtype)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def attention_core(q, k, v, slopes, rd=no_round, mask=None):
    """q, k, v (B,NH,T,HD) -> (B,NH,T,HD). slopes (NH,) or None. Causal: key j > query i masked;
    mask (B,1,T,T) bool, True = masked (Megatron's attention_mask), replaces the causal one.
    Softmax runs in the tensors' dtype (fp32 or fp64), as Megatron's fused softmax does in fp32."""
    T, HD = q.shape[2], q.shape[3]
    s = rd((q @ k.transpose(-1, -2)) / math.sqrt(HD))                    # (B,NH,T,T)
    if slopes is not None:
        j = torch.arange(T, dtype=s.dtype)
        s = rd(s + slopes.to(s.dtype).view(1, -1, 1, 1) * j.view(1, 1, 1, T))
    if mask is None:
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)                 # j > i
    att = rd(torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1))
    return rd(att @ v)


def ltor_masks(tokens, cfg):
    """Megatron's get_ltor_masks_and_position_ids (megatron/utils.py) for tokens (B,T): the
    attention mask (B,1,T,T) bool (True = masked), the loss mask (B,T) float and the position
    ids (B,T), transcribed from its loops: after an eod at i, rows i+1.. lose the columns ..i
    and the positions i+1.. restart at 0."""
    B, T = tokens.shape
    eod = cfg["eod"]
    att = torch.tril(torch.ones(B, 1, T, T))
    loss_mask = torch.ones(B, T)
    if cfg["eod_mask_loss"]:
        loss_mask[tokens == eod] = 0.0
    pos = torch.arange(T, dtype=torch.long).unsqueeze(0).expand(B, T).clone()
    if cfg["reset_position_ids"] or cfg["reset_attention_mask"]:
        for b in range(B):
            eod_index = pos[b, tokens[b] == eod].clone()
            prev = 0
            for i in eod_index.tolist():
                if cfg["reset_attention_mask"]:
                    att[b, 0, i + 1:, :i + 1] = 0
                if cfg["reset_position_ids"]:
                    pos[b, i + 1:] -= i + 1 - prev
                    prev = i + 1
    return att < 0.5, loss_mask, pos


def attention(x, w, b, nh, slopes, rd=no_round, mask=None):
    """x (B,T,C) -> (B,T,C) before the output projection. The 3C qkv features are [NH, 3, HD]."""
    B, T, C = x.shape
    qkv = rd(x @ w.T + b).view(B, T, nh, 3, C // nh)
    q, k, v = (qkv[:, :, :, i].permute(0, 2, 1, 3) for i in range(3))     # (B,NH,T,HD)
    y = attention_core(q, k, v, slopes, rd, mask)
    return y.permute(0, 2, 1, 3).reshape(B, T, C)


def forward(P, cfg, tokens, rd=no_round, wrd=no_round):
    """P {name: tensor}; tokens (B,T) int64 -> logits (B,T,Vp). rd rounds activations, wrd weights
    (both identity except for the bf16 emulation)."""
    W = lambda n: wrd(P[n])
    C, eps, NH = cfg["hidden_size"], cfg["layernorm_epsilon"], cfg["num_attention_heads"]
    ln = lambda x, n: rd(F.layer_norm(x, (C,), W(n + ".weight"), W(n + ".bias"), eps))
    T = tokens.shape[1]
    wte = W("word_embeddings.weight")
    h = rd(wte[tokens])                                                   # (B,T,C)
    if cfg["embed_layernorm"]:
        h = ln(h, "embed_layernorm")
    att_mask, _, pos = ltor_masks(tokens, cfg)
    if cfg["position_embedding_type"] == "learned":
        h = rd(h + W("position_embeddings.weight")[pos])
        slopes = None
    else:
        slopes = torch.tensor(alibi_slopes(NH), dtype=h.dtype)
    mask = att_mask if cfg["reset_attention_mask"] else None
    post = cfg["apply_residual_connection_post_layernorm"]
    for i in range(cfg["num_layers"]):
        p = f"layers.{i}."
        x = ln(h, p + "input_layernorm")
        y = attention(x, W(p + "attention.query_key_value.weight"),
                      W(p + "attention.query_key_value.bias"), NH, slopes, rd, mask)
        h = rd((x if post else h) + rd(y @ W(p + "attention.dense.weight").T +
                                       W(p + "attention.dense.bias")))
        x = ln(h, p + "post_attention_layernorm")
        m = rd(gelu_tanh(rd(x @ W(p + "mlp.dense_h_to_4h.weight").T +
                            W(p + "mlp.dense_h_to_4h.bias"))))
        h = rd((x if post else h) + rd(m @ W(p + "mlp.dense_4h_to_h.weight").T +
                                       W(p + "mlp.dense_4h_to_h.bias")))
    return rd(ln(h, "final_layernorm") @ wte.T)                           # (B,T,Vp)


def loss_fn(logits, targets, V, softmax_over_padded=False, loss_mask=None):
    """Mean cross-entropy over all B*T tokens, in fp32 at least (Megatron upcasts the logits);
    with a loss mask Megatron's sum(losses * mask) / sum(mask)."""
    lg = logits if softmax_over_padded else logits[..., :V]
    if lg.dtype not in (torch.float32, torch.float64):
        lg = lg.float()
    if loss_mask is None:
        return F.cross_entropy(lg.reshape(-1, lg.shape[-1]), targets.reshape(-1))
    losses = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), targets.reshape(-1), reduction="none")
    m = loss_mask.reshape(-1).to(losses.dtype)
    return torch.sum(losses * m) / m.sum()


# --- optimizer ---------------------------------------------------------------------------------

def clip_grads(grads, clip_grad):
    """Megatron clip_grad_norm_fp32: returns the norm before clipping; scales grads in place."""
    norm = torch.sqrt(sum((g.double() * g.double()).sum() for g in grads)).to(grads[0].dtype)
    if clip_grad > 0:
        coeff = clip_grad / (norm.item() + 1e-6)
        if coeff < 1.0:
            for g in grads:
                g.mul_(coeff)
    return norm.item()


# --- the noise of --lamb-layerwise-noise: Philox4x32-10 (Salmon et al., SC'11), written here from
# the paper's constants and checked against Random123's known-answer vectors (philox_selftest), so
# that it is not the C header's code run twice.

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1


def philox4x32(key, ctr):
    """key: 2 uint32 ndarrays (k0, k1), ctr: 4 uint32 ndarrays (c0..c3), broadcast together;
    ten rounds, the key bumped by the Weyl constants between rounds."""
    u = np.uint64   # numpy integers only: a Python int in the mix would make floats
    k0, k1 = (np.asarray(k, u) for k in key)
    c = [np.asarray(x, u) for x in ctr]
    m32, s32 = u(M32), u(32)
    for r in range(10):
        if r:
            k0, k1 = (k0 + u(0x9E3779B9)) & m32, (k1 + u(0xBB67AE85)) & m32
        p0, p1 = u(0xD2511F53) * c[0], u(0xCD9E8D57) * c[2]   # 64-bit products, no overflow
        c = [(p1 >> s32) ^ c[1] ^ k0, p1 & m32, (p0 >> s32) ^ c[3] ^ k1, p0 & m32]
    return c


def philox_selftest():
    kat = [((0, 0), (0, 0, 0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
           ((M32, M32), (M32,) * 4, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
           ((0xa4093822, 0x299f31d0), (0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344),
            (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for key, ctr, want in kat:
        got = tuple(int(x) for x in philox4x32(key, ctr))
        if got != want:
            raise SystemExit(f"{PROG}: Philox4x32-10 known-answer test failed: {got} != {want}")


def key_mix(a, b):
    """lmtk's stream-key mixer (train/philox.h philox_mix): a hash-combine, then splitmix64's
    finaliser, on 64-bit integers."""
    z = a ^ ((b + 0x9E3779B97F4A7C15 + (a << 6) + (a >> 2)) & M64)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def fnv1a64(name):
    h = 0xcbf29ce484222325
    for ch in name.encode():
        h = ((h ^ ch) * 0x100000001b3) & M64
    return h


def normal_draws(key, n):
    """N(0,1) for elements 0..n-1 of stream key: element i is Box-Muller on the first two words
    of the block at counter (i, 1) - u1 = (w0 + 1) / 2^32 in (0, 1], u2 = w1 / 2^32."""
    i = np.arange(n, dtype=np.uint64)
    w = philox4x32((key & M32, key >> 32), (i & np.uint64(M32), i >> np.uint64(32), 1, 0))
    u1 = (w[0].astype(np.float64) + 1.0) / 4294967296.0
    u2 = w[1].astype(np.float64) / 4294967296.0
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)


NOISE_STREAM = int.from_bytes(b"noise", "big")   # 0x6e6f697365


def lamb_noise(cfg, step, name, shape):
    """z for every element of tensor `name` at optimizer step `step` (from 1): drawn at the
    element's index in the whole (unsplit, row-major) tensor, keyed by the seed, the step and
    the name, so no layout or restart changes it."""
    key = key_mix(key_mix(key_mix(int(cfg["seed"]), NOISE_STREAM), step), fnv1a64(name))
    return torch.from_numpy(normal_draws(key, math.prod(shape)).reshape(shape))


def tensor_lr(cfg, name):
    """--embedding-lr-mult: the word embedding (which is also the tied output layer) learns at
    lr * embedding_lr_mult; every other tensor, the position embeddings included, at lr."""
    return cfg["lr"] * (cfg["embedding_lr_mult"] if name == "word_embeddings.weight" else 1.0)


def adamw_step(params, grads, state, decay, cfg, step, names):
    """apex FusedAdam adam_w_mode=True (multi_tensor_adam ADAM_MODE_1), step counted from 1:
    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr (m/bc1 / (sqrt(v/bc2) + eps) + wd p)."""
    b1, b2, eps = cfg["adam_beta1"], cfg["adam_beta2"], cfg["adam_eps"]
    bc1, bc2 = 1.0 - b1 ** step, 1.0 - b2 ** step
    with torch.no_grad():
        for p, g, (m, v), d, n in zip(params, grads, state, decay, names):
            m.mul_(b1).add_(g, alpha=1.0 - b1)
            v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
            upd = (m / bc1) / ((v / bc2).sqrt() + eps)
            if d:
                upd = upd + cfg["weight_decay"] * p
            p.sub_(tensor_lr(cfg, n) * upd)


def lamb_step(params, grads, state, decay, cfg, step, names):
    """apex FusedLAMB as Megatron builds an optimizer (lr, betas, eps, weight_decay from the
    flags; FusedLAMB's own defaults otherwise: bias_correction, grad_averaging, adam_w_mode,
    max_grad_norm 1.0, use_nvlamb False), on the gradients Megatron's clip_grads left: their
    global norm is clipped again at 1.0 (g / (norm / 1.0) when above), m and v as Adam's,
    u = (m/bc1) / (sqrt(v/bc2) + eps) + wd p, and p -= lr r u with r = ||p|| / ||u|| (p before
    the step) for a tensor with weight decay when both norms are non-zero, else r = 1.
    lamb_layerwise_noise STD: then p -= lr r (u + STD ||u|| / sqrt(numel) z), z = lamb_noise."""
    b1, b2, eps = cfg["adam_beta1"], cfg["adam_beta2"], cfg["adam_eps"]
    std = cfg["lamb_layerwise_noise"]
    bc1, bc2 = 1.0 - b1 ** step, 1.0 - b2 ** step
    gnorm = math.sqrt(sum((g.double() * g.double()).sum().item() for g in grads))
    div = gnorm / 1.0 if gnorm > 1.0 else 1.0
    with torch.no_grad():
        for p, g, (m, v), d, n in zip(params, grads, state, decay, names):
            wd = cfg["weight_decay"] if d else 0.0
            g = g / div
            m.mul_(b1).add_(g, alpha=1.0 - b1)
            v.mul_(b2).addcmul_(g, g, value=1.0 - b2)
            u = (m / bc1) / ((v / bc2).sqrt() + eps) + wd * p
            pn, un = p.norm().item(), u.norm().item()
            r = pn / un if wd != 0 and pn != 0 and un != 0 else 1.0
            if std > 0 and un != 0:
                u = u + std * un / math.sqrt(u.numel()) * \
                    lamb_noise(cfg, step, n, tuple(u.shape)).to(u.dtype)
            p.sub_(tensor_lr(cfg, n) * r * u)


def sgd_step(params, grads, state, decay, cfg, step, names):
    """torch.optim.SGD(lr, momentum=sgd_momentum, weight_decay on the decay group; dampening 0,
    no Nesterov): d = g + wd p; buf = d on the first step, else momentum buf + d; p -= lr buf."""
    mom = cfg.get("sgd_momentum", 0.9)
    with torch.no_grad():
        for p, g, (buf, _), d, n in zip(params, grads, state, decay, names):
            dp = g + (cfg["weight_decay"] if d else 0.0) * p
            if mom != 0:
                if step == 1:
                    buf.copy_(dp)
                else:
                    buf.mul_(mom).add_(dp)
                dp = buf
            p.sub_(tensor_lr(cfg, n) * dp)


OPTIMIZERS = {"adam": adamw_step, "lamb": lamb_step, "sgd": sgd_step}


# --- the reference run -------------------------------------------------------------------------

GROUPS = ("logits", "loss", "grads", "losses", "grad_norms", "final")


def reference(cfg, weights, tokens, targets, dtype="float64", groups=GROUPS,
              softmax_over_padded=False, optimizer=adamw_step):
    """Returns {item name: float ndarray} for the requested groups."""
    if optimizer is adamw_step:   # the config's "optimizer" (adam, lamb, sgd; default adam)
        optimizer = OPTIMIZERS[cfg.get("optimizer", "adam")]
    if cfg.get("lamb_layerwise_noise", 0) > 0:
        philox_selftest()
    specs = param_specs(cfg)
    names = [n for n, _, _ in specs]
    decay = [d for _, _, d in specs]
    tdt = torch.float64 if dtype == "float64" else torch.float32
    rd, wrd = (bf16_round, bf16_round) if dtype == "bf16" else (no_round, no_round)
    params = [torch.tensor(np.asarray(weights[n], dtype=np.float64), dtype=tdt).requires_grad_()
              for n in names]
    P = dict(zip(names, params))
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    V = cfg["vocab_size"]
    train = any(g in groups for g in ("losses", "grad_norms", "final"))
    S = tokens.shape[0] if train else 1
    out, losses, norms = {}, [], []
    for k in range(S):
        logits = forward(P, cfg, tokens[k], rd, wrd)
        loss_mask = ltor_masks(tokens[k], cfg)[1] if cfg["eod_mask_loss"] else None
        loss = loss_fn(logits, targets[k], V, softmax_over_padded, loss_mask)
        grads = list(torch.autograd.grad(loss, params))                 # in the params' dtype
        if k == 0:
            if "logits" in groups:
                out["logits"] = logits.detach().to(tdt).numpy().copy()
            if "loss" in groups:
                out["loss"] = np.array([loss.item()])
            if "grads" in groups:
                for n, g in zip(names, grads):
                    out["grad." + n] = g.numpy().copy()
        losses.append(loss.item())
        if not train:
            break
        norms.append(clip_grads(grads, cfg["clip_grad"]))
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


def item_group(name):
    for pre, g in (("grad.", "grads"), ("final.", "final")):
        if name.startswith(pre):
            return g
    return "logits" if name.startswith("logits") else name


# --- comparison --------------------------------------------------------------------------------

TOLERANCES = {  # see "Tolerances" in the comment at the top; final is the "upd" criterion
    "fp32": {"logits": 1e-4, "loss": 1e-5, "grads": 1e-4, "losses": 1e-5, "grad_norms": 1e-4,
             "final": 1e-3},
    "bf16": {"logits": 5e-2, "loss": 5e-3, "grads": 8e-2, "losses": 1e-2, "grad_norms": 1e-2,
             "final": 2.5e-1},
    # fp16 keeps 3 more bits than bf16: bf16's limits / 8
    "fp16": {"logits": 6.25e-3, "loss": 6.25e-4, "grads": 1e-2, "losses": 1.25e-3,
             "grad_norms": 1.25e-3, "final": 3.125e-2},
}


def compare_items(ref, c, c_path, V, hd, tol, init=None, lr_steps=0.0, skip_padded=False):
    """ref and c: {item name: ndarray}; V vocab size; hd head dim; tol {group: limit}; init the
    initial weights (needed for final.* items); lr_steps = lr * S. Returns one dict per line:
    name, maxdiff, maxabs, rel (= maxdiff / maxabs), crit ("rel", "upd" or "abs"), value (the
    number checked), limit, ok."""
    rows = []

    def row(name, r, x, limit, crit="rel", r0=None):
        r, x = np.asarray(r, np.float64), np.asarray(x, np.float64)
        maxabs = float(np.abs(r).max()) if r.size else 0.0
        finite = np.all(np.isfinite(x)) and np.all(np.isfinite(r))
        maxdiff = float(np.abs(x - r).max()) if r.size and finite else 0.0 if finite else math.inf
        rel = maxdiff / max(maxabs, 1e-30)
        value = {"rel": rel, "abs": maxdiff}.get(crit)
        if crit == "upd":  # |x - r|_2 / |r - r0|_2: how far off the optimizer's total update is
            value = (float(np.linalg.norm(x - r)) if finite else math.inf) / \
                max(float(np.linalg.norm(r - np.asarray(r0, np.float64))), 1e-30)
        rows.append(dict(name=name, maxdiff=maxdiff, maxabs=maxabs, rel=rel, crit=crit,
                         value=value, limit=limit, ok=value <= limit))

    for name, r in ref.items():
        if name not in c:
            raise BadInput(f"{c_path}: missing tensor {name}")
        x = c[name]
        if tuple(x.shape) != tuple(r.shape):
            raise BadInput(f"{c_path}: tensor {name} has shape {list(x.shape)}, "
                           f"reference {list(r.shape)}")
        if x.dtype.kind != "f":
            raise BadInput(f"{c_path}: tensor {name} is {x.dtype}, want floating point")
        lim = tol[item_group(name)]
        if name == "logits":
            row("logits", r[..., :V], x[..., :V], lim)
            if r.shape[-1] > V and not skip_padded:
                row("logits.padded", r[..., V:], x[..., V:], lim)
        elif name.startswith("final."):
            r0 = init[name[len("final."):]]
            if name.endswith("attention.query_key_value.bias"):
                # rows are [NH, 3, HD]: the k rows are those with (row // HD) % 3 == 1
                k = (np.arange(r.shape[0]) // hd) % 3 == 1
                row(name, r[~k], x[~k], lim, "upd", r0[~k])
                row(name + "[k]", r[k], x[k], 2.0 * lr_steps, "abs")
            else:
                row(name, r, x, lim, "upd", r0)
        else:
            row(name, r, x, lim)
    return rows


def print_rows(rows, profile):
    """One line per item, those over tolerance last, then a summary. Returns True if all pass."""
    w = max(len(r["name"]) for r in rows)
    bad = [r for r in rows if not r["ok"]]
    for r in [r for r in rows if r["ok"]] + bad:
        extra = f"  upd {r['value']:.3e}" if r["crit"] == "upd" else ""
        crit = "|diff|" if r["crit"] == "abs" else r["crit"]
        print(f"{r['name']:<{w}}  maxdiff {r['maxdiff']:.3e}  maxabs {r['maxabs']:.3e}  "
              f"rel {r['rel']:.3e}{extra}  {'within' if r['ok'] else 'OVER'} "
              f"{crit} <= {r['limit']:.1e}")
    if bad:
        print(f"{PROG}: {len(bad)} of {len(rows)} items over tolerance (profile {profile}): "
              + " ".join(r["name"] for r in bad))
    else:
        print(f"{PROG}: all {len(rows)} items within tolerance (profile {profile})")
    return not bad


# --- main --------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="gpt-ref.py", description="PyTorch reference for the lmtk GPT trainer "
        "(see the comment at the top of this file).")
    ap.add_argument("--config", help="model/optimizer config JSON")
    ap.add_argument("--weights", help="initial weights, safetensors (F32 or BF16)")
    ap.add_argument("--hf", metavar="DIR", help="take the weights from a Hugging Face export "
                    "(GPT2LMHeadModel or BloomForCausalLM directory) instead of --weights")
    ap.add_argument("--batch", help='safetensors with "tokens", "targets" I32 [S,B,T]')
    ap.add_argument("--write", metavar="OUT", help="write the reference items to OUT")
    ap.add_argument("--compare", metavar="C", help="compare C's items with the reference")
    ap.add_argument("--ref", metavar="REF", help="take the reference items from REF (written by "
                    "--write) instead of computing them")
    ap.add_argument("--tolerance", choices=sorted(TOLERANCES), default="fp32")
    ap.add_argument("--tol", action="append", default=[], metavar="GROUP=LIMIT",
                    help="override one group's limit")
    ap.add_argument("--only", help="comma-separated subset of " + ",".join(GROUPS))
    ap.add_argument("--dtype", choices=("float64", "float32", "bf16"), default="float64",
                    help="reference precision (bf16: emulated bf16 trainer, for calibration)")
    ap.add_argument("--softmax-over-padded", action="store_true",
                    help="include the padded vocab columns in the loss softmax (as Megatron)")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads(N)")
    a = ap.parse_args(argv)
    if not a.write and not a.compare:
        ap.error("nothing to do: give --write and/or --compare")
    if a.ref:
        if not a.compare or a.write or a.config or a.batch:
            ap.error("--ref goes with --compare (and --weights for final items), without "
                     "--write, --config or --batch")
    elif a.hf and a.weights:
        ap.error("--hf replaces --weights: give one of them")
    elif not (a.config and (a.weights or a.hf) and a.batch):
        ap.error("--config, --weights and --batch are required (or --ref REF)")
    a.groups = GROUPS
    if a.only:
        a.groups = tuple(g.strip() for g in a.only.split(",") if g.strip())
        for g in a.groups:
            if g not in GROUPS:
                ap.error(f"--only: unknown group {g!r} (have {','.join(GROUPS)})")
    a.tols = dict(TOLERANCES[a.tolerance])
    for t in a.tol:
        g, _, v = t.partition("=")
        try:
            if g not in GROUPS:
                raise ValueError
            a.tols[g] = float(v)
        except ValueError:
            ap.error(f"--tol {t!r}: want GROUP=LIMIT with GROUP one of {','.join(GROUPS)}")
    if a.threads is not None:
        if a.threads < 1:
            ap.error("--threads wants a positive number")
        torch.set_num_threads(a.threads)
    return a


def main(argv):
    a = parse_args(argv)
    w = None
    if a.ref:
        ref_all, meta = st_read(a.ref)
        try:
            cfg = config_check(json.loads(meta["config"]), a.ref + " (__metadata__ config)")
            steps = int(meta["steps"])
        except (KeyError, ValueError):
            raise BadInput(f"{a.ref}: no config/steps in __metadata__; not written by --write?")
        ref = {n: v for n, v in ref_all.items() if item_group(n) in a.groups}
        missing = [g for g in a.groups if not any(item_group(n) == g for n in ref)]
        if missing:
            raise BadInput(f"{a.ref}: has no {missing[0]} items (written with --only?)")
        if "final" in a.groups:
            if not a.weights:
                raise BadInput("final items are checked against the update from the initial "
                               "weights: give --weights (or --only without final)")
            w, _ = st_read(a.weights)
            weights_check(cfg, w, a.weights)
    else:
        cfg = config_load(a.config)
        w = hf_load(a.hf, cfg) if a.hf else st_read(a.weights)[0]
        weights_check(cfg, w, a.hf or a.weights)
        b, _ = st_read(a.batch)
        tokens, targets = batch_check(cfg, b, a.batch, a.softmax_over_padded)
        steps = tokens.shape[0]
        ref = reference(cfg, w, tokens, targets, a.dtype, a.groups, a.softmax_over_padded)
        if a.write:
            st_write(a.write, ref, {
                "producer": "tests/ref/gpt-ref.py", "dtype": a.dtype, "steps": steps,
                "vocab_size": cfg["vocab_size"], "padded_vocab_size": cfg["padded_vocab_size"],
                "softmax_over_padded": int(a.softmax_over_padded),
                "config": json.dumps(cfg, sort_keys=True)})
    if not a.compare:
        return 0
    c, _ = st_read(a.compare)
    rows = compare_items(ref, c, a.compare, cfg["vocab_size"],
                         cfg["hidden_size"] // cfg["num_attention_heads"], a.tols, w,
                         cfg["lr"] * steps, skip_padded=bool(getattr(a, "hf", None)))
    return 0 if print_rows(rows, a.tolerance) else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(2)
