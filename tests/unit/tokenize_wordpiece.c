/* tokenize_wordpiece.c - BERT's normalizer, pre-tokenizer and WordPiece model: hand cases that
 * pin each rule, then the reference itself (Hugging Face tokenizers' npm package, through
 * tests/ref/wordpiece-ref.js) on every code point, and on random strings of awkward code points
 * under all 16 normalizer configurations.  Without node and the package (tests/node/node_modules,
 * or $LMTK_NODE_MODULES) the reference cases print "skip". */
#include "t.h"
#include "tokenize/wordpiece.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static struct wp_state *st;
static uint8_t *nbuf;
static size_t ncap;

static const char *norm(int clean, int chinese, int strip, int lower, const char *s)
{
	static char out[4096];
	struct wp_norm n = {clean, chinese, strip, lower};
	size_t len;
	if (wp_normalize(&n, st, (const uint8_t *)s, strlen(s), &nbuf, &len, &ncap) < 0)
		return "(error)";
	snprintf(out, sizeof out, "%.*s", (int)len, (const char *)nbuf);
	return out;
}

/* ids of text under a model, as "1 2 3" */
static const char *ids(const struct wp *m, int pretok, const char *s)
{
	static char out[4096];
	static uint32_t *v;
	static size_t cap;
	size_t n = 0, o = 0;
	if (wp_encode(m, st, pretok, (const uint8_t *)s, strlen(s), &v, &n, &cap) < 0)
		return "(error)";
	out[0] = 0;
	for (size_t i = 0; i < n && o < sizeof out - 16; i++)
		o += (size_t)snprintf(out + o, sizeof out - o, "%s%u", i ? " " : "", v[i]);
	return out;
}

/* ---- the reference ----------------------------------------------------------------------- */

static char node_modules[1024], tmpdir[1024];

static int have_reference(void)
{
	const char *nm = getenv("LMTK_NODE_MODULES");
	char pkg[1100], cmd[2400];
	snprintf(node_modules, sizeof node_modules, "%.1000s", nm && *nm ? nm : "tests/node/node_modules");
	snprintf(pkg, sizeof pkg, "%s/tokenizers/package.json", node_modules);
	if (access(pkg, R_OK) != 0)
		return 0;
	snprintf(cmd, sizeof cmd, "NODE_PATH='%s' node tests/ref/wordpiece-ref.js check 2>/dev/null", node_modules);
	return system(cmd) == 0;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	struct stat sb;
	if (!f)
		return NULL;
	fstat(fileno(f), &sb);
	char *buf = malloc((size_t)sb.st_size + 1);
	size_t got = fread(buf, 1, (size_t)sb.st_size, f);
	buf[got] = 0;
	fclose(f);
	return buf;
}

static char *reference(const char *mode, const char *in_path, const char *tag)
{
	char out[1200], cmd[4096];
	snprintf(out, sizeof out, "%s/ref-%s.out", tmpdir, tag);
	snprintf(cmd, sizeof cmd, "NODE_PATH='%s' node tests/ref/wordpiece-ref.js %s < '%s' > '%s'", node_modules,
		 mode, in_path ? in_path : "/dev/null", out);
	if (system(cmd) != 0) {
		printf("    failed: %s\n", cmd);
		return NULL;
	}
	return slurp(out);
}

