/* check - every invariant of a dataset, every problem reported.
 *
 * The walk itself is idx_verify() (idx.c), the same one that guards info, dump and merge; here
 * it runs to the end and each problem becomes a line on stdout naming the file, the field, the
 * index, and what was expected.  A broken array can produce a problem per entry, so each kind
 * is printed at most MAX_SHOWN times and then counted.  With --vocab-size the .bin is read
 * through and every id checked; that is the only part that reads the .bin, the rest needs only
 * its size; being the longest part, it shows a progress line (lib/progress.h) on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "idx.h"
#include "msg.h"
#include "progress.h"

#define MAX_SHOWN 10

struct kind {
	const char *what;
	uint64_t count;
};

struct report {
	const struct idx *x;
	struct kind kinds[16];
	int nkinds;
};

static struct kind *kind_of(struct report *r, const char *what)
{
	for (int i = 0; i < r->nkinds; i++)
		if (strcmp(r->kinds[i].what, what) == 0)
			return &r->kinds[i];
	if (r->nkinds == 16)
		return &r->kinds[15];
	r->kinds[r->nkinds].what = what;
	return &r->kinds[r->nkinds++];
}

static int print_problem(void *ctx, enum idx_note note, const char *what, const char *msg)
{
	struct report *r = ctx;
	const char *file = strcmp(what, "bin") == 0 ? r->x->bin_path : r->x->idx_path;
	if (note == IDX_NOTE) {
		printf("%s: note: %s\n", file, msg);
		return 0;
	}
	if (++kind_of(r, what)->count <= MAX_SHOWN)
		printf("%s: %s\n", file, msg);
	return 0;
}

/* --- ids against the vocabulary ----------------------------------------------------------------- */

struct idscan {
	const struct idx *x;
	int64_t vocab;
	uint64_t bad;
	uint64_t seq, seq_start, seq_end;  /* the sequence of the last offender, its token range */
	struct progress pg;                /* bytes of .bin read */
};

static int check_ids(void *ctx, const unsigned char *p, size_t ntok, uint64_t tok0)
{
	struct idscan *s = ctx;
	const struct idx *x = s->x;
	int64_t lo = INT64_MAX, hi = INT64_MIN;

	progress_update(&s->pg, (tok0 + ntok) * x->itemsize);   /* 4 MiB chunks: cheap */
	for (size_t i = 0; i < ntok; i++) {  /* fast path: the chunk's range */
		int64_t v = idx_token(x->dtype, p + i * x->itemsize);
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	if (lo >= 0 && hi < s->vocab)
		return 0;
	for (size_t i = 0; i < ntok; i++) {
		int64_t v = idx_token(x->dtype, p + i * x->itemsize);
		uint64_t t = tok0 + i;
		if (v >= 0 && v < s->vocab)
			continue;
		while (t >= s->seq_end && s->seq + 1 < x->n) {  /* offenders come in order */
			s->seq++;
			s->seq_start = s->seq_end;
			s->seq_end += idx_size(x, s->seq);
		}
		if (++s->bad > MAX_SHOWN)
			continue;
		char why[64];
		if (v < 0)
			snprintf(why, sizeof why, "is negative");
		else
			snprintf(why, sizeof why, ">= vocab size %lld", (long long)s->vocab);
		printf("%s: sequence %llu, token %llu (byte %llu): id %lld %s\n", x->bin_path,
		       (unsigned long long)s->seq, (unsigned long long)(t - s->seq_start),
		       (unsigned long long)(t * x->itemsize), (long long)v, why);
	}
	return 0;
}

int cmd_check(const char *prefix, uint64_t vocab)
{
	static struct idx x;
	struct report rep = {.x = &x};
	struct idx_layout lay;
	char err[2048], bin_err[2048] = "";
	uint64_t problems;

	int rc = idx_map(&x, prefix, bin_err, sizeof bin_err, err, sizeof err);
	if (rc < 0) {
		warn("%s", err);
		idx_close(&x);
		return rc == IDX_EBAD ? EXIT_USAGE : EXIT_FAILED;
	}
	problems = idx_verify(x.map, x.len, x.bin_fd >= 0 ? (int64_t)x.bin_len : -1, &lay,
			      print_problem, &rep);
	for (int i = 0; i < rep.nkinds; i++)
		if (rep.kinds[i].count > MAX_SHOWN)
			printf("%s: ... and %llu more %s problems\n",
			       strcmp(rep.kinds[i].what, "bin") == 0 ? x.bin_path : x.idx_path,
			       (unsigned long long)(rep.kinds[i].count - MAX_SHOWN), rep.kinds[i].what);

	if (vocab && x.bin_fd >= 0) {
		if (problems || !idx_dtype_is_int(lay.dtype)) {
			printf("%s: note: ids not checked against --vocab-size %llu: %s\n", x.bin_path,
			       (unsigned long long)vocab, problems ? "fix the problems above first" :
			       "the dtype is not an integer type");
		} else {
			x.dtype = lay.dtype;
			x.itemsize = lay.itemsize;
			x.n = lay.n;
			x.tokens = lay.tokens;
			x.sizes = x.map + IDX_HEADER;
			struct idscan s = {&x, vocab > INT64_MAX ? INT64_MAX : (int64_t)vocab, 0, 0, 0,
					   x.n ? idx_size(&x, 0) : 0, {0}};
			progress_begin(&s.pg, "checking ids", NULL, x.tokens * x.itemsize);
			int sr = idx_scan(&x, 0, x.tokens, check_ids, &s, err, sizeof err);
			fflush(stdout);   /* the problems found, before the progress line's end */
			progress_end(&s.pg);
			if (sr != 0) {
				warn("%s", err);
				idx_close(&x);
				return EXIT_FAILED;
			}
			if (s.bad > MAX_SHOWN)
				printf("%s: ... and %llu more ids outside 0..%llu\n", x.bin_path,
				       (unsigned long long)(s.bad - MAX_SHOWN), (unsigned long long)(vocab - 1));
			problems += s.bad;
		}
	}

	if (x.bin_fd < 0) {
		if (problems)
			printf("%s: %llu problems in the .idx\n", x.prefix, (unsigned long long)problems);
		warn("%s", bin_err);
		idx_close(&x);
		return EXIT_FAILED;
	}
	if (problems)
		printf("%s: %llu problem%s\n", x.prefix, (unsigned long long)problems, problems == 1 ? "" : "s");
	else
		printf("%s: ok: %llu sequences, %llu documents, %llu tokens, dtype %s (%d)%s\n", x.prefix,
		       (unsigned long long)lay.n, (unsigned long long)(lay.d - 1),
		       (unsigned long long)lay.tokens, idx_dtype_name(lay.dtype), lay.dtype,
		       vocab ? ", every id below the vocabulary size" : "");
	idx_close(&x);
	return problems ? EXIT_FINDING : EXIT_OK;
}
