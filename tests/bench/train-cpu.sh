#!/usr/bin/env bash
# train-cpu.sh - train's fp32 CPU training step against PyTorch's, same model, same threads, in
# one run; and how close both come to the CPU's fp32 FMA peak.
#
# The model is GPT-2 124M-shaped (12 layers, hidden 768, 12 heads, seq 1024, micro-batch 1,
# vocabulary 50257 padded to 50304, no dropout); TRAIN_BENCH_MODEL=350m gives the 24 x 1024 x 16
# one.  train trains it on real English text in GPT-2's vocabulary (the --bench corpus of
# tests/ref/corpus.sh, tokenized by bin/tokenize and indexed by bin/mkindex once, kept under
# ${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}; in a bare clone, without the OpenWebText documents that
# corpus needs (CI's ../shared, or LMTK_OWT), the test corpus of the same script instead); tests/bench/train-torch.py builds the same pre-LN GPT-2
# in torch 1.13 (Debian's /usr/bin/python3) and times forward + backward + clip + AdamW on random
# ids.  Both use TRAIN_BENCH_THREADS threads (default: all online CPUs) and the same libopenblas.
#
#   tokens/s  B*T / best step time (best of, as tokenize.sh: other work on the machine only ever
#             slows a step): train's iterations after the first 2 (TRAIN_BENCH_ITERS, default 6),
#             PyTorch's steps after 1 warm-up (TRAIN_BENCH_TORCH_STEPS timed, default 3)
#   GFLOP/s   model FLOPs per step / step time, model FLOPs = (6 N + 12 L C T) per token, N every
#             parameter with the tied embedding counted once (both programs must agree on N)
#   peak      measured, not assumed: /proc/cpuinfo's "cpu MHz" is the nominal clock (in a VM the
#             host's base clock), not what the cores run at, and a core with two 512-bit FMA pipes
#             (Zen 5, Xeon) does 64 fp32 FLOP/cycle, not 32.  A small C probe times, per thread and
#             in thread CPU time (so that other work on the machine does not lower it), a chain of
#             dependent adds (the clock) and 12 independent FMA chains (AVX2 and AVX-512), summed
#             over the threads.  % of peak is against the faster of the two; the AVX2 figure is
#             the ceiling of OpenBLAS's AVX2 kernels (Haswell), which OPENBLAS_CORETYPE may force.
#   sgemm     OpenBLAS alone (numpy, same libopenblas) on the step's GEMM shapes, whole (as PyTorch
#             calls it) and in train's 128-row blocks, FLOP-weighted over one step's mix: one core
#             in thread CPU time, times the threads: the ceiling for a step made only of GEMMs
# Each step also reports the CPUs it used and the share of the machine's CPU time other processes
# took meanwhile (/proc/stat): a step beside which they took >= 10% counts only when no step is
# clean, and the table says so.  With TRAIN_BENCH_PERF=1 it also profiles one more train run
# (perf record --call-graph dwarf, 199 Hz) and prints each op's share of train's CPU time after
# start-up, split into sgemm, libm (expf, tanhf), own code, OpenMP barrier spin and other.
# ~2 minutes on 2 idle cores (3 with TRAIN_BENCH_PERF=1).  Last line:
#   bench: train-cpu: GPT-2 124M, B=1 T=1024, 2 threads: train X tok/s = R x PyTorch 1.13 (Y tok/s); G GFLOP/s = P% of F GFLOP/s FMA peak ...
set -euo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${LMTK_BENCH_DIR:-/var/tmp/lmtk-bench}
THREADS=${TRAIN_BENCH_THREADS:-$(nproc)}
ITERS=${TRAIN_BENCH_ITERS:-6}
TSTEPS=${TRAIN_BENCH_TORCH_STEPS:-3}
NAME=train-cpu
PY=/usr/bin/python3
case ${TRAIN_BENCH_MODEL:-124m} in
124m) L=12 C=768 H=12 LABEL="GPT-2 124M" ;;
350m) L=24 C=1024 H=16 LABEL="GPT-2 350M" ;;
*) echo "$NAME: TRAIN_BENCH_MODEL is 124m or 350m" >&2; exit 2 ;;
esac
T=1024 B=1 V=50257 VP=50304

