/* lib_mail.c - mail_send against the SMTP sink of tests/run.sh (LMTK_SMTP_PORT, LMTK_SMTP_DIR):
 * what arrives is checked byte for byte in the stored NNNNNN.eml files. */
#include "t.h"
#include "mail.h"
#include "msg.h"
#include "file.h"

#include <fcntl.h>
#include <glob.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *sink_dir;
static char url[128], top[4096];

static void mail_clear(void)
{
	char pat[4200];
	glob_t g;
	snprintf(pat, sizeof pat, "%s/*.eml", sink_dir);
	if (glob(pat, 0, NULL, &g) == 0)
		for (size_t i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
	globfree(&g);
}

/* the mails stored so far, oldest first (the sink numbers them) */
static int mail_count(void)
{
	char pat[4200];
	glob_t g;
	int n = 0;
	snprintf(pat, sizeof pat, "%s/*.eml", sink_dir);
	if (glob(pat, 0, NULL, &g) == 0)
		n = (int)g.gl_pathc;
	globfree(&g);
	return n;
}

/* the sink stores a mail before it answers 250, so it is there when mail_send returns; polling a
 * little covers a slow disk */
static int mail_wait(int want)
{
	for (int i = 0; i < 50 && mail_count() < want; i++)
		usleep(100000);
	return mail_count();
}

/* the i-th stored mail, malloc'd (NULL if there is none) */
static char *mail_get(int i)
{
	char pat[4200], *s = NULL, err[512];
	glob_t g;
	snprintf(pat, sizeof pat, "%s/*.eml", sink_dir);
	if (glob(pat, 0, NULL, &g) == 0 && (size_t)i < g.gl_pathc)
		if (file_read_all(g.gl_pathv[i], &s, NULL, err, sizeof err) < 0)
			s = NULL;
	globfree(&g);
	return s;
}

/* the value of header `name` (up to its CRLF) in the header part of mail m */
static char *header(const char *m, const char *name)
{
	static char v[4096];
	size_t n = strlen(name);
	const char *end = strstr(m, "\r\n\r\n");
	for (const char *p = m; p && (!end || p < end); p = strstr(p, "\r\n"), p = p ? p + 2 : NULL)
		if (strncasecmp(p, name, n) == 0 && p[n] == ':' && p[n + 1] == ' ') {
			const char *val = p + n + 2, *e = strstr(val, "\r\n");
			snprintf(v, sizeof v, "%.*s", (int)(e ? e - val : (long)strlen(val)), val);
			return v;
		}
	return NULL;
}

static const char *body_of(const char *m)
{
	const char *b = strstr(m, "\r\n\r\n");
	return b ? b + 4 : "";
}

/* RFC 4648 base64 decoding; -1 on a character outside the alphabet */
static int unb64(const char *in, size_t n, char *out, size_t *outlen)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned acc = 0;
	int bits = 0;
	size_t o = 0;
	for (size_t i = 0; i < n && in[i] != '='; i++) {
		const char *p = strchr(tab, in[i]);
		if (!p || !in[i])
			return -1;
		acc = acc << 6 | (unsigned)(p - tab);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)(acc >> bits & 0xff);
		}
	}
	out[o] = '\0';
	*outlen = o;
	return 0;
}

/* the subject as a reader sees it: one RFC 2047 =?UTF-8?B?...?= word decoded, or as is */
static int subject_decodes_to(const char *value, const char *want)
{
	char dec[4096];
	size_t n, vl = strlen(value);
	if (strncmp(value, "=?UTF-8?B?", 10) != 0 || vl < 12 || strcmp(value + vl - 2, "?=") != 0)
		return 0;
	if (unb64(value + 10, vl - 12, dec, &n) < 0)
		return 0;
	return n == strlen(want) && memcmp(dec, want, n) == 0;
}

