/* rendezvous - see rendezvous.h. */
#include "train/parallel/rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "xalloc.h"

#define MAGIC "lmtk-rendezvous 1"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 20 ms at first, growing to 200 ms: quick on one node, light on a shared filesystem */
static void pause_for(int *round)
{
	int ms = 20 + 20 * (*round < 9 ? (*round)++ : 9);
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* The private directory the files live in (see rendezvous.h): its descriptor, every file
 * opened relative to it, so a directory renamed or replaced after the checks is never used, and
 * its path for messages. */
struct place {
	int fd;
	char path[4200];
};

static void name_of(char *p, size_t n, const char *key, const char *what, int rank)
{
	if (rank >= 0)
		snprintf(p, n, "%s.%s.%d", key, what, rank);
	else
		snprintf(p, n, "%s.%s", key, what);
}

/* DIR/.lmtk-rendezvous-UID: made 0700 when absent; refused unless a real directory (not a
 * link) this user owns that no one else may write.  0, or -1 + err. */
static int place_open(struct place *pl, const char *dir, int create, char *err, size_t errlen)
{
	struct stat sb;
	uid_t uid = geteuid();
	pl->fd = -1;
	snprintf(pl->path, sizeof pl->path, "%s/" RENDEZVOUS_SUBDIR "%u", dir, (unsigned)uid);
	if (create && mkdir(pl->path, 0700) < 0 && errno != EEXIST)
		return errf(err, errlen, "rendezvous: %s: %s (set LMTK_RENDEZVOUS_DIR to a directory "
			    "every rank can write)", pl->path, strerror(errno));
	pl->fd = open(pl->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pl->fd < 0)
		return errf(err, errlen, "rendezvous: %s: %s%s", pl->path, strerror(errno),
			    errno == ELOOP || errno == ENOTDIR ? " (not a directory of yours: a link or "
			    "file someone else put there? remove it, or set LMTK_RENDEZVOUS_DIR)" : "");
	if (fstat(pl->fd, &sb) < 0 || sb.st_uid != uid || (sb.st_mode & 022)) {
		int foreign = sb.st_uid != uid;
		close(pl->fd);
		pl->fd = -1;
		return errf(err, errlen, "rendezvous: %s is %s: refused, as another user could hand "
			    "the ranks their own id (remove it, or set LMTK_RENDEZVOUS_DIR)", pl->path,
			    foreign ? "owned by another user" : "writable by group or others");
	}
	return 0;
}

static void place_close(struct place *pl)
{
	if (pl->fd >= 0)
		close(pl->fd);
	pl->fd = -1;
}

/* The whole of file NAME: 1 and *text (malloc'd, NUL-terminated), 0 when absent, -1 + err when
 * it is not a regular file of this user's (a link, or another user's: refused, never read). */
static int read_file(const struct place *pl, const char *name, char **text, size_t *len,
		     char *err, size_t errlen)
{
	struct stat sb;
	int fd = openat(pl->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return errf(err, errlen, "rendezvous: %s/%s: %s%s: refused", pl->path, name,
			    strerror(errno), errno == ELOOP ? " (a symbolic link)" : "");
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid()) {
		close(fd);
		return errf(err, errlen, "rendezvous: %s/%s is %s: refused (someone else's file; "
			    "remove it)", pl->path, name, !S_ISREG(sb.st_mode) ? "not a regular file"
			    : "owned by another user");
	}
	size_t cap = (size_t)sb.st_size + 1, n = 0;
	char *b = malloc(cap + 1);
	ssize_t r;
	while (b && (r = read(fd, b + n, cap - n)) > 0) {
		n += (size_t)r;
		if (n == cap) {
			char *nb = realloc(b, (cap *= 2) + 1);
			if (!nb)
				free(b);
			b = nb;
		}
	}
	close(fd);
	if (!b) {
		char what[4500];
		snprintf(what, sizeof what, "the rendezvous file %s/%s", pl->path, name);
		return xalloc_err(err, errlen, what, cap + 1);
	}
	b[n] = 0;
	*text = b, *len = n;
	return 1;
}

/* NAME written whole: a fresh 0600 temporary (O_EXCL, O_NOFOLLOW), fsynced, renamed over it,
 * so a reader sees the old file or the new one, never half of one. */
static int write_file(const struct place *pl, const char *name, const void *data, size_t len,
		      char *err, size_t errlen)
{
	char tmp[300];
	snprintf(tmp, sizeof tmp, ".%s.tmp.%d", name, (int)getpid());
	unlinkat(pl->fd, tmp, 0);   /* a crashed run of this pid's */
	int fd = openat(pl->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf(err, errlen, "rendezvous: %s/%s: %s", pl->path, tmp, strerror(errno));
	const char *p = data;
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, p + off, len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	int bad = off < len || fsync(fd) < 0;
	int e = errno;
	if (close(fd) < 0 && !bad)
		bad = 1, e = errno;
	if (!bad && renameat(pl->fd, tmp, pl->fd, name) < 0)
		bad = 1, e = errno;
	if (bad) {
		unlinkat(pl->fd, tmp, 0);
		return errf(err, errlen, "rendezvous: %s/%s: %s", pl->path, name, strerror(e));
	}
	return 0;
}

static void clean_at(const struct place *pl, const char *key, int world)
{
	char name[200];
	name_of(name, sizeof name, key, "id", -1);
	unlinkat(pl->fd, name, 0);
	name_of(name, sizeof name, key, "go", -1);
	unlinkat(pl->fd, name, 0);
	for (int k = 1; k < world; k++) {
		name_of(name, sizeof name, key, "ack", k);
		unlinkat(pl->fd, name, 0);
	}
}

static uint64_t fresh_nonce(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v || !v)
		v = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)(now() * 1e9);
	return v ? v : 1;
}

