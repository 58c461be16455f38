#include "train/data/data.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"

#define IDX_HEADER 34
#define IDX_MAGIC "MMIDIDX\0\0"

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int data_split(const char *split, uint64_t n, uint64_t bounds[4], char *err, size_t errlen)
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

int data_read(struct dataset *d, const char *prefix, const char *split, char *err, size_t errlen)
{
	char *path = NULL;
	unsigned char hdr[IDX_HEADER];
	struct stat sb;
	int fd = -1, rc = -1;
	uint64_t n, docs_d, want, i;

	memset(d, 0, sizeof *d);
	d->prefix = prefix;
	d->weight = 1;
	if (asprintf(&path, "%s.idx", prefix) < 0)
		die(EXIT_FAILED, "out of memory");
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	ssize_t got = read(fd, hdr, sizeof hdr);
	if (got != (ssize_t)sizeof hdr || memcmp(hdr, IDX_MAGIC, 9) != 0) {
		errf(err, errlen, "%s: not a Megatron index (no MMIDIDX header)", path);
		rc = -2;
		goto out;
	}
	if (le64(hdr + 9) != 1) {
		errf(err, errlen, "%s: index version %llu, expected 1", path,
		     (unsigned long long)le64(hdr + 9));
		rc = -2;
		goto out;
	}
	d->dtype = hdr[17];
	n = le64(hdr + 18);
	docs_d = le64(hdr + 26);
	/* 34 + 12N + 8D, plus N bytes of sequence modes in newer Megatron-LM */
	if (n > (uint64_t)sb.st_size || docs_d > (uint64_t)sb.st_size) {   /* before 12N + 8D wraps */
		errf(err, errlen, "%s: the header's N=%llu and D=%llu are impossibly large for its %lld "
		     "bytes; corrupt or not an index", path, (unsigned long long)n,
		     (unsigned long long)docs_d, (long long)sb.st_size);
		rc = -2;
		goto out;
	}
	want = IDX_HEADER + 12 * n + 8 * docs_d;
	if ((uint64_t)sb.st_size != want && (uint64_t)sb.st_size != want + n) {
		errf(err, errlen, "%s: %lld bytes, but the header (N=%llu, D=%llu) says %llu; "
		     "truncated or not an index", path, (long long)sb.st_size, (unsigned long long)n,
		     (unsigned long long)docs_d, (unsigned long long)want);
		rc = -2;
		goto out;
	}
	d->docs = n;
	if (data_split(split, n, d->bounds, err, errlen) < 0) {
		rc = -2;
		goto out;
	}
	/* stream the sizes, summing each split's share */
	{
		enum { CH = 1 << 16 };
		static unsigned char buf[4 * CH];
		for (i = 0; i < n;) {
			size_t k = n - i < CH ? (size_t)(n - i) : CH, off = 0;
			while (off < 4 * k) {
				ssize_t r = read(fd, buf + off, 4 * k - off);
				if (r <= 0) {
					errf(err, errlen, "%s: %s", path, r < 0 ? strerror(errno) : "short read");
					goto out;
				}
				off += (size_t)r;
			}
			for (size_t j = 0; j < k; j++, i++) {
				const unsigned char *p = buf + 4 * j;
				int32_t sz = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
						       (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
				if (sz < 0) {
					errf(err, errlen, "%s: sequence %llu has size %d", path,
					     (unsigned long long)i, sz);
					rc = -2;
					goto out;
				}
				int s = i < d->bounds[1] ? 0 : i < d->bounds[2] ? 1 : 2;
				d->tokens[s] += (uint64_t)sz;
				d->total_tokens += (uint64_t)sz;
			}
		}
	}
	d->ok = 1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}
