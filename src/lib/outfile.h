/* outfile - an output file that no reader sees before it is complete, written as a stream or
 * in one piece.  Every program's output files go through it (DESIGN.md: "every output file is
 * written to a temporary name, fsynced and renamed"): mkindex's .bin/.idx, train's checkpoint
 * shards (safetensors.c) and dataset index cache, hub-sync's LFS objects, and every small file
 * through file_write_atomic() (file.h).
 *
 * The data goes to an anonymous file in the destination's directory (O_TMPFILE): a crash or a
 * kill -9 while it is written leaves nothing behind, and the kernel frees the space.  Only the
 * publish itself has a window: an anonymous file cannot replace a name, so it is linked as
 * ".NAME.tmp.PID.K" and renamed over NAME, and a kill -9 between the two leaves that link.  A
 * writer that owns NAME (it holds a lock no other writer of NAME can) clears such leftovers
 * with outfile_sweep().
 * Where O_TMPFILE is not supported (some network filesystems) or /proc is missing, a named
 * ".NAME.tmp.XXXXXX" is used instead and removed on error and, in a program that has not set
 * its own handlers, on SIGINT/SIGTERM/SIGHUP/SIGPIPE (only kill -9 can leave it behind).  A
 * program with its own handler for one of those (train stops cleanly on SIGTERM) keeps it: the
 * temporary is then its own leftover to clean, as train's saves do.
 *
 * Writes go through one large buffer (a plain write(2) per buffer, no stdio) so that the
 * program stays disk-bound; outfile_room() lets a caller convert tokens straight into it, and a
 * write larger than the buffer goes straight from the caller's memory (a checkpoint's tensors).
 *
 * Publishing is two-phase so that several files appear in a chosen order: outfile_sync() on all
 * of them (flush, fsync: the slow part, where errors like ENOSPC show up), then
 * outfile_publish() on each in order (a link or rename, plus a directory fsync).  mkindex
 * publishes .bin before .idx, so a complete-looking .idx never names a missing or half .bin.
 * outfile_publish_as() gives the file a name chosen only once it is written (an LFS object is
 * named by its hash), in another directory of the same filesystem. */
#ifndef LMTK_OUTFILE_H
#define LMTK_OUTFILE_H

#include <stddef.h>
#include <stdint.h>

struct outfile {
	char *path;            /* the destination */
	int fd, dirfd;
	int anon;              /* O_TMPFILE: no name until published */
	int slot;              /* named temporary: its slot in the signal handler's list, else -1 */
	unsigned char *buf;    /* allocated on first use */
	size_t len, cap;
	uint64_t size;         /* bytes written so far, buffered ones included */
	unsigned mode;         /* the published file's mode; 0: 0666 & ~umask (set after open) */
};

/* Set by tests to exercise the named-temporary path where O_TMPFILE works. */
extern int outfile_no_tmpfile;

/* Creates the hidden output for `path` (whose directory must exist).  bufsize: bytes of buffer.
 * 0, or -1 + err. */
int outfile_open(struct outfile *o, const char *path, size_t bufsize, char *err, size_t errlen);
int outfile_write(struct outfile *o, const void *p, size_t n, char *err, size_t errlen);
/* A pointer to at least n (<= the buffer size) free bytes of the buffer, flushing it first if
 * needed; the caller fills some and calls outfile_advance().  NULL + err on a write error. */
unsigned char *outfile_room(struct outfile *o, size_t n, char *err, size_t errlen);
static inline void outfile_advance(struct outfile *o, size_t n)
{
	o->len += n;
	o->size += n;
}
/* Overwrites n bytes already written at offset off (< o->size - n + 1): a header whose fields
 * are known only after what follows it (a zip member's CRC).  0, or -1 + err. */
int outfile_patch(struct outfile *o, uint64_t off, const void *p, size_t n, char *err,
		  size_t errlen);
/* Appends n bytes of fd from offset off (copy_file_range where the kernel can, else read/write). */
int outfile_copy(struct outfile *o, int fd, uint64_t off, uint64_t n, const char *src, char *err,
		 size_t errlen);
/* Flush, set the mode (o->mode, or 0666 & ~umask), fsync. */
int outfile_sync(struct outfile *o, char *err, size_t errlen);
/* Gives the synced file its name, replacing what was there; fsyncs the directory. */
int outfile_publish(struct outfile *o, char *err, size_t errlen);
/* outfile_publish() under another name, in a directory of the same filesystem that must
 * exist; o->path becomes it. */
int outfile_publish_as(struct outfile *o, const char *path, char *err, size_t errlen);
/* Drops an unpublished file (safe after publish, and twice); frees everything. */
void outfile_discard(struct outfile *o);
/* Removes the leftovers of interrupted writes of dir/base: the regular files named
 * ".BASE.tmp.*" (a named temporary, or an anonymous file's link killed before its rename).
 * Only for a caller no other writer of dir/base can run beside (it holds their lock): a
 * leftover cannot be told from a write in progress by its name.  Links and directories of
 * that name are not touched.  The number removed. */
int outfile_sweep(const char *dir, const char *base);

#endif
