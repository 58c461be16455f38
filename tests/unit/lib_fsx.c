/* lib_fsx.c - fsx_rm_tree removes the tree it is given and nothing through a link (a link inside
 * the tree, or the path itself being one, leaves the target's files alone); the depth bound;
 * fsx_inside resolves links and .. before it answers. */
#include "t.h"
#include "fsx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[4096];

static const char *at(const char *name)
{
	static char path[4][4700];
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

static void put(const char *name)
{
	int fd = open(at(name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		if (write(fd, "x", 1) != 1)
			perror(name);
		close(fd);
	}
}

static void dir(const char *name) { mkdir(at(name), 0755); }
static void link_to(const char *target, const char *name) { symlink(target, at(name)); }

int main(void)
{
	const char *tmp = getenv("LMTK_TMP");
	snprintf(top, sizeof top, "%s/lib_fsx.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(top)) {
		perror(top);
		return 1;
	}
	T_CASE("rm_tree_removes_a_nested_tree") {
		dir("a"), dir("a/b"), dir("a/b/c"), put("a/f"), put("a/b/g"), put("a/b/c/h");
		T_ASSERT(fsx_rm_tree(at("a")) == 0);
		T_ASSERT(!exists("a"));
	}
	T_CASE("rm_tree_unlinks_a_link_inside_never_its_target") {
		dir("keep"), put("keep/data"), dir("keep/sub"), put("keep/sub/more");
		dir("step"), put("step/own");
		link_to("../keep", "step/to_dir");
		link_to("../keep/data", "step/to_file");
		T_ASSERT(fsx_rm_tree(at("step")) == 0);
		T_ASSERT(!exists("step"));
		T_ASSERT(exists("keep/data") && exists("keep/sub/more"));
	}
	T_CASE("rm_tree_on_a_link_to_a_directory_unlinks_the_link_only") {
		dir("target"), put("target/x"), dir("target/d"), put("target/d/y");
		link_to("target", "ln");
		T_ASSERT(fsx_rm_tree(at("ln")) == 0);
		T_ASSERT(!exists("ln"));
		T_ASSERT(exists("target/x") && exists("target/d/y"));
		/* a trailing slash names the same link, not the directory behind it */
		link_to("target", "ln2");
		T_ASSERT(fsx_rm_tree(at("ln2/")) == 0);
		T_ASSERT(!exists("ln2") && exists("target/x") && exists("target/d/y"));
	}
	T_CASE("rm_tree_removes_a_file_and_a_dangling_link") {
		put("f");
		link_to("nowhere", "dangling");
		T_ASSERT(fsx_rm_tree(at("f")) == 0 && !exists("f"));
		T_ASSERT(fsx_rm_tree(at("dangling")) == 0 && !exists("dangling"));
	}
	T_CASE("rm_tree_reports_a_missing_path") {
		errno = 0;
		T_ASSERT(fsx_rm_tree(at("not-there")) == -1 && errno == ENOENT);
	}
	T_CASE("rm_tree_refuses_dot_and_dotdot") {
		dir("dots"), put("dots/f");
		errno = 0;
		T_ASSERT(fsx_rm_tree(at("dots/.")) == -1 && errno == EINVAL);
		T_ASSERT(fsx_rm_tree(at("dots/..")) == -1 && errno == EINVAL);
		T_ASSERT(exists("dots/f"));
		T_ASSERT(fsx_rm_tree(at("dots")) == 0);
	}
	T_CASE("rm_tree_stops_at_the_depth_bound") {
		char p[512];
		snprintf(p, sizeof p, "%s", "deep");
		dir(p);
		for (int i = 0; i < FSX_MAX_DEPTH + 2; i++) {
			strcat(p, "/d");
			dir(p);
		}
		errno = 0;
		T_ASSERT(fsx_rm_tree(at("deep")) == -1 && errno == ELOOP);
		T_ASSERT(exists("deep"));   /* the part below the bound is left, so its parents too */
	}
	T_CASE("rm_tree_leaves_a_read_only_directory_and_says_so") {
		if (geteuid() == 0) {
			printf("skip rm_tree_leaves_a_read_only_directory_and_says_so: root ignores modes\n");
			break;
		}
		dir("ro"), dir("ro/in"), put("ro/in/f");
		chmod(at("ro/in"), 0555);
		errno = 0;
		T_ASSERT(fsx_rm_tree(at("ro")) == -1 && errno == EACCES);
		T_ASSERT(exists("ro/in/f"));
		chmod(at("ro/in"), 0755);
		T_ASSERT(fsx_rm_tree(at("ro")) == 0 && !exists("ro"));
	}
	T_CASE("rm_tree_does_not_empty_a_mount_point_inside") {
		char cmd[4800];
		dir("m"), dir("m/mnt"), put("m/f");
		snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=1m lmtk-fsx '%s' 2>/dev/null",
			 at("m/mnt"));
		if (system(cmd) != 0) {
			printf("skip rm_tree_does_not_empty_a_mount_point_inside: cannot mount a tmpfs "
			       "here (needs root)\n");
			break;
		}
		put("m/mnt/other-fs");
		errno = 0;
		T_ASSERT(fsx_rm_tree(at("m")) == -1 && errno == EXDEV);
		T_ASSERT(exists("m/mnt/other-fs") && !exists("m/f"));
		snprintf(cmd, sizeof cmd, "umount '%s'", at("m/mnt"));
		T_ASSERT(system(cmd) == 0);
		T_ASSERT(fsx_rm_tree(at("m")) == 0 && !exists("m"));
	}
	T_CASE("inside_resolves_links_and_dotdot") {
		dir("root"), dir("root/step"), dir("elsewhere"), dir("elsewhere/step");
		link_to("../elsewhere/step", "root/out");
		link_to("step", "root/in");
		char p[4400];
		T_ASSERT(fsx_inside(at("root"), at("root/step")) == 1);
		T_ASSERT(fsx_inside(at("root"), at("root/in")) == 1);
		T_ASSERT(fsx_inside(at("root"), at("root/out")) == 0);
		T_ASSERT(fsx_inside(at("root"), at("root/../elsewhere/step")) == 0);
		T_ASSERT(fsx_inside(at("root"), at("root")) == 0);
		T_ASSERT(fsx_inside(at("root"), at("root/step/..")) == 0);
		snprintf(p, sizeof p, "%s/rootx", top);   /* a prefix is not a parent */
		mkdir(p, 0755);
		T_ASSERT(fsx_inside(at("root"), p) == 0);
		errno = 0;
		T_ASSERT(fsx_inside(at("root"), at("root/nope")) == -1 && errno == ENOENT);
		T_ASSERT(fsx_is_link(at("root/out")) == 1 && fsx_is_link(at("root/step")) == 0);
	}
	/* the depth test left a tree fsx_rm_tree will not remove: the shell's rm does */
	char cmd[4300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	T_DONE();
}
