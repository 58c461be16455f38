/* punkt_params - Punkt's four tables, and their JSON file.
 *
 * Every type string the parameters know (an abbreviation, a sentence starter, either word of a
 * collocation, a type with an orthographic context) is interned once in a string table; the
 * per-type answers are two bytes indexed by its id, and a collocation is a pair of ids in a hash
 * set.  A lookup during splitting is one hash of the candidate string.
 *
 * The file is JSON so that NLTK can read it back into a PunktParameters (tests/ref/punkt-ref.py
 * does) and people can read it:
 *
 *   {"format": "lmtk-punkt-params 1", "trained_on": "...",
 *    "abbrev_types": ["dr", "u.s", ...], "collocations": [["s", "bach"], ...],
 *    "sent_starters": ["but", ...], "ortho_context": [["the", 34], ...]}
 *
 * (ortho_context is NLTK's dict as a list of pairs: a type may hold a NUL, which JSON readers do
 * not take in an object key.)  Its numbers are NLTK's bit sets (2 BEG_UC, 4 MID_UC, 8 UNK_UC, 16 BEG_LC, 32 MID_LC,
 * 64 UNK_LC); lists are sorted by bytes and zero contexts left out, so one training gives one
 * file, byte for byte. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "file.h"
#include "msg.h"
#include "xalloc.h"
#include "tokenize/punkt_int.h"

#define FORMAT "lmtk-punkt-params 1"

/* --- parameters ----------------------------------------------------------------------------------- */

struct punkt_params *pk_params_new(void)
{
	return calloc(1, sizeof(struct punkt_params));
}

void punkt_params_free(struct punkt_params *p)
{
	if (!p)
		return;
	strtab_free(&p->types);
	free(p->ortho);
	free(p->flags);
	free(p->colloc);
	free(p);
}

uint32_t pk_params_type(struct punkt_params *p, const char *s, size_t len)
{
	uint32_t id = strtab_intern(&p->types, s, len);
	if (id == PK_NONE || id < p->cap)
		return id;
	uint32_t cap = p->cap ? 2 * p->cap : 1024;
	while (cap <= id)
		cap *= 2;
	uint8_t *o = realloc(p->ortho, cap), *f = o ? realloc(p->flags, cap) : NULL;
	if (o)
		p->ortho = o;
	if (!f)
		return PK_NONE;
	p->flags = f;
	memset(p->ortho + p->cap, 0, cap - p->cap);
	memset(p->flags + p->cap, 0, cap - p->cap);
	p->cap = cap;
	return id;
}

static uint64_t colloc_key(uint32_t a, uint32_t b)
{
	return (uint64_t)(a + 1) << 32 | (b + 1);
}

static size_t colloc_slot(uint64_t key, size_t mask)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 17) & mask;
}

int pk_params_has_colloc(const struct punkt_params *p, uint32_t a, uint32_t b)
{
	if (!p->colloc_slots)
		return 0;
	uint64_t k = colloc_key(a, b);
	size_t mask = p->colloc_slots - 1;
	for (size_t i = colloc_slot(k, mask);; i = (i + 1) & mask) {
		if (p->colloc[i] == k)
			return 1;
		if (!p->colloc[i])
			return 0;
	}
}

int pk_params_add_colloc(struct punkt_params *p, uint32_t a, uint32_t b)
{
	if (pk_params_has_colloc(p, a, b))
		return 0;
	if (2 * (p->ncolloc + 1) > p->colloc_slots) {
		size_t n = p->colloc_slots ? 2 * p->colloc_slots : 256;
		uint64_t *t = calloc(n, sizeof *t);
		if (!t)
			return -1;
		for (size_t i = 0; i < p->colloc_slots; i++) {
			if (!p->colloc[i])
				continue;
			size_t j = colloc_slot(p->colloc[i], n - 1);
			while (t[j])
				j = (j + 1) & (n - 1);
			t[j] = p->colloc[i];
		}
		free(p->colloc);
		p->colloc = t;
		p->colloc_slots = n;
	}
	uint64_t k = colloc_key(a, b);
	size_t i = colloc_slot(k, p->colloc_slots - 1);
	while (p->colloc[i])
		i = (i + 1) & (p->colloc_slots - 1);
	p->colloc[i] = k;
	p->ncolloc++;
	return 0;
}

void punkt_params_counts(const struct punkt_params *p, size_t *abbrevs, size_t *collocations, size_t *starters,
			 size_t *ortho)
{
	*abbrevs = p->nabbrev;
	*collocations = p->ncolloc;
	*starters = p->nstarter;
	*ortho = p->northo;
}

/* --- reading -------------------------------------------------------------------------------------- */

static int str_of(json_t *v, const char **s, size_t *len)
{
	if (!json_is_string(v))
		return -1;
	*s = json_string_value(v);
	*len = json_string_length(v);
	return 0;
}

