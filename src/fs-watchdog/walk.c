/* walk.c - parallel directory-tree usage walk (du -sb and du -s --inodes).
 *
 * fs-watchdog sums trees of a million files and more, and on a warm cache such a
 * walk is bound by system calls rather than by the disk: one getdents64 per few
 * hundred entries and one fstatat per entry.  GNU du does all of them from one
 * thread; here a small pool of threads does them in parallel, which scales with
 * the cores the kernel's dentry and inode caches can be read from concurrently.
 *
 * Work is a LIFO stack of jobs guarded by one mutex and condition variable.  A
 * job is either "read this directory" or "stat this buffer of entries of an open
 * directory".  The second kind exists for wide directories: a worker reading a
 * directory of 100,000 files would otherwise leave every other thread idle, so
 * while some thread is idle it hands each getdents64 buffer it fills to the stack
 * instead of scanning it itself, the directory fd being shared by reference
 * count.  LIFO order makes the walk roughly depth-first, which keeps the number
 * of pending jobs (and so memory) proportional to depth times fan-out instead of
 * to the widest level of the tree.  The walk ends when the stack is empty and no
 * worker is busy, since only a busy worker can push more.  Subdirectories found
 * in one buffer are pushed with one lock acquisition, so the lock is taken about
 * once per directory, not per entry.
 *
 * Directories are read with raw getdents64 rather than readdir, which is what
 * makes a buffer of entries a unit of work that can change hands.  Entries are
 * stat'ed relative to the directory fd (fstatat, never following symlinks), so
 * the kernel resolves one component per entry; statx with a minimal mask was
 * measured no faster (a few percent slower) on ext4, so plain fstatat it is.
 * Nothing is sorted: on a warm cache inode order buys nothing.  Directories are
 * queued by full path: opening one costs a full path lookup, once per directory,
 * in exchange for holding no fd for queued directories (a parent-fd design runs
 * out of descriptors on deep trees).  Long paths, PATH_MAX and beyond included,
 * open relative to a per-worker "anchor" fd of a deep ancestor (see open_long),
 * so arbitrarily deep trees work in linear time and nothing recurses on the C
 * stack.  The root alone is opened following symlinks: a budget set on a
 * symlinked path means the tree it names.
 *
 * Hard links are counted once like du does: only non-directories with
 * st_nlink > 1 go through a set of (dev, ino), sharded by hash into 64 open
 * addressing tables with a mutex each, so the common single-link file never
 * touches shared state.  Byte and inode counters are per thread and summed at
 * the end.  The hot path allocates only for subdirectories (their path).
 *
 * Errors follow du: an unreadable directory still counts its own size and is an
 * error; an entry that cannot be stat'ed is an error and not counted; an entry
 * or directory that vanished mid-walk (ENOENT) is silently skipped, as the tree
 * being measured is usually live. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Large enough that getdents64 runs once per ~1500 short names, small enough
 * that a wide directory splits into many shareable batches. */
#define DENTS_SIZE (48 * 1024)
#define NSHARDS 64
/* Paths this long open relative to an anchor (see open_long); the anchor moves
 * when the rest of the path reaches ANCHOR_REACH, about 60 components. */
#define LONG_PATH 1024
#define ANCHOR_REACH 256
#define MAX_THREADS 256

struct dirent64_k {            /* the kernel's linux_dirent64 */
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

struct dir;
struct job {
    struct job *next;
    struct dir *d;
    char *buf;                 /* NULL: read d; else d's entries, len bytes */
    size_t len;
};

/* A directory to read, and once open the fd its batches stat against.  Freed,
 * and its fd closed, by whoever drops the last reference. */
struct dir {
    struct job j;              /* the "read me" job, embedded to save a malloc */
    int fd;
    int refs;
    size_t len;
    char path[];
};

struct key { dev_t dev; ino_t ino; };
struct shard {
    pthread_mutex_t mu;
    size_t n, cap;             /* cap is a power of two, or 0 before first use */
    struct key *tab;
} __attribute__((aligned(64)));

struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *top;
    int busy;                  /* workers holding a job */
    int idle;                  /* workers waiting; read unlocked as a hint */
    int njobs;                 /* jobs on the stack; read unlocked as a hint */
    int nthreads;
    int one_fs;
    dev_t root_dev;
    int have_error;
    pthread_mutex_t err_mu;
    char first_error[sizeof(((struct walk_result *)0)->first_error)];
    struct shard seen[NSHARDS];
};

