#!/usr/bin/python3
"""Megatron-DeepSpeed checkpoints written by the real torch.save, from an lmtk checkpoint, and read
back: the ground truth that lmtk's .pt reader is tested against (tests/ref/mds-format.md says what
every file holds and which source defines it; this file follows that document, not the sources).

  mds-ckpt.py write-ds  STEP OUT [--tp 2 --pp 2 --dp 2]   DeepSpeed pipeline + BF16_Optimizer
              [--optim bf16|fp16-zero|fp16|fp32|universal] (BLOOM's layout: DeepSpeed 0.7.0);
                                                           or fp16 ZeRO-1, fp16 or fp32 without
                                                           ZeRO, or ds_to_universal.py's output
  mds-ckpt.py write-meg STEP OUT [--tp 1 --pp 1]          plain Megatron, model_optim_rng.pt
  mds-ckpt.py check     STEP OUT                           read OUT back with torch.load only and
                                                           compare with the lmtk checkpoint STEP
  mds-ckpt.py dump      OUT FILE.safetensors               OUT read back, whole tensors under
                                                           lmtk's names (what a C reader's
                                                           conversion is compared with)
  mds-ckpt.py globals   FILE.pt...                         every GLOBAL a pickle names (the
                                                           classes a reader must know)
  mds-ckpt.py opcodes   FILE.pt...                         every pickle opcode it uses
  mds-ckpt.py mutate    WHAT FILE.pt                       plant one mistake in FILE.pt (groups:
                                                           DeepSpeed's two parameter groups
                                                           exchanged; groups-meg: Megatron's; ulp:
                                                           one bf16 weight one unit off)
  mds-ckpt.py batch     <LINES                             "NAME COMMAND ARGS [; COMMAND ARGS]..."
                                                           per line, the commands above run in
                                                           this one process (torch loads once),
                                                           in order until one fails; "expect-fail
                                                           COMMAND" must fail.  Prints "ok NAME"
                                                           or "FAIL NAME: why" per line

STEP is an lmtk step directory (SAVE/global_stepN: rank_tpXX_ppYYY.safetensors + manifest.json).
The model is the same: the fp32 master weights and Adam's moments are lmtk's, bit for bit; the
bf16 weights are their round-to-nearest-even.  `check` exits 0 when everything agrees, 1 with the
first disagreement on stderr.  Needs torch (1.13 tested) and numpy; no Megatron, DeepSpeed,
apex or transformers: the few classes real checkpoints pickle by name (megatron.enums
.PositionEmbeddingType, deepspeed's fragment_address) are stood in for under their real names,
so the pickles name exactly what the real ones name.
"""
import argparse
import collections
import dataclasses
import enum
import json
import math
import os
import pickletools
import random
import re
import struct
import sys
import types
import zipfile

import numpy as np
import torch
from torch import serialization

OD = collections.OrderedDict
DS_VERSION = "0.7.0"


# ---- classes real checkpoints pickle by name, under those names ----------------------------------
def _module(name):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        n = ".".join(parts[:i])
        if n not in sys.modules:
            sys.modules[n] = types.ModuleType(n)
            if i > 1:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], sys.modules[n])
    return sys.modules[name]


class PositionEmbeddingType(enum.Enum):   # megatron/enums.py
    rotary = 1
    absolute = 2
    alibi = 3


@dataclasses.dataclass
class fragment_address:                   # deepspeed/runtime/bf16_optimizer.py (0.7.0)
    numel: int
    start: int


class ZeroStageEnum(int, enum.Enum):     # deepspeed/runtime/zero/config.py (0.7.0)
    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3
    max_stage = 3


class DynamicLossScaler:                  # deepspeed/runtime/fp16/loss_scaler.py: the attributes
    def __init__(self, init_scale=2**32, scale_factor=2., scale_window=1000, min_scale=1,
                 delayed_shift=1, consecutive_hysteresis=False, raise_error_at_min_scale=True):
        self.cur_scale = init_scale
        self.cur_iter = 0
        self.last_overflow_iter = -1
        self.scale_factor = scale_factor
        self.scale_window = scale_window
        self.min_scale = min_scale
        self.delayed_shift = delayed_shift
        self.cur_hysteresis = delayed_shift
        self.consecutive_hysteresis = consecutive_hysteresis
        self.raise_error_at_min_scale = raise_error_at_min_scale


for _cls, _mod in ((PositionEmbeddingType, "megatron.enums"),
                   (fragment_address, "deepspeed.runtime.bf16_optimizer"),
                   (ZeroStageEnum, "deepspeed.runtime.zero.config"),
                   (DynamicLossScaler, "deepspeed.runtime.fp16.loss_scaler")):
    _cls.__module__ = _mod
    setattr(_module(_mod), _cls.__name__, _cls)

# Real checkpoints hold GPU tensors: torch.save records 'cuda:N' as their location.  A tagger
# ahead of torch's own gives our CPU tensors the location of the GPU that would have saved them.
_CUDA = {}


def _tag(storage):
    return _CUDA.get(storage.data_ptr())


serialization.register_package(5, _tag, lambda obj, loc: obj if loc.startswith("cuda") else None)


def gpu(t, dev):
    t = t.contiguous().clone()
    _CUDA[t.storage().data_ptr()] = "cuda:%d" % dev
    return t


# ---- the lmtk checkpoint ------------------------------------------------------------------------
VOCAB, COLUMN, ROW, NONE = "vocab", "column", "row", "none"
LAYER = [  # lmtk name suffix (src/ckpt-merge-tp/layout.c), split, Megatron's name in the layer
    ("input_layernorm.weight", NONE, "input_layernorm.weight"),
    ("input_layernorm.bias", NONE, "input_layernorm.bias"),
    ("attention.query_key_value.weight", COLUMN, "self_attention.query_key_value.weight"),
    ("attention.query_key_value.bias", COLUMN, "self_attention.query_key_value.bias"),
    ("attention.dense.weight", ROW, "self_attention.dense.weight"),
    ("attention.dense.bias", NONE, "self_attention.dense.bias"),
    ("post_attention_layernorm.weight", NONE, "post_attention_layernorm.weight"),
    ("post_attention_layernorm.bias", NONE, "post_attention_layernorm.bias"),
    ("mlp.dense_h_to_4h.weight", COLUMN, "mlp.dense_h_to_4h.weight"),
    ("mlp.dense_h_to_4h.bias", COLUMN, "mlp.dense_h_to_4h.bias"),
    ("mlp.dense_4h_to_h.weight", ROW, "mlp.dense_4h_to_h.weight"),
    ("mlp.dense_4h_to_h.bias", NONE, "mlp.dense_4h_to_h.bias"),
]
GROUPS = ("weight", "exp_avg", "exp_avg_sq")


def split_of(name):
    if name == "word_embeddings.weight":
        return VOCAB
    m = re.match(r"layers\.\d+\.(.*)$", name)
    if m:
        return {s: k for s, k, _ in LAYER}[m.group(1)]
    return NONE


def no_decay(name):
    """Megatron's _get_params_for_weight_decay_optimization: layer norms and biases."""
    return name.endswith(".bias") or "layernorm" in name


def st_load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    out = {}
    for k, v in h.items():
        assert v["dtype"] == "F32", (path, k, v["dtype"])
        a = np.frombuffer(b, "<f4", int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0])
        out[k] = a.reshape(v["shape"]).copy()
    return out


def cat(parts, split):
    if split in (VOCAB, COLUMN):
        return np.concatenate(parts, 0)
    if split == ROW:
        return np.concatenate(parts, 1)
    for p in parts[1:]:
        assert np.array_equal(p.view(np.uint32), parts[0].view(np.uint32)), "replicas differ"
    return parts[0]


def cut(a, split, tp, r):
    if split in (VOCAB, COLUMN):
        n = a.shape[0] // tp
        return a[r * n:(r + 1) * n]
    if split == ROW:
        n = a.shape[1] // tp
        return a[:, r * n:(r + 1) * n]
    return a


