/* ptw - writes a PyTorch .pt file: the zip container torch.save (>= 1.6) writes.
 *
 * Every member stored (no compression), under one top-level folder ARCHIVE, its data starting
 * at a multiple of 64 bytes from the start of the file (the local header's extra field 'FB'
 * pads, as torch's writer does), CRC-32 in the central directory, ZIP64 records for a member or
 * an offset past 4 GiB.  torch.save writes ARCHIVE/data.pkl (pklw.h), then each storage
 * ARCHIVE/data/KEY, then ARCHIVE/version ("3\n"); ptw_close() adds the version.
 *
 * A storage is streamed: ptw_begin() with its size, ptw_write() its bytes in pieces (a 176B's
 * optimizer partition is 5 GB and never in memory whole), ptw_end().  The CRC, known only
 * after the data, is patched into the member's local header then (outfile_patch), so the
 * headers are complete as torch's own writer leaves them - no data descriptors, which libzip's
 * consistency check (pt.c opens with ZIP_CHECKCONS) refuses.  The file is written through
 * outfile.h: nobody sees it before ptw_close() has synced and published it; ptw_abort() leaves
 * nothing. */
#ifndef CKPT_PTW_H
#define CKPT_PTW_H

#include <stddef.h>
#include <stdint.h>

struct ptw;

/* Sizes and offsets from which ZIP64 records are written: 0xffffffff (the zip limit); tests
 * lower it to exercise them on small files. */
extern uint64_t ptw_zip64_at;

/* path: the file to write; archive: the folder name inside ("archive", as torch names it when
 * saving to an open file, or the file's base name).  NULL + err. */
struct ptw *ptw_create(const char *path, const char *archive, char *err, size_t errlen);
/* member ARCHIVE/name, declared size bytes: begin, write them all, end.  0, or -1 + ptw_error */
int ptw_begin(struct ptw *w, const char *name, uint64_t size);
int ptw_write(struct ptw *w, const void *p, size_t n);
int ptw_end(struct ptw *w);
/* a whole member at once */
int ptw_member(struct ptw *w, const char *name, const void *p, size_t n);
/* ARCHIVE/version, the central directory; synced and published.  Frees w.  0, or -1 + err */
int ptw_close(struct ptw *w, char *err, size_t errlen);
void ptw_abort(struct ptw *w);
const char *ptw_error(const struct ptw *w);

#endif
