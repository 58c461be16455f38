#include "tokstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "xalloc.h"

static int put32(FILE *f, uint32_t v)
{
	unsigned char b[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24};
	return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

int tokstream_write_header(FILE *f, const struct tokstream_header *h)
{
	if (fwrite(TOKSTREAM_MAGIC, 1, 8, f) != 8 || put32(f, h->level ? 2 : 1) || put32(f, h->vocab_size) ||
	    put32(f, h->eod) || (h->level && put32(f, h->level)) || put32(f, h->nkeys))
		return -1;
	for (uint32_t i = 0; i < h->nkeys; i++) {
		uint32_t len = (uint32_t)strlen(h->keys[i]);
		if (put32(f, len) || fwrite(h->keys[i], 1, len, f) != len)
			return -1;
	}
	return 0;
}

int tokstream_write_doc(FILE *f, uint32_t key, const uint32_t *ids, uint32_t n)
{
	if (put32(f, key) || put32(f, n))
		return -1;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return fwrite(ids, 4, n, f) == n ? 0 : -1;
#else
	for (uint32_t i = 0; i < n; i++)
		if (put32(f, ids[i]))
			return -1;
	return 0;
#endif
}

int tokstream_write_doc_end(FILE *f, uint32_t key)
{
	return put32(f, TOKSTREAM_DOC_END) || put32(f, key) ? -1 : 0;
}

int tokstream_write_end(FILE *f)
{
	if (put32(f, TOKSTREAM_END) || put32(f, 0))
		return -1;
	return fflush(f) == 0 ? 0 : -1;
}

/* reads exactly n bytes; -1 + err on short read */
static int get(struct tokstream_reader *r, void *p, size_t n, const char *what, char *err, size_t errlen)
{
	size_t got = fread(p, 1, n, r->f);
	if (got != n) {
		if (ferror(r->f))
			return errf(err, errlen, "%s: read error at byte %llu: %s", r->name,
				    (unsigned long long)(r->offset + got), strerror(errno));
		return errf(err, errlen, "%s: truncated token stream at byte %llu (in %s); did the producer die?",
			    r->name, (unsigned long long)(r->offset + got), what);
	}
	r->offset += n;
	return 0;
}

static uint32_t le32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int get32(struct tokstream_reader *r, uint32_t *v, const char *what, char *err, size_t errlen)
{
	unsigned char b[4];
	if (get(r, b, 4, what, err, errlen) < 0)
		return -1;
	*v = le32(b);
	return 0;
}

int tokstream_open(struct tokstream_reader *r, FILE *f, const char *name, char *err, size_t errlen)
{
	char magic[8];
	memset(r, 0, sizeof *r);
	r->f = f;
	r->name = name;
	if (get(r, magic, 8, "the header", err, errlen) < 0)
		return -1;
	if (memcmp(magic, TOKSTREAM_MAGIC, 8) != 0)
		return errf(err, errlen, "%s: not an lmtk token stream (bad magic); pipe tokenize's output here",
			    name);
	if (get32(r, &r->h.version, "the header", err, errlen) < 0 ||
	    get32(r, &r->h.vocab_size, "the header", err, errlen) < 0 ||
	    get32(r, &r->h.eod, "the header", err, errlen) < 0)
		return -1;
	if (r->h.version != 1 && r->h.version != 2)
		return errf(err, errlen, "%s: token stream version %u, this %s reads versions 1 and 2", name,
			    r->h.version, prog_name);
	if (r->h.version == 2 && get32(r, &r->h.level, "the header", err, errlen) < 0)
		return -1;
	if (r->h.level != TOKSTREAM_DOCUMENTS && r->h.level != TOKSTREAM_SENTENCES)
		return errf(err, errlen, "%s: token stream level %u: neither documents (0) nor sentences (1)",
			    name, r->h.level);
	if (get32(r, &r->h.nkeys, "the header", err, errlen) < 0)
		return -1;
	if (r->h.nkeys == 0 || r->h.nkeys > TOKSTREAM_MAX_KEYS)
		return errf(err, errlen, "%s: bad key count %u in the header", name, r->h.nkeys);
	for (uint32_t i = 0; i < r->h.nkeys; i++) {
		uint32_t len;
		if (get32(r, &len, "the header", err, errlen) < 0)
			goto fail;
		if (len > 4096) {
			errf(err, errlen, "%s: key %u name is %u bytes long: corrupt header", name, i, len);
			goto fail;
		}
		r->h.keys[i] = calloc(1, len + 1);
		if (!r->h.keys[i] || get(r, r->h.keys[i], len, "the header", err, errlen) < 0)
			goto fail;
	}
	return 0;
fail:   /* nothing is left to close after a failure (make fuzz: the names read so far leaked) */
	tokstream_close(r);
	return -1;
}

int tokstream_next(struct tokstream_reader *r, uint32_t *key, uint32_t *n, char *err, size_t errlen)
{
	uint64_t at = r->offset;
	if (get32(r, key, "a record header", err, errlen) < 0 || get32(r, n, "a record header", err, errlen) < 0)
		return -1;
	if (*key == TOKSTREAM_END)
		return 0;
	if (*key == TOKSTREAM_DOC_END && r->h.level == TOKSTREAM_SENTENCES) {
		if (*n >= r->h.nkeys)
			return errf(err, errlen, "%s: end-of-document record at byte %llu names key %u of %u: "
				    "corrupt stream", r->name, (unsigned long long)at, *n, r->h.nkeys);
		*key = *n;
		*n = 0;
		return 2;
	}
	if (*key == TOKSTREAM_DOC_END)
		return errf(err, errlen, "%s: end-of-document record at byte %llu in a stream of documents "
			    "(level 0): corrupt stream", r->name, (unsigned long long)at);
	if (*key >= r->h.nkeys)
		return errf(err, errlen, "%s: record at byte %llu names key %u of %u: corrupt stream", r->name,
			    (unsigned long long)at, *key, r->h.nkeys);
	/* The buffer grows as the ids arrive, never ahead of them by more than a doubling: a
	 * length field is only a claim (a corrupt 0xFFFFFFFF must not cost 16 GB before the
	 * stream is found to end), and a pipe has no size to check it against. */
	for (size_t got = 0; got < *n;) {
		size_t want = *n - got, room;
		if (got == r->cap) {
			size_t cap = r->cap ? 2 * r->cap : 65536;
			uint32_t *ids = realloc(r->ids, cap * 4);
			if (!ids) {
				char what[64];
				snprintf(what, sizeof what, "a %u-token document", *n);
				return xalloc_err_in(err, errlen, r->name, what, cap * 4);
			}
			r->ids = ids;
			r->cap = cap;
		}
		room = r->cap - got;
		if (want > room)
			want = room;
		if (get(r, r->ids + got, want * 4, "a document", err, errlen) < 0)
			return -1;
		got += want;
	}
	for (uint32_t i = 0; i < *n; i++) {
		uint32_t v = le32((unsigned char *)&r->ids[i]);
		if (v >= r->h.vocab_size)
			return errf(err, errlen, "%s: id %u at byte %llu is outside the vocabulary (size %u)",
				    r->name, v, (unsigned long long)(at + 8 + 4ull * i), r->h.vocab_size);
		r->ids[i] = v;
	}
	return 1;
}

void tokstream_close(struct tokstream_reader *r)
{
	for (uint32_t i = 0; i < r->h.nkeys && i < TOKSTREAM_MAX_KEYS; i++)
		free(r->h.keys[i]);
	free(r->ids);
	memset(r, 0, sizeof *r);
}
