#!/usr/bin/python3
"""gpu-model.py - a predicted training-step time on an H100 SXM and an A100 from the executor's
record of the step (tests/bench/train-gpu-model.sh runs the executor; see its header).

Inputs are four profiles of one training iteration (LMTK_CUDA_EXEC_PROFILE, train --profile) of
the same model shape - hidden size, heads, vocabulary, sequence length - run at 1 and 2 layers
and at micro-batches b1 and b2.  What a step costs is then extended to the real layer count and
batch, exactly where it is linear:
  - kernels, per name: launches, bytes read and bytes written are bilinear in layers and tokens
    (each layer repeats the same launches; every buffer is either per token or per weight), so
    four runs give each total's four coefficients and the total at (L, B) follows;
  - GEMMs, per call: the calls of the 1-layer and 2-layer runs differ by one layer's calls; a
    dimension that doubles with the micro-batch is the token dimension and is scaled to B x T;
  - attention's FLOPs are not in a profile (the executor counts bytes, not arithmetic): they are
    counted from the shape, B x heads x T^2 x head_dim per causal tile product (half of the
    T x T products are masked away), 2 products in the forward kernel, 4 in dK/dV's, 3 in dQ's.
The sequence length of the runs is short (the executor runs every thread on the CPU); every byte
term that depends on T depends on B x T only, except attention's FLOPs, which use the real T.

Each operation's predicted time is the larger of its FLOPs at the pipe's peak times an
efficiency and its compulsory bytes at HBM bandwidth times an efficiency, plus a gap per launch
(kernels queued back to back on one stream, no CUDA graph).  A GEMM's epilogue is priced inside
the GEMM: the GeLU epilogues' auxiliary matrix (the pre-activation, m x n bf16) adds its bytes; a
bias or bias-gradient vector (BIAS; BGRADB, the column sums of dout that the weight-gradient GEMM
writes for each bias, src/train/cuda/matmul.cu) is a few KB and adds nothing; the fp32 add of such
a gradient into the accumulated one is its own small kernel (vec_acc_k), priced like any other.
The peaks, efficiencies and costs are share/lmtk/gpu-model.tsv's (the file says where each comes
from; a GEMM's efficiency depends on its shape: cuBLAS's best tile after wave quantisation, K).

Attention kernels are priced by name (ATTN below) on the pipe they run on.  The tensor-core
kernels (src/train/cuda/attention.cu: mma.sync m16n8k16, ldmatrix, FlashAttention-2's split) by
their structure (attn_seconds, the twin of gpumodel.c's gpumodel_attn_seconds): per mma the
larger of the tensor pipe at mma.sync's share of the peak (about 2/3 on Hopper, whose peak needs
wgmma) and the shared-memory bytes of its operands - every warp reads the whole K and V tiles
for its 16 rows, 16 FLOPs per byte at head dim 64 against 128 bytes/clock/SM, which bounds them
below the tensor pipe on both devices - plus an exp2 per score on the 16/clock SFU, partly
hidden; the tile loads each iteration exposes, hidden under the other blocks the SM holds;
a block's start and end.  Three constants are fit to FlashAttention-2's published causal
forward on an H100 (gpu-model.tsv says which and how well).  The fp32 SIMT kernels they
replaced are still priced (simt: 50% of the fp32 peak) when a profile names them.

train --dry-run has this model's analytic twin (src/train/plan/gpumodel.c): it writes the same
operations down from the run's flags instead of reading a profile, prices them with the same
table (both read share/lmtk/gpu-model.tsv) and the same rules, and adds the NCCL calls and the
pipeline bubble of a multi-GPU layout.  --json carries each device's per-op rows ("ops") so
tests/cli/train-gpu-model.sh can compare the two operation by operation.
"""
import argparse
import json
import math
import os
import re
import sys
from collections import defaultdict

# THE TABLE: share/lmtk/gpu-model.tsv, which src/train/plan/gpumodel.c (train --dry-run's step
# model, this file's analytic twin) compiles in: one file, read by both.
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "share", "lmtk",
                     "gpu-model.tsv")


