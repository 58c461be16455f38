/* check - what the CPU executor checks on every memory access of a kernel (tests/cuda-exec).
 *
 * The .cu files are compiled with GCC's -fsanitize=thread, which calls __tsan_readN /
 * __tsan_writeN before every load and store; this file implements those hooks instead of
 * ThreadSanitizer.  Outside a kernel a hook returns at once.  Inside, the address must be the
 * thread's own stack (its locals), the block's shared memory - within the launch's size for
 * `extern __shared__` arrays -, a live device allocation or pinned host memory, and an access
 * the compiler knows to be naturally aligned must be so on the device too.  Anything else fails
 * the kernel with the address and the allocation it missed.
 *
 * Shared memory is this module's thread-local storage: __shared__ is thread_local, and blocks run
 * one at a time on a host thread, so the thread's instance is the running block's memory.  A
 * shadow of it records, per byte, the last writer and the readers of the current barrier
 * interval: a byte written by one thread and read or written by another with no barrier between
 * them (a __syncwarp() over both lanes counts, within a warp) is a race; a byte read before any
 * thread of the block wrote it is uninitialised shared memory.  Both name the variable (from the
 * module's symbol table) and the element.  A shadow of each device allocation does the same for
 * global memory within a launch: blocks of a grid are not ordered at all, so a byte written by a
 * thread of one block and read or written by any thread of another is a race too.  Atomics are
 * exempt. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exec.h"

/* ---------------------------------------------------------------------------------------------
 * shared memory: the module's thread-local storage, the dynamic arrays, the shadow */

struct DynSmem {
	const char *name;
	unsigned char *(*addr)(void);
	uintptr_t lo; /* in the current host thread */
};
/* filled by the generated registrations, possibly before this file's constructors run: a
 * plain array, which needs none */
#define DYN_NAMES 16
static struct {
	DynSmem v[DYN_NAMES];
	int n;
	DynSmem *begin() { return v; }
	DynSmem *end() { return v + n; }
} g_dyn;
static uintptr_t g_tls_lo;
static size_t g_tls_size;

/* per byte of shared memory: the last write and the reads of the current interval */
struct Shadow {
	uint32_t we, re; /* epochs of the last write and of the last reads */
	uint16_t wt, rt; /* writer, reader (RT_MANY: several) */
	uint16_t wg, rg; /* the warp's __syncwarp count then */
};
#define RT_MANY 0xffff
static std::vector<Shadow> g_shadow;


extern "C" int cx_register_dynsmem(const char *name, unsigned char *(*addr)(void))
{
	if (g_dyn.n == DYN_NAMES) {
		fprintf(stderr, "cuda-exec: more than %d extern __shared__ names\n", DYN_NAMES);
		abort();
	}
	g_dyn.v[g_dyn.n++] = DynSmem{name, addr, 0};
	return 0;
}

struct TlsFind {
	uintptr_t fn;
	uintptr_t lo;
	size_t size;
};

static int tls_cb(struct dl_phdr_info *info, size_t, void *data)
{
	TlsFind *f = (TlsFind *)data;
	int mine = 0;
	size_t tls = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && f->fn - (info->dlpi_addr + ph->p_vaddr) < ph->p_memsz)
			mine = 1;
		if (ph->p_type == PT_TLS)
			tls = ph->p_memsz;
	}
	if (!mine)
		return 0;
	f->lo = (uintptr_t)info->dlpi_tls_data;
	f->size = tls;
	return 1;
}

/* Where this host thread's instance of the module's TLS (the shared memory) is. */
void smem_kernel_start(void)
{
	for (DynSmem &d : g_dyn)
		d.lo = (uintptr_t)d.addr(); /* also makes the block exist in this thread */
	TlsFind f = {(uintptr_t)&smem_kernel_start, 0, 0};
	dl_iterate_phdr(tls_cb, &f);
	g_tls_lo = f.lo;
	g_tls_size = f.lo ? f.size : 0;
	if (cfg.shadow && g_shadow.size() < g_tls_size)
		g_shadow.resize(g_tls_size);
}

void smem_save(std::vector<char> &bytes, std::vector<char> &shadow)
{
	bytes.assign((const char *)g_tls_lo, (const char *)g_tls_lo + g_tls_size);
	shadow.clear();
	if (cfg.shadow && g_tls_size)
		shadow.assign((const char *)g_shadow.data(),
			      (const char *)(g_shadow.data() + g_tls_size));
}

