/* t_idx.h - what the .idx tests share (lib_idx.c, lib_idxwrite.c): whole files in and out of
 * the test's directory `dir` (defined by the includer), and an .idx built field by field from
 * the format's spec, independently of the code under test. */
#ifndef T_IDX_H
#define T_IDX_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idx.h"

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	unsigned char *b = malloc(*len + 1);
	if (fread(b, 1, *len, f) != *len) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

static void spit(const char *path, const void *p, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(2);
	}
}

static const char *tmp(const char *fmt, ...)
{
	static char buf[8][512];
	static int i;
	char name[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	i = (i + 1) % 8;
	snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
	return buf[i];
}

/* an .idx built field by field from the spec */
static size_t build_idx(unsigned char *b, int dtype, const int32_t *sizes, uint64_t n,
			const int64_t *doc, uint64_t d)
{
	unsigned item = idx_dtype_size(dtype);
	uint64_t off = 0;
	memcpy(b, "MMIDIDX\0\0", 9);
	idx_put64(b + 9, 1);
	b[17] = (unsigned char)dtype;
	idx_put64(b + 18, n);
	idx_put64(b + 26, d);
	for (uint64_t i = 0; i < n; i++) {
		idx_put32(b + 34 + 4 * i, (uint32_t)sizes[i]);
		idx_put64(b + 34 + 4 * n + 8 * i, off);
		off += (uint64_t)sizes[i] * item;
	}
	for (uint64_t i = 0; i < d; i++)
		idx_put64(b + 34 + 12 * n + 8 * i, (uint64_t)doc[i]);
	return 34 + 12 * n + 8 * d;
}

#endif
