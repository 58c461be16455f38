/* mail - plain-text alert mail over SMTP, through libcurl.
 *
 * The old scripts hard-coded smtplib.SMTP("localhost") and their addresses; here the server is a
 * URL (smtp://host:port, or smtps:// for implicit TLS) and everything secret lives in a file that
 * only its owner should read, never in argv where `ps` shows it to every user of the login node:
 *
 *     # ~/.config/lmtk/smtp      (chmod 600)
 *     user      bot@example.org
 *     password  s3cret
 *     tls       required        # none | try | required (STARTTLS on smtp://)
 *     cacert    /etc/ssl/certs/my-ca.pem
 *
 * Subjects with non-ASCII characters are RFC 2047 encoded; the body is UTF-8 text. */
#ifndef LMTK_MAIL_H
#define LMTK_MAIL_H

#include <stddef.h>

struct mail_cfg {
	const char *url;        /* default smtp://localhost:25 */
	const char *from;       /* default USER@HOSTNAME */
	const char **to;
	int nto;
	const char *auth_file;  /* NULL: no auth, opportunistic STARTTLS */
};

/* Sends one mail to every cfg->to.  0, or -1 with err filled (never containing the password). */
int mail_send(const struct mail_cfg *cfg, const char *subject, const char *body,
	      char *err, size_t errlen);

#endif
