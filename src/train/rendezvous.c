/* rendezvous - see rendezvous.h. */
#include "train/rendezvous.h"

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

/* The nonce in an ack or go file; 0 when the file is not there (yet) or not whole. */
static uint64_t read_nonce(const char *path)
{
	char *text, why[64];
	size_t len;
	unsigned long long v = 0;
	if (file_read_all(path, &text, &len, why, sizeof why) < 0)
		return 0;
	if (sscanf(text, "nonce %llx", &v) != 1)
		v = 0;
	free(text);
	return v;
}

static int write_nonce(const char *path, uint64_t nonce, char *err, size_t errlen)
{
	char text[64];
	int n = snprintf(text, sizeof text, "nonce %016" PRIx64 "\n", nonce);
	return file_write_atomic(path, text, (size_t)n, 0644, err, errlen);
}

/* KEY.id: 1 and the payload when whole and for this world and size; 0 when absent (or a
 * stale one of another size, which rank 0 is about to replace); -1 + err for another world. */
static int read_id(const char *path, int world, void *buf, size_t bytes, uint64_t *nonce,
		   char *err, size_t errlen)
{
	char *text, why[64];
	size_t len, want;
	int w, off = 0;
	unsigned long long v;
	if (file_read_all(path, &text, &len, why, sizeof why) < 0)
		return 0;
	int rc = 0;
	if (sscanf(text, MAGIC " world %d nonce %llx bytes %zu\n%n", &w, &v, &want, &off) == 3 &&
	    off > 0 && want == bytes && len == (size_t)off + bytes) {
		if (w != world) {
			rc = errf(err, errlen, "%s says rank 0 sees %d ranks, but this rank sees %d: "
				  "another run's file? (each launch needs its own SLURM_JOB_ID/"
				  "SLURM_STEP_ID)", path, w, world);
		} else {
			memcpy(buf, text + off, bytes);
			*nonce = v;
			rc = 1;
		}
	}
	free(text);
	return rc;
}

static uint64_t fresh_nonce(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v || !v)
		v = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)(now() * 1e9);
	return v ? v : 1;
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

	char *seen = calloc((size_t)world, 1);
	if (!seen)
		return errf(err, errlen, "out of memory");
	int missing = world - 1, round = 0;
	double t0 = now();
	for (;;) {
		for (int k = 1; k < world; k++) {
			if (seen[k])
				continue;
			path_of(path, sizeof path, dir, key, "ack", k);
			if (read_nonce(path) == nonce)
				seen[k] = 1, missing--;
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
			if (!seen[k])
				len += (size_t)snprintf(list + len, sizeof list - len, "%s%d",
							shown++ ? ", " : "", k);
		if (shown < missing)
			snprintf(list + len, sizeof list - len, " ...");
		free(seen);
		path_of(path, sizeof path, dir, key, "id", -1);
		unlink(path);   /* a latecomer must not join a run that has given up */
		return errf(err, errlen, "rendezvous in %s: %d of %d rank%s never arrived within %g s "
			    "(LMTK_RENDEZVOUS_TIMEOUT): rank%s %s; did they start, and do they all see "
			    "this directory?", dir, missing, world, world > 1 ? "s" : "", timeout,
			    missing > 1 ? "s" : "", list);
	}
	free(seen);
	path_of(path, sizeof path, dir, key, "go", -1);
	if (write_nonce(path, nonce, why, sizeof why) < 0)
		return errf(err, errlen, "rendezvous: %s", why);
	return 0;
}

static int other(const char *dir, const char *key, int rank, int world, double timeout, void *buf,
		 size_t bytes, char *err, size_t errlen)
{
	char id[4200], ack[4200], go[4200], why[600];
	uint64_t acked = 0, nonce = 0;
	int round = 0;
	double t0 = now();
	path_of(id, sizeof id, dir, key, "id", -1);
	path_of(ack, sizeof ack, dir, key, "ack", rank);
	path_of(go, sizeof go, dir, key, "go", -1);
	for (;;) {
		/* a new id (the first, or rank 0's fresh one over a stale file read before it) */
		int r = read_id(id, world, buf, bytes, &nonce, err, errlen);
		if (r < 0)
			return -1;
		if (r == 1 && nonce != acked) {
			if (write_nonce(ack, nonce, why, sizeof why) < 0)
				return errf(err, errlen, "rendezvous: %s", why);
			acked = nonce;
		}
		if (acked && read_nonce(go) == acked)
			return 0;
		if (now() - t0 > timeout)
			break;
		pause_for(&round);
	}
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
