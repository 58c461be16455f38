/* dump - token ids as text: one document per line, ids separated by single spaces.
 *
 * The same text format as `tokenize --format text`, so a dataset can be rebuilt from its dump or
 * diffed against a fresh tokenization.  A document spanning several sequences is one line; an
 * empty document is an empty line.  With --sequences (a dataset of sentences) each sequence is a
 * line and each document ends with an empty line, as `tokenize --split-sentences --format text`
 * writes them.  The documents asked for are contiguous in the .bin, so it is
 * read once, front to back, with a progress line (lib/progress.h) of its bytes on stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "idx.h"
#include "msg.h"
#include "progress.h"

struct out {
	const struct idx *x;
	char buf[1 << 20];
	size_t len;
	int failed;
	uint64_t doc, seq, end;          /* the current document and sequence, the last document + 1 */
	int first;                       /* no token printed yet on this line */
	int sequences;                   /* a line per sequence, an empty line after a document */
	uint64_t t0;                     /* the first token dumped */
	struct progress pg;              /* bytes of .bin read */
};

static void flush_out(struct out *o)
{
	size_t done = 0;
	while (done < o->len && !o->failed) {
		ssize_t w = write(1, o->buf + done, o->len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			o->failed = errno;
		else
			done += (size_t)w;
	}
	o->len = 0;
}

static void newline(struct out *o)
{
	if (o->len + 1 > sizeof o->buf)
		flush_out(o);
	o->buf[o->len++] = '\n';
	o->first = 1;
}

/* Closes what ends at token t: the current document once its sequences are done (its line, or
 * with --sequences the empty line after them), and each sequence ending there (with --sequences
 * its line).  Empty sequences and documents end where they start, so this loops. */
static void end_docs(struct out *o, uint64_t t)
{
	while (o->doc < o->end) {
		if (o->seq == idx_doc(o->x, o->doc + 1)) {
			newline(o);
			o->doc++;
		} else if (idx_seq_start(o->x, o->seq + 1) == t) {
			if (o->sequences)
				newline(o);
			o->seq++;
		} else {
			break;
		}
	}
}

static int print_ids(void *ctx, const unsigned char *p, size_t ntok, uint64_t tok0)
{
	struct out *o = ctx;
	const struct idx *x = o->x;
	progress_update(&o->pg, (tok0 + ntok - o->t0) * x->itemsize);   /* 4 MiB chunks: cheap */
	for (size_t i = 0; i < ntok; i++) {
		end_docs(o, tok0 + i);
		if (o->len + 24 > sizeof o->buf)
			flush_out(o);
		int64_t v = idx_token(x->dtype, p + i * x->itemsize);
		char tmp[24], *e = tmp + sizeof tmp, *s = e;
		uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
		do
			*--s = (char)('0' + u % 10);
		while (u /= 10);
		if (v < 0)
			*--s = '-';
		if (!o->first)
			o->buf[o->len++] = ' ';
		o->first = 0;
		memcpy(o->buf + o->len, s, (size_t)(e - s));
		o->len += (size_t)(e - s);
	}
	return o->failed ? -1 : 0;
}

int cmd_dump(const char *prefix, int has_range, uint64_t first, uint64_t end, int sequences)
{
	static struct idx x;
	static struct out o;
	char err[2048];
	int rc = idx_open(&x, prefix, err, sizeof err);

	if (rc < 0) {
		warn("%s", err);
		idx_close(&x);
		return rc == IDX_EIO ? EXIT_FAILED : EXIT_USAGE;
	}
	uint64_t ndocs = x.d - 1;
	if (!has_range) {
		first = 0;
		end = ndocs;
	}
	if (end == UINT64_MAX)  /* --range A: */
		end = ndocs;
	if (first > end || end > ndocs) {
		warn("%s: documents %llu..%llu asked for, it has %llu (0..%llu)", x.prefix,
		     (unsigned long long)first, (unsigned long long)end, (unsigned long long)ndocs,
		     (unsigned long long)(ndocs ? ndocs - 1 : 0));
		idx_close(&x);
		return EXIT_USAGE;
	}
	if (first == end) {
		idx_close(&x);
		return EXIT_OK;
	}
	uint64_t t0 = idx_seq_start(&x, idx_doc(&x, first)), t1 = idx_seq_start(&x, idx_doc(&x, end));
	o.x = &x;
	o.doc = first;
	o.seq = idx_doc(&x, first);
	o.end = end;
	o.first = 1;
	o.sequences = sequences;
	o.t0 = t0;
	progress_begin(&o.pg, "dumping", NULL, (t1 - t0) * x.itemsize);
	rc = idx_scan(&x, t0, t1 - t0, print_ids, &o, err, sizeof err);
	if (rc == 0)
		end_docs(&o, t1);
	flush_out(&o);
	progress_end(&o.pg);
	idx_close(&x);
	if (o.failed)
		die(EXIT_FAILED, "standard output: %s", strerror(o.failed));
	if (rc != 0)
		die(EXIT_FAILED, "%s", err);
	return EXIT_OK;
}
