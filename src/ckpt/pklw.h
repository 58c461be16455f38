/* pklw - a pickle writer: the opcodes torch.save writes (protocol 2), emitted into a buffer.
 *
 * The counterpart of pickle.c's reader, for the Megatron-DeepSpeed files ckpt-merge-tp writes
 * (tests/ref/mds-format.md, "Pickle"): the caller walks its structure and calls one function per
 * value; containers are opened and closed (pklw_dict() ... pklw_end()), keys and values of a
 * dict alternate between them.  The memo is not used: every value is written where it is
 * (Python's unpickler, and pickle.c, need no memo), which only costs the bytes of a repeated
 * GLOBAL.  Integers take the smallest form Python's pickler takes (BININT1, BININT2, BININT,
 * LONG1), floats are BINFLOAT (big-endian doubles), strings BINUNICODE, bytes the
 * `_codecs.encode(latin-1 text, 'latin1')` protocol 2 writes.
 *
 * Classes are written as Python pickles them: an OrderedDict is `OrderedDict()` REDUCE then
 * SETITEMS; an object with a __dict__ (argparse.Namespace, a dataclass, DeepSpeed's loss scaler)
 * NEWOBJ with no arguments then BUILD with its attribute dict; an enum member REDUCE of
 * (value,); a tensor torch._utils._rebuild_tensor_v2 over the persistent id ('storage',
 * torch.<T>Storage, KEY, 'cpu', numel) - the storage's bytes go into the zip (ptw.h).
 *
 * Out of memory sets w->oom and every later call does nothing; pklw_finish() reports it. */
#ifndef CKPT_PKLW_H
#define CKPT_PKLW_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/pt.h"

struct pklw {
	uint8_t *b;
	size_t n, cap;
	int oom;
	int depth;              /* open containers, checked by pklw_finish */
	unsigned char kind[64]; /* what each open container closes with */
};

void pklw_init(struct pklw *w);       /* PROTO 2 */
void pklw_free(struct pklw *w);
/* STOP; 0, or -1 when memory ran out or a container is still open */
int pklw_finish(struct pklw *w);

void pklw_none(struct pklw *w);
void pklw_bool(struct pklw *w, int v);
void pklw_int(struct pklw *w, int64_t v);
void pklw_float(struct pklw *w, double v);
void pklw_str(struct pklw *w, const char *s);
void pklw_bytes(struct pklw *w, const void *p, size_t n);
/* module.name itself (torch.bfloat16, a class given as a value) */
void pklw_global(struct pklw *w, const char *module, const char *name);

/* containers: open, write the items (a dict: key, value, key, value ...), pklw_end() */
void pklw_dict(struct pklw *w);
void pklw_odict(struct pklw *w);                 /* collections.OrderedDict */
void pklw_list(struct pklw *w);
void pklw_tuple(struct pklw *w);
void pklw_set(struct pklw *w);                   /* builtins set: its items, like a list */
/* an object of class module.name with a __dict__: its attributes as a dict's items */
void pklw_object(struct pklw *w, const char *module, const char *name);
/* module.name(ITEMS...): GLOBAL, the arguments as a tuple's items, REDUCE */
void pklw_call(struct pklw *w, const char *module, const char *name);
void pklw_end(struct pklw *w);
/* BUILD: the value just written is the state of the object below it */
void pklw_build(struct pklw *w);

/* an enum member: module.name(value) */
void pklw_enum(struct pklw *w, const char *module, const char *name, int64_t value);
/* a tensor: the whole storage KEY (numel elements of dtype), contiguous, offset 0 */
void pklw_tensor(struct pklw *w, enum pt_dtype dtype, const char *key, int ndim,
		 const int64_t *shape);
/* torch.Size(shape) */
void pklw_size(struct pklw *w, int ndim, const int64_t *shape);

#endif
