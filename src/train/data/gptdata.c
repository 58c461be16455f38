#include "train/data/gptdata.h"

#include "file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "idx.h"
#include "msg.h"
#include "outfile.h"
#include "progress.h"
#include "mt19937.h"
#include "xalloc.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gptdata: the .bin/.idx data and the index cache are little-endian; so must the host be"
#endif

/* _build_index_mappings' cutoff_last_epoch (BigScience's; Megatron-LM's is 0.80) */
#define GD_LAST_EPOCH_CUTOFF 0.95

/* --- the data --------------------------------------------------------------------------------- */

/* Maps path read-only (nothing for an empty file).  0, or -errno + err. */
static int gd_map(const char *path, void **map, size_t *len, struct stat *st, char *err,
		  size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), e;

	*map = NULL;
	*len = 0;
	if (fd < 0 || fstat(fd, st) < 0) {
		e = errno;
		errf(err, errlen, "%s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	if (st->st_size > 0) {
		void *m = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			e = errno;
			errf(err, errlen, "%s: mmap: %s", path, strerror(e));
			close(fd);
			return -e;
		}
		*map = m;
		*len = (size_t)st->st_size;
	}
	close(fd);
	return 0;
}

int gptdata_open(struct gptdata_ds *ds, const char *prefix, char *err, size_t errlen)
{
	struct idx x;
	int rc;

	memset(ds, 0, sizeof *ds);
	/* every field checked against the file's size and the .bin's: lib/idx.h */
	rc = idx_open(&x, prefix, err, errlen);
	if (rc < 0) {
		idx_close(&x);
		return rc == IDX_EIO ? -1 : -2;
	}
	rc = -2;
	if (x.dtype != IDX_U16 && x.dtype != IDX_I32) {
		errf(err, errlen, "%s: dtype %s (%d); token data is uint16 (8) or int32 (4)", x.idx_path,
		     idx_dtype_name(x.dtype), x.dtype);
		goto out;
	}
	if (x.n > INT32_MAX) {  /* Megatron numbers documents with np.int32 */
		errf(err, errlen, "%s: %llu sequences; GPT datasets number them in int32", x.idx_path,
		     (unsigned long long)x.n);
		goto out;
	}
	ds->prefix = strdup(x.prefix);
	ds->sizes = malloc(x.n ? 4 * x.n : 1);
	if (!ds->prefix || !ds->sizes)
		xalloc_die("a dataset's document sizes", x.n ? 4 * x.n : 1);
	memcpy(ds->sizes, x.sizes, 4 * x.n);
	ds->dtype = x.dtype;
	ds->itemsize = x.itemsize;
	ds->n = (int64_t)x.n;
	ds->bin_len = x.bin_len;
	if (x.bin_len) {
		void *m = mmap(NULL, (size_t)x.bin_len, PROT_READ, MAP_SHARED, x.bin_fd, 0);
		if (m == MAP_FAILED) {
			errf(err, errlen, "%s: mmap: %s", x.bin_path, strerror(errno));
			rc = -1;
			goto out;
		}
		ds->bin_map = m;
		ds->bin_map_len = (size_t)x.bin_len;
	}
	ds->bin = ds->bin_map;
	/* the .idx map changes hands: pointers (and bertdata's doc_idx) are read from it */
	ds->idx_map = (void *)x.map;
	ds->idx_map_len = x.len;
	ds->pointers = x.pointers;
	x.map = NULL;
	ds->idx_size = x.len;
	ds->bin_size = x.bin_len;
	ds->idx_mtime_ns = x.idx_mtime_ns;
	ds->bin_mtime_ns = x.bin_mtime_ns;
	rc = 0;
out:
	idx_close(&x);
	if (rc < 0)
		gptdata_close(ds);
	return rc;
}

void gptdata_close(struct gptdata_ds *ds)
{
	if (ds->idx_map)
		munmap(ds->idx_map, ds->idx_map_len);
	if (ds->bin_map)
		munmap(ds->bin_map, ds->bin_map_len);
	free(ds->sizes);
	free(ds->prefix);
	free(ds->cache_dir);
	memset(ds, 0, sizeof *ds);
}

/* --- split ------------------------------------------------------------------------------------ */

