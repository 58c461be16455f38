/* strtab - a table of byte strings with ids: adding; the lookups are inline in strtab.h. */
#include "strtab.h"

#include <stdlib.h>

void strtab_free(struct strtab *t)
{
	free(t->bytes);
	free(t->off);
	free(t->len);
	free(t->slot);
	memset(t, 0, sizeof *t);
}

static void place(struct strtab_slot *slot, uint32_t mask, struct strtab_slot e)
{
	uint32_t i = e.hash & mask;
	while (slot[i].id1)
		i = (i + 1) & mask;
	slot[i] = e;
}

/* Room for one more string of len bytes with id: slots (at most half full), the by-id arrays and
 * the bytes.  0, or -1 with the table as it was (its arrays maybe larger). */
static int reserve(struct strtab *t, size_t len, uint32_t id)
{
	if (id > STRTAB_ID_MAX || len >= UINT32_MAX - t->nbytes)
		return -1;
	size_t nslot = t->slot ? (size_t)t->mask + 1 : 0;
	if (2 * ((size_t)t->n + 1) > nslot) {
		size_t ns = nslot ? 2 * nslot : 1024;
		struct strtab_slot *slot = calloc(ns, sizeof *slot);
		if (!slot || ns - 1 > UINT32_MAX) {
			free(slot);
			return -1;
		}
		for (size_t i = 0; i < nslot; i++)
			if (t->slot[i].id1)
				place(slot, (uint32_t)(ns - 1), t->slot[i]);
		free(t->slot);
		t->slot = slot;
		t->mask = (uint32_t)(ns - 1);
	}
	if (id >= t->id_cap) {
		size_t cap = t->id_cap ? t->id_cap : 1024;
		while (cap <= id)
			cap *= 2;
		uint32_t *o = realloc(t->off, cap * sizeof *o), *l;
		if (!o)
			return -1;
		t->off = o;
		if (!(l = realloc(t->len, cap * sizeof *l)))
			return -1;
		t->len = l;
		memset(l + t->id_cap, 0xff, (cap - t->id_cap) * sizeof *l);  /* STRTAB_NONE: no string */
		t->id_cap = (uint32_t)cap;
	}
	if (t->nbytes + len + 1 > t->capbytes) {
		size_t cap = t->capbytes ? t->capbytes : 1 << 16;
		while (cap < t->nbytes + len + 1)
			cap *= 2;
		char *b = realloc(t->bytes, cap);
		if (!b)
			return -1;
		t->bytes = b;
		t->capbytes = cap;
	}
	return 0;
}

/* adds s (not there, room reserved) as id */
static void add(struct strtab *t, uint64_t h, const char *s, size_t len, uint32_t id)
{
	uint32_t off = (uint32_t)t->nbytes;
	memcpy(t->bytes + off, s, len);
	t->bytes[off + len] = '\0';
	t->nbytes += len + 1;
	place(t->slot, t->mask, (struct strtab_slot){(uint32_t)h, (uint32_t)len, off, id + 1});
	t->off[id] = off;
	t->len[id] = (uint32_t)len;
	t->n++;
	if (id >= t->id_end)
		t->id_end = id + 1;
}

int strtab_put(struct strtab *t, const char *s, size_t len, uint32_t id, uint32_t *had)
{
	uint64_t h = strtab_hash(s, len);
	uint32_t old = strtab_find_hash(t, h, s, len);
	if (old != STRTAB_NONE) {
		*had = old;
		return STRTAB_DUP_STR;
	}
	if (id < t->id_end && t->len[id] != STRTAB_NONE)
		return STRTAB_DUP_ID;
	if (reserve(t, len, id) < 0)
		return -1;
	add(t, h, s, len, id);
	return 0;
}

uint32_t strtab_intern(struct strtab *t, const char *s, size_t len)
{
	uint64_t h = strtab_hash(s, len);
	uint32_t id = strtab_find_hash(t, h, s, len);
	if (id != STRTAB_NONE)
		return id;
	id = t->id_end;
	if (reserve(t, len, id) < 0)
		return STRTAB_NONE;
	add(t, h, s, len, id);
	return id;
}