static size_t put_utf8(char *p, uint32_t cp)
{
	if (cp < 0x80) {
		p[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		p[0] = (char)(0xC0 | cp >> 6), p[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		p[0] = (char)(0xE0 | cp >> 12), p[1] = (char)(0x80 | (cp >> 6 & 0x3F)), p[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	p[0] = (char)(0xF0 | cp >> 18), p[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	p[2] = (char)(0x80 | (cp >> 6 & 0x3F)), p[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* UTF-8 -> "61.301" as the reference writes it */
static void hexcps(const uint8_t *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = 0;
	for (size_t i = 0; i < n && o + 12 < cap;) {
		uint32_t cp;
		uint8_t c = s[i];
		if (c < 0x80)
			cp = c, i += 1;
		else if (c < 0xE0)
			cp = (uint32_t)(c & 0x1F) << 6 | (s[i + 1] & 0x3F), i += 2;
		else if (c < 0xF0)
			cp = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F), i += 3;
		else
			cp = (uint32_t)(c & 7) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 | (uint32_t)(s[i + 2] & 0x3F) << 6 |
			     (s[i + 3] & 0x3F), i += 4;
		o += (size_t)snprintf(out + o, cap - o, "%s%x", o ? "." : "", cp);
	}
}

/* our line for one code point, in the reference's "classes" format */
static void classes_line(uint32_t cp, char *line, size_t cap)
{
	char c[8], ab[8], h[200];
	size_t cl = put_utf8(c, cp), o;
	static const struct wp_norm cfg[4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};
	o = (size_t)snprintf(line, cap, "%x", cp);
	for (int k = 0; k < 4; k++) {
		size_t len;
		wp_normalize(&cfg[k], st, (const uint8_t *)c, cl, &nbuf, &len, &ncap);
		hexcps(nbuf, len, h, sizeof h);
		o += (size_t)snprintf(line + o, cap - o, "\t%s", h);
	}
	ab[0] = 'a';
	memcpy(ab + 1, c, cl);
	ab[cl + 1] = 'b';
	size_t pos = 0, at, wl, nc;
	o += (size_t)snprintf(line + o, cap - o, "\t");
	for (int first = 1; wp_next_word((const uint8_t *)ab, cl + 2, &pos, &at, &wl, &nc); first = 0) {
		hexcps((const uint8_t *)ab + at, wl, h, sizeof h);
		o += (size_t)snprintf(line + o, cap - o, "%s%s", first ? "" : ",", h);
	}
}

static void json_string(FILE *f, const uint8_t *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			fprintf(f, "\\%c", s[i]);
		else if (s[i] < 0x20 || s[i] == 0x7f)
			fprintf(f, "\\u%04x", s[i]);
		else
			fputc(s[i], f);
	}
	fputc('"', f);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* code points that exercise every step: marks of many classes (old, new in 9.0, newer), Mc with
 * a class, Hangul, CJK (in and out of HF's ranges), controls, format characters, spaces,
 * cased letters with multi-character mappings, decomposables, ASCII */
static uint32_t awkward(void)
{
	static const uint32_t pool[] = {
		'a', 'Z', ' ', '\t', '\n', '\r', 0x0B, 0x0C, 0, 0x7F, 0x85, 0xA0, '.', '#', 'I',
		0x0300, 0x0301, 0x0316, 0x0334, 0x0345, 0x0327, 0x05B0, 0x0E38, 0x093C, 0x094D, 0x0F71,
		0x08D4, 0x08E3, 0x1DF6, 0x10EAB, 0x1E130, 0x1D165, 0x1D16D, 0x1D166, 0x16FF0, 0x11940,
		0xE9, 0xC5, 0x212B, 0x1E69, 0x1F82, 0x0130, 0x03A3, 0x1E9E, 0x01C5, 0xFB01, 0x0344, 0x0F73,
		0xAC00, 0xD55C, 0xD7A3, 0x1100, 0x1161, 0x11A8, 0x4E2D, 0x3400, 0x2B81F, 0x2B820, 0x2B920,
		0xF900, 0x2F800, 0x3000, 0x200B, 0x200D, 0xFEFF, 0xFFFD, 0xE000, 0x2028, 0x2E43, 0x166D,
		0x11938, 0x105C9, 0x0890, 0x110CD, 0xF0000, 0x1F600, 0x0627, 0x064B, 0x0651, 0x0650,
	};
	if (rnd(4) == 0)
		return 0x20 + rnd(0x60);
	if (rnd(8) == 0) {
		uint32_t cp;
		do
			cp = rnd(0x30000);
		while (cp >= 0xD800 && cp <= 0xDFFF);
		return cp;
	}
	return pool[rnd(sizeof pool / sizeof pool[0])];
}

int main(void)
{
	st = wp_state_new();
	snprintf(tmpdir, sizeof tmpdir, "%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	{
		char tmpl[1100];
		snprintf(tmpl, sizeof tmpl, "%s/lmtk-wp.XXXXXX", tmpdir);
		if (mkdtemp(tmpl))
			snprintf(tmpdir, sizeof tmpdir, "%.1000s", tmpl);
	}

	/* ---- the normalizer's rules ---- */
	T_CASE("clean_text_drops_controls_and_spaces_whitespace") {
		T_STREQ(norm(1, 0, 0, 0, "a\x01" "b\tc\xe2\x80\x8b" "d\xef\xbf\xbd" "e\xc2\x85" "f\xe3\x80\x80g"),
			"ab cdef g");  /* U+200B Cf, U+FFFD, U+0085 Cc all dropped; U+3000 -> ' ' */
		T_STREQ(norm(0, 0, 0, 0, "a\x01" "b"), "a\x01" "b");
	}
	T_CASE("chinese_chars_are_padded_only_in_hf_ranges") {
		T_STREQ(norm(0, 1, 0, 0, "x\xe4\xb8\xad\xe6\x96\x87y"), "x \xe4\xb8\xad  \xe6\x96\x87 y");
		/* U+2B820 is in Google BERT's range but not HF's (HF starts again at U+2B920) */
		T_STREQ(norm(0, 1, 0, 0, "\xf0\xab\xa0\xa0"), "\xf0\xab\xa0\xa0");
		T_STREQ(norm(0, 1, 0, 0, "\xf0\xab\xa4\xa0"), " \xf0\xab\xa4\xa0 ");
	}
	T_CASE("strip_accents_is_nfd_without_nonspacing_marks") {
		T_STREQ(norm(0, 0, 1, 0, "Cr\xc3\xa8me \xc3\x85ngstr\xc3\xb6m"), "Creme Angstrom");
		/* Hangul syllables decompose to their jamo: 한 -> U+1112 U+1161 U+11AB */
		T_STREQ(norm(0, 0, 1, 0, "\xed\x95\x9c"), "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab");
		/* U+11938 decomposes since Unicode 13; the reference's tables are 9.0: it stays */
		T_STREQ(norm(0, 0, 1, 0, "\xf0\x91\xa4\xb8"), "\xf0\x91\xa4\xb8");
	}
	T_CASE("strip_accents_puts_marks_in_canonical_order") {
		/* U+1D16D (class 226) before U+1D165 (216), both spacing marks and kept: swapped */
		T_STREQ(norm(0, 0, 1, 0, "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5"), "x\xf0\x9d\x85\xa5\xf0\x9d\x85\xad");
		/* a control that clean_text drops does not separate them: NFD comes after */
		T_STREQ(norm(1, 0, 1, 0, "x\xf0\x9d\x85\xad\x0b\xf0\x9d\x85\xa5"), "x\xf0\x9d\x85\xa5\xf0\x9d\x85\xad");
		/* U+08D4 (230, new in 9.0: not Mn to the reference, so kept) moves after U+1D165 */
		T_STREQ(norm(0, 0, 1, 0, "x\xe0\xa3\x94\xf0\x9d\x85\xa5"), "x\xf0\x9d\x85\xa5\xe0\xa3\x94");
		/* U+10EAB (230 since 13.0) is class 0 to the reference: no swap */
		T_STREQ(norm(0, 0, 1, 0, "x\xf0\x90\xba\xab\xf0\x9d\x85\xa5"), "x\xf0\x90\xba\xab\xf0\x9d\x85\xa5");
		/* a long run of stacked marks (counting sort) orders as a short one */
		char in[400] = "x", want[400] = "x";
		for (int i = 0; i < 40; i++)
			strcat(in, i % 2 ? "\xf0\x9d\x85\xa5" : "\xf0\x9d\x85\xad");
		for (int i = 0; i < 40; i++)
			strcat(want, i < 20 ? "\xf0\x9d\x85\xa5" : "\xf0\x9d\x85\xad");
		T_STREQ(norm(0, 0, 1, 0, in), want);
	}
	T_CASE("lowercase_per_character") {
		T_STREQ(norm(0, 0, 0, 1, "\xce\xa3\xce\x91\xce\xa3"), "\xcf\x83\xce\xb1\xcf\x83");  /* no final sigma */
		T_STREQ(norm(0, 0, 0, 1, "\xc4\xb0"), "i\xcc\x87");                                  /* İ -> i + U+0307 */
		T_STREQ(norm(0, 0, 1, 1, "\xc4\xb0"), "i");  /* stripped first: I, then lowercased */
		T_STREQ(norm(1, 1, 1, 1, "H\xc3\xa9llo W\xc3\x96RLD"), "hello world");
	}

	/* ---- the model ---- */
	struct wp *m = wp_new();
	{
		static const char *v[] = {"[UNK]", "un", "##aff", "##able", "a", "##b", "##c", "un##", "##", ".", "x",
					  "\xc3\xa9", "##\xc3\xa9", "affable"};
		char err[256];
		for (uint32_t i = 0; i < sizeof v / sizeof v[0]; i++)
			T_ASSERT(wp_add_token(m, v[i], strlen(v[i]), i, err, sizeof err) == 0);
		T_ASSERT(wp_add_token(m, "un", 2, 99, err, sizeof err) < 0);  /* twice */
		T_ASSERT(wp_finish(m, "[UNK]", "##", 9, err, sizeof err) == 0);
		struct wp *e = wp_new();
		T_ASSERT(wp_finish(e, "[UNK]", "##", 100, err, sizeof err) < 0);  /* empty */
		T_ASSERT(strstr(err, "empty") != NULL);
		T_ASSERT(wp_add_token(e, "a", 1, 0, err, sizeof err) == 0);
		T_ASSERT(wp_finish(e, "[UNK]", "##", 100, err, sizeof err) < 0);  /* no unk */
		T_ASSERT(strstr(err, "[UNK]") != NULL);
		wp_free(e);
	}
	T_CASE("greedy_longest_match_first") {
		T_STREQ(ids(m, 1, "unaffable"), "1 2 3");
		T_STREQ(ids(m, 1, "affable"), "13");
		T_STREQ(ids(m, 1, "abc"), "4 5 6");
		T_STREQ(ids(m, 1, "a\xc3\xa9\xc3\xa9"), "4 12 12");  /* multi-byte pieces */
	}
	T_CASE("unmatched_word_is_one_unk") {
		T_STREQ(ids(m, 1, "abz x"), "0 10");
		T_STREQ(ids(m, 1, "za"), "0");
	}
	T_CASE("word_over_max_chars_is_unk") {
		T_STREQ(ids(m, 1, "abcbcbcbc"), "4 5 6 5 6 5 6 5 6");  /* 9 characters: allowed */
		T_STREQ(ids(m, 1, "abcbcbcbcb"), "0");                  /* 10 > 9 */
		/* characters, not bytes: 9 two-byte characters are allowed */
		T_STREQ(ids(m, 1, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"),
			"11 12 12 12 12 12 12 12 12");
	}
	T_CASE("pretokenizer_splits_whitespace_and_punctuation") {
		T_STREQ(ids(m, 1, " a.x\t..a "), "4 9 10 9 9 4");
		T_STREQ(ids(m, 1, "a##b"), "4 0 0 0");  /* '#' is punctuation: "b" starts a word, and only "##b" is known */
	}
	T_CASE("without_pretokenizer_the_text_is_one_word") {
		T_STREQ(ids(m, 0, "un##"), "7");  /* found whole at the start, prefix and all */
		T_STREQ(ids(m, 0, "a b"), "0");
	}
	T_CASE("cache_gives_the_same_ids") {
		T_STREQ(ids(m, 1, "unaffable unaffable abz abz"), "1 2 3 1 2 3 0 0");
	}

	/* ---- against the reference ---- */
	if (!have_reference()) {
		printf("skip code_points_match_reference: no node or no %s/tokenizers\n", node_modules);
		printf("skip normalizer_matches_reference: no node or no %s/tokenizers\n", node_modules);
	} else {
		T_CASE("code_points_match_reference") {
			char *ref = reference("classes", NULL, "classes"), *p = ref, line[1024];
			size_t n = 0, bad = 0;
			T_ASSERT(ref != NULL);
			for (uint32_t cp = 0; ref && cp < 0x110000; cp++) {
				if (cp >= 0xD800 && cp <= 0xDFFF)
					continue;
				char *nl = strchr(p, '\n');
				if (!nl) {
					T_ASSERT(!"reference output too short");
					break;
				}
				*nl = 0;
				classes_line(cp, line, sizeof line);
				if (strcmp(line, p) != 0 && bad++ < 10)
					printf("    ours %s\n    ref  %s\n", line, p);
				n++;
				p = nl + 1;
			}
			T_ASSERT(bad == 0);
			printf("    %zu code points, %zu differ\n", n, bad);
			free(ref);
		}
		T_CASE("normalizer_matches_reference") {
			char path[1200];
			enum { NSTR = 3000 };
			static char strs[NSTR][128];
			static size_t lens[NSTR];
			snprintf(path, sizeof path, "%s/strings.jsonl", tmpdir);
			FILE *f = fopen(path, "w");
			for (int i = 0; i < NSTR; i++) {
				size_t k = 1 + rnd(12), o = 0;
				for (size_t j = 0; j < k; j++) {
					uint32_t cp = awkward();
					o += put_utf8(strs[i] + o, cp);
				}
				lens[i] = o;
				json_string(f, (const uint8_t *)strs[i], o);
				fputc('\n', f);
			}
			fclose(f);
			char *ref = reference("normalize", path, "normalize"), *p = ref;
			size_t bad = 0;
			T_ASSERT(ref != NULL);
			for (int k = 0; ref && k < 16; k++) {
				struct wp_norm cfg = {!!(k & 8), !!(k & 4), !!(k & 2), !!(k & 1)};
				for (int i = 0; i < NSTR; i++) {
					char *nl = strchr(p, '\n');
					size_t len;
					if (!nl) {
						T_ASSERT(!"reference output too short");
						k = 16;
						break;
					}
					*nl = 0;
					wp_normalize(&cfg, st, (const uint8_t *)strs[i], lens[i], &nbuf, &len, &ncap);
					/* the reference escapes with JSON.stringify: compare code points, not text */
					char a[2048], b[2048];
					hexcps(nbuf, len, a, sizeof a);
					b[0] = 0;
					{
						/* decode the reference's JSON string (\uXXXX for controls and surrogate pairs) */
						char raw[1024];
						size_t rl = 0;
						for (char *q = p + 1; *q && *q != '"' && rl < sizeof raw - 8; q++) {
							if (*q != '\\') {
								raw[rl++] = *q;
								continue;
							}
							q++;
							if (*q == 'u') {
								uint32_t cp = (uint32_t)strtoul((char[]){q[1], q[2], q[3], q[4], 0}, NULL, 16);
								q += 4;
								if (cp >= 0xD800 && cp <= 0xDBFF && q[1] == '\\' && q[2] == 'u') {
									uint32_t lo = (uint32_t)strtoul((char[]){q[3], q[4], q[5], q[6], 0}, NULL, 16);
									cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
									q += 6;
								}
								rl += put_utf8(raw + rl, cp);
							} else {
								raw[rl++] = *q == 'n' ? '\n' : *q == 't' ? '\t' : *q == 'r' ? '\r' :
									    *q == 'b' ? '\b' : *q == 'f' ? '\f' : *q;
							}
						}
						hexcps((const uint8_t *)raw, rl, b, sizeof b);
					}
					if (strcmp(a, b) != 0 && bad++ < 10)
						printf("    config %d, string %d: ours %s, ref %s (%s)\n", k, i, a, b, p);
					p = nl + 1;
				}
			}
			T_ASSERT(bad == 0);
			printf("    %d strings x 16 configurations, %zu differ\n", NSTR, bad);
			free(ref);
		}
	}
	wp_free(m);
	wp_state_free(st);
	free(nbuf);
	T_DONE();
}
