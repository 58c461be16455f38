/* tokstream - the binary token stream that tokenize writes and mkindex reads (lmtk-tokens(5)).
 *
 * Little-endian, no alignment:
 *
 *   header   "LMTKTOK1"             8 bytes magic
 *            u32 version            1, or 2 for a stream that may hold sentences
 *            u32 vocab_size         every id is < vocab_size (the tokenizer's unpadded size)
 *            u32 eod                the EOD id, or 0xFFFFFFFF if none
 *            u32 level              version 2 only: 0 documents, 1 sentences
 *            u32 nkeys              >= 1: the JSON keys (or "text" for plain-text input)
 *            nkeys x { u32 len; len bytes of UTF-8 name }
 *   records  u32 key; u32 n; n x u32 id          a document (level 0) or a sentence (level 1) of
 *                                                 key, in input order; writers skip empty ones
 *            u32 0xFFFFFFFE; u32 key              level 1 only: key's current document ends
 *   end      u32 0xFFFFFFFF; u32 0               written last: a stream without it was cut short
 *
 * u32 ids keep any vocabulary (BLOOM's 250k) in one format and cost nothing next to the BPE; the
 * end record lets mkindex refuse a stream whose producer died, instead of indexing half a corpus.
 * Sentences (tokenize --split-sentences, Megatron's sentence datasets) need a version 2 header,
 * which a reader of version 1 refuses by its version number instead of taking sentences for
 * documents; a document stream is still written as version 1.  Writers buffer; readers validate
 * every field and name the byte offset of anything wrong. */
#ifndef LMTK_TOKSTREAM_H
#define LMTK_TOKSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TOKSTREAM_MAGIC "LMTKTOK1"
#define TOKSTREAM_NO_EOD 0xFFFFFFFFu
#define TOKSTREAM_END 0xFFFFFFFFu
#define TOKSTREAM_DOC_END 0xFFFFFFFEu
enum { TOKSTREAM_DOCUMENTS = 0, TOKSTREAM_SENTENCES = 1 };
#define TOKSTREAM_MAX_KEYS 64

struct tokstream_header {
	uint32_t version, vocab_size, eod, nkeys;
	uint32_t level;         /* TOKSTREAM_DOCUMENTS or TOKSTREAM_SENTENCES; the writer picks the version */
	char *keys[TOKSTREAM_MAX_KEYS];
};

/* Writing: header once, then records, then the end marker.  0, or -1 on a write error (errno). */
int tokstream_write_header(FILE *f, const struct tokstream_header *h);
int tokstream_write_doc(FILE *f, uint32_t key, const uint32_t *ids, uint32_t n);
/* level TOKSTREAM_SENTENCES: the sentences written since key's last document end are a document */
int tokstream_write_doc_end(FILE *f, uint32_t key);
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
/* 1 = a record in (*key, r->ids[0..*n)): a document, or a sentence at level TOKSTREAM_SENTENCES;
 * 2 = (level TOKSTREAM_SENTENCES) the end of key *key's document, *n = 0; 0 = clean end marker;
 * -1 = error (truncated stream, key out of range, id >= vocab_size, I/O) with err naming the
 * offset. */
int tokstream_next(struct tokstream_reader *r, uint32_t *key, uint32_t *n, char *err, size_t errlen);
void tokstream_close(struct tokstream_reader *r);

#endif
