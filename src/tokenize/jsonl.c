#include "tokenize/jsonl.h"
#include "tokenize/unicode.h"
#include "xalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512

struct p {
	const unsigned char *s, *e, *start;
	char **buf;
	size_t *cap, used;
	char *err;
	size_t errlen;
};

static int fail(struct p *p, const char *what)
{
	snprintf(p->err, p->errlen, "column %zu: %s", (size_t)(p->s - p->start) + 1, what);
	return -1;
}

/* fail() for reserve(): the decoded string's buffer of `bytes` */
static int fail_oom(struct p *p, size_t bytes)
{
	char msg[256];

	return fail(p, xalloc_msg(msg, sizeof msg, "a decoded JSON string", bytes));
}

static void ws(struct p *p)
{
	while (p->s < p->e && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

/* room for `more` bytes past the decoded string's end; -1 with the error filled */
static int reserve(struct p *p, size_t more)
{
	if (p->used + more <= *p->cap)
		return 0;
	size_t c = *p->cap ? *p->cap : 4096;
	while (c < p->used + more)
		c *= 2;
	char *b = realloc(*p->buf, c);
	if (!b)
		return fail_oom(p, c);
	*p->buf = b;
	*p->cap = c;
	return 0;
}

static int hex4(struct p *p, uint32_t *v)
{
	*v = 0;
	if (p->e - p->s < 4)
		return fail(p, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		unsigned char c = *p->s++;
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			*v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			*v |= c - 'A' + 10;
		else
			return fail(p, "bad \\u escape");
	}
	return 0;
}

/* A string at p->s (the opening quote).  If keep, its decoded bytes are appended to the buffer. */
static int string(struct p *p, int keep)
{
	p->s++;
	for (;;) {
		const unsigned char *run = p->s;
		/* the common case: plain ASCII without escapes, copied in one go */
		while (p->s < p->e && *p->s >= 0x20 && *p->s < 0x80 && *p->s != '"' && *p->s != '\\')
			p->s++;
		if (keep && p->s > run) {
			if (reserve(p, (size_t)(p->s - run)) < 0)
				return -1;
			memcpy(*p->buf + p->used, run, (size_t)(p->s - run));
			p->used += (size_t)(p->s - run);
		}
		if (p->s >= p->e)
			return fail(p, "unterminated string");
		unsigned char c = *p->s;
		if (c == '"') {
			p->s++;
			return 0;
		}
		if (c < 0x20)
			return fail(p, "control character in a string");
		if (c == '\\') {
			uint32_t cp;
			p->s++;
			if (p->s >= p->e)
				return fail(p, "unterminated string");
			switch (*p->s++) {
			case '"': cp = '"'; break;
			case '\\': cp = '\\'; break;
			case '/': cp = '/'; break;
			case 'b': cp = '\b'; break;
			case 'f': cp = '\f'; break;
			case 'n': cp = '\n'; break;
			case 'r': cp = '\r'; break;
			case 't': cp = '\t'; break;
			case 'u':
				if (hex4(p, &cp) < 0)
					return -1;
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return fail(p, "lone low surrogate in \\u escape");
				if (cp >= 0xd800 && cp <= 0xdbff) {
					uint32_t lo;
					if (p->e - p->s < 2 || p->s[0] != '\\' || p->s[1] != 'u')
						return fail(p, "lone high surrogate in \\u escape");
					p->s += 2;
					if (hex4(p, &lo) < 0)
						return -1;
					if (lo < 0xdc00 || lo > 0xdfff)
						return fail(p, "bad surrogate pair in \\u escape");
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				break;
			default:
				p->s--;
				return fail(p, "bad escape");
			}
			if (keep) {
				if (reserve(p, 4) < 0)
					return -1;
				char *o = *p->buf + p->used;
				if (cp < 0x80)
					o[0] = (char)cp, p->used += 1;
				else if (cp < 0x800)
					o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), p->used += 2;
				else if (cp < 0x10000)
					o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3f)),
					o[2] = (char)(0x80 | (cp & 0x3f)), p->used += 3;
				else
					o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
					o[2] = (char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f)),
					p->used += 4;
			}
			continue;
		}
		/* a multi-byte UTF-8 sequence: validated, copied as is */
		size_t l = utf8_valid_len(p->s, (size_t)(p->e - p->s));
		if (!l)
			return fail(p, "invalid UTF-8");
		if (keep) {
			if (reserve(p, l) < 0)
				return -1;
			memcpy(*p->buf + p->used, p->s, l);
			p->used += l;
		}
		p->s += l;
	}
}

static int value(struct p *p, int depth);

static int number(struct p *p)
{
	const unsigned char *s = p->s;
	if (s < p->e && *s == '-')
		s++;
	if (s < p->e && *s == '0')
		s++;
	else if (s < p->e && *s >= '1' && *s <= '9')
		while (s < p->e && *s >= '0' && *s <= '9')
			s++;
	else
		return fail(p, "bad number");
	if (s < p->e && *s == '.') {
		s++;
		if (s >= p->e || *s < '0' || *s > '9')
			return fail(p, "bad number");
		while (s < p->e && *s >= '0' && *s <= '9')
			s++;
	}
	if (s < p->e && (*s == 'e' || *s == 'E')) {
		s++;
		if (s < p->e && (*s == '+' || *s == '-'))
			s++;
		if (s >= p->e || *s < '0' || *s > '9')
			return fail(p, "bad number");
		while (s < p->e && *s >= '0' && *s <= '9')
			s++;
	}
	p->s = s;
	return 0;
}

