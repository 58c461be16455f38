/* idx - Megatron's indexed dataset, MMIDIDX version 1: PREFIX.idx + PREFIX.bin.
 *
 *   .idx  "MMIDIDX\0\0"  u64 version=1  u8 dtype  u64 N  u64 D
 *         i32 sizes[N]  i64 pointers[N]  i64 doc_idx[D]          little-endian, unaligned
 *   .bin  the tokens of every sequence, concatenated, in dtype; no header
 *
 * (shared/spec/megatron-data.md has the full story.)  pointers[i] is the byte offset of sequence
 * i: the exclusive prefix sum of sizes[j] * itemsize.  doc_idx starts at 0, grows by the
 * sequence count at each document's end, and ends at N; a dataset of documents has one sequence
 * per document, so it is simply 0..N, and one of sentences (Megatron's --split-sentences, BERT's
 * data) a sequence per sentence.  The file is exactly 34 + 12N + 8D bytes; newer Megatron-LM may append
 * an int8 "sequence mode" per sequence (multimodal data), which only the file size tells.
 *
 * Reading maps the .idx read-only and never trusts it: idx_verify() walks every field against
 * every invariant, bounded by the real file size, and reports each problem with the field, the
 * index, and what was expected; idx_open() refuses a file with any problem, so the accessors
 * below need no checks.  `mkindex check` runs the same walk and reports everything it finds;
 * mkindex and train (gptdata, data) both read through here, so a hostile .idx meets one set of
 * checks and gets one set of messages, each naming the file and the field.
 *
 * Prefixes: a user who types the file (d_text_document.idx or .bin) for the prefix gets the
 * prefix (idx_prefix), and one who types the prefix mkindex was given (d) instead of the one it
 * wrote (d_text_document) is told which datasets exist there (idx_suggest).
 *
 * Writing is idxwrite.h beside it, on top of the streaming outfile. */
#ifndef LMTK_IDX_H
#define LMTK_IDX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define IDX_MAGIC "MMIDIDX\0\0"
#define IDX_HEADER 34u

enum { IDX_U8 = 1, IDX_I8 = 2, IDX_I16 = 3, IDX_I32 = 4, IDX_I64 = 5, IDX_F64 = 6, IDX_F32 = 7,
       IDX_U16 = 8 };

/* "uint16" etc. for codes 1..8, NULL otherwise */
const char *idx_dtype_name(int code);
/* bytes per element; 0 for an unknown code; code 7 (float) is 4 or 8 depending on the version */
unsigned idx_dtype_size(int code);
/* code for a name ("uint16", "int32", ...: the integer types only), 0 if none */
int idx_dtype_parse(const char *name);
/* Megatron's best_fitting_dtype(): uint16 below 65500 (unpadded vocab size), else int32 */
int idx_dtype_for_vocab(uint64_t vocab_size);
/* largest id the integer dtype holds */
int64_t idx_dtype_max(int code);
int idx_dtype_is_int(int code);

static inline uint32_t idx_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t idx_le64(const unsigned char *p)
{
	return (uint64_t)idx_le32(p) | (uint64_t)idx_le32(p + 4) << 32;
}
static inline void idx_put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}
static inline void idx_put64(unsigned char *p, uint64_t v)
{
	idx_put32(p, (uint32_t)v);
	idx_put32(p + 4, (uint32_t)(v >> 32));
}

/* --- verification: shared by idx_open (stop at the first problem) and `mkindex check` ------- */

/* What idx_verify found; the numbers are valid as far as the file let it read them. */
struct idx_layout {
	int magic_ok, version_ok, dtype;   /* dtype code as found */
	uint64_t version;
	unsigned itemsize;                 /* 0: unknown dtype */
	uint64_t n, d;                     /* N sequences, D doc_idx entries, as in the header */
	uint64_t tokens;                   /* sum of sizes (the non-negative ones) */
	int min_size_set;
	int32_t min_size, max_size;
	int seqmode;                       /* a trailing N-byte sequence-mode array */
};

enum idx_note { IDX_PROBLEM, IDX_NOTE };
/* Called once per finding with a complete sentence (no file name).  `what` groups repeated
 * findings ("sizes", "pointers", "doc_idx") so the caller can cap them.  Return nonzero to stop. */