struct worker {
    struct pool *p;
    unsigned long long bytes, inodes, errors;
    char *buf, *spare;         /* spare: a batch buffer kept for the next handoff */
    int afd;                   /* anchor: open ancestor for paths >= PATH_MAX */
    char *apath;
    size_t alen, acap;
} __attribute__((aligned(64)));

/* ---------------------------------------------------------------- errors */

static void note_error(struct worker *w, const char *path, const char *name, int e)
{
    struct pool *p = w->p;
    w->errors++;
    if (__atomic_load_n(&p->have_error, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&p->err_mu);
    if (!p->have_error) {
        snprintf(p->first_error, sizeof p->first_error, "%s%s%s: %s", path,
                 name ? "/" : "", name ? name : "", strerror(e));
        __atomic_store_n(&p->have_error, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&p->err_mu);
}

/* ---------------------------------------------------------- hard-link set */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* Returns 1 if (dev, ino) was new, 0 if already seen, -1 out of memory.  The
 * empty slot is {0, 0}: no Linux filesystem hands out inode 0 on device 0. */
static int seen_insert(struct pool *p, dev_t dev, ino_t ino)
{
    uint64_t h = mix((uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev);
    struct shard *s = &p->seen[h >> 58];
    int ret = 1;

    pthread_mutex_lock(&s->mu);
    if (2 * (s->n + 1) > s->cap) {
        size_t ncap = s->cap ? 2 * s->cap : 256;
        struct key *nt = calloc(ncap, sizeof *nt);
        if (!nt) { pthread_mutex_unlock(&s->mu); return -1; }
        for (size_t i = 0; i < s->cap; i++) {
            struct key k = s->tab[i];
            if (!k.dev && !k.ino) continue;
            size_t j = mix((uint64_t)k.ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)k.dev) & (ncap - 1);
            while (nt[j].dev || nt[j].ino) j = (j + 1) & (ncap - 1);
            nt[j] = k;
        }
        free(s->tab);
        s->tab = nt;
        s->cap = ncap;
    }
    size_t i = h & (s->cap - 1);
    for (;; i = (i + 1) & (s->cap - 1)) {
        struct key *k = &s->tab[i];
        if (!k->dev && !k->ino) { k->dev = dev; k->ino = ino; s->n++; break; }
        if (k->dev == dev && k->ino == ino) { ret = 0; break; }
    }
    pthread_mutex_unlock(&s->mu);
    return ret;
}

/* ------------------------------------------------------------ job stack */

static void push(struct pool *p, struct job *first, struct job *last, int n)
{
    pthread_mutex_lock(&p->mu);
    last->next = p->top;
    p->top = first;
    __atomic_store_n(&p->njobs, p->njobs + n, __ATOMIC_RELAXED);
    if (p->idle > 1 && n > 1)
        pthread_cond_broadcast(&p->cv);
    else if (p->idle)
        pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Retires the caller's previous job (if `finished`) and takes the next one in
 * the same critical section.  NULL means the walk is over. */
static struct job *next_job(struct pool *p, int finished)
{
    struct job *j;
    pthread_mutex_lock(&p->mu);
    if (finished)
        p->busy--;
    while (!p->top && p->busy > 0) {
        __atomic_store_n(&p->idle, p->idle + 1, __ATOMIC_RELAXED);
        pthread_cond_wait(&p->cv, &p->mu);
        __atomic_store_n(&p->idle, p->idle - 1, __ATOMIC_RELAXED);
    }
    j = p->top;
    if (j) {
        p->top = j->next;
        __atomic_store_n(&p->njobs, p->njobs - 1, __ATOMIC_RELAXED);
        p->busy++;
    } else {
        pthread_cond_broadcast(&p->cv);     /* wake the others to exit too */
    }
    pthread_mutex_unlock(&p->mu);
    return j;
}

/* Worth giving a buffer away only if someone would otherwise sit idle. */
static int hungry(struct pool *p)
{
    return __atomic_load_n(&p->idle, __ATOMIC_RELAXED) >
           __atomic_load_n(&p->njobs, __ATOMIC_RELAXED);
}

static void dir_put(struct dir *d)
{
    if (__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        if (d->fd >= 0)
            close(d->fd);
        free(d);
    }
}

static struct dir *dir_new(const char *parent, size_t plen, const char *name, size_t nlen)
{
    int slash = !(plen && parent[plen - 1] == '/');
    struct dir *d = malloc(sizeof *d + plen + slash + nlen + 1);
    if (!d)
        return NULL;
    memcpy(d->path, parent, plen);
    if (slash)
        d->path[plen] = '/';
    memcpy(d->path + plen + slash, name, nlen + 1);
    d->len = plen + slash + nlen;
    d->fd = -1;
    d->refs = 1;
    d->j.d = d;
    d->j.buf = NULL;
    d->j.len = 0;
    return d;
}

/* ------------------------------------------------------ opening directories */

static void set_anchor(struct worker *w, int fd, const char *path, size_t len)
{
    if (w->acap < len + 1) {
        char *np = realloc(w->apath, len + 1);
        if (!np) {                             /* no anchor is only slower */
            close(fd);
            return;
        }
        w->apath = np;
        w->acap = len + 1;
    }
    if (w->afd >= 0)
        close(w->afd);
    memcpy(w->apath, path, len);
    w->apath[len] = 0;
    w->alen = len;
    w->afd = fd;
}

/* openat() refuses paths of PATH_MAX bytes or more, which deep trees produce,
 * and resolves a long path one component at a time, which makes a deep chain
 * quadratic.  So a long path is opened relative to the worker's "anchor", an
 * O_PATH fd of a deep ancestor: directories below it, usually handled next by
 * the same worker since the stack is LIFO, open with a short relative path.
 * When the rest of the path is long, the anchor moves down to the target's
 * parent (in pieces shorter than PATH_MAX), so a chain of any depth costs a
 * bounded number of lookups per directory.  Renames under a walk can make an
 * anchor stale; the walk then measures the tree as moved, as du would. */
static int open_long(struct worker *w, const char *path, size_t len, int flags)
{
    int cur = AT_FDCWD;
    size_t off = 0;

    if (w->afd >= 0 && len > w->alen && path[w->alen] == '/' &&
        memcmp(path, w->apath, w->alen) == 0) {
        cur = w->afd;
        off = w->alen + 1;
    }
    while (len - off >= ANCHOR_REACH) {
        char piece[PATH_MAX];
        size_t span = len - off - 2;           /* never cut at a trailing '/' */
        if (span > PATH_MAX - 2)
            span = PATH_MAX - 2;
        const char *s = memrchr(path + off + 1, '/', span);
        if (!s)
            break;
        size_t cut = (size_t)(s - path);
        memcpy(piece, path + off, cut - off);
        piece[cut - off] = 0;
        int fd = openat(cur, piece, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        set_anchor(w, fd, path, cut);
        if (w->afd != fd) {                    /* could not record it */
            errno = ENOMEM;
            return -1;
        }
        cur = fd;
        for (off = cut + 1; path[off] == '/'; off++)
            ;
    }
    return openat(cur, path + off, flags);
}

static int open_dir(struct worker *w, const char *path, size_t len, int follow)
{
    int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY | (follow ? 0 : O_NOFOLLOW);
    if (len < LONG_PATH)
        return openat(AT_FDCWD, path, flags);
    return open_long(w, path, len, flags);
}

/* ---------------------------------------------------------------- the walk */

/* Stats every entry of one getdents64 buffer and queues the subdirectories. */
static void scan(struct worker *w, struct dir *d, const char *buf, size_t len)
{
    struct pool *p = w->p;
    struct job *first = NULL, *last = NULL;
    int n = 0;

    for (size_t off = 0; off < len;) {
        const struct dirent64_k *e = (const void *)(buf + off);
        const char *name = e->d_name;
        struct stat st;
        off += e->d_reclen;

        if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
            continue;
        if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) != 0) {
            if (errno != ENOENT)
                note_error(w, d->path, name, errno);
            continue;
        }
        if (p->one_fs && st.st_dev != p->root_dev)
            continue;                  /* du -x skips mount points entirely */
        if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
            int r = seen_insert(p, st.st_dev, st.st_ino);
            if (r == 0)
                continue;
            if (r < 0) {
                note_error(w, d->path, name, ENOMEM);
                continue;
            }
        }
        w->bytes += (unsigned long long)st.st_size;
        w->inodes++;
        if (S_ISDIR(st.st_mode)) {
            struct dir *c = dir_new(d->path, d->len, name, strlen(name));
            if (!c) {
                note_error(w, d->path, name, ENOMEM);
                continue;
            }
            c->j.next = first;
            first = &c->j;
            if (!last)
                last = first;
            n++;
        }
    }
    if (n)
        push(p, first, last, n);
}

static void read_dir(struct worker *w, struct dir *d)
{
    if (d->fd < 0) {
        d->fd = open_dir(w, d->path, d->len, 0);
        if (d->fd < 0) {
            /* ENOTDIR and ELOOP: replaced by a non-directory since its stat,
             * which is a vanishing too. */
            if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
                note_error(w, d->path, NULL, errno);
            free(d);
            return;
        }
    }
    for (;;) {
        long n = syscall(SYS_getdents64, d->fd, w->buf, DENTS_SIZE);
        if (n <= 0) {
            if (n < 0 && errno != ENOENT)
                note_error(w, d->path, NULL, errno);
            break;
        }
        if (hungry(w->p)) {
            char *nb = w->spare ? w->spare : malloc(DENTS_SIZE);
            struct job *b = malloc(sizeof *b);
            if (nb && b) {
                w->spare = NULL;
                b->d = d;
                b->buf = w->buf;
                b->len = (size_t)n;
                __atomic_add_fetch(&d->refs, 1, __ATOMIC_ACQ_REL);
                w->buf = nb;
                push(w->p, b, b, 1);
                continue;
            }
            if (nb != w->spare)
                free(nb);
            free(b);
        }
        scan(w, d, w->buf, (size_t)n);
    }
    dir_put(d);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct job *j;
    int finished = 0;

    while ((j = next_job(w->p, finished))) {
        if (!j->buf) {
            read_dir(w, j->d);
        } else {
            scan(w, j->d, j->buf, j->len);
            if (!w->spare)
                w->spare = j->buf;
            else
                free(j->buf);
            dir_put(j->d);
            free(j);
        }
        finished = 1;
    }
    return NULL;
}

int walk_tree(const char *root, int threads, int one_fs, struct walk_result *r,
              char *err, size_t errlen)
{
    struct stat st;
    struct pool *p;
    struct worker *ws;
    pthread_t tids[MAX_THREADS];
    int fd, started = 1, ret = -1;
    size_t rlen = strlen(root);

    memset(r, 0, sizeof *r);
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;

    if (stat(root, &st) != 0) {
        snprintf(err, errlen, "%s: %s", root, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        r->bytes = (unsigned long long)st.st_size;
        r->inodes = 1;
        return 0;
    }

    p = calloc(1, sizeof *p);
    ws = aligned_alloc(64, sizeof *ws * (size_t)threads);
    struct dir *d = dir_new(root, rlen, "", 0);
    if (!p || !ws || !d) {
        snprintf(err, errlen, "%s: %s", root, strerror(ENOMEM));
        free(p); free(ws); free(d);
        return -1;
    }
    d->len = rlen;                     /* dir_new appended a '/' to the root */
    d->path[rlen] = 0;
    memset(ws, 0, sizeof *ws * (size_t)threads);
    for (int i = 0; i < threads; i++) {
        ws[i].p = p;
        ws[i].afd = -1;
        ws[i].buf = malloc(DENTS_SIZE);
        if (!ws[i].buf) {
            snprintf(err, errlen, "%s: %s", root, strerror(ENOMEM));
            goto out;
        }
    }

    fd = open_dir(&ws[0], root, rlen, 1);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", root, strerror(errno));
        if (fd >= 0)
            close(fd);
        goto out;
    }
    d->fd = fd;
    r->bytes = (unsigned long long)st.st_size;
    r->inodes = 1;

    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_mutex_init(&p->err_mu, NULL);
    for (int i = 0; i < NSHARDS; i++)
        pthread_mutex_init(&p->seen[i].mu, NULL);
    p->one_fs = one_fs;
    p->root_dev = st.st_dev;
    p->nthreads = threads;
    d->j.next = NULL;
    p->top = &d->j;
    p->njobs = 1;

    /* The caller is worker 0; a thread that fails to start only costs speed. */
    for (; started < threads; started++)
        if (pthread_create(&tids[started], NULL, worker_main, &ws[started]) != 0)
            break;
    worker_main(&ws[0]);
    for (int i = 1; i < started; i++)
        pthread_join(tids[i], NULL);
    d = NULL;                          /* freed by the walk */

    for (int i = 0; i < threads; i++) {
        r->bytes += ws[i].bytes;
        r->inodes += ws[i].inodes;
        r->errors += ws[i].errors;
    }
    if (p->have_error)
        memcpy(r->first_error, p->first_error, sizeof r->first_error);
    for (int i = 0; i < NSHARDS; i++) {
        free(p->seen[i].tab);
        pthread_mutex_destroy(&p->seen[i].mu);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->err_mu);
    ret = 0;
out:
    for (int i = 0; i < threads; i++) {
        free(ws[i].buf);
        free(ws[i].spare);
        free(ws[i].apath);
        if (ws[i].afd >= 0)
            close(ws[i].afd);
    }
    free(d);
    free(ws);
    free(p);
    return ret;
}
