/* sched - running a kernel on the CPU executor (tests/cuda-exec): its blocks one after another,
 * every CUDA thread of a block a fiber with its own stack.
 *
 * A fiber runs until it reaches __syncthreads(), a warp-synchronous call or its end, then
 * switches back to the scheduler, which resumes the next runnable thread in the interval's
 * order (LMTK_CUDA_EXEC_ORDER: forward, reverse, or a fresh random permutation per barrier
 * interval).  The context switch saves the callee-saved registers (x86-64 System V, a few
 * instructions; ucontext elsewhere).
 *
 * Barriers and warp calls follow the Programming Guide and the PTX ISA to the letter: a
 * __syncthreads() completes when every thread of the block has reached the same one; a thread
 * that has exited, or waits at a different __syncthreads(), is barrier divergence - undefined on
 * the device, an error here.  A warp call completes when every lane named in its member mask
 * has made the same call with the same mask (the matrix instructions mma.sync and ldmatrix of
 * include/cx_ptx.h: every lane of the warp, at the same instruction); the results follow the
 * PTX rules (shuffle source lanes within width segments, "later groups" returning the caller's
 * own value, the matrix fragments' per-lane tables, and so on).  A lane that exits or waits at
 * a barrier while others wait for it, a mask that leaves out the caller or names an exited lane,
 * and a shuffle reading a lane outside its mask (an undefined value) are errors.  Every error stops the kernel with a message naming the kernel, the block,
 * the thread and the source line, and becomes the context's sticky error.
 *
 * Spin-waits.  A block may wait for another block's writes (a flag or counter in global memory,
 * polled with __nanosleep() in the loop, or a volatile load alone: one location read 64 times
 * in a row with no write in between counts as a spin) if that block started before it: CUDA
 * promises no order in which a grid's blocks start, nor that a later one ever becomes resident
 * while earlier ones spin, only that a resident block runs on.  So a kernel whose blocks hand
 * each other work in order takes its tile ids from an atomic counter when each block starts
 * (CUB's decoupled look-back does) rather than from blockIdx, and waits only for lower tile ids.
 * Here __nanosleep() yields the thread; when every runnable thread of the block has spun without
 * any write of the launch in between, the block is stuck.  By default (LMTK_CUDA_EXEC_DISPATCH=
 * any) a block runs to its end before the next one in the launch's order starts - one resident
 * block, a legal device - so a stuck block waits for nothing that can happen: a deadlock,
 * reported with the spinning line instead of hanging, in whichever order (forward, reverse,
 * random) exposes it.  LMTK_CUDA_EXEC_DISPATCH=index models the hardware's habit of starting
 * lower indices first: a stuck block is parked (its fibers, stacks and shared memory set aside)
 * while a block of lower index that has not started yet runs - the next one in the launch's
 * order - after which it is resumed; stuck with no such block left is a deadlock.  What blocks hand each other goes through atomics: the race shadow knows no acquire
 * or release, so a plain store one block makes and another reads after the wait is a race to
 * it.  The race shadow tells blocks apart by block, so the blocks that ran while one was
 * parked are checked against it as any two blocks are. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <deque>
#include <vector>

#include "cuda_fp16.h"
#include "cx_ptx.h"
#include "exec.h"

/* ---------------------------------------------------------------------------------------------
 * fibers: a context switch of callee-saved registers (x86-64 System V), ucontext elsewhere */


#if defined(__x86_64__)
extern "C" void cx_switch(void **save_sp, void *to_sp);
extern "C" void cx_fiber_boot(void);
__asm__(".text\n"
	".globl cx_switch\n"
	".hidden cx_switch\n"
	".type cx_switch,@function\n"
	"cx_switch:\n"
	"\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
	"\tsubq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n"
	"\tmovq %rsp, (%rdi)\n"
	"\tmovq %rsi, %rsp\n"
	"\tldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n"
	"\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
	"\tret\n"
	".size cx_switch,.-cx_switch\n"
	".globl cx_fiber_boot\n"
	".hidden cx_fiber_boot\n"
	".type cx_fiber_boot,@function\n"
	"cx_fiber_boot:\n"
	"\tmovq %r12, %rdi\n"
	"\tcall cx_fiber_main@PLT\n"
	"\tud2\n"
	".size cx_fiber_boot,.-cx_fiber_boot\n");
#endif

std::vector<Thr> g_thr;
static std::vector<char *> g_stacks;
size_t g_stack_bytes;
std::vector<Warp> g_warps;
static std::deque<int> g_runq;
static std::vector<int> g_perm;
static void *g_sched_sp;
#if !defined(__x86_64__)
static ucontext_t g_sched_uc;
#endif
Thr *g_cur;
int g_running;
int g_abort;
int g_in_atomic;
const Launch *g_launch;
uint3 g_block;
int g_nthr;
static int g_ndone, g_bar_count;
static const char *g_bar_file;
static int g_bar_line, g_bar_first;
uint32_t g_epoch, g_block_epoch, g_launch_epoch;
uint64_t g_progress;
static int g_spun;               /* the thread that just switched out spun in __nanosleep() */
static const char *g_spin_file;
static int g_spin_line;
std::vector<uint32_t> g_epoch_block;