die() { echo "$NAME: $*" >&2; exit 1; }
[ -x "$TOP/bin/train" ] || die "bin/train is not built (run make)"
[ -x "$TOP/bin/tokenize" ] && [ -x "$TOP/bin/mkindex" ] || die "bin/tokenize and bin/mkindex are not built (run make)"
$PY -c 'import torch, numpy' 2>/dev/null || die "$PY has no torch or numpy (apt-get install python3-torch python3-numpy)"
mkdir -p "$CACHE"
export LMTK_NODE_MODULES=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# --- data: real English text in GPT-2's vocabulary (for the speed only the ids' range matters) ---
G=$CACHE/gpt2
OWT=${LMTK_OWT:-$TOP/../shared/data/megatron/openwebtext-1000.jsonl}
if [ -r "$OWT" ]; then
	export LMTK_OWT=$OWT
	CORPUS=(--bench "$CACHE/bench.jsonl") NAME_DATA=train-bench
else
	echo "$NAME: no OpenWebText documents ($OWT; set LMTK_OWT): training on the test corpus" >&2
	CORPUS=("$CACHE/test.jsonl") NAME_DATA=train-bench-test
fi
DATA=$CACHE/${NAME_DATA}_text_document
if [ ! -f "$DATA.idx" ]; then
	bash "$TOP/tests/ref/corpus.sh" "${CORPUS[@]}" >&2
	bash "$TOP/tests/ref/gpt2-files.sh" "$G" >&2
	"$TOP/bin/tokenize" --quiet --vocab-file "$G/vocab.json" --merge-file "$G/merges.txt" \
		--append-eod < "${CORPUS[-1]}" | "$TOP/bin/mkindex" --output-prefix "$CACHE/$NAME_DATA" >&2
fi

# --- the fp32 FMA peak, measured ---
mhz=$(awk -F: '/^cpu MHz/ { print $2 + 0; exit }' /proc/cpuinfo)
cat > "$WORK/fma.c" <<'EOF'
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}
/* 12 independent chains: more than FMA latency x pipes on any x86 core of the last decade */
static float __attribute__((target("avx512f"))) k512(long n)
{
	__m512 a[12], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
	float s = 0;
	for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
	for (long k = 0; k < n; k++)
		for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
	for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
	return s;
}
static float __attribute__((target("avx2,fma"))) k256(long n)
{
	__m256 a[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
	float o[8], s = 0;
	for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
	for (long k = 0; k < n; k++)
		for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], x, y);
	for (int i = 0; i < 12; i++) {
		_mm256_storeu_ps(o, a[i]);
		for (int j = 0; j < 8; j++) s += o[j];
	}
	return s;
}
/* THREADS -> "GHz G avx2 F avx512 F": mean clock; GFLOP/s summed over the threads, each thread's
 * the best of 5 in its own CPU time; avx512 0 on a CPU without it */
int main(int argc, char **argv)
{
	int th = argc > 1 ? atoi(argv[1]) : 1, has512 = !!__builtin_cpu_supports("avx512f");
	double ghz = 0, f2 = 0, f5 = 0;
	volatile float sink = 0;
#pragma omp parallel num_threads(th) reduction(+ : ghz, f2, f5)
	{
		double best[3] = {0, 0, 0};
		for (int r = 0; r < 5; r++) {
			long n = 400000000, x = 0;   /* 1 cycle per dependent add */
			double t0 = cpu_s(), g;
			__asm__ volatile("1: add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0\n"
					 " sub $4, %1\n jnz 1b" : "+r"(x), "+r"(n));
			g = 0.4 / (cpu_s() - t0);
			best[0] = g > best[0] ? g : best[0];
			for (int w = 1; w <= 1 + has512; w++) {
				long k = 20000000;
				t0 = cpu_s();
				sink += w == 2 ? k512(k) : k256(k);
				g = 2.0 * 8 * w * 12 * k / (cpu_s() - t0) / 1e9;
				best[w] = g > best[w] ? g : best[w];
			}
		}
		ghz += best[0] / th;
		f2 += best[1];
		f5 += best[2];
	}
	printf("GHz %.2f avx2 %.1f avx512 %.1f\n", ghz, f2, f5);
	return 0;
}
EOF
gcc -O3 -fopenmp -o "$WORK/fma" "$WORK/fma.c" || die "cannot build the FMA probe"
read -r _ ghz _ fma2 _ fma512 < <("$WORK/fma" "$THREADS")
peak=$(awk -v a="$fma2" -v b="$fma512" 'BEGIN { print (b > a ? b : a) }')

