/* datasize - see datasize.h. */
#include "train/data/datasize.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idx.h"
#include "msg.h"
#include "train/data/gptdata.h"

int datasize_split(const char *split, uint64_t n, uint64_t bounds[4], char *err, size_t errlen)
{
	int64_t idx[4];
	if (n > INT64_MAX || gptdata_split(split, (int64_t)n, idx, err, errlen) < 0)
		return n > INT64_MAX ? errf(err, errlen, "%llu sequences: too many",
					    (unsigned long long)n) : -1;
	for (int i = 0; i < 4; i++)   /* a bound the shift took below 0 counts as 0 */
		bounds[i] = idx[i] < 0 ? 0 : (uint64_t)idx[i];
	return 0;
}

int datasize_read(struct dataset *d, const char *prefix, const char *split, char *err, size_t errlen)
{
	struct idx x;
	int rc;

	memset(d, 0, sizeof *d);
	d->prefix = prefix;
	d->weight = 1;
	rc = idx_open_index(&x, prefix, err, errlen);
	if (rc < 0) {
		idx_close(&x);
		return rc == IDX_EIO ? -1 : -2;
	}
	d->dtype = x.dtype;
	d->docs = x.n;
	if (datasize_split(split, x.n, d->bounds, err, errlen) < 0) {
		idx_close(&x);
		return -2;
	}
	for (uint64_t i = 0; i < x.n; i++) {
		uint64_t sz = idx_size(&x, i);   /* idx_open checked it is not negative */
		int s = i < d->bounds[1] ? 0 : i < d->bounds[2] ? 1 : 2;
		d->tokens[s] += sz;
		d->total_tokens += sz;
	}
	idx_close(&x);
	d->ok = 1;
	return 0;
}
