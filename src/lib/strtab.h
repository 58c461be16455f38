/* strtab - a table of byte strings, each with a 32-bit id: the vocabularies of tokenize's BPE and
 * WordPiece models and Punkt's list of word types.
 *
 * Ids are either the caller's (strtab_put: a vocabulary file's ids, holes allowed) or the next
 * free one (strtab_intern: 0, 1, 2, ... in order of first sight).  Both directions are O(1):
 * id -> bytes through two arrays indexed by id; bytes -> id through an open-addressing table
 * (linear probing, at most half full) whose 16-byte slots hold 32 bits of the hash, the length,
 * the offset and the id, so a probe compares hash, then length, and reads the string's bytes only
 * when both agree.  That lookup is on tokenize's hot path (WordPiece looks up every candidate
 * piece of a word, longest first; a BPE that is not byte-level every character), which is why
 * the lookups are inline here rather than calls into strtab.c.
 *
 * The hash is FNV-1a over the bytes and a 64-bit finaliser.  It is exposed in steps
 * (strtab_hash_step, strtab_hash_fin) so that a caller can hash all the prefixes of a word in one
 * pass and look each up with strtab_find_hash, or hash a prefix once and continue it for every
 * piece (strtab_find_hash2 takes the string in two parts).  A byte at a time it is slower than a
 * word-at-a-time hash on long strings; tokens are a few bytes.
 *
 * All strings' bytes sit in one buffer, each followed by a NUL, so strtab_str gives a C string
 * when the string holds no NUL of its own.  Offsets are 32-bit: at most 4 GiB of strings.
 * A zeroed struct strtab is an empty table; strtab_free empties one. */
#ifndef LMTK_STRTAB_H
#define LMTK_STRTAB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define STRTAB_NONE 0xFFFFFFFFu
#define STRTAB_ID_MAX 0x7FFFFFFEu             /* the largest id */
#define STRTAB_HASH0 0xcbf29ce484222325ull   /* FNV-1a's offset basis: the state of no bytes */

struct strtab_slot {
	uint32_t hash;           /* the low 32 bits of the string's hash; the table indexes by them too */
	uint32_t len, off;       /* the string's bytes */
	uint32_t id1;            /* its id + 1; 0: an empty slot */
};

struct strtab {
	char *bytes;
	size_t nbytes, capbytes;
	uint32_t *off, *len;     /* by id; len STRTAB_NONE: no string has the id */
	uint32_t id_cap, id_end; /* of off/len; one past the largest id */
	uint32_t n;              /* strings */
	uint32_t mask;           /* slots - 1 (slots a power of two), when slot is not NULL */
	struct strtab_slot *slot;
};

/* strtab_put's answers besides 0 (added) and -1 (out of memory, or past the limits above) */
enum { STRTAB_DUP_STR = 1, STRTAB_DUP_ID = 2 };

/* Adds s with the id the caller gives it (at most STRTAB_ID_MAX).  0; STRTAB_DUP_STR if s is there
 * already (*had: its id); STRTAB_DUP_ID if another string has id; -1.  The table is unchanged
 * unless 0. */
int strtab_put(struct strtab *t, const char *s, size_t len, uint32_t id, uint32_t *had);
/* The id of s, added as id_end if new; STRTAB_NONE when out of memory (or past the limits). */
uint32_t strtab_intern(struct strtab *t, const char *s, size_t len);
void strtab_free(struct strtab *t);

static inline uint64_t strtab_hash_step(uint64_t h, const void *p, size_t n)
{
	const uint8_t *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

static inline uint64_t strtab_hash_fin(uint64_t h)  /* so that the low bits index well */
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static inline uint64_t strtab_hash(const void *p, size_t n)
{
	return strtab_hash_fin(strtab_hash_step(STRTAB_HASH0, p, n));
}

/* the id of s, whose strtab_hash is h, or STRTAB_NONE */
static inline uint32_t strtab_find_hash(const struct strtab *t, uint64_t h, const char *s, size_t len)
{
	if (!t->slot)
		return STRTAB_NONE;
	for (uint32_t i = (uint32_t)h & t->mask;; i = (i + 1) & t->mask) {
		const struct strtab_slot *e = &t->slot[i];
		if (!e->id1)
			return STRTAB_NONE;
		if (e->hash == (uint32_t)h && e->len == len && memcmp(t->bytes + e->off, s, len) == 0)
			return e->id1 - 1;
	}
}

/* the id of the string a then b, whose strtab_hash is h, or STRTAB_NONE */
static inline uint32_t strtab_find_hash2(const struct strtab *t, uint64_t h, const char *a, size_t alen,
					 const char *b, size_t blen)
{
	if (!t->slot)
		return STRTAB_NONE;
	for (uint32_t i = (uint32_t)h & t->mask;; i = (i + 1) & t->mask) {
		const struct strtab_slot *e = &t->slot[i];
		if (!e->id1)
			return STRTAB_NONE;
		if (e->hash == (uint32_t)h && e->len == alen + blen && memcmp(t->bytes + e->off, a, alen) == 0 &&
		    memcmp(t->bytes + e->off + alen, b, blen) == 0)
			return e->id1 - 1;
	}
}

static inline uint32_t strtab_find(const struct strtab *t, const char *s, size_t len)
{
	return strtab_find_hash(t, strtab_hash(s, len), s, len);
}

/* the bytes of id (NUL-terminated), or NULL (and *len 0) when no string has it */
static inline const char *strtab_str(const struct strtab *t, uint32_t id, size_t *len)
{
	if (id >= t->id_end || t->len[id] == STRTAB_NONE)
		return *len = 0, NULL;
	*len = t->len[id];
	return t->bytes + t->off[id];
}

static inline uint32_t strtab_count(const struct strtab *t) { return t->n; }
static inline uint32_t strtab_id_end(const struct strtab *t) { return t->id_end; }

#endif
