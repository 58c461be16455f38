/* tokstream - the binary token stream that tokenize writes and mkindex reads (lmtk-tokens(5)).
 *
 * Little-endian, no alignment:
 *
 *   header   "LMTKTOK1"             8 bytes magic
 *            u32 version            = 1
 *            u32 vocab_size         every id is < vocab_size (the tokenizer's unpadded size)
 *            u32 eod                the EOD id, or 0xFFFFFFFF if none
 *            u32 nkeys              >= 1: the JSON keys (or "text" for plain-text input)
 *            nkeys x { u32 len; len bytes of UTF-8 name }
 *   records  u32 key; u32 n; n x u32 id          one per non-empty document, in input order
 *   end      u32 0xFFFFFFFF; u32 0               written last: a stream without it was cut short
 *
 * u32 ids keep any vocabulary (BLOOM's 250k) in one format and cost nothing next to the BPE; the
 * end record lets mkindex refuse a stream whose producer died, instead of indexing half a corpus.
 * Writers buffer; readers validate every field and name the byte offset of anything wrong. */
#ifndef LMTK_TOKSTREAM_H
#define LMTK_TOKSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TOKSTREAM_MAGIC "LMTKTOK1"
#define TOKSTREAM_NO_EOD 0xFFFFFFFFu
#define TOKSTREAM_END 0xFFFFFFFFu
#define TOKSTREAM_MAX_KEYS 64

struct tokstream_header {
	uint32_t version, vocab_size, eod, nkeys;
	char *keys[TOKSTREAM_MAX_KEYS];
};

/* Writing: header once, then records, then the end marker.  0, or -1 on a write error (errno). */
int tokstream_write_header(FILE *f, const struct tokstream_header *h);
int tokstream_write_doc(FILE *f, uint32_t key, const uint32_t *ids, uint32_t n);
int tokstream_write_end(FILE *f);

/* Reading.  name is used in messages ("<stdin>").  tokstream_open: 0, or -1 + err with nothing
 * left to close. */
struct tokstream_reader {
	FILE *f;
	const char *name;
	uint64_t offset;        /* bytes consumed so far, for error messages */
	struct tokstream_header h;
	uint32_t *ids;          /* the current document (owned; reused) */
	size_t cap;
};
int tokstream_open(struct tokstream_reader *r, FILE *f, const char *name, char *err, size_t errlen);
/* 1 = a document in (*key, r->ids[0..*n)), 0 = clean end marker, -1 = error (truncated stream,
 * key out of range, id >= vocab_size, I/O) with err naming the offset. */
int tokstream_next(struct tokstream_reader *r, uint32_t *key, uint32_t *n, char *err, size_t errlen);
void tokstream_close(struct tokstream_reader *r);

#endif
