/* checksums - a step's files against the sizes and CRC-32Cs its manifest records.
 *
 * The manifest's "files" gives, for every shard, "bytes" and "crc32c": the size and CRC-32C of
 * the data of all its tensors in file order (what the writer streamed; the safetensors header is
 * not covered, but it must parse and place every tensor inside the file).  cs_verify_step()
 * checks every listed file that way and nothing else - no model, layout or optimizer kind - so
 * it answers "is this a faithful copy of what was saved?" for any lmtk checkpoint, 8-bit Adam's
 * too: what a backup needs before it puts a step under its final name (slurm/ckpt-backup.slurm,
 * ckpt-sync-ln --verify).  sh_open() does the same check and the model's on top.
 *
 * The step is held with the readers' lock (steplock.h) while it is read. */
#ifndef CKPT_CHECKSUMS_H
#define CKPT_CHECKSUMS_H

#include <stddef.h>
#include <stdint.h>

#include "progress.h"

struct cs_file {
	char name[256];
	uint64_t bytes;           /* measured (0 when the file could not be read) */
	char crc[12];             /* measured, "%08x" ("" when not) */
	int ok;
	char why[600];            /* what is wrong, when !ok */
};

struct cs_result {
	char *dir;                /* the step directory checked */
	struct cs_file *files;
	int n, bad;
	uint64_t bytes;           /* all files' checked bytes */
};

/* path: a step directory, or a save directory (the step its `latest` names; sh_step_dir()).
 * 0 every file matches; EXIT_FINDING some do not (res->files says which and why); EXIT_USAGE no
 * usable manifest; EXIT_FAILED I/O or interrupted (+ err).  cs_free() after any of them. */
int cs_verify_step(const char *path, struct progress *pg, struct cs_result *res, char *err,
		   size_t errlen);
void cs_free(struct cs_result *res);

#endif
