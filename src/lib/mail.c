#include "mail.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "xalloc.h"

struct auth {
	char user[256], password[512], cacert[1024];
	long tls;
	int insecure;
};

static int auth_load(const char *path, struct auth *a, char *err, size_t errlen)
{
	FILE *f;
	char line[2048];
	int lineno = 0;
	struct stat st;

	a->tls = CURLUSESSL_TRY;
	if (!path)
		return 0;
	f = fopen(path, "r");
	if (!f)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
		warn("%s: readable by others (mode %03o); chmod 600 it", path, st.st_mode & 0777);
	while (fgets(line, sizeof line, f)) {
		char *k = line, *v, *e;
		lineno++;
		while (isspace((unsigned char)*k))
			k++;
		if (!*k || *k == '#')
			continue;
		for (v = k; *v && !isspace((unsigned char)*v); v++)
			;
		if (*v)
			*v++ = '\0';
		while (isspace((unsigned char)*v))
			v++;
		e = v + strlen(v);
		while (e > v && isspace((unsigned char)e[-1]))
			*--e = '\0';
		if (strcmp(k, "user") == 0)
			snprintf(a->user, sizeof a->user, "%s", v);
		else if (strcmp(k, "password") == 0)
			snprintf(a->password, sizeof a->password, "%s", v);
		else if (strcmp(k, "cacert") == 0)
			snprintf(a->cacert, sizeof a->cacert, "%s", v);
		else if (strcmp(k, "insecure") == 0)
			a->insecure = strcmp(v, "yes") == 0 || strcmp(v, "1") == 0;
		else if (strcmp(k, "tls") == 0) {
			if (strcmp(v, "none") == 0)
				a->tls = CURLUSESSL_NONE;
			else if (strcmp(v, "try") == 0)
				a->tls = CURLUSESSL_TRY;
			else if (strcmp(v, "required") == 0)
				a->tls = CURLUSESSL_ALL;
			else {
				fclose(f);
				return errf(err, errlen, "%s:%d: tls must be none, try or required", path, lineno);
			}
		} else {
			fclose(f);
			return errf(err, errlen, "%s:%d: unknown setting '%s' (user, password, tls, cacert, insecure)",
				    path, lineno, k);
		}
	}
	fclose(f);
	return 0;
}

static void b64(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i;
	for (i = 0; i + 2 < n; i += 3) {
		*out++ = tab[in[i] >> 2];
		*out++ = tab[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
		*out++ = tab[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)];
		*out++ = tab[in[i + 2] & 63];
	}
	if (i < n) {
		*out++ = tab[in[i] >> 2];
		if (i + 1 < n) {
			*out++ = tab[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
			*out++ = tab[(in[i + 1] & 15) << 2];
		} else {
			*out++ = tab[(in[i] & 3) << 4];
			*out++ = '=';
		}
		*out++ = '=';
	}
	*out = '\0';
}

/* A header value: as is when printable ASCII, else one RFC 2047 encoded word. */
static char *header_value(const char *s)
{
	int plain = 1;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p >= 0x7f)
			plain = 0;
	if (plain)
		return strdup(s);
	size_t n = strlen(s);
	char *enc = malloc(4 * (n / 3 + 1) + 1), *out = NULL;
	if (!enc)
		return NULL;
	b64((const unsigned char *)s, n, enc);
	if (asprintf(&out, "=?UTF-8?B?%s?=", enc) < 0)
		out = NULL;
	free(enc);
	return out;
}

/* The body with bare LFs turned into CRLF, as SMTP wants. */
static char *crlf(const char *s)
{
	size_t n = 0;
	for (const char *p = s; *p; p++)
		n += *p == '\n' ? 2 : 1;
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (const char *p = s; *p; p++) {
		if (*p == '\n' && (p == s || p[-1] != '\r'))
			*o++ = '\r';
		*o++ = *p;
	}
	*o = '\0';
	return out;
}

struct src {
	const char *p;
	size_t left;
};

