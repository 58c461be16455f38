#!/usr/bin/python3
"""bnb-ref.py - an independent PyTorch reference of bitsandbytes' 8-bit Adam (Adam8bit), written
from Dettmers et al. 2021, "8-bit Optimizers via Block-wise Quantization", and bitsandbytes'
documented semantics (create_dynamic_map, quantize_blockwise, Optimizer8bit with
min_8bit_size 4096, block size 2048, percentile clipping off), for tests/cli/train-bnb.sh.

  bnb-ref.py gen DIR      random inputs: DIR/x.f32 (to quantize), DIR/p.f32, DIR/g{1,2,3}.f32,
                          DIR/m0.f32, DIR/v0.f32 (an optimizer state to start from)
  bnb-ref.py check DIR    compares what build/tests/train_bnb --ref DIR wrote (map_s.f32,
                          map_u.f32, q.u8, absmax.f32, deq.f32, and after three steps of 8-bit
                          and 32-bit Adam: p8.f32, c1.u8, c2.u8, a1.f32, a2.f32, p32.f32,
                          s1.f32, s2.f32) with this reference; prints "ok NAME" / "FAIL NAME: why"

Nothing here is taken from bitsandbytes' code: the map is the paper's dynamic tree quantization
(sign, exponent as a run of zeros, linear fraction in [0.1, 1], bitsandbytes' fraction-bit
allocation for 8 bits), quantization is "nearest code" with the midpoint between neighbours
computed in fp32, and the Adam step is the paper's Algorithm (dequantize, update in fp32,
requantize with the new block absmax) with bitsandbytes' Adam conventions (eps scaled by
sqrt(1 - b2^t), decoupled weight decay applied after the update).
"""
import sys

import numpy as np
import torch

BLOCK = 2048
HP = dict(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.1, gscale=0.5)
N = 3 * BLOCK + 777          # three full blocks and a short one


def dynamic_map(signed):
    """256 values: for decimal exponent e = -6..0 (7 exponent bits' worth), 2^i (signed) or
    2^(i+1) (unsigned, the sign bit goes to the fraction) linear fractions, the midpoints of
    linspace(0.1, 1) bins, times 10^e; plus 0 and 1; sorted."""
    vals = []
    for i in range(7):
        k = 2 ** i if signed else 2 ** (i + 1)
        edges = torch.linspace(0.1, 1, k + 1)
        mids = ((edges[:-1] + edges[1:]) / 2.0).tolist()
        vals += [10.0 ** (i - 6) * m for m in mids]
        if signed:
            vals += [-(10.0 ** (i - 6)) * m for m in mids]
    vals += [0.0, 1.0]
    assert len(vals) == 256
    return torch.tensor(sorted(vals), dtype=torch.float32)


def quantize(code, x):
    """index of the nearest code; the boundary is the fp32 midpoint of the two neighbours."""
    hi = torch.searchsorted(code, x).clamp(1, 255)        # code[hi-1] < x <= code[hi]
    lo = hi - 1
    mid = (code[lo] + code[hi]) * 0.5
    return torch.where(x > mid, hi, lo).to(torch.uint8)


def blocks(n):
    return (n + BLOCK - 1) // BLOCK


def absmax_of(x):
    n = x.numel()
    pad = torch.zeros(blocks(n) * BLOCK)
    pad[:n] = x.abs()
    return pad.view(-1, BLOCK).max(dim=1).values


def per_elem(a, n):
    return a.repeat_interleave(BLOCK)[:n]


def quantize_blockwise(code, x):
    am = absmax_of(x)
    r = torch.where(am > 0, 1.0 / am, torch.zeros_like(am))
    return quantize(code, x * per_elem(r, x.numel())), am


def dequantize_blockwise(code, q, am):
    return code[q.long()] * per_elem(am, q.numel())


def f32(x):
    return torch.tensor(np.float32(x))


def corrections(step, b1, b2):
    c1 = f32(1.0) - torch.pow(f32(b1), f32(step))
    c2 = torch.sqrt(f32(1.0) - torch.pow(f32(b2), f32(step)))
    return c1, c2


def adam8bit_step(p, g, c1, c2, a1, a2, step, code_s, code_u, lr, b1, b2, eps, wd, gscale):
    n = p.numel()
    g = g * f32(gscale)
    s2 = dequantize_blockwise(code_u, c2, a2) * f32(b2) + (f32(1.0) - f32(b2)) * g * g
    s1 = dequantize_blockwise(code_s, c1, a1) * f32(b1) + (f32(1.0) - f32(b1)) * g
    a1, a2 = absmax_of(s1), absmax_of(s2)
    k1, k2 = corrections(step, b1, b2)
    step_size = -f32(lr) * k2 / k1
    p = p + step_size * (s1 / (torch.sqrt(s2) + k2 * f32(eps)))
    if wd > 0:
        p = p * (f32(1.0) - f32(lr) * f32(wd))
    d1 = torch.where(a1 > 0, a1, torch.ones_like(a1))
    d2 = torch.where(a2 > 0, a2, torch.ones_like(a2))
    q1 = quantize(code_s, s1 / per_elem(d1, n)).long()
    # the first moment keeps its sign: a nearest code of the other sign moves one step
    wrong = torch.signbit(code_s[q1]) != torch.signbit(s1)
    q1 = torch.where(wrong, torch.where(s1 > 0, q1 + 1, q1 - 1), q1) % 256
    q2 = quantize(code_u, s2 / per_elem(d2, n))
    return p, q1.to(torch.uint8), q2, a1, a2


