/* lib_opt.c - opt_parse, opt_parse_file and opt_peek: the one option table every program shares.
 * Exits on error are checked in a forked child, by exit status and what it printed. */
#include "t.h"
#include "opt.h"
#include "msg.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* --- the table under test: two stacked groups, like a watchdog plus alert_opts ----------------- */

enum { K_NAME = 'n', K_VERBOSE = 'v', K_JOBS = 'j', K_ADD = 1, K_FAIL, K_CONFIG, K_KEYS = 7, K_FILES, K_RANGE,
       K_NUMLAYERS, K_NUMLAYERSPER, K_HIDDEN, K_MAIL = 1000, K_QUIET };

static const struct opt own_opts[] = {
	{"name", K_NAME, "NAME", "the name"},
	{"verbose", K_VERBOSE, NULL, "say more"},
	{"jobs", K_JOBS, "N", "parallel jobs"},
	{"add", K_ADD, "ITEM", "add ITEM (repeatable)"},
	{"fail", K_FAIL, "X", "always refused by the handler"},
	{"config", K_CONFIG, "FILE", "read FILE"},
	{"keys", K_KEYS, "KEY...", "several keys after one flag"},
	{"files", K_FILES, "FILE...", "several files after one flag"},
	{"range", K_RANGE, "START END", "two values after one flag"},
	{0},
};
/* a program's flags it accepts but lists itself in --help (train's args_other) */
static const struct opt hidden_opts[] = {
	{"num-layers", K_NUMLAYERS, "N", NULL},
	{"num-layers-per-stage", K_NUMLAYERSPER, "N", NULL},
	{"hidden-flag", K_HIDDEN, NULL, NULL},
	{0},
};
static const struct opt shared_opts[] = {
	{"mail", K_MAIL, "ADDR", "mail ADDR"},
	{"quiet", K_QUIET, NULL, "say less"},
	{0},
};

/* every handler call, in order, as "ctx:key=arg" (arg "(null)" for flags) */
static char calls[4096];
static int ncalls;

static int record(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	char one[512];
	if (key == K_FAIL)
		return errf(err, errlen, "'%s' is not acceptable", arg);
	snprintf(one, sizeof one, "%s%s:%d=%s", ncalls ? " " : "", (const char *)ctx, key,
		 arg ? arg : "(null)");
	strncat(calls, one, sizeof calls - strlen(calls) - 1);
	ncalls++;
	return 0;
}

static const struct optgroup groups[] = {
	{own_opts, record, "own", NULL},
	{shared_opts, record, "shared", NULL},
	{0},
};
static const struct optspec spec = {"[options] FILE...", "Tests the option parser.", groups, NULL, 0};

/* one occurrence of a several-values flag at once, as "ctx:key=[a|b|c]" */
static int record_multi(void *ctx, int key, const char *const *vals, int n, char *err, size_t errlen)
{
	char one[512];
	size_t used = (size_t)snprintf(one, sizeof one, "%s%s:%d=[", ncalls ? " " : "", (const char *)ctx, key);
	(void)err, (void)errlen;
	for (int i = 0; i < n && used < sizeof one; i++)
		used += (size_t)snprintf(one + used, sizeof one - used, "%s%s", i ? "|" : "", vals[i]);
	strncat(one, "]", sizeof one - strlen(one) - 1);
	strncat(calls, one, sizeof calls - strlen(calls) - 1);
	ncalls++;
	return 0;
}

static const struct opt_hint hints[] = {
	{"output-prefix", "PREFIX", "--output-prefix belongs to mkindex: tprog ... | mkindex --output-prefix %s"},
	{"no-email", NULL, "--no-email: mail goes out only with --mail"},
	{0},
};
/* train's way: abbreviations, whole occurrences, hidden flags, hints */
static const struct optgroup groups2[] = {
	{own_opts, record, "own", record_multi},
	{hidden_opts, record, "hidden", NULL},
	{shared_opts, record, "shared", NULL},
	{0},
};
static const struct optspec spec2 = {"[options]", "Abbreviating.", groups2, hints, 1};
static const struct optspec *child_spec = &spec;

static void reset(void)
{
	calls[0] = '\0';
	ncalls = 0;
}

static char *last_argv[64];

