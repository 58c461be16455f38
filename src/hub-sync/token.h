/* token - the Hub token: where it may come from, and keeping it out of every message.
 *
 * The old sync script put the token into the push URL, so it landed in .git/config and in
 * git's error output.  Here it comes only from a file (--token-file, first line, mode checked)
 * or from $HF_TOKEN, lives in one static buffer, and leaves the process only inside HTTP
 * Authorization headers (libcurl, libgit2's credential callback).  Every message hub-sync prints
 * goes through token_say(), which replaces the token and anything that carries credentials in
 * a URL ("https://user:secret@host") with "***", so even a library error message that
 * echoes a URL cannot leak it. */
#ifndef HUBSYNC_TOKEN_H
#define HUBSYNC_TOKEN_H

#include <stddef.h>

/* Loads the token from `file` (if non-NULL) else $HF_TOKEN.  0 (token_get() may then be NULL:
 * no token given, fine for dry runs and anonymous servers), or -1 + err. */
int token_load(const char *file, char *err, size_t errlen);
const char *token_get(void);

/* Rewrites s in place: the token and URL passwords become "***". */
void token_scrub(char *s);

/* warn() after token_scrub() */
void token_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* 1 if url carries a password ("scheme://user:pass@host..."); URLs with only a user name are
 * fine (the name is used for HTTP Basic) */
int token_url_has_password(const char *url);

#endif
