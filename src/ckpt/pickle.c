/* pickle - reads the opcodes torch.save writes into plain values, calling nothing.
 *
 * The pickle format is a stack machine (Python's Lib/pickletools.py documents every opcode):
 * opcodes push values, MARK remembers a stack height, TUPLE/APPENDS/SETITEMS take what lies
 * above the mark, BINPUT/BINGET share a value through the memo, GLOBAL names a Python object
 * and REDUCE/NEWOBJ call it with a tuple of arguments, BUILD sets an object's state.  Here a
 * GLOBAL is looked up in globals[] and only becomes a marker; REDUCE, NEWOBJ and BUILD then
 * build the plain value that global stands for (a tensor, a dict, a tuple, bytes ...) from
 * arguments checked for exactly the shape torch.save, numpy and Python write.  Nothing else
 * is accepted: ops[] and globals[] are the whole allowlist, each entry saying who writes it.
 *
 * Values are never freed one by one: the memo shares them, so each is registered in
 * f->vals_ and pt_close() frees them all.  After STOP the tree is walked once: no container
 * may hold itself (the memo can build one; a state dict never is one), nesting stays below
 * PKL_DEPTH, and no parse-time marker (a global, a storage, an unbuilt numpy object) is left
 * in it as a value. */
#include "ckpt/pickle.h"
#include "xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PKL_DEPTH 200

/* ---- the allowlist: opcodes (protocol 2, as torch.save writes it by default) ---- */
static const struct op {
	unsigned char code;
	const char *name;
	const char *who;
} ops[] = {
	{0x80, "PROTO", "every pickle of protocol >= 2 starts with it (torch.save: 2)"},
	{'.', "STOP", "every pickle ends with it"},
	{'(', "MARK", "before the items of a tuple, APPENDS or SETITEMS"},
	{'}', "EMPTY_DICT", "dicts (torch.save's top level, Megatron's state, Namespace state)"},
	{']', "EMPTY_LIST", "lists (param_groups, rng_state, DeepSpeed's flat groups)"},
	{')', "EMPTY_TUPLE", "empty tuples: the arguments of OrderedDict() and Namespace()"},
	{'t', "TUPLE", "tuples of more than three items (persistent ids, numpy state)"},
	{0x85, "TUPLE1", "one-item tuples (shapes, REDUCE arguments)"},
	{0x86, "TUPLE2", "two-item tuples"},
	{0x87, "TUPLE3", "three-item tuples"},
	{'a', "APPEND", "a list of one item"},
	{'e', "APPENDS", "lists, up to 1000 items per opcode"},
	{'s', "SETITEM", "a dict of one item"},
	{'u', "SETITEMS", "dicts, up to 1000 items per opcode"},
	{'q', "BINPUT", "every container and string is memoized (index < 256)"},
	{'r', "LONG_BINPUT", "the same beyond 255 memo entries"},
	{'h', "BINGET", "a value seen before: shared storages, tied weights, repeated globals"},
	{'j', "LONG_BINGET", "the same beyond 255 memo entries"},
	{'K', "BININT1", "ints 0..255"},
	{'M', "BININT2", "ints 256..65535"},
	{'J', "BININT", "other ints within int32"},
	{0x8a, "LONG1", "ints beyond int32 (random.getstate(), counters)"},
	{'G', "BINFLOAT", "floats (learning rates, loss scale, numpy's cached gaussian)"},
	{'X', "BINUNICODE", "strings"},
	{'N', "NONE", "None"},
	{0x88, "NEWTRUE", "True"},
	{0x89, "NEWFALSE", "False"},
	{'c', "GLOBAL", "a name from globals[] below"},
	{'R', "REDUCE", "calls: tensors, OrderedDict, torch.Size, bytes, numpy arrays"},
	{0x81, "NEWOBJ", "argparse.Namespace, dataclasses"},
	{'b', "BUILD", "Namespace attributes, numpy dtype and array state"},
	{'Q', "BINPERSID", "torch.save's storages: ('storage', type, key, location, numel)"},
};