# --- train ---
TRAIN_CMD=("$TOP/bin/train" --num-layers "$L" --hidden-size "$C" --num-attention-heads "$H"
	--seq-length "$T" --max-position-embeddings "$T" --micro-batch-size "$B" --global-batch-size "$B"
	--train-iters "$ITERS" --lr 6e-4 --data-path "$DATA" --vocab-file "$G/vocab.json"
	--merge-file "$G/merges.txt" --log-interval 1 --eval-iters 0 --hidden-dropout 0
	--attention-dropout 0 --device cpu --threads "$THREADS")
[ -z "${OPENBLAS_CORETYPE:-}" ] || echo "$NAME: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE is set: train's and PyTorch's OpenBLAS use that core's kernels" >&2
echo "$NAME: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "$NAME: (cd $WORK && ${TRAIN_CMD[*]})" >&2
# Each iteration's line is read as train prints it, with what other processes did meanwhile: the
# machine's busy CPU ticks (/proc/stat) less train's own (/proc/PID/stat).  A step beside which
# they used >= 10% of the CPUs does not count when there are steps without.
ticks() {  # -> "busy total ours"
	local c u n s i w q sq st f
	read -r c u n s i w q sq st _ < /proc/stat
	read -r -a f < "/proc/$1/stat" 2> /dev/null || f=()
	echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st)) $((${f[13]:-0} + ${f[14]:-0}))"
}
mkfifo "$WORK/train.fifo"
(cd "$WORK" && exec "${TRAIN_CMD[@]}") > "$WORK/train.fifo" 2>&1 &
pid=$!
prev=$(ticks "$pid")
while IFS= read -r line; do
	echo "$line" >> "$WORK/train.log"
	case $line in
	" iteration "*)
		now=$(ticks "$pid")
		read -r b0 t0 o0 b1 t1 o1 <<< "$prev $now"
		prev=$now
		it=$(awk '{ print $2 + 0 }' <<< "$line")
		sec=$(sed 's/.*elapsed time per iteration (s): \([0-9.]*\).*/\1/' <<< "$line")
		read -r others used < <(awk -v b="$((b1 - b0))" -v o="$((o1 - o0))" -v t="$((t1 - t0))" -v n="$(nproc)" \
			'BEGIN { t = t > 0 ? t : 1; x = (b - o) / t; printf "%.3f %.2f\n", (x > 0 ? x : 0), n * o / t }')
		echo "$it $sec $others $used" >> "$WORK/train.steps"
		echo "train: iteration $it: $sec s, train used $used CPUs, other processes $(awk -v x="$others" 'BEGIN { printf "%.0f", 100 * x }')% of all" >&2 ;;
	"train: GPT"*) echo "$line" >&2 ;;
	esac
done < "$WORK/train.fifo"
wait "$pid" || { cat "$WORK/train.log" >&2; die "train failed"; }
n_params=$(sed -n 's/^train: .* model, \([0-9]*\) parameters.*/\1/p' "$WORK/train.log")
blas=$(sed -n 's/^train: .* on CPU, [0-9]* threads*, OpenBLAS \([0-9.]*\) .* \([A-Za-z0-9]*\) MAX_THREADS.*/OpenBLAS \1 \2 kernels/p' "$WORK/train.log")
[ -n "$n_params" ] || die "no parameter count in train's log"
# the best timed iteration (after 2), among the clean ones if any: "seconds others CPUs-used"
read -r train_s train_others train_used < <(awk '$1 > 2 { n++; if ($3 < 0.10 && (!c++ || $2 < cb)) { cb = $2; co = $3; cu = $4 }
	if (n == 1 || $2 < b) { b = $2; o = $3; u = $4 } } END { if (c) print cb, co, cu; else if (n) print b, o, u }' "$WORK/train.steps")
[ -n "${train_s:-}" ] || die "no timed iterations in train's log (TRAIN_BENCH_ITERS must be > 2)"