def adam32_step(p, g, s1, s2, step, lr, b1, b2, eps, wd, gscale):
    g = g * f32(gscale)
    s1 = s1 * f32(b1) + (f32(1.0) - f32(b1)) * g
    s2 = s2 * f32(b2) + (f32(1.0) - f32(b2)) * (g * g)
    k1, k2 = corrections(step, b1, b2)
    p = p + (-f32(lr) * k2 / k1) * (s1 / (torch.sqrt(s2) + f32(eps) * k2))
    if wd > 0:
        p = p * (f32(1.0) - f32(lr) * f32(wd))
    return p, s1, s2


def rd(d, name, dtype=np.float32):
    return torch.from_numpy(np.fromfile(f"{d}/{name}", dtype=dtype).copy())


def gen(d):
    gen = torch.Generator().manual_seed(16)
    # values over many decades, so every exponent of the map is used
    x = torch.randn(N, generator=gen) * torch.pow(10.0, torch.randint(-7, 2, (N,), generator=gen).float())
    x[BLOCK + 5] = 0.0
    x.numpy().tofile(f"{d}/x.f32")
    torch.randn(N, generator=gen).numpy().tofile(f"{d}/p.f32")
    for k in (1, 2, 3):
        (torch.randn(N, generator=gen) * 0.1).numpy().tofile(f"{d}/g{k}.f32")
    (torch.randn(N, generator=gen) * 0.01).numpy().tofile(f"{d}/m0.f32")
    (torch.rand(N, generator=gen) * 1e-4).numpy().tofile(f"{d}/v0.f32")


def check(d):
    bad = 0

    def res(name, good, why=""):
        nonlocal bad
        print(f"ok {name}" if good else f"FAIL {name}: {why}")
        bad += not good

    code_s, code_u = dynamic_map(True), dynamic_map(False)
    for nm, ref in (("map_s", code_s), ("map_u", code_u)):
        c = rd(d, f"{nm}.f32")
        diff = (c != ref).nonzero().flatten().tolist()
        res(f"bnb_dynamic_map_{'signed' if nm == 'map_s' else 'unsigned'}_256_values_exact",
            c.numel() == 256 and not diff, f"{len(diff)} differ, first {diff[:4]}")
    x = rd(d, "x.f32")
    q, am = quantize_blockwise(code_s, x)
    cq, cam = rd(d, "q.u8", np.uint8), rd(d, "absmax.f32")
    res("bnb_quantize_blockwise_codes_exact", torch.equal(q, cq),
        f"{int((q != cq).sum())} of {x.numel()} codes differ")
    res("bnb_quantize_blockwise_absmax_exact", torch.equal(am, cam), "absmax differs")
    deq = dequantize_blockwise(code_s, cq, cam)
    res("bnb_dequantize_blockwise_exact", torch.equal(deq, rd(d, "deq.f32")), "dequantized values differ")
    # the quantization error the paper bounds: within half the local code spacing times absmax
    err = (deq - x).abs().max().item()
    res("bnb_quantize_error_small", err <= 0.05 * x.abs().max().item(), f"max error {err}")

    # three steps of 8-bit Adam from a quantized state, and of bnb's 32-bit Adam
    p0 = rd(d, "p.f32")
    m0, v0 = rd(d, "m0.f32"), rd(d, "v0.f32")
    c1, a1 = quantize_blockwise(code_s, m0)
    c2, a2 = quantize_blockwise(code_u, v0)
    p8, p32, s1, s2 = p0.clone(), p0.clone(), m0.clone(), v0.clone()
    for k in (1, 2, 3):
        g = rd(d, f"g{k}.f32")
        p8, c1, c2, a1, a2 = adam8bit_step(p8, g, c1, c2, a1, a2, 10 + k, code_s, code_u, **HP)
        p32, s1, s2 = adam32_step(p32, g, s1, s2, 10 + k, **HP)
    for nm, ref, dt in (("c1", c1, np.uint8), ("c2", c2, np.uint8)):
        got = rd(d, f"{nm}.u8", dt)
        res(f"bnb_adam8bit_3_steps_{nm}_codes_exact", torch.equal(got, ref),
            f"{int((got != ref).sum())} of {ref.numel()} differ")
    for nm, ref in (("a1", a1), ("a2", a2)):
        got = rd(d, f"{nm}.f32")
        rel = ((got - ref).abs() / ref.abs().clamp_min(1e-30)).max().item()
        res(f"bnb_adam8bit_3_steps_{nm}_absmax_within_fp32_rounding", rel <= 4e-7, f"max rel {rel}")
    for nm, ref in (("p8", p8), ("p32", p32), ("s1", s1), ("s2", s2)):
        got = rd(d, f"{nm}.f32")
        diff = (got - ref).abs().max().item()
        tol = 2 * torch.finfo(torch.float32).eps * max(ref.abs().max().item(), 1e-30)
        res(f"bnb_adam_3_steps_{nm}_within_fp32_rounding", diff <= tol, f"max |diff| {diff}, tol {tol}")
    # the 8-bit path really differs from the 32-bit one, by about the quantization error
    d8 = (p8 - p32).abs().max().item()
    res("bnb_adam8bit_differs_from_adam32_by_a_little", 0 < d8 < 1e-3, f"max |p8 - p32| {d8}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("gen", "check"):
        sys.exit(__doc__)
    sys.exit(gen(sys.argv[2]) if sys.argv[1] == "gen" else check(sys.argv[2]))