int gptdata_split(const char *s, int64_t n_docs, int64_t idx[4], char *err, size_t errlen)
{
	double f[3] = {0, 0, 0}, sum;
	char sep = strchr(s, ',') ? ',' : strchr(s, '/') ? '/' : 0;
	const char *p = s;
	int k = 0;

	/* every field goes through float(), even those past the third, which are then dropped */
	for (;;) {
		const char *e = sep ? strchr(p, sep) : NULL;
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char buf[64], *end;
		double v;

		if (len >= sizeof buf)
			return errf(err, errlen, "'%s': field '%.*s...' is too long", s, 20, p);
		memcpy(buf, p, len);
		buf[len] = 0;
		v = strtod(buf, &end);
		while (isspace((unsigned char)*end))  /* float() strips whitespace */
			end++;
		if (end == buf || *end || strpbrk(buf, "xX"))
			return errf(err, errlen, "'%s': '%s' is not a number", s, buf);
		if (!isfinite(v) || v < 0)
			return errf(err, errlen, "'%s': '%s' is not a non-negative number", s, buf);
		if (k < 3)
			f[k] = v;
		k++;
		if (!e)
			break;
		p = e + 1;
	}
	sum = 0;  /* Python's sum(): left to right */
	for (int i = 0; i < 3; i++)
		sum += f[i];
	if (!(sum > 0))
		return errf(err, errlen, "'%s' sums to zero", s);
	idx[0] = 0;
	for (int i = 0; i < 3; i++)  /* int(round(x)): half to even, as nearbyint by default */
		idx[i + 1] = idx[i] + (int64_t)nearbyint(f[i] / sum * (double)n_docs);
	int64_t diff = idx[3] - n_docs;
	for (int i = 1; i < 4; i++)
		idx[i] -= diff;
	return 0;
}

/* --- building --------------------------------------------------------------------------------- */

void gptdata_index_free(struct gptdata_index *x)
{
	if (x->map) {
		munmap(x->map, x->map_len);
	} else {
		free(x->doc_idx);
		free(x->sample_idx);
		free(x->shuffle_idx);
	}
	memset(x, 0, sizeof *x);
}

/* _num_epochs(): the fewest epochs E with (E * tpe - 1) // seq >= num_samples, at least 1.
 * Megatron counts up one epoch at a time; solving for E gives the same number without a loop
 * as long as the tiny dataset / huge run it would take. */
static int64_t gd_epochs(int64_t tpe, int64_t seq, int64_t num_samples)
{
	int64_t need;  /* E * tpe - 1 >= num_samples * seq */
	if (__builtin_mul_overflow(num_samples, seq, &need) || need == INT64_MAX)
		return -1;
	need += 1;
	int64_t e = need / tpe + (need % tpe != 0);
	return e < 1 ? 1 : e;
}

static int show_progress;

void gptdata_show_progress(int on)
{
	show_progress = on;
}

