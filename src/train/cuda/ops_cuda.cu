/* ops_cuda - the CUDA backend's entry point: opening the device, memory, and the ops table.
 *
 * train loads train-cuda.so with dlopen only when asked for a GPU and calls its exported symbols:
 * lmtk_ops_cuda(device, prec, err, errlen) (OPS_CUDA_SYMBOL in ops.h), lmtk_cuda_devices() (how
 * many GPUs this process sees, for binding a rank to one) and, with several ranks, lmtk_dist_nccl
 * (dist_nccl.cu).  Everything else in the plugin has hidden visibility.  Opening checks the
 * driver and the device (a missing or too old driver and a machine without GPUs come back as NULL
 * with a sentence in err, never as an exit), then creates the stream, the cuBLAS and cuBLASLt
 * handles and the small pinned buffers that sumsq and all_within return their results through.
 * The backend is process-wide: opening it again for the same device and activation type returns
 * the same table, for another device or type is an error.
 *
 * Numerics, the recipe that kept BLOOM-176B stable: activations and working weights are bf16
 * (act_size 2); master weights, gradients, Adam moments and statistics are fp32; every reduction
 * accumulates in fp32 (sumsq in fp64) and every GEMM in fp32 (CUBLAS_COMPUTE_32F), with weight
 * gradients accumulated straight into fp32 buffers.  Asked for OPS_FP16 (train --fp16), the same
 * kernels run on IEEE fp16 activations and working weights instead - Megatron's fp16 recipe: half
 * storage and tensor-core inputs, fp32 accumulation, statistics, softmax and master weights - and
 * the loss scaler's overflows (beyond 65504) are real ones (common.h).  Every reduction has a
 * fixed shape that depends only on the problem size, never on timing or atomics, so two runs on
 * the same GPU model give the same bits.
 *
 * Memory: alloc is cudaMalloc plus a memset queued on the stream (so the zeroes are ordered
 * before any later op); free synchronises the stream first, so a buffer is never released under a
 * kernel still reading it.  to_device and to_host copy on the stream; to_host returns only when
 * the data has arrived.
 *
 * Threads: the ops are not thread-safe (one stream, one scratch buffer); calls from several
 * threads must be serialised by the caller.  Any thread may call, though: CUDA's current device is
 * per thread, so each entry point binds its thread to the backend's GPU on first use (CU_ENTER). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_profiler_api.h>

#include "train/cuda/common.h"

struct cuda_state cu;
static struct ops cuda_ops;
static char device_desc[320];
static int opened;

/* --- errors --- */

/* one line on stderr after what stdout holds: "train: cuda: " PREFIX MESSAGE */
static void cu_say(const char *prefix, const char *fmt, va_list ap)
{
	fflush(stdout);
	fprintf(stderr, "train: cuda: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void cu_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cu_say("", fmt, ap);
	va_end(ap);
	exit(3); /* EXIT_FAILED: could not do the job */
}

void cu_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cu_say("warning: ", fmt, ap);
	va_end(ap);
}

void cu_check_(cudaError_t e, const char *what, const char *file, int line)
{
	if (e != cudaSuccess)
		cu_die("%s: %s (%s:%d)", what, cudaGetErrorString(e), file, line);
}

void cu_blas_check_(cublasStatus_t s, const char *what, const char *file, int line)
{
	if (s != CUBLAS_STATUS_SUCCESS)
		cu_die("%s: %s (%s:%d)", what, cublasGetStatusString(s), file, line);
}

void cu_launched_(const char *kernel, const char *file, int line)
{
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess && cu.debug_sync && cu.graph_mode == OPS_GRAPH_OFF)
		e = cudaStreamSynchronize(cu.stream);
	if (e != cudaSuccess)
		cu_die("kernel %s: %s (%s:%d)", kernel, cudaGetErrorString(e), file, line);
}

thread_local int cu_thread_bound;

void cu_bind_thread(void)
{
	CU_CHECK(cudaSetDevice(cu.dev));
	cu_thread_bound = 1;
}

void *cu_scratch(size_t bytes)
{
	if (bytes <= cu.scratch_size)
		return cu.scratch;
	size_t size = cu.scratch_size * 2 > bytes ? cu.scratch_size * 2 : bytes;
	size = cu_round256(size);
	CU_CHECK(cudaStreamSynchronize(cu.stream)); /* the old buffer may still be read */
	/* a captured graph keeps the old one: its kernels were given that address */
	if (cu.scratch && !cu.graph_exec[0] && !cu.graph_exec[1])
		CU_CHECK(cudaFree(cu.scratch));
	cu.scratch = NULL;
	cu.scratch_size = 0;
	if (cudaMalloc(&cu.scratch, size) != cudaSuccess) {
		(void)cudaGetLastError();
		if (cudaMalloc(&cu.scratch, bytes) != cudaSuccess)
			cu_die("out of GPU memory for %zu bytes of scratch space; "
			       "try a smaller --micro-batch-size", bytes);
		size = bytes;
	}
	cu.scratch_size = size;
	return cu.scratch;
}

