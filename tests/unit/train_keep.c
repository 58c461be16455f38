/* train_keep.c - the --save-keep policy (which steps stay) and the pruner against the readers'
 * lock: a held step is kept, a step renamed away under a waiting reader is seen as gone, an
 * interrupted removal is finished by the next prune. */
#include "t.h"
#include "train/run/keep.h"
#include "ckpt/steplock.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "fsx.h"

/* the steps kept, as "3 6 9 10" in the order given */
static const char *kept(const struct keep *k, const int64_t *s, int n, int64_t latest)
{
	static char buf[512];
	char keep[64];
	keep_select(k, s, n, latest, keep);
	buf[0] = 0;
	for (int i = 0; i < n; i++)
		if (keep[i])
			snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%lld", *buf ? " " : "",
				 (long long)s[i]);
	return buf;
}

static char root[256];

static void mkstep(long long s)
{
	char p[512];
	snprintf(p, sizeof p, "%s/global_step%lld", root, s);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/global_step%lld/manifest.json", root, s);
	FILE *f = fopen(p, "w");
	if (f) {
		fputs("{}\n", f);
		fclose(f);
	}
}

/* the entries of root, sorted, as one string */
static const char *listing(void)
{
	static char buf[1024];
	struct dirent **e;
	int n = scandir(root, &e, NULL, alphasort);
	buf[0] = 0;
	for (int i = 0; i < n; i++) {
		if (strcmp(e[i]->d_name, ".") && strcmp(e[i]->d_name, ".."))
			snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", *buf ? " " : "",
				 e[i]->d_name);
		free(e[i]);
	}
	free(e);
	return buf;
}

static int exists(const char *name)
{
	char p[512];
	struct stat sb;
	snprintf(p, sizeof p, "%s/%s", root, name);
	return stat(p, &sb) == 0;
}

static char reader_path[512];
static int reader_got = 12345;
static void *reader(void *arg)
{
	char err[256];
	(void)arg;
	reader_got = steplock_shared(reader_path, err, sizeof err);
	steplock_release(reader_got);
	return NULL;
}