/* opt_parse on a NULL-terminated list of arguments (argv[0] is "tprog"); returns its result, and
 * leaves the argv it permuted in last_argv */
static int parse(const char *first, ...)
{
	char **argv = last_argv;
	int argc = 0;
	va_list ap;

	argv[argc++] = "tprog";
	va_start(ap, first);
	for (const char *a = first; a && argc < 63; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	reset();
	return opt_parse(child_spec, argc, argv);
}

/* --- running a parse that is expected to exit ------------------------------------------------ */

static char scratch[4096];

struct outcome {
	int exited, code;      /* exited normally, with this status */
	char out[16384], err[16384];
};

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		fclose(f);
}

/* Forks; the child parses argv (NULL-terminated after "tprog") with stdout and stderr in files and
 * exits 99 if opt_parse returned (the cases here expect it not to). */
static void parse_in_child(struct outcome *o, char *const *args)
{
	char po[4200], pe[4200];
	int st;
	snprintf(po, sizeof po, "%s/child.out", scratch);
	snprintf(pe, sizeof pe, "%s/child.err", scratch);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		char *argv[64] = {"tprog"};
		int argc = 1;
		for (; args[argc - 1] && argc < 63; argc++)
			argv[argc] = args[argc - 1];
		argv[argc] = NULL;
		int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fo, 1);
		dup2(fe, 2);
		opt_parse(child_spec, argc, argv);
		fflush(stdout);
		_exit(99);
	}
	waitpid(pid, &st, 0);
	o->exited = WIFEXITED(st);
	o->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	slurp(po, o->out, sizeof o->out);
	slurp(pe, o->err, sizeof o->err);
}

#define CHILD(o, ...) parse_in_child((o), (char *const[]){__VA_ARGS__, NULL})

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fputs(text, f);
	fclose(f);
}