/* marks each string of array key with flag; counts into *count */
static int read_set(struct punkt_params *p, json_t *root, const char *key, uint8_t flag, size_t *count,
		    const char *name, char *err, size_t errlen)
{
	json_t *a = json_object_get(root, key), *v;
	size_t i, len;
	const char *s;
	if (!json_is_array(a))
		return errf(err, errlen, "%s: \"%s\" is missing or not a list; is this a Punkt parameters file "
			    "(tokenize --train-punkt)?", name, key);
	json_array_foreach(a, i, v) {
		if (str_of(v, &s, &len) < 0)
			return errf(err, errlen, "%s: %s[%zu] is not a string", name, key, i);
		uint32_t id = pk_params_type(p, s, len);
		if (id == PK_NONE)
			return xalloc_err_in(err, errlen, name, "the Punkt parameters' word types", 0);
		if (!(p->flags[id] & flag))
			(*count)++;
		p->flags[id] |= flag;
	}
	return 0;
}

struct punkt_params *punkt_params_parse(const char *json, size_t len, const char *name, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &je), *a, *v;
	struct punkt_params *p = pk_params_new();
	const char *s, *t;
	size_t i, sl, tl;

	if (!p) {
		xalloc_err_in(err, errlen, name, "the Punkt parameters", 0);
		goto fail;
	}
	if (!root) {
		errf(err, errlen, "%s:%d: %s", name, je.line, je.text);
		goto fail;
	}
	if (!json_is_object(root) || !json_is_string(json_object_get(root, "format")) ||
	    strcmp(json_string_value(json_object_get(root, "format")), FORMAT) != 0) {
		errf(err, errlen, "%s: not a Punkt parameters file: \"format\" is not \"%s\" (make one with "
		     "tokenize --train-punkt)", name, FORMAT);
		goto fail;
	}
	if (read_set(p, root, "abbrev_types", PK_P_ABBREV, &p->nabbrev, name, err, errlen) < 0 ||
	    read_set(p, root, "sent_starters", PK_P_STARTER, &p->nstarter, name, err, errlen) < 0)
		goto fail;
	a = json_object_get(root, "collocations");
	if (!json_is_array(a)) {
		errf(err, errlen, "%s: \"collocations\" is missing or not a list", name);
		goto fail;
	}
	json_array_foreach(a, i, v) {
		if (!json_is_array(v) || json_array_size(v) != 2 || str_of(json_array_get(v, 0), &s, &sl) < 0 ||
		    str_of(json_array_get(v, 1), &t, &tl) < 0) {
			errf(err, errlen, "%s: collocations[%zu] is not a pair of strings", name, i);
			goto fail;
		}
		uint32_t x = pk_params_type(p, s, sl), y = x == PK_NONE ? PK_NONE : pk_params_type(p, t, tl);
		if (y == PK_NONE || pk_params_add_colloc(p, x, y) < 0) {
			xalloc_err_in(err, errlen, name, "the Punkt parameters' collocations", 0);
			goto fail;
		}
	}
	a = json_object_get(root, "ortho_context");
	if (!json_is_array(a)) {
		errf(err, errlen, "%s: \"ortho_context\" is missing or not a list", name);
		goto fail;
	}
	json_array_foreach(a, i, v) {
		json_t *fv = json_array_get(v, 1);
		json_int_t f = json_is_integer(fv) ? json_integer_value(fv) : -1;
		if (!json_is_array(v) || json_array_size(v) != 2 || str_of(json_array_get(v, 0), &s, &sl) < 0) {
			errf(err, errlen, "%s: ortho_context[%zu] is not a pair [type, contexts]", name, i);
			goto fail;
		}
		if (f < 0 || f > 127 || (f & 1)) {
			errf(err, errlen, "%s: ortho_context[%zu] (\"%s\"): %s is not a set of context bits (an even "
			     "number below 128)", name, i, s, json_is_integer(fv) ? "the number" : "the second item");
			goto fail;
		}
		uint32_t id = pk_params_type(p, s, sl);
		if (id == PK_NONE) {
			xalloc_err_in(err, errlen, name, "the Punkt parameters' orthographic contexts", 0);
			goto fail;
		}
		if (!p->ortho[id] && f)
			p->northo++;
		p->ortho[id] = (uint8_t)f;
	}
	json_decref(root);
	return p;
fail:
	json_decref(root);
	punkt_params_free(p);
	return NULL;
}

struct punkt_params *punkt_params_load(const char *path, char *err, size_t errlen)
{
	char *data;
	size_t len;
	if (file_read_all(path, &data, &len, err, errlen) < 0)
		return NULL;
	struct punkt_params *p = punkt_params_parse(data, len, path, err, errlen);
	free(data);
	return p;
}

/* --- writing -------------------------------------------------------------------------------------- */

static const struct strtab *sort_tab;

static int by_bytes(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	size_t lx = sort_tab->len[x], ly = sort_tab->len[y];
	int c = memcmp(sort_tab->bytes + sort_tab->off[x], sort_tab->bytes + sort_tab->off[y], lx < ly ? lx : ly);
	return c ? c : (lx > ly) - (lx < ly);
}