int gptdata_build(struct gptdata_index *x, const int32_t *sizes, const struct gptdata_key *k,
		  char *err, size_t errlen)
{
	struct mt19937 rng;
	struct progress pg;
	int64_t docs, tpe = 0, e, ndoc, ns, nm1 = 0;

	memset(x, 0, sizeof *x);
	x->key = *k;
	if (k->start < 0 || k->end <= k->start)
		return errf(err, errlen, "the split [%lld, %lld) has no documents",
			    (long long)k->start, (long long)k->end);
	if (k->end > INT32_MAX)
		return errf(err, errlen, "document %lld does not fit Megatron's int32 numbering",
			    (long long)k->end - 1);
	if (k->seq_length < 2)  /* helpers.cpp asserts seq_length > 1 */
		return errf(err, errlen, "sequence length %d; it must be at least 2", k->seq_length);
	if (k->num_samples < 0)
		return errf(err, errlen, "%lld samples asked for", (long long)k->num_samples);
	docs = k->end - k->start;
	for (int64_t d = k->start; d < k->end; d++) {
		if (sizes[d] < 0)
			return errf(err, errlen, "sequence %lld has size %d", (long long)d, sizes[d]);
		tpe += sizes[d];
	}
	if (tpe < 2)  /* helpers.cpp asserts tokens_per_epoch > 1 */
		return errf(err, errlen, "the split [%lld, %lld) has %lld tokens; a sample needs 2",
			    (long long)k->start, (long long)k->end, (long long)tpe);
	e = gd_epochs(tpe, k->seq_length, k->num_samples);
	/* helpers.cpp takes num_epochs as int32, and stores doc_idx positions in int32 */
	if (e < 0 || e > INT32_MAX || __builtin_mul_overflow(e, docs, &ndoc) || ndoc > INT32_MAX ||
	    __builtin_mul_overflow(e, tpe, &ns))
		return errf(err, errlen, "%lld samples of %d tokens take %lld epochs of %lld "
			    "documents; more than Megatron's int32 arrays hold",
			    (long long)k->num_samples, k->seq_length, (long long)e, (long long)docs);
	ns = (ns - 1) / k->seq_length;
	x->tokens_per_epoch = tpe;
	x->epochs = (int32_t)e;
	x->ndoc = ndoc;
	x->ns = ns;
	if (e > 1) {
		int64_t per = (tpe - 1) / k->seq_length, last;
		nm1 = ((e - 1) * tpe - 1) / k->seq_length;
		last = k->num_samples - nm1;
		/* Megatron asserts this; it fails when the last epoch's share rounds one sample up */
		if (last > per)
			return errf(err, errlen, "%lld samples leave %lld for the last of %lld epochs, "
				    "more than the %lld of one epoch: Megatron refuses this too "
				    "(ask for one sample less)", (long long)k->num_samples,
				    (long long)last, (long long)e, (long long)per);
		x->separate_last_epoch = last < (int64_t)(GD_LAST_EPOCH_CUTOFF * (double)per);
	}

	mt_seed(&rng, k->seed);  /* one generator for all four shuffles, in Megatron's order */

	/* doc_idx: the split's documents, once per epoch, shuffled (the last epoch apart) */
	x->doc_idx = malloc((size_t)ndoc * sizeof *x->doc_idx);
	x->sample_idx = malloc((size_t)(ns + 1) * 2 * sizeof *x->sample_idx);
	x->shuffle_wide = ns >= (int64_t)UINT32_MAX - 1;
	x->shuffle_idx = malloc(ns ? (size_t)ns * (x->shuffle_wide ? 8 : 4) : 1);
	if (!x->doc_idx || !x->sample_idx || !x->shuffle_idx) {
		gptdata_index_free(x);
		return errf(err, errlen, "out of memory for an index of %lld samples", (long long)ns);
	}
	/* the progress line counts the entries of the three arrays as they are made */
	progress_begin(&pg, "building the sample index:", "entries", (uint64_t)(ndoc + 2 * ns));
	if (!show_progress)
		pg.on = 0;
	progress_extra(&pg, "%lld samples, %lld epoch%s", (long long)ns, (long long)e, e > 1 ? "s" : "");
	for (int64_t i = 0; i < ndoc; i++)
		x->doc_idx[i] = (int32_t)(k->start + i % docs);
	if (x->separate_last_epoch) {
		mt_shuffle_i32(&rng, x->doc_idx, ndoc - docs);
		mt_shuffle_i32(&rng, x->doc_idx + ndoc - docs, docs);
	} else {
		mt_shuffle_i32(&rng, x->doc_idx, ndoc);
	}
	progress_update(&pg, (uint64_t)ndoc);

	/* sample_idx: build_sample_idx() - walk seq_length+1 tokens per sample, the last token of
	 * one sample being the first of the next */
	{
		int32_t *s = x->sample_idx;
		int64_t d = 0;
		int32_t off = 0;
		s[0] = 0;
		s[1] = 0;
		for (int64_t i = 1; i <= ns; i++) {
			int32_t rem = k->seq_length + 1;
			while (rem != 0) {
				if (d >= ndoc) {  /* cannot happen: ns was computed from the tokens */
					progress_end(&pg);
					gptdata_index_free(x);
					return errf(err, errlen, "sample %lld runs past the last document",
						    (long long)i);
				}
				int32_t len = sizes[x->doc_idx[d]] - off;
				rem -= len;
				if (rem <= 0) {
					off += rem + len - 1;
					rem = 0;
				} else {
					d++;
					off = 0;
				}
			}
			s[2 * i] = (int32_t)d;
			s[2 * i + 1] = off;
			if ((i & 0xffff) == 0 && progress_due(&pg))
				progress_update(&pg, (uint64_t)(ndoc + i));
		}
	}
	progress_update(&pg, (uint64_t)(ndoc + ns));

	/* shuffle_idx: [0, first) and [first, ns) shuffled apart, first = ns unless separate */
	x->shuffle_first = x->separate_last_epoch ? nm1 : ns;
	if (x->shuffle_wide) {
		int64_t *a = x->shuffle_idx;
		for (int64_t i = 0; i < ns; i++)
			a[i] = i;
		mt_shuffle_i64(&rng, a, x->shuffle_first);
		mt_shuffle_i64(&rng, a + x->shuffle_first, ns - x->shuffle_first);
	} else {
		uint32_t *a = x->shuffle_idx;
		for (int64_t i = 0; i < ns; i++)
			a[i] = (uint32_t)i;
		mt_shuffle_u32(&rng, a, x->shuffle_first);
		mt_shuffle_u32(&rng, a + x->shuffle_first, ns - x->shuffle_first);
	}
	progress_update(&pg, (uint64_t)(ndoc + 2 * ns));
	progress_end(&pg);
	x->cache = GPTDATA_BUILT;
	return 0;
}