class Lmtk:
    """An lmtk step directory merged to whole tensors: t[group][name] (group: weight, exp_avg,
    exp_avg_sq); last[group]: the word embeddings' copy on the last stage (= t when PP was 1)."""

    def __init__(self, step):
        self.man = json.load(open(os.path.join(step, "manifest.json")))
        m = self.man["model"]
        self.L, self.h, self.heads = m["num_layers"], m["hidden_size"], m["num_attention_heads"]
        self.ffn, self.vocab, self.padded = m["ffn_hidden_size"], m["vocab_size"], m["padded_vocab_size"]
        self.alibi = m["position_embedding_type"] == "alibi"
        self.embed_ln = bool(m["embed_layernorm"])
        self.iteration = self.man["iteration"]
        shards = {}
        for f in sorted(os.listdir(step)):
            g = re.match(r"rank_tp(\d+)_pp(\d+)\.safetensors$", f)
            if g:
                shards[(int(g.group(2)), int(g.group(1)))] = st_load(os.path.join(step, f))
        tp = 1 + max(r for _, r in shards)
        pps = sorted({s for s, _ in shards})
        self.t = {g: {} for g in GROUPS}
        self.last = {}
        for name in self.names():
            for gi, g in enumerate(GROUPS):
                key = ("" if g == "weight" else g + ".") + name
                stages = [s for s in pps if key in shards[(s, 0)]]
                assert stages, "%s: no shard holds %s" % (step, key)
                whole = [cat([shards[(s, r)][key] for r in range(tp)], split_of(name)) for s in stages]
                self.t[g][name] = whole[0]
                if name == "word_embeddings.weight":
                    self.last[g] = whole[-1]

    def names(self):
        n = ["word_embeddings.weight"]
        if not self.alibi:
            n.append("position_embeddings.weight")
        if self.embed_ln:
            n += ["embed_layernorm.weight", "embed_layernorm.bias"]
        for l in range(self.L):
            n += ["layers.%d.%s" % (l, s) for s, _, _ in LAYER]
        return n + ["final_layernorm.weight", "final_layernorm.bias"]

    def padded_to(self, tp, divisible_by):
        """Megatron's padded vocabulary at this TP; the lmtk one when it already is a multiple."""
        mult = divisible_by * tp
        p = (self.vocab + mult - 1) // mult * mult
        return self.padded if self.padded % mult == 0 else p

    def tensor(self, g, name, padded, last=False):
        """Only the word embeddings have a copy of their own on the last stage; a last-stage
        position embedding (DeepSpeed's EmbeddingPipe builds one, unused) gets the first's."""
        a = self.last[g] if last and name == "word_embeddings.weight" else self.t[g][name]
        if name == "word_embeddings.weight" and a.shape[0] != padded:
            b = np.zeros((padded, a.shape[1]), np.float32)   # re-padded rows are zero
            n = min(padded, a.shape[0])
            b[:n] = a[:n]
            a = b
        return a


# ---- Megatron's state around the tensors ---------------------------------------------------------
def lr_now(s):
    """Megatron's AnnealingLR at s["num_steps"] samples (megatron/learning_rates.py get_lr)."""
    n, w, d = s["num_steps"], s["warmup"], s["decay"]
    if w > 0 and n <= w:
        return s["max_lr"] * n / w
    if s["style"] == "constant":
        return s["max_lr"]
    if n > d:
        return s["min_lr"]
    ratio = (n - w) / (d - w)
    if s["style"] == "linear":
        coeff = 1.0 - ratio
    else:
        coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0)
    return s["min_lr"] + coeff * (s["max_lr"] - s["min_lr"])


def scheduler(lm):
    s = lm.man["scheduler"]
    return {"max_lr": s["max_lr"], "warmup_steps": s["warmup"], "num_steps": s["num_steps"],
            "warmup_tokens": 0, "num_tokens": s["num_tokens"], "decay_style": s["style"],
            "decay_steps": s["decay"], "min_lr": s["min_lr"]}


