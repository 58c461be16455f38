/* pt - PyTorch .pt files (torch.save, torch >= 1.6), read without running anything.
 *
 * A .pt file is a zip archive, every entry stored uncompressed, under one directory whose name
 * torch.save takes from the file's name (any name: it is read from the entries):
 *   ARCHIVE/data.pkl      the saved object as a pickle (protocol 2 by default)
 *   ARCHIVE/data/KEY      one tensor storage each, raw little-endian elements
 *   ARCHIVE/version       the format's version ("3"); ARCHIVE/byteorder ("little") from 1.13 on
 * Tensors in the pickle are persistent ids ('storage', torch.<T>Storage, KEY, location, numel)
 * handed to torch._utils._rebuild_tensor_v2 with a storage offset, a shape and strides, so
 * several tensors may view one storage (a transposed view, a slice, tied embeddings).
 *
 * A pickle is a program: unpickling it in Python calls whatever globals it names, which is why
 * a checkpoint from elsewhere must never be unpickled.  pickle.c is a small opcode machine for
 * exactly the opcodes and globals torch.save writes for a training state (its two tables list
 * them, each with who writes it) and builds a tree of plain values from them; it calls
 * nothing.  Any other opcode or global is refused with an error naming it, the file and the
 * byte offset in data.pkl.  Python classes that only carry data are kept as plain values with
 * their class name in pt_value.cls: OrderedDict and argparse.Namespace as dicts (a Namespace's
 * attributes in order), torch.Size as a tuple, nn.Parameter as its tensor, a set as a list,
 * numpy arrays (np.random.get_state()) as dtype + shape + bytes.
 *
 * Nothing in the file is trusted: storages must exist in the zip with exactly numel elements'
 * bytes, one key names one storage type, every tensor's offset, shape and strides must stay
 * inside its storage, integers must fit int64, containers may not hold themselves.  Errors are
 * returned (pt_open's err, pt_error() after), never exit(), and free everything.
 *
 * Tensor data is never loaded whole: pt_read() and pt_read_f32() copy elements [a, b) of a
 * tensor (row-major order of its shape, whatever its strides) from the zip into the caller's
 * buffer, so a 176B conversion holds only the blocks it works on; a storage read through in
 * order from its start is checked against the zip's CRC-32 at its end.  Compressed entries and
 * big-endian files (byteorder "big") are refused by name; legacy files (torch < 1.6, or
 * _use_new_zipfile_serialization=False) are recognised and the message says to re-save them. */
#ifndef CKPT_PT_H
#define CKPT_PT_H

#include <stddef.h>
#include <stdint.h>

#define PT_MAXDIM 8

enum pt_kind {
	PT_NONE, PT_BOOL, PT_INT, PT_FLOAT, PT_STR, PT_BYTES, PT_LIST, PT_TUPLE, PT_DICT,
	PT_TENSOR, PT_DTYPE, PT_NDARRAY,
	/* only while the pickle is read; never in a tree pt_open returns */
	PT_GLOBAL_, PT_STORAGE_, PT_NPDTYPE_,
	PT_NKINDS
};

/* torch storage / tensor element types */
enum pt_dtype { PTD_F32, PTD_F64, PTD_F16, PTD_BF16, PTD_I64, PTD_I32, PTD_I16, PTD_I8, PTD_U8,
		PTD_BOOL, PTD_N };

struct pt_storage {
	char *key;               /* ARCHIVE/data/KEY */
	enum pt_dtype dtype;
	int64_t numel;
	char *location;          /* "cpu", "cuda:0": recorded, not used */
	int64_t index;           /* the zip entry */
};

struct pt_tensor {
	enum pt_dtype dtype;
	int ndim;
	int64_t shape[PT_MAXDIM], stride[PT_MAXDIM];  /* strides in elements */
	int64_t offset;          /* storage offset, elements */
	int64_t numel;
	const struct pt_storage *storage;
};

