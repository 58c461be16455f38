/* regex.c - see regex.h.  Translation of Oniguruma syntax first, then the Split itself. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenize/regex.h"

#include <pcre2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenize/unicode.h"
#include "xalloc.h"

/* ---- a growable string ------------------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void sb_puts(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void sb_cat(struct sbuf *b, int n, ...)
{
	va_list ap;
	va_start(ap, n);
	while (n--)
		sb_puts(b, va_arg(ap, const char *));
	va_end(ap);
}

static const char *sb_str(const struct sbuf *b)
{
	return b->p ? b->p : "";
}

/* ---- Oniguruma -> PCRE2 ------------------------------------------------------------------ */

/* Oniguruma's \s: White_Space, which PCRE2 10.42's \s is not (it adds U+180E) */
#define WS_ITEMS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
		 "\\x{202F}\\x{205F}\\x{3000}"
#define HEX_ITEMS "0-9a-fA-F"

struct tr {
	const char *p, *end;
	int delta;	/* the library's Unicode is older than 16.0: apply ucd_deltas */
	char *err;
	size_t errlen;
	const char *start;
};

/* A character class item list being built: simple items go inside one PCRE2 [...], complex
 * ones (negated sets, nested classes) are one-character constructs joined with '|'. */
struct operand {
	struct sbuf simple, complex;
	int ncomplex;
};

static int tr_fail(struct tr *t, const char *msg)
{
	snprintf(t->err, t->errlen, "offset %zu: %s", (size_t)(t->p - t->start), msg);
	return -1;
}

static int pcre2_unicode_major(void)
{
	char v[32] = "";
	if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, v) < 0)
		return 0;
	return atoi(v);
}

/* "Decimal_Number", "decimal number", "Nd" -> the same key */
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

static const struct ucd_delta *find_delta(const char *name, size_t n)
{
	char want[64], have[64];
	norm_name(name, n, want, sizeof want);
	for (const struct ucd_delta *d = ucd_deltas; d->name; d++) {
		norm_name(d->name, strlen(d->name), have, sizeof have);
		if (strcmp(want, have) == 0)
			return d;
		norm_name(d->long_name, strlen(d->long_name), have, sizeof have);
		if (strcmp(want, have) == 0)
			return d;
	}
	return NULL;
}

/* A set of code points: the class items "items" minus the class items "lost", negated or not. */
struct set {
	struct sbuf items;
	const char *lost;	/* "" if none */
	int neg;
};

/* The set as a construct matching one character, for use outside a class. */
static void set_construct(struct sbuf *o, const struct set *s)
{
	const char *items = sb_str(&s->items);
	if (!*s->lost)
		sb_cat(o, 3, s->neg ? "[^" : "[", items, "]");
	else if (!s->neg)
		sb_cat(o, 5, "(?:(?![", s->lost, "])[", items, "])");
	else
		sb_cat(o, 5, "(?:[^", items, "]|[", s->lost, "])");
}

static void set_into(struct operand *op, const struct set *s)
{
	if (!s->neg && !*s->lost) {
		sb_puts(&op->simple, sb_str(&s->items));
		return;
	}
	if (op->ncomplex++)
		sb_puts(&op->complex, "|");
	set_construct(&op->complex, s);
}

/* \p{Name} with deltas: adds \p{Short} and the code points 16.0 gave it */
static void delta_items(struct sbuf *b, const struct ucd_delta *d)
{
	sb_cat(b, 4, "\\p{", d->name, "}", d->gained);
}

/* Reads the escape at t->p ('\\' and what follows) into s when it names a set Oniguruma and
 * PCRE2 disagree on; returns 1 if it did, 0 if the escape is to be copied as is, -1 on error. */
