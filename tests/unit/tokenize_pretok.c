/* tokenize_pretok.c - the pre-tokenizers against the spec's examples, against Oniguruma running
 * the same patterns as written (no Unicode catch-up) on random strings of awkward code points,
 * and against the reference itself
 * (Hugging Face tokenizers' npm package, through tests/ref/pretok-ref.js) when node and the
 * package are there: tests/node/node_modules, or $LMTK_NODE_MODULES.  Without them the reference
 * cases print "skip". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "t.h"
#include "tokenize/pretok.h"
#include "tokenize/regex.h"
#include "tokenize/unicode.h"

#include <oniguruma.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef size_t (*pretok_fn)(const uint8_t *, size_t, size_t *, struct pretok_piece *, size_t);

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define BLOOM_PATTERN " ?[^(\\s|[.,!?…。，、।۔،])]+"

#define MAXP 4096
static struct pretok_piece pa[MAXP], pb[MAXP];

static size_t run_all(pretok_fn f, const uint8_t *s, size_t n, struct pretok_piece *out)
{
	size_t pos = 0, k = 0;
	while (pos < n && k < MAXP)
		k += f(s, n, &pos, out + k, MAXP - k);
	return k;
}

/* ---- printing ---------------------------------------------------------------------------- */

static void show(const uint8_t *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			printf("\\%c", s[i]);
		else if (s[i] < 0x20 || s[i] == 0x7f)
			printf("\\x%02x", s[i]);
		else
			putchar(s[i]);
	}
	putchar('"');
}

static void show_pieces(const char *who, const uint8_t *s, const struct pretok_piece *p, size_t k)
{
	printf("    %-9s", who);
	for (size_t i = 0; i < k; i++) {
		if (i)
			printf(" | ");
		if (p[i].off + p[i].len > 1u << 30) {
			printf("[bad %zu,%zu]", p[i].off, p[i].len);
			continue;
		}
		show(s + p[i].off, p[i].len);
	}
	putchar('\n');
}

static int same(const struct pretok_piece *a, size_t ka, const struct pretok_piece *b, size_t kb)
{
	if (ka != kb)
		return 0;
	for (size_t i = 0; i < ka; i++)
		if (a[i].off != b[i].off || a[i].len != b[i].len)
			return 0;
	return 1;
}

static int mismatches;
static void report(const char *what, const uint8_t *s, size_t n, const char *na,
		   const struct pretok_piece *a, size_t ka, const char *nb,
		   const struct pretok_piece *b, size_t kb)
{
	if (mismatches++ >= 5)
		return;
	printf("    %s mismatch on ", what);
	show(s, n);
	putchar('\n');
	show_pieces(na, s, a, ka);
	show_pieces(nb, s, b, kb);
}

/* 1 if f splits s exactly into want[] (NULL-terminated) */
static int splits_as(pretok_fn f, const char *s, const char *const *want)
{
	size_t n = strlen(s), k = run_all(f, (const uint8_t *)s, n, pa), i = 0;
	int ok = 1;
	for (; want[i]; i++)
		if (i >= k || pa[i].len != strlen(want[i]) || memcmp(s + pa[i].off, want[i], pa[i].len))
			ok = 0;
	if (i != k)
		ok = 0;
	if (!ok) {
		printf("    ");
		show((const uint8_t *)s, n);
		printf(" split as:\n");
		show_pieces("got", (const uint8_t *)s, pa, k);
	}
	return ok;
}

#define SPLITS(f, s, ...) T_ASSERT(splits_as(f, s, (const char *const[]){__VA_ARGS__, NULL}))

/* ---- random strings ---------------------------------------------------------------------- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)((rng >> 11) % n);
}

static size_t put_utf8(uint8_t *o, uint32_t c)
{
	if (c < 0x80) {
		o[0] = (uint8_t)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (uint8_t)(0xC0 | c >> 6);
		o[1] = (uint8_t)(0x80 | (c & 0x3F));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (uint8_t)(0xE0 | c >> 12);
		o[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
		o[2] = (uint8_t)(0x80 | (c & 0x3F));
		return 3;
	}
	o[0] = (uint8_t)(0xF0 | c >> 18);
	o[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
	o[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
	o[3] = (uint8_t)(0x80 | (c & 0x3F));
	return 4;
}

/* Code points where the patterns' decisions are made.  Repeats weight the draw. */
static const uint32_t alphabet[] = {
	/* contractions and their near misses */
	'\'', '\'', '\'', 's', 't', 'r', 'e', 'v', 'm', 'l', 'l', 'd', 'S', 'T', 'D', 0x2019, 0x017F,
	/* ASCII letters, digits, punctuation, BLOOM's delimiters */
	'a', 'Z', 'x', '0', '9', '5', '!', '.', ',', '?', '(', ')', '|', '-', '_', '"', '#', '[', ']',
	/* every White_Space code point, spaces weighted up */
	' ', ' ', ' ', ' ', ' ', ' ', '\t', '\n', '\n', '\r', 0x0B, 0x0C, 0x85, 0xA0, 0x1680, 0x2000,
	0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
	0x2029, 0x202F, 0x205F, 0x3000,
	/* not White_Space, though some engines or Python think so */
	0x00, 0x1C, 0x1D, 0x1E, 0x1F, 0x7F, 0x180E, 0x200B, 0x200D, 0xFEFF, 0xAD,
	/* Latin-1 and marks */
	0xAA, 0xB5, 0xBA, 0xE9, 0xC0, 0x0130, 0x0301, 0x0308, 0x212A,
	/* numbers that are not digits */
	0xB2, 0xB9, 0xBD, 0x2160, 0x2460, 0x0663, 0x0966, 0x1D7CE,
	/* BLOOM's non-ASCII delimiters and their neighbours */
	0x2026, 0x3002, 0xFF0C, 0x3001, 0x0964, 0x0965, 0x06D4, 0x060C, 0x061F, 0x2025,
	/* scripts */
	0x0915, 0x093F, 0x094D, 0x4E00, 0x4E2D, 0x3042, 0x30FC, 0xAC00, 0x0627, 0x05D0, 0x0E01,
	/* emoji, ZWJ sequences, variation selectors, skin tones */
	0x1F600, 0x1F468, 0x1F3FB, 0xFE0F, 0x2764,
	/* Unicode 15.0-16.0 additions and the one Mn -> Mc move: where 14.0 tables go wrong */
	0x10D4A, 0x1E5D0, 0x2EBF0, 0x31350, 0x11F50, 0x1C89, 0x0897, 0x1171E, 0x16D40,
	/* private use, noncharacters, unassigned, replacement */
	0xE000, 0xFFFD, 0xFFFF, 0x10FFFF, 0x0378,
};
#define NALPHA (sizeof alphabet / sizeof alphabet[0])