/* --- samples ---------------------------------------------------------------------------------- */

/* count tokens of sequence seq from token off into out; -1 when that is outside the sequence */
static int gd_copy(const struct gptdata_ds *ds, int64_t seq, int64_t off, int64_t count,
		   int32_t *out)
{
	if (seq < 0 || seq >= ds->n || off < 0 || count < 0 || off + count > ds->sizes[seq])
		return -1;
	const unsigned char *p = ds->bin + idx_le64(ds->pointers + 8 * seq) + off * ds->itemsize;
	if (ds->dtype == 8) {
		for (int64_t t = 0; t < count; t++)
			out[t] = (int32_t)((uint32_t)p[2 * t] | (uint32_t)p[2 * t + 1] << 8);
	} else {
		memcpy(out, p, (size_t)count * 4);
	}
	return 0;
}

int gptdata_sample(const struct gptdata_ds *ds, const struct gptdata_index *x, int64_t i,
		   int32_t *out, char *err, size_t errlen)
{
	int64_t want = (int64_t)x->key.seq_length + 1, got = 0, j, d0, d1, o0, o1;

	if (i < 0 || i >= x->ns)
		return errf(err, errlen, "sample %lld of %lld", (long long)i, (long long)x->ns);
	j = gptdata_shuffle_at(x, i);
	if (j < 0 || j >= x->ns)
		goto bad;
	d0 = x->sample_idx[2 * j];
	o0 = x->sample_idx[2 * j + 1];
	d1 = x->sample_idx[2 * j + 2];
	o1 = x->sample_idx[2 * j + 3];
	if (d0 < 0 || d1 >= x->ndoc || d1 < d0)
		goto bad;
	if (d0 == d1) {
		if (o1 - o0 + 1 != want || gd_copy(ds, x->doc_idx[d0], o0, want, out) < 0)
			goto bad;
		return 0;
	}
	/* the rest of the first document, the ones in between, the head of the last */
	for (int64_t d = d0; d <= d1; d++) {
		int64_t seq = x->doc_idx[d], from = d == d0 ? o0 : 0;
		int64_t to = d == d1 ? o1 + 1 : (seq >= 0 && seq < ds->n ? ds->sizes[seq] : -1);
		if (to - from > want - got || gd_copy(ds, seq, from, to - from, out + got) < 0)
			goto bad;
		got += to - from;
	}
	if (got != want)
		goto bad;
	return 0;
bad:
	return errf(err, errlen, "%s: sample %lld (row %lld of the index) does not lie in the data; "
		    "index built for another dataset?", ds->prefix ? ds->prefix : "dataset",
		    (long long)i, (long long)j);
}

/* --- cache ------------------------------------------------------------------------------------ */

#define GD_MAGIC "LMTKIMAP"
#define GD_VERSION 1
#define GD_HEADER 128
#define GD_CK_OFF 120

enum { GD_F_SEPARATE = 1, GD_F_WIDE = 2 };

static uint64_t gd_pad8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

/* A 64-bit hash of 8-byte words (every region hashed is a multiple of 8 bytes): one multiply
 * chain, a few GB/s, enough to catch a torn or bit-flipped file; not a defence against anyone. */
struct gd_ck {
	uint64_t h, n;
};

