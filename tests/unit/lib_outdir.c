/* lib_outdir.c - a directory published whole or not at all: od_begin/od_commit put it in place
 * in one rename, a non-empty destination is refused before anything is written, od_abort leaves
 * nothing, and od_swap replaces a directory in place, removing the old one without following a
 * link out of it; od_begin_replace replaces an earlier output (one holding the mark) in one
 * exchange and refuses anything else. */
#include "t.h"
#include "outdir.h"
#include "msg.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[4096];

static const char *at(const char *name)
{
	static char path[4][4400];
	static int i;
	i = (i + 1) % 4;
	snprintf(path[i], sizeof path[i], "%s/%s", top, name);
	return path[i];
}

static int exists(const char *name)
{
	struct stat sb;
	return lstat(at(name), &sb) == 0;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return d ? n : -1;
}

int main(void)
{
	char err[1024], p[8500];
	struct od o;
	const char *tmp = getenv("LMTK_TMP");
	snprintf(top, sizeof top, "%s/lib_outdir.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		perror(top);
		return 1;
	}
	T_CASE("commit_puts_the_whole_directory_in_place") {
		T_ASSERT(od_begin(&o, at("out"), err, sizeof err) == 0);
		T_ASSERT(!exists("out"));
		snprintf(p, sizeof p, "%s/f", o.tmp);
		put(p, "data");
		T_ASSERT(!exists("out"));
		T_ASSERT(od_commit(&o, err, sizeof err) == 0);
		T_ASSERT(exists("out/f") && entries(top) == 1);
	}
	T_CASE("an_empty_destination_is_replaced") {
		mkdir(at("empty"), 0755);
		T_ASSERT(od_begin(&o, at("empty/"), err, sizeof err) == 0);
		snprintf(p, sizeof p, "%s/g", o.tmp);
		put(p, "x");
		T_ASSERT(od_commit(&o, err, sizeof err) == 0);
		T_ASSERT(exists("empty/g"));
	}
	T_CASE("a_non_empty_destination_is_refused_as_usage") {
		T_ASSERT(od_begin(&o, at("out"), err, sizeof err) == EXIT_USAGE);
		T_ASSERT(strstr(err, "exists and is not empty") && strstr(err, at("out")));
		T_ASSERT(od_begin(&o, at("nodir/out"), err, sizeof err) == EXIT_USAGE);
		T_ASSERT(strstr(err, "no directory"));
	}
	T_CASE("abort_leaves_nothing") {
		int before = entries(top);
		T_ASSERT(od_begin(&o, at("gone"), err, sizeof err) == 0);
		snprintf(p, sizeof p, "%s/sub", o.tmp);
		mkdir(p, 0755);
		snprintf(p, sizeof p, "%s/sub/h", o.tmp);
		put(p, "x");
		od_abort(&o);
		T_ASSERT(entries(top) == before && !exists("gone"));
	}
	T_CASE("swap_replaces_in_place_and_removes_the_old_without_following_links") {
		mkdir(at("keep"), 0755);
		put(at("keep/precious"), "mine");
		mkdir(at("step"), 0755);
		put(at("step/old"), "old");
		T_ASSERT(symlink("../keep", at("step/link")) == 0);
		mkdir(at(".step.new"), 0755);
		put(at(".step.new/new"), "new");
		T_ASSERT(od_swap(at(".step.new"), at("step"), err, sizeof err) == 0);
		T_ASSERT(exists("step/new") && !exists("step/old") && !exists(".step.new"));
		T_ASSERT(exists("keep/precious"));
	}
	T_CASE("replace_swaps_an_earlier_output_for_the_new_one") {
		mkdir(at("exp"), 0755);
		put(at("exp/config.json"), "{}");
		put(at("exp/stale"), "old");
		T_ASSERT(od_begin_replace(&o, at("exp"), "config.json", err, sizeof err) == 0);
		snprintf(p, sizeof p, "%s/config.json", o.tmp);
		put(p, "{\"new\": 1}");
		T_ASSERT(exists("exp/stale"));   /* the old output is whole until the commit */
		int before = entries(top);
		T_ASSERT(od_commit(&o, err, sizeof err) == 0);
		T_ASSERT(exists("exp/config.json") && !exists("exp/stale") && entries(top) == before - 1);
	}
	T_CASE("replace_refuses_a_directory_without_the_mark_and_a_link") {
		mkdir(at("home"), 0755);
		put(at("home/notes"), "mine");
		T_ASSERT(od_begin_replace(&o, at("home"), "config.json", err, sizeof err) == EXIT_USAGE);
		T_ASSERT(strstr(err, "has no config.json") && exists("home/notes"));
		T_ASSERT(symlink("exp", at("exp.link")) == 0);
		T_ASSERT(od_begin_replace(&o, at("exp.link"), "config.json", err, sizeof err) == EXIT_USAGE);
		T_ASSERT(exists("exp/config.json"));
		put(at("plain"), "x");
		T_ASSERT(od_begin_replace(&o, at("plain"), "config.json", err, sizeof err) == EXIT_USAGE);
	}
	T_CASE("check_judges_the_destination_and_makes_nothing") {
		int before = entries(top);
		T_ASSERT(od_check(at("home"), NULL, err, sizeof err) == EXIT_USAGE);
		T_ASSERT(od_check(at("home"), "config.json", err, sizeof err) == EXIT_USAGE);
		T_ASSERT(od_check(at("exp"), "config.json", err, sizeof err) == 0);
		T_ASSERT(od_check(at("exp"), NULL, err, sizeof err) == EXIT_USAGE);
		T_ASSERT(od_check(at("fresh"), NULL, err, sizeof err) == 0);
		T_ASSERT(entries(top) == before && !exists("fresh"));
	}
	snprintf(p, sizeof p, "rm -rf '%s'", top);
	if (system(p) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	T_DONE();
}
