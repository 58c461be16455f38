/* file - whole-file reads, and writes that a reader (or a crash) never sees half done.
 *
 * file_write_atomic() is outfile.h for a buffer already in memory: the data goes to an
 * anonymous file (or a hidden ".PATH.tmp.XXXXXX" where the filesystem has no O_TMPFILE) in the
 * same directory, is fsynced, renamed over the destination, and the directory is fsynced so the
 * rename itself survives a power cut.  A killed writer never leaves a truncated PATH. */
#ifndef LMTK_FILE_H
#define LMTK_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* mode: the file's permissions, exactly (the umask does not apply); 0 means 0666 & ~umask. */
int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
		 char *err, size_t errlen);

/* fsync a directory, so renames and creations in it survive a power cut.  Best effort: some
 * filesystems refuse fsync on directories. */
void file_fsync_dir(const char *path);

/* mkdir -p: creates path and its missing parents (mode 0755 as umask allows).  0, or -1 + err
 * naming the component that could not be made. */
int file_mkdirs(const char *path, char *err, size_t errlen);

/* Reads a whole file into a malloc'd NUL-terminated buffer.  0, or -1 + err (errno kept). */
int file_read_all(const char *path, char **data, size_t *len, char *err, size_t errlen);

#endif
