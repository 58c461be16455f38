#include "batch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "token.h"
#include "units.h"
#include "xalloc.h"

#define LFS_JSON "application/vnd.git-lfs+json"
#define PER_BATCH 100  /* objects per batch request, as git-lfs sends */

enum outcome { OK, TRANSIENT, FATAL, AUTH };  /* ordered: a worse outcome wins */

struct action {
	char *href;
	struct curl_slist *headers;
	int has_auth;                /* the server gave its own Authorization header */
};

struct task {
	struct batch_object *obj;
	int authenticated;           /* hrefs need no credentials from us */
	struct action upload, verify;
	int has_verify;
	unsigned long long chunk;    /* multipart: bytes per part; 0 = basic */
	char **parts;                /* multipart: part URLs, in part order */
	size_t nparts;
	enum outcome res;
	char err[1024];
	unsigned long long sent;
	unsigned long long wire;     /* bytes its requests put on the wire, failed ones included */
};

struct round {
	const struct batch_opts *o;
	struct task *tasks;
	size_t ntasks, next;
	int stop;                    /* an authentication failure: take no new task */
	pthread_mutex_t mu;
};

static unsigned long long bytes_sent;  /* __atomic: every upload thread adds to it */
static unsigned long long bytes_asked; /* __atomic: the sizes of the objects the server asked for */

unsigned long long batch_bytes_sent(void)
{
	return __atomic_load_n(&bytes_sent, __ATOMIC_RELAXED);
}

unsigned long long batch_bytes_asked(void)
{
	return __atomic_load_n(&bytes_asked, __ATOMIC_RELAXED);
}

static int on_xfer(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	curl_off_t *last = ud;
	(void)dltotal, (void)dlnow, (void)ultotal;
	if (ulnow > *last) {
		__atomic_add_fetch(&bytes_sent, (unsigned long long)(ulnow - *last), __ATOMIC_RELAXED);
		*last = ulnow;
	}
	return 0;
}

/* --- one HTTP request ---------------------------------------------------------------------- */

struct body_src {
	int fd;
	off_t off;
	unsigned long long left;
	unsigned long long *wire;    /* the task's: adds what the request sent */
};

struct resp {
	long status;
	char *body;
	size_t len, cap;
	char etag[256];
	char curl_err[CURL_ERROR_SIZE];
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct resp *r = ud;
	size_t len = sz * n;
	if (r->len + len + 1 > r->cap) {
		size_t cap = (r->len + len + 1) * 2;
		char *b = realloc(r->body, cap);
		if (!b)
			return 0;
		r->body = b;
		r->cap = cap;
	}
	memcpy(r->body + r->len, p, len);
	r->len += len;
	r->body[r->len] = '\0';
	return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	struct resp *r = ud;
	size_t len = sz * n;
	if (len > 5 && strncasecmp(p, "etag:", 5) == 0) {
		const char *v = p + 5;
		size_t vl = len - 5;
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		snprintf(r->etag, sizeof r->etag, "%.*s", (int)vl, v);
	}
	return len;
}

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
	struct body_src *b = ud;
	size_t want = sz * n;
	ssize_t got;

	if (want > b->left)
		want = (size_t)b->left;
	if (!want)
		return 0;
	do
		got = pread(b->fd, p, want, b->off);
	while (got < 0 && errno == EINTR);
	if (got <= 0)
		return CURL_READFUNC_ABORT;  /* the object shrank under us: never send short data */
	b->off += got;
	b->left -= (unsigned long long)got;
	return (size_t)got;
}