static size_t feed(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct src *s = arg;
	size_t n = size * nmemb < s->left ? size * nmemb : s->left;
	memcpy(buf, s->p, n);
	s->p += n;
	s->left -= n;
	return n;
}

int mail_send(const struct mail_cfg *cfg, const char *subject, const char *body,
	      char *err, size_t errlen)
{
	struct auth a = {0};
	char from[512], date[64], host[256] = "localhost", curlerr[CURL_ERROR_SIZE] = "";
	char *subj = NULL, *text = NULL, *msg = NULL, *to_hdr = NULL;
	struct curl_slist *rcpt = NULL;
	CURL *c = NULL;
	CURLcode cc;
	int rc = -1;
	time_t now = time(NULL);
	struct tm tm;

	if (cfg->nto <= 0)
		return 0;
	if (auth_load(cfg->auth_file, &a, err, errlen) < 0)
		goto out;  /* a bad line after "password" still leaves it in `a`: wipe it too */
	gethostname(host, sizeof host - 1);
	if (cfg->from)
		snprintf(from, sizeof from, "%s", cfg->from);
	else {
		struct passwd *pw = getpwuid(getuid());
		snprintf(from, sizeof from, "%s@%s", pw ? pw->pw_name : "lmtk", host);
	}
	gmtime_r(&now, &tm);
	strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S +0000", &tm);

	size_t tl = 1;
	for (int i = 0; i < cfg->nto; i++)
		tl += strlen(cfg->to[i]) + 2;
	to_hdr = calloc(1, tl);
	for (int i = 0; to_hdr && i < cfg->nto; i++) {
		if (i)
			strcat(to_hdr, ", ");
		strcat(to_hdr, cfg->to[i]);
	}
	subj = header_value(subject);
	text = crlf(body);
	if (!to_hdr || !subj || !text ||
	    asprintf(&msg, "Date: %s\r\nFrom: %s\r\nTo: %s\r\nSubject: %s\r\n"
		     "Message-ID: <%ld.%d.lmtk@%s>\r\nMIME-Version: 1.0\r\n"
		     "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n"
		     "X-Mailer: %s (lmtk) %s\r\n\r\n%s\r\n",
		     date, from, to_hdr, subj, (long)now, (int)getpid(), host, prog_name,
		     LMTK_VERSION, text) < 0) {
		msg = NULL;
		xalloc_err(err, errlen, "the mail's headers and text", 0);
		goto out;
	}

	c = curl_easy_init();
	if (!c) {
		errf(err, errlen, "curl_easy_init failed");
		goto out;
	}
	for (int i = 0; i < cfg->nto; i++)
		rcpt = curl_slist_append(rcpt, cfg->to[i]);
	struct src s = {msg, strlen(msg)};
	curl_easy_setopt(c, CURLOPT_URL, cfg->url ? cfg->url : "smtp://localhost:25");
	curl_easy_setopt(c, CURLOPT_MAIL_FROM, from);
	curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, feed);
	curl_easy_setopt(c, CURLOPT_READDATA, &s);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_USE_SSL, a.tls);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curlerr);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (a.user[0])
		curl_easy_setopt(c, CURLOPT_USERNAME, a.user);
	if (a.password[0])
		curl_easy_setopt(c, CURLOPT_PASSWORD, a.password);
	if (a.cacert[0])
		curl_easy_setopt(c, CURLOPT_CAINFO, a.cacert);
	if (a.insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	cc = curl_easy_perform(c);
	if (cc != CURLE_OK)
		errf(err, errlen, "mail to %s via %s failed: %s", to_hdr,
		     cfg->url ? cfg->url : "smtp://localhost:25", curlerr[0] ? curlerr : curl_easy_strerror(cc));
	else
		rc = 0;
out:
	explicit_bzero(a.password, sizeof a.password);
	curl_slist_free_all(rcpt);
	if (c)
		curl_easy_cleanup(c);
	free(subj);
	free(text);
	free(msg);
	free(to_hdr);
	return rc;
}