/* --- memory --- */

static void *cuda_alloc(size_t bytes)
{
	CU_ENTER();
	void *p = NULL;
	if (bytes == 0)
		bytes = 256; /* a distinct, valid pointer */
	if (cudaMalloc(&p, bytes) != cudaSuccess) {
		(void)cudaGetLastError(); /* out of memory is the caller's to report */
		return NULL;
	}
	CU_CHECK(cudaMemsetAsync(p, 0, bytes, cu.stream));
	return p;
}

static void cuda_free(void *p)
{
	CU_ENTER();
	if (!p)
		return;
	CU_CHECK(cudaStreamSynchronize(cu.stream));
	CU_CHECK(cudaFree(p));
}

static void cuda_zero(void *p, size_t bytes)
{
	CU_ENTER();
	if (bytes && cu.graph_mode != OPS_GRAPH_FILL)
		CU_CHECK(cudaMemsetAsync(p, 0, bytes, cu.stream));
}

/* --cuda-graph's staging of the step's host inputs (ops.h graph_mode) */
static void stage_copy(void *dst, const void *src, size_t bytes)
{
	if (cu.graph_mode == OPS_GRAPH_SIZE) {
		if (cu.nstage == cu.stage_cap) {
			int cap = cu.stage_cap ? 2 * cu.stage_cap : 16;
			cuda_state::cu_stage *n = (cuda_state::cu_stage *)realloc(cu.stage, cap * sizeof *n);
			if (!n)
				cu_die("out of memory for --cuda-graph's list of staged host inputs: %zu bytes",
				       (size_t)cap * sizeof *n);
			cu.stage = n;
			cu.stage_cap = cap;
		}
		cu.stage[cu.nstage] = {{NULL, NULL}, bytes, cu.stage_total};
		cu.nstage++;
		cu.stage_total += cu_round256(bytes);
		CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu.stream));
		return;
	}
	int k = cu.stage_next++, s = cu.graph_slot;
	if (k < cu.nstage && cu.graph_mode == OPS_GRAPH_CAPTURE)
		cu.stage[k].dst[s] = dst;   /* the graphs differ in the step's struct slot */
	if (k >= cu.nstage || cu.stage[k].dst[s] != dst || cu.stage[k].bytes != bytes)
		cu_die("--cuda-graph: the step's host input %d (%zu bytes) is not the captured "
		       "step's (%d inputs); its shapes are not static", k + 1, bytes, cu.nstage);
	char *st = cu.stage_buf[cu.graph_slot] + cu.stage[k].off;
	memcpy(st, src, bytes);
	if (cu.graph_mode == OPS_GRAPH_CAPTURE)
		CU_CHECK(cudaMemcpyAsync(dst, st, bytes, cudaMemcpyHostToDevice, cu.stream));
}

static void cuda_graph_mode(int mode, int slot)
{
	CU_ENTER();
	if (mode == OPS_GRAPH_SIZE) {
		cu.nstage = 0;
		cu.stage_total = 0;
	} else if (mode == OPS_GRAPH_CAPTURE) {
		if (!cu.stage_buf[slot] && cu.stage_total &&
		    cudaMallocHost(&cu.stage_buf[slot], cu.stage_total) != cudaSuccess)
			cu_die("--cuda-graph: no pinned memory for %zu bytes of the step's inputs",
			       cu.stage_total);
		CU_CHECK(cudaStreamBeginCapture(cu.stream, cudaStreamCaptureModeGlobal));
	} else if (mode == OPS_GRAPH_FILL && !cu.graph_exec[slot]) {
		cu_die("--cuda-graph: graph %d was never captured", slot);
	}
	cu.graph_mode = mode;
	cu.graph_slot = slot;
	cu.stage_next = 0;
}

