/* fuzz: the pickle of a .pt file alone (src/ckpt/pickle.c through pt_open): the input becomes
 * ARCHIVE/data.pkl of a zip that also holds storages "0" (48 bytes) and "1" (6 bytes), so every
 * mutation reaches the opcode machine instead of failing the zip's CRC as ckpt_pt's inputs do.
 * The seeds are data.pkl of real torch.save files. */
#include <zip.h>

#include "fuzz.h"
#include "ckpt/pt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t s0[48] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	static const uint8_t s1[6] = {0x80, 0x3f, 0, 0x40, 0xff, 0x7f};
	const char *path = fuzz_file("p.pt", "", 0);
	int ze;
	zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &ze);
	if (!z)
		abort();
	struct { const char *name; const void *p; size_t n; } e[3] = {
		{"a/data.pkl", data, size}, {"a/data/0", s0, sizeof s0}, {"a/data/1", s1, sizeof s1}};
	for (int i = 0; i < 3; i++) {
		zip_source_t *s = zip_source_buffer(z, e[i].p, e[i].n, 0);
		zip_int64_t k = s ? zip_file_add(z, e[i].name, s, ZIP_FL_OVERWRITE) : -1;
		if (k < 0 || zip_set_file_compression(z, (zip_uint64_t)k, ZIP_CM_STORE, 0) != 0)
			abort();
	}
	if (zip_close(z) != 0)
		abort();
	char err[1024];
	struct pt_file *f = pt_open(path, err, sizeof err);
	if (f) {
		if (f->root->kind == PT_DICT)
			for (size_t i = 0; i < f->root->u.dict.n; i++) {
				const struct pt_value *v = f->root->u.dict.v[i];
				float b[64];
				if (v->kind == PT_TENSOR)
					(void)pt_read_f32(f, &v->u.t, 0, v->u.t.numel < 64 ? v->u.t.numel : 64, b);
			}
		pt_close(f);
	}
	return 0;
}