int batch_same_origin(const char *a, const char *b)
{
	CURLU *ua = curl_url(), *ub = curl_url();
	char *s1 = NULL, *s2 = NULL, *h1 = NULL, *h2 = NULL, *p1 = NULL, *p2 = NULL;
	int same = 0;

	if (ua && ub && curl_url_set(ua, CURLUPART_URL, a, 0) == CURLUE_OK &&
	    curl_url_set(ub, CURLUPART_URL, b, 0) == CURLUE_OK &&
	    curl_url_get(ua, CURLUPART_SCHEME, &s1, 0) == CURLUE_OK &&
	    curl_url_get(ub, CURLUPART_SCHEME, &s2, 0) == CURLUE_OK &&
	    curl_url_get(ua, CURLUPART_HOST, &h1, 0) == CURLUE_OK &&
	    curl_url_get(ub, CURLUPART_HOST, &h2, 0) == CURLUE_OK &&
	    curl_url_get(ua, CURLUPART_PORT, &p1, CURLU_DEFAULT_PORT) == CURLUE_OK &&
	    curl_url_get(ub, CURLUPART_PORT, &p2, CURLU_DEFAULT_PORT) == CURLUE_OK)
		same = !strcasecmp(s1, s2) && !strcasecmp(h1, h2) && !strcmp(p1, p2);
	curl_free(s1), curl_free(s2), curl_free(h1), curl_free(h2), curl_free(p1), curl_free(p2);
	curl_url_cleanup(ua);
	curl_url_cleanup(ub);
	return same;
}

/* Sends one request; returns what it means.  `what` names it in err ("batch", "upload of X").
 * A PUT body comes from src (NULL: none); a POST body from json. */
static enum outcome http(CURL *h, const struct batch_opts *o, const char *method, const char *url,
			 struct curl_slist *headers, int auth, const char *json, struct body_src *src,
			 struct resp *r, int batch_call, const char *what, char *err, size_t errlen)
{
	CURLcode cc;
	struct curl_slist *hs = NULL;
	char ua[64];
	curl_off_t sent = 0;

	for (struct curl_slist *p = headers; p; p = p->next)
		hs = curl_slist_append(hs, p->data);
	hs = curl_slist_append(hs, "Expect:");  /* no 1 s wait for "100 Continue" */
	if (json) {
		hs = curl_slist_append(hs, "Accept: " LFS_JSON);
		hs = curl_slist_append(hs, "Content-Type: " LFS_JSON);
	}
	free(r->body);
	memset(r, 0, sizeof *r);
	curl_easy_reset(h);
	snprintf(ua, sizeof ua, "lmtk-hub-sync/%s", LMTK_VERSION);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_USERAGENT, ua);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);   /* a stalled transfer: 2 minutes */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 120L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->curl_err);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
	if (auth && o->token) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, o->user);
		curl_easy_setopt(h, CURLOPT_PASSWORD, o->token);
	}
	if (src) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, src);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)src->left);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_xfer);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, &sent);
	} else if (json) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(json));
	}
	if (strcmp(method, "PUT") != 0 && strcmp(method, "POST") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	if (src && src->wire)
		*src->wire += (unsigned long long)sent;
	curl_slist_free_all(hs);

	if (cc != CURLE_OK) {
		errf(err, errlen, "%s: %s", what, r->curl_err[0] ? r->curl_err : curl_easy_strerror(cc));
		token_scrub(err);
		return cc == CURLE_UNSUPPORTED_PROTOCOL || cc == CURLE_URL_MALFORMAT ? FATAL : TRANSIENT;
	}
	if (r->status >= 200 && r->status < 300)
		return OK;

	/* the server's own words, if it gave a JSON {"message"} */
	char msg[300] = "";
	json_t *j = r->body ? json_loads(r->body, 0, NULL) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
	if (m)
		snprintf(msg, sizeof msg, ": %s", m);
	json_decref(j);
	if (r->status == 401 || (r->status == 403 && batch_call)) {
		errf(err, errlen, "authentication failed: check the token (%s: HTTP %ld from %s%s)",
		     what, r->status, o->endpoint, msg);
		token_scrub(err);
		return AUTH;
	}
	errf(err, errlen, "%s: HTTP %ld%s", what, r->status, msg);
	token_scrub(err);
	/* 403 on an href: an expired signature; a new batch call gives a fresh one */
	if (r->status == 403 || r->status == 408 || r->status == 429 || r->status >= 500)
		return TRANSIENT;
	return FATAL;
}

/* --- the actions of one object ------------------------------------------------------------- */

static int href_auth(const struct batch_opts *o, const struct task *t, const struct action *a)
{
	return !t->authenticated && !a->has_auth && batch_same_origin(a->href, o->endpoint);
}

