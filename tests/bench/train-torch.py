#!/usr/bin/python3
"""train-torch.py - the PyTorch peer of tests/bench/train-cpu.sh: one fp32 CPU training step of the
same pre-LN GPT-2 that bin/train trains, timed, on the same threads.

The model is nanoGPT's (learned positions, tied input/output embeddings, fused QKV Linear with
bias, GeLU tanh, LayerNorm eps 1e-5, no dropout), with the vocabulary padded as Megatron pads it
(50257 -> 50304) and the loss taken over the first `vocab` columns as train takes it.  torch 1.13
has no scaled_dot_product_attention, so attention is nanoGPT's slow path: matmul, causal mask,
softmax, matmul.  The step is forward + backward + clip_grad_norm_(1.0) + AdamW (decay on the
2-D weights only, as Megatron), on random token ids < vocab (the speed does not depend on them).

With --gemm-only, measures instead OpenBLAS's sgemm on one core (numpy, which Debian links to the
same libopenblas as torch; set OPENBLAS_NUM_THREADS=1) on the model's GEMM shapes.  Run with
Debian's /usr/bin/python3 (torch 1.13):

  train-torch.py --layers 12 --hidden 768 --heads 12 --seq 1024 --batch 1 --threads 2 \
      --steps 3 --warmup 1

Prints "key value" lines: params N, step_s S (the best timed step, among those beside which
other processes used < 10% of the machine's CPU time if there are any), others F (that share in
the chosen step), used U (CPUs the step used: its CPU time / wall time), tokens_s X; with
--gemm-only, "gemm NAME.KIND M N K WHOLE BLOCK" lines (GFLOP/s of one core) and
"gemm_all WHOLE BLOCK" (FLOP-weighted over one step's GEMM mix).
"""
import argparse
import math
import os
import sys
import time


CLEAN = 0.10   # a step beside which other processes used less than this share of the CPUs


def cpu_sample():
	"""(busy, total) ticks of the whole machine from /proc/stat, and this process's CPU ticks"""
	f = [int(v) for v in open("/proc/stat").readline().split()[1:9]]
	t = os.times()
	return sum(f) - f[3] - f[4], sum(f), (t.user + t.system) * os.sysconf("SC_CLK_TCK")


def others_share(a, b):
	"""share of the machine's CPU time between samples a and b that other processes used"""
	return max(0.0, (b[0] - a[0]) - (b[2] - a[2])) / max(1, b[1] - a[1])


def parse():
	p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	p.add_argument("--layers", type=int, default=12)
	p.add_argument("--hidden", type=int, default=768)
	p.add_argument("--heads", type=int, default=12)
	p.add_argument("--seq", type=int, default=1024)
	p.add_argument("--batch", type=int, default=1)
	p.add_argument("--vocab", type=int, default=50257)
	p.add_argument("--padded-vocab", type=int, default=50304)
	p.add_argument("--threads", type=int, default=os.cpu_count())
	p.add_argument("--steps", type=int, default=3, help="timed steps")
	p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
	p.add_argument("--foreach", action="store_true", help="AdamW(foreach=True)")
	p.add_argument("--gemm-only", action="store_true", help="the sgemm probe instead of training")
	return p.parse_args()


def gemm_probe(a):
	"""OpenBLAS sgemm GFLOP/s of one core (run with OPENBLAS_NUM_THREADS=1), in thread CPU time so
	that other work on the machine does not lower it, on the step's GEMMs: for each Linear (M rows,
	K in, N out, weight [N,K] as nn.Linear and train store it) the forward x w^T, input gradient
	dy w and weight gradient dy^T x, whole (as PyTorch calls them) and in train's 128-row blocks
	(128 rows of x or dy; 128 output features of the weight gradient, summed over all M rows).
	Each is the best of a few calls.  Attention's GEMMs are left out."""
	import numpy as np
	C, F, V, M, R = a.hidden, 4 * a.hidden, a.padded_vocab, a.batch * a.seq, 128
	shapes = [("qkv", 3 * C, C), ("attproj", C, C), ("fc", F, C), ("fcproj", C, F), ("lmhead", V, C)]
	rng = np.random.default_rng(0)
	tot = {"whole": [0.0, 0.0], "block": [0.0, 0.0]}   # FLOPs, seconds per step
	for name, n, k in shapes:
		x = rng.standard_normal((M, k), dtype=np.float32)
		w = rng.standard_normal((n, k), dtype=np.float32)
		dy = rng.standard_normal((M, n), dtype=np.float32)
		calls = {"fwd": ((lambda: x @ w.T, M), (lambda: x[:R] @ w.T, R)),
			 "dgrad": ((lambda: dy @ w, M), (lambda: dy[:R] @ w, R)),
			 "wgrad": ((lambda: dy.T @ x, n), (lambda: dy[:, :R].T @ x, R))}
		for kind, variants in calls.items():
			rates = []
			for (f, rows), (how, acc) in zip(variants, tot.items()):
				flop = 2.0 * M * n * k * rows / (M if kind != "wgrad" else n)
				f()
				best = math.inf
				for _ in range(max(3, int(3e9 / flop))):
					t0 = time.thread_time()
					f()
					best = min(best, time.thread_time() - t0)
				best = max(best, 1e-6)
				rates.append(flop / best / 1e9)
				per_step = (1 if name == "lmhead" else a.layers) * 2.0 * M * n * k
				acc[0] += per_step
				acc[1] += per_step / (flop / best)
			print(f"gemm {name}.{kind} {M} {n} {k} {rates[0]:.1f} {rates[1]:.1f}")
	print(f"gemm_all {tot['whole'][0] / tot['whole'][1] / 1e9:.1f} {tot['block'][0] / tot['block'][1] / 1e9:.1f}")