void smem_restore(const std::vector<char> &bytes, const std::vector<char> &shadow)
{
	if (!bytes.empty())
		memcpy((void *)g_tls_lo, bytes.data(), bytes.size());
	if (!shadow.empty())
		memcpy((void *)g_shadow.data(), shadow.data(), shadow.size());
}

/* A block's shared memory starts out as garbage. */
void smem_block_start(size_t dyn_bytes)
{
	for (DynSmem &d : g_dyn)
		memset((void *)d.lo, 0xff, dyn_bytes);
}

struct TlsSym {
	size_t off, size;
	std::string name;
};
static std::vector<TlsSym> g_tls_syms;
static int g_tls_syms_read;

/* The thread-local symbols of this module (from its .symtab), to name shared variables. */
static void tls_syms_read(void)
{
	g_tls_syms_read = 1;
	Dl_info di;
	if (!dladdr((void *)&tls_syms_read, &di))
		di.dli_fname = NULL;
	int fd = di.dli_fname && *di.dli_fname ? open(di.dli_fname, O_RDONLY) : -1;
	if (fd < 0) /* the main program */
		fd = open("/proc/self/exe", O_RDONLY);
	if (fd < 0)
		return;
	struct stat st;
	void *map = fstat(fd, &st) == 0 ? mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
					: MAP_FAILED;
	close(fd);
	if (map == MAP_FAILED)
		return;
	const char *b = (const char *)map;
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)b;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_shoff == 0)
		goto out;
	{
		const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(b + eh->e_shoff);
		for (int i = 0; i < eh->e_shnum; i++) {
			if (sh[i].sh_type != SHT_SYMTAB)
				continue;
			const ElfW(Sym) *sym = (const ElfW(Sym) *)(b + sh[i].sh_offset);
			const char *str = b + sh[sh[i].sh_link].sh_offset;
			size_t n = sh[i].sh_size / sizeof(ElfW(Sym));
			for (size_t k = 0; k < n; k++)
				if (ELF64_ST_TYPE(sym[k].st_info) == STT_TLS && sym[k].st_size)
					g_tls_syms.push_back(TlsSym{sym[k].st_value, sym[k].st_size,
								    demangle(str + sym[k].st_name)});
		}
	}
out:
	munmap(map, st.st_size);
}

/* "red (colsum_part_k<8, true>'s __shared__), element 37 of 4 bytes" */
static void smem_where(char *buf, size_t len, uintptr_t a, size_t n)
{
	for (DynSmem &d : g_dyn)
		if (a - d.lo < CX_DYN_MAX) {
			size_t off = a - d.lo;
			snprintf(buf, len, "byte %zu of the dynamic shared memory (extern __shared__ %s"
				 "[]; %zu bytes in this launch), element %zu counting %zu-byte elements",
				 off, d.name, g_launch->smem, off / n, n);
			return;
		}
	if (!g_tls_syms_read)
		tls_syms_read();
	size_t off = a - g_tls_lo;
	for (const TlsSym &s : g_tls_syms)
		if (off - s.off < s.size) {
			std::string nm = s.name;
			size_t c = nm.rfind("::");
			std::string var = c == std::string::npos ? nm : nm.substr(c + 2);
			std::string fn = c == std::string::npos ? "" : short_name(nm.substr(0, c));
			snprintf(buf, len, "__shared__ %s%s%s, byte %zu of %zu, element %zu counting "
				 "%zu-byte elements", var.c_str(), fn.empty() ? "" : " in ", fn.c_str(),
				 off - s.off, s.size, (off - s.off) / n, n);
			return;
		}
	snprintf(buf, len, "static shared memory, byte %zu", off);
}


/* whether a __syncwarp() over both lanes completed after position gen of the warp's log */
static int warp_synced(int a, int b, unsigned gen)
{
	const Thr &x = g_thr[a], &y = g_thr[b];
	if (x.warp != y.warp)
		return 0;
	const Warp &w = g_warps[x.warp];
	unsigned both = lane_bit(&x) | lane_bit(&y);
	for (size_t i = gen; i < w.log.size(); i++)
		if ((w.log[i] & both) == both)
			return 1;
	return 0;
}

static void race(Thr *t, uintptr_t a, size_t n, int write, const char *kind, int other,
		 int other_wrote)
{
	char where[400], o[60] = "several other threads";
	smem_where(where, sizeof where, a, n);
	if (other != RT_MANY) {
		strcpy(o, "thread ");
		thr_str(o + 7, sizeof o - 7, &g_thr[other]);
	}
	kfail(cudaErrorLaunchFailure, t, "%s race on shared memory: %s %zu bytes at %s, which %s "
	      "%s since the last __syncthreads() (no barrier orders the two)", kind,
	      write ? "writes" : "reads", n, where, o, other_wrote ? "wrote" : "read");
}