int main(void)
{
	const char *tmp = getenv("LMTK_TMP");
	static struct outcome o;
	char cfg[4200], err[1024], want[8192];

	snprintf(scratch, sizeof scratch, "%s/lib_opt.XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(scratch)) {
		perror(scratch);
		return 2;
	}
	snprintf(cfg, sizeof cfg, "%s/settings.conf", scratch);
	msg_init("/usr/local/bin/tprog");

	T_CASE("opt_long_equals_and_space_forms_agree") {
		char a[4096];
		T_ASSERT(parse("--name=alpha beta", NULL) == 2);
		snprintf(a, sizeof a, "%s", calls);
		T_ASSERT(parse("--name", "alpha beta", NULL) == 3);
		T_STREQ(a, calls);
		T_STREQ(calls, "own:110=alpha beta");
	}

	T_CASE("opt_long_equals_keeps_later_equals_and_empty_value") {
		T_ASSERT(parse("--name=a=b", "--jobs=", NULL) == 3);
		T_STREQ(calls, "own:110=a=b own:106=");
	}

	T_CASE("opt_short_separate_and_attached_forms_agree") {
		char a[4096];
		T_ASSERT(parse("-j", "8", NULL) == 3);
		snprintf(a, sizeof a, "%s", calls);
		T_ASSERT(parse("-j8", NULL) == 2);
		T_STREQ(a, calls);
		T_STREQ(calls, "own:106=8");
	}

	T_CASE("opt_flags_get_no_value_in_long_and_short_form") {
		T_ASSERT(parse("--verbose", "-v", "--quiet", NULL) == 4);
		T_STREQ(calls, "own:118=(null) own:118=(null) shared:1001=(null)");
	}

	T_CASE("opt_repeatable_option_calls_handler_each_time_in_order") {
		T_ASSERT(parse("--add", "one", "--mail", "m@x", "--add=two", "--add", "three", NULL) == 8);
		T_STREQ(calls, "own:1=one shared:1000=m@x own:1=two own:1=three");
	}

	T_CASE("opt_value_may_start_with_a_dash") {
		T_ASSERT(parse("--name", "-5", "-j", "--", NULL) == 5);
		T_STREQ(calls, "own:110=-5 own:106=--");
	}

	T_CASE("opt_stacked_groups_each_get_their_own_context") {
		T_ASSERT(parse("--mail", "a@b", "--name", "n", NULL) == 5);
		T_STREQ(calls, "shared:1000=a@b own:110=n");
	}

	T_CASE("opt_double_dash_ends_options") {
		T_ASSERT(parse("-v", "--", "--name", "x", NULL) == 3);
		T_STREQ(calls, "own:118=(null)");
		T_STREQ(last_argv[3], "--name");
	}

	T_CASE("opt_operands_anywhere_handed_back_after_the_options_in_order") {
		T_ASSERT(parse("one", "--name", "a", "two", "--verbose", "three", NULL) == 4);
		T_STREQ(calls, "own:110=a own:118=(null)");
		T_STREQ(last_argv[1], "--name");
		T_STREQ(last_argv[2], "a");
		T_STREQ(last_argv[3], "--verbose");
		T_STREQ(last_argv[4], "one");
		T_STREQ(last_argv[5], "two");
		T_STREQ(last_argv[6], "three");
		T_ASSERT(last_argv[7] == NULL);
		T_ASSERT(parse(NULL) == 1);
		T_ASSERT(ncalls == 0);
	}

	T_CASE("opt_lone_dash_is_an_operand") {
		T_ASSERT(parse("-v", "-", "-v", NULL) == 3);
		T_ASSERT(ncalls == 2);
		T_STREQ(last_argv[3], "-");
	}

	T_CASE("opt_double_dash_makes_the_rest_operands_wherever_it_is") {
		T_ASSERT(parse("a", "--", "--name", "-v", NULL) == 2);
		T_ASSERT(ncalls == 0);
		T_STREQ(last_argv[1], "--");
		T_STREQ(last_argv[2], "a");
		T_STREQ(last_argv[3], "--name");
		T_STREQ(last_argv[4], "-v");
	}

	T_CASE("opt_unknown_long_option_exits_2_naming_it") {
		CHILD(&o, "-v", "--bogus", "x");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "tprog: unknown option '--bogus'") != NULL);
		T_ASSERT(strstr(o.err, "usage: tprog [options] FILE...") != NULL);
		T_STREQ(o.out, "");
	}

	T_CASE("opt_unknown_option_with_value_is_named_as_typed") {
		CHILD(&o, "--bogus=1");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "'--bogus=1'") != NULL);
	}

	T_CASE("opt_unknown_short_option_exits_2_naming_it") {
		CHILD(&o, "-z");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "unknown option '-z'") != NULL);
	}

	T_CASE("opt_long_prefix_is_not_an_abbreviation") {
		CHILD(&o, "--verb");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "unknown option '--verb'; did you mean --verbose?") != NULL);
	}

	T_CASE("opt_missing_value_exits_2_naming_flag_and_metavar") {
		CHILD(&o, "--name");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "--name needs a value (NAME)") != NULL);
		CHILD(&o, "-v", "-j");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "--jobs needs a value (N)") != NULL);
	}

	T_CASE("opt_value_on_a_flag_exits_2_naming_flag") {
		CHILD(&o, "--verbose=yes");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "--verbose takes no value") != NULL);
		CHILD(&o, "-vj");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "-vj takes no value") != NULL);
	}

	T_CASE("opt_handler_refusal_exits_2_with_flag_and_reason") {
		CHILD(&o, "--fail", "xyz");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "tprog: --fail: 'xyz' is not acceptable\n") != NULL);
	}

	T_CASE("opt_help_prints_every_option_and_exits_0") {
		static const struct opt *const all[] = {own_opts, shared_opts};
		CHILD(&o, "--name", "x", "--help", "--bogus");
		T_ASSERT(o.exited && o.code == 0);
		T_STREQ(o.err, "");
		T_ASSERT(strncmp(o.out, "usage: tprog [options] FILE...\n", 31) == 0);
		T_ASSERT(strstr(o.out, "Tests the option parser.") != NULL);
		for (int g = 0; g < 2; g++)
			for (const struct opt *p = all[g]; p->name; p++) {
				char line[256];
				snprintf(line, sizeof line, "--%s%s%s", p->name, p->arg ? " " : "",
					 p->arg ? p->arg : "");
				T_ASSERT(strstr(o.out, line) != NULL);
				T_ASSERT(strstr(o.out, p->help) != NULL);
			}
		T_ASSERT(strstr(o.out, "-j, --jobs N") != NULL);
		T_ASSERT(strstr(o.out, "--help") != NULL);
		T_ASSERT(strstr(o.out, "--version") != NULL);
		T_ASSERT(strstr(o.out, "See tprog(1).") != NULL);
	}

	T_CASE("opt_help_shows_short_form_only_for_letter_keys") {
		CHILD(&o, "--help");
		/* K_ADD (1) and K_MAIL (1000) have no short form */
		T_ASSERT(strstr(o.out, "    --add ITEM") != NULL);
		T_ASSERT(strstr(o.out, "    --mail ADDR") != NULL);
		T_ASSERT(strstr(o.out, "-v, --verbose") != NULL);
	}

	T_CASE("opt_version_prints_name_and_version_and_exits_0") {
		CHILD(&o, "--version", "--bogus");
		T_ASSERT(o.exited && o.code == 0);
		T_STREQ(o.out, "tprog (lmtk) " LMTK_VERSION "\n");
		T_STREQ(o.err, "");
	}

	/* --- several values after one flag ------------------------------------------------------ */

	T_CASE("opt_multi_values_run_to_the_next_option_each_handed_over") {
		T_ASSERT(parse("--keys", "a", "b", "c", "--verbose", "--keys", "d", NULL) == 8);
		T_STREQ(calls, "own:7=a own:7=b own:7=c own:118=(null) own:7=d");
	}

	T_CASE("opt_multi_stops_at_an_existing_file_which_is_an_operand") {
		char file[1024];
		snprintf(file, sizeof file, "%.1000s/corpus.jsonl", scratch);
		write_file(file, "{}\n");
		T_ASSERT(parse("--keys", "text", "title", file, NULL) == 4);
		T_STREQ(calls, "own:7=text own:7=title");
		T_STREQ(last_argv[4], file);
		/* the first value is the flag's, file or not: a flag needs one */
		T_ASSERT(parse("--keys", file, "x", NULL) == 4);
		snprintf(want, sizeof want, "own:7=%s own:7=x", file);
		T_STREQ(calls, want);
		/* a directory is not a file operand */
		T_ASSERT(parse("--keys", "a", scratch, NULL) == 4);
		T_ASSERT(ncalls == 2);
		/* FILE... values are files */
		T_ASSERT(parse("--files", "a", file, file, "--verbose", "op", NULL) == 6);
		snprintf(want, sizeof want, "own:8=a own:8=%s own:8=%s own:118=(null)", file, file);
		T_STREQ(calls, want);
		T_STREQ(last_argv[6], "op");
		unlink(file);
	}

	T_CASE("opt_multi_takes_negative_numbers_and_stops_at_dash_and_double_dash") {
		T_ASSERT(parse("--keys", "-1", "-.5", "-", "x", NULL) == 4);
		T_STREQ(calls, "own:7=-1 own:7=-.5");
		T_STREQ(last_argv[4], "-");
		T_STREQ(last_argv[5], "x");
		T_ASSERT(parse("--keys", "a", "--", "b", NULL) == 4);
		T_STREQ(calls, "own:7=a");
		T_STREQ(last_argv[4], "b");
	}

	T_CASE("opt_multi_equals_form_is_one_value_and_a_metavar_of_words_is_several") {
		T_ASSERT(parse("--keys=a", "b", "--range", "1", "2", NULL) == 5);
		T_STREQ(calls, "own:7=a own:9=1 own:9=2");
		T_STREQ(last_argv[5], "b");
	}

	T_CASE("opt_multi_without_a_value_exits_2_naming_flag_and_metavar") {
		CHILD(&o, "--keys", "--verbose");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "--keys needs a value (KEY...)") != NULL);
		CHILD(&o, "--keys");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "--keys needs a value (KEY...)") != NULL);
	}

	T_CASE("opt_multi_fn_gets_each_occurrence_whole") {
		child_spec = &spec2;
		T_ASSERT(parse("--keys", "a", "b", "--add", "x", "--keys=c", "--range", "1", "2", NULL) == 10);
		T_STREQ(calls, "own:7=[a|b] own:1=x own:7=[c] own:9=[1|2]");
		child_spec = &spec;
	}

	/* --- abbreviations, hidden flags, did you mean, hints --------------------------------- */

	T_CASE("opt_abbrev_unique_prefix_takes_the_flag_across_groups") {
		child_spec = &spec2;
		T_ASSERT(parse("--verb", "--na=x", "--qui", "--hidden", "--num-layers", "2", NULL) == 7);
		T_STREQ(calls, "own:118=(null) own:110=x shared:1001=(null) hidden:12=(null) hidden:10=2");
		child_spec = &spec;
	}

	T_CASE("opt_abbrev_ambiguous_names_every_candidate_and_exits_2") {
		child_spec = &spec2;
		CHILD(&o, "--num-layer", "2");
		child_spec = &spec;
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "tprog: --num-layer is ambiguous: --num-layers, --num-layers-per-stage?\n") != NULL);
		T_STREQ(o.out, "");
	}

	T_CASE("opt_hidden_flags_are_accepted_but_not_in_help") {
		child_spec = &spec2;
		CHILD(&o, "--help");
		child_spec = &spec;
		T_ASSERT(o.exited && o.code == 0);
		T_ASSERT(strstr(o.out, "--keys KEY...") != NULL);
		T_ASSERT(strstr(o.out, "num-layers") == NULL && strstr(o.out, "hidden-flag") == NULL);
	}

	T_CASE("opt_misspelled_long_option_gets_did_you_mean") {
		CHILD(&o, "--verbsoe");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "tprog: unknown option '--verbsoe'; did you mean --verbose?\n") != NULL);
		CHILD(&o, "--nmae=x");
		T_ASSERT(strstr(o.err, "unknown option '--nmae=x'; did you mean --name?") != NULL);
		CHILD(&o, "--mail_");
		T_ASSERT(strstr(o.err, "did you mean --mail?") != NULL);
		CHILD(&o, "--confg", "x");
		T_ASSERT(strstr(o.err, "did you mean --config?") != NULL);
		/* far from everything: no guess */
		CHILD(&o, "--zzzzzzzz");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "unknown option '--zzzzzzzz'\n") != NULL);
	}

	T_CASE("opt_hint_for_a_foreign_flag_replaces_unknown_option") {
		child_spec = &spec2;
		CHILD(&o, "--output-prefix", "foo", "--verbose");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "tprog: --output-prefix belongs to mkindex: tprog ... | mkindex --output-prefix foo\n") != NULL);
		T_ASSERT(strstr(o.err, "unknown option") == NULL);
		CHILD(&o, "--output-prefix=bar");
		T_ASSERT(strstr(o.err, "| mkindex --output-prefix bar\n") != NULL);
		CHILD(&o, "--output-prefix");
		T_ASSERT(strstr(o.err, "| mkindex --output-prefix PREFIX\n") != NULL);
		CHILD(&o, "-v", "--no-email");
		T_ASSERT(o.exited && o.code == EXIT_USAGE);
		T_ASSERT(strstr(o.err, "tprog: --no-email: mail goes out only with --mail\n") != NULL);
		child_spec = &spec;
	}

	/* --- config files -------------------------------------------------------------------- */

	T_CASE("opt_file_comments_blank_lines_and_spacing_ignored") {
		write_file(cfg, "# a comment\n\n   \n\t# indented comment\n  name   hello world  \n"
				"verbose\r\nadd one\nadd two\nmail\tm@x\n");
		reset();
		err[0] = '\0';
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == 0);
		T_STREQ(err, "");
		T_STREQ(calls, "own:110=hello world own:118=(null) own:1=one own:1=two shared:1000=m@x");
	}

	T_CASE("opt_file_unknown_setting_names_file_and_line") {
		write_file(cfg, "# header\n\nverbose\nbogus 1\nname x\n");
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:4: ", cfg);
		T_ASSERT(strncmp(err, want, strlen(want)) == 0);
		T_ASSERT(strstr(err, "'bogus'") != NULL);
	}

	T_CASE("opt_file_misspelled_setting_gets_did_you_mean_without_dashes") {
		write_file(cfg, "verbsoe\n");
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:1: unknown setting 'verbsoe'; did you mean verbose?", cfg);
		T_STREQ(err, want);
	}

	T_CASE("opt_file_line_with_a_nul_byte_is_refused_whole") {
		/* "mail a@b\0c@evil": read as a C string it would be "mail a@b", silently */
		static const char bytes[] = "verbose\nmail a@b\0c@evil\nname x\n";
		FILE *f = fopen(cfg, "wb");
		T_ASSERT(f && fwrite(bytes, 1, sizeof bytes - 1, f) == sizeof bytes - 1);
		if (f)
			fclose(f);
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:2: a NUL byte at column 9; the line is refused", cfg);
		T_ASSERT(strncmp(err, want, strlen(want)) == 0);
		T_ASSERT(strstr(calls, "m@x") == NULL && strstr(calls, "a@b") == NULL);
		T_ASSERT(strstr(calls, "own:110=x") != NULL);   /* the other lines still apply */
	}

	T_CASE("opt_file_dashed_names_are_not_settings") {
		write_file(cfg, "--verbose\n");
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == -1);
		T_ASSERT(ncalls == 0);
	}

	T_CASE("opt_file_denied_names_refused") {
		static const char *const deny[] = {"config", NULL};
		write_file(cfg, "verbose\nconfig /etc/other\n");
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == 0);
		T_STREQ(calls, "own:118=(null) own:3=/etc/other");
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, deny, err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:2: ", cfg);
		T_ASSERT(strncmp(err, want, strlen(want)) == 0);
		T_ASSERT(strstr(err, "config") != NULL);
		T_ASSERT(strstr(calls, "own:3=") == NULL);
	}

	T_CASE("opt_file_handler_error_reported_as_file_line_name_why") {
		write_file(cfg, "name ok\n\nfail bad value\n");
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:3: fail: 'bad value' is not acceptable", cfg);
		T_STREQ(err, want);
	}

	T_CASE("opt_file_value_on_flag_and_missing_value_refused_with_line") {
		write_file(cfg, "verbose yes\n");
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:1: ", cfg);
		T_ASSERT(strncmp(err, want, strlen(want)) == 0 && strstr(err, "verbose") != NULL);
		write_file(cfg, "\nname   \n");
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == -1);
		snprintf(want, sizeof want, "%s:2: ", cfg);
		T_ASSERT(strncmp(err, want, strlen(want)) == 0 && strstr(err, "name") != NULL);
		T_ASSERT(ncalls == 0);
	}

	T_CASE("opt_file_missing_file_names_the_path") {
		char missing[4300];
		snprintf(missing, sizeof missing, "%s/no-such.conf", scratch);
		T_ASSERT(opt_parse_file(&spec, missing, NULL, err, sizeof err) == -1);
		T_ASSERT(strstr(err, missing) != NULL);
		T_ASSERT(strstr(err, "No such file or directory") != NULL);
	}

	T_CASE("opt_file_last_line_without_newline_is_read") {
		write_file(cfg, "add first\nadd last");
		reset();
		T_ASSERT(opt_parse_file(&spec, cfg, NULL, err, sizeof err) == 0);
		T_STREQ(calls, "own:1=first own:1=last");
	}

	/* --- opt_peek ------------------------------------------------------------------------ */

	T_CASE("opt_peek_finds_both_forms_and_nothing_else") {
		char *a1[] = {"p", "-v", "--config=/a.conf", NULL};
		char *a2[] = {"p", "--config", "/b.conf", "--name", "x", NULL};
		char *a3[] = {"p", "--configs", "x", "--config-file=y", NULL};
		char *a4[] = {"p", "--", "--config", "x", NULL};
		char *a5[] = {"p", "-v", "--config", NULL};
		const char *v = opt_peek(3, a1, "config");
		T_ASSERT(v && strcmp(v, "/a.conf") == 0);
		v = opt_peek(5, a2, "config");
		T_ASSERT(v && strcmp(v, "/b.conf") == 0);
		T_ASSERT(opt_peek(4, a3, "config") == NULL);
		T_ASSERT(opt_peek(4, a4, "config") == NULL);
		T_ASSERT(opt_peek(3, a5, "config") == NULL);
		T_ASSERT(opt_peek(5, a2, "verbose") == NULL);
	}

	unlink(cfg);
	snprintf(want, sizeof want, "%s/child.out", scratch);
	unlink(want);
	snprintf(want, sizeof want, "%s/child.err", scratch);
	unlink(want);
	rmdir(scratch);
	T_DONE();
}