static int tr_set_escape(struct tr *t, struct set *s)
{
	const char *p = t->p + 1;
	char e = *p;

	s->lost = "";
	s->neg = 0;
	switch (e) {
	case 's': case 'S':
		sb_puts(&s->items, WS_ITEMS);
		s->neg = e == 'S';
		t->p = p + 1;
		return 1;
	case 'h': case 'H':
		sb_puts(&s->items, HEX_ITEMS);
		s->neg = e == 'H';
		t->p = p + 1;
		return 1;
	case 'd': case 'D':
		if (t->delta)
			delta_items(&s->items, find_delta("Nd", 2));
		else
			sb_puts(&s->items, "\\p{Nd}");
		s->neg = e == 'D';
		t->p = p + 1;
		return 1;
	case 'w': case 'W':
		/* Oniguruma: Alphabetic | M | Nd | Pc, and below U+0100 its Latin-1 table, which
		 * also calls the No characters ² ³ ¹ ¼ ½ ¾ word characters (checked over every
		 * code point against the reference) */
		if (t->delta) {
			delta_items(&s->items, find_delta("Alpha", 5));
			delta_items(&s->items, find_delta("M", 1));
			delta_items(&s->items, find_delta("Nd", 2));
			delta_items(&s->items, find_delta("Pc", 2));
		} else {
			sb_puts(&s->items, "\\p{Alpha}\\p{M}\\p{Nd}\\p{Pc}");
		}
		sb_puts(&s->items, "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}");
		s->neg = e == 'W';
		t->p = p + 1;
		return 1;
	case 'p': case 'P': {
		const char *name, *q;
		size_t n;
		int neg = e == 'P';
		if (p[1] == '{') {
			name = p + 2;
			q = memchr(name, '}', (size_t)(t->end - name));
			if (!q)
				return tr_fail(t, "\\p{ without closing brace");
			n = (size_t)(q - name);
			q++;
		} else if (p + 1 < t->end) {
			name = p + 1;
			n = 1;
			q = p + 2;
		} else {
			return tr_fail(t, "\\p at end of pattern");
		}
		if (n && *name == '^') {
			neg = !neg;
			name++;
			n--;
		}
		const struct ucd_delta *d = t->delta ? find_delta(name, n) : NULL;
		if (!d)
			return 0;	/* a script, a binary property, or no correction needed */
		delta_items(&s->items, d);
		s->lost = d->lost;
		s->neg = neg;
		t->p = q;
		return 1;
	}
	}
	return 0;
}