/* KEY.ack.k: "nonce N mine M" - the id's nonce as rank k read it, and rank k's own.
 * 1 read, 0 absent or not yet whole, -1 + err refused. */
static int read_ack(const struct place *pl, const char *name, uint64_t *nonce, uint64_t *mine,
		    char *err, size_t errlen)
{
	char *text;
	size_t len;
	unsigned long long a = 0, b = 0;
	int rc = read_file(pl, name, &text, &len, err, errlen);
	if (rc <= 0)
		return rc;
	rc = sscanf(text, "nonce %llx mine %llx", &a, &b) == 2;
	free(text);
	*nonce = a, *mine = b;
	return rc;
}

/* KEY.go: "nonce N" and then every rank's own nonce, 17 bytes a line, rank k's at line k + 1.
 * Whether it holds (nonce, mine) for rank k (a go left by another run never does), or -1 +
 * err refused. */
#define GO_HEAD 23   /* "nonce %016x\n" */
#define GO_LINE 17   /* "%016x\n" */
static int go_confirms(const struct place *pl, const char *name, int k, uint64_t nonce,
		       uint64_t mine, char *err, size_t errlen)
{
	char *text;
	size_t len;
	unsigned long long a = 0, b = 0;
	int rc = read_file(pl, name, &text, &len, err, errlen);
	if (rc <= 0)
		return rc;
	rc = len >= GO_HEAD + (size_t)(k + 1) * GO_LINE && sscanf(text, "nonce %llx", &a) == 1 &&
	     sscanf(text + GO_HEAD + (size_t)k * GO_LINE, "%llx", &b) == 1 && a == nonce && b == mine;
	free(text);
	return rc;
}

/* KEY.id: 1 and the payload when whole and for this world and size; 0 when absent or another
 * run's (*other_world then says its size, for the message); -1 + err refused. */