static int literal(struct p *p, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(p->e - p->s) < n || memcmp(p->s, word, n) != 0)
		return fail(p, "unexpected character");
	p->s += n;
	return 0;
}

static int container(struct p *p, int depth, char close)
{
	if (depth > MAX_DEPTH)
		return fail(p, "nested too deeply");
	p->s++;
	ws(p);
	if (p->s < p->e && *p->s == close) {
		p->s++;
		return 0;
	}
	for (;;) {
		ws(p);
		if (close == '}') {
			if (p->s >= p->e || *p->s != '"')
				return fail(p, "expected a key");
			if (string(p, 0) < 0)
				return -1;
			ws(p);
			if (p->s >= p->e || *p->s != ':')
				return fail(p, "expected ':'");
			p->s++;
			ws(p);
		}
		if (value(p, depth + 1) < 0)
			return -1;
		ws(p);
		if (p->s < p->e && *p->s == ',') {
			p->s++;
			continue;
		}
		if (p->s < p->e && *p->s == close) {
			p->s++;
			return 0;
		}
		return fail(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int value(struct p *p, int depth)
{
	if (p->s >= p->e)
		return fail(p, "unexpected end of line");
	switch (*p->s) {
	case '"': return string(p, 0);
	case '{': return container(p, depth, '}');
	case '[': return container(p, depth, ']');
	case 't': return literal(p, "true");
	case 'f': return literal(p, "false");
	case 'n': return literal(p, "null");
	default: return number(p);
	}
}

int jsonl_extract(const char *s, size_t n, const char *const *keys, int nkeys,
		  struct jsonl_field *out, char **buf, size_t *cap, char *err, size_t errlen)
{
	struct p p = {(const unsigned char *)s, (const unsigned char *)s + n, (const unsigned char *)s,
		      buf, cap, 0, err, errlen};

	for (int i = 0; i < nkeys; i++)
		out[i] = (struct jsonl_field){0, 0, 0};
	ws(&p);
	if (p.s >= p.e || *p.s != '{')
		return fail(&p, "not a JSON object");
	p.s++;
	ws(&p);
	if (p.s < p.e && *p.s == '}') {
		p.s++;
		goto end;
	}
	for (;;) {
		ws(&p);
		if (p.s >= p.e || *p.s != '"')
			return fail(&p, "expected a key");
		/* decode the key into the buffer tail, compare, and drop it again */
		size_t mark = p.used;
		if (string(&p, 1) < 0)
			return -1;
		int want = -1;
		for (int i = 0; i < nkeys; i++)
			if (strlen(keys[i]) == p.used - mark && memcmp(*buf + mark, keys[i], p.used - mark) == 0)
				want = i;
		p.used = mark;
		ws(&p);
		if (p.s >= p.e || *p.s != ':')
			return fail(&p, "expected ':'");
		p.s++;
		ws(&p);
		if (want >= 0 && p.s < p.e && *p.s == '"') {
			size_t off = p.used;
			if (string(&p, 1) < 0)
				return -1;
			out[want] = (struct jsonl_field){off, p.used - off, 1};  /* last one wins */
		} else {
			if (value(&p, 1) < 0)
				return -1;
			if (want >= 0)
				out[want] = (struct jsonl_field){0, 0, -1};
		}
		ws(&p);
		if (p.s < p.e && *p.s == ',') {
			p.s++;
			continue;
		}
		if (p.s < p.e && *p.s == '}') {
			p.s++;
			break;
		}
		return fail(&p, "expected ',' or '}'");
	}
end:
	ws(&p);
	if (p.s != p.e)
		return fail(&p, "text after the JSON object");
	return 0;
}

int jsonl_keys(const char *s, size_t n, char *out, size_t outlen)
{
	char *buf = NULL, err[128];
	size_t cap = 0, used = 0;
	int count = 0;
	struct p p = {(const unsigned char *)s, (const unsigned char *)s + n, (const unsigned char *)s,
		      &buf, &cap, 0, err, sizeof err};

	if (outlen)
		out[0] = '\0';
	ws(&p);
	if (p.s >= p.e || *p.s != '{')
		return 0;
	p.s++;
	for (;;) {
		ws(&p);
		if (p.s >= p.e || *p.s != '"' || string(&p, 1) < 0)
			break;
		if (used < outlen)
			used += (size_t)snprintf(out + used, outlen - used, "%s'%.*s'", count ? ", " : "",
						 (int)p.used, buf);
		count++;
		p.used = 0;
		ws(&p);
		if (p.s >= p.e || *p.s != ':')
			break;
		p.s++;
		ws(&p);
		if (value(&p, 1) < 0)
			break;
		ws(&p);
		if (p.s >= p.e || *p.s != ',')
			break;
		p.s++;
	}
	free(buf);
	return count;
}