static int open_object(struct task *t, int *fd)
{
	struct stat st;
	*fd = open(t->obj->file, O_RDONLY | O_CLOEXEC);
	if (*fd < 0 || fstat(*fd, &st) < 0 || (unsigned long long)st.st_size != t->obj->size) {
		errf(t->err, sizeof t->err, "%s (%s): the local LFS object %s is %s; cannot upload it",
		     t->obj->name, t->obj->oid, t->obj->file, *fd < 0 ? strerror(errno) : "the wrong size");
		if (*fd >= 0)
			close(*fd);
		return -1;
	}
	return 0;
}

static enum outcome upload_basic(CURL *h, const struct batch_opts *o, struct task *t, int fd,
				 struct resp *r)
{
	struct body_src src = {fd, 0, t->obj->size, &t->wire};
	struct curl_slist *hs = NULL;
	char what[600];
	int has_ctype = 0;
	enum outcome res;

	for (struct curl_slist *p = t->upload.headers; p; p = p->next) {
		hs = curl_slist_append(hs, p->data);
		has_ctype |= strncasecmp(p->data, "content-type:", 13) == 0;
	}
	if (!has_ctype)
		hs = curl_slist_append(hs, "Content-Type: application/octet-stream");
	snprintf(what, sizeof what, "upload of %s", t->obj->name);
	res = http(h, o, "PUT", t->upload.href, hs, href_auth(o, t, &t->upload), NULL, &src, r, 0,
		   what, t->err, sizeof t->err);
	curl_slist_free_all(hs);
	if (res == OK)
		t->sent += t->obj->size;
	return res;
}

static enum outcome upload_multipart(CURL *h, const struct batch_opts *o, struct task *t, int fd,
				     struct resp *r)
{
	json_t *parts = json_array(), *body;
	char what[600], *text;
	enum outcome res = OK;

	for (size_t i = 0; i < t->nparts && res == OK; i++) {
		unsigned long long off = i * t->chunk;
		struct body_src src = {fd, (off_t)off, t->obj->size - off < t->chunk ? t->obj->size - off : t->chunk,
				       &t->wire};
		snprintf(what, sizeof what, "upload of %s, part %zu of %zu", t->obj->name, i + 1, t->nparts);
		/* part URLs are presigned storage URLs: never our credentials */
		res = http(h, o, "PUT", t->parts[i], NULL, 0, NULL, &src, r, 0, what, t->err, sizeof t->err);
		if (res == OK && !r->etag[0]) {
			errf(t->err, sizeof t->err, "%s: no ETag in the answer", what);
			res = TRANSIENT;
		}
		if (res == OK) {
			t->sent += src.off - (off_t)off;
			json_array_append_new(parts, json_pack("{s:I,s:s}", "partNumber", (json_int_t)(i + 1),
							       "etag", r->etag));
		}
	}
	if (res != OK) {
		json_decref(parts);
		return res;
	}
	body = json_pack("{s:s,s:o}", "oid", t->obj->oid, "parts", parts);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	snprintf(what, sizeof what, "completing the multipart upload of %s", t->obj->name);
	res = http(h, o, "POST", t->upload.href, NULL, href_auth(o, t, &t->upload), text, NULL, r, 0,
		   what, t->err, sizeof t->err);
	free(text);
	return res;
}

static enum outcome verify(CURL *h, const struct batch_opts *o, struct task *t, struct resp *r)
{
	char what[600], *text;
	json_t *body = json_pack("{s:s,s:I}", "oid", t->obj->oid, "size", (json_int_t)t->obj->size);
	enum outcome res;

	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	snprintf(what, sizeof what, "verifying %s", t->obj->name);
	res = http(h, o, "POST", t->verify.href, t->verify.headers, href_auth(o, t, &t->verify), text,
		   NULL, r, 0, what, t->err, sizeof t->err);
	free(text);
	/* a verify 404 means the bytes did not arrive: send them again */
	if (res == FATAL && r->status == 404)
		res = TRANSIENT;
	return res;
}

static void run_task(CURL *h, const struct batch_opts *o, struct task *t)
{
	struct resp r = {0};
	int fd;

	t->err[0] = '\0';
	if (open_object(t, &fd) < 0) {
		t->res = FATAL;
		return;
	}
	t->res = t->chunk ? upload_multipart(h, o, t, fd, &r) : upload_basic(h, o, t, fd, &r);
	close(fd);
	if (t->res == OK && t->has_verify)
		t->res = verify(h, o, t, &r);
	free(r.body);
	if (o->verbose && t->res == OK) {
		char sz[32];
		token_say("uploaded %s (%s%s)", t->obj->name, units_fmt_size(t->obj->size, sz, sizeof sz),
			  t->chunk ? ", multipart" : "");
	}
}