def read_table(path=TABLE):
    """KEY -> VALUE (strings) of share/lmtk/gpu-model.tsv"""
    t = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            k, v = line.split("\t", 1)
            t[k] = v
    return t


_T = read_table()
DEVICES = {}   # name ("H100 SXM"): peaks and efficiencies, as gpumodel.c's struct gpumodel_device
for _key in _T["devices"].split():
    _d = {f: float(_T[f"device.{_key}.{f}"]) for f in
          ("tc", "simt", "hbm", "pcie", "sms", "nvlink", "nic", "mamf", "clock", "mma_sync",
           "smem_sm")}
    _d["sms"] = int(_d["sms"])
    _d["key"] = _key
    DEVICES[_T[f"device.{_key}.name"]] = _d
EFF = dict(simt=float(_T["eff.simt"]), hbm=float(_T["eff.hbm"]), best=float(_T["eff.best"]),
           gemm_train=float(_T["gemm.train"]))
K_HALF = float(_T["gemm.k_half"])
SPLIT_K = float(_T["gemm.split_k"])
TILES = [(int(t.split(":")[0].split("x")[0]), int(t.split(":")[0].split("x")[1]),
          float(t.split(":")[1])) for t in _T["gemm.tiles"].split()]
# attention kernels by name: causal tile products (units of B x heads x T^2 x head_dim FLOPs,
# one causal T x T x D product), the pipe they run on, and on the tensor cores their structure
# (gpu-model.tsv's attn.cur.* lines, priced by attn_seconds).  attn_bwd_mma_k is the one-kernel
# backward; its bytes (the profile's) include the fp32 dQ sums read once by the last contributor
# of a query tile that several key tiles see, not the atomics (key tile 0's exchange, the adds
# between), which stay in L2.  The fp32 SIMT kernels' names stay for older profiles.
ATTN = {
    "attn_fwd_mma_k": (2, "tc", "attn.cur.fwd"), "attn_bwd_mma_k": (5, "tc", "attn.cur.bwd"),
    "attn_fwd_k": (2, "simt", None), "attn_bwd_dkv_k": (4, "simt", None),
    "attn_bwd_dq_k": (3, "simt", None),
}
ATTN_K = {k: float(_T["attn." + k]) for k in
          ("smem_bw", "sfu", "latency", "l2_x_hbm", "issue", "block", "exp_hidden", "regs_sm",
           "warps_sm")}


def attn_kernel(key):
    """an attn.* line of the table: "rows=128 keys=64 ... regs=128,128,202 ..." -> dict"""
    k = {}
    for w in _T[key].split():
        f, v = w.split("=")
        k[f] = tuple(int(x) for x in v.split(",")) if f in ("regs", "warps", "rpw") else float(v)
    return k