# --- PyTorch, then OpenBLAS alone on the same shapes (one core, x threads) ---
TORCH_CMD=(env OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" $PY "$TOP/tests/bench/train-torch.py"
	--layers "$L" --hidden "$C" --heads "$H" --seq "$T" --batch "$B" --vocab "$V" --padded-vocab "$VP"
	--threads "$THREADS" --steps "$TSTEPS" --warmup 1)
echo "$NAME: ${TORCH_CMD[*]}" >&2
"${TORCH_CMD[@]}" > "$WORK/torch.out" 2> "$WORK/torch.err" || { cat "$WORK/torch.err" >&2; die "train-torch.py failed"; }
cat "$WORK/torch.err" >&2
OPENBLAS_NUM_THREADS=1 $PY "$TOP/tests/bench/train-torch.py" --gemm-only --layers "$L" --hidden "$C" \
	--seq "$T" --batch "$B" --padded-vocab "$VP" > "$WORK/gemm.out" || die "the sgemm probe failed"
echo "$NAME: OpenBLAS sgemm, GFLOP/s of one core: NAME.KIND M N K whole train's-128-row-blocks" >&2
cat "$WORK/gemm.out" >&2
echo "$NAME: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
tv() { awk -v k="$1" '$1 == k { print $2 }' "$WORK/torch.out"; }
[ "$(tv params)" = "$n_params" ] || die "PyTorch's model has $(tv params) parameters, train's $n_params: not the same model"

# --- optional: where train's time goes ---
if [ "${TRAIN_BENCH_PERF:-0}" = 1 ]; then
	(cd "$WORK" && perf record -q -F 199 --call-graph dwarf,8192 -o "$WORK/perf.data" \
		"${TRAIN_CMD[@]}" > "$WORK/perf.log" 2>&1) || { cat "$WORK/perf.log" >&2; die "perf record failed"; }
	echo "$NAME: profiled run: $(grep -o 'elapsed time per iteration (s): [0-9.]*' "$WORK/perf.log" | awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $NF }') s per iteration" >&2
	perf script -i "$WORK/perf.data" -F time,ip,sym,dso 2> /dev/null > "$WORK/perf.txt"
	$PY - "$WORK/perf.txt" >&2 <<'EOF'
import collections, sys
samples, cur = [], None          # (time, ["symbol (dso)" frames, leaf first])
for line in open(sys.argv[1]):
	if not line.strip():
		cur = None
	elif not line[0].isspace():
		cur = (float(line.split()[0].rstrip(":")), [])
		samples.append(cur)
	elif cur is not None:
		f = line.split(None, 1)
		cur[1].append(f[1].strip() if len(f) > 1 else "?")
start = max([t for t, fr in samples if any(f.startswith("model_init") for f in fr)] or [0])
steady = [fr for t, fr in samples if t > start and fr]
OPS = [("matmul fwd", "cpu_matmul_fwd"), ("matmul bwd", "cpu_matmul_bwd"),
       ("attention fwd", "cpu_attention_fwd"), ("attention bwd", "cpu_attention_bwd"),
       ("gelu fwd", "cpu_gelu_fwd"), ("gelu bwd", "cpu_gelu_bwd"), ("layernorm", "cpu_layernorm"),
       ("xent", "cpu_xent"), ("adamw", "cpu_adamw"), ("grad norm", "cpu_sumsq"),
       ("grad norm", "cpu_all_within"), ("embedding", "cpu_embed"), ("residual/dropout/add", "cpu_residual"),
       ("residual/dropout/add", "cpu_dropout"), ("residual/dropout/add", "cpu_add")]
def op(fr):
	for f in fr:
		for name, prefix in OPS:
			if f.startswith(prefix):
				return name
	return "no op (idle worker)"
KINDS = ("sgemm", "libm", "own", "omp wait", "other")
def leaf(f):   # OpenMP's barrier spin (libgomp is stripped: its frames have no names)
	return ("sgemm" if f.startswith(("sgemm", "cblas")) else
		"libm" if "libm.so" in f else
		"own" if f.startswith(("cpu_", "att_probs")) else
		"omp wait" if "libgomp" in f else "other")