static void epoch_advance(void)
{
	g_epoch++;
	g_epoch_block.push_back(g_block.x + g_launch->grid.x * (g_block.y + g_launch->grid.y * g_block.z));
}
static uint64_t g_rng;

extern "C" uint3 cx_thread_idx(void) { return g_cur->tid; }
extern "C" uint3 cx_block_idx(void) { return g_block; }
extern "C" dim3 cx_block_dim(void) { return g_launch->block; }
extern "C" dim3 cx_grid_dim(void) { return g_launch->grid; }

static uint64_t rng_next(void)
{
	/* splitmix64 */
	uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* the order of this interval: forward, reverse or a fresh random permutation */
static void new_order(int n)
{
	g_perm.resize(n);
	for (int i = 0; i < n; i++)
		g_perm[i] = cfg.order == 1 ? n - 1 - i : i;
	if (cfg.order == 2)
		for (int i = n - 1; i > 0; i--)
			std::swap(g_perm[i], g_perm[rng_next() % (uint64_t)(i + 1)]);
	for (int i = 0; i < n; i++)
		g_thr[g_perm[i]].rank = (uint32_t)i;
}

static void stacks_reserve(int n)
{
	size_t want = cfg.stack + g_page; /* a guard page below each stack */
	if (g_stack_bytes != want) {
		for (char *s : g_stacks)
			munmap(s, g_stack_bytes);
		g_stacks.clear();
		g_stack_bytes = want;
	}
	while ((int)g_stacks.size() < n) {
		void *p = mmap(NULL, want, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "cuda-exec: cannot map fiber stacks\n");
			abort();
		}
		mprotect(p, g_page, PROT_NONE);
		g_stacks.push_back((char *)p);
	}
}

#if !defined(__x86_64__)
static void fiber_boot_uc(void)
{
	cx_fiber_main(g_cur);
}
#endif

static void fiber_init(Thr *t, char *mem)
{
	t->stk_lo = mem + g_page;
	t->stk_hi = mem + g_stack_bytes;
#if defined(__x86_64__)
	uintptr_t top = ((uintptr_t)t->stk_hi & ~(uintptr_t)15) - 16;
	uint64_t *sp = (uint64_t *)(top - 64); /* 16-aligned, so the boot stub calls aligned */
	uint32_t csr;
	uint16_t cw;
	__asm__ volatile("stmxcsr %0" : "=m"(csr));
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	sp[0] = (uint64_t)csr | ((uint64_t)cw << 32);
	sp[1] = 0, sp[2] = 0, sp[3] = 0;      /* r15 r14 r13 */
	sp[4] = (uint64_t)(uintptr_t)t;       /* r12: the boot stub's argument */
	sp[5] = 0, sp[6] = 0;                 /* rbx rbp */
	sp[7] = (uint64_t)(uintptr_t)&cx_fiber_boot;
	t->sp = sp;
#else
	getcontext(&t->uc);
	t->uc.uc_stack.ss_sp = t->stk_lo;
	t->uc.uc_stack.ss_size = t->stk_hi - t->stk_lo;
	t->uc.uc_link = NULL;
	makecontext(&t->uc, (void (*)(void))fiber_boot_uc, 0);
#endif
}

static void to_sched(Thr *t)
{
#if defined(__x86_64__)
	cx_switch(&t->sp, g_sched_sp);
#else
	swapcontext(&t->uc, &g_sched_uc);
#endif
}

