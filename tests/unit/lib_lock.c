/* lib_lock.c - the one lock primitive: exclusive and shared flock, the bounded wait, the holder
 * record written only once held and read back by a loser, and the refusals (a symbolic link,
 * dangling or not, a hard link, not a regular file, another user's file) that leave every other
 * file as it was and create nothing. */
#include "t.h"
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char top[4096];

static const char *at(const char *name)
{
	static char path[4][4300];
	static int i;
	i = (i + 1) % 4;
	snprintf(path[i], sizeof path[i], "%s/%s", top, name);
	return path[i];
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* the whole (small) file, or "<none>" */
static const char *get(const char *path)
{
	static char buf[1024];
	FILE *f = fopen(path, "r");
	if (!f)
		return "<none>";
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
	const char *tmp = getenv("LMTK_TMP");
	char err[8192], want[512], host[80];
	struct lock a, b;
	struct stat sb;

	snprintf(top, sizeof top, "%s/lib_lock.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		perror(top);
		return 2;
	}
	gethostname(host, sizeof host - 1);

	T_CASE("lock_exclusive_records_holder_and_second_taker_is_busy_naming_it") {
		const char *p = at("x.lock");
		T_ASSERT(lock_take(&a, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_OK);
		T_ASSERT(a.fd >= 0);
		snprintf(want, sizeof want, "pid %ld on %s since ", (long)getpid(), host);
		T_ASSERT(strncmp(get(p), want, strlen(want)) == 0);
		/* a second open file description in this process conflicts, as another process would */
		T_ASSERT(lock_take(&b, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_BUSY);
		T_ASSERT(b.fd == -1);
		T_ASSERT(strncmp(b.holder, want, strlen(want)) == 0);
		T_ASSERT(strstr(err, p) && strstr(err, "held by pid"));
		/* the loser did not touch the winner's record */
		T_ASSERT(strncmp(get(p), want, strlen(want)) == 0);
		lock_release(&a);
		T_ASSERT(a.fd == -1);
		T_STREQ(get(p), "");   /* no stale holder left behind */
		T_ASSERT(lock_take(&b, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_OK);
		lock_release(&b);
	}

	T_CASE("lock_never_truncates_an_existing_file_it_does_not_hold") {
		const char *p = at("t.lock");
		put(p, "pid 1 on elsewhere since 2021-08-08 01:49:40\n");
		T_ASSERT(lock_take(&a, p, 0, 0, err, sizeof err) == LOCK_OK);   /* no LOCK_RECORD */
		T_STREQ(get(p), "pid 1 on elsewhere since 2021-08-08 01:49:40\n");
		T_ASSERT(lock_take(&b, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_BUSY);
		T_STREQ(b.holder, "pid 1 on elsewhere since 2021-08-08 01:49:40");
		lock_release(&a);
	}

	T_CASE("lock_shared_holders_coexist_and_keep_exclusive_out") {
		const char *p = at("s.lock");
		struct lock c;
		T_ASSERT(lock_take(&a, p, LOCK_SHARED, 0, err, sizeof err) == LOCK_OK);
		T_ASSERT(lock_take(&b, p, LOCK_SHARED | LOCK_RDONLY, 0, err, sizeof err) == LOCK_OK);
		T_ASSERT(lock_take(&c, p, 0, 0, err, sizeof err) == LOCK_BUSY);
		lock_release(&a);
		T_ASSERT(lock_take(&c, p, 0, 0, err, sizeof err) == LOCK_BUSY);
		lock_release(&b);
		T_ASSERT(lock_take(&c, p, 0, 0, err, sizeof err) == LOCK_OK);
		T_ASSERT(lock_take(&a, p, LOCK_SHARED, 0, err, sizeof err) == LOCK_BUSY);
		lock_release(&c);
	}

	T_CASE("lock_wait_is_bounded_and_gets_the_lock_when_the_holder_lets_go") {
		const char *p = at("w.lock");
		T_ASSERT(lock_take(&a, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_OK);
		double t0 = now();
		T_ASSERT(lock_take(&b, p, LOCK_RECORD, 0.4, err, sizeof err) == LOCK_BUSY);
		double waited = now() - t0;
		T_ASSERT(waited >= 0.35 && waited < 3);
		lock_release(&a);
		/* a child holds it for 0.3 s: a wait of 5 s gets it then, not after 5 s */
		fflush(stdout);
		int go[2];
		T_ASSERT(pipe(go) == 0);
		pid_t kid = fork();
		if (kid == 0) {
			struct lock k;
			if (lock_take(&k, p, LOCK_RECORD, 0, err, sizeof err) != LOCK_OK)
				_exit(1);
			(void)!write(go[1], "x", 1);
			usleep(300000);
			_exit(0);   /* the lock goes with the process */
		}
		char c;
		T_ASSERT(read(go[0], &c, 1) == 1);
		t0 = now();
		T_ASSERT(lock_take(&b, p, LOCK_RECORD, 5, err, sizeof err) == LOCK_OK);
		waited = now() - t0;
		T_ASSERT(waited >= 0.1 && waited < 4);
		snprintf(want, sizeof want, "pid %ld on ", (long)getpid());
		T_ASSERT(strncmp(get(p), want, strlen(want)) == 0);
		lock_release(&b);
		int st;
		T_ASSERT(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		close(go[0]);
		close(go[1]);
	}

	T_CASE("lock_refuses_a_symlink_and_leaves_its_target_as_it_was") {
		const char *p = at("l.lock"), *target = at("precious.txt");
		put(target, "do not overwrite\n");
		T_ASSERT(symlink(target, p) == 0);
		T_ASSERT(lock_take(&a, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_UNSAFE);
		T_ASSERT(a.fd == -1);
		T_ASSERT(strstr(err, p) && strstr(err, "is a symbolic link; refusing"));
		T_STREQ(get(target), "do not overwrite\n");
		/* a reader too */
		T_ASSERT(lock_take(&a, p, LOCK_SHARED | LOCK_RDONLY, 0, err, sizeof err) == LOCK_UNSAFE);
	}

	T_CASE("lock_refuses_a_dangling_symlink_and_creates_nothing") {
		const char *p = at("d.lock"), *target = at("made-by-the-lock");
		T_ASSERT(symlink(target, p) == 0);
		T_ASSERT(lock_take(&a, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_UNSAFE);
		T_ASSERT(strstr(err, "is a symbolic link; refusing") != NULL);
		T_ASSERT(lstat(target, &sb) < 0 && errno == ENOENT);
	}

	T_CASE("lock_refuses_a_hard_link_to_another_file") {
		const char *p = at("h.lock"), *other = at("other.txt");
		put(other, "mine\n");
		T_ASSERT(link(other, p) == 0);
		T_ASSERT(lock_take(&a, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_UNSAFE);
		T_ASSERT(strstr(err, p) && strstr(err, "2 hard links") && strstr(err, "refusing"));
		T_STREQ(get(other), "mine\n");
	}

	T_CASE("lock_refuses_what_is_not_a_regular_file_without_hanging") {
		const char *p = at("f.lock"), *dir = at("dir.lock");
		T_ASSERT(mkfifo(p, 0644) == 0);   /* an O_RDONLY open of a FIFO would wait for a writer */
		T_ASSERT(lock_take(&a, p, LOCK_SHARED | LOCK_RDONLY, 0, err, sizeof err) == LOCK_UNSAFE);
		T_ASSERT(strstr(err, "is not a regular file; refusing") != NULL);
		T_ASSERT(lock_take(&a, p, 0, 0, err, sizeof err) == LOCK_UNSAFE);
		T_ASSERT(mkdir(dir, 0755) == 0);
		T_ASSERT(lock_take(&a, dir, LOCK_SHARED | LOCK_RDONLY, 0, err, sizeof err) == LOCK_UNSAFE);
	}

	if (geteuid() != 0)
		printf("skip lock_refuses_another_users_file_unless_only_reading: needs root to chown\n");
	else T_CASE("lock_refuses_another_users_file_unless_only_reading") {
		const char *p = at("u.lock");
		put(p, "theirs\n");
		T_ASSERT(chown(p, 4242, 4242) == 0);
		T_ASSERT(lock_take(&a, p, LOCK_RECORD, 0, err, sizeof err) == LOCK_UNSAFE);
		T_ASSERT(strstr(err, "belongs to uid 4242") && strstr(err, "refusing"));
		T_STREQ(get(p), "theirs\n");
		/* a reader's shared lock writes nothing: another user's checkpoint is read */
		T_ASSERT(lock_take(&a, p, LOCK_SHARED | LOCK_RDONLY, 0, err, sizeof err) == LOCK_OK);
		lock_release(&a);
	}

	T_CASE("lock_nocreate_and_rdonly_do_not_create") {
		T_ASSERT(lock_take(&a, at("none.lock"), LOCK_NOCREATE, 0, err, sizeof err) == LOCK_ABSENT);
		T_ASSERT(lock_take(&a, at("none.lock"), LOCK_SHARED | LOCK_RDONLY, 0, err, sizeof err) ==
			 LOCK_ABSENT);
		T_ASSERT(lstat(at("none.lock"), &sb) < 0);
		T_ASSERT(lock_take(&a, at("no-dir/x.lock"), 0, 0, err, sizeof err) == LOCK_ABSENT);
		T_ASSERT(strstr(err, "no-dir/x.lock") != NULL);
	}

	T_CASE("lock_still_there_sees_a_renamed_or_replaced_file") {
		const char *p = at("r.lock");
		T_ASSERT(lock_take(&a, p, 0, 0, err, sizeof err) == LOCK_OK);
		T_ASSERT(lock_still_there(&a));
		T_ASSERT(rename(p, at("r.moved")) == 0);
		T_ASSERT(!lock_still_there(&a));
		put(p, "");
		T_ASSERT(!lock_still_there(&a));
		lock_release(&a);
	}

	T_CASE("lock_is_not_inherited_across_exec") {
		const char *p = at("e.lock");
		T_ASSERT(lock_take(&a, p, 0, 0, err, sizeof err) == LOCK_OK);
		T_ASSERT((fcntl(a.fd, F_GETFD) & FD_CLOEXEC) != 0);
		lock_release(&a);
	}

	char cmd[8300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	T_DONE();
}