static void shadow_access(Thr *t, uintptr_t a, size_t n, int write)
{
	size_t off = a - g_tls_lo;
	uint16_t me = (uint16_t)t->lin;
	uint16_t gen = (uint16_t)g_warps[t->warp].log.size();
	for (size_t i = 0; i < n; i++) {
		Shadow &s = g_shadow[off + i];
		if (!write && s.we < g_block_epoch) {
			char where[400];
			smem_where(where, sizeof where, a, n);
			kfail(cudaErrorLaunchFailure, t, "reads %zu bytes of shared memory that no "
			      "thread of this block has written: %s", n, where);
		}
		if (s.we == g_epoch && s.wt != me && !warp_synced(s.wt, me, s.wg))
			race(t, a, n, write, write ? "write-after-write" : "read-after-write", s.wt, 1);
		if (write && s.re == g_epoch && s.rt != me &&
		    (s.rt == RT_MANY || !warp_synced(s.rt, me, s.rg)))
			race(t, a, n, write, "write-after-read", s.rt, 0);
		if (write) {
			s.we = g_epoch;
			s.wt = me;
			s.wg = gen;
		} else if (s.re == g_epoch) {
			if (s.rt != me)
				s.rt = RT_MANY;
		} else {
			s.re = g_epoch;
			s.rt = me;
			s.rg = gen;
		}
	}
}

/* Global memory: per byte of an allocation the last write, the last read and the first read of
 * the launch.  Blocks of a grid are not ordered, nor are the threads of a block between two
 * barriers: a byte written in this launch by one of them and read or written by another is a
 * race (as in shared memory); atomics are exempt. */
struct GShadow {
	uint32_t we, re, rfirst; /* epochs: last write, last read, first read in this launch */
	uint16_t wt, rt;         /* the thread of the last write, of the last read (RT_MANY) */
};

void gshadow_free(Alloc *a)
{
	if (a->sh)
		munmap(a->sh, a->size * sizeof(GShadow));
	a->sh = NULL;
	prof_free(a);
}

void shadows_reset(void)
{
	std::fill(g_shadow.begin(), g_shadow.end(), Shadow{});
	for (const Alloc &a : g_dev_list())
		gshadow_free(const_cast<Alloc *>(&a));
	g_epoch = 0;
}

static void gthread_str(char *b, size_t n, uint32_t epoch, int thr)
{
	uint32_t blk = epoch - g_launch_epoch < g_epoch_block.size()
			       ? g_epoch_block[epoch - g_launch_epoch] : 0;
	const dim3 &g = g_launch->grid, &bd = g_launch->block;
	snprintf(b, n, "thread (%u,%u,%u) of block (%u,%u,%u)", thr % bd.x, thr / bd.x % bd.y,
		 thr / (bd.x * bd.y), blk % g.x, blk / g.x % g.y, blk / (g.x * g.y));
}

/* Whether interval ep of this launch (>= g_launch_epoch) was another block's than the current
 * one: by block, not by interval number, since a parked block's intervals (sched.cpp) have
 * other blocks' between them. */
static inline int other_block(uint32_t ep)
{
	return g_epoch_block[ep - g_launch_epoch] != g_epoch_block[g_epoch - g_launch_epoch];
}

static void grace(Thr *t, const Alloc *al, uintptr_t a, size_t n, int write, const char *kind,
		  uint32_t epoch, int other, int other_wrote)
{
	char o[120] = "several threads of this block";
	if (other != RT_MANY)
		gthread_str(o, sizeof o, epoch, other);
	kfail(cudaErrorLaunchFailure, t, "%s race on global memory: %s %zu bytes at byte %zu of "
	      "device allocation #%llu (%zu bytes), which %s %s in this launch with nothing ordering "
	      "the two (%s)", kind, write ? "writes" : "reads", n, (size_t)(a - al->base),
	      (unsigned long long)al->serial, al->size, o, other_wrote ? "wrote" : "read",
	      other_block(epoch) ? "blocks of a grid are not ordered"
				    : "no __syncthreads() between them");
}

