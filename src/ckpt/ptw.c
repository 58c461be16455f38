/* ptw - see ptw.h.  Record layouts: PKWARE's APPNOTE.TXT 4.3.7 (local header),
 * 4.3.12 (central directory), 4.3.14-16 (ZIP64 end records), 4.5.3 (ZIP64 extra). */
#include "ckpt/ptw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "outfile.h"
#include "xalloc.h"

#define U32MAX 0xffffffffull

uint64_t ptw_zip64_at = U32MAX;

struct member {
	char *name;             /* ARCHIVE/name */
	uint64_t off, size;     /* of the local header; of the data */
	uint32_t crc;
	int zip64;
};

struct ptw {
	struct outfile o;
	char *archive;
	struct member *m;
	size_t n, cap;
	int open;               /* a member is being written */
	uint64_t written;
	uint32_t crc;
	char err[640];
};

static void le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void le32(uint8_t *p, uint32_t v)
{
	le16(p, (uint16_t)v);
	le16(p + 2, (uint16_t)(v >> 16));
}

static void le64(uint8_t *p, uint64_t v)
{
	le32(p, (uint32_t)v);
	le32(p + 4, (uint32_t)(v >> 32));
}

static int out(struct ptw *w, const void *p, size_t n)
{
	return outfile_write(&w->o, p, n, w->err, sizeof w->err);
}

const char *ptw_error(const struct ptw *w)
{
	return w->err;
}

struct ptw *ptw_create(const char *path, const char *archive, char *err, size_t errlen)
{
	struct ptw *w = calloc(1, sizeof *w);
	if (!w || !(w->archive = strdup(archive))) {
		free(w);
		xalloc_err_in(err, errlen, path, "the zip writer's state", sizeof *w + strlen(archive) + 1);
		return NULL;
	}
	if (outfile_open(&w->o, path, 1 << 20, err, errlen) < 0) {
		free(w->archive);
		free(w);
		return NULL;
	}
	return w;
}

int ptw_begin(struct ptw *w, const char *name, uint64_t size)
{
	if (w->open)
		return snprintf(w->err, sizeof w->err, "%s: member %s begun inside another", w->o.path,
				name), -1;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 16;
		struct member *m = realloc(w->m, cap * sizeof *m);
		if (!m)
			return xalloc_err_in(w->err, sizeof w->err, w->o.path, "the zip's member list",
					     cap * sizeof *m);
		w->m = m;
		w->cap = cap;
	}
	size_t nl = strlen(w->archive) + 1 + strlen(name);
	char *full = malloc(nl + 1);
	if (!full)
		return xalloc_err_in(w->err, sizeof w->err, w->o.path, "a member's name", nl + 1);
	snprintf(full, nl + 1, "%s/%s", w->archive, name);
	struct member *m = &w->m[w->n++];
	*m = (struct member){full, w->o.size, size, 0, size >= ptw_zip64_at};
	/* local header, ZIP64 extra (sizes) when large, then 'FB' padding to the next multiple
	 * of 64 for the data */
	uint8_t h[30 + 20 + 4];
	size_t hl = 30 + nl + (m->zip64 ? 20 : 0) + 4;
	size_t pad = (64 - (m->off + hl) % 64) % 64;
	memset(h, 0, sizeof h);
	le32(h, 0x04034b50);
	le16(h + 4, m->zip64 ? 45 : 20);   /* version needed */
	/* flags 0, method 0 (stored), time, date 0; the CRC patched in by ptw_end */
	le32(h + 18, m->zip64 ? (uint32_t)U32MAX : (uint32_t)size);
	le32(h + 22, m->zip64 ? (uint32_t)U32MAX : (uint32_t)size);
	le16(h + 26, (uint16_t)nl);
	le16(h + 28, (uint16_t)((m->zip64 ? 20 : 0) + 4 + pad));
	if (out(w, h, 30) < 0 || out(w, full, nl) < 0)
		return -1;
	size_t k = 0;
	if (m->zip64) {
		le16(h, 0x0001);
		le16(h + 2, 16);
		le64(h + 4, size);
		le64(h + 12, size);
		k = 20;
	}
	le16(h + k, 0x4246);   /* 'FB' */
	le16(h + k + 2, (uint16_t)pad);
	if (out(w, h, k + 4) < 0)
		return -1;
	static const uint8_t zero[64];
	if (pad && out(w, zero, pad) < 0)
		return -1;
	w->open = 1;
	w->written = 0;
	w->crc = (uint32_t)crc32(0L, Z_NULL, 0);
	return 0;
}