static int read_id(const struct place *pl, const char *name, int world, void *buf, size_t bytes,
		   uint64_t *nonce, int *other_world, char *err, size_t errlen)
{
	char *text;
	size_t len, want;
	int w, off = 0, rc;
	unsigned long long v;
	if ((rc = read_file(pl, name, &text, &len, err, errlen)) <= 0)
		return rc;
	rc = 0;
	char *nl = memchr(text, '\n', len);   /* the payload follows the header's newline */
	if (nl)
		off = (int)(nl + 1 - text);
	if (nl && sscanf(text, MAGIC " world %d nonce %llx bytes %zu", &w, &v, &want) == 3 &&
	    len == (size_t)off + want) {
		if (w == world && want == bytes) {
			memcpy(buf, text + off, bytes);
			*nonce = v;
			rc = 1;
		} else {
			*other_world = w;
		}
	}
	free(text);
	return rc;
}

static int root(const struct place *pl, const char *key, int world, double timeout,
		const void *buf, size_t bytes, char *err, size_t errlen)
{
	char name[200];
	uint64_t nonce = fresh_nonce();
	clean_at(pl, key, world);   /* a crashed run's files under the same name */
	size_t hl = strlen(MAGIC) + 80;
	char *text = malloc(hl + bytes);
	if (!text)
		return xalloc_err(err, errlen, "the rendezvous root's message", hl + bytes);
	int n = snprintf(text, hl, MAGIC " world %d nonce %016" PRIx64 " bytes %zu\n", world, nonce,
			 bytes);
	memcpy(text + n, buf, bytes);
	name_of(name, sizeof name, key, "id", -1);
	int rc = write_file(pl, name, text, (size_t)n + bytes, err, errlen);
	free(text);
	if (rc < 0)
		return -1;

	size_t golen = GO_HEAD + (size_t)world * GO_LINE;
	char *go = calloc(golen + 1, 1);
	if (!go)
		return xalloc_err(err, errlen, "the rendezvous go file", golen + 1);
	snprintf(go, GO_HEAD + 1, "nonce %016" PRIx64 "\n", nonce);
	memcpy(go + GO_HEAD, "0000000000000000\n", GO_LINE);   /* rank 0's own: not needed */
	char *seen = go + GO_HEAD;   /* line k still zero: rank k not seen */
	int missing = world - 1, round = 0;
	double t0 = now();
	for (;;) {
		for (int k = 1; k < world; k++) {
			uint64_t a, mine;
			char *line = seen + (size_t)k * GO_LINE;
			if (line[GO_LINE - 1] == '\n')
				continue;
			name_of(name, sizeof name, key, "ack", k);
			rc = read_ack(pl, name, &a, &mine, err, errlen);
			if (rc < 0) {
				free(go);
				clean_at(pl, key, world);
				return -1;
			}
			if (rc && a == nonce) {
				char v[GO_LINE + 1];   /* not in place: the NUL would cut the next line */
				snprintf(v, sizeof v, "%016" PRIx64 "\n", mine);
				memcpy(line, v, GO_LINE);
				missing--;
			}
		}
		if (!missing || now() - t0 > timeout)
			break;
		pause_for(&round);
	}
	if (missing) {
		char list[200] = "";
		size_t len = 0;
		int shown = 0;
		for (int k = 1; k < world && len < sizeof list - 24; k++)
			if (seen[(size_t)k * GO_LINE + GO_LINE - 1] != '\n')
				len += (size_t)snprintf(list + len, sizeof list - len, "%s%d",
							shown++ ? ", " : "", k);
		if (shown < missing)
			snprintf(list + len, sizeof list - len, " ...");
		free(go);
		clean_at(pl, key, world);   /* a latecomer must not join a run given up */
		return errf(err, errlen, "rendezvous in %s: %d of %d rank%s never arrived within %g s "
			    "(LMTK_RENDEZVOUS_TIMEOUT): rank%s %s; did they start, and do they all see "
			    "this directory?", pl->path, missing, world, world > 1 ? "s" : "", timeout,
			    missing > 1 ? "s" : "", list);
	}
	name_of(name, sizeof name, key, "go", -1);
	rc = write_file(pl, name, go, golen, err, errlen);
	free(go);
	return rc;
}

