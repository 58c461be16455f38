/* fuzz: a Git LFS pointer file (src/hub-sync/lfs.c lfs_pointer_parse): what hub-sync reads back
 * from a repository to tell pointers from content. */
#include "fuzz.h"
#include "hub-sync/lfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lfs_pointer p;
	char back[512];
	if (lfs_pointer_parse((const char *)data, size, &p) == 0) {
		if (strlen(p.oid) != 64)
			abort();
		lfs_pointer_format(&p, back, sizeof back);   /* a parsed pointer formats again */
	}
	return 0;
}
