/* idxwrite - see idxwrite.h. */
#include "idxwrite.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "msg.h"
#include "xalloc.h"

typedef unsigned long long ull;
typedef long long sll;

static char *cat(const char *a, const char *b)
{
	char *s = malloc(strlen(a) + strlen(b) + 1);
	if (s)
		strcat(strcpy(s, a), b);
	return s;
}

/* --- writing ---------------------------------------------------------------------------------- */

int idx_writer_open(struct idx_writer *w, const char *prefix, int dtype, size_t bufsize, char *err,
		    size_t errlen)
{
	char *path;
	int rc;

	memset(w, 0, sizeof *w);
	w->bin.fd = w->idx.fd = -1;
	w->bin.slot = w->idx.slot = -1;
	w->dtype = dtype;
	w->itemsize = idx_dtype_size(dtype);
	w->maxid = idx_dtype_max(dtype);
	if (!(w->prefix = strdup(prefix)) || !(path = cat(prefix, ".bin")))
		return xalloc_err_in(err, errlen, prefix, "the output's file names", 0);
	rc = outfile_open(&w->bin, path, bufsize, err, errlen);
	free(path);
	return rc;
}

/* ids -> dtype bytes at d; the fit was checked before */
static void convert(int dtype, unsigned char *d, const uint32_t *ids, size_t n)
{
	size_t i;
	switch (dtype) {
	case IDX_U8:
	case IDX_I8:
		for (i = 0; i < n; i++)
			d[i] = (unsigned char)ids[i];
		break;
	case IDX_U16:
	case IDX_I16:
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		for (i = 0; i < n; i++) {
			uint16_t t = (uint16_t)ids[i];
			memcpy(d + 2 * i, &t, 2);
		}
#else
		for (i = 0; i < n; i++) {
			d[2 * i] = (unsigned char)ids[i];
			d[2 * i + 1] = (unsigned char)(ids[i] >> 8);
		}
#endif
		break;
	case IDX_I32:
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		memcpy(d, ids, 4 * n);
#else
		for (i = 0; i < n; i++)
			idx_put32(d + 4 * i, ids[i]);
#endif
		break;
	default:
		for (i = 0; i < n; i++)
			idx_put64(d + 8 * i, ids[i]);
	}
}

int idx_writer_add(struct idx_writer *w, const uint32_t *ids, uint32_t n, char *err, size_t errlen)
{
	if (n > INT32_MAX)
		return errf(err, errlen, "a document of %u tokens is longer than the .idx's int32 sizes "
			    "allow", n), -2;
	/* every dtype's maximum is 2^k-1, so OR-ing the ids finds an overflow without a branch */
	if (w->maxid < UINT32_MAX) {
		uint32_t acc = 0;
		for (uint32_t i = 0; i < n; i++)
			acc |= ids[i];
		if (acc > (uint32_t)w->maxid)
			for (uint32_t i = 0; i < n; i++)
				if (ids[i] > (uint32_t)w->maxid)
					return errf(err, errlen, "id %u (document %llu, token %u) does not fit "
						    "dtype %s (at most %lld)", ids[i], (ull)w->n, i,
						    idx_dtype_name(w->dtype), (sll)w->maxid), -2;
	}
	if (w->n == w->cap) {
		uint64_t cap = w->cap ? 2 * w->cap : 1 << 16;
		uint32_t *s = realloc(w->sizes, cap * sizeof *s);
		if (!s)
			return xalloc_err(err, errlen, "the document sizes", cap * sizeof *s);
		w->sizes = s;
		w->cap = cap;
	}
	size_t per = w->bin.cap / w->itemsize;
	for (uint32_t done = 0; done < n;) {
		size_t k = n - done < per ? n - done : per;
		unsigned char *d = outfile_room(&w->bin, k * w->itemsize, err, errlen);
		if (!d)
			return -1;
		convert(w->dtype, d, ids + done, k);
		outfile_advance(&w->bin, k * w->itemsize);
		done += (uint32_t)k;
	}
	w->sizes[w->n++] = n;
	w->tokens += n;
	return 0;
}

