/* lib_jsonout.c - a --json report: the object alone on stdout, everything else on stderr; strings
 * that are not UTF-8 still make valid JSON; a stdout that cannot be written is an error. */
#include "t.h"
#include "jsonout.h"
#include "file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static char top[4096];

static const char *at(const char *name)
{
	static char path[4][4300];
	static int i;
	i = (i + 1) % 4;
	snprintf(path[i], sizeof path[i], "%s/%s", top, name);
	return path[i];
}

static char *slurp(const char *path)
{
	char *s = NULL, err[512];
	if (file_read_all(path, &s, NULL, err, sizeof err) < 0)
		return strdup("<unreadable>");
	return s;
}

/* descriptors 1 and 2 to files (or /dev/full) between these two */
static int saved[3];
static void fds_begin(const char *out, const char *err)
{
	fflush(stdout);
	fflush(stderr);
	for (int fd = 1; fd <= 2; fd++) {
		int f = open(fd == 1 ? out : err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		saved[fd] = dup(fd);
		dup2(f, fd);
		close(f);
	}
}
static void fds_end(void)
{
	fflush(stdout);
	fflush(stderr);
	clearerr(stdout);
	for (int fd = 1; fd <= 2; fd++) {
		dup2(saved[fd], fd);
		close(saved[fd]);
	}
}

int main(void)
{
	const char *tmp = getenv("LMTK_TMP");
	snprintf(top, sizeof top, "%s/lib_jsonout.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		perror(top);
		return 2;
	}

	T_CASE("jsonout_reserves_stdout_for_the_object") {
		char out[4300], err[4300];
		snprintf(out, sizeof out, "%s", at("out"));
		snprintf(err, sizeof err, "%s", at("err"));
		fds_begin(out, err);
		int rc0 = jsonout_begin();
		printf("a report line\n");            /* the stdout FILE */
		fflush(stdout);
		fprintf(stderr, "a warning\n");
		int rc1 = system("echo a child line");   /* descriptor 1, inherited */
		int rc2 = jsonout_end(json_pack("{s:s, s:i, s:[b, n]}", "z", "x", "a", 3, "l", 1));
		printf("after\n");                      /* still stderr: the report was the one object */
		fds_end();
		char *o = slurp(out), *e = slurp(err);
		T_ASSERT(rc0 == 0 && rc1 == 0 && rc2 == 0);
		/* keys in the order set, indented by 2 */
		T_STREQ(o, "{\n  \"z\": \"x\",\n  \"a\": 3,\n  \"l\": [\n    true,\n    null\n  ]\n}\n");
		T_STREQ(e, "a report line\na warning\na child line\nafter\n");
		free(o);
		free(e);
	}

	T_CASE("jsonout_without_begin_writes_to_stdout") {
		char out[4300], err[4300];
		snprintf(out, sizeof out, "%s", at("out2"));
		snprintf(err, sizeof err, "%s", at("err2"));
		fds_begin(out, err);
		int rc = jsonout_end(json_pack("{s:f}", "third", 1.0 / 3));
		fds_end();
		char *o = slurp(out);
		T_ASSERT(rc == 0);
		T_STREQ(o, "{\n  \"third\": 0.33333333333333331\n}\n");   /* 17 digits: the double exactly */
		free(o);
	}

	T_CASE("jsonout_full_stdout_is_an_error") {
		char err[4300];
		snprintf(err, sizeof err, "%s", at("err3"));
		fds_begin("/dev/full", err);
		int rc1 = jsonout_begin();
		int rc2 = jsonout_end(json_pack("{s:s}", "k", "v"));
		fds_end();
		char *e = slurp(err);
		T_ASSERT(rc1 == 0 && rc2 == -1);
		T_ASSERT(strstr(e, "stdout: could not write the JSON report: No space left on device") != NULL);
		free(e);
	}

	T_CASE("jsonout_str_replaces_what_is_not_utf8") {
		static const struct { const char *in, *want; } cases[] = {
			{"plain/path", "plain/path"},
			{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
			{"s\xffnt", "s\xef\xbf\xbdnt"},                                  /* a stray byte */
			{"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},                        /* overlong '/' */
			{"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},        /* a surrogate */
			{"end\xe2\x82", "end\xef\xbf\xbd\xef\xbf\xbd"},                  /* cut short */
			{"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > U+10FFFF */
		};
		for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
			json_t *j = jsonout_str(cases[i].in);
			T_ASSERT(j && json_is_string(j));
			if (j)
				T_STREQ(json_string_value(j), cases[i].want);
			json_decref(j);
		}
		json_t *n = jsonout_str(NULL);
		T_ASSERT(json_is_null(n));
	}

	char cmd[4400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (system(cmd) != 0)
		return 2;
	T_DONE();
}
