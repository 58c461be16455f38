/* regex.c - see regex.h.  The Unicode catch-up rewrite first, then compiling and the Split. */
#include "tokenize/regex.h"

#include <limits.h>
#include <oniguruma.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenize/unicode.h"
#include "xalloc.h"

/* ucd_deltas start from Unicode 14.0, 6.9.8's; an older library would need older deltas */
#if ONIGURUMA_VERSION_INT < 60908
#error "Oniguruma 6.9.8 or later needed (Debian 12's libonig-dev)"
#endif

#define ONIG_UNICODE_16 60910	/* 6.9.10: Unicode 16.0, what the reference bundles */
#define ONIG_PUNCT_IS_PS 60909	/* 6.9.9: [[:punct:]] is \p{P} | \p{S}, no longer \p{P} */

/* ---- the Unicode catch-up ---------------------------------------------------------------- */

/* the output being written, or with p NULL only measured */
struct out {
	char *p;
	size_t len;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->p)
		memcpy(o->p + o->len, s, n);
	o->len += n;
}

static void put_str(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* "Decimal_Number", "decimal number", "Nd" -> the same key, as Oniguruma compares names */
static void norm_name(const char *s, size_t n, char *out, size_t outlen)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k + 1 < outlen; i++) {
		char c = s[i];
		if (c == '_' || c == '-' || c == ' ')
			continue;
		out[k++] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
	}
	out[k] = 0;
}

static const struct ucd_delta *delta_named(const char *key)
{
	char have[64];
	for (const struct ucd_delta *d = ucd_deltas; d->name; d++) {
		norm_name(d->name, strlen(d->name), have, sizeof have);
		if (strcmp(key, have) == 0)
			return d;
		norm_name(d->long_name, strlen(d->long_name), have, sizeof have);
		if (strcmp(key, have) == 0)
			return d;
	}
	return NULL;
}

/* Names that are no category's short or long name but stand for one or a union of them, with
 * the deltas (space-separated ucd_deltas names) they take: Unicode's other aliases, and
 * Oniguruma's POSIX-style properties (its doc/RE: alnum = Alphabetic|Nd, word = \w). */
static const struct {
	const char *key, *deltas;
} prop_aliases[] = {
	{"punct", "P"}, {"digit", "Nd"}, {"cntrl", "Cc"}, {"combiningmark", "M"},
	{"alnum", "Alpha Nd"}, {"word", "Alpha M Nd Pc"}, {"posixpunct", "P S"},
}, bracket_names[] = {	/* [:name:] */
	{"alpha", "Alpha"}, {"alnum", "Alpha Nd"}, {"digit", "Nd"}, {"word", "Alpha M Nd Pc"},
	{"punct", "P S"},
};

/* A set of code points whose members moved.  In a class it becomes a nested class,
 * [^? <the construct> <gained> &&[^<lost>]].  Outside one it stays the construct, with the
 * gained code points as an alternative and the lost ones as a lookahead (and for the
 * complement the other way round), because there the library treats a property and a class
 * differently: (?i) folds the case of a class's members and not of a lone \p{Lu}, and a lone
 * \w (and, since 6.9.9, \p{Word}) asks the Latin-1 table below U+0100, which also calls
 * ² ³ ¹ ¼ ½ ¾ word characters. */
struct set {
	const char *on, *off;		/* the constructs for the set and its complement, up to name */
	const char *name, *close;	/* \p{ name } */
	size_t namelen;
	const char *in_class;		/* in a class, if not on name close */
	const char *deltas;		/* space-separated ucd_deltas names */
	int neg;
	int fix;			/* rewrite even without deltas: the library means something else */
};

static void put_items(struct out *o, const struct ucd_delta *const *d, size_t nd, int lost)
{
	for (size_t i = 0; i < nd; i++)
		put_str(o, lost ? d[i]->lost : d[i]->gained);
}

