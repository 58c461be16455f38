/* fuzz: the token stream tokenize writes and mkindex reads (src/lib/tokstream.c). */
#include "fuzz.h"
#include "tokstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fmemopen((void *)data, size ? size : 1, "rb");
	struct tokstream_reader r;
	char err[512];
	uint32_t key, n;
	if (!f)
		return 0;
	if (size && tokstream_open(&r, f, "<fuzz>", err, sizeof err) == 0) {
		int rc;
		while ((rc = tokstream_next(&r, &key, &n, err, sizeof err)) > 0)
			if (key >= r.h.nkeys || (rc == 2 && (n || r.h.level != TOKSTREAM_SENTENCES)))
				abort();
		tokstream_close(&r);
	}
	fclose(f);
	return 0;
}
