#!/usr/bin/python3
"""The GPU peer of tests/bench/train-gpu.sh: the same pre-LN GPT-2 as bin/train, trained by
PyTorch the fast way - bf16 autocast, fused QKV, F.scaled_dot_product_attention (flash),
torch.compile, fused AdamW - on random token ids, timing forward + backward + clip + step.

  train-torch-gpu.py --layers 12 --hidden 768 --heads 12 --seq 1024 --batch 16 --steps 20

Prints one line: "torch-gpu tokens/s X mfu Y" (model FLOPs 6*N + 12*L*C*T per token against the
GPU's dense bf16 peak given with --peak-tflops)."""
import argparse, math, time
import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
for k, v in (("layers", 12), ("hidden", 768), ("heads", 12), ("seq", 1024), ("batch", 16),
             ("steps", 20), ("vocab", 50304)):
    ap.add_argument("--" + k, type=int, default=v)
ap.add_argument("--peak-tflops", type=float, default=989.0)
ap.add_argument("--no-compile", action="store_true")
a = ap.parse_args()


class Block(nn.Module):
    def __init__(s, c, h):
        super().__init__()
        s.h = h
        s.ln1, s.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        s.qkv, s.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        s.fc, s.fcp = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(B, T, s.h, 3, C // s.h).unbind(3)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + s.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + s.fcp(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(a.vocab, a.hidden), nn.Embedding(a.seq, a.hidden)
        s.blocks = nn.ModuleList(Block(a.hidden, a.heads) for _ in range(a.layers))
        s.lnf = nn.LayerNorm(a.hidden)

    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in s.blocks:
            x = b(x)
        logits = s.lnf(x) @ s.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))


dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = True
m = GPT().to(dev)
n_params = sum(p.numel() for p in m.parameters())
opt = torch.optim.AdamW(m.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
step_fn = m if a.no_compile else torch.compile(m)
idx = torch.randint(0, 50257, (a.batch, a.seq), device=dev)
tgt = torch.randint(0, 50257, (a.batch, a.seq), device=dev)


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = step_fn(idx, tgt)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


for _ in range(3):
    step()
torch.cuda.synchronize()
t = time.time()
for _ in range(a.steps):
    step()
torch.cuda.synchronize()
dt = (time.time() - t) / a.steps
tok = a.batch * a.seq / dt
flops = 6 * n_params + 12 * a.layers * a.hidden * a.seq
print("torch-gpu tokens/s %.0f mfu %.4f" % (tok, tok * flops / (a.peak_tflops * 1e12)))
