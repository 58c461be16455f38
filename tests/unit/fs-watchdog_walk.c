/* fs-watchdog_walk.c - walk_tree() against GNU du, the peer it claims to equal. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "t.h"
#include "fs-watchdog/walk.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char top[64];

static void mkfile(const char *dir, const char *name, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); exit(2); }
    static const char junk[4096];
    for (size_t left = size; left;) {
        size_t n = left < sizeof junk ? left : sizeof junk;
        if (write(fd, junk, n) != (ssize_t)n) { perror(path); exit(2); }
        left -= n;
    }
    close(fd);
}

static void mkdirf(const char *fmt, ...)
{
    char path[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    if (mkdir(path, 0755) != 0) { perror(path); exit(2); }
}

/* Runs a shell command and returns the number its output starts with; *status
 * gets the exit status when asked for. */
static unsigned long long sh_num(int *status, const char *fmt, ...)
{
    char cmd[8192], line[256] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *f = popen(cmd, "r");
    if (!f) { perror("popen"); exit(2); }
    if (!fgets(line, sizeof line, f))
        line[0] = 0;
    while (getc(f) != EOF)
        ;
    int st = pclose(f);
    if (status)
        *status = WIFEXITED(st) ? WEXITSTATUS(st) : 255;
    return strtoull(line, NULL, 10);
}

static int walk(const char *root, int threads, int one_fs, struct walk_result *r)
{
    char err[512] = "";
    int rc = walk_tree(root, threads, one_fs, r, err, sizeof err);
    if (rc != 0)
        printf("# walk_tree(%s): %s\n", root, err);
    return rc;
}

/* Everything du has an opinion about: sizes, hard links inside and leaving the
 * tree, symlinks (dangling, to a directory), a fifo, a sparse file, odd names,
 * empty things, a directory wide enough to be split into batches, and a chain
 * deeper than PATH_MAX. */
static void build_tree(const char *t)
{
    char p[4096], q[4096];
    mkfile(t, "a.txt", 1000);
    mkfile(t, "empty", 0);
    mkfile(t, "with space", 123);
    mkfile(t, "new\nline", 77);
    mkfile(t, " lead-and-trail ", 5);
    snprintf(p, sizeof p, "%s/sparse", t);
    mkfile(t, "sparse", 0);
    if (truncate(p, 1 << 20) != 0) { perror(p); exit(2); }
    mkdirf("%s/sub", t);
    mkdirf("%s/sub/d1", t);
    mkdirf("%s/sub/d1/d2", t);
    snprintf(p, sizeof p, "%s/sub/d1/d2", t);
    mkfile(p, "f", 4096);
    mkdirf("%s/emptydir", t);
    mkdirf("%s/dir with\nnewline", t);
    snprintf(p, sizeof p, "%s/dir with\nnewline", t);
    mkfile(p, "x", 11);

    mkfile(t, "hl1", 500);                      /* two links, both inside */
    snprintf(p, sizeof p, "%s/hl1", t);
    snprintf(q, sizeof q, "%s/sub/hl2", t);
    if (link(p, q) != 0) { perror(q); exit(2); }
    mkfile(top, "outside", 300);                /* one link inside, one outside */
    snprintf(p, sizeof p, "%s/outside", top);
    snprintf(q, sizeof q, "%s/inside", t);
    if (link(p, q) != 0) { perror(q); exit(2); }

    snprintf(p, sizeof p, "%s/sym", t);
    if (symlink("a.txt", p) != 0) { perror(p); exit(2); }
    snprintf(p, sizeof p, "%s/dangling", t);
    if (symlink("no/such/target/at/all", p) != 0) { perror(p); exit(2); }
    snprintf(p, sizeof p, "%s/dirsym", t);
    if (symlink("sub", p) != 0) { perror(p); exit(2); }
    snprintf(p, sizeof p, "%s/fifo", t);
    if (mkfifo(p, 0644) != 0) { perror(p); exit(2); }

    mkdirf("%s/wide", t);
    snprintf(p, sizeof p, "%s/wide", t);
    for (int i = 0; i < 6000; i++) {
        char name[64];
        snprintf(name, sizeof name, "file-%05d-with-a-longish-name", i);
        mkfile(p, name, (size_t)(i % 7) * 10);
    }

    int fd = open(t, O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < 1200; i++) {           /* 1200 * 10 bytes > PATH_MAX */
        if (mkdirat(fd, "deep-dir.", 0755) != 0) { perror("mkdirat"); exit(2); }
        int nfd = openat(fd, "deep-dir.", O_RDONLY | O_DIRECTORY);
        if (nfd < 0) { perror("openat"); exit(2); }
        if (i % 100 == 0) {
            int ffd = openat(nfd, "leaf", O_WRONLY | O_CREAT, 0644);
            if (ffd < 0 || write(ffd, "0123456789", (size_t)(i % 10)) < 0) { perror("leaf"); exit(2); }
            close(ffd);
        }
        close(fd);
        fd = nfd;
    }
    close(fd);
}

