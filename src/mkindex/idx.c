#include "idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"

/* --- dtypes ----------------------------------------------------------------------------------- */

static const char *const dtype_names[] = {NULL, "uint8", "int8", "int16", "int32", "int64",
					  "float64", "float", "uint16"};

const char *idx_dtype_name(int code)
{
	return code >= 1 && code <= 8 ? dtype_names[code] : NULL;
}

unsigned idx_dtype_size(int code)
{
	static const unsigned size[] = {0, 1, 1, 2, 4, 8, 8, 8, 2};
	return code >= 1 && code <= 8 ? size[code] : 0;
}

int idx_dtype_is_int(int code)
{
	return code >= 1 && code <= 8 && code != IDX_F64 && code != IDX_F32;
}

int idx_dtype_parse(const char *name)
{
	for (int c = 1; c <= 8; c++)
		if (idx_dtype_is_int(c) && strcmp(name, dtype_names[c]) == 0)
			return c;
	return 0;
}

int idx_dtype_for_vocab(uint64_t vocab_size)
{
	return vocab_size < 65500 ? IDX_U16 : IDX_I32;
}

int64_t idx_dtype_max(int code)
{
	switch (code) {
	case IDX_U8: return 255;
	case IDX_I8: return 127;
	case IDX_I16: return 32767;
	case IDX_U16: return 65535;
	case IDX_I32: return 2147483647;
	default: return INT64_MAX;
	}
}

int64_t idx_token(int dtype, const unsigned char *p)
{
	switch (dtype) {
	case IDX_U8: return p[0];
	case IDX_I8: return (int8_t)p[0];
	case IDX_I16: return (int16_t)(uint16_t)(p[0] | p[1] << 8);
	case IDX_U16: return (uint16_t)(p[0] | p[1] << 8);
	case IDX_I32: return (int32_t)idx_le32(p);
	default: return (int64_t)idx_le64(p);
	}
}

/* --- verification ----------------------------------------------------------------------------- */

struct vstate {
	idx_report_fn report;
	void *ctx;
	uint64_t problems;
	int stop;
};