int ptw_write(struct ptw *w, const void *p, size_t n)
{
	const uint8_t *b = p;
	w->written += n;
	for (size_t k = 0; k < n;) {   /* zlib's length is a uInt */
		size_t c = n - k > (1u << 30) ? (1u << 30) : n - k;
		w->crc = (uint32_t)crc32(w->crc, b + k, (uInt)c);
		k += c;
	}
	return out(w, p, n);
}

int ptw_end(struct ptw *w)
{
	struct member *m = &w->m[w->n - 1];
	if (!w->open || w->written != m->size)
		return snprintf(w->err, sizeof w->err, "%s: %s: %llu bytes written, %llu declared",
				w->o.path, m->name, (unsigned long long)w->written,
				(unsigned long long)m->size), -1;
	w->open = 0;
	m->crc = w->crc;
	uint8_t c[4];
	le32(c, m->crc);
	return outfile_patch(&w->o, m->off + 14, c, 4, w->err, sizeof w->err);
}

int ptw_member(struct ptw *w, const char *name, const void *p, size_t n)
{
	if (ptw_begin(w, name, n) < 0 || ptw_write(w, p, n) < 0)
		return -1;
	return ptw_end(w);
}

static void release(struct ptw *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->m[i].name);
	free(w->m);
	free(w->archive);
	free(w);
}

void ptw_abort(struct ptw *w)
{
	if (!w)
		return;
	outfile_discard(&w->o);
	release(w);
}

int ptw_close(struct ptw *w, char *err, size_t errlen)
{
	int rc = -1;
	if (w->open || ptw_member(w, "version", "3\n", 2) < 0)
		goto fail;
	uint64_t cd = w->o.size;
	int z64 = w->n >= 0xffff || cd >= ptw_zip64_at;
	for (size_t i = 0; i < w->n; i++) {
		struct member *m = &w->m[i];
		int big = m->zip64 || m->off >= ptw_zip64_at;
		uint8_t h[46], x[28];
		size_t nl = strlen(m->name), xl = 0;
		memset(h, 0, sizeof h);
		le32(h, 0x02014b50);
		le16(h + 4, big ? 45 : 20);   /* made by, needed */
		le16(h + 6, big ? 45 : 20);
		le32(h + 16, m->crc);
		if (big) {   /* sizes and offset in the ZIP64 extra */
			le16(x, 0x0001);
			le16(x + 2, 24);
			le64(x + 4, m->size);
			le64(x + 12, m->size);
			le64(x + 20, m->off);
			xl = 28;
			z64 = 1;
		}
		le32(h + 20, big ? (uint32_t)U32MAX : (uint32_t)m->size);
		le32(h + 24, big ? (uint32_t)U32MAX : (uint32_t)m->size);
		le16(h + 28, (uint16_t)nl);
		le16(h + 30, (uint16_t)xl);
		le32(h + 42, big ? (uint32_t)U32MAX : (uint32_t)m->off);
		if (out(w, h, 46) < 0 || out(w, m->name, nl) < 0 || (xl && out(w, x, xl) < 0))
			goto fail;
	}
	uint64_t cdsize = w->o.size - cd, end64 = w->o.size;
	if (z64) {
		uint8_t e[56 + 20];
		memset(e, 0, sizeof e);
		le32(e, 0x06064b50);
		le64(e + 4, 44);
		le16(e + 12, 45);
		le16(e + 14, 45);
		le64(e + 24, w->n);
		le64(e + 32, w->n);
		le64(e + 40, cdsize);
		le64(e + 48, cd);
		le32(e + 56, 0x07064b50);   /* the locator */
		le64(e + 64, end64);
		le32(e + 72, 1);
		if (out(w, e, sizeof e) < 0)
			goto fail;
	}
	uint8_t e[22];
	memset(e, 0, sizeof e);
	le32(e, 0x06054b50);
	le16(e + 8, z64 ? 0xffff : (uint16_t)w->n);
	le16(e + 10, z64 ? 0xffff : (uint16_t)w->n);
	le32(e + 12, z64 ? (uint32_t)U32MAX : (uint32_t)cdsize);
	le32(e + 16, z64 ? (uint32_t)U32MAX : (uint32_t)cd);
	if (out(w, e, 22) < 0 || outfile_sync(&w->o, w->err, sizeof w->err) < 0 ||
	    outfile_publish(&w->o, w->err, sizeof w->err) < 0)
		goto fail;
	rc = 0;
fail:
	if (rc)
		snprintf(err, errlen, "%s", w->err);
	outfile_discard(&w->o);
	release(w);
	return rc;
}
