/* rendezvous - see rendezvous.h. */
#include "train/dist/rendezvous.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "msg.h"

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

static void path_of(char *p, size_t n, const char *dir, const char *key, const char *what, int rank)
{
	if (rank >= 0)
		snprintf(p, n, "%s/.lmtk-rendezvous-%s.%s.%d", dir, key, what, rank);
	else
		snprintf(p, n, "%s/.lmtk-rendezvous-%s.%s", dir, key, what);
}

static uint64_t fresh_nonce(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v || !v)
		v = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)(now() * 1e9);
	return v ? v : 1;
}

/* KEY.ack.k: "nonce N mine M" - the id's nonce as rank k read it, and rank k's own */
static int read_ack(const char *path, uint64_t *nonce, uint64_t *mine)
{
	char *text, why[64];
	size_t len;
	unsigned long long a = 0, b = 0;
	int ok;
	if (file_read_all(path, &text, &len, why, sizeof why) < 0)
		return 0;
	ok = sscanf(text, "nonce %llx mine %llx", &a, &b) == 2;
	free(text);
	*nonce = a, *mine = b;
	return ok;
}

/* KEY.go: "nonce N" and then every rank's own nonce, 17 bytes a line, rank k's at line k + 1.
 * Whether it holds (nonce, mine) for rank k: a go left by another run never does. */
#define GO_HEAD 23   /* "nonce %016x\n" */
#define GO_LINE 17   /* "%016x\n" */
static int go_confirms(const char *path, int k, uint64_t nonce, uint64_t mine)
{
	char *text, why[64];
	size_t len;
	unsigned long long a = 0, b = 0;
	int ok;
	if (file_read_all(path, &text, &len, why, sizeof why) < 0)
		return 0;
	ok = len >= GO_HEAD + (size_t)(k + 1) * GO_LINE && sscanf(text, "nonce %llx", &a) == 1 &&
	     sscanf(text + GO_HEAD + (size_t)k * GO_LINE, "%llx", &b) == 1 && a == nonce && b == mine;
	free(text);
	return ok;
}

/* KEY.id: 1 and the payload when whole and for this world and size; 0 when absent or another
 * run's (*other_world then says its size, for the message). */
