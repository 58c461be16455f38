/* fuzz: a PyTorch .pt file (src/ckpt/pt.c pt_open, pickle.c): the zip, the pickle's opcodes and
 * globals, tensors checked against their storages; then the first elements of every tensor are
 * read (pt_read_f32) and a lookup walks the top level. */
#include "fuzz.h"
#include "ckpt/pt.h"

static void walk(struct pt_file *f, const struct pt_value *v, int depth)
{
	if (depth > 4)
		return;
	if (v->kind == PT_TENSOR) {
		float buf[256];
		int64_t n = v->u.t.numel < 256 ? v->u.t.numel : 256;
		(void)pt_read_f32(f, &v->u.t, 0, n, buf);
		(void)pt_read_f32(f, &v->u.t, v->u.t.numel - n, v->u.t.numel, buf);
	} else if (v->kind == PT_LIST || v->kind == PT_TUPLE) {
		for (size_t i = 0; i < v->u.seq.n && i < 64; i++)
			walk(f, v->u.seq.v[i], depth + 1);
	} else if (v->kind == PT_DICT) {
		for (size_t i = 0; i < v->u.dict.n && i < 64; i++)
			walk(f, v->u.dict.v[i], depth + 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1024];
	struct pt_file *f = pt_open(fuzz_file("x.pt", data, size), err, sizeof err);
	if (f) {
		walk(f, f->root, 0);
		(void)pt_get(f, NULL, PT_DICT, "model", "language_model", NULL);
		pt_close(f);
	}
	return 0;
}