static void cuda_graph_launch(int slot)
{
	CU_ENTER();
	int mode = cu.graph_mode;
	cu.graph_mode = OPS_GRAPH_OFF;
	if (mode == OPS_GRAPH_CAPTURE) {
		cudaGraph_t g = NULL;
		cudaError_t e = cudaStreamEndCapture(cu.stream, &g);
		if (e != cudaSuccess)
			cu_die("--cuda-graph: the step could not be captured (%s): it makes a call a "
			       "graph cannot hold - a host synchronisation, an allocation or a copy from "
			       "pageable memory", cudaGetErrorString(e));
		if (cu.graph_exec[slot])
			CU_CHECK(cudaGraphExecDestroy(cu.graph_exec[slot]));
		CU_CHECK(cudaGraphInstantiate(&cu.graph_exec[slot], g, 0));
		CU_CHECK(cudaGraphDestroy(g));
	} else if (mode != OPS_GRAPH_FILL) {
		cu_die("--cuda-graph: graph_launch without a capture or a fill");
	}
	if (cu.stage_next != cu.nstage)
		cu_die("--cuda-graph: the step made %d host copies, the captured one %d; its shapes "
		       "are not static", cu.stage_next, cu.nstage);
	CU_CHECK(cudaGraphLaunch(cu.graph_exec[slot], cu.stream));
}

static void cuda_to_device(void *dst, const void *src, size_t bytes)
{
	CU_ENTER();
	if (bytes && cu.graph_mode != OPS_GRAPH_OFF) {
		stage_copy(dst, src, bytes);
		return;
	}
	/* From pageable memory the call returns once src has been staged, so the caller may reuse
	 * it at once; the copy itself is ordered on the stream. */
	if (bytes)
		CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu.stream));
}

static void cuda_copy(void *dst, const void *src, size_t bytes)
{
	CU_ENTER();
	if (bytes && cu.graph_mode != OPS_GRAPH_FILL)
		CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu.stream));
}

static void cuda_to_host(void *dst, const void *src, size_t bytes)
{
	CU_ENTER();
	if (bytes)
		CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu.stream));
	CU_CHECK(cudaStreamSynchronize(cu.stream));
}

/* --profile: the range nsys --capture-range=cudaProfilerApi records (and the executor's
 * LMTK_CUDA_EXEC_PROFILE) */
static void cuda_profiler(int on)
{
	CU_ENTER();
	CU_CHECK(on ? cudaProfilerStart() : cudaProfilerStop());
}

/* step scalars (ops.h step_fetch / step_wait): a copy into a pinned slot and an event after it,
 * so the host waits for that copy and not for the work queued behind it */
static void cuda_step_fetch(const struct ops_step *s, int slot)
{
	CU_ENTER();
	CU_CHECK(cudaMemcpyAsync(&cu.hstep[slot], s, sizeof *s, cudaMemcpyDeviceToHost, cu.stream));
	CU_CHECK(cudaEventRecord(cu.step_ev[slot], cu.stream));
}

static const struct ops_step *cuda_step_wait(int slot)
{
	CU_ENTER();
	CU_CHECK(cudaEventSynchronize(cu.step_ev[slot]));
	return &cu.hstep[slot];
}

static void cuda_sync(void)
{
	CU_ENTER();
	CU_CHECK(cudaStreamSynchronize(cu.stream));
}

/* --- opening --- */

/* Dense bf16 tensor-core peak by product name (NVIDIA data sheets, without sparsity); dense fp16
 * is the same on these parts. */
static double peak_bf16(const char *name)
{
	if (strstr(name, "H100") || strstr(name, "H200") || strstr(name, "GH200")) {
		if (strstr(name, "PCIe"))
			return 756e12;
		if (strstr(name, "NVL"))
			return 835e12;
		return 989e12; /* SXM5 / HBM3 / HBM3e boards */
	}
	if (strstr(name, "A100"))
		return 312e12;
	return 0;
}

static void close_partial(void)
{
	if (cu.lt_ws)
		cudaFree(cu.lt_ws);
	if (cu.dsmall)
		cudaFree(cu.dsmall);
	if (cu.hsmall)
		cudaFreeHost(cu.hsmall);
	if (cu.hstep)
		cudaFreeHost(cu.hstep);
	for (int i = 0; i < 2; i++)
		if (cu.step_ev[i])
			cudaEventDestroy(cu.step_ev[i]);
	if (cu.lt)
		cublasLtDestroy(cu.lt);
	if (cu.blas)
		cublasDestroy(cu.blas);
	if (cu.stream)
		cudaStreamDestroy(cu.stream);
	memset(&cu, 0, sizeof cu);
	cu_thread_bound = 0;
}