int main(void)
{
	T_CASE("keep_newest_n_and_multiples_of_m") {
		struct keep k = {2, 3};
		int64_t s[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
		T_STREQ(kept(&k, s, 10, 10), "3 6 9 10");
		T_STREQ(kept(&k, s, 9, 9), "3 6 8 9");
		T_STREQ(kept(&k, s, 2, 2), "1 2");
	}
	T_CASE("keep_order_of_the_listing_does_not_matter") {
		struct keep k = {2, 0};
		int64_t s[] = {40, 10, 30, 20};
		T_STREQ(kept(&k, s, 4, 40), "40 30");
	}
	T_CASE("keep_latest_always_even_when_older_than_the_newest_n") {
		/* latest names 20 (a later save of 30 and 40 failed to publish `latest`?  no: steps
		 * above latest come from a run that went further, then resumed from 20) */
		struct keep k = {1, 0};
		int64_t s[] = {10, 20, 30, 40};
		T_STREQ(kept(&k, s, 4, 20), "20 30 40");
	}
	T_CASE("keep_without_save_keep_keeps_everything") {
		struct keep k = {0, 0};
		int64_t s[] = {1, 2, 3};
		T_STREQ(kept(&k, s, 3, 3), "1 2 3");
	}
	T_CASE("keep_every_is_counted_apart_from_the_newest") {
		struct keep k = {1, 10000};
		int64_t s[] = {9900, 10000, 10100, 19900, 20000, 20100};
		T_STREQ(kept(&k, s, 6, 20100), "10000 20000 20100");
	}

	snprintf(root, sizeof root, "%s/keep.XXXXXX", getenv("LMTK_TMP") ? getenv("LMTK_TMP") : "/tmp");
	if (!mkdtemp(root)) {
		printf("FAIL keep_prune: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	T_CASE("prune_removes_what_the_policy_drops") {
		for (int s = 1; s <= 7; s++)
			mkstep(s);
		struct keep k = {2, 3};
		struct keep_report r;
		keep_prune(root, &k, 7, &r);
		T_STREQ(listing(), "global_step3 global_step6 global_step7");
		T_ASSERT(r.removed == 4 && r.held == 0 && !r.nolock && !*r.err);
		T_STREQ(r.removed_names, "global_step1 global_step2 global_step4 global_step5");
	}
	T_CASE("prune_keeps_a_step_a_reader_holds") {
		mkstep(8);
		mkstep(9);
		char p[512], err[256];
		snprintf(p, sizeof p, "%s/global_step7", root);
		int fd = steplock_shared(p, err, sizeof err);
		T_ASSERT(fd >= 0);
		struct keep k = {1, 0};
		struct keep_report r;
		keep_prune(root, &k, 9, &r);
		/* 3 and 6 go (no multiple kept now), 7 is held, 8 goes */
		T_STREQ(listing(), "global_step7 global_step9");
		T_ASSERT(r.held == 1 && r.removed == 3);
		T_STREQ(r.held_names, "global_step7");
		steplock_release(fd);
		keep_prune(root, &k, 9, &r);
		T_STREQ(listing(), "global_step9");
		T_ASSERT(r.removed == 1 && r.held == 0);
	}
	T_CASE("prune_finishes_an_interrupted_removal") {
		char p[512];
		mkstep(10);
		snprintf(p, sizeof p, "%s/global_step9", root);
		char h[512];
		snprintf(h, sizeof h, "%s/.global_step9.deleting", root);
		T_ASSERT(rename(p, h) == 0);   /* as a kill after the rename leaves it */
		struct keep k = {1, 0};
		struct keep_report r;
		keep_prune(root, &k, 10, &r);
		T_STREQ(listing(), "global_step10");
	}
	T_CASE("steplock_reader_sees_a_step_renamed_under_it_as_gone") {
		char p[512], err[256];
		snprintf(p, sizeof p, "%s/global_step10", root);
		int ex = steplock_exclusive(p, err, sizeof err);
		T_ASSERT(ex >= 0);
		/* a second exclusive (another pruner) and a reader (non-blocking here: it would wait)
		 * cannot have it while the pruner does */
		T_ASSERT(steplock_exclusive(p, err, sizeof err) == STEPLOCK_BUSY);
		/* a reader that opened the lock file before the rename waits for the lock, gets it
		 * after the pruner lets go, and must then see that the step is no longer there */
		pthread_t th;
		snprintf(reader_path, sizeof reader_path, "%s", p);
		pthread_create(&th, NULL, reader, NULL);
		usleep(200000);
		char h[512];
		snprintf(h, sizeof h, "%s/.global_step10.deleting", root);
		T_ASSERT(rename(p, h) == 0);
		steplock_release(ex);
		pthread_join(th, NULL);
		T_ASSERT(reader_got == STEPLOCK_GONE);
		T_ASSERT(steplock_shared(p, err, sizeof err) == STEPLOCK_GONE);
		T_ASSERT(!exists("global_step10"));
		fsx_rm_tree(h);
	}
	T_CASE("steplock_created_in_a_step_without_one") {
		char p[512], err[256];
		mkstep(11);
		snprintf(p, sizeof p, "%s/global_step11", root);
		T_ASSERT(!exists("global_step11/.lock"));
		int fd = steplock_shared(p, err, sizeof err);
		T_ASSERT(fd >= 0 && exists("global_step11/.lock"));
		T_ASSERT(steplock_exclusive(p, err, sizeof err) == STEPLOCK_BUSY);
		int fd2 = steplock_shared(p, err, sizeof err);   /* readers share it */
		T_ASSERT(fd2 >= 0);
		steplock_release(fd);
		steplock_release(fd2);
		int ex = steplock_exclusive(p, err, sizeof err);
		T_ASSERT(ex >= 0);
		steplock_release(ex);
	}
	fsx_rm_tree(root);
	T_DONE();
}