static void *worker(void *arg)
{
	struct round *rd = arg;
	CURL *h = curl_easy_init();

	for (;;) {
		struct task *t = NULL;
		pthread_mutex_lock(&rd->mu);
		if (!rd->stop && rd->next < rd->ntasks)
			t = &rd->tasks[rd->next++];
		pthread_mutex_unlock(&rd->mu);
		if (!t)
			break;
		if (!h) {
			t->res = TRANSIENT;
			snprintf(t->err, sizeof t->err, "cannot create a curl handle");
			continue;
		}
		run_task(h, rd->o, t);
		if (t->res == AUTH) {
			pthread_mutex_lock(&rd->mu);
			rd->stop = 1;
			pthread_mutex_unlock(&rd->mu);
		}
	}
	curl_easy_cleanup(h);
	return NULL;
}

/* --- parsing the batch answer ------------------------------------------------------------- */

static int parse_action(json_t *a, struct action *out)
{
	const char *href = json_string_value(json_object_get(a, "href"));
	json_t *hdr = json_object_get(a, "header"), *v;
	const char *k;

	if (!href)
		return -1;
	out->href = strdup(href);
	json_object_foreach(hdr, k, v) {
		char line[4096];
		if (!json_is_string(v))
			continue;
		snprintf(line, sizeof line, "%s: %s", k, json_string_value(v));
		out->headers = curl_slist_append(out->headers, line);
		out->has_auth |= strcasecmp(k, "authorization") == 0;
	}
	return 0;
}

static int cmp_part(const void *a, const void *b)
{
	unsigned long x = strtoul(*(char *const *)a, NULL, 10), y = strtoul(*(char *const *)b, NULL, 10);
	return x < y ? -1 : x > y;
}

/* The Hub's multipart form: header = {"chunk_size": "N", "00001": URL, ...}.  Part keys are
 * sorted numerically (huggingface_hub: int(key)); there must be ceil(size / chunk) of them. */
static int parse_multipart(json_t *upload, struct task *t)
{
	json_t *hdr = json_object_get(upload, "header"), *v;
	const char *k, *cs = json_string_value(json_object_get(hdr, "chunk_size"));
	char **keys;
	size_t n = 0, want;

	t->chunk = cs ? strtoull(cs, NULL, 10) : 0;
	if (json_is_integer(json_object_get(hdr, "chunk_size")))
		t->chunk = (unsigned long long)json_integer_value(json_object_get(hdr, "chunk_size"));
	if (!t->chunk)
		return errf(t->err, sizeof t->err, "%s: multipart answer without a chunk_size", t->obj->name);
	keys = calloc(json_object_size(hdr) + 1, sizeof *keys);
	json_object_foreach(hdr, k, v)
		if (*k && strspn(k, "0123456789") == strlen(k) && json_is_string(v))
			keys[n++] = (char *)k;
	qsort(keys, n, sizeof *keys, cmp_part);
	want = t->obj->size ? (size_t)((t->obj->size + t->chunk - 1) / t->chunk) : 1;
	if (n != want) {
		free(keys);
		return errf(t->err, sizeof t->err, "%s: multipart answer has %zu parts for %llu bytes in "
			    "chunks of %llu (expected %zu)", t->obj->name, n, t->obj->size, t->chunk, want);
	}
	t->parts = calloc(n, sizeof *t->parts);
	for (size_t i = 0; i < n; i++)
		t->parts[i] = strdup(json_string_value(json_object_get(hdr, keys[i])));
	t->nparts = n;
	free(keys);
	return 0;
}

/* Once per task, run or not: what it was asked to send becomes what it sent, so that at the end
 * the bytes asked equal the bytes sent (a failed or unattempted upload's rest is sent by a
 * later round, which asks for it again). */
static void task_free(struct task *t)
{
	__atomic_add_fetch(&bytes_asked, t->wire, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&bytes_asked, t->obj->size, __ATOMIC_RELAXED);
	free(t->upload.href);
	free(t->verify.href);
	curl_slist_free_all(t->upload.headers);
	curl_slist_free_all(t->verify.headers);
	for (size_t i = 0; i < t->nparts; i++)
		free(t->parts[i]);
	free(t->parts);
}