static void fill_table(void)
{
	struct ops *o = &cuda_ops;
	o->name = "cuda";
	o->device = device_desc;
	o->act_size = sizeof(bf16);   /* = sizeof(f16) */
	o->act_type = cu.act == CU_F16 ? "fp16" : "bf16";
	o->alloc = cuda_alloc;
	o->free = cuda_free;
	o->zero = cuda_zero;
	o->to_device = cuda_to_device;
	o->to_host = cuda_to_host;
	o->copy = cuda_copy;
	o->sync = cuda_sync;
	o->f32_to_act = cu_f32_to_act;
	o->act_to_f32 = cu_act_to_f32;
	o->embed_fwd = cu_embed_fwd;
	o->embed_bwd = cu_embed_bwd;
	o->layernorm_fwd = cu_layernorm_fwd;
	o->layernorm_bwd = cu_layernorm_bwd;
	o->residual_layernorm_fwd = cu_residual_layernorm_fwd;
	o->layernorm_bwd_dropout = cu_layernorm_bwd_dropout;
	o->matmul_fwd = cu_matmul_fwd;
	o->matmul_bwd = cu_matmul_bwd;
	o->matmul_gelu_fwd = cu_matmul_gelu_fwd;
	o->matmul_dgelu_bwd = cu_matmul_dgelu_bwd;
	o->attention_fwd = cu_attention_fwd;
	o->attention_bwd = cu_attention_bwd;
	o->xattn_fwd = cu_xattn_fwd;
	o->xattn_bwd = cu_xattn_bwd;
	o->gelu_fwd = cu_gelu_fwd;
	o->gelu_bwd = cu_gelu_bwd;
	o->residual_fwd = cu_residual_fwd;
	o->dropout_bwd = cu_dropout_bwd;
	o->dropout_fwd = cu_dropout_fwd;
	o->add = cu_add;
	o->gelu_erf_fwd = cu_gelu_erf_fwd;
	o->gelu_erf_bwd = cu_gelu_erf_bwd;
	o->tanh_fwd = cu_tanh_fwd;
	o->tanh_bwd = cu_tanh_bwd;
	o->gather_rows = cu_gather_rows;
	o->scatter_add_rows = cu_scatter_add_rows;
	o->xent_fwd_bwd = cu_xent_fwd_bwd;
	o->xent_stats = cu_xent_stats;
	o->xent_grad = cu_xent_grad;
	o->xent_rescale = cu_xent_rescale;
	o->xent_finish = cu_xent_finish;
	o->sumsq = cu_sumsq;
	o->all_within = cu_all_within;
	o->scale = cu_scale;
	o->adamw = cu_adamw;
	o->adamw_multi = cu_adamw_multi;
	o->lamb_update = cu_lamb_update;
	o->lamb_apply = cu_lamb_apply;
	o->sgd = cu_sgd;
	o->profiler = cuda_profiler;
	o->adam8bit = cu_adam8bit;
	o->adam32 = cu_adam32;
	o->loss_acc = cu_loss_acc;
	o->sumsq_acc = cu_sumsq_acc;
	o->within_acc = cu_within_acc;
	o->step_decide = cu_step_decide;
	o->adamw_multi_step = cu_adamw_multi_step;
	o->step_fetch = cuda_step_fetch;
	o->step_wait = cuda_step_wait;
	o->graph_mode = cuda_graph_mode;
	o->graph_launch = cuda_graph_launch;
}

#define OPEN_FAIL(...)                                                                             \
	do {                                                                                       \
		if (err && errlen)                                                                 \
			snprintf(err, errlen, __VA_ARGS__);                                        \
		close_partial();                                                                   \
		return NULL;                                                                       \
	} while (0)

/* The GPUs this process may use (CUDA_VISIBLE_DEVICES applied): what a rank's local index is
 * taken modulo.  0 without a driver or a GPU; lmtk_ops_cuda says which. */
/* One hardware queue for all of the process's streams, so the device starts kernels and NCCL
 * collectives in the order the host queued them, across the compute and the DP buckets'
 * streams (dist_nccl.cu's header: why that order is the same on every rank).  Read when the
 * context is made, so set before the first call that makes it; a value the user set wins. */
static void one_connection(void)
{
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 0);
}

extern "C" __attribute__((visibility("default"))) int lmtk_cuda_devices(void)
{
	int n = 0;
	one_connection();
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return n;
}