static void gd_ck_add(struct gd_ck *c, const void *data, uint64_t len)
{
	const unsigned char *p = data;
	uint64_t h = c->h;
	for (uint64_t i = 0; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h ^= w * 0x87c37b91114253d5ULL;
		h = (h << 31 | h >> 33) * 0x4cf5ad432745937fULL;
	}
	c->h = h;
	c->n += len;
}

static uint64_t gd_ck_end(const struct gd_ck *c)
{
	uint64_t h = c->h ^ c->n;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static void gd_put(unsigned char *h, int off, const void *v, size_t n)
{
	memcpy(h + off, v, n);
}

static void gd_header(unsigned char h[GD_HEADER], const struct gptdata_index *x,
		      const struct gptdata_ds *ds)
{
	uint32_t version = GD_VERSION, hlen = GD_HEADER, seed = x->key.seed;
	uint32_t flags = (x->separate_last_epoch ? GD_F_SEPARATE : 0) | (x->shuffle_wide ? GD_F_WIDE : 0);
	int64_t idx_size = (int64_t)ds->idx_size, bin_size = (int64_t)ds->bin_size;
	int32_t seq = x->key.seq_length;

	memset(h, 0, GD_HEADER);
	memcpy(h, GD_MAGIC, 8);
	gd_put(h, 8, &version, 4);
	gd_put(h, 12, &hlen, 4);
	gd_put(h, 16, &x->key.start, 8);
	gd_put(h, 24, &x->key.end, 8);
	gd_put(h, 32, &x->key.num_samples, 8);
	gd_put(h, 40, &seq, 4);
	gd_put(h, 44, &seed, 4);
	gd_put(h, 48, &idx_size, 8);
	gd_put(h, 56, &ds->idx_mtime_ns, 8);
	gd_put(h, 64, &bin_size, 8);
	gd_put(h, 72, &ds->bin_mtime_ns, 8);
	gd_put(h, 80, &x->tokens_per_epoch, 8);
	gd_put(h, 88, &x->epochs, 4);
	gd_put(h, 92, &flags, 4);
	gd_put(h, 96, &x->shuffle_first, 8);
	gd_put(h, 104, &x->ndoc, 8);
	gd_put(h, 112, &x->ns, 8);
}

/* the three regions after the header: pointer and padded length */
static void gd_regions(const struct gptdata_index *x, const void *p[3], uint64_t len[3],
		       uint64_t padded[3])
{
	p[0] = x->doc_idx;
	len[0] = (uint64_t)x->ndoc * 4;
	p[1] = x->sample_idx;
	len[1] = (uint64_t)(x->ns + 1) * 8;
	p[2] = x->shuffle_idx;
	len[2] = (uint64_t)x->ns * (x->shuffle_wide ? 8 : 4);
	for (int i = 0; i < 3; i++)
		padded[i] = gd_pad8(len[i]);
}

char *gptdata_cache_path(const char *prefix, const char *dir, const struct gptdata_key *k)
{
	const char *base = prefix, *slash = strrchr(prefix, '/');
	char *path;

	if (dir && slash)
		base = slash + 1;
	if (asprintf(&path, "%s%s%s_lmtk_indexmap_%lldns_%dsl_%us_%lld-%lld.map", dir ? dir : "",
		     dir ? "/" : "", base, (long long)k->num_samples, k->seq_length, k->seed,
		     (long long)k->start, (long long)k->end) < 0)
		xalloc_die("an index map's cache path", 0);
	return path;
}

/* checksum of a header (its checksum field taken as zero) and the regions, padding included */
static uint64_t gd_checksum(const unsigned char *hdr, const void *p[3], const uint64_t len[3],
			    const uint64_t padded[3])
{
	struct gd_ck c = {0x6c6d746b69646d31ULL, 0};  /* "lmtkidm1" */
	gd_ck_add(&c, hdr, GD_CK_OFF);
	for (int i = 0; i < 3; i++) {
		uint64_t whole = len[i] & ~(uint64_t)7;
		gd_ck_add(&c, p[i], whole);
		if (padded[i] != whole) {  /* the tail, zero-padded as in the file */
			unsigned char t[8] = {0};
			memcpy(t, (const unsigned char *)p[i] + whole, len[i] - whole);
			gd_ck_add(&c, t, 8);
		}
	}
	return gd_ck_end(&c);
}

int gptdata_cache_save(const struct gptdata_index *x, const struct gptdata_ds *ds,
		       const char *path, char *err, size_t errlen)
{
	static const unsigned char zero[8];
	unsigned char hdr[GD_HEADER];
	const void *p[3];
	uint64_t len[3], padded[3], ck;
	struct outfile o;

	gd_header(hdr, x, ds);
	gd_regions(x, p, len, padded);
	ck = gd_checksum(hdr, p, len, padded);
	memcpy(hdr + GD_CK_OFF, &ck, 8);

	if (outfile_open(&o, path, 1 << 16, err, errlen) < 0)
		return -1;
	o.mode = 0644;
	int rc = outfile_write(&o, hdr, GD_HEADER, err, errlen);
	for (int i = 0; i < 3 && !rc; i++)
		rc = outfile_write(&o, p[i], len[i], err, errlen) ||
		     outfile_write(&o, zero, padded[i] - len[i], err, errlen) ? -1 : 0;
	if (!rc)
		rc = outfile_sync(&o, err, errlen) < 0 || outfile_publish(&o, err, errlen) < 0 ? -1 : 0;
	outfile_discard(&o);
	return rc;
}

static int64_t gd_i64(const unsigned char *h, int off)
{
	int64_t v;
	memcpy(&v, h + off, 8);
	return v;
}

static uint32_t gd_u32(const unsigned char *h, int off)
{
	uint32_t v;
	memcpy(&v, h + off, 4);
	return v;
}

int gptdata_cache_load(struct gptdata_index *x, const struct gptdata_ds *ds,
		       const struct gptdata_key *k, const char *path, char *err, size_t errlen)
{
	struct stat st;
	void *map = NULL;
	size_t maplen = 0;
	const unsigned char *h;
	const void *p[3];
	uint64_t len[3], padded[3], want;
	int rc;

	memset(x, 0, sizeof *x);
	rc = gd_map(path, &map, &maplen, &st, err, errlen);
	if (rc == -ENOENT) {
		errf(err, errlen, "%s: none yet", path);
		return GPTDATA_CACHE_MISSING;
	}
	if (rc < 0)
		return GPTDATA_CACHE_CORRUPT;
	h = map;
	rc = GPTDATA_CACHE_CORRUPT;
	if (maplen < GD_HEADER || memcmp(h, GD_MAGIC, 8) != 0 || gd_u32(h, 12) != GD_HEADER) {
		errf(err, errlen, "%s: not an lmtk index map", path);
		goto bad;
	}
	if (gd_u32(h, 8) != GD_VERSION) {
		errf(err, errlen, "%s: version %u, this lmtk writes %u", path, gd_u32(h, 8),
		     GD_VERSION);
		rc = GPTDATA_CACHE_STALE;
		goto bad;
	}
	rc = GPTDATA_CACHE_STALE;
	if (gd_i64(h, 16) != k->start || gd_i64(h, 24) != k->end || gd_i64(h, 32) != k->num_samples ||
	    (int32_t)gd_u32(h, 40) != k->seq_length || gd_u32(h, 44) != k->seed) {
		errf(err, errlen, "%s: built for another split, sample count, length or seed", path);
		goto bad;
	}
	if ((uint64_t)gd_i64(h, 48) != ds->idx_size || gd_i64(h, 56) != ds->idx_mtime_ns ||
	    (uint64_t)gd_i64(h, 64) != ds->bin_size || gd_i64(h, 72) != ds->bin_mtime_ns) {
		errf(err, errlen, "%s: %s.idx or .bin changed since it was built", path,
		     ds->prefix ? ds->prefix : "the dataset");
		goto bad;
	}
	rc = GPTDATA_CACHE_CORRUPT;
	x->key = *k;
	x->tokens_per_epoch = gd_i64(h, 80);
	x->epochs = (int32_t)gd_u32(h, 88);
	x->separate_last_epoch = !!(gd_u32(h, 92) & GD_F_SEPARATE);
	x->shuffle_wide = !!(gd_u32(h, 92) & GD_F_WIDE);
	x->shuffle_first = gd_i64(h, 96);
	x->ndoc = gd_i64(h, 104);
	x->ns = gd_i64(h, 112);
	if (x->epochs < 1 || x->ndoc != (int64_t)x->epochs * (k->end - k->start) || x->ns < 0 ||
	    x->ns > (int64_t)1 << 46 || x->shuffle_first < 0 || x->shuffle_first > x->ns ||
	    x->shuffle_wide != (x->ns >= (int64_t)UINT32_MAX - 1) || x->ns < k->num_samples) {
		errf(err, errlen, "%s: header does not add up", path);
		goto bad;
	}
	x->doc_idx = (int32_t *)(h + GD_HEADER);
	x->sample_idx = (int32_t *)(h + GD_HEADER + gd_pad8((uint64_t)x->ndoc * 4));
	x->shuffle_idx = (unsigned char *)x->sample_idx + (uint64_t)(x->ns + 1) * 8;
	gd_regions(x, p, len, padded);
	want = GD_HEADER + padded[0] + padded[1] + padded[2];
	if (maplen != want) {
		errf(err, errlen, "%s: %zu bytes, the header says %llu; truncated?", path, maplen,
		     (unsigned long long)want);
		goto bad;
	}
	{
		unsigned char hz[GD_HEADER];
		memcpy(hz, h, GD_HEADER);
		memset(hz + GD_CK_OFF, 0, 8);
		if (gd_checksum(hz, p, len, padded) != (uint64_t)gd_i64(h, GD_CK_OFF)) {
			errf(err, errlen, "%s: checksum mismatch; corrupt", path);
			goto bad;
		}
	}
	/* the entries index each other; never let a bad one send a read astray */
	for (int64_t i = 0; i < x->ndoc; i++)
		if (x->doc_idx[i] < k->start || x->doc_idx[i] >= k->end) {
			errf(err, errlen, "%s: doc_idx[%lld] = %d outside the split", path,
			     (long long)i, x->doc_idx[i]);
			goto bad;
		}
	for (int64_t i = 0; i <= x->ns; i++)
		if (x->sample_idx[2 * i] < 0 || x->sample_idx[2 * i] >= x->ndoc) {
			errf(err, errlen, "%s: sample_idx[%lld] out of range", path, (long long)i);
			goto bad;
		}
	for (int64_t i = 0; i < x->ns; i++)
		if ((uint64_t)gptdata_shuffle_at(x, i) >= (uint64_t)x->ns) {
			errf(err, errlen, "%s: shuffle_idx[%lld] out of range", path, (long long)i);
			goto bad;
		}
	x->map = map;
	x->map_len = maplen;
	x->cache = GPTDATA_CACHE_HIT;
	return 0;
bad:
	munmap(map, maplen);
	memset(x, 0, sizeof *x);
	return rc;
}

char *gptdata_cache_fallback(const char *prefix, char *note, size_t notelen)
{
	const char *slash = strrchr(prefix, '/'), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char *dir, *own = NULL, why[1024] = "";
	int e;

	if (notelen)
		note[0] = 0;
	dir = slash ? strndup(prefix, slash == prefix ? 1 : (size_t)(slash - prefix)) : strdup(".");
	if (!dir)
		xalloc_die("the data prefix's directory name", 0);
	/* access() and not a trial file: it answers for this user, EROFS included, and leaves no
	 * trace in a directory that is not ours */
	if (access(dir, W_OK | X_OK) == 0) {
		free(dir);
		return NULL;
	}
	e = errno;
	if ((xdg && xdg[0] == '/' && asprintf(&own, "%s/lmtk", xdg) < 0) ||
	    (!own && home && home[0] && asprintf(&own, "%s/.cache/lmtk", home) < 0))
		xalloc_die("the index maps' fallback cache directory name", 0);
	if (own && file_mkdirs(own, why, sizeof why) == 0 && access(own, W_OK | X_OK) < 0)
		errf(why, sizeof why, "%s: %s", own, strerror(errno));
	if (own && !why[0]) {
		errf(note, notelen, "%s: %s is not writable (%s): its index caches go to %s instead "
		     "(--data-cache-path picks the place)", prefix, dir, strerror(e), own);
		free(dir);
		return own;
	}
	errf(note, notelen, "%s: %s is not writable (%s) and %s: its index is built in memory on "
	     "every run; pass --data-cache-path DIR to keep it", prefix, dir, strerror(e),
	     own ? why : "there is no $HOME or $XDG_CACHE_HOME");
	free(own);
	free(dir);
	return NULL;
}

int gptdata_index_get(struct gptdata_index *x, const struct gptdata_ds *ds,
		      const struct gptdata_key *k, const char *cache_dir, char *err, size_t errlen)
{
	char why[1024] = "", serr[1024] = "";
	char *path;

	memset(x, 0, sizeof *x);
	if (k->end > ds->n)
		return errf(err, errlen, "%s: the split [%lld, %lld) goes past its %lld sequences",
			    ds->prefix, (long long)k->start, (long long)k->end, (long long)ds->n);
	if (!cache_dir && ds->cache_dir) {
		/* read-only data: a cache its owner built beside it is as good as ours */
		path = gptdata_cache_path(ds->prefix, NULL, k);
		if (gptdata_cache_load(x, ds, k, path, why, sizeof why) == 0) {
			free(path);
			if (err && errlen)
				err[0] = 0;
			return 0;
		}
		free(path);
	}
	path = gptdata_cache_path(ds->prefix, cache_dir ? cache_dir : ds->cache_dir, k);
	if (gptdata_cache_load(x, ds, k, path, why, sizeof why) == 0) {
		free(path);
		if (err && errlen)
			err[0] = 0;
		return 0;
	}
	if (gptdata_build(x, ds->sizes, k, err, errlen) < 0) {
		free(path);
		return -1;
	}
	if (gptdata_cache_save(x, ds, path, serr, sizeof serr) < 0) {
		x->cache = GPTDATA_BUILT_UNSAVED;
		errf(err, errlen, "%s; not saved: %s", why, serr);
	} else {
		x->cache = GPTDATA_BUILT;
		errf(err, errlen, "%s", why);
	}
	free(path);
	return 0;
}

/* --- blending --------------------------------------------------------------------------------- */

int gptdata_blend_weights(const double *w, int n, double *out, char *err, size_t errlen)
{
	double sum = 0;
	for (int i = 0; i < n; i++) {
		if (!isfinite(w[i]) || w[i] < 0)
			return errf(err, errlen, "weight %g is not a non-negative number", w[i]);
		sum += w[i];
	}
	if (!(sum > 0))
		return errf(err, errlen, "the weights sum to zero");
	for (int i = 0; i < n; i++)
		out[i] = w[i] / sum;
	return 0;
}

int64_t gptdata_blend_samples(int64_t n, double w)
{
	return (int64_t)ceil((double)n * w * 1.005);
}

/* numpy's pairwise_sum for float64, which np.sum uses: 8 accumulators up to 128 elements,
 * halves (at a multiple of 8) above; plain left-to-right below 8 */
static double gd_pairwise_sum(const double *a, int64_t n)
{
	if (n < 8) {
		double r = 0.;
		for (int64_t i = 0; i < n; i++)
			r += a[i];
		return r;
	}
	if (n <= 128) {
		double r[8], res;
		int64_t i;
		for (int j = 0; j < 8; j++)
			r[j] = a[j];
		for (i = 8; i < n - (n % 8); i += 8)
			for (int j = 0; j < 8; j++)
				r[j] += a[i + j];
		res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
		for (; i < n; i++)
			res += a[i];
		return res;
	}
	int64_t n2 = n / 2;
	n2 -= n2 % 8;
	return gd_pairwise_sum(a, n2) + gd_pairwise_sum(a + n2, n - n2);
}

int gptdata_blend_normalise(const double *weights, int n, double *out)
{
	double sum = gd_pairwise_sum(weights, n);
	if (!(sum > 0))
		return -1;
	for (int j = 0; j < n; j++)
		out[j] = weights[j] / sum;
	return 0;
}

int gptdata_blend(const double *weights, int n, int64_t size, uint8_t *dataset_index,
		  int64_t *dataset_sample_index)
{
	double w[255];
	int64_t count[255] = {0};

	if (n < 1 || n >= 255)  /* BlendableDataset asserts num_datasets < 255 (uint8 indices) */
		return -1;
	if (gptdata_blend_normalise(weights, n, w) < 0)
		return -1;
	for (int64_t i = 0; i < size; i++) {
		double x = i > 1 ? (double)i : 1.0;
		int best = 0;
		double best_err = w[0] * x - (double)count[0];
		for (int j = 1; j < n; j++) {
			double e = w[j] * x - (double)count[j];
			if (e > best_err) {
				best_err = e;
				best = j;
			}
		}
		dataset_index[i] = (uint8_t)best;
		dataset_sample_index[i] = count[best]++;
	}
	return 0;
}
