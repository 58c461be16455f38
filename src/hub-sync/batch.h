/* batch - uploading LFS objects through the Git LFS batch API (libcurl).
 *
 * One round: POST {endpoint}/objects/batch with up to 100 objects; the server answers, per
 * object, nothing (it has it: skipped), an error, or actions.  "upload" is a plain PUT of the
 * bytes with the headers given ("basic" transfer), or the Hub's multipart variant: the action's
 * header holds chunk_size and numbered part URLs instead of HTTP headers; each chunk is PUT
 * (no credentials, like presigned S3 URLs), the ETags are POSTed to the upload href, and then,
 * as for basic, the "verify" action is POSTed if there is one.  Objects upload in parallel
 * (--jobs), each thread with its own curl handle.
 *
 * Failures are sorted in three: authentication (401, or 403 on the batch: the token is wrong
 * or cannot write) ends the upload at once - a wrong token must not become a retry storm;
 * a per-object error from the server (422: bad oid or size, ...) is final too; anything else
 * (connection refused, timeouts, 5xx, 429, an expired href) is transient and the whole round is
 * repeated after a backoff (retry_delay * 2^k), for the objects still missing only: a new batch
 * call also gives fresh hrefs.  Credentials go only to the LFS endpoint's own origin, never to
 * an href the server marked "authenticated" or to part URLs, so a presigned storage URL never
 * sees the token. */
#ifndef HUBSYNC_BATCH_H
#define HUBSYNC_BATCH_H

#include <stddef.h>

struct batch_object {
	char oid[65];
	unsigned long long size;
	char *file;      /* local copy: .git/lfs/objects/... */
	char *name;      /* a path that points at it, for messages */
};

struct batch_opts {
	const char *endpoint;    /* .../info/lfs */
	const char *user;        /* HTTP Basic user name */
	const char *token;       /* password; NULL = no credentials */
	const char *ref;         /* "refs/heads/main" */
	int jobs;                /* parallel uploads */
	int retries;             /* rounds after the first */
	double retry_delay;      /* seconds before the first retry; doubles */
	int verbose;
};

struct batch_result {
	unsigned uploaded;       /* objects sent */
	unsigned present;        /* objects the server already had */
	unsigned long long bytes;/* bytes sent */
	int auth_failed;         /* the error was authentication */
	int attempts;            /* rounds made */
};

/* Parses one answer of the LFS batch API for objs[0..n) exactly as an upload round does, then
 * frees what it built: the fuzzer's and the tests' way in.  0 usable, -1 + err. */
int batch_parse_answer(const char *body, struct batch_object *objs, size_t n, char *err,
		       size_t errlen);

/* 0 when every object is on the server, else -1 with err (scrubbed of secrets). */
int batch_upload(const struct batch_opts *o, struct batch_object *objs, size_t n,
		 struct batch_result *r, char *err, size_t errlen);

/* Uploads as objects become ready, while the caller goes on (hub-sync starts uploading a
 * file's object as soon as it is hashed, while the next one is).  One try per object, no
 * retries: whatever fails here is done again by batch_upload(), which the caller runs over
 * everything afterwards (the server then answers "have it" for what went up early).  Only an
 * authentication failure is final: it stops the session, and batch_end() reports it, so a
 * wrong token still costs one request. */
struct batch_session;
struct batch_session *batch_begin(const struct batch_opts *o);
void batch_add(struct batch_session *s, const char *oid, unsigned long long size, const char *file,
	       const char *name);
/* Waits for the uploads.  0, or -1 + err if the server refused the token. */
int batch_end(struct batch_session *s, struct batch_result *r, char *err, size_t errlen);

/* LFS bytes sent so far by this process, all threads together (for a progress line) */
unsigned long long batch_bytes_sent(void);
/* What the uploads so far set out to send: the sizes of the objects the server asked for, each
 * time it asked (a retry's again, as its bytes are sent again); the progress line's total, which
 * grows as the batch answers come in.  batch_bytes_sent() never passes it. */
unsigned long long batch_bytes_asked(void);

/* exposed for the unit test: same scheme, host and port? */
int batch_same_origin(const char *a, const char *b);

#endif