static int send1(const char *subject, const char *body, char *err, size_t errlen)
{
	const char *to[] = {"ops@example.org"};
	struct mail_cfg c = {url, "watchdog@example.org", to, 1, NULL};
	return mail_send(&c, subject, body, err, errlen);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	char err[512];
	if (file_write_atomic(path, text, strlen(text), mode, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		exit(2);
	}
}

/* stderr to a file while fn-like code runs between the two */
static int saved_err = -1;
static char errfile[4300];
static void err_begin(void)
{
	fflush(stderr);
	int fd = open(errfile, O_RDWR | O_CREAT | O_TRUNC, 0600);
	saved_err = dup(2);
	dup2(fd, 2);
	close(fd);
}
static char *err_end(void)
{
	char *s = NULL, e[512];
	fflush(stderr);
	dup2(saved_err, 2);
	close(saved_err);
	if (file_read_all(errfile, &s, NULL, e, sizeof e) < 0)
		s = strdup("");
	return s;
}

int main(void)
{
	const char *port = getenv("LMTK_SMTP_PORT"), *tmp = getenv("LMTK_TMP");
	char err[2048], auth[4300], want[8400], *m;
	int sink = port && *port && getenv("LMTK_SMTP_DIR");

	snprintf(top, sizeof top, "%s/lib_mail.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		perror(top);
		return 2;
	}
	snprintf(auth, sizeof auth, "%s/smtp-auth", top);
	snprintf(errfile, sizeof errfile, "%s/stderr", top);
	msg_init("lib_mail");
	sink_dir = getenv("LMTK_SMTP_DIR");
	if (sink)
		snprintf(url, sizeof url, "smtp://127.0.0.1:%s", port);

	/* --- through the sink ---------------------------------------------------------------- */
	static const char *const needs_sink[] = {
		"mail_plain_subject_headers_and_envelope_as_given",
		"mail_non_ascii_subject_is_rfc2047_encoded",
		"mail_subject_line_break_cannot_inject_a_header",
		"mail_bare_lf_body_becomes_crlf_on_the_wire",
		"mail_existing_crlf_is_not_doubled",
		"mail_lines_starting_with_a_dot_survive",
		"mail_no_recipients_sends_nothing",
	};
	if (!sink) {
		for (size_t i = 0; i < sizeof needs_sink / sizeof *needs_sink; i++)
			printf("skip %s: no SMTP sink\n", needs_sink[i]);
	} else {
		T_CASE("mail_plain_subject_headers_and_envelope_as_given") {
			const char *to[] = {"a@example.org", "b@example.net"};
			struct mail_cfg c = {url, "bot@example.org", to, 2, NULL};
			mail_clear();
			T_ASSERT(mail_send(&c, "[ALERT] disk full", "body\n", err, sizeof err) == 0);
			T_ASSERT(mail_wait(1) == 1);
			m = mail_get(0);
			T_ASSERT(m != NULL);
			if (m) {
				T_ASSERT(strncmp(m, "X-Envelope-From: bot@example.org\r\n"
						 "X-Envelope-To: a@example.org, b@example.net\r\n", 79) == 0);
				T_ASSERT(header(m, "Subject") && strcmp(header(m, "Subject"), "[ALERT] disk full") == 0);
				T_ASSERT(header(m, "From") && strcmp(header(m, "From"), "bot@example.org") == 0);
				T_ASSERT(header(m, "To") && strcmp(header(m, "To"), "a@example.org, b@example.net") == 0);
				T_ASSERT(header(m, "Date") != NULL);
				T_ASSERT(header(m, "Message-ID") != NULL);
				T_ASSERT(header(m, "Content-Type") && strstr(header(m, "Content-Type"), "charset=utf-8"));
				T_STREQ(body_of(m), "body\r\n\r\n");
			}
			free(m);
		}

		T_CASE("mail_non_ascii_subject_is_rfc2047_encoded") {
			/* three lengths, so that every base64 padding case (none, ==, =) is seen */
			static const char *const subj[] = {
				"Platte voll: /work zu 95 % \xe2\x80\x94 \xc3\x84rger",     /* 36 bytes */
				"\xc3\xa9t\xc3\xa9 \xe2\x9c\x93",                           /* 10 bytes */
				"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e: GPU \xe2\x9a\xa0",    /* 20 bytes */
			};
			mail_clear();
			for (int i = 0; i < 3; i++)
				T_ASSERT(send1(subj[i], "x", err, sizeof err) == 0);
			T_ASSERT(mail_wait(3) == 3);
			for (int i = 0; i < 3; i++) {
				m = mail_get(i);
				const char *h = m ? header(m, "Subject") : NULL;
				T_ASSERT(h != NULL);
				if (h) {
					for (const char *p = h; *p; p++)
						T_ASSERT(*p > 0x20 && *p < 0x7f);
					T_ASSERT(subject_decodes_to(h, subj[i]));
				}
				free(m);
			}
		}

		T_CASE("mail_subject_line_break_cannot_inject_a_header") {
			const char *evil = "hello\r\nBcc: victim@example.org";
			mail_clear();
			T_ASSERT(send1(evil, "x", err, sizeof err) == 0);
			T_ASSERT(mail_wait(1) == 1);
			m = mail_get(0);
			T_ASSERT(m && header(m, "Bcc") == NULL);
			T_ASSERT(m && header(m, "Subject") && subject_decodes_to(header(m, "Subject"), evil));
			T_ASSERT(m && strstr(m, "X-Envelope-To: ops@example.org\r\n") != NULL);
			free(m);
		}

		T_CASE("mail_bare_lf_body_becomes_crlf_on_the_wire") {
			mail_clear();
			T_ASSERT(send1("lf", "line1\nline2\n\nline4\n", err, sizeof err) == 0);
			T_ASSERT(mail_wait(1) == 1);
			m = mail_get(0);
			T_ASSERT(m != NULL);
			if (m) {
				T_STREQ(body_of(m), "line1\r\nline2\r\n\r\nline4\r\n\r\n");
				for (const char *p = m; (p = strchr(p, '\n')); p++)
					T_ASSERT(p > m && p[-1] == '\r');
			}
			free(m);
		}

		T_CASE("mail_existing_crlf_is_not_doubled") {
			mail_clear();
			T_ASSERT(send1("crlf", "a\r\nb\nc", err, sizeof err) == 0);
			T_ASSERT(mail_wait(1) == 1);
			m = mail_get(0);
			T_ASSERT(m && strcmp(body_of(m), "a\r\nb\r\nc\r\n") == 0);
			free(m);
		}

		T_CASE("mail_lines_starting_with_a_dot_survive") {
			/* a lone "." would end the DATA phase early; ".x" would lose its dot unless stuffed */
			mail_clear();
			T_ASSERT(send1("dots", ".hidden\nmiddle\n.\n..two\nend", err, sizeof err) == 0);
			T_ASSERT(mail_wait(1) == 1);
			m = mail_get(0);
			T_ASSERT(m && strcmp(body_of(m), ".hidden\r\nmiddle\r\n.\r\n..two\r\nend\r\n") == 0);
			free(m);
		}

		T_CASE("mail_no_recipients_sends_nothing") {
			struct mail_cfg c = {url, NULL, NULL, 0, NULL};
			mail_clear();
			T_ASSERT(mail_send(&c, "nobody", "x", err, sizeof err) == 0);
			usleep(200000);
			T_ASSERT(mail_count() == 0);
		}
	}

	/* --- the auth file and failures: no server needed ------------------------------------ */

	T_CASE("mail_auth_file_unknown_key_names_file_and_line_not_the_value") {
		/* a typo'd "password" line: the error must not echo its secret */
		const char *to[] = {"ops@example.org"};
		struct mail_cfg c = {"smtp://127.0.0.1:1", "x@y", to, 1, auth};
		write_file(auth, "# smtp credentials\nuser bob\n\npasword hunter2-secret\n", 0600);
		err[0] = '\0';
		T_ASSERT(mail_send(&c, "s", "b", err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:4: ", auth);
		T_ASSERT(strncmp(err, want, strlen(want)) == 0);
		T_ASSERT(strstr(err, "pasword") != NULL);
		T_ASSERT(strstr(err, "hunter2") == NULL);
	}

	T_CASE("mail_auth_file_bad_tls_value_names_file_and_line") {
		const char *to[] = {"ops@example.org"};
		struct mail_cfg c = {"smtp://127.0.0.1:1", "x@y", to, 1, auth};
		write_file(auth, "user bob\ntls   always  \n", 0600);
		T_ASSERT(mail_send(&c, "s", "b", err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:2: ", auth);
		T_ASSERT(strncmp(err, want, strlen(want)) == 0);
		T_ASSERT(strstr(err, "tls") != NULL);
	}

	T_CASE("mail_missing_auth_file_names_the_path") {
		const char *to[] = {"ops@example.org"};
		char missing[4400];
		snprintf(missing, sizeof missing, "%s/no-such-auth", top);
		struct mail_cfg c = {"smtp://127.0.0.1:1", "x@y", to, 1, missing};
		T_ASSERT(mail_send(&c, "s", "b", err, sizeof err) == -1);
		T_ASSERT(strstr(err, missing) != NULL);
		T_ASSERT(strstr(err, "No such file or directory") != NULL);
	}

	T_CASE("mail_password_never_in_the_error_when_server_unreachable") {
		const char *to[] = {"ops@example.org"};
		struct mail_cfg c = {"smtp://127.0.0.1:1", "x@y", to, 1, auth};
		write_file(auth, "user bob@example.org\npassword hunter2-secret\ntls try\n", 0600);
		err[0] = '\0';
		T_ASSERT(mail_send(&c, "s", "b", err, sizeof err) == -1);
		T_ASSERT(strstr(err, "smtp://127.0.0.1:1") != NULL);
		T_ASSERT(strstr(err, "ops@example.org") != NULL);
		T_ASSERT(strstr(err, "hunter2") == NULL);
	}

	T_CASE("mail_auth_file_readable_by_others_is_warned_about") {
		const char *to[] = {"ops@example.org"};
		struct mail_cfg c = {"smtp://127.0.0.1:1", "x@y", to, 1, auth};
		char *w;
		write_file(auth, "user bob\n", 0644);
		err_begin();
		mail_send(&c, "s", "b", err, sizeof err);
		w = err_end();
		snprintf(want, sizeof want, "lib_mail: %s: readable by others", auth);
		T_ASSERT(strstr(w, want) != NULL);
		T_ASSERT(strstr(w, "chmod 600") != NULL);
		free(w);
		write_file(auth, "user bob\n", 0600);
		err_begin();
		mail_send(&c, "s", "b", err, sizeof err);
		w = err_end();
		T_STREQ(w, "");
		free(w);
	}

	char cmd[8300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	T_DONE();
}