extern "C" __attribute__((visibility("default"))) const struct ops *
lmtk_ops_cuda(int device, int prec, char *err, size_t errlen)
{
	enum cu_act act = prec == OPS_FP16 ? CU_F16 : CU_BF16;
	if (opened) {
		if (device == cu.dev && act == cu.act)
			return &cuda_ops;
		if (err && errlen && device != cu.dev)
			snprintf(err, errlen, "cuda: backend already open on GPU %d, cannot also "
				 "open GPU %d in one process", cu.dev, device);
		else if (err && errlen)
			snprintf(err, errlen, "cuda: backend already open with %s activations, "
				 "cannot also compute in %s in one process", cuda_ops.act_type,
				 act == CU_F16 ? "fp16" : "bf16");
		return NULL;
	}

	int count = 0, rt = 0, drv = 0;
	one_connection();
	cudaError_t e = cudaGetDeviceCount(&count);
	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv);
	if (e == cudaErrorInsufficientDriver && drv == 0)
		OPEN_FAIL("cuda: no NVIDIA driver found (libcuda.so is missing); use --device cpu");
	if (e == cudaErrorInsufficientDriver)
		OPEN_FAIL("cuda: the NVIDIA driver (CUDA %d.%d) is older than this build's runtime "
			  "(CUDA %d.%d); update the driver or rebuild train-cuda.so with a "
			  "matching toolkit",
			  drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
	if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0))
		OPEN_FAIL("cuda: no CUDA GPU found (use --device cpu)");
	if (e != cudaSuccess)
		OPEN_FAIL("cuda: cannot use the CUDA driver: %s (%s); use --device cpu",
			  cudaGetErrorString(e), cudaGetErrorName(e));
	if (device < 0 || device >= count)
		OPEN_FAIL("cuda: GPU %d does not exist: this machine has %d (0..%d)", device, count,
			  count - 1);

	struct cudaDeviceProp prop;
	if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
		OPEN_FAIL("cuda: GPU %d: %s", device, cudaGetErrorString(e));
	if (prop.major < 8)
		OPEN_FAIL("cuda: GPU %d (%s) has compute capability %d.%d; the CUDA backend needs "
			  "8.0 or newer (bf16)", device, prop.name, prop.major, prop.minor);
	if ((e = cudaSetDevice(device)) != cudaSuccess)
		OPEN_FAIL("cuda: cannot select GPU %d: %s", device, cudaGetErrorString(e));

	memset(&cu, 0, sizeof cu);
	cu.dev = device;
	cu.act = act;
	cu_thread_bound = 1;
	cu.nsm = prop.multiProcessorCount;
	const char *dbg = getenv("LMTK_CUDA_SYNC");
	cu.debug_sync = dbg && *dbg && strcmp(dbg, "0") != 0;
	if ((e = cudaStreamCreateWithFlags(&cu.stream, cudaStreamNonBlocking)) != cudaSuccess)
		OPEN_FAIL("cuda: cannot create a stream: %s", cudaGetErrorString(e));
	cublasStatus_t s;
	if ((s = cublasCreate(&cu.blas)) != CUBLAS_STATUS_SUCCESS)
		OPEN_FAIL("cuda: cuBLAS: %s", cublasGetStatusString(s));
	if ((s = cublasSetStream(cu.blas, cu.stream)) != CUBLAS_STATUS_SUCCESS)
		OPEN_FAIL("cuda: cuBLAS: %s", cublasGetStatusString(s));
	if ((s = cublasLtCreate(&cu.lt)) != CUBLAS_STATUS_SUCCESS)
		OPEN_FAIL("cuda: cuBLASLt: %s", cublasLtGetStatusString(s));
	cu.lt_ws_size = (size_t)32 << 20; /* what cuBLAS itself reserves on Hopper */
	if ((e = cudaMalloc(&cu.lt_ws, cu.lt_ws_size)) != cudaSuccess ||
	    (e = cudaMalloc(&cu.dsmall, 256)) != cudaSuccess ||
	    (e = cudaMallocHost(&cu.hsmall, 256)) != cudaSuccess ||
	    (e = cudaMallocHost(&cu.hstep, 2 * sizeof *cu.hstep)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&cu.step_ev[0], cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&cu.step_ev[1], cudaEventDisableTiming)) != cudaSuccess)
		OPEN_FAIL("cuda: GPU %d: %s", device, cudaGetErrorString(e));

	snprintf(device_desc, sizeof device_desc, "%.200s, %.1f GiB, sm_%d%d, %d SMs, driver %d.%d",
		 prop.name, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), prop.major,
		 prop.minor, prop.multiProcessorCount, drv / 1000, drv % 1000 / 10);
	fill_table();
	cuda_ops.peak_flops = peak_bf16(prop.name);
	opened = 1;

	return &cuda_ops;
}