static void to_thread(Thr *t)
{
	g_cur = t;
#if defined(__x86_64__)
	cx_switch(&g_sched_sp, t->sp);
#else
	swapcontext(&g_sched_uc, &t->uc);
#endif
	g_cur = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * failing a kernel */

void thr_str(char *b, size_t n, const Thr *t)
{
	snprintf(b, n, "(%u,%u,%u)", t->tid.x, t->tid.y, t->tid.z);
}

/* Reports a failure of the running kernel, makes it the sticky error and, inside a CUDA thread,
 * abandons the block (the thread never resumes). */
void kfail(cudaError_t code, const Thr *t, const char *fmt, ...)
{
	char msg[1400], who[400], tb[40] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (t)
		thr_str(tb, sizeof tb, t);
	snprintf(who, sizeof who, "kernel %s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>", g_launch->name,
		 g_launch->grid.x, g_launch->grid.y, g_launch->grid.z, g_launch->block.x,
		 g_launch->block.y, g_launch->block.z, g_launch->smem);
	if (!g_abort)
		cx_say(who, "block (%u,%u,%u)%s%s: %s", g_block.x, g_block.y, g_block.z,
		       t ? " thread " : "", tb, msg);
	if (g_sticky == cudaSuccess)
		g_sticky = code;
	g_abort = 1;
	if (g_cur) {
		Thr *c = g_cur;
		c->state = T_DONE;
		to_sched(c);
		__builtin_unreachable();
	}
}

/* ---------------------------------------------------------------------------------------------
 * barriers */

static void resume_all_in_order(void)
{
	for (int i : g_perm)
		if (g_thr[i].state != T_DONE) {
			g_thr[i].state = T_RUN;
			g_runq.push_back(i);
		}
}

/* A thread reaching a barrier whose warp-mates wait for it in a warp call deadlocks. */
static void check_no_warp_waiter(Thr *t, const char *what, const char *file, int line)
{
	Warp &w = g_warps[t->warp];
	for (int i = 0; i < w.ngroups; i++) {
		Group &g = w.groups[i];
		if (!(g.mask & lane_bit(t)))
			continue;
		Thr &o = g_thr[t->warp * 32 + g.first];
		char b[40];
		thr_str(b, sizeof b, &o);
		kfail(cudaErrorLaunchFailure, t, "reaches %s (%s:%d) while thread %s waits for it in "
		      "%s (%s:%d, member mask 0x%08x): deadlock", what, file, line, b,
		      coll_name[o.ckind], o.cfile, o.cline, o.cmask);
	}
}

static int barrier(int op, int pred, const char *file, int line)
{
	Thr *t = g_cur;
	if (!t) {
		fprintf(stderr, "cuda-exec: __syncthreads() called outside a kernel (%s:%d)\n", file,
			line);
		abort();
	}
	if (g_ndone > 0) {
		for (Thr &o : g_thr)
			if (&o - g_thr.data() < g_nthr && o.state == T_DONE) {
				char b[40];
				thr_str(b, sizeof b, &o);
				kfail(cudaErrorLaunchFailure, t, "barrier divergence: reaches "
				      "__syncthreads() at %s:%d, but thread %s has already exited and "
				      "never will", file, line, b);
			}
	}
	if (g_bar_count > 0 && (g_bar_line != line || strcmp(g_bar_file, file))) {
		char b[40];
		thr_str(b, sizeof b, &g_thr[g_bar_first]);
		kfail(cudaErrorLaunchFailure, t, "barrier divergence: waits at __syncthreads() %s:%d "
		      "while thread %s waits at __syncthreads() %s:%d", file, line, b, g_bar_file,
		      g_bar_line);
	}
	check_no_warp_waiter(t, "__syncthreads()", file, line);
	if (g_bar_count == 0) {
		g_bar_file = file;
		g_bar_line = line;
		g_bar_first = t->lin;
	}
	g_bar_count++;
	t->bpred = pred;
	t->state = T_BAR;
	g_warps[t->warp].atbar |= lane_bit(t);
	if (g_bar_count == g_nthr) {
		int cnt = 0, all = 1, any = 0;
		for (int i = 0; i < g_nthr; i++) {
			cnt += g_thr[i].bpred != 0;
			all &= g_thr[i].bpred != 0;
			any |= g_thr[i].bpred != 0;
		}
		int res = op == 0 ? cnt : op == 1 ? all : any;
		for (int i = 0; i < g_nthr; i++)
			g_thr[i].bpred = res;
		g_bar_count = 0;
		epoch_advance();
		for (Warp &w : g_warps) {
			w.log.clear();
			w.atbar = 0;
		}
		new_order(g_nthr);
		resume_all_in_order();
		to_sched(t);
	} else {
		to_sched(t);
	}
	return t->bpred;
}

extern "C" void cx_syncthreads(const char *file, int line)
{
	barrier(0, 0, file, line);
}

extern "C" int cx_syncthreads_op(int op, int pred, const char *file, int line)
{
	return barrier(op, pred, file, line);
}

/* ---------------------------------------------------------------------------------------------
 * warp calls */

static int shfl_src(int mode, int lane, int arg, int width)
{
	int seg = lane & ~(width - 1);
	switch (mode) {
	case 0:
		return seg + (arg & (width - 1));
	case 1: { /* up: lanes below the segment's start keep their value */
		int s = lane - arg;
		return arg < 0 || s < seg ? lane : s;
	}
	case 2: {
		int s = lane + arg;
		return arg < 0 || s >= seg + width ? lane : s;
	}
	default: { /* xor: "later groups" give the caller's own value */
		int s = lane ^ arg;
		return s >= seg + width ? lane : s;
	}
	}
}

const char *const coll_name[] = {"__shfl_*_sync", "a vote (__ballot/__any/__all_sync)",
				 "__match_*_sync", "__reduce_*_sync", "__syncwarp", "mma.sync",
				 "ldmatrix"};
static const char *const shfl_name[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
					"__shfl_xor_sync"};

/* ---------------------------------------------------------------------------------------------
 * matrix instructions (include/cx_ptx.h has their contract and the fragment layouts) */

struct MmaLane {
	const uint32_t *a, *b;
	const float *c;
	float *d;
};

struct LdsmLane {
	uint32_t row[4]; /* the 8 b16 elements of the row this lane gave the address of */
	uint32_t *r;
};

static float bf16_lo(uint32_t v)
{
	uint32_t u = v << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static float bf16_hi(uint32_t v)
{
	uint32_t u = v & 0xffff0000u;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* The fp16 halves of a register, exactly (subnormals, infinities and NaN included) */
static float f16_lo(uint32_t v)
{
	return cx_h2f((unsigned short)(v & 0xffffu));
}

static float f16_hi(uint32_t v)
{
	return cx_h2f((unsigned short)(v >> 16));
}

/* mma.sync.aligned.m16n8k16.row.col.f32.{bf16.bf16,f16.f16}.f32 over the 32 lanes from `base`
 * (f16: the .f16 variant; the fragment layout is the same) */
static void mma_complete(Thr *base, int f16)
{
	float (*lo)(uint32_t) = f16 ? f16_lo : bf16_lo, (*hi)(uint32_t) = f16 ? f16_hi : bf16_hi;
	float A[16][16], B[16][8], C[16][8];
	for (int l = 0; l < 32; l++) {
		const MmaLane &m = *(const MmaLane *)base[l].cbuf;
		int g = l >> 2, t = l & 3;
		for (int h = 0; h < 2; h++) { /* h: rows g, g+8 of A and C; k 2t, 2t+8 of B */
			A[g + 8 * h][2 * t] = lo(m.a[h]);
			A[g + 8 * h][2 * t + 1] = hi(m.a[h]);
			A[g + 8 * h][2 * t + 8] = lo(m.a[2 + h]);
			A[g + 8 * h][2 * t + 9] = hi(m.a[2 + h]);
			B[2 * t + 8 * h][g] = lo(m.b[h]);
			B[2 * t + 8 * h + 1][g] = hi(m.b[h]);
			C[g + 8 * h][2 * t] = m.c[2 * h];
			C[g + 8 * h][2 * t + 1] = m.c[2 * h + 1];
		}
	}
	float D[16][8];
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 8; j++) {
			double s = C[i][j]; /* 16-bit products are exact; 17 terms rarely round */
			for (int k = 0; k < 16; k++)
				s += (double)A[i][k] * B[k][j];
			D[i][j] = (float)s;
		}
	for (int l = 0; l < 32; l++) {
		const MmaLane &m = *(const MmaLane *)base[l].cbuf;
		int g = l >> 2, t = l & 3;
		m.d[0] = D[g][2 * t];
		m.d[1] = D[g][2 * t + 1];
		m.d[2] = D[g + 8][2 * t];
		m.d[3] = D[g + 8][2 * t + 1];
	}
}

/* ldmatrix.sync.aligned.m8n8.x{num}{.trans}.shared.b16: row i of matrix m came from lane 8m+i */
static void ldsm_complete(Thr *base, int num, int trans)
{
	for (int l = 0; l < 32; l++) {
		const LdsmLane &me = *(const LdsmLane *)base[l].cbuf;
		int g = l >> 2, t = l & 3;
		for (int m = 0; m < num; m++) {
			uint32_t v;
			if (!trans) {
				v = ((const LdsmLane *)base[8 * m + g].cbuf)->row[t];
			} else { /* elements (2t, g) and (2t+1, g): column g of rows 2t, 2t+1 */
				const LdsmLane &r0 = *(const LdsmLane *)base[8 * m + 2 * t].cbuf;
				const LdsmLane &r1 = *(const LdsmLane *)base[8 * m + 2 * t + 1].cbuf;
				uint32_t e0 = r0.row[g >> 1] >> (16 * (g & 1)) & 0xffffu;
				uint32_t e1 = r1.row[g >> 1] >> (16 * (g & 1)) & 0xffffu;
				v = e0 | e1 << 16;
			}
			me.r[m] = v;
		}
	}
}

static void coll_complete(Thr *t, unsigned mask)
{
	Warp &w = g_warps[t->warp];
	Thr *base = &g_thr[t->warp * 32];
	int kind = t->ckind;
	switch (kind) {
	case C_SHFL:
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			if (a.csize != t->csize)
				kfail(cudaErrorLaunchFailure, &a, "%s (%s:%d) shuffles a %d-byte value "
				      "while lane %d shuffles %d bytes with the same mask",
				      shfl_name[a.cop], a.cfile, a.cline, a.csize, t->lane, t->csize);
			if (a.csrc != a.lane && !(mask & (1u << a.csrc)))
				kfail(cudaErrorLaunchFailure, &a, "%s (%s:%d) reads lane %d, which is "
				      "not in the member mask 0x%08x: its value is undefined",
				      shfl_name[a.cop], a.cfile, a.cline, a.csrc, mask);
			a.cres = base[a.csrc].cval;
		}
		break;
	case C_VOTE: {
		unsigned bal = 0;
		for (unsigned m = mask; m; m &= m - 1)
			if (base[__builtin_ctz(m)].cval)
				bal |= 1u << __builtin_ctz(m);
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			a.cres = a.cop == 0 ? bal : a.cop == 1 ? bal != 0 : bal == mask;
		}
		break;
	}
	case C_MATCH:
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			unsigned same = 0;
			for (unsigned k = mask; k; k &= k - 1)
				if (base[__builtin_ctz(k)].cval == a.cval)
					same |= 1u << __builtin_ctz(k);
			if (a.cop == 0)
				a.cres = same;
			else {
				a.cpred = same == mask;
				a.cres = same == mask ? mask : 0;
			}
		}
		break;
	case C_REDUCE: {
		int op = t->cop >> 1, sgn = t->cop & 1;
		uint64_t acc = 0;
		int first = 1;
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			if (a.cop != t->cop)
				kfail(cudaErrorLaunchFailure, &a, "__reduce_*_sync (%s:%d) with another "
				      "operation than lane %d's (%s:%d)", a.cfile, a.cline, t->lane,
				      t->cfile, t->cline);
			uint32_t v = (uint32_t)a.cval;
			if (first) {
				acc = v;
				first = 0;
				continue;
			}
			uint32_t c = (uint32_t)acc;
			switch (op) {
			case 0: c += v; break;
			case 1: c = sgn ? ((int32_t)v < (int32_t)c ? v : c) : (v < c ? v : c); break;
			case 2: c = sgn ? ((int32_t)v > (int32_t)c ? v : c) : (v > c ? v : c); break;
			case 3: c &= v; break;
			case 4: c |= v; break;
			default: c ^= v; break;
			}
			acc = c;
		}
		for (unsigned m = mask; m; m &= m - 1)
			base[__builtin_ctz(m)].cres = acc;
		break;
	}
	case C_SYNCWARP:
		w.log.push_back(mask);
		break;
	case C_MMA:
	case C_LDSM:
		for (unsigned m = mask; m; m &= m - 1) {
			Thr &a = base[__builtin_ctz(m)];
			if (a.cline != t->cline || strcmp(a.cfile, t->cfile) || a.cop != t->cop)
				kfail(cudaErrorLaunchFailure, &a, "%s at %s:%d while lane %d executes "
				      "%s at %s:%d: .sync.aligned needs every lane of the warp at the "
				      "same instruction", coll_name[kind], a.cfile, a.cline, t->lane,
				      coll_name[kind], t->cfile, t->cline);
		}
		if (kind == C_MMA)
			mma_complete(base, t->cop);
		else
			ldsm_complete(base, t->cop >> 1, t->cop & 1);
		break;
	}
	for (int i = 0; i < w.ngroups; i++)
		if (w.groups[i].mask == mask) {
			w.groups[i] = w.groups[--w.ngroups];
			break;
		}
	int who[32], nw = 0; /* resumed in this interval's order */
	for (unsigned m = mask; m; m &= m - 1) {
		int i = t->warp * 32 + __builtin_ctz(m), k = nw++;
		for (; k > 0 && g_thr[who[k - 1]].rank > g_thr[i].rank; k--)
			who[k] = who[k - 1];
		who[k] = i;
	}
	for (int k = 0; k < nw; k++) {
		g_thr[who[k]].state = T_RUN;
		g_runq.push_back(who[k]);
	}
	to_sched(t);
}