int idx_writer_end_doc(struct idx_writer *w, char *err, size_t errlen)
{
	if (w->ndoc == w->doccap) {
		uint64_t cap = w->doccap ? 2 * w->doccap : 1 << 14;
		uint64_t *d = realloc(w->doc_end, cap * sizeof *d);
		if (!d)
			return xalloc_err(err, errlen, "the document ends", cap * sizeof *d);
		w->doc_end = d;
		w->doccap = cap;
	}
	w->by_doc = 1;
	w->doc_end[w->ndoc++] = w->n;
	return 0;
}

static int put_header(struct outfile *o, int dtype, uint64_t n, uint64_t d, char *err, size_t errlen)
{
	unsigned char h[IDX_HEADER];
	memcpy(h, IDX_MAGIC, 9);
	idx_put64(h + 9, 1);
	h[17] = (unsigned char)dtype;
	idx_put64(h + 18, n);
	idx_put64(h + 26, d);
	return outfile_write(o, h, sizeof h, err, errlen);
}

/* appends one little-endian u64 through the buffer */
static int put64(struct outfile *o, uint64_t v, char *err, size_t errlen)
{
	unsigned char *p = outfile_room(o, 8, err, errlen);
	if (!p)
		return -1;
	idx_put64(p, v);
	outfile_advance(o, 8);
	return 0;
}

static int open_idx(struct outfile *o, const char *prefix, char *err, size_t errlen)
{
	char *path = cat(prefix, ".idx");
	if (!path)
		return xalloc_err_in(err, errlen, prefix, "the .idx file's name", strlen(prefix) + 5);
	int rc = outfile_open(o, path, 1 << 20, err, errlen);
	free(path);
	return rc;
}

int idx_writer_finish(struct idx_writer *w, char *err, size_t errlen)
{
	uint64_t off = 0;

	if (w->by_doc && (!w->ndoc || w->doc_end[w->ndoc - 1] != w->n))
		return errf(err, errlen, "%s: %llu sequences after the last document's end", w->prefix,
			    (ull)(w->n - (w->ndoc ? w->doc_end[w->ndoc - 1] : 0)));
	if (open_idx(&w->idx, w->prefix, err, errlen) < 0 ||
	    put_header(&w->idx, w->dtype, w->n, w->by_doc ? w->ndoc + 1 : w->n + 1, err, errlen) < 0)
		return -1;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (outfile_write(&w->idx, w->sizes, 4 * w->n, err, errlen) < 0)
		return -1;
#else
	for (uint64_t i = 0; i < w->n; i++) {
		unsigned char b[4];
		idx_put32(b, w->sizes[i]);
		if (outfile_write(&w->idx, b, 4, err, errlen) < 0)
			return -1;
	}
#endif
	for (uint64_t i = 0; i < w->n; i++) {
		if (put64(&w->idx, off, err, errlen) < 0)
			return -1;
		off += (uint64_t)w->sizes[i] * w->itemsize;
	}
	if (put64(&w->idx, 0, err, errlen) < 0)
		return -1;
	for (uint64_t i = 0; w->by_doc && i < w->ndoc; i++)
		if (put64(&w->idx, w->doc_end[i], err, errlen) < 0)
			return -1;
	for (uint64_t i = 1; !w->by_doc && i <= w->n; i++)  /* one sequence per document */
		if (put64(&w->idx, i, err, errlen) < 0)
			return -1;
	return outfile_sync(&w->bin, err, errlen) < 0 || outfile_sync(&w->idx, err, errlen) < 0 ? -1 : 0;
}

/* .bin first, then .idx, and an old .idx goes before either: at no moment does a complete
 * .idx sit next to a .bin it does not describe */
static int publish_pair(struct outfile *bin, struct outfile *idx, char *err, size_t errlen)
{
	if (unlink(idx->path) < 0 && errno != ENOENT)
		return errf(err, errlen, "%s: cannot replace: %s", idx->path, strerror(errno));
	return outfile_publish(bin, err, errlen) < 0 || outfile_publish(idx, err, errlen) < 0 ? -1 : 0;
}

int idx_writer_publish(struct idx_writer *w, char *err, size_t errlen)
{
	return publish_pair(&w->bin, &w->idx, err, errlen);
}

void idx_writer_close(struct idx_writer *w)
{
	outfile_discard(&w->bin);
	outfile_discard(&w->idx);
	free(w->sizes);
	free(w->doc_end);
	free(w->prefix);
	memset(w, 0, sizeof *w);
	w->bin.fd = w->idx.fd = -1;
	w->bin.slot = w->idx.slot = -1;
}