static void gshadow_access(Thr *t, Alloc *al, uintptr_t a, size_t n, int write)
{
	if (!al->sh) {
		void *p = mmap(NULL, al->size * sizeof(GShadow), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return; /* no shadow, no check */
		al->sh = (GShadow *)p;
	}
	GShadow *sh = al->sh + (a - al->base);
	uint16_t me = (uint16_t)t->lin;
	uint32_t L0 = g_launch_epoch, e = g_epoch;
	for (size_t i = 0; i < n; i++) {
		GShadow &s = sh[i];
		if (s.we >= L0 && (other_block(s.we) || (s.we == e && s.wt != me)))
			grace(t, al, a, n, write, write ? "write-after-write" : "read-after-write", s.we,
			      s.wt, 1);
		if (write && s.re >= L0) {
			if (s.rfirst >= L0 && other_block(s.rfirst))
				grace(t, al, a, n, write, "write-after-read", s.rfirst, RT_MANY, 0);
			if (s.re == e && s.rt != me)
				grace(t, al, a, n, write, "write-after-read", s.re, s.rt, 0);
		}
		if (write) {
			s.we = e;
			s.wt = me;
		} else {
			if (s.re < L0)
				s.rfirst = e;
			if (s.re == e && s.rt != me)
				s.rt = RT_MANY;
			else if (s.re != e)
				s.rt = me;
			s.re = e;
		}
	}
}

/* ---------------------------------------------------------------------------------------------
 * the access hooks (GCC -fsanitize=thread calls them before every load and store) */

static void access_slow(uintptr_t a, size_t n, int write, int aligned)
{
	Thr *t = g_cur;
	g_progress += (uint64_t)write;
	const char *rw = write ? "writes" : "reads";
	if (aligned && n > 1 && (a & (n - 1)))
		kfail(cudaErrorMisalignedAddress, t, "%s %zu bytes at %p: misaligned (a %zu-byte "
		      "access must be %zu-byte aligned)", rw, n, (void *)a, n, n);
	if (a - g_tls_lo < g_tls_size) {
		if (n > g_tls_lo + g_tls_size - a)
			kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at %p: past the end of shared "
			      "memory", rw, n, (void *)a);
		for (DynSmem &d : g_dyn)
			if (a - d.lo < CX_DYN_MAX && a - d.lo + n > g_launch->smem)
				kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at byte %zu of the "
				      "dynamic shared memory (extern __shared__ %s[]), but the launch "
				      "gave it %zu bytes", rw, n, (size_t)(a - d.lo), d.name,
				      g_launch->smem);
		if (cfg.shadow && !g_in_atomic)
			shadow_access(t, a, n, write);
		return;
	}
	if (a - (uintptr_t)g_arena < ARENA_BYTES) {
		const Alloc *al = dev_range(a, n);
		if (al) {
			if (g_prof_on && !g_in_atomic)
				prof_touch(const_cast<Alloc *>(al), a, n, write);
			if (cfg.shadow && !g_in_atomic)
				gshadow_access(t, const_cast<Alloc *>(al), a, n, write);
			return;
		}
	} else {
		const Alloc *p = find_pinned(a);
		if (p && n <= p->size - (a - p->base))
			return;
	}
	for (int i = 0; i < g_nthr; i++) {
		Thr &o = g_thr[i];
		if (a - (uintptr_t)(o.stk_lo - g_page) < g_stack_bytes && &o != t)
			kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at %p: the local memory of "
			      "thread (%u,%u,%u)", rw, n, (void *)a, o.tid.x, o.tid.y, o.tid.z);
		if (a - (uintptr_t)(o.stk_lo - g_page) < g_page)
			kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at %p: stack overflow (set "
			      "LMTK_CUDA_EXEC_STACK_KB above %zu)", rw, n, (void *)a, cfg.stack >> 10);
	}
	char d[400];
	describe(d, sizeof d, a, n);
	kfail(cudaErrorIllegalAddress, t, "%s %zu bytes at %p: %s", rw, n, (void *)a, d);
}

static inline void access(const void *p, size_t n, int write, int aligned)
{
	if (__builtin_expect(!g_running, 1))
		return;
	uintptr_t lo = (uintptr_t)g_cur->stk_lo, size = (uintptr_t)(g_cur->stk_hi - g_cur->stk_lo);
	if ((uintptr_t)__builtin_frame_address(0) - lo >= size)
		return; /* not a CUDA thread: another host thread in the plugin's host code */
	uintptr_t a = (uintptr_t)p;
	if (a - lo < size)
		return; /* its own locals */
	access_slow(a, n, write, aligned);
}

int smem_contains(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	return a - g_tls_lo < g_tls_size && n <= g_tls_lo + g_tls_size - a;
}

void thread_access(const void *p, size_t n, int write)
{
	access(p, n, write, 1);
}