static uint64_t warp_call(int kind, int op, unsigned mask, uint64_t v, int size, int src,
			  const char *file, int line, int *pred_out)
{
	Thr *t = g_cur;
	if (!t) {
		fprintf(stderr, "cuda-exec: warp-synchronous call outside a kernel (%s:%d)\n", file,
			line);
		abort();
	}
	Warp &w = g_warps[t->warp];
	const char *name = kind == C_SHFL ? shfl_name[op] : coll_name[kind];
	if (!(mask & lane_bit(t)))
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) with member mask 0x%08x, which does "
		      "not include the calling lane %d", name, file, line, mask, t->lane);
	if (mask & ~w.all)
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d): member mask 0x%08x names lanes that "
		      "do not exist in this block (warp %d has lanes 0x%08x)", name, file, line, mask,
		      t->warp, w.all);
	if (mask & w.exited)
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d): member mask 0x%08x names lane %d, "
		      "which has exited", name, file, line, mask, __builtin_ctz(mask & w.exited));
	Group *grp = NULL;
	for (int i = 0; i < w.ngroups; i++) {
		Group &g = w.groups[i];
		if (!(g.mask & mask))
			continue;
		Thr &o = g_thr[t->warp * 32 + g.first];
		if (g.mask != mask)
			kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) with member mask 0x%08x, while "
			      "lane %d waits in %s (%s:%d) with mask 0x%08x: all lanes named in a "
			      "mask must make the same call with the same mask", name, file, line,
			      mask, o.lane, o.ckind == C_SHFL ? shfl_name[o.cop] : coll_name[o.ckind],
			      o.cfile, o.cline, o.cmask);
		if (o.ckind != kind)
			kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) while lane %d waits in %s "
			      "(%s:%d) with the same mask 0x%08x", name, file, line, o.lane,
			      coll_name[o.ckind], o.cfile, o.cline, mask);
		grp = &g;
	}
	if (mask & w.atbar)
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) with member mask 0x%08x names lane %d, "
		      "which waits at __syncthreads() (%s:%d): deadlock", name, file, line, mask,
		      __builtin_ctz(mask & w.atbar), g_bar_file, g_bar_line);
	if (!grp) {
		grp = &w.groups[w.ngroups++];
		*grp = Group{mask, 0, t->lane};
	}
	grp->arrived |= lane_bit(t);
	t->ckind = kind;
	t->cop = op;
	t->cmask = mask;
	t->cval = v;
	t->csize = size;
	t->csrc = src;
	t->cfile = file;
	t->cline = line;
	t->state = T_WARP;
	if (grp->arrived == mask)
		coll_complete(t, mask);
	else
		to_sched(t);
	if (pred_out)
		*pred_out = t->cpred;
	return t->cres;
}