static int say(struct vstate *v, enum idx_note kind, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int say(struct vstate *v, enum idx_note kind, const char *what, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (kind == IDX_PROBLEM)
		v->problems++;
	if (v->report(v->ctx, kind, what, msg))
		v->stop = 1;
	return v->stop;
}

#define PROBLEM(what, ...) do { if (say(v, IDX_PROBLEM, what, __VA_ARGS__)) goto out; } while (0)
#define NOTE(what, ...) do { if (say(v, IDX_NOTE, what, __VA_ARGS__)) goto out; } while (0)

typedef unsigned long long ull;
typedef long long sll;

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t idx_verify(const unsigned char *idx, size_t len, int64_t bin_len, struct idx_layout *lay,
		    idx_report_fn report, void *ctx)
{
	struct vstate vs = {report, ctx, 0, 0}, *v = &vs;
	uint64_t n, d, ns = 0, np = 0, nd = 0;

	memset(lay, 0, sizeof *lay);
	lay->dtype = -1;
	if (len < IDX_HEADER) {
		PROBLEM("header", "file is %zu bytes, shorter than the %u-byte header: truncated", len,
			IDX_HEADER);
		goto out;
	}
	lay->magic_ok = memcmp(idx, IDX_MAGIC, 9) == 0;
	if (!lay->magic_ok)
		PROBLEM("magic", "magic is %02x %02x %02x %02x %02x %02x %02x %02x %02x, expected "
			"4d 4d 49 44 49 44 58 00 00 (\"MMIDIDX\\0\\0\"): not a Megatron MMIDIDX index",
			idx[0], idx[1], idx[2], idx[3], idx[4], idx[5], idx[6], idx[7], idx[8]);
	lay->version = idx_le64(idx + 9);
	lay->version_ok = lay->version == 1;
	if (!lay->version_ok)
		PROBLEM("version", "version is %llu, expected 1 (the only MMIDIDX version)",
			(ull)lay->version);
	lay->dtype = idx[17];
	lay->itemsize = idx_dtype_size(lay->dtype);
	if (!lay->itemsize)
		PROBLEM("dtype", "dtype code %d is unknown (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, "
			"6 float64, 7 float, 8 uint16); the .bin cannot be checked", lay->dtype);
	n = lay->n = idx_le64(idx + 18);
	d = lay->d = idx_le64(idx + 26);

	/* how much of each array the file really holds; every read below stays inside these */
	size_t body = len - IDX_HEADER;
	ns = min64(n, body / 4);
	if (n <= body / 4) {
		size_t off_ptr = IDX_HEADER + 4 * n;
		np = min64(n, (len - off_ptr) / 8);
		if (np == n)
			nd = min64(d, (len - off_ptr - 8 * n) / 8);
	}

	if (n > (1ull << 59) / 12 || d > (1ull << 59) / 8) {
		PROBLEM("size", "N = %llu and D = %llu are impossibly large (the file is %zu bytes): "
			"corrupt header", (ull)n, (ull)d, len);
	} else {
		uint64_t end = IDX_HEADER + 12 * n + 8 * d;
		if (len == end) {
			/* exact */
		} else if (n > 0 && len == end + n) {
			lay->seqmode = 1;
			NOTE("size", "file is %zu bytes, N = %llu more than 34 + 12*N + 8*D = %llu: a trailing "
			     "int8 sequence-mode array (newer Megatron-LM, multimodal data); accepted", len,
			     (ull)n, (ull)end);
		} else if (len < end) {
			const char *arr = ns < n ? "sizes" : np < n ? "pointers" : "doc_idx";
			uint64_t at = ns < n ? ns : np < n ? np : nd, of = ns < n || np < n ? n : d;
			PROBLEM("size", "file is %zu bytes, expected 34 + 12*N + 8*D = %llu (N = %llu, D = %llu): "
				"truncated inside %s, at entry %llu of %llu", len, (ull)end, (ull)n, (ull)d, arr,
				(ull)at, (ull)of);
		} else {
			PROBLEM("size", "file is %zu bytes, %llu more than 34 + 12*N + 8*D = %llu (N = %llu, "
				"D = %llu): trailing bytes, or a wrong N or D", len, (ull)(len - end), (ull)end,
				(ull)n, (ull)d);
		}
	}

	const unsigned char *sz = idx + IDX_HEADER, *ptr = sz + 4 * ns, *doc = ptr + 8 * np;
	for (uint64_t i = 0; i < ns; i++) {
		int32_t s = (int32_t)idx_le32(sz + 4 * i);
		if (s < 0) {
			PROBLEM("sizes", "sizes[%llu] = %d: negative", (ull)i, s);
			continue;
		}
		lay->tokens += (uint64_t)s;
		if (!lay->min_size_set || s < lay->min_size)
			lay->min_size = s;
		if (!lay->min_size_set || s > lay->max_size)
			lay->max_size = s;
		lay->min_size_set = 1;
	}

	/* code 7 was float64 in the original fairseq/Megatron table and is float32 in newer
	 * Megatron-LM: let the .bin size decide */
	if (lay->dtype == IDX_F32 && ns == n && bin_len >= 0 && (uint64_t)bin_len == lay->tokens * 4) {
		lay->itemsize = 4;
		NOTE("dtype", "dtype 7 (float) has 4-byte items here, as in newer Megatron-LM");
	}

	if (lay->itemsize) {
		uint64_t want = 0;
		for (uint64_t i = 0; i < np; i++) {
			uint64_t p = idx_le64(ptr + 8 * i);
			if (p != want)
				PROBLEM("pointers", "pointers[%llu] = %lld, expected %llu (sizes[0..%llu) x %u bytes)",
					(ull)i, (sll)p, (ull)want, (ull)i, lay->itemsize);
			int32_t s = (int32_t)idx_le32(sz + 4 * i);
			want += s > 0 ? (uint64_t)s * lay->itemsize : 0;
		}
	}

	if (d == 0)
		PROBLEM("doc_idx", "D = 0: doc_idx must hold at least its leading 0");
	for (uint64_t i = 0; i < nd; i++) {
		int64_t x = (int64_t)idx_le64(doc + 8 * i), prev = i ? (int64_t)idx_le64(doc + 8 * (i - 1)) : 0;
		if (i == 0 && x != 0)
			PROBLEM("doc_idx", "doc_idx[0] = %lld, expected 0", (sll)x);
		else if (i > 0 && x < prev)
			PROBLEM("doc_idx", "doc_idx[%llu] = %lld is less than doc_idx[%llu] = %lld: must not "
				"decrease", (ull)i, (sll)x, (ull)(i - 1), (sll)prev);
		else if (i + 1 < d && (x < 0 || (uint64_t)x > n))
			PROBLEM("doc_idx", "doc_idx[%llu] = %lld is outside 0..N = %llu", (ull)i, (sll)x, (ull)n);
	}
	if (d > 0 && nd == d) {
		int64_t last = (int64_t)idx_le64(doc + 8 * (d - 1));
		if (last < 0 || (uint64_t)last != n)
			PROBLEM("doc_idx", "doc_idx[%llu] (the last) = %lld, expected N = %llu", (ull)(d - 1),
				(sll)last, (ull)n);
	}

	if (bin_len >= 0 && lay->itemsize && ns == n) {
		uint64_t want = lay->tokens * lay->itemsize, have = (uint64_t)bin_len;
		if (have < want) {
			uint64_t tok = have / lay->itemsize, acc = 0, i = 0;
			for (; i < n; i++) {
				int32_t s = (int32_t)idx_le32(sz + 4 * i);
				acc += s > 0 ? (uint64_t)s : 0;
				if (acc > tok)
					break;
			}
			PROBLEM("bin", "is %llu bytes, expected %llu (%llu tokens x %u bytes): it ends inside "
				"sequence %llu of %llu (truncated?)", (ull)have, (ull)want, (ull)lay->tokens,
				lay->itemsize, (ull)i, (ull)n);
		} else if (have > want) {
			PROBLEM("bin", "is %llu bytes, expected %llu (%llu tokens x %u bytes): %llu bytes too "
				"many", (ull)have, (ull)want, (ull)lay->tokens, lay->itemsize,
				(ull)(have - want));
		}
	}
out:
	return v->problems;
}

/* --- reading ---------------------------------------------------------------------------------- */

static char *cat(const char *a, const char *b)
{
	char *s = malloc(strlen(a) + strlen(b) + 1);
	if (s)
		strcat(strcpy(s, a), b);
	return s;
}

int idx_map(struct idx *x, const char *prefix, char *bin_err, size_t bin_errlen, char *err,
	    size_t errlen)
{
	struct stat st;
	int fd, e;

	memset(x, 0, sizeof *x);
	x->bin_fd = -1;
	x->prefix = strdup(prefix);
	x->idx_path = cat(prefix, ".idx");
	x->bin_path = cat(prefix, ".bin");
	if (!x->prefix || !x->idx_path || !x->bin_path)
		return errf(err, errlen, "%s: out of memory", prefix), IDX_EIO;
	fd = open(x->idx_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		e = errno;
		if (fd >= 0)
			close(fd);
		return errf(err, errlen, "%s: %s", x->idx_path, strerror(e)), IDX_EIO;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return errf(err, errlen, "%s: not a regular file", x->idx_path), IDX_EIO;
	}
	x->len = (size_t)st.st_size;
	if (x->len) {
		void *m = mmap(NULL, x->len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED) {
			e = errno;
			close(fd);
			x->len = 0;
			return errf(err, errlen, "%s: mmap: %s", x->idx_path, strerror(e)), IDX_EIO;
		}
		x->map = m;
		madvise(m, x->len, MADV_SEQUENTIAL);
	}
	close(fd);

	x->bin_fd = open(x->bin_path, O_RDONLY | O_CLOEXEC);
	if (x->bin_fd < 0 || fstat(x->bin_fd, &st) < 0) {
		e = errno;
		errf(bin_err, bin_errlen, "%s: %s", x->bin_path, strerror(e));
		if (x->bin_fd >= 0)
			close(x->bin_fd);
		x->bin_fd = -1;
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		errf(bin_err, bin_errlen, "%s: not a regular file", x->bin_path);
		close(x->bin_fd);
		x->bin_fd = -1;
		return 0;
	}
	x->bin_len = (uint64_t)st.st_size;
	posix_fadvise(x->bin_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

struct first_problem {
	char *err;
	size_t errlen;
	const struct idx *x;
};

static int stop_at_first(void *ctx, enum idx_note kind, const char *what, const char *msg)
{
	struct first_problem *f = ctx;
	if (kind != IDX_PROBLEM)
		return 0;
	errf(f->err, f->errlen, "%s: %s; run 'mkindex check %s'", strcmp(what, "bin") == 0 ?
	     f->x->bin_path : f->x->idx_path, msg, f->x->prefix);
	return 1;
}

int idx_open(struct idx *x, const char *prefix, char *err, size_t errlen)
{
	char bin_err[1024] = "";
	int rc = idx_map(x, prefix, bin_err, sizeof bin_err, err, errlen);
	if (rc < 0)
		return rc;
	if (x->bin_fd < 0)
		return errf(err, errlen, "%s", bin_err), IDX_EIO;
	struct first_problem f = {err, errlen, x};
	if (idx_verify(x->map, x->len, (int64_t)x->bin_len, &x->lay, stop_at_first, &f) > 0)
		return IDX_EBAD;
	x->dtype = x->lay.dtype;
	x->itemsize = x->lay.itemsize;
	x->n = x->lay.n;
	x->d = x->lay.d;
	x->tokens = x->lay.tokens;
	x->sizes = x->map + IDX_HEADER;
	x->pointers = x->sizes + 4 * x->n;
	x->doc_idx = x->pointers + 8 * x->n;
	if (!idx_dtype_is_int(x->dtype))
		return errf(err, errlen, "%s: dtype %d (%s) holds floats, not token ids", x->idx_path,
			    x->dtype, idx_dtype_name(x->dtype)), IDX_EBAD;
	return 0;
}

void idx_close(struct idx *x)
{
	if (x->map)
		munmap((void *)x->map, x->len);
	if (x->bin_fd >= 0)
		close(x->bin_fd);
	free(x->prefix);
	free(x->idx_path);
	free(x->bin_path);
	memset(x, 0, sizeof *x);
	x->bin_fd = -1;
}

int idx_scan(const struct idx *x, uint64_t first, uint64_t count, idx_scan_fn fn, void *ctx,
	     char *err, size_t errlen)
{
	const size_t bufsize = 4u << 20;  /* a multiple of every itemsize */
	unsigned char *buf = malloc(bufsize);
	uint64_t off = first * x->itemsize, left = count * x->itemsize, tok = first;
	int rc = 0;

	if (!buf)
		return errf(err, errlen, "out of memory");
	while (left && !rc) {
		size_t want = left < bufsize ? (size_t)left : bufsize, have = 0;
		while (have < want) {
			ssize_t got = pread(x->bin_fd, buf + have, want - have, (off_t)(off + have));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				rc = errf(err, errlen, "%s: %s at byte %llu", x->bin_path,
					  got < 0 ? strerror(errno) : "unexpected end of file",
					  (ull)(off + have));
				goto done;
			}
			have += (size_t)got;
		}
		rc = fn(ctx, buf, want / x->itemsize, tok);
		tok += want / x->itemsize;
		off += want;
		left -= want;
	}
done:
	free(buf);
	return rc;
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
		return errf(err, errlen, "%s: out of memory", prefix);
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
			return errf(err, errlen, "out of memory for %llu document sizes", (ull)cap);
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
			return errf(err, errlen, "out of memory for %llu document ends", (ull)cap);
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
		return errf(err, errlen, "%s: out of memory", prefix);
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

int idx_merge(const char *out, struct idx *in, int nin, char *err, size_t errlen)
{
	struct outfile bin, idx;
	uint64_t n = 0, d = 1, off = 0, seq = 0;
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
	}
	memset(&idx, 0, sizeof idx);
	idx.fd = idx.dirfd = idx.slot = -1;
	if (!(path = cat(out, ".bin")))
		return errf(err, errlen, "out of memory");
	rc = outfile_open(&bin, path, 8u << 20, err, errlen);
	free(path);
	if (rc < 0)
		return -1;
	rc = -1;
	for (int k = 0; k < nin; k++)
		if (outfile_copy(&bin, in[k].bin_fd, 0, in[k].tokens * in[k].itemsize, in[k].bin_path, err,
				 errlen) < 0)
			goto fail;

	if (open_idx(&idx, out, err, errlen) < 0 || put_header(&idx, in[0].dtype, n, d, err, errlen) < 0)
		goto fail;
	for (int k = 0; k < nin; k++)
		if (outfile_write(&idx, in[k].sizes, 4 * in[k].n, err, errlen) < 0)
			goto fail;
	for (int k = 0; k < nin; k++)
		for (uint64_t i = 0; i < in[k].n; i++) {
			if (put64(&idx, off, err, errlen) < 0)
				goto fail;
			off += (uint64_t)idx_size(&in[k], i) * in[k].itemsize;
		}
	/* Megatron: doc_idx starts [0]; each input extends it by offset + its doc_idx[1:] */
	if (put64(&idx, 0, err, errlen) < 0)
		goto fail;
	for (int k = 0; k < nin; k++) {
		for (uint64_t j = 1; j < in[k].d; j++)
			if (put64(&idx, seq + idx_doc(&in[k], j), err, errlen) < 0)
				goto fail;
		seq += in[k].n;
	}
	if (outfile_sync(&bin, err, errlen) < 0 || outfile_sync(&idx, err, errlen) < 0 ||
	    publish_pair(&bin, &idx, err, errlen) < 0)
		goto fail;
	rc = 0;
fail:
	outfile_discard(&bin);
	outfile_discard(&idx);
	return rc;
}