def megatron_args(lm, tp, pp, dp, deepspeed, padded):
    m, o, s = lm.man["model"], lm.man["optimizer"], lm.man["scheduler"]
    tokens = re.findall(r"\S+", lm.man.get("args", ""))

    def flag(f, default):
        return tokens[tokens.index(f) + 1] if f in tokens[:-1] else default
    gbs = int(flag("--global-batch-size", lm.man["consumed_samples"] // max(1, lm.iteration)))
    a = argparse.Namespace()
    v = dict(
        num_layers=lm.L, hidden_size=lm.h, ffn_hidden_size=lm.ffn, num_attention_heads=lm.heads,
        kv_channels=lm.h // lm.heads, max_position_embeddings=m["max_position_embeddings"],
        make_vocab_size_divisible_by=int(flag("--make-vocab-size-divisible-by", 128)),
        pad_vocab_size_to=None, layernorm_epsilon=m["layernorm_epsilon"],
        sync_tp_duplicated_parameters=False, apply_residual_connection_post_layernorm=False,
        embed_layernorm=lm.embed_ln, openai_gelu=False,
        position_embedding_type=PositionEmbeddingType.alibi if lm.alibi else PositionEmbeddingType.absolute,
        glu_activation=None, attention_dropout=m["attention_dropout"], hidden_dropout=m["hidden_dropout"],
        weight_decay=o["weight_decay"], clip_grad=o["clip_grad"], adam_beta1=o["beta1"],
        adam_beta2=o["beta2"], adam_eps=o["eps"], micro_batch_size=int(flag("--micro-batch-size", 1)),
        global_batch_size=gbs, rampup_batch_size=None, checkpoint_activations=False,
        train_iters=int(flag("--train-iters", lm.iteration)), train_samples=None, train_tokens=None,
        log_interval=int(flag("--log-interval", 100)), exit_interval=None, optimizer="adam",
        seed=m["seed"], init_method_std=m["init_method_std"], lr=s["max_lr"],
        lr_decay_style=s["style"], lr_decay_iters=None, lr_decay_samples=None, lr_decay_tokens=None,
        lr_warmup_fraction=None, lr_warmup_iters=s["warmup"] // gbs, lr_warmup_samples=0,
        min_lr=s["min_lr"], save=None, save_interval=None, load=None, fp16=False, bf16=True,
        loss_scale=None, initial_loss_scale=4294967296, min_loss_scale=1.0, loss_scale_window=1000,
        hysteresis=2, tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=None, distributed_backend="nccl",
        seq_length=m["seq_length"], encoder_seq_length=m["seq_length"], tokenizer_type="GPT2BPETokenizer",
        data_impl="mmap", split=flag("--split", "969, 30, 1"), pp_partition_method=None,
        rank=0, world_size=tp * pp * dp, data_parallel_size=dp, params_dtype=torch.bfloat16,
        padded_vocab_size=padded, consumed_train_samples=lm.man["consumed_samples"],
        consumed_valid_samples=0, consumed_train_tokens=lm.man["consumed_tokens"],
        gigaflos_no_embeds=0, curriculum_learning=False, iteration=lm.iteration,
        deepspeed=deepspeed, deepspeed_config="ds_config.json" if deepspeed else None,
        deepscale=False, deepscale_config=None, deepspeed_mpi=False)
    for k, x in v.items():
        setattr(a, k, x)
    return a


def per_rank(args, rank):
    """The args of the process that saved: Megatron records its global rank (RANK)."""
    a = argparse.Namespace(**vars(args))
    a.rank, a.local_rank = rank, rank % 8
    return a


def ds_config(args):
    return {"train_micro_batch_size_per_gpu": args.micro_batch_size,
            "train_batch_size": args.global_batch_size, "gradient_clipping": args.clip_grad,
            "zero_optimization": {"stage": 0}, "bf16": {"enabled": True},
            "steps_per_print": 2000, "wall_clock_breakdown": False}


def cuda_rng(seed):
    """torch.cuda.get_rng_state(): 800 bytes kept for compatibility, the seed, the Philox offset."""
    return torch.tensor(list(bytes(800) + struct.pack("<QQ", seed, 0)), dtype=torch.uint8)


def rng_states(seed, pp_rank, tp_rank):
    """What Megatron's _set_random_seed(seed + 100 * pp rank) leaves, and mpu's tracker."""
    s = seed + 100 * pp_rank
    np_state = np.random.RandomState(s).get_state()
    return OD([("random_rng_state", random.Random(s).getstate()), ("np_rng_state", np_state),
               ("torch_rng_state", torch.Generator().manual_seed(s).get_state()),
               ("cuda_rng_state", cuda_rng(s)),
               ("rng_tracker_states", {"model-parallel-rng": cuda_rng(s + 2718 + tp_rank)})])


def adam_groups(lm, lr, step, params):
    """apex FusedAdam's param_groups as state_dict() gives them: Megatron's three groups."""
    o = lm.man["optimizer"]
    b = (o["beta1"], o["beta2"])
    g = [OD([("lr", lr), ("bias_correction", True), ("betas", b), ("eps", o["eps"]),
             ("weight_decay", o["weight_decay"]), ("step", step)]) for _ in range(2)]
    g.append(OD([("weight_decay", 0.0), ("lr", lr), ("bias_correction", True), ("betas", b),
                 ("eps", o["eps"]), ("step", step)]))
    for x, p in zip(g, params):
        x["params"] = p
    return [dict(x) for x in g]


def three_groups(names):
    """[first half of the decayed, second half, not decayed], each in module order."""
    wd = [n for n in names if not no_decay(n)]
    return [wd[:len(wd) // 2], wd[len(wd) // 2:], [n for n in names if no_decay(n)]]


def bf16(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.bfloat16)


def save(obj, path, fileobj=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if fileobj:   # DeepSpeed's _save_zero_checkpoint saves through an open file: archive/...
        with open(path, "wb") as f:
            torch.save(obj, f)
    else:
        torch.save(obj, path)


# ---- DeepSpeed pipeline checkpoint (BLOOM) -------------------------------------------------------
def stage_layers(L, pp):
    """Transformer layers per stage: ceil(L/pp) each, the last what remains (DeepSpeed's
    'type:transformer' partition_balanced gives this for the layouts tested here;
    mds-format.md lists where it differs)."""
    c = -(-L // pp)
    return [list(range(s * c, min(L, (s + 1) * c))) for s in range(pp)]


def ds_stage_params(lm, s, pp, layers):
    """(DeepSpeed parameter name, lmtk name, last-stage copy?) in module order of stage s."""
    L = lm.L
    out = []
    if s == 0 or s == pp - 1:   # tied_modules.embed: spec 1 on stage 0, spec L+5 on the last
        last = s == pp - 1 and s != 0
        out.append(("tied_modules.embed.word_embeddings.weight", "word_embeddings.weight", last))
        if lm.embed_ln and s == 0:
            out += [("tied_modules.embed.word_embeddings.norm.weight", "embed_layernorm.weight", False),
                    ("tied_modules.embed.word_embeddings.norm.bias", "embed_layernorm.bias", False)]
        if not lm.alibi:
            out.append(("tied_modules.embed.position_embeddings.weight", "position_embeddings.weight", last))
    for l in layers:
        out += [("%d.%s" % (l + 3, meg), "layers.%d.%s" % (l, suf), False) for suf, _, meg in LAYER]
    if s == pp - 1:
        out += [("%d.weight" % (L + 4), "final_layernorm.weight", False),
                ("%d.bias" % (L + 4), "final_layernorm.bias", False)]
    return out


# The optimizers DeepSpeed 0.7 may save a Megatron-DeepSpeed run with (mds-format.md 2.6, 2.8):
#   bf16       BF16_Optimizer: bf16_zero_pp_rank_D_mp_rank_MM_optim_states.pt, bf16 layer files
#   fp16-zero  fp16 + ZeRO stage 1 (DeepSpeedZeroOptimizer): zero_pp_rank_D_mp_rank_MM_..., fp16
#   fp16       fp16, ZeRO stage 0 (FP16_Optimizer): the state in mp_rank_MM_model_states.pt
#   fp32       neither, ZeRO stage 0: the base optimizer's state in mp_rank_MM, fp32 layer files
OPTIMS = ("bf16", "fp16-zero", "fp16", "fp32")
# the fp16 loss scalers' state the fixtures carry, and what lmtk's manifest makes of it (2.8)
ZERO_SCALER = dict(cur_scale=2048.0, cur_iter=4, last_overflow_iter=1, scale_factor=2.0,
                   scale_window=1000, min_scale=1, delayed_shift=2, cur_hysteresis=1)
FUSED_SCALER = dict(cur_scale=4096.0, cur_iter=4, last_overflow_iter=0, scale_factor=2.0,
                    scale_window=1000)


def lowp(a, optim):
    """The model weights of the layer files: bf16, fp16 or the fp32 itself."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.to(torch.bfloat16) if optim == "bf16" else t.half() if optim.startswith("fp16") else t.clone()


def write_ds(lm, out, tp, pp, dp, divisible_by=128, optim="bf16"):
    assert optim in OPTIMS, optim
    padded = lm.padded_to(tp, divisible_by)
    it = lm.iteration
    tag = "global_step%d" % it
    d = os.path.join(out, tag)
    args = megatron_args(lm, tp, pp, dp, True, padded)
    if optim != "bf16":
        args.bf16, args.fp16 = False, optim.startswith("fp16")
        args.params_dtype = torch.float16 if args.fp16 else torch.float32
    cfg = ds_config(args)
    if optim != "bf16":
        del cfg["bf16"]
        if args.fp16:
            cfg["fp16"] = {"enabled": True, "loss_scale": 0, "loss_scale_window": 1000,
                           "hysteresis": 2, "min_loss_scale": 1, "initial_scale_power": 12}
        cfg["zero_optimization"] = {"stage": 1 if optim == "fp16-zero" else 0}
    lr = lr_now(lm.man["scheduler"])
    per_stage = stage_layers(lm.L, pp)
    # partitions aligned as DeepSpeed aligns them (nccl_start_alignment_factor * dp_world_size)
    align = 2 * dp
    zero = optim in ("bf16", "fp16-zero")
    for s in range(pp):
        params = ds_stage_params(lm, s, pp, per_stage[s])
        for r in range(tp):
            mp = s * tp + r
            dev = lambda d_: (s * dp * tp + d_ * tp + r) % 8   # global rank on 8-GPU nodes
            # the layer files (data-parallel rank 0 writes them): spec index -> state dict
            files = OD()
            for pname, name, last in params:
                if last:
                    continue   # the tied copy on the last stage is a partial(): never saved
                spec, key = pname.split(".", 1)
                if spec == "tied_modules":
                    spec, key = "1", key[len("embed."):]
                a = cut(lm.tensor("weight", name, padded), split_of(name), tp, r)
                files.setdefault(int(spec), OD())[key] = gpu(lowp(a, optim), dev(0))
            for spec, sd in files.items():
                save(sd, os.path.join(d, "layer_%02d-model_%02d-model_states.pt" % (spec, r)))
            # Megatron's groups over the stage's parameters: flat (bf16, fp16) or not (fp32)
            # (by module: the embedding's norm is a LayerNorm, whatever DeepSpeed names it)
            by = {p[0]: p for p in params}
            lmtk_name = {p[1] + ("#last" if p[2] else ""): p[0] for p in params}
            groups = [[lmtk_name[n] for n in g] for g in three_groups(list(lmtk_name))]
            shapes, flat, each = [], {g: [] for g in GROUPS}, {g: [] for g in GROUPS}
            for names in groups:
                sh = OD()
                parts = {g: [] for g in GROUPS}
                for pname in names:
                    _, name, last = by[pname]
                    for g in GROUPS:
                        parts[g].append(cut(lm.tensor(g, name, padded, last), split_of(name), tp, r))
                    sh[pname] = torch.Size(parts["weight"][-1].shape)
                shapes.append(sh)
                n = sum(p.size for p in parts["weight"])
                pad = (align - n % align) % align if zero else 0
                for g in GROUPS:
                    each[g].append(parts[g])
                    flat[g].append(np.concatenate([p.reshape(-1) for p in parts[g]] +
                                                  [np.zeros(pad, np.float32)]))
            # BF16_Optimizer and DeepSpeedZeroOptimizer run one Adam step at start-up (2.6)
            step = it + 1 if zero else it
            for di in range(dp if zero else 0):
                fp32, state, pads, maps = [], OD(), [], []
                for gi, names in enumerate(groups):
                    total = flat["weight"][gi].size
                    ps = total // dp
                    lo, hi = di * ps, (di + 1) * ps
                    used = sum(int(np.prod(shapes[gi][p])) for p in names)
                    pads.append(total - used if di == dp - 1 else 0)
                    # fp16 ZeRO saves the fp32 partition without its padding (2.8)
                    keep = hi - lo - (pads[-1] if optim == "fp16-zero" else 0)
                    fp32.append(gpu(torch.from_numpy(flat["weight"][gi][lo:lo + keep]), dev(di)))
                    state[gi] = OD([(g, gpu(torch.from_numpy(flat[g][gi][lo:hi]), dev(di)))
                                    for g in ("exp_avg", "exp_avg_sq")])
                    m, off = OD(), 0
                    for pname in names:
                        n = int(np.prod(shapes[gi][pname]))
                        a, b = max(off, lo), min(off + n, hi)
                        if a < b:
                            m[pname] = fragment_address(numel=b - a, start=a - lo)
                        off += n
                    maps.append(m)
                base = {"state": dict(state),
                        "param_groups": adam_groups(lm, lr, step, [[0], [1], [2]])}
                if optim == "bf16":
                    osd = OD([("clip_grad", args.clip_grad), ("base_optimizer_state", base),
                              ("single_partition_of_fp32_groups", fp32), ("group_paddings", pads),
                              ("partition_count", [dp] * len(groups)), ("ds_version", DS_VERSION),
                              ("param_slice_mappings", maps)])
                    name = "bf16_zero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (di, mp)
                else:   # stage_1_and_2.py state_dict, 0.7.0
                    sc = DynamicLossScaler()
                    sc.__dict__.update(ZERO_SCALER)
                    osd = OD([("loss_scaler", sc), ("dynamic_loss_scale", True), ("overflow", False),
                              ("clip_grad", args.clip_grad), ("base_optimizer_state", base),
                              ("single_partition_of_fp32_groups", fp32),
                              ("zero_stage", ZeroStageEnum.optimizer_states), ("group_paddings", pads),
                              ("partition_count", [dp] * len(groups)), ("ds_version", DS_VERSION)])
                    name = "zero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (di, mp)
                save(dict(optimizer_state_dict=dict(osd), ds_config=cfg, ds_version=DS_VERSION),
                     os.path.join(d, name), fileobj=True)
            # stage 0: the engine's file holds the optimizer's state dict, no param_shapes (2.8)
            optimizer = None
            if optim == "fp16":   # fused_optimizer.py FP16_Optimizer.state_dict
                base = {"state": {gi: OD([(g, gpu(torch.from_numpy(flat[g][gi]), dev(0)))
                                         for g in ("exp_avg", "exp_avg_sq")]) for gi in range(len(groups))},
                        "param_groups": adam_groups(lm, lr, step, [[0], [1], [2]])}
                optimizer = dict(dynamic_loss_scale=True, cur_scale=FUSED_SCALER["cur_scale"],
                                 cur_iter=FUSED_SCALER["cur_iter"],
                                 last_overflow_iter=FUSED_SCALER["last_overflow_iter"],
                                 scale_factor=FUSED_SCALER["scale_factor"],
                                 scale_window=FUSED_SCALER["scale_window"], optimizer_state_dict=base,
                                 fp32_groups_flat=[gpu(torch.from_numpy(f), dev(0)) for f in flat["weight"]],
                                 clip_grad=args.clip_grad)
            elif optim == "fp32":   # the base optimizer itself: one state per parameter
                st_, ids, i = {}, [], 0
                for gi in range(len(groups)):
                    ids.append([])
                    for j in range(len(each["weight"][gi])):
                        st_[i] = OD([(g, gpu(torch.from_numpy(np.ascontiguousarray(each[g][gi][j])), dev(0)))
                                     for g in ("exp_avg", "exp_avg_sq")])
                        ids[-1].append(i)
                        i += 1
                optimizer = {"state": st_, "param_groups": adam_groups(lm, lr, step, ids)}
            # the engine's file, with Megatron's client state
            st = dict(module=None, buffer_names=[], optimizer=optimizer,
                      param_shapes=shapes if zero else None,
                      lr_scheduler=scheduler(lm), sparse_tensor_module_names=set(),
                      skipped_steps=lm.man.get("skipped_iterations", 0), global_steps=it,
                      global_samples=lm.man["consumed_samples"], dp_world_size=dp,
                      mp_world_size=tp * pp, ds_config=cfg, ds_version=DS_VERSION)
            st.update(args=per_rank(args, s * dp * tp + r), checkpoint_version=3.0, iteration=it,
                      tokens=lm.man["consumed_tokens"],
                      checkpoint_info={"padded_vocab_size": padded, "original_vocab_size": lm.vocab})
            st.update(rng_states(args.seed, s, r))
            save(st, os.path.join(d, "mp_rank_%02d_model_states.pt" % mp))
    with open(os.path.join(d, "zero_to_fp32.py"), "w") as f:   # DeepSpeed copies its script here
        f.write("# stands for DeepSpeed's deepspeed/utils/zero_to_fp32.py, which every checkpoint carries\n")
    with open(os.path.join(out, "latest"), "w") as f:
        f.write(tag)   # DeepSpeed writes the tag without a newline


# ---- DeepSpeed universal checkpoint (ds_to_universal.py) -----------------------------------------
# Megatron-DeepSpeed's tools/convert_checkpoint/ds_to_universal.py (bigscience, 2022) over a bf16
# checkpoint: OUT/latest_universal names STEP_universal, which holds the source's mp_rank_*
# files (copied) and zero/<DeepSpeed parameter name>/{fp32,exp_avg,exp_avg_sq}.pt, each a dict
# {'param': the whole tensor over TP, 'cat_dim': the dim the TP slices were joined on (absent
# for the replicated ones, which are averaged), 'vocab_divisibility_padding_tensor' (word
# embeddings: the last padded row)}.  Position embeddings are skipped, and the last stage's copy
# of the word embeddings (mds-format.md 2.9).
AVERAGED = [r"tied_modules.embed.word_embeddings.norm.weight", r"tied_modules.embed.word_embeddings.norm.bias",
            r"\d+.input_layernorm.weight", r"\d+.input_layernorm.bias", r"\d+.post_attention_layernorm.weight",
            r"\d+.post_attention_layernorm.bias", r"\d+.self_attention.dense.bias", r"\d+.mlp.dense_4h_to_h.bias",
            r"\d+.weight", r"\d+.bias"]
ROW_PARALLEL = ["dense_4h_to_h.weight", "self_attention.dense.weight"]


def write_universal(lm, out, tp, pp, dp, divisible_by=128):
    import shutil
    import tempfile
    padded = lm.padded_to(tp, divisible_by)
    src = tempfile.mkdtemp(prefix="mds-universal.")
    try:
        write_ds(lm, src, tp, pp, dp, divisible_by)
        tag = "global_step%d" % lm.iteration
        d = os.path.join(out, tag + "_universal")
        os.makedirs(d, exist_ok=True)
        names = OD()
        for f in sorted(os.listdir(os.path.join(src, tag))):
            if f.startswith("mp"):
                shutil.copy2(os.path.join(src, tag, f), d)
                for sh in load(os.path.join(src, tag, f))["param_shapes"]:
                    names.update(sh)
        for pname in names:
            if "position_embeddings" in pname:
                continue
            name = ds_to_lmtk(pname, lm.L)
            for g, fn in (("weight", "fp32"), ("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")):
                whole = lm.tensor(g, name, padded)
                slices = [torch.from_numpy(np.ascontiguousarray(cut(whole, split_of(name), tp, r))) for r in range(tp)]
                ck = {}
                if any(re.match(p, pname) for p in AVERAGED):
                    param = sum(slices) / len(slices)
                else:
                    cat_dim = 1 if any(x in pname for x in ROW_PARALLEL) else 0
                    param = torch.cat(slices, dim=cat_dim)
                    ck["cat_dim"] = cat_dim
                if "word_embeddings.weight" in pname:
                    ck["vocab_divisibility_padding_tensor"] = param[-1] if param.shape[0] > lm.vocab else torch.zeros(param.shape[1])
                ck["param"] = param
                save(ck, os.path.join(d, "zero", pname, fn + ".pt"))
        with open(os.path.join(out, "latest_universal"), "w") as f:
            f.write(tag + "_universal")
    finally:
        shutil.rmtree(src, ignore_errors=True)


# ---- plain Megatron checkpoint (GPT-2) -----------------------------------------------------------
def meg_stage_params(lm, s, pp, layers):
    """(path in 'model', lmtk name, last copy?) in module order of stage s (GPTModel.modules())."""
    out = []
    if s == 0:
        E = ("language_model", "embedding")
        out.append((E + ("word_embeddings", "weight"), "word_embeddings.weight", False))
        if lm.embed_ln:
            out += [(E + ("word_embeddings", "norm.weight"), "embed_layernorm.weight", False),
                    (E + ("word_embeddings", "norm.bias"), "embed_layernorm.bias", False)]
        if not lm.alibi:
            out.append((E + ("position_embeddings", "weight"), "position_embeddings.weight", False))
    for i, l in enumerate(layers):   # the encoder's keys count the stage's own layers from 0
        out += [(("language_model", "encoder", "layers.%d.%s" % (i, meg)), "layers.%d.%s" % (l, suf), False)
                for suf, _, meg in LAYER]
    if s == pp - 1:
        out += [(("language_model", "encoder", "final_layernorm.weight"), "final_layernorm.weight", False),
                (("language_model", "encoder", "final_layernorm.bias"), "final_layernorm.bias", False)]
        if pp > 1:
            out.append((("word_embeddings_for_head", "weight"), "word_embeddings.weight", True))
    return out


def module_meta(keys):
    """nn.Module.state_dict()'s _metadata: every module prefix on the way to the keys, version 1."""
    md = OD([("", {"version": 1})])
    for k in keys:
        parts = k.split(".")[:-1]
        for i in range(1, len(parts) + 1):
            md.setdefault(".".join(parts[:i]), {"version": 1})
    return md


def write_meg(lm, out, tp, pp, divisible_by=128):
    if lm.L % pp:
        sys.exit("mds-ckpt: plain Megatron needs num_layers (%d) divisible by PP (%d)" % (lm.L, pp))
    padded = lm.padded_to(tp, divisible_by)
    it = lm.iteration
    d = os.path.join(out, "iter_%07d" % it)
    args = megatron_args(lm, tp, pp, 1, False, padded)
    lr = lr_now(lm.man["scheduler"])
    per_stage = stage_layers(lm.L, pp)
    for s in range(pp):
        params = meg_stage_params(lm, s, pp, per_stage[s])
        for r in range(tp):
            dev = (s * tp + r) % 8
            model = OD()
            for path, name, last in params:
                node = model
                for k in path[:-2]:
                    node = node.setdefault(k, {})
                sd = node.setdefault(path[-2], OD())
                a = cut(lm.tensor("weight", name, padded, last), split_of(name), tp, r)
                sd[path[-1]] = gpu(bf16(a), dev)
            def fix(node):   # plain dicts above the state dicts, OrderedDicts with _metadata below
                for k, v in node.items():
                    if isinstance(v, OD):
                        v._metadata = module_meta(v.keys())
                    elif isinstance(v, dict):
                        fix(v)
            fix(model)
            groups = three_groups([p[1] + ("#last" if p[2] else "") for p in params])
            by = {p[1] + ("#last" if p[2] else ""): p for p in params}
            masters, state, idx, pidx = [], {}, 0, []
            for names in groups:
                ms, ids = [], []
                for key in names:
                    _, name, last = by[key]
                    sp = split_of(name)
                    ms.append(gpu(torch.from_numpy(cut(lm.tensor("weight", name, padded, last), sp, tp, r)), dev))
                    state[idx] = {g: gpu(torch.from_numpy(cut(lm.tensor(g, name, padded, last), sp, tp, r)), dev)
                                  for g in ("exp_avg", "exp_avg_sq")}
                    ids.append(idx)
                    idx += 1
                masters.append(ms)
                pidx.append(ids)
            opt = {"optimizer": {"state": state, "param_groups": adam_groups(lm, lr, it, pidx)},
                   "fp32_from_fp16_params": masters}
            sd = dict(args=per_rank(args, s * tp + r), checkpoint_version=3.0, iteration=it,
                      tokens=lm.man["consumed_tokens"],
                      checkpoint_info={"padded_vocab_size": padded, "original_vocab_size": lm.vocab},
                      model=model, optimizer=opt, lr_scheduler=scheduler(lm))
            sd.update(rng_states(args.seed, s, r))
            sub = "mp_rank_%02d" % r if pp == 1 else "mp_rank_%02d_%03d" % (r, s)
            save(sd, os.path.join(d, sub, "model_optim_rng.pt"))
    with open(os.path.join(out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(it))   # Megatron writes str(iteration), no newline


# ---- reading back: only what mds-format.md documents ---------------------------------------------
def load(path):
    return torch.load(path, map_location="cpu")


def f32(t):
    return t.detach().float().numpy() if t.dtype in (torch.bfloat16, torch.float16) else t.detach().numpy()


def ds_to_lmtk(pname, L):
    """DeepSpeed parameter name -> lmtk name (mds-format.md, 'Names')."""
    if pname.startswith("tied_modules.embed."):
        k = pname[len("tied_modules.embed."):]
        return {"word_embeddings.weight": "word_embeddings.weight",
                "word_embeddings.norm.weight": "embed_layernorm.weight",
                "word_embeddings.norm.bias": "embed_layernorm.bias",
                "position_embeddings.weight": "position_embeddings.weight"}[k]
    spec, key = pname.split(".", 1)
    spec = int(spec)
    if spec == L + 4:
        return "final_layernorm." + key
    assert 3 <= spec < 3 + L, pname
    suf = {meg: s for s, _, meg in LAYER}[key]
    return "layers.%d.%s" % (spec - 3, suf)


def layer_key_to_lmtk(spec, key, L):
    if spec == 1:
        return ds_to_lmtk("tied_modules.embed." + key, L)
    return ds_to_lmtk("%d.%s" % (spec, key), L)


def merge(parts, name):
    """parts[r]: rank r's slice; whole tensor by lmtk's split of name."""
    return cat(parts, split_of(name))


def ds_module_order(a, s, pp, tp, layers):
    """(DeepSpeed parameter name, TP-local shape) of stage s in module order (mds-format.md 2.5),
    for a checkpoint without param_shapes (2.8): from args alone."""
    h, V, L = a.hidden_size, a.padded_vocab_size, a.num_layers
    ffn = a.ffn_hidden_size or 4 * h
    absolute = a.position_embedding_type in (PositionEmbeddingType.absolute, "absolute", 2)
    out = []
    if s == 0 or s == pp - 1:
        out.append(("tied_modules.embed.word_embeddings.weight", (V // tp, h)))
        if s == 0 and a.embed_layernorm:
            out += [("tied_modules.embed.word_embeddings.norm.weight", (h,)),
                    ("tied_modules.embed.word_embeddings.norm.bias", (h,))]
        if absolute:
            out.append(("tied_modules.embed.position_embeddings.weight", (a.max_position_embeddings, h)))
    shape = {"input_layernorm.weight": (h,), "input_layernorm.bias": (h,),
             "self_attention.query_key_value.weight": (3 * h // tp, h),
             "self_attention.query_key_value.bias": (3 * h // tp,),
             "self_attention.dense.weight": (h, h // tp), "self_attention.dense.bias": (h,),
             "post_attention_layernorm.weight": (h,), "post_attention_layernorm.bias": (h,),
             "mlp.dense_h_to_4h.weight": (ffn // tp, h), "mlp.dense_h_to_4h.bias": (ffn // tp,),
             "mlp.dense_4h_to_h.weight": (h, ffn // tp), "mlp.dense_4h_to_h.bias": (h,)}
    for l in layers:
        out += [("%d.%s" % (l + 3, meg), shape[meg]) for _, _, meg in LAYER]
    if s == pp - 1:
        out += [("%d.weight" % (L + 4), (h,)), ("%d.bias" % (L + 4), (h,))]
    return out


def ds_no_decay(pname, L):
    """Megatron's rule by module: LayerNorms (the embedding's norm, the final norm) and biases."""
    return pname.endswith(".bias") or "layernorm" in pname or ".norm." in pname or \
        pname == "%d.weight" % (L + 4)


def ds_rebuilt_shapes(a, opt, pp, tp, units):
    """param_shapes as they would have been, for each stage: its layer count found from the
    units its optimizer state holds (elements of fp16's flat groups, or fp32's parameters),
    every layer being the same size (2.8); grouped as Megatron groups them."""
    unit = (lambda sh: int(np.prod(sh))) if opt == "fp16" else (lambda sh: 1)
    per = sum(unit(sh) for _, sh in ds_module_order(a, 1, 3, tp, [0]) if not _.startswith("tied"))
    first, out = 0, []
    for s in range(pp):
        fixed = sum(unit(sh) for _, sh in ds_module_order(a, s, pp, tp, []))
        n = (units[s] - fixed) // per
        assert n >= 0 and fixed + n * per == units[s], ("stage size", s, units[s], fixed, per)
        params = ds_module_order(a, s, pp, tp, range(first, first + n))
        first += n
        dec = [p for p in params if not ds_no_decay(p[0], a.num_layers)]
        nod = [p for p in params if ds_no_decay(p[0], a.num_layers)]
        groups = [dec[:len(dec) // 2], dec[len(dec) // 2:], nod] if units["ng"] == 3 else [dec, nod]
        out.append([OD((k, torch.Size(sh)) for k, sh in g) for g in groups])
    assert first == a.num_layers, ("layers", first)
    return out


def read_ds(d):
    """{group: {lmtk name: whole array}} for weight, exp_avg, exp_avg_sq, bf16 (the model weights
    as float32, whatever their dtype), the last stage's word-embedding copy in 'last', and the
    counters; from a DeepSpeed checkpoint of any kind write_ds writes (mds-format.md 2.6, 2.8,
    2.9): bf16 or fp16 ZeRO partitions, ZeRO stage 0's optimizer in mp_rank_MM (fp16, fp32), or
    a universal checkpoint."""
    universal = not os.path.exists(os.path.join(d, "latest"))
    tag = open(os.path.join(d, "latest_universal" if universal else "latest")).read().strip()
    d = os.path.join(d, tag)
    files = os.listdir(d)
    mps = sorted(int(m.group(1)) for f in files for m in [re.match(r"mp_rank_(\d+)_model_states\.pt$", f)] if m)
    st0 = load(os.path.join(d, "mp_rank_%02d_model_states.pt" % mps[0]))
    a = st0["args"]
    tp, pp, dp, L = a.tensor_model_parallel_size, a.pipeline_model_parallel_size, st0["dp_world_size"], a.num_layers
    assert len(mps) == tp * pp == st0["mp_world_size"], (mps, tp, pp)
    out = {g: {} for g in GROUPS + ("bf16", "last")}
    parts = {}   # (group, name, last) -> {r: array}
    prefix = "bf16_" if any(f.startswith("bf16_zero_") for f in files) else ""
    rebuilt = None
    if st0["param_shapes"] is None:   # ZeRO stage 0: which optimizer, and the stages' sizes
        o0 = st0["optimizer"]
        opt = "fp16" if "fp32_groups_flat" in o0 else "fp32"
        units = {"ng": len(o0["fp32_groups_flat"] if opt == "fp16" else o0["param_groups"])}
        for s in range(pp):
            o = load(os.path.join(d, "mp_rank_%02d_model_states.pt" % (s * tp)))["optimizer"]
            units[s] = sum(x.numel() for x in o["fp32_groups_flat"]) if opt == "fp16" else \
                sum(len(g["params"]) for g in o["param_groups"])
        rebuilt = ds_rebuilt_shapes(a, opt, pp, tp, units)
    for s in range(pp):
        for r in range(tp):
            mp = s * tp + r
            st = load(os.path.join(d, "mp_rank_%02d_model_states.pt" % mp))
            shapes = st["param_shapes"] if rebuilt is None else rebuilt[s]
            flats = []   # per group: {buffer: the group's flat array, padding included}, padding
            if universal:
                for sh in shapes:
                    for pname, size in sh.items():
                        if "position_embeddings" in pname:
                            continue   # ds_to_universal.py skips them
                        name = ds_to_lmtk(pname, L)
                        last = pname.startswith("tied_modules.") and s == pp - 1 and s != 0
                        for g, fn in (("weight", "fp32"), ("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")):
                            ck = load(os.path.join(d, "zero", pname, fn + ".pt"))
                            w = ck["param"]
                            if tuple(w.shape) != tuple(size):
                                w = w.chunk(tp, ck.get("cat_dim", 0))[r]
                            assert tuple(w.shape) == tuple(size), (pname, fn, w.shape, size)
                            parts.setdefault((g, name, last), {})[r] = f32(w)
                continue
            if st["param_shapes"] is None and opt == "fp16":   # FP16_Optimizer: one flat group each
                o = st["optimizer"]
                for gi in range(len(shapes)):
                    flats.append(({"weight": f32(o["fp32_groups_flat"][gi]),
                                   "exp_avg": f32(o["optimizer_state_dict"]["state"][gi]["exp_avg"]),
                                   "exp_avg_sq": f32(o["optimizer_state_dict"]["state"][gi]["exp_avg_sq"])}, 0))
            elif st["param_shapes"] is None:   # the base optimizer: a state per parameter
                o = st["optimizer"]
                for gi, sh in enumerate(shapes):
                    ids = o["param_groups"][gi]["params"]
                    assert len(ids) == len(sh), ("group size", gi)
                    for j, (pname, size) in enumerate(sh.items()):
                        if pname.startswith("tied_modules.embed.position") and s == pp - 1 and s != 0:
                            continue
                        name = ds_to_lmtk(pname, L)
                        last = pname.startswith("tied_modules.") and s == pp - 1 and s != 0
                        for g in ("exp_avg", "exp_avg_sq"):
                            x = o["state"][ids[j]][g]
                            assert tuple(x.shape) == tuple(size), (pname, g)
                            parts.setdefault((g, name, last), {})[r] = f32(x)
                continue   # the masters: the fp32 layer files, below
            else:
                osds = [load(os.path.join(d, "%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (prefix, di, mp)))["optimizer_state_dict"]
                        for di in range(dp)]
                for gi, sh in enumerate(shapes):
                    flat = {}
                    pad = osds[-1]["group_paddings"][gi]
                    for g in GROUPS:
                        chunks = []
                        for di, o in enumerate(osds):
                            assert o["partition_count"][gi] == dp
                            if g == "weight":
                                chunks.append(f32(o["single_partition_of_fp32_groups"][gi]))
                                if not prefix and di == dp - 1:   # fp16 ZeRO saves it unpadded
                                    chunks.append(np.zeros(pad, np.float32))
                            else:
                                chunks.append(f32(o["base_optimizer_state"]["state"][gi][g]))
                        flat[g] = np.concatenate(chunks)
                    assert all(f.size == flat["weight"].size for f in flat.values()), "partition sizes"
                    ps = flat["weight"].size // dp
                    off = 0
                    for pname, size in sh.items():
                        n = int(np.prod(size))
                        for di, o in enumerate(osds):   # the slice mapping agrees with the offsets
                            lo, hi = di * ps, (di + 1) * ps
                            a_, b_ = max(off, lo), min(off + n, hi)
                            mp_ = o.get("param_slice_mappings", [{}] * len(shapes))[gi]
                            if "param_slice_mappings" in o:
                                if a_ < b_:
                                    fa = mp_[pname]
                                    assert (fa.start, fa.numel) == (a_ - lo, b_ - a_), (pname, di, fa)
                                else:
                                    assert pname not in mp_, (pname, di)
                        off += n
                    flats.append((flat, pad))
            for gi, sh in enumerate(shapes):
                flat, pad = flats[gi]
                off = 0
                for pname, size in sh.items():
                    n = int(np.prod(size))
                    if not (pname.startswith("tied_modules.embed.position") and s == pp - 1 and s != 0):
                        name = ds_to_lmtk(pname, L)
                        last = pname.startswith("tied_modules.") and s == pp - 1 and s != 0
                        for g in GROUPS:
                            parts.setdefault((g, name, last), {})[r] = flat[g][off:off + n].reshape(tuple(size))
                    off += n
                assert off + pad == flat["weight"].size, ("padding", gi, off, pad)
                assert not flat["weight"][off:].any() and not flat["exp_avg"][off:].any()
    for f in files:
        m = re.match(r"layer_(\d+)-model_(\d+)-model_states\.pt$", f)
        if m:
            spec, r = int(m.group(1)), int(m.group(2))
            for key, t in load(os.path.join(d, f)).items():
                want = torch.bfloat16 if prefix else torch.float32 if rebuilt and opt == "fp32" else torch.float16
                assert t.dtype == want, (f, key, t.dtype)
                name = layer_key_to_lmtk(spec, key, L)
                parts.setdefault(("bf16", name, False), {})[r] = f32(t)
                if t.dtype == torch.float32:   # fp32 without ZeRO: the weights are the masters
                    parts.setdefault(("weight", name, False), {})[r] = f32(t)
                    if name == "word_embeddings.weight" and pp > 1:
                        parts.setdefault(("weight", name, True), {})[r] = f32(t)
    for (g, name, last), p in parts.items():
        assert sorted(p) == list(range(tp)), (g, name, sorted(p))
        whole = merge([p[r] for r in range(tp)], name)
        if last:
            out["last"][(g, name)] = whole
        else:
            out[g][name] = whole
    meta = {"iteration": st0["iteration"], "global_steps": st0["global_steps"],
            "consumed_train_samples": a.consumed_train_samples, "global_samples": st0["global_samples"],
            "tokens": st0["tokens"], "tp": tp, "pp": pp, "dp": dp, "padded_vocab_size": a.padded_vocab_size,
            "weights": "bf16" if prefix else "fp32" if rebuilt and opt == "fp32" else "fp16",
            "universal": universal}
    return out, meta


def read_meg(d):
    it = open(os.path.join(d, "latest_checkpointed_iteration.txt")).read().strip()
    d = os.path.join(d, "iter_%07d" % int(it))
    subs = sorted(os.listdir(d))
    first = load(os.path.join(d, subs[0], "model_optim_rng.pt"))
    a = first["args"]
    tp, pp, L = a.tensor_model_parallel_size, a.pipeline_model_parallel_size, a.num_layers
    assert len(subs) == tp * pp and L % pp == 0, (subs, tp, pp, L)
    parts = {}
    for s in range(pp):
        for r in range(tp):
            sub = "mp_rank_%02d" % r if pp == 1 else "mp_rank_%02d_%03d" % (r, s)
            sd = load(os.path.join(d, sub, "model_optim_rng.pt"))
            names = []   # the model's keys flattened in order = the optimizer's parameter order
            model = sd["model"]
            lm_ = model["language_model"]
            emb = lm_.get("embedding", {})
            for k in emb.get("word_embeddings", {}):
                names.append(({"weight": "word_embeddings.weight", "norm.weight": "embed_layernorm.weight",
                               "norm.bias": "embed_layernorm.bias"}[k], False, emb["word_embeddings"][k]))
            if "position_embeddings" in emb:
                names.append(("position_embeddings.weight", False, emb["position_embeddings"]["weight"]))
            first_layer = s * (L // pp)   # Megatron's stages hold L/PP layers each
            for k, t in model["language_model"]["encoder"].items():
                m = re.match(r"layers\.(\d+)\.(.*)$", k)
                if m:
                    suf = {meg: x for x, _, meg in LAYER}[m.group(2)]
                    names.append(("layers.%d.%s" % (first_layer + int(m.group(1)), suf), False, t))
                else:
                    names.append((k, False, t))
            if "word_embeddings_for_head" in model:
                names.append(("word_embeddings.weight", True, model["word_embeddings_for_head"]["weight"]))
            for name, last, t in names:
                assert t.dtype == torch.bfloat16
                parts.setdefault(("bf16", name, last), {})[r] = f32(t)
            groups = three_groups([n for n, _, _ in names])
            opt = sd["optimizer"]
            lasts = {n: l for n, l, _ in names}
            for gi, g in enumerate(groups):
                assert len(opt["fp32_from_fp16_params"][gi]) == len(g)
                assert len(opt["optimizer"]["param_groups"][gi]["params"]) == len(g)
                for j, name in enumerate(g):
                    pid = opt["optimizer"]["param_groups"][gi]["params"][j]
                    key = (name, lasts[name])
                    parts.setdefault(("weight",) + key, {})[r] = f32(opt["fp32_from_fp16_params"][gi][j])
                    for m_ in ("exp_avg", "exp_avg_sq"):
                        parts.setdefault((m_,) + key, {})[r] = f32(opt["optimizer"]["state"][pid][m_])
    out = {g: {} for g in GROUPS + ("bf16", "last")}
    for (g, name, last), p in parts.items():
        assert sorted(p) == list(range(tp)), (g, name)
        whole = merge([p[r] for r in range(tp)], name)
        if last:
            out["last"][(g, name)] = whole
        else:
            out[g][name] = whole
    meta = {"iteration": first["iteration"], "consumed_train_samples": a.consumed_train_samples,
            "tokens": first["tokens"], "tp": tp, "pp": pp, "padded_vocab_size": a.padded_vocab_size}
    return out, meta


# ---- checks --------------------------------------------------------------------------------------
def rne_bf16(a):
    """Round-to-nearest-even of fp32 to bf16, returned as the float32 it stands for (no NaNs)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def same(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def hf_rules(d, L, tp):
    """transformers' convert_bloom_original_checkpoint_to_pytorch, its rules transcribed: the
    layer files of model_00, sorted; each merged over the TP ranks (layer norms and row-parallel
    biases averaged, dense/4h_to_h weights cat on dim 1, the rest on dim 0); keys renamed,
    h.<file's layer number - 3>."""
    avg = ["word_embeddings_layernorm.weight", "word_embeddings_layernorm.bias", "input_layernorm.weight",
           "input_layernorm.bias", "post_attention_layernorm.weight", "post_attention_layernorm.bias",
           "self_attention.dense.bias", "mlp.dense_4h_to_h.bias", "ln_f.weight", "ln_f.bias"]
    row = ["mlp.dense_4h_to_h.weight", "self_attention.dense.weight"]
    ren = {"word_embeddings.weight": "word_embeddings.weight",
           "word_embeddings.norm.weight": "word_embeddings_layernorm.weight",
           "word_embeddings.norm.bias": "word_embeddings_layernorm.bias",
           "weight": "ln_f.weight", "bias": "ln_f.bias"}
    out = {}
    for f in sorted(x for x in os.listdir(d) if x.startswith("layer") and "model_00" in x):
        tensors = None
        for i in range(tp):
            temp = torch.load(os.path.join(d, f.replace("model_00", "model_0%d" % i)), map_location="cpu",
                              weights_only=True)   # as transformers loads them: tensors only
            num = int(re.match(r".*layer_(\d*).*", f)[1])
            temp = {ren.get(k, "h.%d.%s" % (num - 3, k)): v for k, v in temp.items()}
            if tensors is None:
                tensors = temp
            else:
                for k in tensors:
                    if any(k.endswith(e) for e in avg):
                        tensors[k] = tensors[k] + temp[k]
                    else:
                        tensors[k] = torch.cat([tensors[k], temp[k]], dim=1 if any(x in k for x in row) else 0)
        for k in tensors:
            if any(k.endswith(e) for e in avg):
                tensors[k] = tensors[k] / tp
        out.update(tensors)
    want = {"word_embeddings.weight", "word_embeddings_layernorm.weight", "word_embeddings_layernorm.bias",
            "ln_f.weight", "ln_f.bias"}
    for l in range(L):
        want |= {"h.%d.%s.%s" % (l, m, w) for m in ("input_layernorm", "self_attention.query_key_value",
                 "self_attention.dense", "post_attention_layernorm", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h")
                 for w in ("weight", "bias")}
    return out, want


def hf_name(name):
    if name == "embed_layernorm.weight":
        return "word_embeddings_layernorm.weight"
    if name == "embed_layernorm.bias":
        return "word_embeddings_layernorm.bias"
    if name.startswith("final_layernorm."):
        return "ln_f." + name.split(".")[1]
    m = re.match(r"layers\.(\d+)\.(.*)$", name)
    if m:
        return "h.%s.%s" % (m.group(1), {s: meg for s, _, meg in LAYER}[m.group(2)])
    return name


def check(step, d):
    lm = Lmtk(step)
    ds = not os.path.exists(os.path.join(d, "latest_checkpointed_iteration.txt"))
    got, meta = read_ds(d) if ds else read_meg(d)
    padded = meta["padded_vocab_size"]
    bad = []
    for g in GROUPS:
        for name in lm.names():
            want = lm.tensor(g, name, padded)
            if name not in got[g]:
                bad.append("%s %s: missing" % (g, name))
            elif not same(got[g][name], want):
                bad.append("%s %s: differs from the lmtk checkpoint" % (g, name))
        if meta["pp"] > 1:
            if not same(got["last"].get((g, "word_embeddings.weight"), np.zeros(0)),
                        lm.tensor(g, "word_embeddings.weight", padded, True)):
                bad.append("%s word_embeddings.weight (last stage's copy): differs" % g)
    wd = meta.get("weights", "bf16")
    rnd = {"bf16": rne_bf16, "fp16": lambda x: x.astype(np.float16).astype(np.float32), "fp32": lambda x: x}[wd]
    for name in lm.names():
        if meta.get("universal"):
            break   # no model weights: the masters are them
        if name not in got["bf16"]:
            bad.append("%s %s: missing" % (wd, name))
        elif not same(got["bf16"][name], rnd(lm.tensor("weight", name, padded))):
            bad.append("%s %s: not the round-to-nearest-even of the fp32 master" % (wd, name))
    if meta["iteration"] != lm.iteration:
        bad.append("iteration %s, lmtk %s" % (meta["iteration"], lm.iteration))
    if meta["consumed_train_samples"] != lm.man["consumed_samples"]:
        bad.append("consumed_train_samples %s, lmtk %s" % (meta["consumed_train_samples"], lm.man["consumed_samples"]))
    if meta["tokens"] != lm.man["consumed_tokens"]:
        bad.append("tokens %s, lmtk %s" % (meta["tokens"], lm.man["consumed_tokens"]))
    if ds and lm.alibi and lm.embed_ln and wd == "bf16" and not meta.get("universal"):
        tag = open(os.path.join(d, "latest")).read()
        hf, want = hf_rules(os.path.join(d, tag), lm.L, meta["tp"])
        if set(hf) != want:
            bad.append("HF's converter: keys %s" % sorted(set(hf) ^ want)[:6])
        tp = meta["tp"]
        for name in lm.names():
            k = hf_name(name)
            if k not in hf:
                continue
            want = rne_bf16(lm.tensor("weight", name, padded))
            if split_of(name) == NONE and tp & (tp - 1):
                # HF averages replicas in bf16: (x + x + x) / 3 rounds; exact only for TP = 2^k
                ok_ = np.allclose(f32(hf[k]), want, rtol=2.0 ** -7, atol=0)
            else:
                ok_ = same(f32(hf[k]), want)
            if not ok_:
                bad.append("HF's converter: %s (from %s) differs" % (k, name))
    for b in bad[:10]:
        print("mds-ckpt: %s: %s" % (d, b), file=sys.stderr)
    return 1 if bad else 0


def dump(d, path):
    """The checkpoint read back, whole tensors under lmtk's names, as one safetensors file:
    NAME (fp32 master), exp_avg.NAME, exp_avg_sq.NAME (F32), bf16.NAME (BF16, the model weights),
    last.NAME... (the last stage's own copies, PP > 1); the counters in __metadata__."""
    ds = not os.path.exists(os.path.join(d, "latest_checkpointed_iteration.txt"))
    got, meta = read_ds(d) if ds else read_meg(d)
    items = []
    for g, prefix in (("weight", ""), ("exp_avg", "exp_avg."), ("exp_avg_sq", "exp_avg_sq.")):
        items += [(prefix + n, "F32", a) for n, a in got[g].items()]
    items += [("bf16." + n, "BF16", a) for n, a in got["bf16"].items()]
    items += [("last." + ("" if g == "weight" else g + ".") + n, "F32", a) for (g, n), a in got["last"].items()]
    h, pos, blobs = {"__metadata__": {k: str(v) for k, v in meta.items()}}, 0, []
    for k, dt, a in items:
        raw = (np.ascontiguousarray(a, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes() \
            if dt == "BF16" else np.ascontiguousarray(a, "<f4").tobytes()
        h[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [pos, pos + len(raw)]}
        pos += len(raw)
        blobs.append(raw)
    hb = json.dumps(h, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def globals_of(path, opcodes=False):
    """The GLOBALs (or the opcodes) of a .pt file's pickle, sorted."""
    z = zipfile.ZipFile(path)
    pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
    names = set()
    for op, arg, _ in pickletools.genops(z.read(pkl)):
        if opcodes:
            names.add(op.name)
        elif op.name == "GLOBAL":
            names.add(arg.replace(" ", "."))
    return pkl, sorted(names)


def mutate(what, path):
    sd = torch.load(path, map_location="cpu")
    if what == "groups":      # the two weight-decay halves exchanged, names and all
        o = sd["optimizer_state_dict"]
        f = o["single_partition_of_fp32_groups"]; f[0], f[1] = f[1], f[0]
        s = o["base_optimizer_state"]["state"]; s[0], s[1] = s[1], s[0]
    elif what == "groups-meg":
        o = sd["optimizer"]
        f = o["fp32_from_fp16_params"]; f[0], f[1] = f[1], f[0]
    elif what == "ulp":       # one bf16 weight one unit off
        k = next(iter(sd)); t = sd[k].view(torch.int16); t.view(-1)[7] += 1
    else:
        raise ValueError("mutate: no mistake named %r" % what)
    with open(path, "wb") as fp:
        torch.save(sd, fp)


def batch(lines):
    import contextlib
    import io
    for line in lines:
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        name, rest = words[0], words[1:]
        cmds, cur = [], []
        for w in rest + [";"]:
            if w == ";":
                cmds.append(cur) if cur else None
                cur = []
            else:
                cur.append(w)
        verdict = None
        for argv in cmds:
            want_fail = argv[0] == "expect-fail"
            argv = argv[1:] if want_fail else argv
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                try:
                    rc = main(argv)
                except (Exception, SystemExit) as e:  # a command that raises has failed
                    print("%s: %s" % (type(e).__name__, e), file=sys.stderr)
                    rc = 1
            why = " ".join(err.getvalue().strip().splitlines()[-3:])
            if want_fail and not rc:
                verdict = "FAIL %s: the command passed: %s" % (name, " ".join(argv))
            elif not want_fail and rc:
                verdict = "FAIL %s: %s: exit %s: %s" % (name, argv[0], rc, why)
            if verdict:
                break
        print(verdict or "ok %s" % name)
        sys.stdout.flush()
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write-ds")
    w.add_argument("step"), w.add_argument("out")
    w.add_argument("--tp", type=int, default=2), w.add_argument("--pp", type=int, default=2)
    w.add_argument("--dp", type=int, default=2)
    w.add_argument("--optim", choices=OPTIMS + ("universal",), default="bf16")
    w = sub.add_parser("write-meg")
    w.add_argument("step"), w.add_argument("out")
    w.add_argument("--tp", type=int, default=1), w.add_argument("--pp", type=int, default=1)
    c = sub.add_parser("check")
    c.add_argument("step"), c.add_argument("out")
    u = sub.add_parser("dump")
    u.add_argument("out"), u.add_argument("file")
    g = sub.add_parser("globals")
    g.add_argument("files", nargs="+")
    g = sub.add_parser("opcodes")
    g.add_argument("files", nargs="+")
    m = sub.add_parser("mutate")
    m.add_argument("what"), m.add_argument("file")
    sub.add_parser("batch")
    a = p.parse_args(argv)
    if a.cmd == "batch":
        return batch(sys.stdin)
    if a.cmd == "mutate":
        mutate(a.what, a.file)
    elif a.cmd == "write-ds" and a.optim == "universal":
        write_universal(Lmtk(a.step), a.out, a.tp, a.pp, a.dp)
    elif a.cmd == "write-ds":
        write_ds(Lmtk(a.step), a.out, a.tp, a.pp, a.dp, optim=a.optim)
    elif a.cmd == "write-meg":
        write_meg(Lmtk(a.step), a.out, a.tp, a.pp)
    elif a.cmd == "check":
        try:
            return check(a.step, a.out)
        except (AssertionError, KeyError, FileNotFoundError, ValueError, IndexError) as e:
            print("mds-ckpt: %s: structure not as documented: %s %s" % (a.out, type(e).__name__, e), file=sys.stderr)
            return 1
    elif a.cmd == "dump":
        dump(a.out, a.file)
    else:
        for f in a.files:
            pkl, names = globals_of(f, a.cmd == "opcodes")
            print("%s (%s): %s" % (os.path.basename(f), pkl, " ".join(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