/* every opcode's name, for the message refusing one */
static const char *const opnames[256] = {
	['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP",
	['F'] = "FLOAT", ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG",
	['M'] = "BININT2", ['N'] = "NONE", ['P'] = "PERSID", ['Q'] = "BINPERSID", ['R'] = "REDUCE",
	['S'] = "STRING", ['T'] = "BINSTRING", ['U'] = "SHORT_BINSTRING", ['V'] = "UNICODE",
	['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD", ['c'] = "GLOBAL", ['d'] = "DICT",
	['}'] = "EMPTY_DICT", ['e'] = "APPENDS", ['g'] = "GET", ['h'] = "BINGET", ['i'] = "INST",
	['j'] = "LONG_BINGET", ['l'] = "LIST", [']'] = "EMPTY_LIST", ['o'] = "OBJ", ['p'] = "PUT",
	['q'] = "BINPUT", ['r'] = "LONG_BINPUT", ['s'] = "SETITEM", ['t'] = "TUPLE",
	[')'] = "EMPTY_TUPLE", ['u'] = "SETITEMS", ['G'] = "BINFLOAT", [0x80] = "PROTO",
	[0x81] = "NEWOBJ", [0x82] = "EXT1", [0x83] = "EXT2", [0x84] = "EXT4", [0x85] = "TUPLE1",
	[0x86] = "TUPLE2", [0x87] = "TUPLE3", [0x88] = "NEWTRUE", [0x89] = "NEWFALSE",
	[0x8a] = "LONG1", [0x8b] = "LONG4", ['B'] = "BINBYTES", ['C'] = "SHORT_BINBYTES",
	[0x8c] = "SHORT_BINUNICODE", [0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8",
	[0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS", [0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX",
	[0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE", [0x95] = "FRAME", [0x96] = "BYTEARRAY8",
	[0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};

/* ---- the allowlist: globals ---- */
enum gk {
	G_ODICT, G_TENSOR, G_PARAM, G_STORAGE, G_DTYPE, G_SIZE, G_NAMESPACE, G_DATACLASS,
	G_ENCODE, G_BYTES, G_SET, G_NP_RECONSTRUCT, G_NP_NDARRAY, G_NP_DTYPE, G_NP_SCALAR,
	G_ENUM, G_GETATTR, G_OBJECT,
};
static const struct glob {
	const char *module, *name;
	enum gk k;
	int arg;                 /* G_STORAGE, G_DTYPE: the pt_dtype */
	const char *who;
	const char *cls;         /* G_NAMESPACE, G_DATACLASS, G_OBJECT, G_ENUM: pt_value.cls */
} globals[] = {
	{"collections", "OrderedDict", G_ODICT, 0,
	 "state_dict()s, Megatron's model, DeepSpeed's param_shapes, backward hooks (empty)", NULL},
	{"torch._utils", "_rebuild_tensor_v2", G_TENSOR, 0, "every tensor torch.save writes", NULL},
	{"torch._utils", "_rebuild_parameter", G_PARAM, 0, "nn.Parameter (a module's own tensors)", NULL},
	/* storage types in persistent ids (torch.save, 1.6 ... 2.x) */
	{"torch", "FloatStorage", G_STORAGE, PTD_F32, "fp32 tensors: master weights, Adam moments", NULL},
	{"torch", "DoubleStorage", G_STORAGE, PTD_F64, "fp64 tensors", NULL},
	{"torch", "HalfStorage", G_STORAGE, PTD_F16, "fp16 weights (13B)", NULL},
	{"torch", "BFloat16Storage", G_STORAGE, PTD_BF16, "bf16 weights (176B)", NULL},
	{"torch", "LongStorage", G_STORAGE, PTD_I64, "int64 tensors (step counters, indices)", NULL},
	{"torch", "IntStorage", G_STORAGE, PTD_I32, "int32 tensors", NULL},
	{"torch", "ShortStorage", G_STORAGE, PTD_I16, "int16 tensors", NULL},
	{"torch", "CharStorage", G_STORAGE, PTD_I8, "int8 tensors", NULL},
	{"torch", "ByteStorage", G_STORAGE, PTD_U8, "torch/cuda RNG states (uint8)", NULL},
	{"torch", "BoolStorage", G_STORAGE, PTD_BOOL, "bool tensors (masks)", NULL},
	/* torch dtypes as values: Megatron's args.params_dtype; pickled by canonical name */
	{"torch", "float32", G_DTYPE, PTD_F32, "args.params_dtype", NULL},
	{"torch", "float64", G_DTYPE, PTD_F64, "dtype values", NULL},
	{"torch", "float16", G_DTYPE, PTD_F16, "args.params_dtype (fp16 runs)", NULL},
	{"torch", "bfloat16", G_DTYPE, PTD_BF16, "args.params_dtype (bf16 runs)", NULL},
	{"torch", "int64", G_DTYPE, PTD_I64, "dtype values", NULL},
	{"torch", "int32", G_DTYPE, PTD_I32, "dtype values", NULL},
	{"torch", "int16", G_DTYPE, PTD_I16, "dtype values", NULL},
	{"torch", "int8", G_DTYPE, PTD_I8, "dtype values", NULL},
	{"torch", "uint8", G_DTYPE, PTD_U8, "dtype values", NULL},
	{"torch", "bool", G_DTYPE, PTD_BOOL, "dtype values", NULL},
	{"torch", "Size", G_SIZE, 0, "DeepSpeed's param_shapes", NULL},
	{"argparse", "Namespace", G_NAMESPACE, 0, "Megatron's checkpoint['args']",
	 "argparse.Namespace"},
	{"deepspeed.utils.tensor_fragment", "fragment_address", G_DATACLASS, 0,
	 "DeepSpeed bf16 optimizer's param_slice_mappings (a dataclass: numel, start)",
	 "deepspeed.utils.tensor_fragment.fragment_address"},
	{"deepspeed.runtime.bf16_optimizer", "fragment_address", G_DATACLASS, 0,
	 "the same dataclass where DeepSpeed 0.7.0 defines it",
	 "deepspeed.runtime.bf16_optimizer.fragment_address"},
	/* DeepSpeed's fp16 ZeRO optimizer pickles its loss scaler object itself (stage_1_and_2.py
	 * state_dict: 'loss_scaler'); plain classes of numbers, read as dicts of attributes */
	{"deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler", G_OBJECT, 0,
	 "fp16 ZeRO optimizer's loss_scaler (cur_scale, cur_iter, last_overflow_iter, ...)",
	 "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler"},
	{"deepspeed.runtime.fp16.loss_scaler", "LossScaler", G_OBJECT, 0,
	 "fp16 ZeRO optimizer's static loss_scaler (cur_scale)",
	 "deepspeed.runtime.fp16.loss_scaler.LossScaler"},
	/* Megatron-DeepSpeed's args.position_embedding_type: an enum member, pickled as
	 * (VALUE,) REDUCE up to Python 3.10 and as getattr(CLASS, 'NAME') from 3.11 */
	{"megatron.enums", "PositionEmbeddingType", G_ENUM, 0,
	 "args.position_embedding_type (1 rotary, 2 absolute, 3 alibi)",
	 "megatron.enums.PositionEmbeddingType"},
	{"deepspeed.runtime.zero.config", "ZeroStageEnum", G_ENUM, 0,
	 "fp16 ZeRO optimizer's zero_stage (DeepSpeed >= 0.7.0; 1 optimizer states, 2 gradients)",
	 "deepspeed.runtime.zero.config.ZeroStageEnum"},
	{"__builtin__", "getattr", G_GETATTR, 0,
	 "an enum member by name (Python >= 3.11); only getattr(enum class, str) is read", NULL},
	{"_codecs", "encode", G_ENCODE, 0, "bytes under protocol 2 (numpy arrays' raw data)", NULL},
	{"__builtin__", "bytes", G_BYTES, 0, "empty bytes under protocol 2", NULL},
	{"__builtin__", "set", G_SET, 0, "sets (DeepSpeed's sparse_tensor_module_names)", NULL},
	{"numpy.core.multiarray", "_reconstruct", G_NP_RECONSTRUCT, 0,
	 "numpy arrays: np.random.get_state() in Megatron's rng_state", NULL},
	{"numpy._core.multiarray", "_reconstruct", G_NP_RECONSTRUCT, 0, "the same from numpy 2", NULL},
	{"numpy", "ndarray", G_NP_NDARRAY, 0, "numpy arrays (_reconstruct's first argument)", NULL},
	{"numpy", "dtype", G_NP_DTYPE, 0, "numpy arrays' and scalars' dtypes", NULL},
	{"numpy.core.multiarray", "scalar", G_NP_SCALAR, 0, "numpy scalars (np.float32(x))", NULL},
	{"numpy._core.multiarray", "scalar", G_NP_SCALAR, 0, "the same from numpy 2", NULL},
};

struct pkl {
	struct pt_file *f;
	const uint8_t *p;
	size_t n, pos, at;       /* at: the current opcode's offset */
	const char *entry;
	unsigned char op;
	struct pt_value **st;
	size_t sp, scap;
	size_t *marks;
	size_t nmarks, mcap;
	struct pt_value **memo;
	size_t nmemo;
};

static int perr(struct pkl *P, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	const char *on = opnames[P->op];
	snprintf(P->f->err, sizeof P->f->err, "%s: %s offset %zu (%s): %s", P->f->path, P->entry,
		 P->at, on ? on : "?", msg);
	return -1;
}

/* out of memory for WHAT (BYTES, 0 unknown), in perr's frame */
static int poom(struct pkl *P, const char *what, size_t bytes)
{
	char msg[200];
	return perr(P, "%s", xalloc_msg(msg, sizeof msg, what, bytes));
}

/* the size of the request grow() failed last, for poom() */
static _Thread_local size_t grow_failed;

static int grow(void *pp, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	while (c < need)
		c *= 2;
	void *q = realloc(*(void **)pp, c * size);
	if (!q) {
		grow_failed = c * size;
		return -1;
	}
	*(void **)pp = q;
	*cap = c;
	return 0;
}

static struct pt_value *nv(struct pkl *P, enum pt_kind k)
{
	struct pt_file *f = P->f;
	if (grow(&f->vals_, &f->capvals_, f->nvals_ + 1, sizeof *f->vals_) != 0)
		return poom(P, "the list of unpickled values", grow_failed), NULL;
	struct pt_value *v = calloc(1, sizeof *v);
	if (!v)
		return poom(P, "an unpickled value", sizeof *v), NULL;
	v->kind = k;
	f->vals_[f->nvals_++] = v;
	return v;
}

static int push(struct pkl *P, struct pt_value *v)
{
	if (!v)
		return -1;
	if (grow(&P->st, &P->scap, P->sp + 1, sizeof *P->st) != 0)
		return poom(P, "the unpickler's stack", grow_failed);
	P->st[P->sp++] = v;
	return 0;
}

static int push_new(struct pkl *P, enum pt_kind k)
{
	return push(P, nv(P, k));
}

/* the stack's floor: values below the innermost mark belong to the enclosing opcodes */
static size_t floor_of(const struct pkl *P)
{
	return P->nmarks ? P->marks[P->nmarks - 1] : 0;
}

static struct pt_value *pop(struct pkl *P)
{
	if (P->sp <= floor_of(P))
		return perr(P, "stack underflow"), NULL;
	return P->st[--P->sp];
}

static struct pt_value *top(struct pkl *P)
{
	if (P->sp <= floor_of(P))
		return perr(P, "stack underflow"), NULL;
	return P->st[P->sp - 1];
}

/* pops back to the innermost mark: the items are P->st[*from .. P->sp) until the next push */
static int pop_mark(struct pkl *P, size_t *from)
{
	if (!P->nmarks)
		return perr(P, "no MARK before it");
	*from = P->marks[--P->nmarks];
	return 0;
}

static int need(struct pkl *P, size_t k)
{
	if (P->n - P->pos < k)
		return perr(P, "data.pkl ends inside the opcode (%zu of %zu argument bytes)",
			    P->n - P->pos, k);
	return 0;
}

static uint64_t le(const uint8_t *p, int k)
{
	uint64_t x = 0;
	for (int i = k - 1; i >= 0; i--)
		x = x << 8 | p[i];
	return x;
}

static const char *kname(const struct pt_value *v)
{
	if (v->kind == PT_GLOBAL_) {
		static __thread char b[160];
		snprintf(b, sizeof b, "%s.%s", globals[v->u.global].module, globals[v->u.global].name);
		return b;
	}
	return pt_kind_name(v->kind);
}

static struct pt_value *seq_of(struct pkl *P, enum pt_kind k, struct pt_value **items, size_t n)
{
	struct pt_value *v = nv(P, k);
	if (!v)
		return NULL;
	if (n) {
		v->u.seq.v = malloc(n * sizeof *items);
		if (!v->u.seq.v)
			return poom(P, "a tuple's or list's items", n * sizeof *items), NULL;
		memcpy(v->u.seq.v, items, n * sizeof *items);
	}
	v->u.seq.n = v->u.seq.cap = n;
	return v;
}

static int seq_add(struct pkl *P, struct pt_value *l, struct pt_value *x)
{
	if (grow(&l->u.seq.v, &l->u.seq.cap, l->u.seq.n + 1, sizeof x) != 0)
		return poom(P, "a list's items", grow_failed);
	l->u.seq.v[l->u.seq.n++] = x;
	return 0;
}

static int key_eq(const struct pt_value *a, const struct pt_value *b)
{
	if (a->kind != b->kind)
		return 0;
	if (a->kind == PT_INT)
		return a->u.i == b->u.i;
	return a->u.str.len == b->u.str.len && !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
}

/* d[k] = v as Python does it: a key already there keeps its place and takes the new value */
static int dict_set(struct pkl *P, struct pt_value *d, struct pt_value *k, struct pt_value *v)
{
	if (k->kind != PT_STR && k->kind != PT_INT)
		return perr(P, "a dict key that is a %s (only str and int keys are read)", kname(k));
	for (size_t i = 0; i < d->u.dict.n; i++)
		if (key_eq(d->u.dict.k[i], k)) {
			d->u.dict.v[i] = v;
			return 0;
		}
	size_t c = d->u.dict.cap;
	if (grow(&d->u.dict.k, &c, d->u.dict.n + 1, sizeof k) != 0 ||
	    grow(&d->u.dict.v, &d->u.dict.cap, d->u.dict.n + 1, sizeof v) != 0)
		return poom(P, "a dict's keys and values", grow_failed);
	d->u.dict.k[d->u.dict.n] = k;
	d->u.dict.v[d->u.dict.n++] = v;
	return 0;
}

static int is_global(const struct pt_value *v, enum gk k)
{
	return v->kind == PT_GLOBAL_ && globals[v->u.global].k == k;
}

/* args must be a tuple of n items (or n..n+extra); message names the callee */
static int want_args(struct pkl *P, const struct pt_value *args, const char *callee, size_t n,
		     size_t extra)
{
	if (args->kind != PT_TUPLE)
		return perr(P, "%s called with a %s, not a tuple of arguments", callee, kname(args));
	if (args->u.seq.n < n || args->u.seq.n > n + extra)
		return perr(P, "%s called with %zu arguments, not %zu", callee, args->u.seq.n, n);
	return 0;
}

static int int_tuple(struct pkl *P, const struct pt_value *t, int64_t *out, int *n,
		     const char *what)
{
	if (t->kind != PT_TUPLE)
		return perr(P, "%s is a %s, not a tuple", what, kname(t));
	if (t->u.seq.n > PT_MAXDIM)
		return perr(P, "%s has %zu dimensions (at most %d are read)", what, t->u.seq.n,
			    PT_MAXDIM);
	for (size_t i = 0; i < t->u.seq.n; i++) {
		if (t->u.seq.v[i]->kind != PT_INT || t->u.seq.v[i]->u.i < 0)
			return perr(P, "%s[%zu] is not an int >= 0", what, i);
		out[i] = t->u.seq.v[i]->u.i;
	}
	*n = (int)t->u.seq.n;
	return 0;
}

static int mul_ok(int64_t a, int64_t b, int64_t *r)
{
	return !__builtin_mul_overflow(a, b, r) && *r <= (INT64_C(1) << 62);
}

/* torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 * backward_hooks[, metadata]) */
static struct pt_value *rebuild_tensor(struct pkl *P, const struct pt_value *a)
{
	const char *fn = "torch._utils._rebuild_tensor_v2";
	if (want_args(P, a, fn, 6, 1) != 0)
		return NULL;
	struct pt_value **x = a->u.seq.v;
	if (x[0]->kind != PT_STORAGE_)
		return perr(P, "%s: the storage is a %s, not a persistent id", fn, kname(x[0])), NULL;
	if (x[1]->kind != PT_INT || x[1]->u.i < 0)
		return perr(P, "%s: the storage offset is not an int >= 0", fn), NULL;
	if (x[4]->kind != PT_BOOL)
		return perr(P, "%s: requires_grad is a %s, not a bool", fn, kname(x[4])), NULL;
	if (x[5]->kind != PT_DICT || x[5]->u.dict.n)
		return perr(P, "%s: backward hooks that are not an empty dict (a hook is code)", fn),
		       NULL;
	if (a->u.seq.n == 7 && x[6]->kind != PT_NONE && x[6]->kind != PT_DICT)
		return perr(P, "%s: metadata is a %s", fn, kname(x[6])), NULL;
	struct pt_value *v = nv(P, PT_TENSOR);
	if (!v)
		return NULL;
	struct pt_tensor *t = &v->u.t;
	int nd2;
	if (int_tuple(P, x[2], t->shape, &t->ndim, "the tensor's size") != 0 ||
	    int_tuple(P, x[3], t->stride, &nd2, "the tensor's stride") != 0)
		return NULL;
	if (nd2 != t->ndim)
		return perr(P, "%s: size has %d dimensions, stride %d", fn, t->ndim, nd2), NULL;
	t->storage = x[0]->u.storage;
	t->dtype = t->storage->dtype;
	t->offset = x[1]->u.i;
	/* the last element's position in the storage must lie inside it */
	int64_t numel = 1, last = t->offset;
	for (int d = 0; d < t->ndim; d++) {
		int64_t span;
		if (!mul_ok(numel, t->shape[d], &numel))
			return perr(P, "%s: %d-dimensional size overflows", fn, t->ndim), NULL;
		if (t->shape[d] && (!mul_ok(t->shape[d] - 1, t->stride[d], &span) ||
				    __builtin_add_overflow(last, span, &last)))
			return perr(P, "%s: strides overflow", fn), NULL;
	}
	t->numel = numel;
	int64_t sn = t->storage->numel;
	if (numel ? last >= sn : t->offset > sn) {
		char shape[200] = "", stride[200] = "";
		for (int d = 0, m = 0, k = 0; d < t->ndim; d++) {
			m += snprintf(shape + m, sizeof shape - m, "%s%lld", d ? ", " : "",
				      (long long)t->shape[d]);
			k += snprintf(stride + k, sizeof stride - k, "%s%lld", d ? ", " : "",
				      (long long)t->stride[d]);
			if (m >= (int)sizeof shape - 24 || k >= (int)sizeof stride - 24)
				break;
		}
		return perr(P, "a tensor of shape (%s), strides (%s) at storage offset %lld reaches "
			    "element %lld of storage '%s', which holds %lld elements",
			    shape, stride, (long long)t->offset, (long long)(numel ? last : t->offset),
			    t->storage->key, (long long)sn), NULL;
	}
	return v;
}

/* BINPERSID's id: ('storage', torch.<T>Storage, key, location, numel) */
static struct pt_value *persid(struct pkl *P, const struct pt_value *id)
{
	if (id->kind != PT_TUPLE || id->u.seq.n != 5)
		return perr(P, "a persistent id that is a %s of %zu items, not torch.save's "
			    "('storage', type, key, location, numel)", kname(id),
			    id->kind == PT_TUPLE ? id->u.seq.n : 0), NULL;
	struct pt_value **x = id->u.seq.v;
	if (x[0]->kind != PT_STR || strcmp(x[0]->u.str.s, "storage") != 0)
		return perr(P, "a persistent id of a kind other than 'storage'"), NULL;
	if (!is_global(x[1], G_STORAGE))
		return perr(P, "a storage whose type is a %s, not one of torch's storage types",
			    kname(x[1])), NULL;
	if (x[2]->kind != PT_STR || x[3]->kind != PT_STR || x[4]->kind != PT_INT || x[4]->u.i < 0)
		return perr(P, "a storage id whose key, location or numel has the wrong type"), NULL;
	if (strchr(x[2]->u.str.s, '/') || !x[2]->u.str.len || strlen(x[2]->u.str.s) != x[2]->u.str.len)
		return perr(P, "a storage key that is no file name"), NULL;
	char msg[300];
	const struct pt_storage *s = pt_storage_add_(P->f, x[2]->u.str.s,
						     (enum pt_dtype)globals[x[1]->u.global].arg,
						     x[4]->u.i, x[3]->u.str.s, msg, sizeof msg);
	if (!s)
		return perr(P, "%s", msg), NULL;
	struct pt_value *v = nv(P, PT_STORAGE_);
	if (v)
		v->u.storage = s;
	return v;
}

/* _codecs.encode(str, 'latin1'): the bytes whose values are the string's code points */
static struct pt_value *latin1(struct pkl *P, const struct pt_value *a)
{
	if (want_args(P, a, "_codecs.encode", 2, 0) != 0)
		return NULL;
	const struct pt_value *s = a->u.seq.v[0], *enc = a->u.seq.v[1];
	if (s->kind != PT_STR || enc->kind != PT_STR ||
	    (strcmp(enc->u.str.s, "latin1") != 0 && strcmp(enc->u.str.s, "latin-1") != 0))
		return perr(P, "_codecs.encode other than (str, 'latin1'), as protocol 2 writes "
			    "bytes"), NULL;
	struct pt_value *v = nv(P, PT_BYTES);
	if (!v || !(v->u.str.s = malloc(s->u.str.len + 1)))
		return v ? poom(P, "a latin1-encoded bytes object", s->u.str.len + 1), NULL : NULL;
	const uint8_t *p = (const uint8_t *)s->u.str.s, *e = p + s->u.str.len;
	size_t n = 0;
	while (p < e) {
		unsigned c = *p++;
		if (c >= 0x80) {
			/* a code point < 256 is 0xC2 or 0xC3 and one continuation byte */
			if ((c != 0xc2 && c != 0xc3) || p == e || (*p & 0xc0) != 0x80)
				return perr(P, "_codecs.encode: a character beyond latin-1 at string "
					    "byte %zu", (size_t)(p - 1 - (const uint8_t *)s->u.str.s)), NULL;
			c = (c & 0x1f) << 6 | (*p++ & 0x3f);
		}
		v->u.str.s[n++] = (char)c;
	}
	v->u.str.s[n] = 0;
	v->u.str.len = n;
	return v;
}

/* numpy.dtype('u4', False, True): the type's name; BUILD adds its byte order */
static struct pt_value *np_dtype(struct pkl *P, const struct pt_value *a)
{
	if (want_args(P, a, "numpy.dtype", 3, 0) != 0)
		return NULL;
	const struct pt_value *s = a->u.seq.v[0];
	if (s->kind != PT_STR)
		return perr(P, "numpy.dtype of a %s", kname(s)), NULL;
	const char *n = s->u.str.s;
	char *end;
	long size = strchr("biuf", n[0]) && n[0] && n[1] >= '1' && n[1] <= '9' ?
		strtol(n + 1, &end, 10) : 0;
	if (!size || *end || !(size == 1 || size == 2 || size == 4 || size == 8) ||
	    (n[0] == 'b' && size != 1))
		return perr(P, "numpy dtype '%.20s' (only bool, int, uint and float arrays are read)",
			    n), NULL;
	struct pt_value *v = nv(P, PT_NPDTYPE_);
	if (v) {
		snprintf(v->u.nd.dtype, sizeof v->u.nd.dtype, "?%s", n);
		v->u.nd.itemsize = (size_t)size;
	}
	return v;
}

static int np_dtype_build(struct pkl *P, struct pt_value *d, const struct pt_value *st)
{
	/* (version 3, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata]) */
	if (d->built_)
		return perr(P, "BUILD on a numpy dtype twice");
	if (st->kind != PT_TUPLE || st->u.seq.n < 8 || st->u.seq.n > 9)
		return perr(P, "a numpy dtype state that is not numpy's 8-tuple");
	struct pt_value **x = st->u.seq.v;
	if (x[0]->kind != PT_INT || (x[0]->u.i != 3 && x[0]->u.i != 4) || x[1]->kind != PT_STR)
		return perr(P, "a numpy dtype state of an unknown version");
	if (x[2]->kind != PT_NONE || x[3]->kind != PT_NONE || x[4]->kind != PT_NONE)
		return perr(P, "a structured or sub-array numpy dtype");
	const char *bo = x[1]->u.str.s;
	if (!strcmp(bo, ">"))
		return perr(P, "a big-endian numpy array (byte order '>'): only little-endian is "
			    "read");
	if (strcmp(bo, "<") != 0 && strcmp(bo, "|") != 0)
		return perr(P, "numpy byte order '%.8s'", bo);
	d->u.nd.dtype[0] = bo[0];
	d->built_ = 1;
	return 0;
}

/* BUILD on the result of _reconstruct: (1, shape, dtype, is_fortran, raw bytes) */
static int np_array_build(struct pkl *P, struct pt_value *v, const struct pt_value *st)
{
	if (v->built_)
		return perr(P, "BUILD on a numpy array twice");
	if (st->kind != PT_TUPLE || st->u.seq.n != 5)
		return perr(P, "a numpy array state that is not numpy's 5-tuple");
	struct pt_value **x = st->u.seq.v;
	if (x[0]->kind != PT_INT || x[0]->u.i != 1)
		return perr(P, "a numpy array state of an unknown version");
	if (x[2]->kind != PT_NPDTYPE_ || !x[2]->built_)
		return perr(P, "a numpy array whose dtype is a %s", kname(x[2]));
	if (x[3]->kind != PT_BOOL)
		return perr(P, "a numpy array whose fortran flag is a %s", kname(x[3]));
	if (x[4]->kind != PT_BYTES)
		return perr(P, "a numpy array whose data is a %s (object arrays are not read)",
			    kname(x[4]));
	struct pt_ndarray *nd = &v->u.nd;
	if (int_tuple(P, x[1], nd->shape, &nd->ndim, "the numpy array's shape") != 0)
		return -1;
	if (x[3]->u.b && nd->ndim > 1)
		return perr(P, "a Fortran-ordered numpy array");
	memcpy(nd->dtype, x[2]->u.nd.dtype, sizeof nd->dtype);
	nd->itemsize = x[2]->u.nd.itemsize;
	int64_t n = (int64_t)nd->itemsize;
	for (int d = 0; d < nd->ndim; d++)
		if (!mul_ok(n, nd->shape[d], &n))
			return perr(P, "a numpy array's size overflows");
	if ((uint64_t)n != x[4]->u.str.len)
		return perr(P, "a numpy array of %lld bytes with %zu bytes of data", (long long)n,
			    x[4]->u.str.len);
	nd->data = (const uint8_t *)x[4]->u.str.s;
	nd->nbytes = x[4]->u.str.len;
	v->built_ = 1;
	return 0;
}

static int op_reduce(struct pkl *P)
{
	struct pt_value *a = pop(P), *fn = a ? pop(P) : NULL, *v = NULL;
	if (!fn)
		return -1;
	if (fn->kind != PT_GLOBAL_)
		return perr(P, "a call of a %s", kname(fn));
	const struct glob *g = &globals[fn->u.global];
	char name[120];
	snprintf(name, sizeof name, "%s.%s", g->module, g->name);
	switch (g->k) {
	case G_ODICT:
		if (want_args(P, a, name, 0, 0) != 0 || !(v = nv(P, PT_DICT)))
			return -1;
		v->cls = "collections.OrderedDict";
		break;
	case G_TENSOR:
		if (!(v = rebuild_tensor(P, a)))
			return -1;
		break;
	case G_PARAM:
		if (want_args(P, a, name, 3, 0) != 0)
			return -1;
		if (a->u.seq.v[0]->kind != PT_TENSOR || a->u.seq.v[1]->kind != PT_BOOL ||
		    a->u.seq.v[2]->kind != PT_DICT || a->u.seq.v[2]->u.dict.n)
			return perr(P, "%s other than (tensor, requires_grad, no hooks)", name);
		if (!(v = nv(P, PT_TENSOR)))
			return -1;
		v->u.t = a->u.seq.v[0]->u.t;
		v->cls = "torch.nn.Parameter";
		break;
	case G_SIZE: {
		int64_t dims[PT_MAXDIM];
		int nd;
		if (want_args(P, a, name, 1, 0) != 0 ||
		    int_tuple(P, a->u.seq.v[0], dims, &nd, "torch.Size's argument") != 0 ||
		    !(v = seq_of(P, PT_TUPLE, a->u.seq.v[0]->u.seq.v, a->u.seq.v[0]->u.seq.n)))
			return -1;
		v->cls = "torch.Size";
		break;
	}
	case G_ENCODE:
		if (!(v = latin1(P, a)))
			return -1;
		break;
	case G_BYTES:
		if (want_args(P, a, name, 0, 0) != 0 || !(v = nv(P, PT_BYTES)) ||
		    !(v->u.str.s = calloc(1, 1)))
			return v ? poom(P, "an empty bytes object", 1) : -1;
		break;
	case G_SET:
		if (want_args(P, a, name, 1, 0) != 0)
			return -1;
		if (a->u.seq.v[0]->kind != PT_LIST)
			return perr(P, "set() of a %s", kname(a->u.seq.v[0]));
		if (!(v = seq_of(P, PT_LIST, a->u.seq.v[0]->u.seq.v, a->u.seq.v[0]->u.seq.n)))
			return -1;
		v->cls = "set";
		break;
	case G_NP_RECONSTRUCT:
		if (want_args(P, a, name, 3, 0) != 0)
			return -1;
		if (!is_global(a->u.seq.v[0], G_NP_NDARRAY))
			return perr(P, "%s of a %s, not numpy.ndarray", name, kname(a->u.seq.v[0]));
		if (!(v = nv(P, PT_NDARRAY)))
			return -1;
		break;
	case G_NP_DTYPE:
		if (!(v = np_dtype(P, a)))
			return -1;
		break;
	case G_NP_SCALAR: {
		if (want_args(P, a, name, 2, 0) != 0)
			return -1;
		const struct pt_value *d = a->u.seq.v[0], *b = a->u.seq.v[1];
		if (d->kind != PT_NPDTYPE_ || !d->built_ || b->kind != PT_BYTES ||
		    b->u.str.len != d->u.nd.itemsize)
			return perr(P, "%s other than (dtype, its bytes)", name);
		if (!(v = nv(P, PT_NDARRAY)))
			return -1;
		memcpy(v->u.nd.dtype, d->u.nd.dtype, sizeof v->u.nd.dtype);
		v->u.nd.itemsize = d->u.nd.itemsize;
		v->u.nd.data = (const uint8_t *)b->u.str.s;
		v->u.nd.nbytes = b->u.str.len;
		v->built_ = 1;
		break;
	}
	case G_ENUM:
		/* Enum(VALUE): the member's value, an int, with the class's name */
		if (want_args(P, a, name, 1, 0) != 0)
			return -1;
		if (a->u.seq.v[0]->kind != PT_INT)
			return perr(P, "%s of a %s, not an int value", name, kname(a->u.seq.v[0]));
		if (!(v = nv(P, PT_INT)))
			return -1;
		v->u.i = a->u.seq.v[0]->u.i;
		v->cls = g->cls;
		break;
	case G_GETATTR:
		/* getattr(EnumClass, 'member'): the member's name, a str, with the class's name */
		if (want_args(P, a, name, 2, 0) != 0)
			return -1;
		if (!is_global(a->u.seq.v[0], G_ENUM) || a->u.seq.v[1]->kind != PT_STR)
			return perr(P, "%s other than (an enum class lmtk knows, a member's name)", name);
		if (!(v = nv(P, PT_STR)) || !(v->u.str.s = strdup(a->u.seq.v[1]->u.str.s)))
			return v ? poom(P, "an enum member's name", a->u.seq.v[1]->u.str.len + 1) : -1;
		v->u.str.len = a->u.seq.v[1]->u.str.len;
		v->cls = globals[a->u.seq.v[0]->u.global].cls;
		break;
	default:
		return perr(P, "%s is not called by REDUCE in what torch.save writes", name);
	}
	return push(P, v);
}

static int op_newobj(struct pkl *P)
{
	struct pt_value *a = pop(P), *cls = a ? pop(P) : NULL, *v;
	if (!cls)
		return -1;
	if (!is_global(cls, G_NAMESPACE) && !is_global(cls, G_DATACLASS) && !is_global(cls, G_OBJECT))
		return perr(P, "NEWOBJ of a %s", kname(cls));
	if (want_args(P, a, kname(cls), 0, 0) != 0 || !(v = nv(P, PT_DICT)))
		return -1;
	v->cls = globals[cls->u.global].cls;
	v->built_ = -1;          /* an object whose attributes BUILD sets; a plain dict refuses it */
	return push(P, v);
}

static int op_build(struct pkl *P)
{
	struct pt_value *st = pop(P), *o = st ? top(P) : NULL;
	if (!o)
		return -1;
	if (o->kind == PT_DICT && o->built_ == -1) {
		/* an object's __dict__ update: attributes in the state's order */
		if (st->kind != PT_DICT)
			return perr(P, "the state of %s is a %s, not a dict of attributes", o->cls,
				    kname(st));
		for (size_t i = 0; i < st->u.dict.n; i++)
			if (st->u.dict.k[i]->kind != PT_STR)
				return perr(P, "an attribute name of %s that is no str", o->cls);
			else if (dict_set(P, o, st->u.dict.k[i], st->u.dict.v[i]) != 0)
				return -1;
		o->built_ = 1;
		return 0;
	}
	if (o->kind == PT_DICT && o->built_ == 0 && o->cls &&
	    strcmp(o->cls, "collections.OrderedDict") == 0) {
		/* nn.Module.state_dict()'s OrderedDict carries its modules' versions as an
		 * attribute, {'_metadata': OrderedDict(...)}: data about the dict, not in it */
		if (st->kind != PT_DICT)
			return perr(P, "the state of an OrderedDict is a %s, not a dict of attributes",
				    kname(st));
		o->built_ = 2;
		return 0;
	}
	if (o->kind == PT_NPDTYPE_)
		return np_dtype_build(P, o, st);
	if (o->kind == PT_NDARRAY)
		return np_array_build(P, o, st);
	return perr(P, "BUILD on a %s%s%s", o->cls ? o->cls : kname(o), o->cls ? " " : "",
		    o->cls ? kname(o) : "");
}

static int op_global(struct pkl *P)
{
	/* "module\nname\n" */
	const char *s = (const char *)P->p + P->pos, *e = (const char *)P->p + P->n;
	const char *nl1 = memchr(s, '\n', (size_t)(e - s));
	const char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(e - nl1 - 1)) : NULL;
	if (!nl2)
		return perr(P, "data.pkl ends inside the global's name");
	size_t lm = (size_t)(nl1 - s), ln = (size_t)(nl2 - nl1 - 1);
	P->pos = (size_t)(nl2 + 1 - (const char *)P->p);
	for (size_t i = 0; i < sizeof globals / sizeof *globals; i++)
		if (strlen(globals[i].module) == lm && !memcmp(globals[i].module, s, lm) &&
		    strlen(globals[i].name) == ln && !memcmp(globals[i].name, nl1 + 1, ln)) {
			struct pt_value *v;
			if (globals[i].k == G_DTYPE) {
				if (!(v = nv(P, PT_DTYPE)))
					return -1;
				v->u.dtype = (enum pt_dtype)globals[i].arg;
			} else {
				if (!(v = nv(P, PT_GLOBAL_)))
					return -1;
				v->u.global = (int)i;
			}
			return push(P, v);
		}
	char m[80], n[80];
	int i = 0;
	for (const char *q = s; q < nl1 && i < 79; q++)
		m[i++] = *q >= 0x20 && *q < 0x7f ? *q : '?';
	m[i] = 0;
	i = 0;
	for (const char *q = nl1 + 1; q < nl2 && i < 79; q++)
		n[i++] = *q >= 0x20 && *q < 0x7f ? *q : '?';
	n[i] = 0;
	return perr(P, "global '%s.%s' is not one torch.save writes for a training state; lmtk "
		    "never runs a pickle's code and reads only the globals it knows (tensors, "
		    "OrderedDict, argparse.Namespace, torch.Size, dtypes, numpy arrays)", m, n);
}

static int memo_put(struct pkl *P, uint64_t i)
{
	struct pt_value *v = top(P);
	if (!v)
		return -1;
	/* a pickler numbers its memo 0, 1, 2 ...: an index beyond the pickle's length is forged */
	if (i >= P->n)
		return perr(P, "memo index %llu beyond what a pickle of %zu bytes can number",
			    (unsigned long long)i, P->n);
	if (i >= P->nmemo) {
		struct pt_value **m = realloc(P->memo, (i + 1) * sizeof *m);
		if (!m)
			return poom(P, "the unpickler's memo", (i + 1) * sizeof *m);
		memset(m + P->nmemo, 0, (i + 1 - P->nmemo) * sizeof *m);
		P->memo = m;
		P->nmemo = i + 1;
	}
	P->memo[i] = v;
	return 0;
}

static int memo_get(struct pkl *P, uint64_t i)
{
	if (i >= P->nmemo || !P->memo[i])
		return perr(P, "memo index %llu was never stored", (unsigned long long)i);
	return push(P, P->memo[i]);
}

static int read_long1(struct pkl *P)
{
	if (need(P, 1) != 0)
		return -1;
	size_t k = P->p[P->pos++];
	if (need(P, k) != 0)
		return -1;
	const uint8_t *b = P->p + P->pos;
	P->pos += k;
	int64_t x = 0;
	if (k) {
		/* bytes beyond the eighth must only repeat the sign */
		int neg = b[k - 1] & 0x80;
		size_t m = k < 8 ? k : 8;
		for (size_t i = 8; i < k; i++)
			if (b[i] != (neg ? 0xff : 0))
				return perr(P, "an integer of %zu bytes beyond int64 (lmtk reads "
					    "integers within -2^63 .. 2^63-1)", k);
		if (k > 8 && ((b[7] & 0x80) != 0) != (neg != 0))
			return perr(P, "an integer of %zu bytes beyond int64 (lmtk reads integers "
				    "within -2^63 .. 2^63-1)", k);
		uint64_t u = le(b, (int)m);
		if (m < 8 && neg)
			u |= ~UINT64_C(0) << (8 * m);
		memcpy(&x, &u, sizeof x);
	}
	struct pt_value *v = nv(P, PT_INT);
	if (!v)
		return -1;
	v->u.i = x;
	return push(P, v);
}

static int push_int(struct pkl *P, int64_t x)
{
	struct pt_value *v = nv(P, PT_INT);
	if (!v)
		return -1;
	v->u.i = x;
	return push(P, v);
}

/* the tree after STOP: no cycles, bounded depth, no parse-time markers */
static int check_tree(struct pkl *P, struct pt_value *v, int depth)
{
	if (depth > PKL_DEPTH)
		return perr(P, "values nested deeper than %d", PKL_DEPTH);
	if (v->visit_ == 2)
		return 0;
	if (v->visit_ == 1)
		return perr(P, "a %s that contains itself", kname(v));
	switch (v->kind) {
	case PT_GLOBAL_:
		return perr(P, "'%s' itself as a value (lmtk reads data, not Python objects)",
			    kname(v));
	case PT_STORAGE_:
		return perr(P, "a bare storage as a value (torch.save writes tensors)");
	case PT_NPDTYPE_:
		return perr(P, "a numpy dtype as a value");
	case PT_NDARRAY:
		if (!v->built_)
			return perr(P, "a numpy array without its state (no BUILD)");
		break;
	default:
		break;
	}
	v->visit_ = 1;
	if (v->kind == PT_LIST || v->kind == PT_TUPLE)
		for (size_t i = 0; i < v->u.seq.n; i++)
			if (check_tree(P, v->u.seq.v[i], depth + 1) != 0)
				return -1;
	if (v->kind == PT_DICT)
		for (size_t i = 0; i < v->u.dict.n; i++)
			if (check_tree(P, v->u.dict.v[i], depth + 1) != 0)
				return -1;
	v->visit_ = 2;
	return 0;
}

static const struct op *op_of(unsigned char c)
{
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
		if (ops[i].code == c)
			return &ops[i];
	return NULL;
}

static int step(struct pkl *P, int *stop)
{
	P->at = P->pos;
	P->op = P->p[P->pos++];
	if (!op_of(P->op)) {
		const char *n = opnames[P->op];
		char hex[8];
		snprintf(hex, sizeof hex, "0x%02x", P->op);
		return perr(P, "opcode %s %s is not one torch.save writes (protocol 2); lmtk reads "
			    "only those it knows, and never runs a pickle's code",
			    hex, n ? n : "(no pickle opcode)");
	}
	size_t from = 0;
	struct pt_value *v, *w, *x;
	switch (P->op) {
	case 0x80:
		if (need(P, 1) != 0)
			return -1;
		if (P->p[P->pos] < 2 || P->p[P->pos] > 5)
			return perr(P, "pickle protocol %d", P->p[P->pos]);
		P->pos++;
		return 0;
	case '.':
		*stop = 1;
		return 0;
	case '(':
		if (grow(&P->marks, &P->mcap, P->nmarks + 1, sizeof *P->marks) != 0)
			return poom(P, "the unpickler's marks", grow_failed);
		P->marks[P->nmarks++] = P->sp;
		return 0;
	case '}':
		return push_new(P, PT_DICT);
	case ']':
		return push_new(P, PT_LIST);
	case ')':
		return push_new(P, PT_TUPLE);
	case 't':
		if (pop_mark(P, &from) != 0)
			return -1;
		v = seq_of(P, PT_TUPLE, P->sp > from ? P->st + from : NULL, P->sp - from);
		P->sp = from;
		return push(P, v);
	case 0x85: case 0x86: case 0x87: {
		size_t k = (size_t)(P->op - 0x84);
		if (P->sp < floor_of(P) + k)
			return perr(P, "stack underflow");
		v = seq_of(P, PT_TUPLE, P->st + P->sp - k, k);
		P->sp -= k;
		return push(P, v);
	}
	case 'a':
		if (!(x = pop(P)) || !(v = top(P)))
			return -1;
		if (v->kind != PT_LIST)
			return perr(P, "APPEND to a %s", kname(v));
		return seq_add(P, v, x);
	case 'e':
		if (pop_mark(P, &from) != 0)
			return -1;
		if (from == 0 || from <= floor_of(P))
			return perr(P, "APPENDS with no list below its mark");
		v = P->st[from - 1];
		if (v->kind != PT_LIST)
			return perr(P, "APPENDS to a %s", kname(v));
		for (size_t i = from; i < P->sp; i++)
			if (seq_add(P, v, P->st[i]) != 0)
				return -1;
		P->sp = from;
		return 0;
	case 's':
		if (!(x = pop(P)) || !(w = pop(P)) || !(v = top(P)))
			return -1;
		if (v->kind != PT_DICT)
			return perr(P, "SETITEM on a %s", kname(v));
		return dict_set(P, v, w, x);
	case 'u':
		if (pop_mark(P, &from) != 0)
			return -1;
		if (from == 0 || from <= floor_of(P))
			return perr(P, "SETITEMS with no dict below its mark");
		v = P->st[from - 1];
		if (v->kind != PT_DICT)
			return perr(P, "SETITEMS on a %s", kname(v));
		if ((P->sp - from) % 2)
			return perr(P, "SETITEMS with an odd number of items");
		for (size_t i = from; i < P->sp; i += 2)
			if (dict_set(P, v, P->st[i], P->st[i + 1]) != 0)
				return -1;
		P->sp = from;
		return 0;
	case 'q':
		if (need(P, 1) != 0)
			return -1;
		return memo_put(P, P->p[P->pos++]);
	case 'r':
		if (need(P, 4) != 0)
			return -1;
		P->pos += 4;
		return memo_put(P, le(P->p + P->pos - 4, 4));
	case 'h':
		if (need(P, 1) != 0)
			return -1;
		return memo_get(P, P->p[P->pos++]);
	case 'j':
		if (need(P, 4) != 0)
			return -1;
		P->pos += 4;
		return memo_get(P, le(P->p + P->pos - 4, 4));
	case 'K':
		if (need(P, 1) != 0)
			return -1;
		return push_int(P, P->p[P->pos++]);
	case 'M':
		if (need(P, 2) != 0)
			return -1;
		P->pos += 2;
		return push_int(P, (int64_t)le(P->p + P->pos - 2, 2));
	case 'J':
		if (need(P, 4) != 0)
			return -1;
		P->pos += 4;
		return push_int(P, (int32_t)(uint32_t)le(P->p + P->pos - 4, 4));
	case 0x8a:
		return read_long1(P);
	case 'G': {
		if (need(P, 8) != 0)
			return -1;
		uint64_t u = 0;
		for (int i = 0; i < 8; i++)       /* big-endian, unlike everything else */
			u = u << 8 | P->p[P->pos++];
		if (!(v = nv(P, PT_FLOAT)))
			return -1;
		memcpy(&v->u.f, &u, sizeof u);
		return push(P, v);
	}
	case 'X': {
		if (need(P, 4) != 0)
			return -1;
		size_t len = (size_t)le(P->p + P->pos, 4);
		P->pos += 4;
		if (need(P, len) != 0 || !(v = nv(P, PT_STR)))
			return -1;
		if (!(v->u.str.s = malloc(len + 1)))
			return poom(P, "a pickled string", len + 1);
		memcpy(v->u.str.s, P->p + P->pos, len);
		v->u.str.s[len] = 0;
		v->u.str.len = len;
		P->pos += len;
		return push(P, v);
	}
	case 'N':
		return push_new(P, PT_NONE);
	case 0x88: case 0x89:
		if (!(v = nv(P, PT_BOOL)))
			return -1;
		v->u.b = P->op == 0x88;
		return push(P, v);
	case 'c':
		return op_global(P);
	case 'R':
		return op_reduce(P);
	case 0x81:
		return op_newobj(P);
	case 'b':
		return op_build(P);
	case 'Q':
		if (!(v = pop(P)))
			return -1;
		return push(P, persid(P, v));
	}
	return perr(P, "opcode in the table without a handler");
}

int pkl_load(struct pt_file *f, const uint8_t *p, size_t n, const char *entry)
{
	struct pkl P = {.f = f, .p = p, .n = n, .entry = entry};
	int stop = 0, rc = 0;
	while (!stop && rc == 0) {
		if (P.pos >= P.n) {
			P.at = P.pos;
			P.op = 0;
			rc = perr(&P, "data.pkl ends before STOP (truncated?)");
			break;
		}
		rc = step(&P, &stop);
	}
	if (rc == 0 && P.sp != 1)
		rc = perr(&P, "%zu values on the stack at STOP, not one", P.sp);
	if (rc == 0)
		rc = check_tree(&P, P.st[0], 0);
	if (rc == 0)
		f->root = P.st[0];
	free(P.st);
	free(P.marks);
	free(P.memo);
	return rc;
}