static size_t utf8_len(unsigned char c)
{
	return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

/* Copies the escape at t->p that needs no translation, or rewrites \uHHHH. */
static void tr_copy_escape(struct tr *t, struct sbuf *o)
{
	const char *p = t->p + 1;
	if (*p == 'u' && t->end - p >= 5 && strspn(p + 1, "0123456789abcdefABCDEF") >= 4) {
		sb_cat(o, 1, "\\x{");
		sb_add(o, p + 1, 4);
		sb_puts(o, "}");
		t->p = p + 5;
		return;
	}
	size_t n = 1 + utf8_len((unsigned char)*p);
	if (t->p + n > t->end)
		n = (size_t)(t->end - t->p);
	sb_add(o, t->p, n);
	t->p += n;
}


/* the operand as a one-character construct */
static void operand_construct(struct sbuf *o, const struct operand *op)
{
	if (!op->ncomplex) {
		if (op->simple.len)
			sb_cat(o, 3, "[", sb_str(&op->simple), "]");
		else
			sb_puts(o, "(?!)");
		return;
	}
	sb_puts(o, "(?:");
	if (op->simple.len)
		sb_cat(o, 3, "[", sb_str(&op->simple), "]|");
	sb_cat(o, 2, sb_str(&op->complex), ")");
}

static void operand_free(struct operand *op)
{
	free(op->simple.p);
	free(op->complex.p);
	memset(op, 0, sizeof *op);
}

/* t->p is just past '['.  Oniguruma classes nest ([a[bc]] is a union) and intersect
 * ([a-z&&[^aeiou]]); PCRE2 10.42's do neither, so a class that uses them becomes
 * (?:[simple]|nested) for a union and (?=A)B for an intersection, negated as (?:(?!X)(?s:.)).
 * A nested class that is a plain positive list is merged into its parent's list, so BLOOM's
 * [^(\s|[.,!?…])] stays one PCRE2 class; the lookaround forms are much slower.
 * Returns 1 and the bare items in *flat for a plain positive class, 0 and a one-character
 * construct in *o otherwise, -1 on error. */
static int tr_class(struct tr *t, struct sbuf *o, struct sbuf *flat)
{
	struct operand op = {0};
	struct sbuf done = {0};	/* finished operands of an intersection, each as (?=X) */
	int nops = 0, neg = 0, first = 1, rc = -1;

	if (t->p < t->end && *t->p == '^') {
		neg = 1;
		t->p++;
	}
	for (;;) {
		if (t->p >= t->end) {
			tr_fail(t, "unterminated character class");
			goto out;
		}
		char c = *t->p;
		if (c == ']' && !first) {
			t->p++;
			break;
		}
		first = 0;
		if (c == '[' && t->p[1] == ':') {	/* POSIX bracket, or a nested class "[:" */
			const char *q = t->p + 2;
			while (q < t->end && ((*q >= 'a' && *q <= 'z') || *q == '^'))
				q++;
			if (q + 1 < t->end && q[0] == ':' && q[1] == ']') {
				sb_add(&op.simple, t->p, (size_t)(q + 2 - t->p));
				t->p = q + 2;
				continue;
			}
		}
		if (c == '[') {
			struct sbuf nested = {0};
			t->p++;
			int r = tr_class(t, &nested, &op.simple);
			if (r == 0) {
				if (op.ncomplex++)
					sb_puts(&op.complex, "|");
				sb_puts(&op.complex, sb_str(&nested));
			}
			free(nested.p);
			if (r < 0)
				goto out;
		} else if (c == '&' && t->p[1] == '&') {
			sb_puts(&done, "(?=");
			operand_construct(&done, &op);
			sb_puts(&done, ")");
			operand_free(&op);
			nops++;
			t->p += 2;
		} else if (c == '\\') {
			if (t->p + 1 >= t->end) {
				tr_fail(t, "trailing backslash");
				goto out;
			}
			struct set s = {0};
			int r = tr_set_escape(t, &s);
			if (r > 0) {
				set_into(&op, &s);
				/* "[\s-x]": the hyphen is literal after a set, but would not be after the
				 * explicit range list \s became */
				if (t->p < t->end && *t->p == '-') {
					sb_puts(&op.simple, "\\-");
					t->p++;
				}
			} else if (r == 0)
				tr_copy_escape(t, &op.simple);
			free(s.items.p);
			if (r < 0)
				goto out;
		} else if (c == ']') {	/* first in the class: literal */
			sb_puts(&op.simple, "\\]");
			t->p++;
		} else {
			size_t n = utf8_len((unsigned char)c);
			if (t->p + n > t->end)
				n = (size_t)(t->end - t->p);
			sb_add(&op.simple, t->p, n);
			t->p += n;
		}
	}

	if (!nops && !op.ncomplex && op.simple.len && !neg) {
		sb_puts(flat, sb_str(&op.simple));
		rc = 1;
	} else if (!nops && !op.ncomplex && op.simple.len) {
		sb_cat(o, 3, "[^", sb_str(&op.simple), "]");
		rc = 0;
	} else {
		struct sbuf pos = {0};
		if (nops) {
			sb_cat(&pos, 2, "(?:", sb_str(&done));
			operand_construct(&pos, &op);
			sb_puts(&pos, ")");
		} else {
			operand_construct(&pos, &op);
		}
		if (neg)
			sb_cat(o, 3, "(?:(?!", sb_str(&pos), ")(?s:.))");
		else
			sb_puts(o, sb_str(&pos));
		if (pos.oom)
			o->oom = 1;
		free(pos.p);
		rc = 0;
	}
	if (op.simple.oom || op.complex.oom || done.oom)
		o->oom = flat->oom = 1;
out:
	operand_free(&op);
	free(done.p);
	return rc;
}

char *regex_translate(const char *pattern, char *err, size_t errlen)
{
	struct tr t = {pattern, pattern + strlen(pattern), pcre2_unicode_major() < 16, err, errlen,
		       pattern};
	struct sbuf o = {0};
	size_t digits;

	sb_puts(&o, "");
	while (t.p < t.end) {
		char c = *t.p;
		if (c == '\\') {
			if (t.p + 1 >= t.end) {
				tr_fail(&t, "trailing backslash");
				goto fail;
			}
			struct set s = {0};
			int r = tr_set_escape(&t, &s);
			if (r > 0)
				set_construct(&o, &s);
			else if (r == 0)
				tr_copy_escape(&t, &o);
			free(s.items.p);
			if (r < 0)
				goto fail;
		} else if (c == '[') {
			struct sbuf flat = {0};
			t.p++;
			int r = tr_class(&t, &o, &flat);
			if (r > 0)
				sb_cat(&o, 3, "[", sb_str(&flat), "]");
			if (flat.oom)
				o.oom = 1;
			free(flat.p);
			if (r < 0)
				goto fail;
		} else if (c == '(' && t.p + 1 < t.end && t.p[1] == '?') {
			/* (?imx-imx) and (?imx-imx:...): Ruby's m is PCRE2's s */
			const char *q = t.p + 2;
			while (q < t.end && *q && strchr("imx-", *q))
				q++;
			sb_puts(&o, "(?");
			if (q < t.end && (*q == ':' || *q == ')')) {
				for (const char *r = t.p + 2; r < q; r++)
					sb_add(&o, *r == 'm' ? "s" : r, 1);
				t.p = q;
			} else {
				t.p += 2;
			}
		} else if (c == '{' && t.p[1] == ',' && (digits = strspn(t.p + 2, "0123456789")) &&
			   t.p[2 + digits] == '}') {
			/* Oniguruma's x{,n} is x{0,n}; PCRE2 10.42 would read "{,n}" as text */
			sb_puts(&o, "{0");
			t.p++;
		} else {
			sb_add(&o, t.p, 1);
			t.p++;
		}
	}
	if (o.oom) {
		xalloc_err(err, errlen, "the pattern translated for PCRE2", 0);
		goto fail;
	}
	return o.p;
fail:
	free(o.p);
	return NULL;
}

/* ---- compiling and matching -------------------------------------------------------------- */

struct seg {
	size_t a, b;
	int match;
};

struct regex {
	pcre2_code *code;
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	pcre2_jit_stack *jstack;
	int jit;
	struct seg *segs;	/* regex_split's scratch: the (span, is_match) list */
	size_t nsegs, capsegs;
};

void regex_free(struct regex *re)
{
	if (!re)
		return;
	pcre2_match_data_free(re->md);
	pcre2_match_context_free(re->mctx);
	pcre2_jit_stack_free(re->jstack);
	pcre2_code_free(re->code);
	free(re->segs);
	free(re);
}

struct regex *regex_compile(const char *pattern, int literal, char *err, size_t errlen)
{
	struct regex *re = calloc(1, sizeof *re);
	char *translated = NULL;
	pcre2_compile_context *cctx = NULL;
	uint32_t opts = PCRE2_UTF;
	int ec;
	PCRE2_SIZE eo;

	if (!re) {
		xalloc_err(err, errlen, "the compiled regex", sizeof *re);
		return NULL;
	}
	if (literal) {
		opts |= PCRE2_LITERAL;
	} else {
		translated = regex_translate(pattern, err, errlen);
		if (!translated)
			goto fail;
		pattern = translated;
		opts |= PCRE2_UCP | PCRE2_MULTILINE;
	}
	cctx = pcre2_compile_context_create(NULL);
	if (!cctx || pcre2_set_newline(cctx, PCRE2_NEWLINE_LF) != 0) {
		xalloc_err(err, errlen, "the PCRE2 compile context", 0);
		goto fail;
	}
	re->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &ec, &eo, cctx);
	if (!re->code) {
		char msg[256];
		pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof msg);
		snprintf(err, errlen, "%s (PCRE2 pattern offset %zu%s%s)", msg, (size_t)eo,
			 translated ? " of the translation " : "", translated ? translated : "");
		goto fail;
	}
	/* No JIT (an exotic platform, SELinux execmem) is slower but still correct. */
	re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
	re->md = pcre2_match_data_create_from_pattern(re->code, NULL);
	re->mctx = pcre2_match_context_create(NULL);
	if (!re->md || !re->mctx) {
		xalloc_err(err, errlen, "the PCRE2 match data", 0);
		goto fail;
	}
	if (re->jit) {
		/* the default 32 KB runs out on long repeats of groups; past 8 MB we fall back to
		 * the interpreter, whose frames live on the heap */
		re->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
		if (re->jstack)
			pcre2_jit_stack_assign(re->mctx, NULL, re->jstack);
	}
	pcre2_compile_context_free(cctx);
	free(translated);
	return re;