/* Writes the set, or returns 0 (nothing written) when it needs no change. */
static int put_set(struct out *o, const struct set *s, int version, int depth)
{
	const struct ucd_delta *d[4];
	size_t nd = 0, gained = 0, lost = 0;
	char key[16];

	if (version < ONIG_UNICODE_16)
		for (const char *p = s->deltas; *p && nd < 4;) {
			size_t n = strcspn(p, " ");
			norm_name(p, n, key, sizeof key);
			if ((d[nd] = delta_named(key))) {
				gained += strlen(d[nd]->gained);
				lost += strlen(d[nd]->lost);
				nd++;
			}
			p += n + (p[n] == ' ');
		}
	if (!gained && !lost && !s->fix)
		return 0;
	if (depth) {
		put_str(o, s->neg ? "[^" : "[");
		if (s->in_class) {
			put_str(o, s->in_class);
		} else {
			put_str(o, s->on);
			put(o, s->name, s->namelen);
			put_str(o, s->close);
		}
		put_items(o, d, nd, 0);
		if (lost) {
			put_str(o, "&&[^");
			put_items(o, d, nd, 1);
			put_str(o, "]");
		}
		put_str(o, "]");
		return 1;
	}
	/* (?:(?![lost])X|[gained]), and for the complement (?:(?![gained])Y|[lost]) */
	size_t ahead = s->neg ? gained : lost, alt = s->neg ? lost : gained;
	put_str(o, "(?:");
	if (ahead) {
		put_str(o, "(?![");
		put_items(o, d, nd, !s->neg);
		put_str(o, "])");
	}
	put_str(o, s->neg ? s->off : s->on);
	put(o, s->name, s->namelen);
	put_str(o, s->close);
	if (alt) {
		put_str(o, "|[");
		put_items(o, d, nd, s->neg);
		put_str(o, "]");
	}
	put_str(o, ")");
	return 1;
}