static size_t random_string(uint8_t *o, size_t maxcp, const uint32_t *alpha, size_t nalpha)
{
	size_t n = 0, len = rnd((uint32_t)maxcp + 1);
	for (size_t i = 0; i < len; i++)
		n += put_utf8(o + n, alpha[rnd((uint32_t)nalpha)]);
	return n;
}

/* ---- Oniguruma oracles: the library as it stands (Debian 12's: Unicode 14.0) ------------- */

static regex_t *raw_compile(const char *pat)
{
	regex_t *c;
	OnigErrorInfo einfo;
	int rc = onig_new(&c, (const OnigUChar *)pat, (const OnigUChar *)pat + strlen(pat),
			  ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_ONIGURUMA, &einfo);
	if (rc != ONIG_NORMAL) {
		printf("    cannot compile %s: error %d\n", pat, rc);
		exit(2);
	}
	return c;
}

static OnigRegion *raw_md;

/* Isolated split with a pattern that never matches empty: matches and the gaps between them */
static size_t raw_split(regex_t *c, const uint8_t *s, size_t n, struct pretok_piece *out)
{
	size_t k = 0, at = 0;
	while (at < n) {
		int rc = onig_search(c, s, s + n, s + at, s + n, raw_md, ONIG_OPTION_NONE);
		size_t ms = n, me = n;
		if (rc >= 0) {
			ms = (size_t)raw_md->beg[0];
			me = (size_t)raw_md->end[0];
		}
		if (ms > at)
			out[k++] = (struct pretok_piece){at, ms - at};
		if (me > ms)
			out[k++] = (struct pretok_piece){ms, me - ms};
		at = me;
	}
	return k;
}

static int raw_is(regex_t *c, uint32_t cp)
{
	uint8_t b[4];
	size_t n = put_utf8(b, cp);
	return onig_search(c, b, b + n, b, b + n, raw_md, ONIG_OPTION_NONE) >= 0;
}

static size_t split_with(struct regex *re, const uint8_t *s, size_t n, enum regex_behavior b,
			 int invert, struct pretok_piece *out)
{
	static struct pretok_piece *buf;
	static size_t cap;
	char err[256];
	ssize_t k = regex_split(re, s, n, b, invert, &buf, &cap, err, sizeof err);
	if (k < 0) {
		printf("    regex_split: %s\n", err);
		return (size_t)-1;
	}
	if ((size_t)k > MAXP)
		k = MAXP;
	memcpy(out, buf, (size_t)k * sizeof *out);
	return (size_t)k;
}

static struct regex *compile_or_die(const char *pat, int literal)
{
	char err[512];
	struct regex *re = regex_compile(pat, literal, err, sizeof err);
	if (!re) {
		printf("    regex_compile(%s): %s\n", pat, err);
		exit(2);
	}
	return re;
}

/* ---- the reference ----------------------------------------------------------------------- */

static char node_modules[1024], tmpdir[1024];

static int have_reference(void)
{
	const char *nm = getenv("LMTK_NODE_MODULES");
	snprintf(node_modules, sizeof node_modules, "%s", nm && *nm ? nm : "tests/node/node_modules");
	char pkg[1100], cmd[2400];
	snprintf(pkg, sizeof pkg, "%s/tokenizers/package.json", node_modules);
	if (access(pkg, R_OK) != 0)
		return 0;
	snprintf(cmd, sizeof cmd, "NODE_PATH='%s' node tests/ref/pretok-ref.js check 2>/dev/null",
		 node_modules);
	return system(cmd) == 0;
}

static void json_string(FILE *f, const uint8_t *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			fprintf(f, "\\%c", s[i]);
		else if (s[i] < 0x20)
			fprintf(f, "\\u%04x", s[i]);
		else
			fputc(s[i], f);
	}
	fputc('"', f);
}

/* Runs pretok-ref.js MODE [CONFIG] over the strings in in_path; returns its output, one line per
 * string ("off,len off,len ..."), or NULL.  The answer is kept in $LMTK_CACHE/pretok-ref (as
 * the CLI tests keep the peer's, tests/lib.sh's hf_encode), named by the hash of all it depends
 * on: MODE, the bytes of the input and of CONFIG, pretok-ref.js and the tokenizers package's
 * version; node runs again only when one of them changes.  It is most of this test's time
 * otherwise: "classes" alone (16 probes over every code point) takes the reference half a
 * minute. */
static char *reference(const char *mode, const char *config, const char *in_path, const char *tag)
{
	char out[1200], args[1200], conf_hash[1200], cmd[8192];
	snprintf(out, sizeof out, "%s/ref-%s.out", tmpdir, tag);
	snprintf(args, sizeof args, config ? "%s '%s'" : "%s", mode, config);
	snprintf(conf_hash, sizeof conf_hash, config ? "sha256sum < '%s';" : "%s", config ? config : "");
	snprintf(cmd, sizeof cmd,
		 "c=\"${LMTK_CACHE:-/var/tmp/lmtk-cache}/pretok-ref\" && mkdir -p \"$c\" && "
		 "k=$({ echo '%s'; %s sha256sum < '%s'; sha256sum < tests/ref/pretok-ref.js; "
		 "cat '%s/tokenizers/package.json'; } | sha256sum | cut -c1-40) && "
		 "{ [ -f \"$c/$k\" ] || { NODE_PATH='%s' node tests/ref/pretok-ref.js %s < '%s' > \"$c/.$k.$$\" && "
		 "mv -f \"$c/.$k.$$\" \"$c/$k\"; } || { rm -f \"$c/.$k.$$\"; false; }; } && "
		 "cp \"$c/$k\" '%s'",
		 mode, conf_hash, in_path, node_modules, node_modules, args, in_path, out);
	if (system(cmd) != 0) {
		printf("    failed: %s\n", cmd);
		return NULL;
	}
	FILE *f = fopen(out, "r");
	if (!f)
		return NULL;
	struct stat st;
	fstat(fileno(f), &st);
	char *buf = malloc((size_t)st.st_size + 1);
	size_t got = fread(buf, 1, (size_t)st.st_size, f);
	buf[got] = 0;
	fclose(f);
	return buf;
}

