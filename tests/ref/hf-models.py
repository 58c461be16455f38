#!/usr/bin/python3
"""Hugging Face model directories written here, independently of lmtk, and their forward as
transformers computes it - the peer of ckpt-merge-tp --from hf (tests/cli/ckpt-hf-import.sh).

  hf-models.py write CLASS DIR [--layers L --hidden H --heads NH --vocab V --positions P]
               [--format st|sharded|bin] [--dtype f32|bf16|f16] [--no-prefix] [--seed S]
               [--tokentypes K] [--gelu gelu|gelu_new]
      CLASS: gpt2 (GPT2LMHeadModel), bloom (BloomForCausalLM), bert (MegatronBertForPreTraining).
      Random weights (normal, std 0.05; layer norms 1 + 0.1 N), config.json as
      transformers' configuration_gpt2.py / configuration_bloom.py / configuration_megatron_bert.py
      spell it, and the weights as save_pretrained lays them out: st model.safetensors; sharded
      model-0000K-of-0000N.safetensors + model.safetensors.index.json (three files); bin
      pytorch_model.bin by torch.save of the state dict (with GPT-2's attn.bias/attn.masked_bias
      buffers and a tied lm_head.weight sharing the word embeddings' storage, as older files
      have them).  safetensors is written here with struct + json (the safetensors package is
      not installed on these machines): u64 header length, the JSON header, the bytes.
      --no-prefix: the base model's names (GPT2Model's "wte.weight", BloomModel's), as the
      Hub's gpt2 and bloom-560m files are.
  hf-models.py loss DIR TOKENS...
      The mean cross-entropy of predicting TOKENS[1:] + TOKENS[0] from TOKENS (one sequence), in
      float64, by a forward written from transformers' models/gpt2/modeling_gpt2.py and
      models/bloom/modeling_bloom.py over the directory's files as they are on disk (Conv1D
      x @ W + b; c_attn split q | k | v; BLOOM's fused qkv viewed (heads, 3, hd), ALiBi from
      build_alibi_tensor, the tied output layer).  Prints the loss as %.9e.

Needs torch and numpy (Debian's python3-torch, python3-numpy).
"""
import collections
import json
import math
import os
import struct
import sys

import numpy as np
import torch