extern "C" uint64_t cx_shfl(int mode, unsigned mask, uint64_t v, int size, int arg, int width,
			    const char *file, int line)
{
	Thr *t = g_cur;
	if (t && (width < 1 || width > 32 || (width & (width - 1))))
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d): width %d is not a power of 2 in "
		      "[1, 32]", shfl_name[mode & 3], file, line, width);
	int src = t ? shfl_src(mode, t->lane, arg, width) : 0;
	return warp_call(C_SHFL, mode, mask, v, size, src, file, line, NULL);
}

extern "C" unsigned cx_vote(int op, unsigned mask, int pred, const char *file, int line)
{
	return (unsigned)warp_call(C_VOTE, op, mask, pred != 0, 4, 0, file, line, NULL);
}

extern "C" unsigned cx_match(int all, unsigned mask, uint64_t v, int *pred, const char *file,
			     int line)
{
	int p = 0;
	unsigned r = (unsigned)warp_call(C_MATCH, all, mask, v, 8, 0, file, line, &p);
	if (pred)
		*pred = p;
	return r;
}

extern "C" unsigned cx_reduce(int op, int sgn, unsigned mask, unsigned v, const char *file,
			      int line)
{
	return (unsigned)warp_call(C_REDUCE, op * 2 + sgn, mask, v, 4, 0, file, line, NULL);
}