/* parses one output line into pieces; advances *p past it */
static size_t parse_line(char **p, struct pretok_piece *out)
{
	size_t k = 0;
	char *s = *p;
	while (*s && *s != '\n') {
		char *e;
		size_t off = strtoul(s, &e, 10);
		size_t len = strtoul(e + 1, &e, 10);
		if (k < MAXP)
			out[k++] = (struct pretok_piece){off, len};
		s = e;
		while (*s == ' ')
			s++;
	}
	if (*s == '\n')
		s++;
	*p = s;
	return k;
}

/* the corpus every reference comparison runs on: fixed strings, then random ones */
#define NREF 20000
static uint8_t *corpus[NREF];
static size_t corpus_len[NREF], ncorpus;

static const char *const fixed[] = {
	"", " ", "  ", "a", "a  b   c", "x\t\ty", "a \n b", "\r\nfoo", "a  ", "e\xcc\x81t\xc3\xa9",
	"12\xc2\xbd", "DON'T", "don't we'll I'm they're you've he'd it's 'sup ''s", "Hello, world! (test) a|b",
	"  leading", "trailing  ", "\xe3\x80\x80\xe3\x80\x80x", "a\xc2\x85" "b", "\xef\xbb\xbf" "BOM",
	"tab\t\tand  \n\n  newlines \n", "\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c",
	"\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 family", "x\xe1\xa0\x8ey", "'s's 's ' s", "1,000.50$",
};
#define NFIXED (sizeof fixed / sizeof fixed[0])

