/* xalloc - allocation that names what it sizes and how much.
 *
 * A bare out-of-memory message leaves a user guessing which of a dozen buffers ran out and whether a
 * smaller --batch would help.  Every failed allocation here says what it was for and its size:
 *
 *     train: out of memory for the optimizer's moment buffers: 12.00 GiB
 *
 * Program code uses the dying allocators (xmalloc and friends): on failure they die() with exit 3
 * (EXIT_FAILED, could not do the job).  Library code that reports errors instead of dying keeps
 * calling malloc and, when it returns NULL, fills its error buffer with xalloc_err(), which returns
 * -1 like errf() so a call site stays one line:
 *
 *     if (!(t = malloc(n * sizeof *t)))
 *             return xalloc_err(err, errlen, "the tokenizer's merge table", n * sizeof *t);
 *
 * `what` is a noun phrase ("the token index", "a 4096-token document"); bytes 0 means the size is
 * not known (several buffers checked at once) and leaves it out of the message.  xalloc_msg() gives
 * the same text for error helpers that take a format of their own. */
#ifndef LMTK_XALLOC_H
#define LMTK_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n, const char *what);
void *xcalloc(size_t count, size_t size, const char *what);   /* count * size overflow checked */
void *xrealloc(void *p, size_t n, const char *what);
char *xstrdup(const char *s, const char *what);
/* the dying allocators' message and exit, for an allocator of its own (a device's) that failed */
void xalloc_die(const char *what, size_t bytes) __attribute__((noreturn));

/* "out of memory for WHAT: SIZE" into err; returns -1 */
int xalloc_err(char *err, size_t errlen, const char *what, size_t bytes);
/* "PATH: out of memory for WHAT: SIZE" into err; returns -1 */
int xalloc_err_in(char *err, size_t errlen, const char *path, const char *what, size_t bytes);
/* the same text in buf; returns buf */
char *xalloc_msg(char *buf, size_t len, const char *what, size_t bytes);

/* count * size into *bytes; -1 (and *bytes = SIZE_MAX) when it overflows */
int xalloc_mul(size_t count, size_t size, size_t *bytes);

#endif
