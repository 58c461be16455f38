/* datasize - see datasize.h. */
#include "train/data/datasize.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idx.h"
#include "msg.h"

int datasize_split(const char *split, uint64_t n, uint64_t bounds[4], char *err, size_t errlen)
{
	double f[3] = {0, 0, 0}, sum = 0;
	char buf[256], *save = NULL;
	const char *sep = strchr(split, ',') ? "," : "/";
	int k = 0;

	if (strlen(split) >= sizeof buf)
		return errf(err, errlen, "'%s' is too long", split);
	snprintf(buf, sizeof buf, "%s", split);
	for (char *t = strtok_r(buf, sep, &save); t; t = strtok_r(NULL, sep, &save)) {
		char *end;
		double v = strtod(t, &end);  /* Python's float() also takes the spaces of "969, 30, 1" */
		while (*end == ' ' || *end == '\t')
			end++;
		if (end == t || *end || !isfinite(v) || v < 0)
			return errf(err, errlen, "'%s': '%s' is not a non-negative number", split, t);
		if (k < 3)
			f[k] = v;
		k++;
	}
	sum = f[0] + f[1] + f[2];
	if (sum <= 0)
		return errf(err, errlen, "'%s' sums to zero", split);
	int64_t idx[4] = {0, 0, 0, 0};
	for (int i = 0; i < 3; i++)
		idx[i + 1] = idx[i] + (int64_t)nearbyint(f[i] / sum * (double)n);  /* round half even */
	int64_t diff = idx[3] - (int64_t)n;
	for (int i = 1; i < 4; i++)
		idx[i] -= diff;
	for (int i = 0; i < 4; i++)
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
