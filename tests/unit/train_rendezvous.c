/* train_rendezvous.c - the file rendezvous NCCL's ranks meet through without MPI: ranks are
 * forked processes in a fresh directory, as srun's tasks on one node would be.  The files live
 * in its private subdirectory (sub); a file or directory another user laid there is refused. */
#include "t.h"
#include "train/parallel/rendezvous.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BYTES 300

static char dir[64], sub[128];

static void payload(unsigned char *b, int seed)
{
	for (int i = 0; i < BYTES; i++)
		b[i] = (unsigned char)(i * 7 + seed);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Forks rank `rank`: exit 0 when it got payload(seed), 1 on other bytes, 2 on an error whose
 * text lacks `want` (NULL: any error is 2), 3 on an error that has it. */
static pid_t rank_proc(const char *key, int rank, int world, double timeout, int seed,
		       const char *want)
{
	pid_t pid = fork();
	if (pid)
		return pid;
	unsigned char buf[BYTES], exp[BYTES];
	char err[1024];
	memset(buf, 0, sizeof buf);
	if (rank == 0)
		payload(buf, seed);
	payload(exp, seed);
	if (rendezvous_bcast(dir, key, rank, world, timeout, buf, BYTES, err, sizeof err) < 0) {
		if (getenv("RDV_VERBOSE"))
			fprintf(stderr, "rank %d: %s\n", rank, err);
		_exit(want && strstr(err, want) ? 3 : 2);
	}
	_exit(memcmp(buf, exp, BYTES) ? 1 : 0);
}

static int status(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int files_left(void)
{
	DIR *d = opendir(sub);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static void put(const char *name, const char *text, size_t len)
{
	char path[256];
	if (mkdir(sub, 0700) < 0 && errno != EEXIST)
		abort();
	snprintf(path, sizeof path, "%s/%s", sub, name);
	FILE *f = fopen(path, "w");
	if (!f || fwrite(text, 1, len, f) != len)
		abort();
	fclose(f);
}

int main(void)
{
	snprintf(dir, sizeof dir, "%s/rdv.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	snprintf(sub, sizeof sub, "%s/" RENDEZVOUS_SUBDIR "%u", dir, (unsigned)geteuid());

	T_CASE("every_rank_gets_rank0s_bytes_and_clean_leaves_nothing") {
		pid_t p[5];
		for (int r = 4; r >= 0; r--)   /* the others first: they wait for rank 0 */
			p[r] = rank_proc("j1.0", r, 5, 20, 11, NULL);
		for (int r = 0; r < 5; r++)
			T_ASSERT(status(p[r]) == 0);
		T_ASSERT(files_left() == 4 + 1 + 1);   /* ack.1-4, id, go */
		rendezvous_clean(dir, "j1.0", 5);
		T_ASSERT(files_left() == 0);
	}

	T_CASE("a_crashed_runs_files_under_the_same_name_are_not_taken_for_this_runs") {
		/* another run's id (same world and size, other bytes), acks and go, as a crash
		 * during the groups' forming leaves them; this run's ranks 1-2 start first and may
		 * read the stale id before rank 0 replaces it */
		char id[512];
		unsigned char old[BYTES];
		payload(old, 99);
		int n = snprintf(id, sizeof id, "lmtk-rendezvous 1 world 3 nonce 00000000000000aa bytes %d\n",
				 BYTES);
		memcpy(id + n, old, BYTES);
		put("j2.0.id", id, (size_t)n + BYTES);
		put("j2.0.ack.1", "nonce 00000000000000aa mine 0000000000000001\n", 45);
		static const char go[] = "nonce 00000000000000aa\n0000000000000000\n0000000000000001\n"
					 "0000000000000002\n";
		put("j2.0.go", go, sizeof go - 1);
		pid_t p1 = rank_proc("j2.0", 1, 3, 20, 22, NULL), p2 = rank_proc("j2.0", 2, 3, 20, 22, NULL);
		usleep(300 * 1000);
		pid_t p0 = rank_proc("j2.0", 0, 3, 20, 22, NULL);
		T_ASSERT(status(p0) == 0);
		T_ASSERT(status(p1) == 0);
		T_ASSERT(status(p2) == 0);
		rendezvous_clean(dir, "j2.0", 3);
		T_ASSERT(files_left() == 0);
	}

	T_CASE("a_rank_that_never_comes_is_named_within_the_bounded_wait") {
		double t0 = now();
		pid_t p0 = rank_proc("j3.0", 0, 4, 0.5, 33, "ranks 2, 3; did they start");
		pid_t p1 = rank_proc("j3.0", 1, 4, 0.5, 33, "rank 0 did not see every rank arrive");
		T_ASSERT(status(p0) == 3);
		T_ASSERT(status(p1) == 3);
		T_ASSERT(now() - t0 < 5);
		rendezvous_clean(dir, "j3.0", 4);
	}

	T_CASE("without_rank_0_the_others_say_so") {
		pid_t p1 = rank_proc("j4.0", 1, 2, 0.3, 44, "no word from rank 0");
		T_ASSERT(status(p1) == 3);
		T_ASSERT(files_left() == 0);
	}

	T_CASE("an_id_for_another_world_size_is_not_joined") {
		char id[512];
		int n = snprintf(id, sizeof id, "lmtk-rendezvous 1 world 4 nonce 00000000000000bb bytes %d\n",
				 BYTES);
		memset(id + n, 0, BYTES);
		put("j5.0.id", id, (size_t)n + BYTES);
		pid_t p1 = rank_proc("j5.0", 1, 2, 0.3, 55, "is for 4 ranks, not 2");
		T_ASSERT(status(p1) == 3);
		rendezvous_clean(dir, "j5.0", 2);
	}

	T_CASE("the_files_live_in_a_private_directory_and_are_0600") {
		struct stat sb, st;
		pid_t p1 = rank_proc("j6.0", 1, 2, 20, 66, NULL), p0 = rank_proc("j6.0", 0, 2, 20, 66, NULL);
		T_ASSERT(status(p0) == 0);
		T_ASSERT(status(p1) == 0);
		T_ASSERT(lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode));
		T_ASSERT((sb.st_mode & 07777) == 0700);
		T_ASSERT(sb.st_uid == geteuid());
		T_ASSERT(stat(strcat(strcpy((char[256]){0}, sub), "/j6.0.id"), &st) == 0);
		T_ASSERT((st.st_mode & 07777) == 0600);
		T_ASSERT(stat(strcat(strcpy((char[256]){0}, sub), "/j6.0.ack.1"), &st) == 0);
		T_ASSERT((st.st_mode & 07777) == 0600);
		rendezvous_clean(dir, "j6.0", 2);
		T_ASSERT(files_left() == 0);
	}

	/* another user's id: a whole, valid one for this world and size, its bytes the attacker's */
	char id[512], path[256];
	unsigned char evil[BYTES];
	payload(evil, 77);
	int n = snprintf(id, sizeof id, "lmtk-rendezvous 1 world 2 nonce 00000000000000ee bytes %d\n",
			 BYTES);
	memcpy(id + n, evil, BYTES);

	T_CASE("a_symlinked_id_file_is_refused") {
		char target[256];
		snprintf(target, sizeof target, "%s/evil.id", dir);
		FILE *f = fopen(target, "w");
		T_ASSERT(f && fwrite(id, 1, (size_t)n + BYTES, f) == (size_t)n + BYTES);
		fclose(f);
		snprintf(path, sizeof path, "%s/j7.0.id", sub);
		T_ASSERT(symlink(target, path) == 0);
		pid_t p1 = rank_proc("j7.0", 1, 2, 5, 77, "(a symbolic link): refused");
		T_ASSERT(status(p1) == 3);
		unlink(path);
		unlink(target);
		T_ASSERT(files_left() == 0);
	}

	T_CASE("an_id_file_of_another_user_is_refused") {
		if (geteuid() != 0) {
			printf("skip %s: chown to another user needs root\n", t_case);
			t_case_bad = 1;   /* no "ok" line */
		} else {
			put("j8.0.id", id, (size_t)n + BYTES);
			snprintf(path, sizeof path, "%s/j8.0.id", sub);
			T_ASSERT(chown(path, 65534, 65534) == 0);
			pid_t p1 = rank_proc("j8.0", 1, 2, 5, 88, "is owned by another user: refused");
			T_ASSERT(status(p1) == 3);
			unlink(path);
			T_ASSERT(files_left() == 0);
		}
	}

	T_CASE("a_directory_not_the_users_own_is_refused") {
		char other[128], link[256], osub[256];
		snprintf(other, sizeof other, "%s/other", dir);
		T_ASSERT(mkdir(other, 0755) == 0);
		snprintf(osub, sizeof osub, "%s/" RENDEZVOUS_SUBDIR "%u", other, (unsigned)geteuid());
		/* group- or world-writable: anyone could lay an id in it */
		T_ASSERT(mkdir(osub, 0700) == 0 && chmod(osub, 0777) == 0);
		char save[64];
		strcpy(save, dir);
		strcpy(dir, other);
		pid_t p0 = rank_proc("j9.0", 0, 2, 5, 99, "is writable by group or others: refused");
		T_ASSERT(status(p0) == 3);
		pid_t p1 = rank_proc("j9.0", 1, 2, 5, 99, "is writable by group or others: refused");
		T_ASSERT(status(p1) == 3);
		/* a link to a directory elsewhere (another user's, or one they can swap) */
		T_ASSERT(rmdir(osub) == 0);
		snprintf(link, sizeof link, "%s/elsewhere", other);
		T_ASSERT(mkdir(link, 0700) == 0 && symlink(link, osub) == 0);
		p1 = rank_proc("j9.0", 1, 2, 5, 99, "not a directory of yours");
		T_ASSERT(status(p1) == 3);
		unlink(osub);
		if (geteuid() == 0) {   /* owned by another user, however private */
			T_ASSERT(mkdir(osub, 0700) == 0 && chown(osub, 65534, 65534) == 0);
			p0 = rank_proc("j9.0", 0, 2, 5, 99, "is owned by another user: refused");
			T_ASSERT(status(p0) == 3);
			rmdir(osub);
		}
		rmdir(link);
		strcpy(dir, save);
		rmdir(other);
	}

	rmdir(sub);
	rmdir(dir);
	T_DONE();
}
