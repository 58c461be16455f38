/* pklw - see pklw.h.  Opcode values from Python's Lib/pickletools.py. */
#include "ckpt/pklw.h"

#include <stdlib.h>
#include <string.h>

enum {
	PROTO = 0x80, STOP = '.', MARK = '(', EMPTY_DICT = '}', EMPTY_LIST = ']', EMPTY_TUPLE = ')',
	TUPLE = 't', SETITEMS = 'u', APPENDS = 'e', BININT = 'J', BININT1 = 'K', BININT2 = 'M',
	LONG1 = 0x8a, BINFLOAT = 'G', BINUNICODE = 'X', NONE = 'N', NEWTRUE = 0x88,
	NEWFALSE = 0x89, GLOBAL = 'c', REDUCE = 'R', NEWOBJ = 0x81, BUILD = 'b', BINPERSID = 'Q'
};

/* what pklw_end() writes for each kind of container */
enum { K_DICT, K_LIST, K_TUPLE, K_SET, K_OBJECT, K_CALL };

static void put(struct pklw *w, const void *p, size_t n)
{
	if (w->oom)
		return;
	if (w->n + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		while (cap < w->n + n)
			cap *= 2;
		uint8_t *b = realloc(w->b, cap);
		if (!b) {
			w->oom = 1;
			return;
		}
		w->b = b;
		w->cap = cap;
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void op(struct pklw *w, uint8_t c)
{
	put(w, &c, 1);
}

static void le32(struct pklw *w, uint32_t v)
{
	uint8_t b[4] = {v, v >> 8, v >> 16, v >> 24};
	put(w, b, 4);
}

static void open_(struct pklw *w, int kind)
{
	if (w->depth >= (int)sizeof w->kind) {
		w->oom = 1;   /* deeper than any checkpoint: reported by pklw_finish */
		return;
	}
	w->kind[w->depth++] = (unsigned char)kind;
}

void pklw_init(struct pklw *w)
{
	memset(w, 0, sizeof *w);
	uint8_t h[2] = {PROTO, 2};
	put(w, h, 2);
}

void pklw_free(struct pklw *w)
{
	free(w->b);
	memset(w, 0, sizeof *w);
}

int pklw_finish(struct pklw *w)
{
	op(w, STOP);
	return w->oom || w->depth ? -1 : 0;
}

void pklw_none(struct pklw *w)
{
	op(w, NONE);
}

void pklw_bool(struct pklw *w, int v)
{
	op(w, v ? NEWTRUE : NEWFALSE);
}

/* Python's choice: BININT1 / BININT2 for small non-negative ints, BININT for an int32, else
 * LONG1 with the fewest little-endian two's-complement bytes */
void pklw_int(struct pklw *w, int64_t v)
{
	if (v >= 0 && v < 256) {
		uint8_t b[2] = {BININT1, (uint8_t)v};
		put(w, b, 2);
	} else if (v >= 0 && v < 65536) {
		uint8_t b[3] = {BININT2, (uint8_t)v, (uint8_t)(v >> 8)};
		put(w, b, 3);
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		op(w, BININT);
		le32(w, (uint32_t)v);
	} else {
		uint8_t b[10];
		int n = 8;
		uint64_t u = (uint64_t)v;
		/* drop top bytes that only repeat the sign */
		while (n > 1) {
			uint8_t top = (uint8_t)(u >> (8 * (n - 1)));
			uint8_t next = (uint8_t)(u >> (8 * (n - 2)));
			if ((top == 0 && !(next & 0x80)) || (top == 0xff && (next & 0x80)))
				n--;
			else
				break;
		}
		b[0] = LONG1;
		b[1] = (uint8_t)n;
		for (int i = 0; i < n; i++)
			b[2 + i] = (uint8_t)(u >> (8 * i));
		put(w, b, (size_t)n + 2);
	}
}

void pklw_float(struct pklw *w, double v)
{
	uint64_t u;
	uint8_t b[9];
	memcpy(&u, &v, 8);
	b[0] = BINFLOAT;
	for (int i = 0; i < 8; i++)
		b[1 + i] = (uint8_t)(u >> (8 * (7 - i)));
	put(w, b, 9);
}

static void unicode(struct pklw *w, const char *s, size_t n)
{
	op(w, BINUNICODE);
	le32(w, (uint32_t)n);
	put(w, s, n);
}

void pklw_str(struct pklw *w, const char *s)
{
	unicode(w, s, strlen(s));
}

/* protocol 2's bytes: _codecs.encode(TEXT, 'latin1'), TEXT the bytes as code points 0-255 in
 * UTF-8 */
void pklw_bytes(struct pklw *w, const void *p, size_t n)
{
	const uint8_t *s = p;
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += s[i] < 0x80 ? 1 : 2;
	uint8_t *t = malloc(m ? m : 1);
	if (!t) {
		w->oom = 1;
		return;
	}
	for (size_t i = 0, k = 0; i < n; i++)
		if (s[i] < 0x80) {
			t[k++] = s[i];
		} else {
			t[k++] = (uint8_t)(0xc0 | (s[i] >> 6));
			t[k++] = (uint8_t)(0x80 | (s[i] & 0x3f));
		}
	pklw_global(w, "_codecs", "encode");
	op(w, MARK);
	unicode(w, (const char *)t, m);
	pklw_str(w, "latin1");
	op(w, TUPLE);
	op(w, REDUCE);
	free(t);
}

void pklw_global(struct pklw *w, const char *module, const char *name)
{
	op(w, GLOBAL);
	put(w, module, strlen(module));
	op(w, '\n');
	put(w, name, strlen(name));
	op(w, '\n');
}

void pklw_dict(struct pklw *w)
{
	op(w, EMPTY_DICT);
	op(w, MARK);
	open_(w, K_DICT);
}

void pklw_odict(struct pklw *w)
{
	pklw_global(w, "collections", "OrderedDict");
	op(w, EMPTY_TUPLE);
	op(w, REDUCE);
	op(w, MARK);
	open_(w, K_DICT);
}

void pklw_list(struct pklw *w)
{
	op(w, EMPTY_LIST);
	op(w, MARK);
	open_(w, K_LIST);
}

void pklw_tuple(struct pklw *w)
{
	op(w, MARK);
	open_(w, K_TUPLE);
}

/* set([items]): protocol 2 has no set opcodes */
void pklw_set(struct pklw *w)
{
	pklw_global(w, "__builtin__", "set");
	op(w, MARK);
	op(w, EMPTY_LIST);
	op(w, MARK);
	open_(w, K_SET);
}

void pklw_object(struct pklw *w, const char *module, const char *name)
{
	pklw_global(w, module, name);
	op(w, EMPTY_TUPLE);
	op(w, NEWOBJ);
	op(w, EMPTY_DICT);
	op(w, MARK);
	open_(w, K_OBJECT);
}

void pklw_call(struct pklw *w, const char *module, const char *name)
{
	pklw_global(w, module, name);
	op(w, MARK);
	open_(w, K_CALL);
}

void pklw_end(struct pklw *w)
{
	if (w->depth <= 0) {
		w->oom = 1;
		return;
	}
	switch (w->kind[--w->depth]) {
	case K_DICT:
		op(w, SETITEMS);
		break;
	case K_LIST:
		op(w, APPENDS);
		break;
	case K_TUPLE:
		op(w, TUPLE);
		break;
	case K_SET:   /* the list, then the call's one-item tuple */
		op(w, APPENDS);
		op(w, TUPLE);
		op(w, REDUCE);
		break;
	case K_OBJECT:
		op(w, SETITEMS);
		op(w, BUILD);
		break;
	case K_CALL:
		op(w, TUPLE);
		op(w, REDUCE);
		break;
	}
}

void pklw_build(struct pklw *w)
{
	op(w, BUILD);
}

void pklw_enum(struct pklw *w, const char *module, const char *name, int64_t value)
{
	pklw_call(w, module, name);
	pklw_int(w, value);
	pklw_end(w);
}

static const char *const storage_class[PTD_N] = {
	[PTD_F32] = "FloatStorage", [PTD_F64] = "DoubleStorage", [PTD_F16] = "HalfStorage",
	[PTD_BF16] = "BFloat16Storage", [PTD_I64] = "LongStorage", [PTD_I32] = "IntStorage",
	[PTD_I16] = "ShortStorage", [PTD_I8] = "CharStorage", [PTD_U8] = "ByteStorage",
	[PTD_BOOL] = "BoolStorage"};

void pklw_size(struct pklw *w, int ndim, const int64_t *shape)
{
	pklw_call(w, "torch", "Size");
	pklw_tuple(w);
	for (int d = 0; d < ndim; d++)
		pklw_int(w, shape[d]);
	pklw_end(w);
	pklw_end(w);
}

void pklw_tensor(struct pklw *w, enum pt_dtype dtype, const char *key, int ndim,
		 const int64_t *shape)
{
	int64_t numel = 1, stride[PT_MAXDIM];
	for (int d = ndim - 1; d >= 0; d--) {
		stride[d] = numel;
		numel *= shape[d];
	}
	pklw_call(w, "torch._utils", "_rebuild_tensor_v2");
	pklw_tuple(w);   /* the persistent id */
	pklw_str(w, "storage");
	pklw_global(w, "torch", storage_class[dtype]);
	pklw_str(w, key);
	pklw_str(w, "cpu");
	pklw_int(w, numel);
	pklw_end(w);
	op(w, BINPERSID);
	pklw_int(w, 0);  /* storage offset */
	pklw_tuple(w);
	for (int d = 0; d < ndim; d++)
		pklw_int(w, shape[d]);
	pklw_end(w);
	pklw_tuple(w);
	for (int d = 0; d < ndim; d++)
		pklw_int(w, stride[d]);
	pklw_end(w);
	pklw_bool(w, 0); /* requires_grad */
	pklw_odict(w);   /* backward_hooks */
	pklw_end(w);
	pklw_end(w);
}