by_op, by_leaf = collections.Counter(), collections.Counter()
for fr in steady:
	by_op[op(fr)] += 1
	by_leaf[(op(fr), leaf(fr[0]))] += 1
n = len(steady) or 1
print(f"train profile: {len(steady)} samples after start-up; % of train's CPU time ({' / '.join(KINDS)})")
for o, c in by_op.most_common():
	parts = " / ".join(f"{100 * by_leaf[(o, k)] / n:.1f}" for k in KINDS)
	print(f"  {o:22s} {100 * c / n:5.1f}%   ({parts})")
tot = {k: sum(v for (o, kk), v in by_leaf.items() if kk == k) for k in KINDS}
print("  all: " + ", ".join(f"{k} {100 * v / n:.1f}%" for k, v in tot.items()))
EOF
fi

# --- the table ---
awk -v ts="$train_s" -v to="$train_others" -v tu="$train_used" -v ps="$(tv step_s)" -v po="$(tv others)" \
	-v pu="$(tv used)" -v n="$n_params" \
	-v L="$L" -v C="$C" -v T="$T" -v B="$B" -v th="$THREADS" -v mhz="$mhz" -v ghz="$ghz" -v peak="$peak" \
	-v f2="$fma2" -v f5="$fma512" -v sgw="$(awk '$1 == "gemm_all" { print $2 }' "$WORK/gemm.out")" \
	-v sgb="$(awk '$1 == "gemm_all" { print $3 }' "$WORK/gemm.out")" -v label="$LABEL" -v name="$NAME" -v blas="$blas" \
	-v tver="$(tv torch)" 'BEGIN {
	fpt = 6 * n + 12 * L * C * T                 # model FLOPs per token
	ours = B * T / ts; tt = B * T / ps
	go = ours * fpt / 1e9; gt = tt * fpt / 1e9; sg = sgw * th; sb = sgb * th
	printf "%s: %s, %d parameters, B=%d T=%d, fp32, %d threads, %s; %.1f GFLOP per step\n", name, label, n, B, T, th, blas, fpt * B * T / 1e9
	printf "%s: fp32 FMA peak, %d threads at %.2f GHz (measured): AVX-512 %.1f GFLOP/s, AVX2 %.1f (cpuinfo: %d x %.0f MHz x 32 = %.1f)\n",
		name, th, ghz, f5, f2, th, mhz, th * mhz * 32 / 1e3
	printf "| %-23s | %6s | %8s | %7s | %7s | %10s | %9s | %10s |\n", "", "step s", "tokens/s", "GFLOP/s", "of peak", "of AVX2 pk", "CPUs used", "others CPU"
	printf "| %-23s | %6.2f | %8.1f | %7.1f | %6.1f%% | %9.1f%% | %9.2f | %9.0f%% |\n", "train", ts, ours, go, 100 * go / peak, 100 * go / f2, tu, 100 * to
	printf "| %-23s | %6.2f | %8.1f | %7.1f | %6.1f%% | %9.1f%% | %9.2f | %9.0f%% |\n", "PyTorch " tver, ps, tt, gt, 100 * gt / peak, 100 * gt / f2, pu, 100 * po
	printf "| %-23s | %6s | %8s | %7.1f | %6.1f%% | %9.1f%% | %9s | %10s |\n", "OpenBLAS sgemm, whole", "-", "-", sg, 100 * sg / peak, 100 * sg / f2, "-", "-"
	printf "| %-23s | %6s | %8s | %7.1f | %6.1f%% | %9.1f%% | %9s | %10s |\n", "OpenBLAS sgemm, 128-row", "-", "-", sb, 100 * sb / peak, 100 * sb / f2, "-", "-"
	if (to >= 0.10 || po >= 0.10)
		printf "%s: warning: other processes used %.0f%% / %.0f%% of the CPUs during the best steps: the speeds are low\n", name, 100 * to, 100 * po
	printf "bench: %s: %s, B=%d T=%d, %d threads: train %.1f tok/s = %.2fx PyTorch %s (%.1f tok/s); %.1f GFLOP/s = %.1f%% of %.0f GFLOP/s FMA peak (sgemm alone %.1f, %s)\n",
		name, label, B, T, th, ours, ours / tt, tver, tt, go, 100 * go / peak, peak, sg, blas }'
