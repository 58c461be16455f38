/* build - the token stream on stdin becomes one Megatron dataset per key.
 *
 * Megatron's preprocessor names its outputs {prefix}_{key}_{level}.{bin,idx}, whatever the number
 * of keys, and scripts and configs rely on those names; so do we.  Level "document": each
 * non-empty document is one sequence; empty ones are skipped, as the BigScience preprocessor
 * does.  Level "sentence" (a stream from tokenize --split-sentences): each sentence is one
 * sequence and each document's end a doc_idx entry, as Megatron's add_item()/end_document();
 * a document without sentences is skipped, as Megatron's preprocessor (2021-22) does.  Tokens go straight to the hidden .bin files; only 4 bytes per document stay
 * in memory.  Nothing becomes visible unless the whole stream, end marker included, was read and
 * every file fsynced; any failure discards all outputs. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "idxwrite.h"
#include "msg.h"
#include "progress.h"
#include "tokstream.h"

struct build {
	struct tokstream_reader r;
	struct idx_writer w[TOKSTREAM_MAX_KEYS];
	uint64_t skipped[TOKSTREAM_MAX_KEYS];
	uint64_t pending[TOKSTREAM_MAX_KEYS];   /* sentences of key's document not yet ended */
	uint32_t nkeys;
	struct progress pg;                     /* bytes of the stream read */
};

static void bail(struct build *b, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));

static void bail(struct build *b, int code, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	for (uint32_t k = 0; k < b->nkeys; k++)
		idx_writer_close(&b->w[k]);
	progress_end(&b->pg);
	die(code, "%s; nothing written", msg);
}

