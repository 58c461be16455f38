/* safetensors - the tensor file format of checkpoints and exports (Hugging Face's safetensors).
 *
 * Layout: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets:
 * [begin, end)}, "__metadata__": {string: string}}, then the tensors' bytes.  It is what HF
 * transformers loads and what PyTorch users can read with a few lines, so checkpoints need no
 * converter to be inspected.
 *
 * Writing streams: the caller declares every tensor first (the header needs all offsets), then
 * writes the bytes in declaration order, in as many pieces as it likes, so a tensor never has
 * to be in memory whole beyond what the caller holds.  The file is a temporary in the target
 * directory until st_commit() fsyncs and renames it: a reader never sees half a file.
 *
 * Reading maps the file and validates the header completely before anything is used: JSON,
 * known dtypes, shapes matching byte lengths, offsets inside the file and not overlapping.  A
 * truncated or corrupt file is an error naming the file and the tensor, never a crash. */
#ifndef TRAIN_SAFETENSORS_H
#define TRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I32, ST_I64, ST_U8, ST_NDTYPES };

size_t st_dtype_size(enum st_dtype d);
const char *st_dtype_name(enum st_dtype d);

struct st_tensor {
	char *name;
	enum st_dtype dtype;
	int ndim;
	int64_t shape[8];
	size_t numel, nbytes;
	uint64_t offset;          /* from the start of the data section */
	const void *data;         /* reader: into the mapping */
};

/* ---- writer ---- */
struct st_writer;
struct st_writer *st_create(const char *path, char *err, size_t errlen);
int st_declare(struct st_writer *w, const char *name, enum st_dtype dtype, int ndim,
	       const int64_t *shape);
int st_metadata(struct st_writer *w, const char *key, const char *value);
/* Appends bytes of the tensors in declaration order (starts the data section on first call). */
int st_write(struct st_writer *w, const void *data, size_t bytes);
/* Checks every declared byte was written, fsyncs, renames into place, fsyncs the directory. */
int st_commit(struct st_writer *w);
/* Removes the temporary; safe after a failed call, frees w. */
void st_abort(struct st_writer *w);
const char *st_werror(const struct st_writer *w);

/* ---- reader ---- */
struct st_file {
	char *path;
	void *map;
	size_t size;
	struct st_tensor *tensors;
	int ntensors;
	char **meta_keys, **meta_values;
	int nmeta;
};
struct st_file *st_open(const char *path, char *err, size_t errlen);
const struct st_tensor *st_find(const struct st_file *f, const char *name);
const char *st_meta(const struct st_file *f, const char *key);
void st_close(struct st_file *f);

/* bf16 <-> f32 (round to nearest even), for exports and loading bf16 files */
float st_bf16_to_f32(uint16_t h);
uint16_t st_f32_to_bf16(float f);
/* IEEE half -> f32, exact (subnormals, inf, nan); inline so the readers' loops vectorise */
static inline float st_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = h >> 10 & 0x1f, m = h & 0x3ff, u;
	if (e == 0x1f)
		u = sign | 0x7f800000u | m << 13;                /* inf, nan */
	else if (e)
		u = sign | (e + 112) << 23 | m << 13;            /* normal */
	else if (!m)
		u = sign;                                        /* zero */
	else {                                                   /* subnormal: normalise */
		e = 113;
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		u = sign | e << 23 | (m & 0x3ff) << 13;
	}
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}
/* f32 -> IEEE half, round to nearest even (numpy's astype(float16)): overflow to inf,
 * subnormals kept (Megatron-DeepSpeed's fp16 layer files) */
uint16_t st_f32_to_f16(float f);

#endif
