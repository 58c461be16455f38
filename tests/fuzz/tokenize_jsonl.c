/* fuzz: tokenize's JSONL reader (src/tokenize/jsonl.c): one input line, two wanted keys; and the
 * list of the line's keys a message about a missing key names (jsonl_keys), in a small buffer. */
#include "fuzz.h"
#include "tokenize/jsonl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = {"text", "meta"};
	struct jsonl_field out[2];
	char *buf = NULL, err[256];
	size_t cap = 0;
	if (jsonl_extract((const char *)data, size, keys, 2, out, &buf, &cap, err, sizeof err) == 0)
		for (int i = 0; i < 2; i++)   /* what it says it decoded lies in the buffer */
			if (out[i].found == 1 && out[i].off + out[i].len > cap)
				abort();
	free(buf);
	char have[40];
	if (jsonl_keys((const char *)data, size, have, sizeof have) < 0 || strlen(have) >= sizeof have)
		abort();
	return 0;
}