static const char *write_corpus(const char *name, char *path, size_t pathlen)
{
	snprintf(path, pathlen, "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		return NULL;
	for (size_t i = 0; i < ncorpus; i++) {
		json_string(f, corpus[i], corpus_len[i]);
		fputc('\n', f);
	}
	fclose(f);
	return path;
}

static void build_corpus(void)
{
	uint8_t buf[1024];
	for (size_t i = 0; i < NFIXED; i++) {
		corpus_len[i] = strlen(fixed[i]);
		corpus[i] = (uint8_t *)strdup(fixed[i]);
	}
	for (size_t i = NFIXED; i < NREF; i++) {
		corpus_len[i] = random_string(buf, 48, alphabet, NALPHA);
		corpus[i] = malloc(corpus_len[i] + 1);
		memcpy(corpus[i], buf, corpus_len[i]);
	}
	ncorpus = NREF;
}

/* compares the next ncorpus lines of reference output at *p with f's pieces (or re's); returns
 * the number of strings that differ */
static int compare_block(char **p, const char *tag, pretok_fn f, struct regex *re,
			 enum regex_behavior b, int invert)
{
	mismatches = 0;
	for (size_t i = 0; i < ncorpus; i++) {
		size_t kr = parse_line(p, pb);
		size_t k = f ? run_all(f, corpus[i], corpus_len[i], pa)
			     : split_with(re, corpus[i], corpus_len[i], b, invert, pa);
		if (!same(pa, k, pb, kr))
			report(tag, corpus[i], corpus_len[i], "lmtk", pa, k, "reference", pb, kr);
	}
	if (mismatches)
		printf("    %s: %d of %zu strings differ\n", tag, mismatches, ncorpus);
	return mismatches;
}

static int compare_reference(const char *mode, const char *in, pretok_fn f)
{
	char *ref = reference(mode, NULL, in, mode), *p = ref;
	if (!ref)
		return -1;
	int r = compare_block(&p, mode, f, NULL, 0, 0);
	free(ref);
	return r;
}

/* ---- the exhaustive class check ---------------------------------------------------------- */

static uint8_t *ref_set;	/* 0x110000 bits: in the property per the reference */

static int parse_ranges(const char *line, uint8_t *set)
{
	memset(set, 0, 0x110000);
	const char *s = strchr(line, ' ');
	while (s && *s == ' ') {
		char *e;
		unsigned long a = strtoul(s + 1, &e, 16), b = strtoul(e + 1, &e, 16);
		if (b >= 0x110000)
			return -1;
		memset(set + a, 1, b - a + 1);
		s = e;
	}
	return 0;
}

static const char *find_probe(const char *all, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = all; *p;) {
		if (strncmp(p, name, n) == 0 && p[n] == ' ')
			return p;
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	return NULL;
}

/* every code point but the surrogates, as UTF-8, with the code point at each offset */
static uint8_t *all_text;
static size_t all_len;
static uint32_t *cp_at;	/* byte offset -> code point */

static void build_all_text(void)
{
	all_text = malloc(0x110000 * 4);
	cp_at = malloc(0x110000 * 4 * sizeof *cp_at);
	for (uint32_t c = 0; c < 0x110000; c++) {
		if (c >= 0xD800 && c <= 0xDFFF)
			continue;
		size_t k = put_utf8(all_text + all_len, c);
		for (size_t j = 0; j < k; j++)
			cp_at[all_len + j] = c;
		all_len += k;
	}
}

/* code points regex.c puts in the probe's set, against the reference's */
static int regex_class_differs(const char *probe_name, const char *pattern, const char *all)
{
	const char *line = find_probe(all, probe_name);
	if (!line || parse_ranges(line, ref_set) < 0) {
		printf("    no probe %s in the reference's output\n", probe_name);
		return 1;
	}
	struct regex *re = compile_or_die(pattern, 0);
	static struct pretok_piece *buf;
	static size_t cap;
	char err[256];
	ssize_t k = regex_split(re, all_text, all_len, REGEX_REMOVED, 1, &buf, &cap, err, sizeof err);
	uint8_t *mine = calloc(0x110000, 1);
	for (ssize_t i = 0; i < k; i++)
		for (size_t o = buf[i].off; o < buf[i].off + buf[i].len; o++)
			mine[cp_at[o]] = 1;
	int bad = 0;
	for (uint32_t c = 0; c < 0x110000; c++)
		if (mine[c] != ref_set[c] && !(c >= 0xD800 && c <= 0xDFFF) && bad++ < 5)
			printf("    %s: U+%04X is %s by regex.c, %s by the reference\n", pattern, c,
			       mine[c] ? "in" : "out", ref_set[c] ? "in" : "out");
	free(mine);
	regex_free(re);
	return bad;
}

/* ---- the cases --------------------------------------------------------------------------- */

int main(void)
{
	uint8_t buf[4096];
	regex_onig_version();	/* initializes the library */
	raw_md = onig_region_new();
	const char *t = getenv("LMTK_TMP");
	snprintf(tmpdir, sizeof tmpdir, "%s/pretok.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror(tmpdir);
		return 2;
	}

	T_CASE("gpt2_spec_examples") {
		SPLITS(pretok_gpt2, "a  b   c", "a", " ", " b", "  ", " c");
		SPLITS(pretok_gpt2, "x\t\ty", "x", "\t", "\t", "y");
		SPLITS(pretok_gpt2, "a \n b", "a", " \n", " b");
		SPLITS(pretok_gpt2, "\r\nfoo", "\r", "\n", "foo");
		SPLITS(pretok_gpt2, "a  ", "a", "  ");
		SPLITS(pretok_gpt2, "e\xcc\x81t\xc3\xa9", "e", "\xcc\x81", "t\xc3\xa9");
		SPLITS(pretok_gpt2, "12\xc2\xbd", "12\xc2\xbd");
		SPLITS(pretok_gpt2, "DON'T", "DON", "'", "T");
	}

	T_CASE("gpt2_contractions_and_prefix_space") {
		SPLITS(pretok_gpt2, "don't we'll I'm they're you've he'd it's",
		       "don", "'t", " we", "'ll", " I", "'m", " they", "'re", " you", "'ve", " he", "'d",
		       " it", "'s");
		SPLITS(pretok_gpt2, "'sup", "'s", "up");
		SPLITS(pretok_gpt2, "''s", "''", "s");
		SPLITS(pretok_gpt2, " 's", " '", "s");
		SPLITS(pretok_gpt2, "x'", "x", "'");
		SPLITS(pretok_gpt2, "x're", "x", "'re");
		SPLITS(pretok_gpt2, "x'r", "x", "'", "r");
		SPLITS(pretok_gpt2, "it\xe2\x80\x99s", "it", "\xe2\x80\x99", "s");	/* ’ is no apostrophe */
		SPLITS(pretok_gpt2, " 42 !? x", " 42", " !?", " x");
		SPLITS(pretok_gpt2, "\xc2\xa0x", "\xc2\xa0", "x");	/* NBSP is \s but not " ?" */
		SPLITS(pretok_gpt2, "a \xe3\x80\x80" "b", "a", " ", "\xe3\x80\x80", "b");
		SPLITS(pretok_gpt2, "   ", "   ");
		SPLITS(pretok_gpt2, " ", " ");
		SPLITS(pretok_gpt2, "a\x1f" "b", "a", "\x1f", "b");	/* 001F is not \s */
		SPLITS(pretok_gpt2, "\xef\xbb\xbfx", "\xef\xbb\xbf", "x");	/* nor FEFF */
		SPLITS(pretok_gpt2, "a\xe2\x80\x8b" "b", "a", "\xe2\x80\x8b", "b");	/* nor 200B */
		SPLITS(pretok_gpt2, "x\xe1\xa0\x8e y", "x", "\xe1\xa0\x8e", " y");	/* nor 180E */
		SPLITS(pretok_gpt2, "\xc2\x85\xc2\x85x", "\xc2\x85", "\xc2\x85", "x");	/* 0085 is */
	}

	T_CASE("bloom_spec_example") {
		SPLITS(pretok_bloom, "Hello, world! (test) a|b",
		       "Hello", ",", " world", "! (", "test", ")", " a", "|", "b");
		SPLITS(pretok_bloom, "", NULL);
		SPLITS(pretok_bloom, " ", " ");
		SPLITS(pretok_bloom, "  x", " ", " x");
		SPLITS(pretok_bloom, "a\xe2\x80\xa6" "b", "a", "\xe2\x80\xa6", "b");
		SPLITS(pretok_bloom, "x\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81y", "x",
		       "\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81", "y");
		SPLITS(pretok_bloom, "\xe0\xa4\x95\xe0\xa5\xa4 \xd8\xa7\xdb\x94\xd8\x8c",
		       "\xe0\xa4\x95", "\xe0\xa5\xa4", " \xd8\xa7", "\xdb\x94\xd8\x8c");
		SPLITS(pretok_bloom, "a\tb\nc", "a", "\t", "b", "\n", "c");
		SPLITS(pretok_bloom, "it's 3-4 [x]", "it's", " 3-4", " [x]");
		SPLITS(pretok_bloom, "\xe0\xa5\xa5", "\xe0\xa5\xa5");	/* ॥ is not a delimiter */
	}

	T_CASE("class_table_matches_unicode_16") {
		T_ASSERT(ucd_index[0] == 0);	/* pretok.c reads ASCII from ucd_blocks[0] */
		T_ASSERT(ucd_class('a') == UCD_LETTER && ucd_class('Z') == UCD_LETTER);
		T_ASSERT(ucd_class('0') == UCD_NUMBER && ucd_class(0xBD) == UCD_NUMBER);
		T_ASSERT(ucd_class(0x2160) == UCD_NUMBER && ucd_class(0xB2) == UCD_NUMBER);
		T_ASSERT(ucd_class(0x0301) == UCD_OTHER && ucd_class('\'') == UCD_OTHER);
		T_ASSERT(ucd_class(0x180E) == UCD_OTHER && ucd_class(0x200B) == UCD_OTHER);
		T_ASSERT(ucd_class(0xFEFF) == UCD_OTHER && ucd_class(0x1C) == UCD_OTHER);
		T_ASSERT(ucd_class(0x10D4A) == UCD_LETTER);	/* Garay, new in 16.0 */
		T_ASSERT(ucd_class(0x2EBF0) == UCD_LETTER);	/* CJK Ext. I, 15.1 */
		T_ASSERT(ucd_class(0x11F50) == UCD_NUMBER);	/* Kawi digit, 15.0 */
		T_ASSERT(ucd_class(0x0897) == UCD_OTHER);	/* a mark, new in 16.0 */
		T_ASSERT(ucd_class(0x323AF) == UCD_LETTER && ucd_class(0x323B0) == UCD_OTHER);
		T_ASSERT(ucd_class(0x10FFFF) == UCD_OTHER && ucd_class(0x110000) == UCD_OTHER);
		int nspace = 0, nbloom = 0;
		for (uint32_t c = 0; c < 0x110000; c++) {
			nspace += ucd_class(c) == UCD_SPACE;
			nbloom += (ucd_bits(c) & UCD_BLOOM_EXCL) != 0;
			if (ucd_class(c) == UCD_SPACE)
				T_ASSERT(ucd_bits(c) & UCD_BLOOM_EXCL);
		}
		T_ASSERT(nspace == 25);
		T_ASSERT(nbloom == 25 + 14);
	}

	regex_t *gpt2_raw = raw_compile(GPT2_PATTERN), *bloom_raw = raw_compile(BLOOM_PATTERN);
	struct regex *gpt2_re = compile_or_die(GPT2_PATTERN, 0);
	struct regex *bloom_re = compile_or_die(BLOOM_PATTERN, 0);

	/* what regex_compile() hands the library: on 6.9.10 the pattern itself; on 6.9.8 the
	 * constructs whose code points Unicode 15.0-16.0 moved, with the deltas beside them, and
	 * nothing else */
	T_CASE("catch_up_rewrites_only_what_moved") {
		static const struct {
			const char *pattern;
			int version;
			const char *want;	/* NULL: unchanged; else the start of the rewrite */
			const char *has;	/* and what it must contain */
		} ex[] = {
			{BLOOM_PATTERN, 60908, NULL, NULL},	/* \s is White_Space in both */
			{GPT2_PATTERN, 60910, NULL, NULL},
			{"[[:punct:]]\\w\\p{Han}", 60910, NULL, NULL},
			{"\\p{Lt}+|\\s|\\h|\\pL", 60908, NULL, NULL},	/* no deltas; \pL no property */
			{"\\\\w", 60908, NULL, NULL},	/* an escaped backslash, then "w" */
			{"[\\w-z]", 60908, NULL, NULL},	/* an error in Oniguruma: kept one */
			{"[a-\\d]|[[:alpha:]-z]", 60908, NULL, NULL},
			{"[-\\d]|[^-\\d]", 60908, "[-[\\d", "|[^-[\\d"},
			{"(?W)\\w+", 60908, NULL, NULL},	/* ASCII \w: no Unicode deltas */
			{"[:alpha:]", 60908, NULL, NULL},	/* outside a class it is no bracket */
			/* outside a class: the construct itself, or the gained, unless lost */
			{" ?\\p{L}+", 60908, " ?(?:\\p{L}|[\\x{1C89}-\\x{1C8A}", "\\x{323AF}])+"},
			{"\\p{^Letter}", 60908, "(?:(?![\\x{1C89}", "])\\P{Letter})"},
			{"\\p{Mn}", 60908, "(?:(?![\\x{1171E}])\\p{Mn}|[\\x{0897}", NULL},
			{"\\P{Mn}", 60908, "(?:(?![\\x{0897}", "])\\P{Mn}|[\\x{1171E}])"},
			{"\\W", 60908, "(?:(?![\\x{0363}", "\\x{1E5FA}])\\W)"},	/* Alpha, M, Nd */
			{"\\p{Word}", 60908, "(?:\\w|[\\x{0363}", NULL},	/* 6.9.10: \w */
			{"\\p{PosixPunct}", 60908, "(?:[\\p{P}\\p{S}]|[\\x{1B4E}", NULL},
			/* inside one: a nested class */
			{"[a\\d]", 60908, "[a[\\d\\x{10D40}", NULL},
			{"[a\\P{Mn}]", 60908, "[a[^\\p{Mn}\\x{0897}", "&&[^\\x{1171E}]]]"},
			{"[[:^alpha:]]", 60908, "[[^[:alpha:]\\x{0363}", NULL},
			{"[[:punct:]]", 60908, "[[\\p{P}\\p{S}\\x{1B4E}", NULL},
			{"[[:punct:]]", 60909, "[[[:punct:]\\x{1B4E}", NULL},
		};
		for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
			char err[256];
			char *got = regex_catch_up(ex[i].pattern, ex[i].version, err, sizeof err);
			int ok = got && (ex[i].want ? strncmp(got, ex[i].want, strlen(ex[i].want)) == 0 &&
						     (!ex[i].has || strstr(got, ex[i].has))
						   : strcmp(got, ex[i].pattern) == 0);
			if (!ok)
				printf("    %s on %d: got %.200s\n", ex[i].pattern, ex[i].version,
				       got ? got : err);
			T_ASSERT(ok);
			free(got);
		}
		T_ASSERT(regex_onig_version() >= 60908);
	}

	/* All strings of one to three code points from a set that has each class in each UTF-8
	 * length, the contraction letters and the space kinds: every boundary the patterns see. */
	T_CASE("every_class_boundary_matches_oniguruma") {
		static const uint32_t set[] = {'a', 0xE9, 0x4E2D, 0x10D4A, '1', 0xBD, 0x2160, '\'', 's',
					       'l', 'e', '!', '.', '(', 0x2026, 0x0964, 0x1F600, 0x0301,
					       ' ', '\t', '\n', 0x85, 0x3000, 0x180E, 0xFEFF};
		size_t ns = sizeof set / sizeof set[0], count = 0;
		mismatches = 0;
		for (size_t len = 1; len <= 3; len++) {
			size_t total = 1;
			for (size_t i = 0; i < len; i++)
				total *= ns;
			for (size_t x = 0; x < total; x++) {
				size_t n = 0, v = x;
				int raw_ok = 1;
				for (size_t i = 0; i < len; i++, v /= ns) {
					uint32_t c = set[v % ns];
					raw_ok &= c != 0x10D4A;	/* Unicode 16.0: 6.9.8 differs */
					n += put_utf8(buf + n, c);
				}
				count++;
				size_t ka = run_all(pretok_gpt2, buf, n, pa);
				size_t kb = split_with(gpt2_re, buf, n, REGEX_ISOLATED, 0, pb);
				if (!same(pa, ka, pb, kb))
					report("gpt2/regex.c", buf, n, "pretok", pa, ka, "regex.c", pb, kb);
				if (raw_ok && !same(pa, ka, pb, kb = raw_split(gpt2_raw, buf, n, pb)))
					report("gpt2/onig", buf, n, "pretok", pa, ka, "onig", pb, kb);
				ka = run_all(pretok_bloom, buf, n, pa);
				kb = split_with(bloom_re, buf, n, REGEX_ISOLATED, 0, pb);
				if (!same(pa, ka, pb, kb))
					report("bloom/regex.c", buf, n, "pretok", pa, ka, "regex.c", pb, kb);
				if (raw_ok && !same(pa, ka, pb, kb = raw_split(bloom_raw, buf, n, pb)))
					report("bloom/onig", buf, n, "pretok", pa, ka, "onig", pb, kb);
			}
		}
		printf("    %zu strings, %d mismatches\n", count, mismatches);
		T_ASSERT(mismatches == 0);
	}

	T_CASE("random_strings_match_oniguruma") {
		/* the library as it stands agrees with Unicode 16.0 on most of the alphabet; find where */
		regex_t *L = raw_compile("^\\p{L}$"), *N = raw_compile("^\\p{N}$"),
			   *S = raw_compile("^\\s$");
		uint32_t safe[NALPHA];
		size_t nsafe = 0;
		printf("    Oniguruma %s tables disagree on:", onig_version());
		for (size_t i = 0; i < NALPHA; i++) {
			uint32_t c = alphabet[i];
			int cls = raw_is(S, c) ? UCD_SPACE : raw_is(L, c) ? UCD_LETTER
							   : raw_is(N, c) ? UCD_NUMBER : UCD_OTHER;
			if (cls == (int)ucd_class(c))
				safe[nsafe++] = c;
			else
				printf(" U+%04X", c);
		}
		putchar('\n');
		onig_free(L);
		onig_free(N);
		onig_free(S);

		size_t strings = 0;
		mismatches = 0;
		for (int i = 0; i < 200000; i++) {
			int whole = i & 1;	/* odd: the whole alphabet, vs regex.c only */
			size_t n = whole ? random_string(buf, 40, alphabet, NALPHA)
					 : random_string(buf, 40, safe, nsafe);
			size_t ka = run_all(pretok_gpt2, buf, n, pa), kb;
			if (!same(pa, ka, pb, kb = split_with(gpt2_re, buf, n, REGEX_ISOLATED, 0, pb)))
				report("gpt2/regex.c", buf, n, "pretok", pa, ka, "regex.c", pb, kb);
			if (!whole && !same(pa, ka, pb, kb = raw_split(gpt2_raw, buf, n, pb)))
				report("gpt2/onig", buf, n, "pretok", pa, ka, "onig", pb, kb);
			ka = run_all(pretok_bloom, buf, n, pa);
			if (!same(pa, ka, pb, kb = split_with(bloom_re, buf, n, REGEX_ISOLATED, 0, pb)))
				report("bloom/regex.c", buf, n, "pretok", pa, ka, "regex.c", pb, kb);
			if (!whole && !same(pa, ka, pb, kb = raw_split(bloom_raw, buf, n, pb)))
				report("bloom/onig", buf, n, "pretok", pa, ka, "onig", pb, kb);
			strings++;
		}
		printf("    %zu strings x 2 patterns, %d mismatches\n", strings, mismatches);
		T_ASSERT(mismatches == 0);
	}

	T_CASE("resuming_at_any_cap_is_exact") {
		struct pretok_piece small[7];
		int bad = 0;
		for (int i = 0; i < 20000; i++) {
			size_t n = random_string(buf, 60, alphabet, NALPHA);
			pretok_fn f = i & 1 ? pretok_bloom : pretok_gpt2;
			size_t k = run_all(f, buf, n, pa), kb = 0, pos = 0, cap = 1 + (size_t)i % 7;
			while (pos < n) {
				size_t got = f(buf, n, &pos, small, cap);
				if (got == 0 || got > cap)
					break;
				memcpy(pb + kb, small, got * sizeof *small);
				kb += got;
			}
			bad += !same(pa, k, pb, kb);
		}
		T_ASSERT(bad == 0);
	}

	T_CASE("pieces_tile_even_invalid_utf8") {
		int bad = 0;
		for (int i = 0; i < 20000; i++) {
			size_t n = rnd(64);
			for (size_t j = 0; j < n; j++)
				buf[j] = (uint8_t)(rnd(4) ? rnd(256) : (uint8_t)" a'\xc3\xe2\x80\xf0"[rnd(8)]);
			for (int w = 0; w < 2; w++) {
				size_t k = run_all(w ? pretok_bloom : pretok_gpt2, buf, n, pa), at = 0;
				for (size_t j = 0; j < k; j++) {
					bad += pa[j].off != at || pa[j].len == 0;
					at += pa[j].len;
				}
				bad += at != n;
			}
		}
		T_ASSERT(bad == 0);
	}

	T_CASE("long_runs_are_linear") {
		static uint8_t big[1 << 20];
		memset(big, ' ', sizeof big);
		big[sizeof big - 1] = 'x';
		size_t pos = 0, k = pretok_gpt2(big, sizeof big, &pos, pa, MAXP);
		T_ASSERT(k == 2 && pa[0].len == sizeof big - 2 && pa[1].len == 2);
		k = split_with(gpt2_re, big, sizeof big, REGEX_ISOLATED, 0, pb);
		T_ASSERT(same(pa, 2, pb, k));
		memset(big, 'a', sizeof big);
		pos = 0;
		k = pretok_bloom(big, sizeof big, &pos, pa, MAXP);
		T_ASSERT(k == 1 && pa[0].len == sizeof big);
	}

	/* the reference's own tests (split.rs) and what it answered for empty matches */
	T_CASE("split_behaviors_match_reference_examples") {
		static const struct {
			const char *pattern;
			int literal, invert;
			enum regex_behavior b;
			const char *text, *want;	/* pieces separated by '|' */
		} ex[] = {
			{" ", 1, 0, REGEX_REMOVED, "How are you doing?", "How|are|you|doing?"},
			{" ", 1, 0, REGEX_ISOLATED, "How are you doing?", "How| |are| |you| |doing?"},
			{" ", 1, 0, REGEX_MERGED_WITH_PREVIOUS, "How are you doing?", "How |are |you |doing?"},
			{" ", 1, 0, REGEX_MERGED_WITH_NEXT, "How are you doing?", "How| are| you| doing?"},
			{"-", 1, 0, REGEX_CONTIGUOUS, "How---are--you-doing?", "How|---|are|--|you|-|doing?"},
			{"\\w+", 0, 1, REGEX_REMOVED, "How are you doing?", "How|are|you|doing"},
			{"x*", 0, 0, REGEX_ISOLATED, "abxxcxd", "a|b|xx|c|x|d"},
			{"x*", 0, 0, REGEX_REMOVED, "abxxcxd", "a|b|c|d"},
			{"x*", 0, 1, REGEX_REMOVED, "abxxcxd", "xx|x"},
			{"x*", 0, 0, REGEX_MERGED_WITH_PREVIOUS, "abxxcxd", "a|bxx|cx|d"},
			{"x*", 0, 1, REGEX_MERGED_WITH_PREVIOUS, "abxxcxd", "a|b|xxc|xd"},
			{"x*", 0, 0, REGEX_MERGED_WITH_NEXT, "abxxcxd", "a|b|xxc|xd"},
			{"x*", 0, 1, REGEX_MERGED_WITH_NEXT, "abxxcxd", "a|bxx|cx|d"},
			{"x", 0, 0, REGEX_MERGED_WITH_PREVIOUS, "xxabxxcxdx", "x|x|abx|x|cx|dx"},
			{"x", 0, 0, REGEX_MERGED_WITH_NEXT, "xxabxxcxdx", "x|xab|x|xc|xd|x"},
			{"x", 0, 1, REGEX_MERGED_WITH_PREVIOUS, "xxabxxcxdx", "x|xab|x|xc|xd|x"},
			{"x", 0, 0, REGEX_CONTIGUOUS, "xxabxxcxdx", "xx|ab|xx|c|x|d|x"},
			{"a.", 1, 0, REGEX_ISOLATED, "xa.ya.zab", "x|a.|y|a.|zab"},
		};
		for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
			struct regex *re = compile_or_die(ex[i].pattern, ex[i].literal);
			size_t n = strlen(ex[i].text);
			size_t k = split_with(re, (const uint8_t *)ex[i].text, n, ex[i].b, ex[i].invert, pa);
			char got[256] = "";
			for (size_t j = 0; j < k; j++)
				snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.*s", j ? "|" : "",
					 (int)pa[j].len, ex[i].text + pa[j].off);
			if (strcmp(got, ex[i].want) != 0)
				printf("    /%s/ %d on \"%s\": got %s, want %s\n", ex[i].pattern, (int)ex[i].b,
				       ex[i].text, got, ex[i].want);
			T_STREQ(got, ex[i].want);
			regex_free(re);
		}
	}

	T_CASE("oniguruma_syntax_holds") {
		static const struct {
			const char *pattern, *text, *want;	/* Isolated pieces */
		} ex[] = {
			/* what PCRE2 on a translation got wrong: [:alpha:] is Alphabetic (vowel signs
			 * are), \b's word characters take marks, the absence operator, [:punct:] */
			{"[[:alpha:]]+", "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82 x", "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\x82| |x"},
			{"\\b", "e\xcc\x81x y", "e\xcc\x81x| |y"},
			{"(?~ab)", "xaby", "x|a|by"},
			{"[[:punct:]]+", "a$+b.", "a|$+|b|."},
			/* an empty match after a match is dropped only where that match ended */
			{"a|(?=c)", "xabcab", "x|a|b|c|a|b"},
			{"[a-z&&[^aeiou]]+", "strength", "str|e|ngth"},
			{"[[0-9]x]+", "a1x2b", "a|1x2|b"},
			{"[^[0-9]x]+", "a1x2bc", "a|1x2|bc"},
			{"\\h+", "0xBEEFy", "0|x|BEEF|y"},
			{"\\u0041+", "xAAy", "x|AA|y"},
			{"a{,2}", "aaa", "aa|a"},
			{"(?m:a.b)", "a\nb", "a\nb"},
			{"^x", "x\nx", "x|\n|x"},
			{"\\s+", "a\xe1\xa0\x8e" "b\xc2\x85" "c", "a\xe1\xa0\x8e" "b|\xc2\x85|c"},
			{"[\\s-]+", "a - b", "a| - |b"},
			{"\\p{L}+", "x\xf0\x90\xb5\x8ay", "x\xf0\x90\xb5\x8ay"},	/* U+10D4A: 16.0 */
			{"\\p{Mn}", "\xf0\x91\x9c\x9e", "\xf0\x91\x9c\x9e"},	/* U+1171E: Mc now */
		};
		for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
			struct regex *re = compile_or_die(ex[i].pattern, 0);
			size_t n = strlen(ex[i].text);
			size_t k = split_with(re, (const uint8_t *)ex[i].text, n, REGEX_ISOLATED, 0, pa);
			char got[256] = "";
			for (size_t j = 0; j < k; j++)
				snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.*s", j ? "|" : "",
					 (int)pa[j].len, ex[i].text + pa[j].off);
			if (strcmp(got, ex[i].want) != 0)
				printf("    /%s/ on \"%s\": got %s, want %s\n", ex[i].pattern, ex[i].text,
				       got, ex[i].want);
			T_STREQ(got, ex[i].want);
			regex_free(re);
		}
		char err[256];
		T_ASSERT(regex_compile("[abc", 0, err, sizeof err) == NULL);
		T_ASSERT(regex_compile("(", 0, err, sizeof err) == NULL);
		T_ASSERT(regex_behavior_parse("MergedWithNext") == REGEX_MERGED_WITH_NEXT);
		T_ASSERT(regex_behavior_parse("merged") == -1);
	}

	T_CASE("regex_split_rejects_invalid_utf8") {
		char err[256];
		static struct pretok_piece *p;
		static size_t cap;
		T_ASSERT(regex_split(gpt2_re, (const uint8_t *)"ab\xff", 3, REGEX_ISOLATED, 0, &p, &cap,
				     err, sizeof err) < 0);
		free(p);
	}

	/* ---- against the reference ---- */
	int ref = have_reference();
	if (!ref) {
		printf("skip gpt2_matches_reference: no node or no %s/tokenizers\n", node_modules);
		printf("skip bloom_matches_reference: no node or no %s/tokenizers\n", node_modules);
		printf("skip split_matches_reference: no node or no %s/tokenizers\n", node_modules);
		printf("skip classes_match_reference: no node or no %s/tokenizers\n", node_modules);
	} else {
		build_corpus();
		char in_path[1100], small_path[1100];
		const char *in = write_corpus("corpus.jsonl", in_path, sizeof in_path);

		T_CASE("gpt2_matches_reference") {
			T_ASSERT(in && compare_reference("gpt2", in, pretok_gpt2) == 0);
			printf("    %zu strings\n", ncorpus);
		}
		T_CASE("bloom_matches_reference") {
			T_ASSERT(in && compare_reference("bloom", in, pretok_bloom) == 0);
			printf("    %zu strings\n", ncorpus);
		}
		/* every behaviour, inverted or not, of patterns that match empty, overlap the
		 * hand-coded ones or use the translated syntax, and one String */
		T_CASE("split_matches_reference") {
			static const struct {
				const char *pattern;
				int literal;
			} pats[] = {
				{GPT2_PATTERN, 0}, {BLOOM_PATTERN, 0},
				/* Llama 3's */
				{"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", 0},
				{"\\s*", 0}, {"'|\\p{N}", 0}, {"[^\\s\\p{L}]?", 0}, {"(?=\\p{L})", 0},
				/* DeepSeek-V3's three */
				{"\\p{N}{1,3}", 0}, {"[一-龥\u3040-ゟ゠-ヿ]+", 0},
				{"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", 0},
				{"\\d|\\w\\W", 0}, {"[\\p{P}&&[^.]]+|\\p{Lu}", 0}, {"'s", 1}, {".*", 1},
				/* what the PCRE2 translation got wrong: POSIX brackets, an empty match
				 * after a match but not where it ended, case folding and \p{Word} */
				{"[[:alpha:]]+|[[:punct:]]+", 0}, {"\\p{L}|(?=\\p{N})", 0},
				{"(?i)\\p{Lu}+|\\P{Word}", 0},
			};
			static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
							    "MergedWithNext", "Contiguous"};
			size_t np = sizeof pats / sizeof pats[0], keep = ncorpus;
			char cfg[1100];
			snprintf(cfg, sizeof cfg, "%s/splits.json", tmpdir);
			FILE *f = fopen(cfg, "w");
			T_ASSERT(f != NULL);
			for (size_t p = 0; f && p < np; p++)
				for (int b = 0; b < 5; b++)
					for (int inv = 0; inv < 2; inv++) {
						fputs(p + b + inv ? ",\n{\"pattern\": " : "[{\"pattern\": ", f);
						json_string(f, (const uint8_t *)pats[p].pattern,
							    strlen(pats[p].pattern));
						fprintf(f, ", \"behavior\": \"%s\", \"invert\": %s, \"string\": %s}",
							names[b], inv ? "true" : "false",
							pats[p].literal ? "true" : "false");
					}
			if (f) {
				fputs("]\n", f);
				fclose(f);
			}
			ncorpus = 3000;	/* 170 Splits: the first 3000 strings keep it to seconds */
			const char *small = write_corpus("corpus-3000.jsonl", small_path, sizeof small_path);
			char *ref = small ? reference("splits", cfg, small, "splits") : NULL, *p = ref;
			int bad = 0;
			T_ASSERT(ref != NULL);
			for (size_t i = 0; ref && i < np; i++) {
				struct regex *re = compile_or_die(pats[i].pattern, pats[i].literal);
				for (int b = 0; b < 5; b++)
					for (int inv = 0; inv < 2; inv++) {
						char tag[64];
						snprintf(tag, sizeof tag, "split%zu-%s-%d", i, names[b], inv);
						bad += compare_block(&p, tag, NULL, re, b, inv) != 0;
					}
				regex_free(re);
			}
			free(ref);
			ncorpus = keep;
			printf("    %zu patterns x 5 behaviours x invert, %d of them differ\n", np, bad);
			T_ASSERT(bad == 0);
		}
		T_CASE("classes_match_reference") {
			char *all = reference("classes", NULL, "/dev/null", "classes");
			T_ASSERT(all != NULL);
			ref_set = malloc(0x110000);
			static const struct {
				const char *probe;
				uint8_t mask, want;
			} tab[] = {
				{"L", UCD_CLASS_MASK, UCD_LETTER},
				{"N", UCD_CLASS_MASK, UCD_NUMBER},
				{"S", UCD_CLASS_MASK, UCD_SPACE},
				{"BLOOM_EXCL", UCD_BLOOM_EXCL, UCD_BLOOM_EXCL},
			};
			for (size_t i = 0; all && i < sizeof tab / sizeof tab[0]; i++) {
				const char *line = find_probe(all, tab[i].probe);
				T_ASSERT(line && parse_ranges(line, ref_set) == 0);
				int bad = 0;
				for (uint32_t c = 0; line && c < 0x110000; c++) {
					if (c >= 0xD800 && c <= 0xDFFF)
						continue;
					int mine = (ucd_bits(c) & tab[i].mask) == tab[i].want;
					if (mine != ref_set[c] && bad++ < 5)
						printf("    %s: U+%04X: table says %d, reference %d\n",
						       tab[i].probe, c, mine, ref_set[c]);
				}
				T_ASSERT(bad == 0);
			}
			/* and regex.c's properties, over every code point */
			build_all_text();
			static const char *const probes[][2] = {
				{"L", "\\p{L}+"}, {"N", "\\p{N}+"}, {"S", "\\s+"},
				{"BLOOM_EXCL", "[(\\s|[.,!?…。，、।۔،])]+"}, {"w", "\\w+"}, {"d", "\\d+"},
				{"h", "\\h+"}, {"P", "\\p{P}+"}, {"M", "\\p{M}+"}, {"S_sym", "\\p{S}+"},
				{"Lu", "\\p{Lu}+"}, {"Nd", "\\p{Nd}+"}, {"Mn", "\\p{Mn}+"},
				{"alpha", "[[:alpha:]]+"}, {"punct", "[[:punct:]]+"}, {"Word", "\\p{Word}+"},
			};
			for (size_t i = 0; all && i < sizeof probes / sizeof probes[0]; i++)
				T_ASSERT(regex_class_differs(probes[i][0], probes[i][1], all) == 0);
			free(all);
		}
	}

	regex_free(gpt2_re);
	regex_free(bloom_re);
	onig_free(gpt2_raw);
	onig_free(bloom_raw);
	onig_region_free(raw_md, 1);
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		printf("    could not remove %s\n", tmpdir);
	T_DONE();
}