static int churn_stop;              /* __atomic: the churn thread polls it */

/* Creates and removes files and directories under the walked tree so that
 * entries vanish between getdents64 and fstatat, and queued directories
 * vanish before they are opened. */
static void *churn(void *arg)
{
    const char *dir = arg;
    char p[4096];
    for (unsigned n = 0; !__atomic_load_n(&churn_stop, __ATOMIC_RELAXED); n++) {
        snprintf(p, sizeof p, "%s/d%u", dir, n % 50);
        if (mkdir(p, 0755) == 0) {
            for (int i = 0; i < 20; i++) {
                char name[32];
                snprintf(name, sizeof name, "f%d", i);
                mkfile(p, name, 1);
            }
        }
        snprintf(p, sizeof p, "%s/d%u", dir, (n + 25) % 50);
        for (int i = 0; i < 20; i++) {
            char f[4200];
            snprintf(f, sizeof f, "%s/f%d", p, i);
            unlink(f);
        }
        rmdir(p);
    }
    return NULL;
}

int main(void)
{
    char tree[128], err[512];
    struct walk_result r, r1;

    snprintf(top, sizeof top, "%s/walk.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(top)) { perror("mkdtemp"); return 2; }
    chmod(top, 0755);                  /* the unprivileged case must reach it */
    snprintf(tree, sizeof tree, "%s/tree", top);
    mkdirf("%s", tree);
    build_tree(tree);

    unsigned long long du_bytes = sh_num(NULL, "du -sb '%s'", tree);
    unsigned long long du_inodes = sh_num(NULL, "du -s --inodes '%s'", tree);

    T_CASE("walk bytes equal du -sb") {
        T_ASSERT(walk(tree, 1, 0, &r1) == 0);
        if (r1.bytes != du_bytes)
            printf("# walk %llu, du %llu\n", r1.bytes, du_bytes);
        T_ASSERT(r1.bytes == du_bytes);
        T_ASSERT(du_bytes > (1 << 20));
        T_ASSERT(r1.errors == 0);
        T_STREQ(r1.first_error, "");
    }
    T_CASE("walk inodes equal du --inodes") {
        if (r1.inodes != du_inodes)
            printf("# walk %llu, du %llu\n", r1.inodes, du_inodes);
        T_ASSERT(r1.inodes == du_inodes);
        T_ASSERT(du_inodes > 7000);
    }
    T_CASE("walk result independent of thread count") {
        int counts[] = {2, 8, 0, 3};
        for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
            T_ASSERT(walk(tree, counts[i], 0, &r) == 0);
            T_ASSERT(r.bytes == r1.bytes);
            T_ASSERT(r.inodes == r1.inodes);
            T_ASSERT(r.errors == 0);
        }
    }
    T_CASE("walk one_fs on a single filesystem changes nothing") {
        T_ASSERT(walk(tree, 2, 1, &r) == 0);
        T_ASSERT(r.bytes == r1.bytes && r.inodes == r1.inodes);
    }
    T_CASE("walk root with trailing slash") {
        char p[200];
        snprintf(p, sizeof p, "%s/", tree);
        T_ASSERT(walk(p, 2, 0, &r) == 0);
        T_ASSERT(r.bytes == r1.bytes && r.inodes == r1.inodes);
    }
    T_CASE("walk deep chain equals du") {
        char p[200];
        snprintf(p, sizeof p, "%s/deep-dir.", tree);
        unsigned long long b = sh_num(NULL, "du -sb '%s'", p);
        T_ASSERT(walk(p, 2, 0, &r) == 0);
        T_ASSERT(r.bytes == b);
        T_ASSERT(r.inodes == 1200 + 12);
        T_ASSERT(r.errors == 0);
    }
    T_CASE("walk missing root fails naming it") {
        char p[200];
        snprintf(p, sizeof p, "%s/no-such-dir", top);
        memset(&r, 0xff, sizeof r);
        T_ASSERT(walk_tree(p, 2, 0, &r, err, sizeof err) == -1);
        T_ASSERT(strstr(err, p) == err);
        T_ASSERT(strstr(err, "No such file or directory") != NULL);
        T_ASSERT(r.bytes == 0 && r.inodes == 0);
    }
    T_CASE("walk file root counts the file") {
        char p[200];
        snprintf(p, sizeof p, "%s/a.txt", tree);
        T_ASSERT(walk(p, 2, 0, &r) == 0);
        T_ASSERT(r.bytes == 1000 && r.inodes == 1);
    }
    T_CASE("walk symlinked root is followed") {
        char p[200];
        snprintf(p, sizeof p, "%s/link-to-tree", top);
        T_ASSERT(symlink("tree", p) == 0);
        T_ASSERT(walk(p, 2, 0, &r) == 0);
        T_ASSERT(r.bytes == r1.bytes && r.inodes == r1.inodes);
        T_ASSERT(r.bytes == sh_num(NULL, "du -sbD '%s'", p));
    }

    /* Root reads everything, so the permission error is provoked in a child
     * that drops to nobody; du runs in the same child for the same view. */
    {
        char priv[200], p[300];
        snprintf(priv, sizeof priv, "%s/priv", top);
        mkdirf("%s", priv);
        mkfile(priv, "f", 10);
        mkdirf("%s/ok", priv);
        snprintf(p, sizeof p, "%s/ok", priv);
        mkfile(p, "g", 20);
        mkdirf("%s/locked", priv);
        snprintf(p, sizeof p, "%s/locked", priv);
        mkfile(p, "hidden", 5000);
        chmod(p, 0);
        struct { int rc, du_rc, dropped; unsigned long long du; struct walk_result r; } res;
        memset(&res, 0, sizeof res);
        int fds[2];
        if (pipe(fds) != 0) { perror("pipe"); return 2; }
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            res.dropped = geteuid() != 0 || (setgid(65534) == 0 && setuid(65534) == 0);
            if (res.dropped) {
                res.rc = walk_tree(priv, 2, 0, &res.r, err, sizeof err);
                res.du = sh_num(&res.du_rc, "du -sb '%s' 2>/dev/null", priv);
            }
            if (write(fds[1], &res, sizeof res) != sizeof res)
                _exit(1);
            _exit(0);
        }
        close(fds[1]);
        ssize_t got = read(fds[0], &res, sizeof res);
        close(fds[0]);
        waitpid(pid, NULL, 0);
        chmod(p, 0755);
        if (got != sizeof res || !res.dropped) {
            printf("skip walk unreadable subdir: cannot drop root privileges\n");
        } else T_CASE("walk unreadable subdir is a partial error like du") {
            T_ASSERT(res.rc == 0);
            T_ASSERT(res.du_rc == 1);
            T_ASSERT(res.r.bytes == res.du);
            T_ASSERT(res.r.errors == 1);
            T_ASSERT(strstr(res.r.first_error, p) == res.r.first_error);
            T_ASSERT(strstr(res.r.first_error, "Permission denied") != NULL);
        }
    }

    /* A tmpfs inside the tree: skipped entirely with one_fs, as du -x does. */
    {
        char m[200], mnt[300];
        snprintf(m, sizeof m, "%s/mnt", top);
        mkdirf("%s", m);
        mkfile(m, "here", 100);
        snprintf(mnt, sizeof mnt, "%s/other", m);
        mkdirf("%s", mnt);
        if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0) {
            printf("skip walk one_fs: mount tmpfs: %s\n", strerror(errno));
        } else {
            mkfile(mnt, "there", 3000);
            T_CASE("walk one_fs skips other filesystems like du -x") {
                T_ASSERT(walk(m, 2, 1, &r) == 0);
                T_ASSERT(r.bytes == sh_num(NULL, "du -sbx '%s'", m));
                T_ASSERT(r.inodes == sh_num(NULL, "du -sx --inodes '%s'", m));
                T_ASSERT(walk(m, 2, 0, &r1) == 0);
                T_ASSERT(r1.bytes == sh_num(NULL, "du -sb '%s'", m));
                T_ASSERT(r1.inodes == sh_num(NULL, "du -s --inodes '%s'", m));
                T_ASSERT(r1.bytes >= r.bytes + 3000);
            }
            umount2(mnt, MNT_DETACH);
        }
    }

    T_CASE("walk ignores entries vanishing mid-walk") {
        char c[200];
        pthread_t tid;
        snprintf(c, sizeof c, "%s/churn", top);
        mkdirf("%s", c);
        T_ASSERT(pthread_create(&tid, NULL, churn, c) == 0);
        for (int i = 0; i < 300; i++) {
            T_ASSERT(walk(c, 1 + i % 4, 0, &r) == 0);
            if (r.errors)
                printf("# %llu errors: %s\n", r.errors, r.first_error);
            T_ASSERT(r.errors == 0);
        }
        __atomic_store_n(&churn_stop, 1, __ATOMIC_RELAXED);
        pthread_join(tid, NULL);
    }

    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", top);
    T_DONE();
}