def st_write(path, tensors, dtype):
    """tensors: {name: float32 array}; dtype F32, BF16 or F16"""
    hdr, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for k, a in tensors.items():
        a = np.ascontiguousarray(a, np.float32)
        if dtype == "BF16":
            u = a.view(np.uint32).astype(np.uint64)
            b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
        elif dtype == "F16":
            b = a.astype(np.float16).tobytes()
        else:
            b = a.tobytes()
        hdr[k] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def st_read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    out = {}
    for k, v in h.items():
        s, e = v["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif v["dtype"] == "F16":
            a = np.frombuffer(raw, np.float16).astype(np.float32)
        else:
            a = np.frombuffer(raw, {"F32": np.float32, "F64": np.float64}[v["dtype"]])
        out[k] = torch.tensor(a.reshape(v["shape"]), dtype=torch.float64)
    return out


def load_dir(d):
    for idx in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if os.path.exists(os.path.join(d, idx)):
            files = sorted(set(json.load(open(os.path.join(d, idx)))["weight_map"].values()))
            w = {}
            for f in files:
                w.update(st_read(os.path.join(d, f)) if f.endswith(".safetensors") else
                         torch.load(os.path.join(d, f)))
            return {k: v.double() for k, v in w.items()}
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return st_read(os.path.join(d, "model.safetensors"))
    return {k: v.double() for k, v in torch.load(os.path.join(d, "pytorch_model.bin")).items()}


def write(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("cls", choices=("gpt2", "bloom", "bert"))
    ap.add_argument("dir")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=5000)
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--format", choices=("st", "sharded", "bin"), default="st")
    ap.add_argument("--dtype", choices=("f32", "bf16", "f16"), default="f32")
    ap.add_argument("--no-prefix", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokentypes", type=int, default=2)
    ap.add_argument("--gelu", default="gelu_new")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    C, L, V, P, NH = a.hidden, a.layers, a.vocab, a.positions, a.heads
    F = 4 * C
    w = collections.OrderedDict()

    def mat(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    def ln(name):
        w[name + ".weight"] = (1 + 0.1 * rng.standard_normal(C)).astype(np.float32)
        w[name + ".bias"] = mat(C)

    if a.cls == "gpt2":
        T = "" if a.no_prefix else "transformer."
        w[T + "wte.weight"] = mat(V, C)
        w[T + "wpe.weight"] = mat(P, C)
        for i in range(L):
            p = f"{T}h.{i}."
            ln(p + "ln_1")
            w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = mat(C, 3 * C), mat(3 * C)
            w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = mat(C, C), mat(C)
            ln(p + "ln_2")
            w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = mat(C, F), mat(F)
            w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = mat(F, C), mat(C)
        ln(T + "ln_f")
        cfg = {"architectures": ["GPT2Model" if a.no_prefix else "GPT2LMHeadModel"],
               "model_type": "gpt2", "activation_function": "gelu_new", "n_embd": C,
               "n_layer": L, "n_head": NH, "n_inner": None, "n_positions": P, "n_ctx": P,
               "vocab_size": V, "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
               "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
               "scale_attn_weights": True, "tie_word_embeddings": True,
               "bos_token_id": V - 1, "eos_token_id": V - 1}
    elif a.cls == "bloom":
        T = "" if a.no_prefix else "transformer."
        w[T + "word_embeddings.weight"] = mat(V, C)
        ln(T + "word_embeddings_layernorm")
        for i in range(L):
            p = f"{T}h.{i}."
            ln(p + "input_layernorm")
            w[p + "self_attention.query_key_value.weight"] = mat(3 * C, C)
            w[p + "self_attention.query_key_value.bias"] = mat(3 * C)
            w[p + "self_attention.dense.weight"], w[p + "self_attention.dense.bias"] = mat(C, C), mat(C)
            ln(p + "post_attention_layernorm")
            w[p + "mlp.dense_h_to_4h.weight"], w[p + "mlp.dense_h_to_4h.bias"] = mat(F, C), mat(F)
            w[p + "mlp.dense_4h_to_h.weight"], w[p + "mlp.dense_4h_to_h.bias"] = mat(C, F), mat(C)
        ln(T + "ln_f")
        cfg = {"architectures": ["BloomModel" if a.no_prefix else "BloomForCausalLM"],
               "model_type": "bloom", "hidden_size": C, "n_layer": L, "n_head": NH,
               "vocab_size": V, "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
               "hidden_dropout": 0.0, "attention_dropout": 0.0, "seq_length": P,
               "apply_residual_connection_post_layernorm": False, "slow_but_exact": False,
               "pretraining_tp": 1, "tie_word_embeddings": True}
    else:
        B = "bert."
        w[B + "embeddings.word_embeddings.weight"] = mat(V, C)
        w[B + "embeddings.position_embeddings.weight"] = mat(P, C)
        w[B + "embeddings.token_type_embeddings.weight"] = mat(a.tokentypes, C)
        for i in range(L):
            p = f"{B}encoder.layer.{i}."
            ln(p + "attention.ln")
            for q in ("query", "key", "value"):
                w[p + f"attention.self.{q}.weight"], w[p + f"attention.self.{q}.bias"] = mat(C, C), mat(C)
            w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"] = mat(C, C), mat(C)
            ln(p + "ln")
            w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = mat(F, C), mat(F)
            w[p + "output.dense.weight"], w[p + "output.dense.bias"] = mat(C, F), mat(C)
        ln(B + "encoder.ln")
        w[B + "pooler.dense.weight"], w[B + "pooler.dense.bias"] = mat(C, C), mat(C)
        w["cls.predictions.transform.dense.weight"] = mat(C, C)
        w["cls.predictions.transform.dense.bias"] = mat(C)
        ln("cls.predictions.transform.LayerNorm")
        w["cls.predictions.bias"] = mat(V)
        w["cls.seq_relationship.weight"], w["cls.seq_relationship.bias"] = mat(2, C), mat(2)
        cfg = {"architectures": ["MegatronBertForPreTraining"], "model_type": "megatron-bert",
               "vocab_size": V, "hidden_size": C, "num_hidden_layers": L,
               "num_attention_heads": NH, "intermediate_size": F, "hidden_act": a.gelu,
               "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
               "max_position_embeddings": P, "type_vocab_size": a.tokentypes,
               "initializer_range": 0.02, "layer_norm_eps": 1e-12, "position_embedding_type":
               "absolute", "tie_word_embeddings": True}
    dt = {"f32": "F32", "bf16": "BF16", "f16": "F16"}[a.dtype]
    cfg["torch_dtype"] = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[a.dtype]
    os.makedirs(a.dir, exist_ok=True)
    json.dump(cfg, open(os.path.join(a.dir, "config.json"), "w"), indent=2)
    if a.format == "st":
        st_write(os.path.join(a.dir, "model.safetensors"), w, dt)
    elif a.format == "sharded":
        names = list(w)
        parts = [names[:len(names) // 3], names[len(names) // 3:2 * len(names) // 3],
                 names[2 * len(names) // 3:]]
        wmap, total = {}, 0
        for i, part in enumerate(parts):
            fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(parts))
            st_write(os.path.join(a.dir, fn), {k: w[k] for k in part}, dt)
            for k in part:
                wmap[k] = fn
                total += w[k].size * (4 if dt == "F32" else 2)
        json.dump({"metadata": {"total_size": total}, "weight_map": wmap},
                  open(os.path.join(a.dir, "model.safetensors.index.json"), "w"), indent=2)
    else:
        tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
        sd = collections.OrderedDict((k, torch.tensor(v).to(tdt)) for k, v in w.items())
        if a.cls == "gpt2":
            T = "" if a.no_prefix else "transformer."
            for i in range(L):   # the buffers older GPT-2 files carry
                sd[f"{T}h.{i}.attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
                sd[f"{T}h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
            sd["lm_head.weight"] = sd[T + "wte.weight"]   # tied: one storage
        torch.save(sd, os.path.join(a.dir, "pytorch_model.bin"))


def layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def alibi_slopes(n):   # modeling_bloom.build_alibi_tensor
    cp = 2 ** math.floor(math.log2(n))
    base = 2 ** (-(2 ** -(math.log2(cp) - 3)))
    s = [base ** p for p in range(1, 1 + cp)]
    if cp != n:
        eb = 2 ** (-(2 ** -(math.log2(2 * cp) - 3)))
        s += [eb ** p for p in range(1, 1 + 2 * min(cp, n - cp), 2)]
    return torch.tensor(s, dtype=torch.float64)


def loss(argv):
    d, toks = argv[0], [int(t) for t in argv[1:]]
    c = json.load(open(os.path.join(d, "config.json")))
    w = load_dir(d)
    ids = torch.tensor(toks)
    tgt = torch.tensor(toks[1:] + toks[:1])
    Tn = len(toks)
    causal = torch.tril(torch.ones(Tn, Tn, dtype=torch.bool))
    neg = torch.finfo(torch.float64).min
    if c["model_type"] == "gpt2":
        T = "transformer." if "transformer.wte.weight" in w else ""
        C, NH, eps = c["n_embd"], c["n_head"], c["layer_norm_epsilon"]
        HD = C // NH
        h = w[T + "wte.weight"][ids] + w[T + "wpe.weight"][:Tn]
        for i in range(c["n_layer"]):
            p = f"{T}h.{i}."
            x = layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
            qkv = x @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]   # Conv1D
            q, k, v = (t.view(Tn, NH, HD).transpose(0, 1) for t in qkv.split(C, dim=-1))
            s = (q @ k.transpose(-1, -2)) / math.sqrt(HD)
            s = torch.where(causal, s, torch.tensor(neg, dtype=s.dtype))
            a = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(Tn, C)
            h = h + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            x = layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
            m = gelu_new(x @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
            h = h + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        h = layer_norm(h, w[T + "ln_f.weight"], w[T + "ln_f.bias"], eps)
        logits = h @ w[T + "wte.weight"].T
    else:
        T = "transformer." if "transformer.word_embeddings.weight" in w else ""
        C, NH, eps = c["hidden_size"], c["n_head"], c["layer_norm_epsilon"]
        HD = C // NH
        post = c.get("apply_residual_connection_post_layernorm", False)
        h = w[T + "word_embeddings.weight"][ids]
        h = layer_norm(h, w[T + "word_embeddings_layernorm.weight"],
                       w[T + "word_embeddings_layernorm.bias"], eps)
        alibi = alibi_slopes(NH)[:, None, None] * torch.arange(Tn, dtype=torch.float64)[None, None, :]
        for i in range(c["n_layer"]):
            p = f"{T}h.{i}."
            x = layer_norm(h, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
            res = x if post else h
            fused = x @ w[p + "self_attention.query_key_value.weight"].T + \
                w[p + "self_attention.query_key_value.bias"]
            fused = fused.view(Tn, NH, 3, HD)   # BloomAttention._split_heads
            q, k, v = (fused[:, :, j].transpose(0, 1) for j in range(3))
            s = alibi + (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(HD))
            s = torch.where(causal, s, torch.tensor(neg, dtype=s.dtype))
            a = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(Tn, C)
            h = res + a @ w[p + "self_attention.dense.weight"].T + w[p + "self_attention.dense.bias"]
            x = layer_norm(h, w[p + "post_attention_layernorm.weight"],
                           w[p + "post_attention_layernorm.bias"], eps)
            res = x if post else h
            m = gelu_new(x @ w[p + "mlp.dense_h_to_4h.weight"].T + w[p + "mlp.dense_h_to_4h.bias"])
            h = res + m @ w[p + "mlp.dense_4h_to_h.weight"].T + w[p + "mlp.dense_4h_to_h.bias"]
        h = layer_norm(h, w[T + "ln_f.weight"], w[T + "ln_f.bias"], eps)
        logits = h @ w[T + "word_embeddings.weight"].T
    print("%.9e" % torch.nn.functional.cross_entropy(logits, tgt).item())


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("write", "loss"):
        sys.exit(__doc__)
    torch.set_num_threads(1)
    (write if sys.argv[1] == "write" else loss)(sys.argv[2:])