extern "C" void cx_atomic_begin(const void *p, int size, const char *file, int line)
{
	if (!g_running)
		return;
	uintptr_t a = (uintptr_t)p;
	if (a & (uintptr_t)(size - 1))
		kfail(cudaErrorMisalignedAddress, g_cur, "atomic on %d bytes at %p (%s:%d): "
		      "misaligned", size, p, file, line);
	g_in_atomic = 1; /* atomics race with nothing: the shadow ignores them */
	g_progress++;
	access(p, (size_t)size, 1, 1);
}

extern "C" void cx_atomic_end(void)
{
	g_in_atomic = 0;
}

#define HOOKS(n)                                                                                   \
	extern "C" void __tsan_read##n(void *p) { access(p, n, 0, 1); }                            \
	extern "C" void __tsan_write##n(void *p) { access(p, n, 1, 1); }                           \
	extern "C" void __tsan_unaligned_read##n(void *p) { access(p, n, 0, 0); }                  \
	extern "C" void __tsan_unaligned_write##n(void *p) { access(p, n, 1, 0); }                 \
	extern "C" void __tsan_volatile_read##n(void *p)                                           \
	{                                                                                          \
		access(p, n, 0, 1);                                                                \
		volatile_poll(p);                                                                  \
	}                                                                                          \
	extern "C" void __tsan_volatile_write##n(void *p) { access(p, n, 1, 1); }
HOOKS(1)
HOOKS(2)
HOOKS(4)
HOOKS(8)
HOOKS(16)
#undef HOOKS
extern "C" void __tsan_read_range(void *p, unsigned long n) { access(p, n, 0, 0); }
extern "C" void __tsan_write_range(void *p, unsigned long n) { access(p, n, 1, 0); }
extern "C" void __tsan_init(void) {}
extern "C" void __tsan_func_entry(void *) {}
extern "C" void __tsan_func_exit(void) {}
extern "C" void *__tsan_memcpy(void *d, const void *s, size_t n)
{
	access(s, n, 0, 0);
	access(d, n, 1, 0);
	return memcpy(d, s, n);
}
extern "C" void *__tsan_memmove(void *d, const void *s, size_t n)
{
	access(s, n, 0, 0);
	access(d, n, 1, 0);
	return memmove(d, s, n);
}
extern "C" void *__tsan_memset(void *d, int c, size_t n)
{
	access(d, n, 1, 0);
	return memset(d, c, n);
}

/* ---------------------------------------------------------------------------------------------
 * cp.async (cx_ptx.h has the contract): the destination is written in the thread's name and
 * poisoned at issue, filled at the wait that completes its group */

extern "C" void cx_cp_async(void *dst, const void *src, int n, const char *file, int line)
{
	Thr *t = g_cur;
	if (!g_running || !t)
		return;
	if (n < 0 || n > 16)
		kfail(cudaErrorLaunchFailure, t, "cp.async (%s:%d): source size %d is not 0..16",
		      file, line, n);
	if (!smem_contains(dst, 16))
		kfail(cudaErrorIllegalAddress, t, "cp.async (%s:%d): destination %p is not 16 bytes "
		      "of shared memory", file, line, dst);
	if ((uintptr_t)dst & 15)
		kfail(cudaErrorMisalignedAddress, t, "cp.async (%s:%d): destination %p is not "
		      "16-byte aligned", file, line, dst);
	if (n > 0 && ((uintptr_t)src & 15))
		kfail(cudaErrorMisalignedAddress, t, "cp.async (%s:%d): source %p is not 16-byte "
		      "aligned", file, line, src);
	if (n > 0)
		thread_access(src, (size_t)n, 0); /* bounds, host pointers, races in global memory */
	thread_access(dst, 16, 1);
	memset(dst, 0xff, 16);
	t->cpa.push_back(CpAsync{dst, src, n, t->cpa_groups});
}

extern "C" void cx_cp_async_commit(void)
{
	if (g_running && g_cur)
		g_cur->cpa_groups++;
}

extern "C" void cx_cp_async_wait(int n)
{
	Thr *t = g_cur;
	if (!g_running || !t)
		return;
	size_t keep = 0;
	for (size_t i = 0; i < t->cpa.size(); i++) {
		CpAsync c = t->cpa[i];
		if (c.group + (unsigned)n >= t->cpa_groups) { /* among the n most recent, or open */
			t->cpa[keep++] = c;
			continue;
		}
		thread_access(c.dst, 16, 1);
		memcpy(c.dst, c.src, (size_t)c.n);
		memset((char *)c.dst + c.n, 0, (size_t)(16 - c.n));
	}
	t->cpa.resize(keep);
}
