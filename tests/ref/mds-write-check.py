#!/usr/bin/python3
"""Checks a Megatron-DeepSpeed checkpoint that ckpt-merge-tp --format megatron-deepspeed wrote
against what Megatron-DeepSpeed and DeepSpeed 0.7 expect of one (tests/ref/mds-format.md 1, 2),
with torch.load alone, knowing nothing of the C writer: the files and their names, the zip
container as torch writes it, every pickle loaded with weights_only=False (as Megatron loads
them), the args Namespace's fields and counters, the RNG states as Megatron's seeding leaves
them (compared with Python's, numpy's and torch's own generators), param_shapes in DeepSpeed's
module order and Megatron's three groups with TP-local shapes, and the ZeRO partitions' sizes,
paddings and counts as DeepSpeed computes them; fp16: ZeRO stage 1's fields and the loss
scaler's state as lmtk's manifest holds it.  The tensors' values are mds-ckpt.py check's job.

  mds-write-check.py STEP OUT PRECISION TP PP DP      PRECISION bf16 or fp16
Exit 0 when all holds, 1 with each disagreement on stderr."""
import importlib.util
import json
import os
import random
import re
import sys
import zipfile

import numpy as np
import torch

# the classes real checkpoints name (megatron.enums ..., deepspeed ...) stood in for by mds-ckpt.py
_spec = importlib.util.spec_from_file_location("mds", os.path.join(os.path.dirname(__file__), "mds-ckpt.py"))
mds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mds)

bad = []


def want(cond, what):
    if not cond:
        bad.append(what)
    return cond