fail:
	pcre2_compile_context_free(cctx);
	free(translated);
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

static int find(struct regex *re, const uint8_t *s, size_t n, size_t start, uint32_t opts,
		size_t *ms, size_t *me, char *err, size_t errlen)
{
	int rc = pcre2_match(re->code, s, n, start, opts, re->md, re->mctx);
	if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
		rc = pcre2_match(re->code, s, n, start, opts | PCRE2_NO_JIT, re->md, re->mctx);
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc < 0) {
		char msg[256];
		pcre2_get_error_message(rc, (PCRE2_UCHAR *)msg, sizeof msg);
		snprintf(err, errlen, "matching at byte %zu: %s", start, msg);
		return -1;
	}
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(re->md);
	*ms = ov[0];
	*me = ov[1];
	if (*me < *ms)	/* \K in a lookahead can do that; the reference would panic slicing */
		*me = *ms;
	return 1;
}

int regex_find(struct regex *re, const uint8_t *s, size_t n, size_t start, size_t *ms, size_t *me,
	       char *err, size_t errlen)
{
	return find(re, s, n, start, 0, ms, me, err, errlen);
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

/* tokenizers' Pattern::find_matches for a SysRegex: the onig crate's find_iter, then the gaps */
static int find_segments(struct regex *re, const uint8_t *s, size_t n, int invert, char *err,
			 size_t errlen)
{
	size_t last_end = 0, prev = 0, ms, me;
	int skip_next_empty = 0;
	uint32_t opts = 0;	/* the first search checks the whole subject's UTF-8, later ones don't */

	re->nsegs = 0;
	while (last_end <= n) {
		int r = find(re, s, n, last_end, opts, &ms, &me, err, errlen);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		opts = PCRE2_NO_UTF_CHECK;
		last_end = me;
		if (ms == me) {
			/* an empty match moves the search one character on; one that directly follows
			 * a non-empty match is dropped */
			last_end += me < n ? utf8_len(s[me]) : 1;
			if (last_end > n && me < n)
				last_end = n;
			if (skip_next_empty) {
				skip_next_empty = 0;
				continue;
			}
		} else {
			skip_next_empty = 1;
		}
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
