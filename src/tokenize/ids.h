/* ids - the growing id array every tokenizer model appends to. */
#ifndef TOKENIZE_IDS_H
#define TOKENIZE_IDS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* (*out)[(*n)++] = id, doubling *cap (from 256) as needed; -1 when out of memory. */
static inline int ids_push(uint32_t **out, size_t *n, size_t *cap, uint32_t id)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		uint32_t *p = realloc(*out, c * sizeof *p);
		if (!p)
			return -1;
		*out = p;
		*cap = c;
	}
	(*out)[(*n)++] = id;
	return 0;
}

#endif