def load(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:   # torch < 1.13 has no weights_only: it always unpickles everything
        return torch.load(path, map_location="cpu")


def container(path):
    """torch's zip: every member stored, data 64-byte aligned, one folder, data.pkl and version."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        top = {n.split("/")[0] for n in names}
        want(len(top) == 1, "%s: members under %s, not one folder" % (path, sorted(top)))
        arch = names[0].split("/")[0]
        want(arch + "/data.pkl" in names and arch + "/version" in names,
             "%s: no data.pkl or version" % path)
        want(z.read(arch + "/version") == b"3\n", "%s: version %r" % (path, z.read(arch + "/version")))
        want(z.testzip() is None, "%s: a member's CRC is wrong" % path)
        raw = open(path, "rb").read()
        for i in z.infolist():
            want(i.compress_type == zipfile.ZIP_STORED, "%s: %s compressed" % (path, i.filename))
            nl, xl = int.from_bytes(raw[i.header_offset + 26:i.header_offset + 28], "little"), \
                int.from_bytes(raw[i.header_offset + 28:i.header_offset + 30], "little")
            start = i.header_offset + 30 + nl + xl
            want(start % 64 == 0, "%s: %s's data at %d, not a multiple of 64" % (path, i.filename, start))
        return arch


def main(step, out, precision, tp, pp, dp):
    lm = mds.Lmtk(step)
    m = lm.man
    it = m["iteration"]
    tag = "global_step%d" % it
    want(open(os.path.join(out, "latest"), "rb").read() == tag.encode(), "latest is not %r" % tag)
    d = os.path.join(out, tag)
    padded = lm.padded_to(tp, 128)
    layers = mds.stage_layers(lm.L, pp)
    pre = "bf16_" if precision == "bf16" else ""
    files = set(os.listdir(d))
    expect = set()
    for s in range(pp):
        specs = ([1] if s == 0 else []) + [l + 3 for l in layers[s]] + ([lm.L + 4] if s == pp - 1 else [])
        for r in range(tp):
            expect |= {"layer_%02d-model_%02d-model_states.pt" % (x, r) for x in specs}
            expect.add("mp_rank_%02d_model_states.pt" % (s * tp + r))
            expect |= {"%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (pre, x, s * tp + r) for x in range(dp)}
    want(files == expect, "files: missing %s, extra %s" % (sorted(expect - files)[:4], sorted(files - expect)[:4]))
    lowp = torch.bfloat16 if precision == "bf16" else torch.float16
    seed = m["model"]["seed"]
    paddings_seen = 0
    for f in sorted(files):
        arch = container(os.path.join(d, f))
        want(arch == ("archive" if f.endswith("_optim_states.pt") else f[:-3]),
             "%s: folder %s (torch.save names it after the file, or 'archive' for an open file)" % (f, arch))
    for s in range(pp):
        params = mds.ds_stage_params(lm, s, pp, layers[s])
        for r in range(tp):
            mp = s * tp + r
            for x in [f for f in files if re.match(r"layer_\d+-model_%02d-" % r, f)]:
                for k, t in load(os.path.join(d, x)).items():
                    want(t.dtype == lowp, "%s: %s is %s" % (x, k, t.dtype))
            st = load(os.path.join(d, "mp_rank_%02d_model_states.pt" % mp))
            for k in ("module", "buffer_names", "optimizer", "param_shapes", "lr_scheduler",
                      "sparse_tensor_module_names", "skipped_steps", "global_steps", "global_samples",
                      "dp_world_size", "mp_world_size", "ds_config", "ds_version", "args",
                      "checkpoint_version", "iteration", "tokens", "checkpoint_info", "random_rng_state",
                      "np_rng_state", "torch_rng_state", "cuda_rng_state", "rng_tracker_states"):
                want(k in st, "mp_rank_%02d: no %s" % (mp, k))
            want(st["module"] is None and st["optimizer"] is None and st["buffer_names"] == [],
                 "mp_rank_%02d: module/optimizer not None under the pipeline engine with ZeRO" % mp)
            want((st["iteration"], st["global_steps"], st["dp_world_size"], st["mp_world_size"],
                  st["checkpoint_version"], st["tokens"], st["global_samples"], st["skipped_steps"]) ==
                 (it, it, dp, tp * pp, 3.0, m["consumed_tokens"], m["consumed_samples"], m["skipped_iterations"]),
                 "mp_rank_%02d: counters" % mp)
            want(st["checkpoint_info"] == {"padded_vocab_size": padded, "original_vocab_size": lm.vocab},
                 "mp_rank_%02d: checkpoint_info %s" % (mp, st["checkpoint_info"]))
            a = st["args"]
            want(type(a).__name__ == "Namespace", "args is a %s" % type(a))
            for k in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
                      "max_position_embeddings", "padded_vocab_size", "make_vocab_size_divisible_by",
                      "position_embedding_type", "embed_layernorm", "layernorm_epsilon",
                      "apply_residual_connection_post_layernorm", "glu_activation", "openai_gelu",
                      "seq_length", "micro_batch_size", "global_batch_size", "rampup_batch_size",
                      "tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size",
                      "seed", "init_method_std", "hidden_dropout", "attention_dropout", "lr", "min_lr",
                      "lr_decay_style", "lr_warmup_iters", "lr_warmup_samples", "lr_decay_iters",
                      "lr_decay_samples", "train_iters", "train_samples", "weight_decay", "adam_beta1",
                      "adam_beta2", "adam_eps", "clip_grad", "bf16", "fp16", "params_dtype",
                      "consumed_train_samples", "consumed_valid_samples", "consumed_train_tokens"):
                want(hasattr(a, k), "args has no %s" % k)
            want((a.num_layers, a.hidden_size, a.ffn_hidden_size, a.num_attention_heads, a.padded_vocab_size,
                  a.tensor_model_parallel_size, a.pipeline_model_parallel_size, a.data_parallel_size,
                  a.world_size, a.seed) == (lm.L, lm.h, lm.ffn, lm.heads, padded, tp, pp, dp, tp * pp * dp, seed),
                 "args: model or layout")
            want((a.consumed_train_samples, a.consumed_valid_samples, a.consumed_train_tokens, a.iteration) ==
                 (m["consumed_samples"], (m.get("valid_positions") or [0])[0], m["consumed_tokens"], it),
                 "args: consumed samples %s" % ((a.consumed_train_samples, a.consumed_valid_samples),))
            want((a.bf16, a.fp16, a.params_dtype) == (precision == "bf16", precision == "fp16", lowp),
                 "args: precision %s" % ((a.bf16, a.fp16, a.params_dtype),))
            want(a.position_embedding_type.name == ("alibi" if lm.alibi else "absolute"), "args: positions")
            want(a.embed_layernorm == lm.embed_ln and a.apply_residual_connection_post_layernorm is False and
                 a.glu_activation is None, "args: the model's options")
            sc = m["scheduler"]
            want(st["lr_scheduler"] == {"max_lr": sc["max_lr"], "warmup_steps": sc["warmup"],
                                        "num_steps": sc["num_steps"], "warmup_tokens": sc["warmup_tokens"],
                                        "num_tokens": sc["num_tokens"], "decay_style": sc["style"],
                                        "decay_steps": sc["decay"], "min_lr": sc["min_lr"]},
                 "lr_scheduler %s" % st["lr_scheduler"])
            # RNG: Megatron's _set_random_seed(seed + 100 * pp rank), mpu's seed + 2718 + tp rank
            ps = seed + 100 * s
            want(st["random_rng_state"] == random.Random(ps).getstate(), "random_rng_state")
            n = np.random.RandomState(ps).get_state()
            x = st["np_rng_state"]
            want(x[0] == n[0] and np.array_equal(x[1], n[1]) and x[1].dtype == n[1].dtype and x[2:] == n[2:],
                 "np_rng_state")
            want(torch.equal(st["torch_rng_state"], torch.Generator().manual_seed(ps).get_state()),
                 "torch_rng_state")
            cuda = st["cuda_rng_state"]
            want(cuda.dtype == torch.uint8 and cuda.numel() == 816 and
                 int.from_bytes(bytes(cuda[800:808].tolist()), "little") == ps, "cuda_rng_state")
            tr = st["rng_tracker_states"]["model-parallel-rng"]
            want(int.from_bytes(bytes(tr[800:808].tolist()), "little") == ps + 2718 + r, "rng_tracker_states")
            # param_shapes: the stage's parameters in module order, Megatron's three groups (2.5)
            names = [p[1] + ("#last" if p[2] else "") for p in params]
            dsname = {p[1] + ("#last" if p[2] else ""): p[0] for p in params}
            groups = [[dsname[x] for x in g] for g in mds.three_groups(names)]
            shapes = st["param_shapes"]
            want([list(g) for g in shapes] == groups,
                 "mp_rank_%02d: param_shapes names %s, DeepSpeed's order %s" % (mp, [list(g)[:3] for g in shapes], [g[:3] for g in groups]))
            by = {p[0]: p[1] for p in params}
            used = []
            for g in shapes:
                n_ = 0
                for pname, size in g.items():
                    full = lm.tensor("weight", by[pname], padded)
                    loc = mds.cut(full, mds.split_of(by[pname]), tp, r).shape
                    want(tuple(size) == tuple(loc) and type(size) is torch.Size,
                         "%s: shape %s, TP-local %s" % (pname, tuple(size), loc))
                    n_ += int(np.prod(size))
                used.append(n_)
            # the ZeRO partitions (2.6, 2.8): flat groups aligned to 2 x DP, cut in DP equal parts
            for di in range(dp):
                o = load(os.path.join(d, "%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (pre, di, mp)))
                want(sorted(o) == ["ds_config", "ds_version", "optimizer_state_dict"], "optim file keys %s" % sorted(o))
                o = o["optimizer_state_dict"]
                for gi, n_ in enumerate(used):
                    pad = (2 * dp - n_ % (2 * dp)) % (2 * dp)
                    part = (n_ + pad) // dp
                    last = di == dp - 1
                    paddings_seen += bool(pad)
                    want(o["group_paddings"][gi] == (pad if last else 0), "group %d padding %s" % (gi, o["group_paddings"]))
                    want(o["partition_count"][gi] == dp, "partition_count")
                    fp32 = o["single_partition_of_fp32_groups"][gi]
                    want(fp32.dtype == torch.float32 and fp32.numel() ==
                         part - (pad if last and precision == "fp16" else 0), "group %d fp32 partition %d" % (gi, fp32.numel()))
                    st_ = o["base_optimizer_state"]["state"][gi]
                    want(st_["exp_avg"].numel() == part and st_["exp_avg_sq"].numel() == part, "group %d moments" % gi)
                    pg = o["base_optimizer_state"]["param_groups"][gi]
                    want(pg["params"] == [gi] and pg["step"] == m["optimizer"]["step"] and
                         (pg["weight_decay"] == 0.0) == (gi == 2) and pg["bias_correction"] is True,
                         "param group %d %s" % (gi, pg))
                if precision == "fp16":
                    want(str(o["zero_stage"]) in ("1", "ZeroStageEnum.optimizer_states"), "zero_stage %s" % o["zero_stage"])
                    sc = o["loss_scaler"]
                    om = m["optimizer"]
                    want(type(sc).__name__ == "DynamicLossScaler" and o["dynamic_loss_scale"] is True, "loss scaler")
                    want(sc.cur_scale == om["loss_scale"] and sc.cur_hysteresis == om["hysteresis_left"] and
                         (sc.cur_iter - sc.last_overflow_iter - 1) % sc.scale_window == om["good_steps"],
                         "loss scaler %s, lmtk %s" % (vars(sc), om))
                else:
                    want(len(o["param_slice_mappings"]) == 3, "param_slice_mappings")
    print("paddings %d" % paddings_seen)
    for b in bad[:12]:
        print("mds-write-check: %s: %s" % (out, b), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) != 6 or a[2] not in ("bf16", "fp16"):
        sys.exit(__doc__)
    sys.exit(main(a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5])))