static int read_id(const char *path, int world, void *buf, size_t bytes, uint64_t *nonce,
		   int *other_world)
{
	char *text, why[64];
	size_t len, want;
	int w, off = 0, rc = 0;
	unsigned long long v;
	if (file_read_all(path, &text, &len, why, sizeof why) < 0)
		return 0;
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

static int root(const char *dir, const char *key, int world, double timeout, const void *buf,
		size_t bytes, char *err, size_t errlen)
{
	char path[4200], why[600];
	uint64_t nonce = fresh_nonce();
	rendezvous_clean(dir, key, world);   /* a crashed run's files under the same name */
	size_t hl = strlen(MAGIC) + 80;
	char *text = malloc(hl + bytes);
	if (!text)
		return errf(err, errlen, "out of memory");
	int n = snprintf(text, hl, MAGIC " world %d nonce %016" PRIx64 " bytes %zu\n", world, nonce,
			 bytes);
	memcpy(text + n, buf, bytes);
	path_of(path, sizeof path, dir, key, "id", -1);
	int rc = file_write_atomic(path, text, (size_t)n + bytes, 0644, why, sizeof why);
	free(text);
	if (rc < 0)
		return errf(err, errlen, "rendezvous: %s", why);

	size_t golen = GO_HEAD + (size_t)world * GO_LINE;
	char *go = calloc(golen + 1, 1);
	if (!go)
		return errf(err, errlen, "out of memory");
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
			path_of(path, sizeof path, dir, key, "ack", k);
			if (read_ack(path, &a, &mine) && a == nonce) {
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
		rendezvous_clean(dir, key, world);   /* a latecomer must not join a run given up */
		return errf(err, errlen, "rendezvous in %s: %d of %d rank%s never arrived within %g s "
			    "(LMTK_RENDEZVOUS_TIMEOUT): rank%s %s; did they start, and do they all see "
			    "this directory?", dir, missing, world, world > 1 ? "s" : "", timeout,
			    missing > 1 ? "s" : "", list);
	}
	path_of(path, sizeof path, dir, key, "go", -1);
	rc = file_write_atomic(path, go, golen, 0644, why, sizeof why);
	free(go);
	if (rc < 0)
		return errf(err, errlen, "rendezvous: %s", why);
	return 0;
}

static int other(const char *dir, const char *key, int rank, int world, double timeout, void *buf,
		 size_t bytes, char *err, size_t errlen)
{
	char id[4200], ack[4200], go[4200], why[600], text[64];
	uint64_t acked = 0, nonce = 0, mine = fresh_nonce();
	int round = 0, other_world = 0;
	double t0 = now();
	path_of(id, sizeof id, dir, key, "id", -1);
	path_of(ack, sizeof ack, dir, key, "ack", rank);
	path_of(go, sizeof go, dir, key, "go", -1);
	for (;;) {
		/* a new id (the first, or rank 0's fresh one over a stale file read before it) */
		if (read_id(id, world, buf, bytes, &nonce, &other_world) && nonce != acked) {
			int n = snprintf(text, sizeof text, "nonce %016" PRIx64 " mine %016" PRIx64 "\n",
					 nonce, mine);
			if (file_write_atomic(ack, text, (size_t)n, 0644, why, sizeof why) < 0)
				return errf(err, errlen, "rendezvous: %s", why);
			acked = nonce;
		}
		if (acked && go_confirms(go, rank, acked, mine))
			return 0;
		if (now() - t0 > timeout)
			break;
		pause_for(&round);
	}
	unlink(ack);   /* this rank is giving up: leave nothing behind */
	if (!acked && other_world)
		return errf(err, errlen, "rendezvous: rank %d of %d: %s is for %d ranks, not %d, and "
			    "no other came within %g s: another run's file? (each launch needs its own "
			    "SLURM_JOB_ID/SLURM_STEP_ID)", rank, world, id, other_world, world, timeout);
	if (!acked)
		return errf(err, errlen, "rendezvous: rank %d of %d: no word from rank 0 within %g s "
			    "(LMTK_RENDEZVOUS_TIMEOUT): %s never appeared; is rank 0 running, and do all "
			    "ranks see this directory (--save on a shared filesystem, or "
			    "LMTK_RENDEZVOUS_DIR)?", rank, world, timeout, id);
	return errf(err, errlen, "rendezvous: rank %d of %d: rank 0 did not see every rank arrive "
		    "within %g s (LMTK_RENDEZVOUS_TIMEOUT); its error names the ranks missing", rank,
		    world, timeout);
}

int rendezvous_bcast(const char *dir, const char *key, int rank, int world, double timeout,
		     void *buf, size_t bytes, char *err, size_t errlen)
{
	if (world < 1 || rank < 0 || rank >= world)
		return errf(err, errlen, "rendezvous: rank %d of %d ranks", rank, world);
	if (world == 1)
		return 0;
	if (access(dir, W_OK | X_OK) < 0)
		return errf(err, errlen, "rendezvous: %s: %s (set LMTK_RENDEZVOUS_DIR to a directory "
			    "every rank can write)", dir, strerror(errno));
	return rank == 0 ? root(dir, key, world, timeout, buf, bytes, err, errlen)
			 : other(dir, key, rank, world, timeout, buf, bytes, err, errlen);
}

void rendezvous_clean(const char *dir, const char *key, int world)
{
	char path[4200];
	path_of(path, sizeof path, dir, key, "id", -1);
	unlink(path);
	path_of(path, sizeof path, dir, key, "go", -1);
	unlink(path);
	for (int k = 1; k < world; k++) {
		path_of(path, sizeof path, dir, key, "ack", k);
		unlink(path);
	}
}
