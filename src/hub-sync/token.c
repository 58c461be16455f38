#include "token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "msg.h"

static char token[4096];

int token_load(const char *file, char *err, size_t errlen)
{
	const char *env = getenv("HF_TOKEN");
	size_t n;

	token[0] = '\0';
	if (file) {
		struct stat st;
		ssize_t got;
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return errf(err, errlen, "%s: %s", file, strerror(errno));
		if (fstat(fd, &st) == 0 && (st.st_mode & 0077))
			warn("%s: readable by group or others (mode %03o); chmod 600 it",
			     file, (unsigned)st.st_mode & 0777);
		got = read(fd, token, sizeof token - 1);
		close(fd);
		if (got < 0)
			return errf(err, errlen, "%s: %s", file, strerror(errno));
		token[got] = '\0';
		token[strcspn(token, "\r\n")] = '\0';  /* first line only */
		if (!token[0])
			return errf(err, errlen, "%s: empty token file", file);
	} else if (env && *env) {
		if (strlen(env) >= sizeof token)
			return errf(err, errlen, "HF_TOKEN is too long");
		strcpy(token, env);
		token[strcspn(token, "\r\n")] = '\0';
	}
	/* surrounding blanks are an editor's, never the token's */
	n = strlen(token);
	while (n && (token[n - 1] == ' ' || token[n - 1] == '\t'))
		token[--n] = '\0';
	if (token[0] == ' ' || token[0] == '\t')
		memmove(token, token + strspn(token, " \t"), strlen(token + strspn(token, " \t")) + 1);
	return 0;
}

const char *token_get(void)
{
	return token[0] ? token : NULL;
}

static void replace_all(char *s, const char *needle)
{
	size_t nl = strlen(needle);
	char *p;

	if (nl < 4)
		return;  /* too short to be a token; scrubbing it would garble messages */
	while ((p = strstr(s, needle))) {
		memcpy(p, "***", 3);
		memmove(p + 3, p + nl, strlen(p + nl) + 1);
	}
}

void token_scrub(char *s)
{
	char *p = s;

	if (token[0])
		replace_all(s, token);
	/* "scheme://user:password@" -> "scheme://user:***@" */
	while ((p = strstr(p, "://"))) {
		char *auth = p + 3, *end = auth + strcspn(auth, "/@ \t\n'\""), *colon;
		if (*end == '@' && (colon = memchr(auth, ':', (size_t)(end - auth))) && end - colon > 1) {
			if (end - colon > 3) {  /* never grows the string */
				memmove(colon + 4, end, strlen(end) + 1);
				memcpy(colon + 1, "***", 3);
			} else {
				memset(colon + 1, '*', (size_t)(end - colon - 1));
			}
		}
		p = auth;
	}
}

void token_say(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	token_scrub(buf);
	warn("%s", buf);
}

int token_url_has_password(const char *url)
{
	const char *p = strstr(url, "://"), *end, *colon;

	if (!p)
		return 0;
	p += 3;
	end = p + strcspn(p, "/@");
	if (*end != '@')
		return 0;
	colon = memchr(p, ':', (size_t)(end - p));
	return colon != NULL;
}