/* The batch API's answer for objs[idx[0..n)]: appends an upload task for each object the server
 * wants, marks those it has done.  Everything in the answer is checked (it comes from the
 * network): a missing object is TRANSIENT, a refusal or an unusable action FATAL. */
static enum outcome batch_answer(const char *body, const char *endpoint, struct batch_object *objs,
				 const size_t *idx, size_t n, int *done, struct task *tasks,
				 size_t *ntasks, struct batch_result *res, char *err, size_t errlen)
{
	json_t *ans = json_loads(body, 0, NULL), *list;
	enum outcome out;
	size_t i, k;

	list = json_object_get(ans, "objects");
	if (!json_is_array(list)) {
		json_decref(ans);
		errf(err, errlen, "LFS batch request: the answer from %s is not a batch response", endpoint);
		return TRANSIENT;
	}
	const char *transfer = json_string_value(json_object_get(ans, "transfer"));
	out = OK;
	for (i = 0; i < n; i++) {
		struct batch_object *ob = &objs[idx[i]];
		json_t *jo = NULL, *v, *acts, *up;
		json_array_foreach(list, k, v) {
			const char *oid = json_string_value(json_object_get(v, "oid"));
			if (oid && strcmp(oid, ob->oid) == 0) {
				jo = v;
				break;
			}
		}
		if (!jo) {
			errf(err, errlen, "LFS batch request: the answer does not mention %s (%s)", ob->name, ob->oid);
			out = TRANSIENT;
			continue;
		}
		if ((v = json_object_get(jo, "error"))) {
			const char *m = json_string_value(json_object_get(v, "message"));
			errf(err, errlen, "the LFS server refused %s (%s): %lld %s", ob->name, ob->oid,
			     (long long)json_integer_value(json_object_get(v, "code")), m ? m : "");
			token_scrub(err);
			json_decref(ans);
			return FATAL;
		}
		acts = json_object_get(jo, "actions");
		up = json_object_get(acts, "upload");
		if (!up) {  /* the server has it */
			done[idx[i]] = 1;
			res->present++;
			continue;
		}
		struct task *t = &tasks[(*ntasks)++];
		memset(t, 0, sizeof *t);
		t->obj = ob;
		__atomic_add_fetch(&bytes_asked, ob->size, __ATOMIC_RELAXED);
		t->res = TRANSIENT;  /* until a worker says otherwise: an auth failure stops the round */
		snprintf(t->err, sizeof t->err, "upload of %s: not attempted", ob->name);
		t->authenticated = json_is_true(json_object_get(jo, "authenticated"));
		int multipart = (transfer && strcmp(transfer, "multipart") == 0) ||
				json_object_get(json_object_get(up, "header"), "chunk_size");
		if (multipart) {
			t->upload.href = strdup(json_string_value(json_object_get(up, "href")) ?: "");
			if (parse_multipart(up, t) < 0 || !t->upload.href[0]) {
				snprintf(err, errlen, "%s", t->err[0] ? t->err : "multipart answer without href");
				json_decref(ans);
				return FATAL;
			}
		} else if (parse_action(up, &t->upload) < 0) {
			errf(err, errlen, "LFS batch request: upload action without href for %s", ob->name);
			json_decref(ans);
			return FATAL;
		}
		if ((v = json_object_get(acts, "verify")) && parse_action(v, &t->verify) == 0)
			t->has_verify = 1;
	}
	json_decref(ans);
	return out;
}


