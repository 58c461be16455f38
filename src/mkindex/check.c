/* check - every invariant of a dataset, every problem reported.
 *
 * The walk itself is idx_verify() (idx.c), the same one that guards info, dump and merge; here
 * it runs to the end and each problem becomes a line on stdout naming the file, the field, the
 * index, and what was expected.  A broken array can produce a problem per entry, so each kind
 * is printed at most MAX_SHOWN times and then counted.  With --vocab-size the .bin is read
 * through and every id checked; that is the only part that reads the .bin, the rest needs only
 * its size; being the longest part, it shows a progress line (lib/progress.h) on stderr.  With
 * --json the same problems, notes, counts and verdict are one object (mkindex(1), JSON OUTPUT),
 * capped the same way, with each problem's kind and, for an id, its sequence, token, byte and
 * value as numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "idx.h"
#include "jsonout.h"
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
	json_t *problems, *notes;   /* --json: what the text would print; NULL without */
};

/* one problem or note of the JSON report: {file, kind, message} */
static json_t *jproblem(const char *file, const char *kind, const char *msg)
{
	json_t *o = json_object();
	json_object_set_new(o, "file", jsonout_str(file));
	json_object_set_new(o, "kind", jsonout_str(kind));
	json_object_set_new(o, "message", jsonout_str(msg));
	return o;
}

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
		if (r->notes)
			json_array_append_new(r->notes, jproblem(file, what, msg));
		else
			printf("%s: note: %s\n", file, msg);
		return 0;
	}
	if (++kind_of(r, what)->count > MAX_SHOWN)
		return 0;
	if (r->problems)
		json_array_append_new(r->problems, jproblem(file, what, msg));
	else
		printf("%s: %s\n", file, msg);
	return 0;
}

/* --- ids against the vocabulary ----------------------------------------------------------------- */

struct idscan {
	const struct idx *x;
	int64_t vocab;
	uint64_t bad;
	uint64_t seq, seq_start, seq_end;  /* the sequence of the last offender, its token range */
	json_t *problems;                  /* --json */
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
		char msg[256];
		snprintf(msg, sizeof msg, "sequence %llu, token %llu (byte %llu): id %lld %s",
			 (unsigned long long)s->seq, (unsigned long long)(t - s->seq_start),
			 (unsigned long long)(t * x->itemsize), (long long)v, why);
		if (!s->problems) {
			printf("%s: %s\n", x->bin_path, msg);
			continue;
		}
		json_t *o = jproblem(x->bin_path, "ids", msg);
		json_object_set_new(o, "sequence", json_integer((json_int_t)s->seq));
		json_object_set_new(o, "token", json_integer((json_int_t)(t - s->seq_start)));
		json_object_set_new(o, "byte", json_integer((json_int_t)(t * x->itemsize)));
		json_object_set_new(o, "id", json_integer(v));
		json_array_append_new(s->problems, o);
	}
	return 0;
}

/* The JSON report's object (mkindex(1), JSON OUTPUT).  structure_ok: the .idx has no problem,
 * so its counts can be believed. */
static json_t *check_json(const struct idx *x, const struct report *rep, const struct idx_layout *lay,
			  int structure_ok, uint64_t vocab, int ids_checked, uint64_t bad_ids,
			  uint64_t problems, const char *error)
{
	json_t *o = json_object(), *counts = json_object();
	json_object_set_new(o, "prefix", jsonout_str(x->prefix));
	json_object_set_new(o, "idx_path", jsonout_str(x->idx_path));
	json_object_set_new(o, "bin_path", jsonout_str(x->bin_path));
	json_object_set_new(o, "ok", json_boolean(!problems && !error));
	json_object_set_new(o, "problem_count", json_integer((json_int_t)problems));
	for (int i = 0; i < rep->nkinds; i++)
		json_object_set_new(counts, rep->kinds[i].what, json_integer((json_int_t)rep->kinds[i].count));
	if (bad_ids)
		json_object_set_new(counts, "ids", json_integer((json_int_t)bad_ids));
	json_object_set_new(o, "problem_counts", counts);
	json_object_set_new(o, "shown_per_kind", json_integer(MAX_SHOWN));
	json_object_set_new(o, "problems", json_incref(rep->problems));
	json_object_set_new(o, "notes", json_incref(rep->notes));
#define COUNT(v) (structure_ok ? json_integer((json_int_t)(v)) : json_null())
	json_object_set_new(o, "sequences", COUNT(lay->n));
	json_object_set_new(o, "documents", COUNT(lay->d - 1));
	json_object_set_new(o, "tokens", COUNT(lay->tokens));
	json_object_set_new(o, "dtype", structure_ok ? json_string(idx_dtype_name(lay->dtype)) : json_null());
	json_object_set_new(o, "dtype_code", COUNT(lay->dtype));
#undef COUNT
	json_object_set_new(o, "vocab_size", vocab ? json_integer((json_int_t)vocab) : json_null());
	json_object_set_new(o, "ids_checked", json_boolean(ids_checked));
	json_object_set_new(o, "error", jsonout_str(error));
	return o;
}

