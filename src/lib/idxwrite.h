/* idxwrite - writing Megatron's .bin/.idx pairs (lib/idx.h has the format and the reader).
 *
 * idx_writer streams tokens into the .bin (converted to the dtype as they come) and keeps only
 * the sizes, 4 bytes per document, in memory; the .idx is written at the end, and both appear
 * together (see outfile.h).  Merging streams the inputs' .bin bytes and rewrites their .idx
 * arrays, also without holding them.  Built on outfile.h, as every output file is. */
#ifndef LMTK_IDXWRITE_H
#define LMTK_IDXWRITE_H

#include "idx.h"
#include "outfile.h"
#include "progress.h"

/* --- writing -------------------------------------------------------------------------------- */

struct idx_writer {
	char *prefix;
	int dtype;
	unsigned itemsize;
	int64_t maxid;
	struct outfile bin, idx;
	uint32_t *sizes;           /* one per sequence */
	uint64_t n, cap, tokens;
	int by_doc;                /* sequences are grouped into documents by idx_writer_end_doc() */
	uint64_t *doc_end;         /* by_doc: doc_idx[1..], each document's end (a sequence count) */
	uint64_t ndoc, doccap;
};

/* Starts PREFIX.bin (hidden until committed).  0, or -1 + err (I/O). */
int idx_writer_open(struct idx_writer *w, const char *prefix, int dtype, size_t bufsize, char *err,
		    size_t errlen);
/* Appends one sequence of n ids: a whole document, unless idx_writer_end_doc() groups them.  0;
 * -2 + err when an id does not fit the dtype or the sequence is longer than int32 sizes allow
 * (bad input); -1 + err (I/O). */
int idx_writer_add(struct idx_writer *w, const uint32_t *ids, uint32_t n, char *err, size_t errlen);
/* Ends a document at the sequences added so far (Megatron's end_document()), for datasets whose
 * documents have several sequences (sentences); once called, doc_idx is what these calls made,
 * instead of one document per sequence.  0, or -1 + err (out of memory). */
int idx_writer_end_doc(struct idx_writer *w, char *err, size_t errlen);
/* Phase one: writes the .idx and fsyncs both (see outfile.h).  0 or -1 + err. */
int idx_writer_finish(struct idx_writer *w, char *err, size_t errlen);
/* Phase two: .bin, then .idx, get their names. */
int idx_writer_publish(struct idx_writer *w, char *err, size_t errlen);
/* Discards whatever was not published and frees. */
void idx_writer_close(struct idx_writer *w);

/* Merges the inputs (all open, same dtype) into OUT.bin/.idx, published .bin first.  pg (NULL:
 * none) shows the bytes written of both files' total ("merging"), begun and ended here. */
int idx_merge(const char *out, struct idx *in, int nin, struct progress *pg, char *err,
	      size_t errlen);

#endif