/* One batch call for objs[idx[0..n)]: appends upload tasks, marks present objects done. */
static enum outcome batch_call(CURL *h, const struct batch_opts *o, struct batch_object *objs,
			       const size_t *idx, size_t n, int *done, struct task *tasks,
			       size_t *ntasks, struct batch_result *res, char *err, size_t errlen)
{
	json_t *req = json_object(), *arr = json_array();
	struct resp r = {0};
	char url[4096], *text;
	enum outcome out;
	size_t i;

	for (i = 0; i < n; i++)
		json_array_append_new(arr, json_pack("{s:s,s:I}", "oid", objs[idx[i]].oid, "size",
						     (json_int_t)objs[idx[i]].size));
	json_object_set_new(req, "operation", json_string("upload"));
	json_object_set_new(req, "transfers", json_pack("[s,s]", "basic", "multipart"));
	json_object_set_new(req, "ref", json_pack("{s:s}", "name", o->ref));
	json_object_set_new(req, "objects", arr);
	json_object_set_new(req, "hash_algo", json_string("sha256"));
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	snprintf(url, sizeof url, "%s/objects/batch", o->endpoint);
	out = http(h, o, "POST", url, NULL, 1, text, NULL, &r, 1, "LFS batch request", err, errlen);
	free(text);
	if (out != OK) {
		free(r.body);
		return out;
	}
	out = batch_answer(r.body ? r.body : "", o->endpoint, objs, idx, n, done, tasks, ntasks, res,
			   err, errlen);
	free(r.body);
	return out;
}