extern "C" void cx_syncwarp(unsigned mask, const char *file, int line)
{
	warp_call(C_SYNCWARP, 0, mask, 0, 0, 0, file, line, NULL);
}

/* The matrix instructions need the whole warp: a block whose last warp is partial cannot run them
 * there (on the device the missing lanes are inactive, and .aligned makes that undefined). */
static Thr *matrix_caller(const char *what, const char *file, int line)
{
	Thr *t = g_cur;
	if (!t) {
		fprintf(stderr, "cuda-exec: %s (%s:%d) outside a kernel\n", what, file, line);
		abort();
	}
	if (g_warps[t->warp].all != 0xffffffffu)
		kfail(cudaErrorLaunchFailure, t, "%s (%s:%d) in warp %d, which has only %d threads: "
		      "the instruction needs all 32 lanes of a warp", what, file, line, t->warp,
		      __builtin_popcount(g_warps[t->warp].all));
	return t;
}

/* op 0: .bf16 inputs, 1: .f16 (every lane must run the same variant) */
static void mma_call(int f16, float *d, const uint32_t *a, const uint32_t *b, const float *c,
		     const char *file, int line)
{
	Thr *t = matrix_caller("mma.sync", file, line);
	MmaLane m = {a, b, c, d};
	t->cbuf = &m;
	warp_call(C_MMA, f16, 0xffffffffu, 0, 0, 0, file, line, NULL);
}

extern "C" void cx_mma_bf16(float *d, const uint32_t *a, const uint32_t *b, const float *c,
			    const char *file, int line)
{
	mma_call(0, d, a, b, c, file, line);
}

extern "C" void cx_mma_f16(float *d, const uint32_t *a, const uint32_t *b, const float *c,
			   const char *file, int line)
{
	mma_call(1, d, a, b, c, file, line);
}

extern "C" void cx_ldmatrix(uint32_t *r, int num, int trans, const void *p, const char *file,
			    int line)
{
	Thr *t = matrix_caller("ldmatrix", file, line);
	LdsmLane m;
	memset(m.row, 0, sizeof m.row);
	m.r = r;
	if (t->lane < 8 * num) { /* this lane gives row lane % 8 of matrix lane / 8 */
		if (!smem_contains(p, 16))
			kfail(cudaErrorIllegalAddress, t, "ldmatrix (%s:%d): lane %d's row address %p "
			      "is not in shared memory", file, line, t->lane, p);
		if ((uintptr_t)p & 15)
			kfail(cudaErrorMisalignedAddress, t, "ldmatrix (%s:%d): lane %d's row address "
			      "%p is not 16-byte aligned", file, line, t->lane, p);
		thread_access(p, 16, 0); /* bounds, races, uninitialised bytes */
		memcpy(m.row, p, 16);
	}
	t->cbuf = &m;
	warp_call(C_LDSM, num * 2 + trans, 0xffffffffu, 0, 0, 0, file, line, NULL);
}

extern "C" unsigned cx_activemask(void)
{
	Thr *t = g_cur;
	if (!t)
		return 0;
	Warp &w = g_warps[t->warp];
	return w.all & ~w.exited;
}

extern "C" unsigned cx_lanemask_lt(void)
{
	return g_cur ? lane_bit(g_cur) - 1 : 0;
}

extern "C" void cx_fence(void) {}

extern "C" void cx_nanosleep(unsigned ns, const char *file, int line)
{
	(void)ns;
	Thr *t = g_cur;
	if (!t)
		return;
	g_spun = 1;
	g_spin_file = file;
	g_spin_line = line;
	g_runq.push_back(t->lin); /* runnable again, after the others */
	to_sched(t);
}

void volatile_poll(const void *p)
{
	Thr *t = g_cur;
	if (!g_running || !t)
		return;
	uintptr_t fa = (uintptr_t)__builtin_frame_address(0);
	if (fa - (uintptr_t)t->stk_lo >= (uintptr_t)(t->stk_hi - t->stk_lo))
		return; /* another host thread */
	if (p != t->vaddr || g_progress != t->vprog) {
		t->vaddr = p;
		t->vprog = g_progress;
		t->vcount = 0;
		return;
	}
	if (++t->vcount < 64)
		return;
	t->vcount = 0;
	cx_nanosleep(0, "a volatile load polled with no __nanosleep()", 0);
}