static size_t utf8_len(unsigned char c)
{
	return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

/* The escape at p ('\\' and what follows) as a set, and the end of it; NULL if it is none
 * the rewrite knows. */
static const char *escape_set(const char *p, const char *end, int version, struct set *s)
{
	char e = p[1];
	*s = (struct set){"", "", "", "", 0, NULL, "", 0, 0};
	switch (e) {
	case 'w': case 'W':
		s->on = "\\w";
		s->off = "\\W";
		s->deltas = "Alpha M Nd Pc";
		s->neg = e == 'W';
		return p + 2;
	case 'd': case 'D':
		s->on = "\\d";
		s->off = "\\D";
		s->deltas = "Nd";
		s->neg = e == 'D';
		return p + 2;
	case 'p': case 'P': {
		if (p + 2 >= end || p[2] != '{')
			return NULL;	/* \pL is not a property to Oniguruma 6.9.10 either */
		const char *name = p + 3, *q = memchr(name, '}', (size_t)(end - name));
		char key[64];
		if (!q || q - name >= (ptrdiff_t)sizeof key)
			return NULL;
		s->neg = e == 'P';
		if (*name == '^') {
			s->neg = !s->neg;
			name++;
		}
		norm_name(name, (size_t)(q - name), key, sizeof key);
		const struct ucd_delta *d = delta_named(key);
		if (d) {
			s->deltas = d->name;
		} else {
			for (size_t i = 0; i < sizeof prop_aliases / sizeof *prop_aliases; i++)
				if (strcmp(key, prop_aliases[i].key) == 0)
					s->deltas = prop_aliases[i].deltas;
			if (!*s->deltas)
				return NULL;
		}
		if (strcmp(key, "word") == 0) {	/* 6.9.10's \p{Word} is \w, Latin-1 table included */
			s->on = s->in_class = "\\w";
			s->off = "\\W";
			s->fix = version < ONIG_PUNCT_IS_PS;
		} else if (strcmp(key, "posixpunct") == 0 && version < ONIG_PUNCT_IS_PS) {
			s->on = "[\\p{P}\\p{S}]";	/* 6.9.8 does not know the name */
			s->off = "[^\\p{P}\\p{S}]";
			s->in_class = "\\p{P}\\p{S}";
			s->fix = 1;
		} else {
			s->on = "\\p{";
			s->off = "\\P{";
			s->name = name;
			s->namelen = (size_t)(q - name);
			s->close = "}";
		}
		return q + 1;
	}
	}
	return NULL;
}

/* The POSIX bracket at p ("[:name:]" or "[:^name:]", inside a class) as a set; NULL if none. */
static const char *bracket_set(const char *p, const char *end, int version, struct set *s)
{
	const char *name = p + 2, *q;
	int neg = name < end && *name == '^';
	name += neg;
	for (q = name; q < end && *q >= 'a' && *q <= 'z'; q++)
		;
	if (q + 1 >= end || q[0] != ':' || q[1] != ']')
		return NULL;
	*s = (struct set){"[:", "", name, ":]", (size_t)(q - name), NULL, "", neg, 0};
	for (size_t i = 0; i < sizeof bracket_names / sizeof *bracket_names; i++)
		if ((size_t)(q - name) == strlen(bracket_names[i].key) &&
		    memcmp(name, bracket_names[i].key, (size_t)(q - name)) == 0)
			s->deltas = bracket_names[i].deltas;
	if (!*s->deltas)
		return NULL;
	if (strcmp(s->deltas, "P S") == 0 && version < ONIG_PUNCT_IS_PS) {
		s->in_class = "\\p{P}\\p{S}";
		s->fix = 1;
	}
	return q + 2;
}

/* In a class, "X-y" and "y-X" make the set X an end of a range: Oniguruma refuses a set there, and
 * would accept a nested class, so such an X is left as it is.  X runs from p to q. */
static int in_range(const char *pat, const char *p, const char *q, const char *end, int depth)
{
	if (!depth)
		return 0;
	if (q < end && *q == '-' && q + 1 < end && q[1] != ']')
		return 1;
	/* a '-' before X that is not the class's first character */
	return p - pat >= 2 && p[-1] == '-' && p[-2] != '[' &&
	       !(p[-2] == '^' && p - pat >= 3 && p[-3] == '[');
}

/* One pass over the pattern: measures (o->p NULL) or writes.  1 if the pattern turns on an ASCII
 * class option ((?W) (?D) (?P)), under which the Unicode deltas must not be added. */
static int rewrite(const char *pat, size_t n, int version, struct out *o)
{
	const char *p = pat, *end = pat + n, *q;
	int depth = 0, ascii = 0;
	struct set s;

	while (p < end) {
		char c = *p;
		if (c == '\\' && p + 1 < end) {
			if ((q = escape_set(p, end, version, &s)) && !in_range(pat, p, q, end, depth) &&
			    put_set(o, &s, version, depth)) {
				p = q;
				continue;
			}
			size_t l = 1 + utf8_len((unsigned char)p[1]);
			if (l > (size_t)(end - p))
				l = (size_t)(end - p);
			put(o, p, l);
			p += l;
			continue;
		}
		if (c == '[' && depth && p + 1 < end && p[1] == ':' &&
		    (q = bracket_set(p, end, version, &s))) {
			if (in_range(pat, p, q, end, depth) || !put_set(o, &s, version, depth))
				put(o, p, (size_t)(q - p));
			p = q;
			continue;
		}
		if (c == '[') {
			depth++;
			put(o, p++, 1);
			/* a ']' first in a class ("[]a]", "[^]a]") is a literal */
			if (p < end && *p == '^')
				put(o, p++, 1);
			if (p < end && *p == ']')
				put(o, p++, 1);
			continue;
		}
		if (c == ']' && depth)
			depth--;
		if (c == '(' && !depth && p + 1 < end && p[1] == '?') {
			for (q = p + 2; q < end && (*q == '-' || (*q >= 'a' && *q <= 'z') ||
						    (*q >= 'A' && *q <= 'Z')); q++)
				ascii |= *q == 'W' || *q == 'D' || *q == 'P';
		}
		put(o, p++, 1);
	}
	return ascii;
}

char *regex_catch_up(const char *pattern, int version, char *err, size_t errlen)
{
	size_t n = strlen(pattern);
	struct out o = {0};
	char *r;

	if (version >= ONIG_UNICODE_16 || rewrite(pattern, n, version, &o)) {
		if (!(r = strdup(pattern)))
			xalloc_err(err, errlen, "a copy of the Split pattern", n + 1);
		return r;
	}
	if (!(o.p = malloc(o.len + 1))) {
		xalloc_err(err, errlen, "the Split pattern rewritten for Unicode 16.0", o.len + 1);
		return NULL;
	}
	o.len = 0;
	rewrite(pattern, n, version, &o);
	o.p[o.len] = 0;
	return o.p;
}

/* ---- compiling ----------------------------------------------------------------------------- */

struct seg {
	size_t a, b;
	int match;
};

struct regex {
	regex_t *re;
	OnigRegion *region;
	struct seg *segs;	/* regex_split's scratch: the (span, is_match) list */
	size_t nsegs, capsegs;
};

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;
/* the onig crate compiles under a lock too: onig_new shares the library's tables unguarded */
static pthread_mutex_t onig_lock = PTHREAD_MUTEX_INITIALIZER;
static int onig_version_int;

static void onig_setup(void)
{
	OnigEncoding enc[1] = {ONIG_ENCODING_UTF8};
	int a = 0, b = 0, c = 0;
	onig_initialize(enc, 1);
	sscanf(onig_version(), "%d.%d.%d", &a, &b, &c);
	onig_version_int = a * 10000 + b * 100 + c;
}

int regex_onig_version(void)
{
	pthread_once(&onig_once, onig_setup);
	return onig_version_int;
}

void regex_free(struct regex *re)
{
	if (!re)
		return;
	if (re->region)
		onig_region_free(re->region, 1);
	if (re->re)
		onig_free(re->re);
	free(re->segs);
	free(re);
}

struct regex *regex_compile(const char *pattern, int literal, char *err, size_t errlen)
{
	struct regex *re = calloc(1, sizeof *re);
	char *text = NULL;
	OnigErrorInfo einfo = {0};
	int rc;

	if (!re) {
		xalloc_err(err, errlen, "the compiled regex", sizeof *re);
		return NULL;
	}
	/* a String pattern is the reference's escaped one: ASIS syntax takes every byte literally */
	text = literal ? strdup(pattern) : regex_catch_up(pattern, regex_onig_version(), err, errlen);
	if (!text) {
		if (literal)
			xalloc_err(err, errlen, "a copy of the Split pattern", strlen(pattern) + 1);
		goto fail;
	}
	pthread_mutex_lock(&onig_lock);
	rc = onig_new(&re->re, (const OnigUChar *)text, (const OnigUChar *)text + strlen(text),
		      ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
		      literal ? ONIG_SYNTAX_ASIS : ONIG_SYNTAX_ONIGURUMA, &einfo);
	pthread_mutex_unlock(&onig_lock);
	if (rc != ONIG_NORMAL) {
		OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
		onig_error_code_to_str(msg, rc, &einfo);
		snprintf(err, errlen, "%s (Oniguruma %s)", (const char *)msg, onig_version());
		re->re = NULL;
		goto fail;
	}
	if (!(re->region = onig_region_new())) {
		xalloc_err(err, errlen, "the regex's match region", sizeof(OnigRegion));
		goto fail;
	}
	free(text);
	return re;
fail:
	free(text);
	regex_free(re);
	return NULL;
}

int regex_behavior_parse(const char *name)
{
	static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
				      "Contiguous"};
	for (int i = 0; i < 5; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

/* ---- matching ------------------------------------------------------------------------------ */

/* the leftmost match at or after start: 1 and [*ms, *me), 0 if none, -1 with err */
static int find(struct regex *re, const uint8_t *s, size_t n, size_t start, size_t *ms, size_t *me,
		char *err, size_t errlen)
{
	int rc = onig_search(re->re, s, s + n, s + start, s + n, re->region, ONIG_OPTION_NONE);
	if (rc == ONIG_MISMATCH)
		return 0;
	if (rc < 0) {
		OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
		onig_error_code_to_str(msg, rc);
		snprintf(err, errlen, "matching at byte %zu: %s", start, (const char *)msg);
		return -1;
	}
	*ms = (size_t)re->region->beg[0];
	*me = (size_t)re->region->end[0];
	if (*me < *ms)	/* \K in a lookahead can do that; the reference would panic slicing */
		*me = *ms;
	return 1;
}

static int push_seg(struct regex *re, size_t a, size_t b, int match)
{
	if (re->nsegs == re->capsegs) {
		size_t cap = re->capsegs ? re->capsegs * 2 : 256;
		struct seg *p = realloc(re->segs, cap * sizeof *p);
		if (!p)
			return -1;
		re->segs = p;
		re->capsegs = cap;
	}
	re->segs[re->nsegs++] = (struct seg){a, b, match};
	return 0;
}

static int push_piece(struct pretok_piece **out, size_t *cap, size_t k, size_t a, size_t b)
{
	if (k == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		struct pretok_piece *p = realloc(*out, ncap * sizeof *p);
		if (!p)
			return -1;
		*out = p;
		*cap = ncap;
	}
	(*out)[k] = (struct pretok_piece){a, b - a};
	return 0;
}

/* tokenizers' Pattern::find_matches for a SysRegex: the onig crate's find_iter, then the gaps.
 * find_iter drops an empty match that ends where the previous match ended (and moves the search
 * one character on); any other empty match is kept. */
static int find_segments(struct regex *re, const uint8_t *s, size_t n, int invert, char *err,
			 size_t errlen)
{
	size_t last_end = 0, last_match_end = 0, prev = 0, ms, me;
	int matched = 0;

	re->nsegs = 0;
	while (last_end <= n) {
		int r = find(re, s, n, last_end, &ms, &me, err, errlen);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		if (ms == me && matched && me == last_match_end) {
			last_end += last_end < n ? utf8_len(s[last_end]) : 1;
			continue;
		}
		last_end = last_match_end = me;
		matched = 1;
		if (prev != ms && push_seg(re, prev, ms, invert))
			goto oom;
		if (push_seg(re, ms, me, !invert))
			goto oom;
		prev = me;
	}
	if (prev != n && push_seg(re, prev, n, invert))
		goto oom;
	return 0;
oom:
	xalloc_err(err, errlen, "the regex's match segments", 0);
	return -1;
}

ssize_t regex_split(struct regex *re, const uint8_t *s, size_t n, enum regex_behavior behavior,
		    int invert, struct pretok_piece **out, size_t *cap, char *err, size_t errlen)
{
	/* the reference's find_matches answers [(0,0), false] for "", which is then dropped */
	if (n == 0)
		return 0;
	if (n > INT_MAX) {	/* Oniguruma's offsets are ints */
		snprintf(err, errlen, "a text of %zu bytes: the regex engine takes at most %d", n,
			 INT_MAX);
		return -1;
	}
	/* the library trusts its input to be UTF-8 */
	for (size_t i = 0, l; i < n; i += l)
		if (s[i] < 0x80)
			l = 1;
		else if (!(l = utf8_valid_len(s + i, n - i))) {
			snprintf(err, errlen, "invalid UTF-8 at byte %zu", i);
			return -1;
		}
	if (find_segments(re, s, n, invert, err, errlen) < 0)
		return -1;

	/* NormalizedString::split's folds, empty spans included (they carry is_match into the
	 * next step), then the empty pieces dropped */
	const struct seg *g = re->segs;
	size_t k = 0, ns = re->nsegs;
	int prev = 0;
	switch (behavior) {
	case REGEX_ISOLATED:
	case REGEX_REMOVED:
		for (size_t i = 0; i < ns; i++)
			if ((behavior == REGEX_ISOLATED || !g[i].match) &&
			    push_piece(out, cap, k++, g[i].a, g[i].b))
				goto oom;
		break;
	case REGEX_CONTIGUOUS:
	case REGEX_MERGED_WITH_PREVIOUS:
		for (size_t i = 0; i < ns; i++) {
			int merge = behavior == REGEX_CONTIGUOUS ? g[i].match == prev
								 : g[i].match && !prev;
			if (merge && k)
				(*out)[k - 1].len = g[i].b - (*out)[k - 1].off;
			else if (push_piece(out, cap, k++, g[i].a, g[i].b))
				goto oom;
			prev = g[i].match;
		}
		break;
	case REGEX_MERGED_WITH_NEXT:
		/* the reference folds from the end and reverses; so do we */
		for (size_t i = ns; i-- > 0;) {
			if (g[i].match && !prev && k) {
				struct pretok_piece *p = &(*out)[k - 1];
				p->len += p->off - g[i].a;
				p->off = g[i].a;
			} else if (push_piece(out, cap, k++, g[i].a, g[i].b)) {
				goto oom;
			}
			prev = g[i].match;
		}
		for (size_t i = 0; i < k / 2; i++) {
			struct pretok_piece tmp = (*out)[i];
			(*out)[i] = (*out)[k - 1 - i];
			(*out)[k - 1 - i] = tmp;
		}
		break;
	default:
		snprintf(err, errlen, "unknown split behavior %d", (int)behavior);
		return -1;
	}

	size_t w = 0;
	for (size_t i = 0; i < k; i++)
		if ((*out)[i].len)
			(*out)[w++] = (*out)[i];
	return (ssize_t)w;
oom:
	xalloc_err(err, errlen, "the pre-tokenized pieces", 0);
	return -1;
}