static int other(const struct place *pl, const char *key, int rank, int world, double timeout,
		 void *buf, size_t bytes, char *err, size_t errlen)
{
	char id[200], ack[200], go[200], text[64];
	uint64_t acked = 0, nonce = 0, mine = fresh_nonce();
	int round = 0, other_world = 0, rc;
	double t0 = now();
	name_of(id, sizeof id, key, "id", -1);
	name_of(ack, sizeof ack, key, "ack", rank);
	name_of(go, sizeof go, key, "go", -1);
	for (;;) {
		/* a new id (the first, or rank 0's fresh one over a stale file read before it) */
		rc = read_id(pl, id, world, buf, bytes, &nonce, &other_world, err, errlen);
		if (rc < 0)
			break;
		if (rc == 1 && nonce != acked) {
			int n = snprintf(text, sizeof text, "nonce %016" PRIx64 " mine %016" PRIx64 "\n",
					 nonce, mine);
			if (write_file(pl, ack, text, (size_t)n, err, errlen) < 0)
				return -1;
			acked = nonce;
		}
		if (acked && (rc = go_confirms(pl, go, rank, acked, mine, err, errlen)) != 0)
			break;
		rc = 0;
		if (now() - t0 > timeout)
			break;
		pause_for(&round);
	}
	if (rc > 0)
		return 0;
	unlinkat(pl->fd, ack, 0);   /* this rank is giving up: leave nothing behind */
	if (rc < 0)
		return -1;
	if (!acked && other_world)
		return errf(err, errlen, "rendezvous: rank %d of %d: %s/%s is for %d ranks, not %d, and "
			    "no other came within %g s: another run's file? (each launch needs its own "
			    "SLURM_JOB_ID/SLURM_STEP_ID)", rank, world, pl->path, id, other_world, world,
			    timeout);
	if (!acked)
		return errf(err, errlen, "rendezvous: rank %d of %d: no word from rank 0 within %g s "
			    "(LMTK_RENDEZVOUS_TIMEOUT): %s/%s never appeared; is rank 0 running, and do "
			    "all ranks see this directory (--save on a shared filesystem, or "
			    "LMTK_RENDEZVOUS_DIR)?", rank, world, timeout, pl->path, id);
	return errf(err, errlen, "rendezvous: rank %d of %d: rank 0 did not see every rank arrive "
		    "within %g s (LMTK_RENDEZVOUS_TIMEOUT); its error names the ranks missing", rank,
		    world, timeout);
}

int rendezvous_bcast(const char *dir, const char *key, int rank, int world, double timeout,
		     void *buf, size_t bytes, char *err, size_t errlen)
{
	struct place pl;
	if (world < 1 || rank < 0 || rank >= world)
		return errf(err, errlen, "rendezvous: rank %d of %d ranks", rank, world);
	if (world == 1)
		return 0;
	if (access(dir, W_OK | X_OK) < 0)
		return errf(err, errlen, "rendezvous: %s: %s (set LMTK_RENDEZVOUS_DIR to a directory "
			    "every rank can write)", dir, strerror(errno));
	if (place_open(&pl, dir, 1, err, errlen) < 0)
		return -1;
	int rc = rank == 0 ? root(&pl, key, world, timeout, buf, bytes, err, errlen)
			   : other(&pl, key, rank, world, timeout, buf, bytes, err, errlen);
	place_close(&pl);
	return rc;
}

void rendezvous_clean(const char *dir, const char *key, int world)
{
	struct place pl;
	char why[600];
	if (place_open(&pl, dir, 0, why, sizeof why) < 0)
		return;
	clean_at(&pl, key, world);
	place_close(&pl);
}