typedef int (*idx_report_fn)(void *ctx, enum idx_note kind, const char *what, const char *msg);

/* Checks idx bytes (len of them) and, with bin_len >= 0, the .bin size.  Returns the number of
 * problems found (stopping early if report says so), filling *lay. */
uint64_t idx_verify(const unsigned char *idx, size_t len, int64_t bin_len, struct idx_layout *lay,
		    idx_report_fn report, void *ctx);

/* --- reading -------------------------------------------------------------------------------- */

struct idx {
	char *prefix, *idx_path, *bin_path;
	const unsigned char *map;   /* the .idx, mapped */
	size_t len;
	int bin_fd;                 /* -1 when only the .idx was opened */
	uint64_t bin_len;
	int64_t idx_mtime_ns, bin_mtime_ns;
	struct idx_layout lay;
	int dtype;
	unsigned itemsize;
	uint64_t n, d, tokens;
	const unsigned char *sizes, *pointers, *doc_idx;
};

enum { IDX_EIO = -1, IDX_EBAD = -2 };
/* 0; IDX_EIO when a file cannot be read (exit 3); IDX_EBAD when it breaks an invariant, or when
 * PREFIX.idx does not exist but idx_suggest() knows what was meant (exit 2).  err names the file
 * and the problem.  prefix may be the .idx's or the .bin's name (idx_prefix). */
int idx_open(struct idx *x, const char *prefix, char *err, size_t errlen);
/* Maps PREFIX.idx and opens PREFIX.bin without judging them (for check): IDX_EIO, IDX_EBAD (a
 * missing .idx with a suggestion) or 0.
 * bin_fd is -1 and bin_err says why when only the .bin is unreadable. */
int idx_map(struct idx *x, const char *prefix, char *bin_err, size_t bin_errlen, char *err,
	    size_t errlen);
/* idx_open without the .bin (bin_fd -1): the .idx alone is checked, for readers that need only
 * the sizes (a dry run over data whose .bin is elsewhere or not yet copied). */
int idx_open_index(struct idx *x, const char *prefix, char *err, size_t errlen);
void idx_close(struct idx *x);

/* The dataset prefix a user meant by arg: arg itself, or arg less a ".bin" or ".idx" suffix when
 * arg.idx does not exist.  malloc'd (NULL when out of memory). */
char *idx_prefix(const char *arg);
/* When PREFIX.idx does not exist but PREFIX_<key>_document.idx or PREFIX_<key>_sentence.idx
 * (what mkindex and Megatron's preprocessor write for --output-prefix PREFIX) do, writes
 * "did you mean PREFIX_text_document?" (or "... A or B?") into buf and returns 1; else 0 and "". */
int idx_suggest(const char *prefix, char *buf, size_t len);

static inline uint32_t idx_size(const struct idx *x, uint64_t i)
{
	return idx_le32(x->sizes + 4 * i);
}
static inline uint64_t idx_pointer(const struct idx *x, uint64_t i)
{
	return idx_le64(x->pointers + 8 * i);
}
static inline uint64_t idx_doc(const struct idx *x, uint64_t i)
{
	return idx_le64(x->doc_idx + 8 * i);
}
/* token offset of sequence s (0 <= s <= N) */
static inline uint64_t idx_seq_start(const struct idx *x, uint64_t s)
{
	return s < x->n ? idx_pointer(x, s) / x->itemsize : x->tokens;
}

/* Streams tokens [first, first+count) of the .bin through fn in chunks of whole tokens.
 * fn gets the raw little-endian bytes and the index of the chunk's first token; returns nonzero
 * to stop (which idx_scan returns).  -1 + err on a read error. */
typedef int (*idx_scan_fn)(void *ctx, const unsigned char *p, size_t ntok, uint64_t tok0);
int idx_scan(const struct idx *x, uint64_t first, uint64_t count, idx_scan_fn fn, void *ctx,
	     char *err, size_t errlen);
/* the token at p (itemsize bytes, x's integer dtype) */
int64_t idx_token(int dtype, const unsigned char *p);

#endif