/* the merge's bytes so far, written and buffered, for its progress line (pg NULL: none) */
static void merged(struct progress *pg, const struct outfile *bin, const struct outfile *idx)
{
	if (pg)
		progress_update(pg, bin->size + idx->size);
}

#define COPY_SLICE (64u << 20)    /* bytes of .bin per copy: a progress update each */
#define ENTRY_SLICE (1u << 20)    /* .idx entries between progress updates */

int idx_merge(const char *out, struct idx *in, int nin, struct progress *pg, char *err,
	      size_t errlen)
{
	struct outfile bin, idx;
	uint64_t n = 0, d = 1, off = 0, seq = 0, total = IDX_HEADER;
	char *path;
	int rc = -1;

	for (int k = 0; k < nin; k++) {
		if (in[k].dtype != in[0].dtype)
			return errf(err, errlen, "%s: dtype %s (%d), but %s is %s (%d): merging needs one "
				    "dtype", in[k].idx_path, idx_dtype_name(in[k].dtype), in[k].dtype,
				    in[0].idx_path, idx_dtype_name(in[0].dtype), in[0].dtype), -2;
		if (in[k].lay.seqmode)
			return errf(err, errlen, "%s: has a sequence-mode array (newer Megatron-LM, "
				    "multimodal data), which merge would drop", in[k].idx_path), -2;
		n += in[k].n;
		d += in[k].d - 1;
		total += in[k].tokens * in[k].itemsize;
	}
	total += 12 * n + 8 * d;   /* sizes, pointers, doc_idx */
	memset(&idx, 0, sizeof idx);
	idx.fd = idx.dirfd = idx.slot = -1;
	if (!(path = cat(out, ".bin")))
		return xalloc_err_in(err, errlen, out, "the .bin file's name", strlen(out) + 5);
	rc = outfile_open(&bin, path, 8u << 20, err, errlen);
	free(path);
	if (rc < 0)
		return -1;
	if (pg)
		progress_begin(pg, "merging", NULL, total);
	rc = -1;
	for (int k = 0; k < nin; k++) {
		uint64_t len = in[k].tokens * in[k].itemsize;
		for (uint64_t at = 0; at < len; at += COPY_SLICE) {
			if (outfile_copy(&bin, in[k].bin_fd, at, len - at < COPY_SLICE ? len - at : COPY_SLICE,
					 in[k].bin_path, err, errlen) < 0)
				goto fail;
			merged(pg, &bin, &idx);
		}
	}

	if (open_idx(&idx, out, err, errlen) < 0 || put_header(&idx, in[0].dtype, n, d, err, errlen) < 0)
		goto fail;
	for (int k = 0; k < nin; k++) {
		if (outfile_write(&idx, in[k].sizes, 4 * in[k].n, err, errlen) < 0)
			goto fail;
		merged(pg, &bin, &idx);
	}
	for (int k = 0; k < nin; k++)
		for (uint64_t i = 0; i < in[k].n; i++) {
			if (put64(&idx, off, err, errlen) < 0)
				goto fail;
			off += (uint64_t)idx_size(&in[k], i) * in[k].itemsize;
			if (i % ENTRY_SLICE == ENTRY_SLICE - 1)
				merged(pg, &bin, &idx);
		}
	/* Megatron: doc_idx starts [0]; each input extends it by offset + its doc_idx[1:] */
	if (put64(&idx, 0, err, errlen) < 0)
		goto fail;
	for (int k = 0; k < nin; k++) {
		for (uint64_t j = 1; j < in[k].d; j++) {
			if (put64(&idx, seq + idx_doc(&in[k], j), err, errlen) < 0)
				goto fail;
			if (j % ENTRY_SLICE == 0)
				merged(pg, &bin, &idx);
		}
		seq += in[k].n;
	}
	merged(pg, &bin, &idx);   /* all of it; the fsyncs below are the rest of the time */
	if (outfile_sync(&bin, err, errlen) < 0 || outfile_sync(&idx, err, errlen) < 0 ||
	    publish_pair(&bin, &idx, err, errlen) < 0)
		goto fail;
	rc = 0;
fail:
	if (pg)
		progress_end(pg);
	outfile_discard(&bin);
	outfile_discard(&idx);
	return rc;
}