int cmd_check(const char *prefix, uint64_t vocab, int json)
{
	static struct idx x;
	struct report rep = {.x = &x};
	struct idx_layout lay;
	char err[2048], bin_err[2048] = "";
	uint64_t problems, bad_ids = 0;
	int ids_checked = 0, structure_ok;

	int rc = idx_map(&x, prefix, bin_err, sizeof bin_err, err, sizeof err);
	if (rc < 0) {
		warn("%s", err);
		idx_close(&x);
		return rc == IDX_EBAD ? EXIT_USAGE : EXIT_FAILED;
	}
	if (json) {
		rep.problems = json_array();
		rep.notes = json_array();
	}
	problems = idx_verify(x.map, x.len, x.bin_fd >= 0 ? (int64_t)x.bin_len : -1, &lay,
			      print_problem, &rep);
	structure_ok = problems == 0;
	for (int i = 0; i < rep.nkinds && !json; i++)
		if (rep.kinds[i].count > MAX_SHOWN)
			printf("%s: ... and %llu more %s problems\n",
			       strcmp(rep.kinds[i].what, "bin") == 0 ? x.bin_path : x.idx_path,
			       (unsigned long long)(rep.kinds[i].count - MAX_SHOWN), rep.kinds[i].what);

	if (vocab && x.bin_fd >= 0) {
		if (problems || !idx_dtype_is_int(lay.dtype)) {
			char msg[256];
			snprintf(msg, sizeof msg, "ids not checked against --vocab-size %llu: %s",
				 (unsigned long long)vocab, problems ? "fix the problems above first" :
				 "the dtype is not an integer type");
			if (json)
				json_array_append_new(rep.notes, jproblem(x.bin_path, "ids", msg));
			else
				printf("%s: note: %s\n", x.bin_path, msg);
		} else {
			x.dtype = lay.dtype;
			x.itemsize = lay.itemsize;
			x.n = lay.n;
			x.tokens = lay.tokens;
			x.sizes = x.map + IDX_HEADER;
			struct idscan s = {&x, vocab > INT64_MAX ? INT64_MAX : (int64_t)vocab, 0, 0, 0,
					   x.n ? idx_size(&x, 0) : 0, rep.problems, {0}};
			progress_begin(&s.pg, "checking ids", NULL, x.tokens * x.itemsize);
			int sr = idx_scan(&x, 0, x.tokens, check_ids, &s, err, sizeof err);
			fflush(stdout);   /* the problems found, before the progress line's end */
			progress_end(&s.pg);
			if (sr != 0) {
				warn("%s", err);
				json_decref(rep.problems);
				json_decref(rep.notes);
				idx_close(&x);
				return EXIT_FAILED;
			}
			if (s.bad > MAX_SHOWN && !json)
				printf("%s: ... and %llu more ids outside 0..%llu\n", x.bin_path,
				       (unsigned long long)(s.bad - MAX_SHOWN), (unsigned long long)(vocab - 1));
			problems += s.bad;
			bad_ids = s.bad;
			ids_checked = 1;
		}
	}

	if (json) {
		rc = jsonout_end(check_json(&x, &rep, &lay, structure_ok, vocab, ids_checked, bad_ids,
					    problems, x.bin_fd < 0 ? bin_err : NULL));
		json_decref(rep.problems);
		json_decref(rep.notes);
		int no_bin = x.bin_fd < 0;
		if (no_bin)
			warn("%s", bin_err);
		idx_close(&x);
		return rc < 0 || no_bin ? EXIT_FAILED : problems ? EXIT_FINDING : EXIT_OK;
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
