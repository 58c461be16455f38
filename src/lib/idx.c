/* idx - see idx.h. */
#include "idx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"
#include "xalloc.h"

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

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static int has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);
	return n > k && strcmp(s + n - k, suf) == 0;
}

char *idx_prefix(const char *arg)
{
	char *s = strdup(arg), *idx;
	if (!s || !(has_suffix(s, ".bin") || has_suffix(s, ".idx")))
		return s;
	if (!(idx = cat(s, ".idx")))
		return free(s), NULL;
	if (access(idx, F_OK) < 0)
		s[strlen(s) - 4] = 0;
	free(idx);
	return s;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int idx_suggest(const char *prefix, char *buf, size_t len)
{
	const char *slash = strrchr(prefix, '/'), *base = slash ? slash + 1 : prefix;
	char *dir = slash ? strndup(prefix, (size_t)(slash - prefix) + 1) : strdup("./");
	char *found[4];
	int n = 0, more = 0;
	size_t bl = strlen(base);
	DIR *d;
	struct dirent *e;

	if (len)
		buf[0] = 0;
	if (!dir || !(d = opendir(*dir ? dir : "/"))) {
		free(dir);
		return 0;
	}
	/* PREFIX_<key>_document.idx, PREFIX_<key>_sentence.idx: <key> is a JSON key, never empty */
	while ((e = readdir(d))) {
		const char *nm = e->d_name, *key = nm + bl + 1;
		size_t nl = strlen(nm);
		if (nl <= bl + 1 || strncmp(nm, base, bl) != 0 || nm[bl] != '_' || !has_suffix(nm, ".idx"))
			continue;
		size_t kl = nl - bl - 1 - 4;   /* "<key>_document" */
		if (!((kl > 9 && strncmp(key + kl - 9, "_document", 9) == 0) ||
		      (kl > 9 && strncmp(key + kl - 9, "_sentence", 9) == 0)))
			continue;
		if (n == 4) {
			more++;
			continue;
		}
		if ((found[n] = malloc(strlen(prefix) + kl + 2)))
			sprintf(found[n++], "%s_%.*s", prefix, (int)kl, key);
	}
	closedir(d);
	free(dir);
	if (!n)
		return 0;
	qsort(found, (size_t)n, sizeof *found, cmp_str);
	size_t at = 0;
	at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "did you mean ");
	for (int i = 0; i < n; i++) {
		at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", i == 0 ? "" :
				       i + 1 == n && !more ? " or " : ", ", found[i]);
		free(found[i]);
	}
	if (more)
		at += (size_t)snprintf(buf + at, at < len ? len - at : 0, " or %d more", more);
	snprintf(buf + at, at < len ? len - at : 0, "?");
	return 1;
}

/* the .idx mapped into x (paths set from prefix, a file's suffix dropped); IDX_EIO + err */
static int map_index(struct idx *x, const char *prefix, char *err, size_t errlen)
{
	struct stat st;
	int fd, e;

	memset(x, 0, sizeof *x);
	x->bin_fd = -1;
	x->prefix = idx_prefix(prefix);
	x->idx_path = x->prefix ? cat(x->prefix, ".idx") : NULL;
	x->bin_path = x->prefix ? cat(x->prefix, ".bin") : NULL;
	if (!x->prefix || !x->idx_path || !x->bin_path)
		return xalloc_err_in(err, errlen, prefix, "the index's file names", 0), IDX_EIO;
	fd = open(x->idx_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		char hint[1024];
		e = errno;
		if (fd >= 0)
			close(fd);
		/* the user named the prefix mkindex was given, not one it wrote: bad input */
		if (e == ENOENT && idx_suggest(x->prefix, hint, sizeof hint))
			return errf(err, errlen, "%s: %s; %s", x->idx_path, strerror(e), hint), IDX_EBAD;
		return errf(err, errlen, "%s: %s", x->idx_path, strerror(e)), IDX_EIO;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return errf(err, errlen, "%s: not a regular file", x->idx_path), IDX_EIO;
	}
	x->idx_mtime_ns = mtime_ns(&st);
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
	return 0;
}

int idx_map(struct idx *x, const char *prefix, char *bin_err, size_t bin_errlen, char *err,
	    size_t errlen)
{
	struct stat st;
	int e;

	int rc = map_index(x, prefix, err, errlen);
	if (rc < 0)
		return rc;
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
	x->bin_mtime_ns = mtime_ns(&st);
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

/* verifies the mapped x (bin_len < 0: without its .bin) and fills the fields the accessors use */
static int verify(struct idx *x, int64_t bin_len, char *err, size_t errlen)
{
	struct first_problem f = {err, errlen, x};
	if (idx_verify(x->map, x->len, bin_len, &x->lay, stop_at_first, &f) > 0)
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

int idx_open(struct idx *x, const char *prefix, char *err, size_t errlen)
{
	char bin_err[1024] = "";
	int rc = idx_map(x, prefix, bin_err, sizeof bin_err, err, errlen);
	if (rc < 0)
		return rc;
	if (x->bin_fd < 0)
		return errf(err, errlen, "%s", bin_err), IDX_EIO;
	return verify(x, (int64_t)x->bin_len, err, errlen);
}

int idx_open_index(struct idx *x, const char *prefix, char *err, size_t errlen)
{
	int rc = map_index(x, prefix, err, errlen);
	return rc < 0 ? rc : verify(x, -1, err, errlen);
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
		return xalloc_err(err, errlen, "the token scan buffer", bufsize);
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