struct pt_ndarray {
	char dtype[8];           /* numpy's spelling with byte order: "<u4", "<f8", "|u1", "|b1" */
	size_t itemsize;
	int ndim;                /* 0: a numpy scalar */
	int64_t shape[PT_MAXDIM];
	const uint8_t *data;     /* C order, little-endian; nbytes = itemsize * prod(shape) */
	size_t nbytes;
};

struct pt_value {
	enum pt_kind kind;
	/* the Python class a plain value stands for, or NULL: "collections.OrderedDict",
	 * "argparse.Namespace" (dicts), "torch.Size" (tuple), "torch.nn.Parameter" (tensor),
	 * "set" (list), "deepspeed...fragment_address" and "...loss_scaler.DynamicLossScaler"
	 * (dicts of their fields), "deepspeed.runtime.zero.config.ZeroStageEnum" (as below),
	 * "megatron.enums.PositionEmbeddingType" (the member's value, an int, or its name, a
	 * str: how the enum was pickled depends on the writer's Python) */
	const char *cls;
	union {
		int b;                                   /* PT_BOOL */
		int64_t i;                               /* PT_INT */
		double f;                                /* PT_FLOAT */
		struct { char *s; size_t len; } str;     /* PT_STR (UTF-8, NUL-terminated), PT_BYTES */
		struct { struct pt_value **v; size_t n, cap; } seq;   /* PT_LIST, PT_TUPLE */
		struct { struct pt_value **k, **v; size_t n, cap; } dict; /* keys: PT_STR or PT_INT */
		struct pt_tensor t;                      /* PT_TENSOR */
		enum pt_dtype dtype;                     /* PT_DTYPE: torch.bfloat16 ... */
		struct pt_ndarray nd;                    /* PT_NDARRAY */
		int global;                              /* PT_GLOBAL_: a row of pickle.c's table */
		const struct pt_storage *storage;        /* PT_STORAGE_ */
	} u;
	int visit_;              /* pickle.c's cycle check */
	int built_;              /* pickle.c: BUILD applied (numpy objects; -1: an object awaiting
				  * its attributes) */
};

struct pt_file {
	char *path;
	char *archive;           /* the entries' directory */
	struct pt_value *root;
	struct pt_storage **storages;  /* each storage once, in order of first use */
	size_t nstorages;
	/* private */
	void *zip_;
	void *zf_;               /* the storage entry open for reading, and which */
	int64_t zf_index_;
	struct pt_value **vals_; /* every value, for pt_close */
	size_t nvals_, capvals_, capstorages_;
	uint8_t *pkl_;
	char err[640];
};

size_t pt_dtype_size(enum pt_dtype d);
/* torch's name: "float32", "bfloat16", "int64" ... */
const char *pt_dtype_name(enum pt_dtype d);
const char *pt_kind_name(enum pt_kind k);

/* Opens path and reads its pickle completely.  NULL + err ("PATH: ...") on any problem. */
struct pt_file *pt_open(const char *path, char *err, size_t errlen);
void pt_close(struct pt_file *f);
/* The last error of pt_read/pt_read_f32/pt_get on f. */
const char *pt_error(const struct pt_file *f);

/* Elements [a, b) of t in row-major order of its shape, into dst: pt_read in t's own dtype
 * (pt_dtype_size(t->dtype) bytes each), pt_read_f32 converted to float (rounded to nearest
 * for f64 and integers wider than 24 bits).  0, or -1 and pt_error(f). */
int pt_read(struct pt_file *f, const struct pt_tensor *t, int64_t a, int64_t b, void *dst);
int pt_read_f32(struct pt_file *f, const struct pt_tensor *t, int64_t a, int64_t b, float *dst);

/* Lookup for callers: from (NULL: the root) down a path of keys, NULL-terminated: a dict's
 * key as a string (an int key matches its decimal spelling), a list's or tuple's index.
 * want: the kind the caller needs, or -1 for any.  NULL + pt_error(f) naming the path
 * ("model/language_model: no key 'embedding'", "iteration: a str, not an int"). */
const struct pt_value *pt_get(struct pt_file *f, const struct pt_value *from, int want, ...);
/* A dict's entry by string key, or NULL; no error. */
const struct pt_value *pt_dict_get(const struct pt_value *d, const char *key);

#endif