int batch_parse_answer(const char *body, struct batch_object *objs, size_t n, char *err,
		       size_t errlen)
{
	int *done = calloc(n + 1, sizeof *done);
	size_t *idx = calloc(n + 1, sizeof *idx), ntasks = 0;
	struct task *tasks = calloc(n + 1, sizeof *tasks);
	struct batch_result res = {0};
	enum outcome out = FATAL;
	if (done && idx && tasks) {
		for (size_t i = 0; i < n; i++)
			idx[i] = i;
		out = batch_answer(body, "the server", objs, idx, n, done, tasks, &ntasks, &res, err,
				   errlen);
	}
	for (size_t i = 0; i < ntasks; i++)
		task_free(&tasks[i]);
	free(done);
	free(idx);
	free(tasks);
	return out == OK ? 0 : -1;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int batch_upload(const struct batch_opts *o, struct batch_object *objs, size_t n,
		 struct batch_result *res, char *err, size_t errlen)
{
	int *done = calloc(n + 1, sizeof *done);
	size_t *idx = calloc(n + 1, sizeof *idx);
	struct task *tasks = calloc(n + 1, sizeof *tasks);
	CURL *h = curl_easy_init();
	int rc = -1;

	memset(res, 0, sizeof *res);
	if (!done || !idx || !tasks || !h) {
		xalloc_err(err, errlen, "the upload's task list and curl handle",
			   (n + 1) * (sizeof *done + sizeof *idx + sizeof *tasks));
		goto out;
	}
	for (int attempt = 0;; attempt++) {
		size_t npend = 0, ntasks = 0;
		enum outcome worst = OK;
		char lasterr[1024] = "";

		res->attempts = attempt + 1;
		for (size_t i = 0; i < n; i++)
			if (!done[i])
				idx[npend++] = i;
		/* 1. ask, PER_BATCH objects at a time */
		for (size_t i = 0; i < npend && worst != AUTH && worst != FATAL; i += PER_BATCH) {
			size_t m = npend - i < PER_BATCH ? npend - i : PER_BATCH;
			enum outcome b = batch_call(h, o, objs, idx + i, m, done, tasks, &ntasks, res,
						    lasterr, sizeof lasterr);
			if (b > worst)
				worst = b;
		}
		/* 2. upload what the server asked for, in parallel */
		if (ntasks && worst != AUTH && worst != FATAL) {
			struct round rd = {o, tasks, ntasks, 0, 0, PTHREAD_MUTEX_INITIALIZER};
			int nth = o->jobs < 1 ? 1 : (size_t)o->jobs > ntasks ? (int)ntasks : o->jobs;
			pthread_t th[64];
			if (nth > 64)
				nth = 64;
			for (int i = 0; i < nth; i++)
				if (pthread_create(&th[i], NULL, worker, &rd) != 0)
					nth = i;
			if (nth == 0)
				worker(&rd);
			for (int i = 0; i < nth; i++)
				pthread_join(th[i], NULL);
			for (size_t i = 0; i < ntasks; i++) {
				struct task *t = &tasks[i];
				if (t->res == OK) {
					done[t->obj - objs] = 1;
					res->uploaded++;
				}
				res->bytes += t->sent;
				if (t->res > worst || (t->res == worst && t->res != OK && !lasterr[0])) {
					worst = t->res;
					snprintf(lasterr, sizeof lasterr, "%s", t->err);
				}
			}
		}
		for (size_t i = 0; i < ntasks; i++)
			task_free(&tasks[i]);
		if (worst == OK) {
			rc = 0;
			break;
		}
		if (worst == AUTH || worst == FATAL || attempt >= o->retries) {
			res->auth_failed = worst == AUTH;
			if (worst == TRANSIENT && attempt > 0)
				errf(err, errlen, "%s (gave up after %d attempts)", lasterr, attempt + 1);
			else
				errf(err, errlen, "%s", lasterr);
			break;
		}
		double wait = o->retry_delay * (double)(1u << (attempt < 16 ? attempt : 16));
		token_say("LFS upload: %s; retrying in %.3g s (attempt %d of %d)", lasterr, wait,
			  attempt + 2, o->retries + 1);
		sleep_s(wait);
	}
out:
	curl_easy_cleanup(h);
	free(done);
	free(idx);
	free(tasks);
	return rc;
}

/* --- uploads that start early ---------------------------------------------------------------- */

struct batch_session {
	struct batch_opts o;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct batch_object *q;
	size_t nq, cap, next;
	int closing, stop;
	struct batch_result res;
	char err[1024];
	pthread_t th[64];
	int nth;
};

static void *session_worker(void *arg)
{
	struct batch_session *s = arg;
	CURL *h = curl_easy_init();

	for (;;) {
		struct batch_object ob;
		struct task t;
		struct batch_result r = {0};
		size_t idx = 0, ntasks = 0;
		int done = 0;
		char err[1024] = "";

		pthread_mutex_lock(&s->mu);
		while (s->next == s->nq && !s->closing && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->stop || s->next == s->nq) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		ob = s->q[s->next++];  /* a copy: the queue may move when it grows */
		pthread_mutex_unlock(&s->mu);
		if (!h)
			continue;
		enum outcome res = batch_call(h, &s->o, &ob, &idx, 1, &done, &t, &ntasks, &r, err, sizeof err);
		if (res == OK && ntasks) {
			run_task(h, &s->o, &t);
			res = t.res;
			snprintf(err, sizeof err, "%s", t.err);
		}
		pthread_mutex_lock(&s->mu);
		if (res == OK && ntasks) {
			s->res.uploaded++;
			s->res.bytes += t.sent;
		} else if (res == AUTH && !s->stop) {
			s->stop = 1;
			snprintf(s->err, sizeof s->err, "%s", err);
			pthread_cond_broadcast(&s->cv);
		} else if (res != OK && s->o.verbose) {
			token_say("%s (tried again after the commit)", err);
		}
		pthread_mutex_unlock(&s->mu);
		if (ntasks)
			task_free(&t);
	}
	curl_easy_cleanup(h);
	return NULL;
}

struct batch_session *batch_begin(const struct batch_opts *o)
{
	struct batch_session *s = calloc(1, sizeof *s);
	int n = o->jobs < 1 ? 1 : o->jobs > 64 ? 64 : o->jobs;

	if (!s)
		return NULL;
	s->o = *o;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	for (s->nth = 0; s->nth < n; s->nth++)
		if (pthread_create(&s->th[s->nth], NULL, session_worker, s) != 0)
			break;
	return s;
}

void batch_add(struct batch_session *s, const char *oid, unsigned long long size, const char *file,
	       const char *name)
{
	pthread_mutex_lock(&s->mu);
	if (s->nq == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct batch_object *q = realloc(s->q, cap * sizeof *q);
		if (!q) {
			pthread_mutex_unlock(&s->mu);
			return;  /* batch_upload() will send it */
		}
		s->q = q;
		s->cap = cap;
	}
	snprintf(s->q[s->nq].oid, sizeof s->q[s->nq].oid, "%s", oid);
	s->q[s->nq].size = size;
	s->q[s->nq].file = strdup(file);
	s->q[s->nq].name = strdup(name);
	s->nq++;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

int batch_end(struct batch_session *s, struct batch_result *r, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&s->mu);
	s->closing = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < s->nth; i++)
		pthread_join(s->th[i], NULL);
	*r = s->res;
	r->auth_failed = s->stop;
	rc = s->stop ? errf(err, errlen, "%s", s->err) : 0;
	for (size_t i = 0; i < s->nq; i++) {
		free(s->q[i].file);
		free(s->q[i].name);
	}
	free(s->q);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return rc;
}
