/* hub-sync_segment.c - a growing log as segments in a real repository's index: the pieces
 * rebuild the file, complete pieces end at a newline and never change as the log grows, only
 * the tail is rewritten, a truncated log is left alone, a replaced one is recomputed. */
#include "t.h"
#include "hub-sync/segment.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[256], logpath[512];
static git_repository *repo;
static git_index *idx;

static void append(const char *fmt, int from, int to)
{
	FILE *f = fopen(logpath, "a");
	for (int i = from; i < to; i++)
		fprintf(f, fmt, i, i * 7);
	fclose(f);
}

/* the segments' bytes, concatenated, compared with the file */
static int rebuilds(unsigned nseg)
{
	FILE *f = fopen(logpath, "rb");
	char name[600];
	int same = f != NULL;
	for (unsigned k = 0; same && k < nseg; k++) {
		const git_index_entry *e;
		git_blob *b = NULL;
		segment_name("logs/main_log.txt", k, name, sizeof name);
		e = git_index_get_bypath(idx, name, 0);
		if (!e || !(e->flags_extended & GIT_INDEX_ENTRY_SKIP_WORKTREE) ||
		    git_blob_lookup(&b, repo, &e->id) < 0) {
			same = 0;
			break;
		}
		size_t n = (size_t)git_blob_rawsize(b);
		char *buf = malloc(n + 1);
		same = fread(buf, 1, n, f) == n && memcmp(buf, git_blob_rawcontent(b), n) == 0;
		free(buf);
		git_blob_free(b);
	}
	if (f) {
		same = same && fgetc(f) == EOF;
		fclose(f);
	}
	return same;
}

/* 1 if segment k's blob is id */
static int seg_is(unsigned k, const git_oid *id)
{
	char name[600];
	segment_name("logs/main_log.txt", k, name, sizeof name);
	const git_index_entry *e = git_index_get_bypath(idx, name, 0);
	return e && git_oid_equal(&e->id, id);
}

static git_oid seg_id(unsigned k)
{
	char name[600];
	git_oid z = {{0}};
	segment_name("logs/main_log.txt", k, name, sizeof name);
	const git_index_entry *e = git_index_get_bypath(idx, name, 0);
	return e ? e->id : z;
}

int main(void)
{
	struct segment_opts o = {1024, 0, 0};
	struct segment_result r;
	char err[512];

	git_libgit2_init();
	snprintf(top, sizeof top, "/tmp/hub-sync-seg-XXXXXX");
	if (!mkdtemp(top) || git_repository_init(&repo, top, 0) < 0 || git_repository_index(&idx, repo) < 0) {
		printf("FAIL setup: cannot make a repository in %s\n", top);
		return 1;
	}
	snprintf(logpath, sizeof logpath, "%s/logs", top);
	mkdir(logpath, 0755);
	snprintf(logpath, sizeof logpath, "%s/logs/main_log.txt", top);
	append("iteration %6d | lm loss %d\n", 0, 300);

	T_CASE("segments_rebuild_the_log_and_end_at_newlines") {
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		T_ASSERT(r.segments >= 8 && r.changed == r.segments && !r.was_tracked);
		T_ASSERT(rebuilds(r.segments));
		for (unsigned k = 0; k + 1 < r.segments; k++) {
			char name[600];
			git_blob *b = NULL;
			segment_name("logs/main_log.txt", k, name, sizeof name);
			git_blob_lookup(&b, repo, &git_index_get_bypath(idx, name, 0)->id);
			T_ASSERT(b && git_blob_rawsize(b) <= 1024 && git_blob_rawsize(b) > 1000);
			T_ASSERT(b && ((const char *)git_blob_rawcontent(b))[git_blob_rawsize(b) - 1] == '\n');
			git_blob_free(b);
		}
		T_ASSERT(segment_tracked(idx, "logs/main_log.txt"));
	}

	T_CASE("growth_rewrites_only_the_tail") {
		unsigned before = r.segments;
		git_oid first = seg_id(0), second_last = seg_id(before - 2);
		append("iteration %6d | lm loss %d\n", 300, 340);
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		T_ASSERT(r.was_tracked && r.segments >= before);
		T_ASSERT(r.changed == r.segments - before + 1);  /* the old tail, and what is new */
		T_ASSERT(seg_is(0, &first) && seg_is(before - 2, &second_last));
		T_ASSERT(rebuilds(r.segments));
		/* nothing appended: nothing written */
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		T_ASSERT(r.changed == 0);
	}

	T_CASE("a_line_longer_than_a_segment_is_cut") {
		FILE *f = fopen(logpath, "a");
		for (int i = 0; i < 3000; i++)
			fputc('x', f);
		fputs("\nend\n", f);
		fclose(f);
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		T_ASSERT(rebuilds(r.segments));
	}

	T_CASE("a_truncated_log_is_left_alone_unless_allowed") {
		unsigned before = r.segments;
		git_oid last = seg_id(before - 1);
		T_ASSERT(truncate(logpath, 100) == 0);
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		T_ASSERT(r.shrunk && r.changed == 0 && seg_is(before - 1, &last));
		o.allow_shrink = 1;
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		T_ASSERT(!r.shrunk && r.segments == 1 && r.removed == before - 1);
		T_ASSERT(rebuilds(1));
		o.allow_shrink = 0;
	}

	T_CASE("a_replaced_log_is_recomputed") {
		unlink(logpath);
		append("iteration %6d | lm loss %d\n", 0, 300);
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		unlink(logpath);
		append("ITERATION %6d | LM LOSS %d\n", 0, 330);  /* longer, different from byte 0 */
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		T_ASSERT(r.changed == r.segments);
		T_ASSERT(rebuilds(r.segments));
	}

	T_CASE("dry_run_writes_nothing") {
		git_oid tail = seg_id(r.segments - 1);
		unsigned n = r.segments;
		append("iteration %6d | lm loss %d\n", 400, 500);
		o.dry_run = 1;
		T_ASSERT(segment_sync(repo, idx, "logs/main_log.txt", &o, &r, err, sizeof err) == 0);
		T_ASSERT(r.changed > 0 && seg_is(n - 1, &tail));
		char name[600];
		segment_name("logs/main_log.txt", n, name, sizeof name);
		T_ASSERT(git_index_get_bypath(idx, name, 0) == NULL);
	}

	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	git_index_free(idx);
	git_repository_free(repo);
	git_libgit2_shutdown();
	T_DONE();
}