extern "C" long long cx_clock(void)
{
	static long long c;
	return c += 1000;
}

extern "C" void cx_trap(const char *file, int line)
{
	kfail(cudaErrorLaunchFailure, g_cur, "__trap() at %s:%d", file, line);
	abort();
}

/* ---------------------------------------------------------------------------------------------
 * running a kernel */

extern "C" void cx_fiber_main(Thr *t)
{
	g_launch->invoke(g_launch->kernel, g_launch->args);
	/* the thread exits */
	Warp &w = g_warps[t->warp];
	if (g_bar_count > 0) {
		char b[40];
		thr_str(b, sizeof b, &g_thr[g_bar_first]);
		kfail(cudaErrorLaunchFailure, t, "barrier divergence: exits while thread %s and %d "
		      "others wait at __syncthreads() %s:%d", b, g_bar_count - 1, g_bar_file,
		      g_bar_line);
	}
	check_no_warp_waiter(t, "its end", "exit", 0);
	t->state = T_DONE;
	w.exited |= lane_bit(t);
	g_ndone++;
	to_sched(t);
	__builtin_unreachable();
}

static void start_block(const Launch *L, uint3 b)
{
	int n = (int)(L->block.x * L->block.y * L->block.z);
	stacks_reserve(n);
	g_block = b;
	g_nthr = n;
	g_ndone = 0;
	g_bar_count = 0;
	epoch_advance();
	g_block_epoch = g_epoch;
	int nw = (n + 31) / 32;
	g_warps.resize(nw);
	for (Warp &w : g_warps) {
		w.exited = w.atbar = 0;
		w.ngroups = 0;
		w.log.clear();
	}
	for (int i = 0; i < nw; i++)
		g_warps[i].all = i == nw - 1 && n % 32 ? (1u << (n % 32)) - 1 : 0xffffffffu;
	if (g_thr.size() < (size_t)n)
		g_thr.resize(n);
	for (int i = 0; i < n; i++) {
		Thr &t = g_thr[i];
		t.lin = i;
		t.lane = i & 31;
		t.warp = i >> 5;
		t.tid = uint3{(unsigned)i % L->block.x, (unsigned)i / L->block.x % L->block.y,
			      (unsigned)i / (L->block.x * L->block.y)};
		t.state = T_RUN;
		t.cres = 0;
		t.cpred = 0;
		t.vaddr = NULL;
		t.vcount = 0;
		t.cpa.clear();
		t.cpa_groups = 0;
		fiber_init(&t, g_stacks[i]);
	}
	smem_block_start(L->smem);
	g_runq.clear();
	new_order(n);
	resume_all_in_order();
}

/* Runs the block's threads until they all finish (1) or it is stuck spinning (0): every
 * runnable thread has spun twice with no write in between. */
static int run_threads(void)
{
	uint64_t seen = g_progress;
	size_t idle = 0;
	while (!g_runq.empty() && !g_abort) {
		int i = g_runq.front();
		g_runq.pop_front();
		if (g_thr[i].state != T_RUN)
			continue;
		g_spun = 0;
		to_thread(&g_thr[i]);
		if (g_spun && g_progress == seen) {
			if (++idle > 2 * g_runq.size())
				return 0;
		} else {
			idle = 0;
			seen = g_progress;
		}
	}
	return 1;
}

static void end_block(void)
{
	int n = g_nthr;
	if (!g_abort && g_ndone < n) {
		int shown = 0;
		char list[600] = "";
		for (int i = 0; i < n && shown < 4; i++)
			if (g_thr[i].state != T_DONE) {
				size_t l = strlen(list);
				snprintf(list + l, sizeof list - l, "%s(%u,%u,%u) %s", shown ? ", " : "",
					 g_thr[i].tid.x, g_thr[i].tid.y, g_thr[i].tid.z,
					 g_thr[i].state == T_BAR ? "at __syncthreads()" : "in a warp call");
				shown++;
			}
		kfail(cudaErrorLaunchFailure, NULL, "deadlock: %d of %d threads never finish: %s",
		      n - g_ndone, n, list);
	}
}

/* A block set aside while it waits (see the top): everything run_block's globals hold. */
struct Parked {
	uint3 b;
	std::vector<Thr> thr;
	std::vector<char *> stacks;
	std::vector<Warp> warps;
	std::deque<int> runq;
	std::vector<int> perm;
	int nthr, ndone, bar_count, bar_line, bar_first;
	const char *bar_file;
	uint32_t block_epoch;
	std::vector<char> smem, shadow;
};
static std::vector<std::vector<char *>> g_spare_stacks;

static void park_swap(Parked &p)
{
	std::swap(p.b, g_block);
	std::swap(p.thr, g_thr);
	std::swap(p.stacks, g_stacks);
	std::swap(p.warps, g_warps);
	std::swap(p.runq, g_runq);
	std::swap(p.perm, g_perm);
	std::swap(p.nthr, g_nthr);
	std::swap(p.ndone, g_ndone);
	std::swap(p.bar_count, g_bar_count);
	std::swap(p.bar_line, g_bar_line);
	std::swap(p.bar_first, g_bar_first);
	std::swap(p.bar_file, g_bar_file);
	std::swap(p.block_epoch, g_block_epoch);
}