int cmd_build(const char *prefix, int dtype, uint64_t vocab)
{
	static struct build b;
	static char inbuf[4 << 20];
	char err[2048], path[8192];
	uint32_t key, n;
	uint64_t docs = 0, total = 0;
	struct stat st;
	int rc, sentences;

	if (isatty(0))
		die(EXIT_USAGE, "standard input is a terminal; pipe a token stream in "
		    "(tokenize ... | mkindex --output-prefix %s)", prefix);
	if (fstat(0, &st) == 0 && S_ISREG(st.st_mode))
		total = (uint64_t)st.st_size;
	setvbuf(stdin, inbuf, _IOFBF, sizeof inbuf);
	progress_begin(&b.pg, "reading", NULL, total);   /* total 0: a pipe, no ETA */
	if (tokstream_open(&b.r, stdin, "<stdin>", err, sizeof err) < 0)
		die(ferror(stdin) ? EXIT_FAILED : EXIT_USAGE, "%s", err);
	sentences = b.r.h.level == TOKSTREAM_SENTENCES;
	if (!vocab)
		vocab = b.r.h.vocab_size;
	if (!dtype)
		dtype = idx_dtype_for_vocab(vocab);
	else if (vocab && (uint64_t)idx_dtype_max(dtype) < vocab - 1)
		warn("--dtype %s holds ids up to %lld but the vocabulary has %llu: a larger id will be "
		     "an error", idx_dtype_name(dtype), (long long)idx_dtype_max(dtype),
		     (unsigned long long)vocab);

	for (uint32_t k = 0; k < b.r.h.nkeys; k++) {
		const char *name = b.r.h.keys[k];
		if (!*name || strchr(name, '/'))
			bail(&b, EXIT_USAGE, "<stdin>: key %u is named '%s', which cannot be part of a file name",
			     k, name);
		for (uint32_t j = 0; j < k; j++)
			if (strcmp(b.r.h.keys[j], name) == 0)
				bail(&b, EXIT_USAGE, "<stdin>: key '%s' appears twice in the header", name);
		snprintf(path, sizeof path, "%s_%s_%s", prefix, name, sentences ? "sentence" : "document");
		/* one key gets a large buffer; many share about the same memory */
		size_t buf = b.r.h.nkeys == 1 ? 8u << 20 : b.r.h.nkeys <= 8 ? 2u << 20 : 1u << 20;
		if (idx_writer_open(&b.w[k], path, dtype, buf, err, sizeof err) < 0)
			bail(&b, EXIT_FAILED, "%s", err);
		b.nkeys = k + 1;
	}

	while ((rc = tokstream_next(&b.r, &key, &n, err, sizeof err)) > 0) {
		if (rc == 2) {   /* the end of a document of sentences */
			if (!b.pending[key]) {
				b.skipped[key]++;
				continue;
			}
			if (idx_writer_end_doc(&b.w[key], err, sizeof err) < 0)
				bail(&b, EXIT_FAILED, "%s", err);
			b.pending[key] = 0;
			docs++;
			continue;
		}
		if (n == 0) {
			if (!sentences)
				b.skipped[key]++;
			continue;
		}
		if (vocab < b.r.h.vocab_size) {  /* a tighter --vocab-size than the stream's */
			for (uint32_t i = 0; i < n; i++)
				if (b.r.ids[i] >= vocab)
					bail(&b, EXIT_USAGE, "<stdin>: id %u (key '%s', %s %llu, token %u) "
					     ">= --vocab-size %llu", b.r.ids[i], b.r.h.keys[key],
					     sentences ? "sentence" : "document", (unsigned long long)b.w[key].n, i,
					     (unsigned long long)vocab);
		}
		int wr = idx_writer_add(&b.w[key], b.r.ids, n, err, sizeof err);
		if (wr == -2)
			bail(&b, EXIT_USAGE, "<stdin>: %s", err);
		if (wr < 0)
			bail(&b, EXIT_FAILED, "%s", err);
		if (sentences)
			b.pending[key]++;
		else
			docs++;
		if (progress_due(&b.pg)) {   /* a vDSO clock read: cheap next to a document */
			progress_extra(&b.pg, "%llu documents", (unsigned long long)docs);
			progress_update(&b.pg, b.r.offset);
		}
	}
	if (rc < 0)
		bail(&b, ferror(stdin) ? EXIT_FAILED : EXIT_USAGE, "%s", err);
	for (uint32_t k = 0; k < b.nkeys; k++)
		if (b.pending[k])
			bail(&b, EXIT_USAGE, "<stdin>: the stream ends inside a document of key '%s' (%llu sentences "
			     "without an end-of-document record): corrupt stream", b.r.h.keys[k],
			     (unsigned long long)b.pending[k]);
	/* a second stream glued on (cat a b | mkindex) would otherwise be silently dropped */
	if (getc(stdin) != EOF)
		bail(&b, EXIT_USAGE, "<stdin>: data after the end marker at byte %llu; one stream per run "
		     "(merge the outputs with 'mkindex merge')", (unsigned long long)b.r.offset);
	if (ferror(stdin))
		bail(&b, EXIT_FAILED, "<stdin>: read error: %s", strerror(errno));

	for (uint32_t k = 0; k < b.nkeys; k++)
		if (idx_writer_finish(&b.w[k], err, sizeof err) < 0)
			bail(&b, EXIT_FAILED, "%s", err);
	for (uint32_t k = 0; k < b.nkeys; k++)
		if (idx_writer_publish(&b.w[k], err, sizeof err) < 0)
			bail(&b, EXIT_FAILED, "%s", err);

	progress_extra(&b.pg, "%llu documents", (unsigned long long)docs);   /* the final line's */
	b.pg.done = b.r.offset;
	double dt = progress_end(&b.pg);
	for (uint32_t k = 0; k < b.nkeys; k++) {
		struct idx_writer *w = &b.w[k];
		char skipped[64] = "";
		if (b.skipped[k])
			snprintf(skipped, sizeof skipped, " (%llu empty skipped)",
				 (unsigned long long)b.skipped[k]);
		char sents[48] = "";
		if (sentences)
			snprintf(sents, sizeof sents, ", %llu sentences", (unsigned long long)w->n);
		fprintf(stderr, "%s: %s.{bin,idx}: %llu documents%s%s, %llu tokens, %s; %llu + %llu bytes\n",
			prog_name, w->prefix, (unsigned long long)(sentences ? w->ndoc : w->n), skipped, sents,
			(unsigned long long)w->tokens, idx_dtype_name(w->dtype),
			(unsigned long long)w->bin.size, (unsigned long long)w->idx.size);
	}
	fprintf(stderr, "%s: %.1f MiB of token stream in %.2f s (%.0f MiB/s)\n", prog_name,
		(double)b.r.offset / 1048576, dt, dt > 0 ? (double)b.r.offset / 1048576 / dt : 0);
	for (uint32_t k = 0; k < b.nkeys; k++)
		idx_writer_close(&b.w[k]);
	tokstream_close(&b.r);
	return EXIT_OK;
}