static int by_pair(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	int c = by_bytes(x, y);
	return c ? c : by_bytes(x + 1, y + 1);
}

struct out {
	char *p;
	size_t len, cap;
	int oom;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 1 << 16;
		while (o->len + n + 1 > cap)
			cap *= 2;
		char *p = realloc(o->p, cap);
		if (!p) {
			o->oom = 1;
			return;
		}
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* a JSON string: quotes, backslashes and control characters escaped, the rest as UTF-8 */
static void put_str(struct out *o, const char *s, size_t n)
{
	size_t from = 0;
	put(o, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		char esc[8];
		put(o, s + from, i - from);
		if (c == '"' || c == '\\')
			snprintf(esc, sizeof esc, "\\%c", c);
		else if (c == '\n')
			snprintf(esc, sizeof esc, "\\n");
		else if (c == '\t')
			snprintf(esc, sizeof esc, "\\t");
		else
			snprintf(esc, sizeof esc, "\\u%04x", c);
		puts_(o, esc);
		from = i + 1;
	}
	put(o, s + from, n - from);
	put(o, "\"", 1);
}

static void put_id(struct out *o, const struct strtab *t, uint32_t id)
{
	size_t len;
	const char *s = strtab_str(t, id, &len);
	put_str(o, s, len);
}

/* a list, one item a line */
static void put_list(struct out *o, const char *name, int last)
{
	if (!last) {
		puts_(o, ",\n \"");
		puts_(o, name);
		puts_(o, "\": [");
	} else {
		puts_(o, "\n ]");
	}
}

char *punkt_params_json(const struct punkt_params *p, const char *trained_on)
{
	const struct strtab *t = &p->types;
	uint32_t *ids = malloc(((size_t)t->n + 1) * sizeof *ids), *pairs = malloc((p->ncolloc + 1) * 2 * sizeof *pairs);
	struct out o = {0};
	size_t n = 0, np = 0;
	const char *sep;
	char num[16];

	if (!ids || !pairs)
		goto done;
	sort_tab = t;
	for (uint32_t i = 0; i < t->n; i++)
		ids[n++] = i;
	qsort(ids, n, sizeof *ids, by_bytes);
	for (size_t i = 0; i < p->colloc_slots; i++)
		if (p->colloc[i]) {
			pairs[2 * np] = (uint32_t)(p->colloc[i] >> 32) - 1;
			pairs[2 * np + 1] = (uint32_t)p->colloc[i] - 1;
			np++;
		}
	qsort(pairs, np, 2 * sizeof *pairs, by_pair);

	puts_(&o, "{\n \"format\": ");
	put_str(&o, FORMAT, strlen(FORMAT));
	puts_(&o, ",\n \"trained_on\": ");
	put_str(&o, trained_on ? trained_on : "", trained_on ? strlen(trained_on) : 0);
	put_list(&o, "abbrev_types", 0);
	sep = "\n  ";
	for (size_t i = 0; i < n; i++)
		if (p->flags[ids[i]] & PK_P_ABBREV) {
			puts_(&o, sep);
			put_id(&o, t, ids[i]);
			sep = ",\n  ";
		}
	put_list(&o, NULL, 1);
	put_list(&o, "collocations", 0);
	sep = "\n  [";
	for (size_t i = 0; i < np; i++) {
		puts_(&o, sep);
		put_id(&o, t, pairs[2 * i]);
		puts_(&o, ", ");
		put_id(&o, t, pairs[2 * i + 1]);
		puts_(&o, "]");
		sep = ",\n  [";
	}
	put_list(&o, NULL, 1);
	put_list(&o, "sent_starters", 0);
	sep = "\n  ";
	for (size_t i = 0; i < n; i++)
		if (p->flags[ids[i]] & PK_P_STARTER) {
			puts_(&o, sep);
			put_id(&o, t, ids[i]);
			sep = ",\n  ";
		}
	put_list(&o, NULL, 1);
	/* a list of pairs, not an object: a type may hold a NUL, which no JSON reader takes in a key */
	put_list(&o, "ortho_context", 0);
	sep = "\n  [";
	for (size_t i = 0; i < n; i++)
		if (p->ortho[ids[i]]) {
			puts_(&o, sep);
			put_id(&o, t, ids[i]);
			snprintf(num, sizeof num, ", %d]", p->ortho[ids[i]]);
			puts_(&o, num);
			sep = ",\n  [";
		}
	put_list(&o, NULL, 1);
	puts_(&o, "\n}\n");
done:
	free(ids);
	free(pairs);
	if (o.oom || !ids || !pairs) {
		free(o.p);
		return NULL;
	}
	return o.p;
}

/* --- the built-in parameters ---------------------------------------------------------------------- */

extern const char punkt_builtin_json[];
extern const size_t punkt_builtin_len;

struct punkt_params *punkt_params_builtin(char *err, size_t errlen)
{
	return punkt_params_parse(punkt_builtin_json, punkt_builtin_len, "the built-in Punkt parameters", err,
				  errlen);
}