/* Runs block i (linear index) of the launch to its end; a stuck block waits for the pending
 * blocks of lower index, in the launch's order (see the top). */
static void run_block(const Launch *L, const std::vector<size_t> &order, std::vector<char> &started,
		      size_t i)
{
	started[i] = 1;
	uint3 b = {(unsigned)(i % L->grid.x), (unsigned)(i / L->grid.x % L->grid.y),
		   (unsigned)(i / ((size_t)L->grid.x * L->grid.y))};
	start_block(L, b);
	while (!run_threads()) {
		size_t j = (size_t)-1;
		for (size_t k : order)
			if (cfg.dispatch && k < i && !started[k]) {
				j = k;
				break;
			}
		if (j == (size_t)-1) {
			char at[300];
			if (g_spin_line)
				snprintf(at, sizeof at, "%s:%d (__nanosleep)", g_spin_file, g_spin_line);
			else
				snprintf(at, sizeof at, "%s", g_spin_file);
			if (cfg.dispatch)
				kfail(cudaErrorLaunchFailure, NULL, "deadlock: spins at %s waiting for a "
				      "write that no thread of this block and no block of lower index (all "
				      "done) will make; a block may wait only for blocks that start before "
				      "it", at);
			else
				kfail(cudaErrorLaunchFailure, NULL, "deadlock: spins at %s waiting for a "
				      "write that no thread of this block and no block started before it "
				      "(all done) will make; CUDA starts a grid's blocks in no promised "
				      "order, so a block may wait only for blocks that started before it "
				      "(take tile ids from an atomic counter, not blockIdx; "
				      "LMTK_CUDA_EXEC_DISPATCH=index assumes index order)", at);
			return;
		}
		Parked p = {};
		park_swap(p); /* p holds the block, the globals are empty */
		smem_save(p.smem, p.shadow);
		if (!g_spare_stacks.empty()) {
			g_stacks.swap(g_spare_stacks.back());
			g_spare_stacks.pop_back();
		}
		run_block(L, order, started, j);
		g_spare_stacks.push_back(std::vector<char *>());
		g_spare_stacks.back().swap(g_stacks);
		park_swap(p);
		smem_restore(p.smem, p.shadow);
		epoch_advance(); /* a new interval of this block */
		if (g_abort)
			return;
	}
	end_block();
}

void run_kernel(const Launch *L)
{
	g_launch = L;
	g_abort = 0;
	g_rng = cfg.seed * 0x2545F4914F6CDD1Dull + L->serial;
	smem_kernel_start();
	if (g_epoch > 0xf0000000u) /* numbers for another 2^28 intervals at least */
		shadows_reset();
	g_launch_epoch = g_epoch + 1;
	prof_active();   /* opens the file on the first launch */
	g_prof_rd = g_prof_wr = 0;
	g_prof_tag = (uint32_t)L->serial + 1;
	g_epoch_block.clear();
	if (cfg.trace)
		fprintf(stderr, "cuda-exec: launch #%llu %s<<<(%u,%u,%u), (%u,%u,%u), %zu>>>\n",
			(unsigned long long)L->serial, L->name, L->grid.x, L->grid.y, L->grid.z,
			L->block.x, L->block.y, L->block.z, L->smem);
	size_t nb = (size_t)L->grid.x * L->grid.y * L->grid.z;
	std::vector<size_t> order(nb);
	for (size_t i = 0; i < nb; i++)
		order[i] = cfg.order == 1 ? nb - 1 - i : i;
	if (cfg.order == 2)
		for (size_t i = nb - 1; i > 0 && nb > 1; i--)
			std::swap(order[i], order[rng_next() % (i + 1)]);
	std::vector<char> started(nb, 0);
	/* LMTK_CUDA_EXEC_ABANDON: this launch stops after so many blocks (the first match only) */
	size_t stop = nb;
	if (cfg.abandon[0] && strstr(L->name, cfg.abandon)) {
		stop = (size_t)cfg.abandon_after < nb ? (size_t)cfg.abandon_after : nb;
		cfg.abandon[0] = 0;
		fprintf(stderr, "cuda-exec: LMTK_CUDA_EXEC_ABANDON: launch #%llu %s stops after %zu of "
			"its %zu blocks\n", (unsigned long long)L->serial, L->name, stop, nb);
	}
	g_running = 1;
	for (size_t k = 0, ran = 0; k < nb && ran < stop && !g_abort; k++)
		if (!started[order[k]]) {
			run_block(L, order, started, order[k]);
			ran++;
		}
	g_running = 0;
	g_cur = NULL;
	if (g_prof_on) {
		long long rd = (long long)g_prof_rd, wr = (long long)g_prof_wr;
		prof_line("{\"op\":\"kernel\",\"name\":\"%s\",\"grid\":[%u,%u,%u],"
			  "\"block\":[%u,%u,%u],\"smem\":%zu,\"rd\":%lld,\"wr\":%lld}", L->name,
			  L->grid.x, L->grid.y, L->grid.z, L->block.x, L->block.y, L->block.z, L->smem,
			  rd, wr);
	}
}