def attn_seconds(dev, k, heads, T, HD):
    """gpumodel.c gpumodel_attn_seconds (its comment says how): one launch of kernel k over
    `heads` causal T x T attentions at head dim HD"""
    hdm = 32 if HD <= 32 else 64 if HD <= 64 else 128
    ri = {32: 0, 64: 1, 128: 2}[hdm]
    hdp, sms, t = math.ceil(HD / 16) * 16, dev["sms"], float(T)
    c_mma = 4096.0 / (dev["tc"] / (sms * dev["clock"]) * dev["mma_sync"])
    c_lds = (256.0 * 16 / k["rpw"][ri] + k["abytes"]) / ATTN_K["smem_bw"]
    scores = heads * t * (t + k["kchunk"]) / 2
    mmas = scores * k["products"] * hdp / 2048
    m, e = mmas * max(c_mma, c_lds), scores * k["exps"] / ATTN_K["sfu"]
    compute = (max(m, e) + (1 - ATTN_K["exp_hidden"]) * min(m, e)) / ATTN_K["issue"]
    rows, keys = int(k["rows"]), int(k["keys"])
    full = T // rows   # rows is a multiple of keys (gpumodel.c attn_parse)
    iters = heads * ((rows // keys) * full * (full + 1) / 2 + ((T - 1) // keys + 1 if T % rows else 0))
    nblk = heads * ((T + rows - 1) // rows)
    l2 = ATTN_K["l2_x_hbm"] * dev["hbm"] / (sms * dev["clock"])
    load = ATTN_K["latency"] + 2 * keys * hdp * 2 / l2
    exposed = iters * max(0.0, load - k["overlap"] * compute / iters)
    regs = math.ceil(k["regs"][ri] / 8.0) * 8 * 32 * k["warps"][ri]
    smem = k["tiles"] * 64 * (hdm + 8) * 2 + k["extra"] + 1024
    blocks = min(math.floor(ATTN_K["regs_sm"] / regs), math.floor(dev["smem_sm"] / smem),
                 math.floor(ATTN_K["warps_sm"] / k["warps"][ri]), math.ceil(nblk / sms))
    blocks = max(blocks, 1)
    ends = nblk * ATTN_K["block"] * k["io"] * rows * hdp / (2.0 * 128 * 128)
    return (max(compute, (compute + exposed) / blocks) + ends) / sms / dev["clock"]


GAP = float(_T["launch.gap"])              # per launch, no CUDA graph
GAP_GRAPH = float(_T["launch.gap_graph"])  # per launch replayed from a CUDA graph (--cuda-graph)
SYNC = float(_T["launch.sync"])            # per host synchronisation inside the step


# a kernel's name without the activation type it was instantiated for ("ln_fwd_k<8, __half>" ->
# "ln_fwd_k<8>", "adamw_multi_k<__nv_bfloat16>" -> "adamw_multi_k"): bf16 and fp16 move the same
# bytes, and train --dry-run's twin (src/train/plan/gpumodel.c) names kernels that way
ACT_ARG = re.compile(r"(, )?\b(__nv_bfloat16|__half)\b(, )?")


def kernel_name(n):
    n = ACT_ARG.sub(lambda m: ", " if m.group(1) and m.group(3) else "", n)
    return n[:-2] if n.endswith("<>") else n


def load(path):
    ops = []
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            if o.get("op") == "kernel":
                o["name"] = kernel_name(o["name"])
            ops.append(o)
    if not ops:
        sys.exit(f"gpu-model: {path}: empty profile (did train run with --profile?)")
    return ops


def kernel_totals(ops):
    t = defaultdict(lambda: [0, 0, 0])
    for o in ops:
        if o["op"] == "kernel":
            k = o["name"]
        elif o["op"] == "memset":
            k = "(memset)"
        elif o["op"] == "copy" and o["kind"] == "DtoD":
            # a copy on the device (dropout's backward at p = 0): read and written once
            t["(memcpy DtoD)"][0] += 1
            t["(memcpy DtoD)"][1] += o["bytes"]
            t["(memcpy DtoD)"][2] += o["bytes"]
            continue
        else:
            continue
        t[k][0] += 1
        t[k][1] += o.get("rd", 0)
        t[k][2] += o.get("bytes", o.get("wr", 0))
    return t


def bilinear(v11, v21, v12, v22, L, x):
    """f(l, b) = a + p (l-1) + q (b-1) + r (l-1)(b-1) through the four runs, at (L, x)"""
    p = v21 - v11
    q = v12 - v11
    r = v22 - v21 - v12 + v11
    return v11 + p * (L - 1) + q * (x - 1) + r * (L - 1) * (x - 1)


def gemms(ops):
    return [o for o in ops if o["op"] == "gemm"]


def gemm_key(o):
    return (o["m"], o["n"], o["k"], o["batch"], o["epilogue"], o["bias"], o["aux"],
            o["a"], o["b"], o["c"], o["d"])


def scaled_gemms(g_b1, g_b2, b1, b2, tokens_run1, tokens_target):
    """the calls of a run at micro-batch b1, with their token dimension scaled to the target"""
    if len(g_b1) != len(g_b2):
        sys.exit("gpu-model: the two micro-batches' runs made different GEMM calls")
    out = []
    f = tokens_target / tokens_run1
    for x, y in zip(g_b1, g_b2):
        o = dict(x)
        for d in ("m", "n", "k"):
            if y[d] != x[d]:
                if y[d] * b1 != x[d] * b2:
                    sys.exit(f"gpu-model: GEMM dimension {d} goes {x[d]} -> {y[d]} from micro-batch "
                             f"{b1} to {b2}: not proportional to the tokens")
                o[d] = round(x[d] * f)
        out.append(o)
    return out


def gemm_eff(dev, m, n, k, bt):
    """gpumodel.c gpumodel_gemm_eff: the best tile after wave quantisation (and split-K for few
    tiles and a long k), each at gemm.train x MAMF x its tile's share x K / (K + k_half)"""
    best, sms = 0.0, dev["sms"]
    for tm, tn, te in TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * bt
        split = max(1, min(int(k / SPLIT_K), sms // tiles))
        work = tiles * split
        waves = math.ceil(work / sms)
        kk = k / split
        best = max(best, EFF["gemm_train"] * dev["mamf"] * te * kk / (kk + K_HALF) *
                   work / (waves * sms))
    return best


def gemm_time(o, dev):
    m, n, k, bt = o["m"], o["n"], o["k"], o["batch"]
    flops = 2.0 * m * n * k * bt
    byts = (m * k * o["a"] + k * n * o["b"] + m * n * (o["c"] + o["d"])) * bt
    if o["aux"]:
        byts += m * n * 2 * bt
    eff = gemm_eff(dev, m, n, k, bt)
    return max(flops / (dev["tc"] * eff), byts / (dev["hbm"] * EFF["hbm"])), flops, byts


def check(a, kern, gemm_calls, rep):
    """the extension against a run made at the target: what the model's numbers rest on"""
    if a.seq != a.run_seq:
        return "gpu-model: --check needs --seq equal to --run-seq"
    got = load(a.check)
    tk = kernel_totals(got)
    bad = []
    for n in sorted(set(tk) | set(kern)):
        want = kern.get(n, dict(count=0, rd=0, wr=0))
        have = tk.get(n, [0, 0, 0])
        if round(want["count"]) != have[0]:
            bad.append(f"{n}: {want['count']:.0f} launches predicted, {have[0]} made")
        for i, w in ((1, "rd"), (2, "wr")):
            if abs(want[w] - have[i]) > 0.05 * max(have[i], 1):
                bad.append(f"{n}: {w} {want[w]:.0f} bytes predicted, {have[i]} measured")
    gc = defaultdict(int)
    for o in gemms(got):
        gc[gemm_key(o)] += 1
    for k in sorted(set(gc) | set(gemm_calls)):
        if gc.get(k, 0) != gemm_calls.get(k, 0):
            bad.append(f"GEMM {k}: {gemm_calls.get(k, 0)} calls predicted, {gc.get(k, 0)} made")
    for b in bad:
        print("gpu-model: " + b)
    print(f"gpu-model: check: {len(tk)} kernels, {sum(gc.values())} GEMM calls of {a.check}: "
          f"{len(bad)} disagreements")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True, help="the target's T")
    ap.add_argument("--batch", type=int, required=True, help="the target's micro-batch B")
    ap.add_argument("--params", type=float, required=True, help="parameters, for MFU")
    ap.add_argument("--run-seq", type=int, required=True, help="T of the profiled runs")
    ap.add_argument("--b1", type=int, default=1)
    ap.add_argument("--b2", type=int, default=2)
    ap.add_argument("profiles", nargs=4, help="L1 b1, L2 b1, L1 b2, L2 b2")
    ap.add_argument("--json", help="write the predictions here too")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="price each launch at GAP_GRAPH: the step replayed as a CUDA graph")
    ap.add_argument("--check", metavar="PROFILE",
                    help="instead of predicting: extend the four runs to --layers and --batch at "
                    "--seq = --run-seq and compare with this profile of that run (the kernels' "
                    "launches and GEMM calls exactly, their bytes within 5%%); exit 1 if they differ")
    a = ap.parse_args()
    gap = GAP_GRAPH if a.cuda_graph else GAP
    p11, p21, p12, p22 = (load(f) for f in a.profiles)
    L, B, T, C, H = a.layers, a.batch, a.seq, a.hidden, a.heads
    D = C // H
    tok_target = B * T
    tok1, tok2 = a.b1 * a.run_seq, a.b2 * a.run_seq
    x = 1 + (tok_target - tok1) / (tok2 - tok1)      # the target on the runs' b axis

    # kernels: per name, bilinear in (layers, tokens)
    t11, t21, t12, t22 = (kernel_totals(p) for p in (p11, p21, p12, p22))
    names = sorted(set(t11) | set(t21) | set(t12) | set(t22))
    kern = {}
    for n in names:
        v = [t.get(n, [0, 0, 0]) for t in (t11, t21, t12, t22)]
        cnt = bilinear(*(w[0] for w in v), L, 1)          # launches do not depend on tokens
        rd = bilinear(*(w[1] for w in v), L, x)
        wr = bilinear(*(w[2] for w in v), L, x)
        per_layer = v[1][0] - v[0][0]
        kern[n] = dict(count=cnt, rd=rd, wr=wr, per_layer=per_layer)

    # GEMMs: one layer's calls are the 2-layer run's extra calls
    g1 = scaled_gemms(gemms(p11), gemms(p12), a.b1, a.b2, tok1, tok_target)
    g2 = scaled_gemms(gemms(p21), gemms(p22), a.b1, a.b2, tok1, tok_target)
    c1, c2 = defaultdict(int), defaultdict(int)
    rep = {}
    for o in g1:
        c1[gemm_key(o)] += 1
        rep[gemm_key(o)] = o
    for o in g2:
        c2[gemm_key(o)] += 1
        rep[gemm_key(o)] = o
    gemm_calls = {k: c1[k] + (c2[k] - c1[k]) * (L - 1) for k in rep}

    if a.check:
        sys.exit(check(a, kern, gemm_calls, rep))

    # a host wait that left the device with nothing queued (a read-back of the iteration in
    # flight while the next one is queued costs the device nothing)
    syncs = sum(1 for o in p11 if o["op"] == "sync" and o["queued"] == 0)
    # host-to-device bytes (token ids, targets) are per token: extended like a kernel's
    htod = [bilinear(*(sum(o["bytes"] for o in p if o["op"] == "copy" and o["kind"] == "HtoD")
                       for p in (p11, p21, p12, p22)), L, x)]
    unit = B * H * T * T * D            # one causal T x T x D tile product, 2 FLOPs per MAC / 2
    # MFU as llm.c counts it (gpt2_estimate_mfu: 6N + 6 L h T per token, N every parameter),
    # train --dry-run's "mfu"; PaLM's 6N + 12 L h T is its "mfu_palm"
    model_flops = (6 * a.params + 6 * L * C * T) * B * T

    results = {}
    for dname, dev in DEVICES.items():
        rows = []
        for n, k in kern.items():
            base = n.split("<")[0]
            byts = k["rd"] + k["wr"]
            units, pipe, struct = ATTN.get(base, (0, None, None))
            flops = float(units * unit * k["count"])
            tm = byts / (dev["hbm"] * EFF["hbm"])
            if flops and pipe == "tc":
                tm = max(tm, attn_seconds(dev, attn_kernel(struct), B * H, T, D) * k["count"])
            elif flops:
                tm = max(tm, flops / (dev[pipe] * EFF["simt"]))
            kind = "attention" if base.startswith("attn") else "other"
            rows.append(dict(op=n, kind=kind, count=k["count"], per_layer=k["per_layer"],
                             flops=flops, bytes=byts, time=tm + gap * k["count"]))
        for key, cnt in gemm_calls.items():
            o = rep[key]
            tm, fl, by = gemm_time(o, dev)
            epi = o["epilogue"] + ("+bias" if o["bias"] else "") + ("+aux" if o["aux"] else "")
            rows.append(dict(op=f"gemm {o['m']}x{o['n']}x{o['k']} {epi}", kind="gemm", count=cnt,
                             per_layer=0, flops=fl * cnt, bytes=by * cnt,
                             time=(tm + gap) * cnt))
        sync_t = syncs * SYNC + sum(htod) / dev["pcie"]
        rows.append(dict(op="host syncs + HtoD copies", kind="other", count=syncs, per_layer=0,
                         flops=0, bytes=sum(htod), time=sync_t))
        step = sum(r["time"] for r in rows)
        att = sum(r["time"] for r in rows if r["kind"] == "attention")
        gem = sum(r["time"] for r in rows if r["kind"] == "gemm")
        attn_flops = sum(r["flops"] for r in rows if r["kind"] == "attention")
        best = step - att + attn_flops / (dev["tc"] * EFF["best"]) + gap * sum(
            r["count"] for r in rows if r["kind"] == "attention")
        res = dict(step_s=step, tokens_per_s=tok_target / step,
                   mfu=model_flops / step / dev["tc"], gemm_share=gem / step,
                   attention_share=att / step, other_share=1 - (gem + att) / step,
                   mfu_best_attention=model_flops / best / dev["tc"],
                   launches=sum(k["count"] for k in kern.values()) + sum(gemm_calls.values()),
                   launches_per_layer=sum(k["per_layer"] for k in kern.values()) +
                   sum(c2[k] - c1[k] for k in rep),
                   host_syncs=syncs,
                   worst_other=max((r for r in rows if r["kind"] == "other"),
                                   key=lambda r: r["time"])["op"],
                   worst_other_share=max(r["time"] for r in rows if r["kind"] == "other") / step)
        res["ops"] = [dict(op=r["op"], kind=r["kind"], count=r["count"], flops=r["flops"],
                           bytes=r["bytes"], seconds=r["time"]) for r in rows]
        results[dname] = res
        print(f"\n== {a.name}: L={L} h={C} heads={H}, B x T = {B} x {T}, on {dname} (predicted)")
        print(f"{'op':44s} {'kind':9s} {'/step':>6s} {'GFLOP':>9s} {'MB':>9s} {'us':>9s} {'share':>6s}")
        for r in sorted(rows, key=lambda r: -r["time"])[:24]:
            print(f"{r['op'][:44]:44s} {r['kind']:9s} {r['count']:6.0f} {r['flops'] / 1e9:9.1f} "
                  f"{r['bytes'] / 1e6:9.1f} {r['time'] * 1e6:9.1f} {100 * r['time'] / step:5.1f}%")
        print(f"step {step * 1e3:.2f} ms, {res['tokens_per_s']:,.0f} tokens/s, MFU "
              f"{100 * res['mfu']:.1f}% (llm.c's count: 6N + 6 L h T FLOPs per token, of the dense bf16 "
              f"peak); GEMMs {100 * res['gemm_share']:.1f}%, attention "
              f"{100 * res['attention_share']:.1f}%, everything else "
              f"{100 * res['other_share']:.1f}% (largest: {res['worst_other']}, "
              f"{100 * res['worst_other_share']:.1f}%)")
        print(f"launches per step {res['launches']:.0f}, per layer {res['launches_per_layer']}, "
              f"host synchronisations in the step {syncs}; with attention at "
              f"{EFF['best']:.0%} of peak (FlashAttention-3 class) the MFU would be "
              f"{100 * res['mfu_best_attention']:.1f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({a.name: results}, f, indent=1)


if __name__ == "__main__":
    main()