def main():
	a = parse()
	if not a.gemm_only:
		import torch
		torch.set_num_threads(a.threads)
		train(a, torch)
	else:
		gemm_probe(a)


def train(a, torch):
	nn, Fn = torch.nn, torch.nn.functional
	C, H, T, L = a.hidden, a.heads, a.seq, a.layers

	class Block(nn.Module):
		def __init__(self):
			super().__init__()
			self.ln_1 = nn.LayerNorm(C)
			self.c_attn = nn.Linear(C, 3 * C)
			self.attn_proj = nn.Linear(C, C)
			self.ln_2 = nn.LayerNorm(C)
			self.c_fc = nn.Linear(C, 4 * C)
			self.gelu = nn.GELU(approximate="tanh")
			self.mlp_proj = nn.Linear(4 * C, C)
			self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T))

		def attn(self, x):
			B, T_, _ = x.shape
			q, k, v = self.c_attn(x).split(C, dim=2)
			q = q.view(B, T_, H, C // H).transpose(1, 2)
			k = k.view(B, T_, H, C // H).transpose(1, 2)
			v = v.view(B, T_, H, C // H).transpose(1, 2)
			att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
			att = att.masked_fill(~self.mask[:, :, :T_, :T_], float("-inf"))
			att = Fn.softmax(att, dim=-1)
			y = (att @ v).transpose(1, 2).contiguous().view(B, T_, C)
			return self.attn_proj(y)

		def forward(self, x):
			x = x + self.attn(self.ln_1(x))
			return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))

	class GPT(nn.Module):
		def __init__(self):
			super().__init__()
			self.wte = nn.Embedding(a.padded_vocab, C)
			self.wpe = nn.Embedding(T, C)
			self.h = nn.ModuleList(Block() for _ in range(L))
			self.ln_f = nn.LayerNorm(C)
			for p in self.parameters():
				if p.dim() == 2:
					nn.init.normal_(p, std=0.02)

		def forward(self, idx, targets):
			pos = torch.arange(idx.size(1))
			x = self.wte(idx) + self.wpe(pos)
			for b in self.h:
				x = b(x)
			logits = Fn.linear(self.ln_f(x), self.wte.weight)   # tied
			return Fn.cross_entropy(logits[..., :a.vocab].reshape(-1, a.vocab), targets.view(-1))

	torch.manual_seed(1234)
	model = GPT()
	n_params = sum(p.numel() for p in model.parameters())   # the tied matrix once
	decay = [p for p in model.parameters() if p.dim() == 2]
	other = [p for p in model.parameters() if p.dim() < 2]
	opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
				 {"params": other, "weight_decay": 0.0}],
				lr=6e-4, betas=(0.9, 0.999), eps=1e-8, foreach=a.foreach)
	g = torch.Generator().manual_seed(1)
	steps = []   # (seconds, share of the machine's CPU time other processes used, CPUs used)
	for i in range(a.warmup + a.steps):
		x = torch.randint(0, a.vocab, (a.batch, T), generator=g)
		y = torch.randint(0, a.vocab, (a.batch, T), generator=g)
		c0, t0 = cpu_sample(), time.perf_counter()
		loss = model(x, y)
		opt.zero_grad(set_to_none=True)
		loss.backward()
		nn.utils.clip_grad_norm_(model.parameters(), 1.0)
		opt.step()
		c1, dt = cpu_sample(), time.perf_counter() - t0
		others = others_share(c0, c1)
		used = os.cpu_count() * (c1[2] - c0[2]) / max(1, c1[1] - c0[1])
		print(f"step {i + 1}: {dt:.3f} s, loss {loss.item():.4f}, torch used {used:.2f} CPUs, "
		      f"other processes {100 * others:.0f}% of all", file=sys.stderr)
		if i >= a.warmup:
			steps.append((dt, others, used))
	# the best step (other work only ever slows one), among those nothing else ran beside if any
	clean = [s for s in steps if s[1] < CLEAN]
	step, others, used = min(clean or steps)
	print(f"torch {torch.__version__} threads {torch.get_num_threads()}")
	print(f"params {n_params}")
	print(f"step_s {step:.4f}")
	print(f"others {others:.3f}")
	print(f"used {used:.2f}")
	print(f"tokens_s {a.batch * T / step:.1f}")


if __name__ == "__main__":
	main()
