/* tokenize - JSON lines (or plain lines) -> token ids identical to HF tokenizers: byte-level BPE
 * (GPT-2, BLOOM) and BERT's WordPiece.
 *
 * The first half of the data pipeline: `tokenize ... < corpus.jsonl | mkindex --output-prefix P`.
 * Flags are Megatron's preprocessor's (--vocab-file, --merge-file, --tokenizer-type,
 * --tokenizer-name-or-path, --json-keys, --append-eod, --workers) so scripts port unchanged.
 *
 * Parallelism keeps the output identical whatever --workers is: the reader cuts the input into
 * chunks of whole lines, numbered; workers encode chunks in any order into per-chunk buffers;
 * the writer emits the buffers strictly in chunk order.  A bad line stops the run at that line
 * (everything before it is written, the end-of-stream marker is not, so mkindex refuses the
 * stream), unless --skip-bad-lines counts it and goes on.  Exit: 0, 2 bad input, 3 I/O. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "units.h"
#include "opt.h"
#include "tokstream.h"
#include "tokenize/jsonl.h"
#include "tokenize/tok.h"
#include "tokenize/unicode.h"

#define CHUNK (1 << 20)

struct cfg {
	const char *vocab, *merges, *hf, *type, *eod_token;
	const char *keys[TOKSTREAM_MAX_KEYS];
	int nkeys;
	const char **inputs;
	int ninputs;
	int plain, append_eod, workers, text, skip_bad, decode, quiet;
};

enum { O_VOCAB = 1, O_MERGES, O_HF, O_TYPE, O_EOD, O_KEYS, O_INPUT, O_PLAIN, O_APPEND, O_WORKERS,
       O_FORMAT, O_SKIP, O_DECODE, O_QUIET };

static const struct opt opts[] = {
	{"vocab-file", O_VOCAB, "FILE", "GPT-2 vocab.json (GPT2BPETokenizer) or BERT vocab.txt (BertWordPiece*)"},
	{"merge-file", O_MERGES, "FILE", "GPT-2 style merges.txt, with --vocab-file"},
	{"tokenizer-name-or-path", O_HF, "PATH", "a Hugging Face tokenizer.json (BPE or WordPiece), or a directory with one"},
	{"tokenizer-type", O_TYPE, "TYPE", "GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase or "
	 "PretrainedFromHF (default: from the files given)"},
	{"eod-token", O_EOD, "TOKEN", "the end-of-document token (default <|endoftext|>, [EOS] for BERT, or the eos token)"},
	{"json-keys", O_KEYS, "KEY...", "JSON keys to tokenize (default text); each becomes its own dataset"},
	{"input", O_INPUT, "FILE", "read FILE (repeatable; also as operands; default stdin)"},
	{"plain", O_PLAIN, NULL, "input is plain text, one document per line"},
	{"append-eod", O_APPEND, NULL, "end each document that produced tokens with the EOD id"},
	{"workers", O_WORKERS, "N", "encode on N threads (output identical for any N; default 1)"},
	{"format", O_FORMAT, "FMT", "stream (binary, for mkindex; default) or text (ids, a document per line)"},
	{"skip-bad-lines", O_SKIP, NULL, "count and report bad input lines instead of stopping at the first"},
	{"decode", O_DECODE, NULL, "turn ids (a token stream, or text ids a document per line) back into text"},
	{"quiet", O_QUIET, NULL, "no progress and no summary on stderr"},
	{0},
};

static int bert_type(const char *type)
{
	return type && (strcmp(type, "BertWordPieceLowerCase") == 0 || strcmp(type, "BertWordPieceCase") == 0);
}

static int on_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct cfg *c = ctx;
	switch (key) {
	case O_VOCAB: c->vocab = arg; return 0;
	case O_MERGES: c->merges = arg; return 0;
	case O_HF: c->hf = arg; return 0;
	case O_TYPE:
		if (strcmp(arg, "GPT2BPETokenizer") && strcmp(arg, "PretrainedFromHF") && !bert_type(arg))
			return errf(err, errlen, "'%s': GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase "
				    "or PretrainedFromHF", arg);
		c->type = arg;
		return 0;
	case O_EOD: c->eod_token = arg; return 0;
	case O_KEYS:
		if (c->nkeys == TOKSTREAM_MAX_KEYS)
			return errf(err, errlen, "at most %d keys", TOKSTREAM_MAX_KEYS);
		c->keys[c->nkeys++] = arg;
		return 0;
	case O_INPUT:
		c->inputs = realloc(c->inputs, sizeof *c->inputs * (size_t)(c->ninputs + 1));
		c->inputs[c->ninputs++] = arg;
		return 0;
	case O_PLAIN: c->plain = 1; return 0;
	case O_APPEND: c->append_eod = 1; return 0;
	case O_WORKERS:
		c->workers = atoi(arg);
		if (c->workers < 1 || c->workers > 256)
			return errf(err, errlen, "'%s' is not a worker count (1-256)", arg);
		return 0;
	case O_FORMAT:
		if (strcmp(arg, "text") && strcmp(arg, "stream"))
			return errf(err, errlen, "'%s': stream or text", arg);
		c->text = strcmp(arg, "text") == 0;
		return 0;
	case O_SKIP: c->skip_bad = 1; return 0;
	case O_DECODE: c->decode = 1; return 0;
	case O_QUIET: c->quiet = 1; return 0;
	}
	return errf(err, errlen, "unhandled option");
}

/* ---------------------------------------------------------------------------------------------
 * the pipeline: reader (main thread) -> workers -> writer, chunks in order */

struct chunk {
	char *data;
	size_t len, cap;
	unsigned long long line0;    /* number of the chunk's first line in its file */
	const char *fname;
	char *out;
	size_t outlen, outcap;
	unsigned long long docs, tokens, bad;
	char err[1024];              /* the line that stopped this chunk, if any */
	int fatal;                   /* err is not about the input (memory, a regex limit): never skipped */
	int state;                   /* FREE, FILLED, BUSY, DONE */
	size_t seq;
};
enum { FREE, FILLED, BUSY, DONE };

struct pipeline {
	const struct cfg *cfg;
	const struct tok *tok;
	struct chunk *slots;
	size_t nslots, next_work, next_write, nread;
	int eof, failed;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned long long docs, tokens, bytes, bad;
	char err[1024];
	FILE *out;
	double t0, last_progress;
};

static int out_reserve(struct chunk *c, size_t more)
{
	if (c->outlen + more <= c->outcap)
		return 0;
	size_t cap = c->outcap ? c->outcap : CHUNK;
	while (cap < c->outlen + more)
		cap *= 2;
	char *p = realloc(c->out, cap);
	if (!p)
		return -1;
	c->out = p;
	c->outcap = cap;
	return 0;
}

static void put_u32(char *p, uint32_t v)
{
	p[0] = (char)(v & 0xff), p[1] = (char)(v >> 8 & 0xff), p[2] = (char)(v >> 16 & 0xff), p[3] = (char)(v >> 24);
}

/* One document's ids into the chunk's output: a stream record, or a line of text. */
static int emit(const struct cfg *cfg, struct chunk *c, uint32_t key, const uint32_t *ids, size_t n)
{
	if (cfg->text) {
		if (out_reserve(c, n * 11 + 1) < 0)
			return -1;
		char *p = c->out + c->outlen;
		for (size_t i = 0; i < n; i++) {
			char tmp[12];
			int l = 0;
			uint32_t v = ids[i];
			do
				tmp[l++] = (char)('0' + v % 10);
			while ((v /= 10));
			if (i)
				*p++ = ' ';
			while (l)
				*p++ = tmp[--l];
		}
		*p++ = '\n';
		c->outlen = (size_t)(p - c->out);
		return 0;
	}
	if (n == 0)  /* Megatron skips documents without tokens */
		return 0;
	if (out_reserve(c, 8 + n * 4) < 0)
		return -1;
	put_u32(c->out + c->outlen, key);
	put_u32(c->out + c->outlen + 4, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		put_u32(c->out + c->outlen + 8 + 4 * i, ids[i]);
	c->outlen += 8 + n * 4;
	return 0;
}

static int valid_utf8(const unsigned char *s, size_t n, size_t *bad)
{
	for (size_t i = 0, l; i < n; i += l)
		if (!(l = utf8_valid_len(s + i, n - i))) {
			*bad = i;
			return 0;
		}
	return 1;
}

struct scratch {
	uint32_t *ids;
	size_t cap;
	char *text;             /* decoded JSON strings */
	size_t tcap;
};

static void process(struct pipeline *pl, struct tok_state *st, struct chunk *c, struct scratch *sc)
{
	const struct cfg *cfg = pl->cfg;
	uint32_t eod = tok_eod(pl->tok);
	unsigned long long lineno = c->line0;
	char err[512];
	char *p = c->data, *end = c->data + c->len;

	c->outlen = 0;
	c->docs = c->tokens = c->bad = 0;
	c->err[0] = '\0';
	c->fatal = 0;
	for (; p < end; lineno++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *line = p;
		p += len + 1;
		if (len && line[len - 1] == '\r' && !cfg->plain)
			len--;
		const char *texts[TOKSTREAM_MAX_KEYS];
		size_t tlens[TOKSTREAM_MAX_KEYS];
		struct jsonl_field f[TOKSTREAM_MAX_KEYS];
		const char *why = NULL;
		char whybuf[600];

		if (cfg->plain) {
			size_t at;
			if (!valid_utf8((unsigned char *)line, len, &at)) {
				snprintf(whybuf, sizeof whybuf, "invalid UTF-8 at byte %zu", at + 1);
				why = whybuf;
			}
			texts[0] = line, tlens[0] = len;
		} else {
			if (len == strspn(line, " \t"))
				continue;  /* blank lines between JSON lines are not documents */
			if (jsonl_extract(line, len, cfg->keys, cfg->nkeys, f, &sc->text, &sc->tcap, err, sizeof err) < 0) {
				snprintf(whybuf, sizeof whybuf, "malformed JSON at %s", err);
				why = whybuf;
			}
			for (int k = 0; k < cfg->nkeys && !why; k++) {
				if (f[k].found == 0) {
					snprintf(whybuf, sizeof whybuf, "no key '%s'", cfg->keys[k]);
					why = whybuf;
				} else if (f[k].found < 0) {
					snprintf(whybuf, sizeof whybuf, "key '%s' is not a string", cfg->keys[k]);
					why = whybuf;
				}
			}
			for (int k = 0; k < cfg->nkeys && !why; k++)
				texts[k] = sc->text + f[k].off, tlens[k] = f[k].len;
		}
		if (why) {
			if (cfg->skip_bad) {
				if (c->bad++ == 0)
					snprintf(c->err, sizeof c->err, "%s:%llu: %s", c->fname, lineno, why);
				continue;
			}
			snprintf(c->err, sizeof c->err, "%s:%llu: %s", c->fname, lineno, why);
			return;
		}
		for (int k = 0; k < (cfg->plain ? 1 : cfg->nkeys); k++) {
			size_t n = 0;
			if (tok_encode(pl->tok, st, texts[k], tlens[k], &sc->ids, &n, &sc->cap, err, sizeof err) < 0) {
				snprintf(c->err, sizeof c->err, "%s:%llu: %s", c->fname, lineno, err);
				c->fatal = 1;
				return;
			}
			if (n && cfg->append_eod) {
				if (n == sc->cap) {
					uint32_t *q = realloc(sc->ids, (sc->cap *= 2) * sizeof *q);
					if (!q)
						die(EXIT_FAILED, "out of memory");
					sc->ids = q;
				}
				sc->ids[n++] = eod;
			}
			if (emit(cfg, c, (uint32_t)k, sc->ids, n) < 0)
				die(EXIT_FAILED, "out of memory");
			c->docs++;
			c->tokens += n;
		}
	}
}

static void *worker(void *arg)
{
	struct pipeline *pl = arg;
	struct tok_state *st = tok_state_new(pl->tok);
	struct scratch sc = {malloc(4096 * sizeof(uint32_t)), 4096, NULL, 0};

	if (!st || !sc.ids)
		die(EXIT_FAILED, "out of memory");
	pthread_mutex_lock(&pl->mu);
	for (;;) {
		while (!pl->failed && pl->next_work < pl->nread &&
		       pl->slots[pl->next_work % pl->nslots].state != FILLED)
			pthread_cond_wait(&pl->cv, &pl->mu);
		while (!pl->failed && pl->next_work == pl->nread && !pl->eof)
			pthread_cond_wait(&pl->cv, &pl->mu);
		if (pl->failed || (pl->next_work == pl->nread && pl->eof))
			break;
		if (pl->next_work == pl->nread || pl->slots[pl->next_work % pl->nslots].state != FILLED)
			continue;
		struct chunk *c = &pl->slots[pl->next_work % pl->nslots];
		pl->next_work++;
		c->state = BUSY;
		pthread_mutex_unlock(&pl->mu);
		process(pl, st, c, &sc);
		pthread_mutex_lock(&pl->mu);
		c->state = DONE;
		pthread_cond_broadcast(&pl->cv);
	}
	pthread_mutex_unlock(&pl->mu);
	tok_state_free(st);
	free(sc.ids);
	free(sc.text);
	return NULL;
}

static void progress(struct pipeline *pl, int final)
{
	double t = units_now() - pl->t0, mb = (double)pl->bytes / 1e6;
	if (pl->cfg->quiet)
		return;
	if (final)
		fprintf(stderr, "%s%s: %llu documents, %llu tokens, %.1f MB in %.2f s (%.1f MB/s)%s%llu bad lines\n",
			isatty(2) ? "\r\033[K" : "", prog_name, pl->docs, pl->tokens, mb, t, t > 0 ? mb / t : 0,
			", ", pl->bad);
	else
		fprintf(stderr, "\r\033[K%s: %llu documents, %llu tokens, %.1f MB, %.1f MB/s", prog_name, pl->docs,
			pl->tokens, mb, t > 0 ? mb / t : 0);
}

/* writes finished chunks in order; runs in its own thread */
static void *writer(void *arg)
{
	struct pipeline *pl = arg;
	int tty = isatty(2) && !pl->cfg->quiet;
	pthread_mutex_lock(&pl->mu);
	for (;;) {
		while (!(pl->next_write < pl->nread && pl->slots[pl->next_write % pl->nslots].state == DONE) &&
		       !(pl->eof && pl->next_write == pl->nread) && !pl->failed)
			pthread_cond_wait(&pl->cv, &pl->mu);
		if (pl->failed || (pl->eof && pl->next_write == pl->nread))
			break;
		struct chunk *c = &pl->slots[pl->next_write % pl->nslots];
		pthread_mutex_unlock(&pl->mu);
		if (c->outlen && fwrite(c->out, 1, c->outlen, pl->out) != c->outlen)
			die(EXIT_FAILED, "writing the output: %s", strerror(errno));
		pthread_mutex_lock(&pl->mu);
		pl->docs += c->docs;
		pl->tokens += c->tokens;
		pl->bytes += c->len;
		pl->bad += c->bad;
		if (c->bad && !pl->err[0])
			snprintf(pl->err, sizeof pl->err, "%s", c->err);
		if ((!pl->cfg->skip_bad || c->fatal) && c->err[0]) {
			snprintf(pl->err, sizeof pl->err, "%s", c->err);
			pl->failed = 1;
		}
		c->state = FREE;
		pl->next_write++;
		if (tty && units_now() - pl->last_progress > 0.5) {
			pl->last_progress = units_now();
			progress(pl, 0);
		}
		pthread_cond_broadcast(&pl->cv);
	}
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

static int run_encode(const struct cfg *cfg, const struct tok *tok)
{
	struct pipeline pl = {0};
	pthread_t *wt, wr;
	struct tokstream_header h = {0};
	char *carry = NULL;
	size_t carry_len = 0;

	pl.cfg = cfg;
	pl.tok = tok;
	pl.nslots = (size_t)cfg->workers * 2 + 2;
	pl.slots = calloc(pl.nslots, sizeof *pl.slots);
	pl.out = stdout;
	pl.t0 = units_now();
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.cv, NULL);
	if (!pl.slots)
		die(EXIT_FAILED, "out of memory");
	if (!cfg->text) {
		h.version = 1;
		h.vocab_size = tok_vocab_size(tok);
		h.eod = tok_eod(tok);
		h.nkeys = cfg->plain ? 1 : (uint32_t)cfg->nkeys;
		for (uint32_t k = 0; k < h.nkeys; k++)
			h.keys[k] = (char *)(cfg->plain ? "text" : cfg->keys[k]);
		if (tokstream_write_header(stdout, &h) < 0)
			die(EXIT_FAILED, "writing the output: %s", strerror(errno));
	}
	wt = calloc((size_t)cfg->workers, sizeof *wt);
	for (int i = 0; i < cfg->workers; i++)
		pthread_create(&wt[i], NULL, worker, &pl);
	pthread_create(&wr, NULL, writer, &pl);

	int nfiles = cfg->ninputs ? cfg->ninputs : 1;
	for (int fi = 0; fi < nfiles && !pl.failed; fi++) {
		const char *name = cfg->ninputs ? cfg->inputs[fi] : "-";
		FILE *f = strcmp(name, "-") == 0 ? stdin : fopen(name, "rb");
		unsigned long long line = 1;
		if (!f) {
			pthread_mutex_lock(&pl.mu);
			snprintf(pl.err, sizeof pl.err, "%s: %s", name, strerror(errno));
			pl.failed = 3;
			pthread_cond_broadcast(&pl.cv);
			pthread_mutex_unlock(&pl.mu);
			break;
		}
		const char *shown = f == stdin ? "<stdin>" : name;
		for (int last = 0; !last;) {
			struct chunk *c;
			pthread_mutex_lock(&pl.mu);
			while (!pl.failed && pl.slots[pl.nread % pl.nslots].state != FREE)
				pthread_cond_wait(&pl.cv, &pl.mu);
			pthread_mutex_unlock(&pl.mu);
			if (pl.failed)
				break;
			c = &pl.slots[pl.nread % pl.nslots];
			if (c->cap < CHUNK + carry_len) {
				c->cap = CHUNK + carry_len;
				c->data = realloc(c->data, c->cap);
				if (!c->data)
					die(EXIT_FAILED, "out of memory");
			}
			if (carry_len)
				memcpy(c->data, carry, carry_len);
			size_t got = fread(c->data + carry_len, 1, c->cap - carry_len, f);
			if (ferror(f))
				die(EXIT_FAILED, "%s: read error: %s", shown, strerror(errno));
			size_t total = carry_len + got, cut = total;
			last = got == 0 || feof(f);
			if (!last) {
				char *nl = memrchr(c->data, '\n', total);
				cut = nl ? (size_t)(nl - c->data) + 1 : 0;
			}
			carry_len = total - cut;
			carry = realloc(carry, carry_len + 1);
			memcpy(carry, c->data + cut, carry_len);
			if (cut == 0 && !last)  /* a line longer than a chunk: it is all in carry; read on */
				continue;
			c->len = cut;
			c->line0 = line;
			c->fname = shown;
			for (size_t i = 0; i < cut; i++)
				line += c->data[i] == '\n';
			pthread_mutex_lock(&pl.mu);
			c->state = FILLED;
			pl.nread++;
			pthread_cond_broadcast(&pl.cv);
			pthread_mutex_unlock(&pl.mu);
			if (last)
				carry_len = 0;
		}
		if (f != stdin)
			fclose(f);
	}
	pthread_mutex_lock(&pl.mu);
	pl.eof = 1;
	pthread_cond_broadcast(&pl.cv);
	pthread_mutex_unlock(&pl.mu);
	for (int i = 0; i < cfg->workers; i++)
		pthread_join(wt[i], NULL);
	pthread_join(wr, NULL);
	free(carry);

	if (pl.failed) {
		fflush(stdout);
		progress(&pl, 1);
		die(pl.failed == 3 ? EXIT_FAILED : EXIT_USAGE, "%s", pl.err);
	}
	if (!cfg->text && tokstream_write_end(stdout) < 0)
		die(EXIT_FAILED, "writing the output: %s", strerror(errno));
	if (fflush(stdout) != 0)
		die(EXIT_FAILED, "writing the output: %s", strerror(errno));
	progress(&pl, 1);
	if (pl.bad)
		warn("skipped %llu bad lines; the first: %s", pl.bad, pl.err);
	return EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * --decode */

static void decode_ids(const struct tok *tok, const uint32_t *ids, size_t n, const char *where)
{
	char buf[1024];
	size_t len;
	for (size_t i = 0; i < n; i++) {
		if (tok_decode_id(tok, ids[i], i == 0, buf, sizeof buf, &len) < 0)
			die(EXIT_USAGE, "%s: id %u is not in the vocabulary (%s)", where, ids[i], tok_describe(tok));
		fwrite(buf, 1, len, stdout);
	}
	putchar('\n');
}

static void decode_file(const char *path, const struct tok *tok)
{
	int std = strcmp(path, "-") == 0;
	FILE *f = std ? stdin : fopen(path, "rb");
	const char *name = std ? "<stdin>" : path;
	char err[1024];
	int c;

	if (!f)
		die(EXIT_FAILED, "%s: %s", name, strerror(errno));
	c = getc(f);
	if (c != EOF)
		ungetc(c, f);
	if (c == 'L') {  /* a token stream starts with its magic */
		struct tokstream_reader r;
		uint32_t key, n;
		int rc;
		if (tokstream_open(&r, f, name, err, sizeof err) < 0)
			die(EXIT_USAGE, "%s", err);
		while ((rc = tokstream_next(&r, &key, &n, err, sizeof err)) == 1)
			decode_ids(tok, r.ids, n, name);
		if (rc < 0)
			die(EXIT_USAGE, "%s", err);
		tokstream_close(&r);
	} else {
		char *line = NULL, *p, *e;
		size_t cap = 0, n = 0, idcap = 1024;
		uint32_t *ids = malloc(idcap * sizeof *ids);
		unsigned long long lineno = 0;
		while (getline(&line, &cap, f) >= 0) {
			char where[600];
			lineno++;
			n = 0;
			snprintf(where, sizeof where, "%s:%llu", name, lineno);
			for (p = line;;) {
				while (*p == ' ' || *p == '\t')
					p++;
				if (*p == '\n' || *p == '\r' || !*p)
					break;
				errno = 0;
				unsigned long v = strtoul(p, &e, 10);
				if (e == p || errno || v > UINT32_MAX)
					die(EXIT_USAGE, "%s: '%.20s' is not a token id", where, p);
				if (n == idcap)
					ids = realloc(ids, (idcap *= 2) * sizeof *ids);
				ids[n++] = (uint32_t)v;
				p = e;
			}
			decode_ids(tok, ids, n, where);
		}
		free(line);
		free(ids);
	}
	if (!std)
		fclose(f);
}

static int run_decode(const struct cfg *cfg, const struct tok *tok)
{
	if (!cfg->ninputs)
		decode_file("-", tok);
	for (int i = 0; i < cfg->ninputs; i++)
		decode_file(cfg->inputs[i], tok);
	if (fflush(stdout) != 0)
		die(EXIT_FAILED, "writing the output: %s", strerror(errno));
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	static struct cfg c;
	struct optgroup groups[] = {{opts, on_opt, &c}, {0}};
	struct optspec spec = {
		"(--vocab-file V --merge-file M | --tokenizer-type BertWordPiece[LowerCase|Case] --vocab-file V |\n"
		"       --tokenizer-name-or-path P) [--json-keys K...] [--append-eod]\n"
		"       [--workers N] [--format stream|text] [--plain] [FILE...]\n"
		"       tokenize --decode (TOKENIZER FLAGS AS ABOVE) [FILE]",
		"Tokenize JSON lines (or plain lines) with byte-level BPE or BERT's WordPiece, ids identical\n"
		"to Hugging Face tokenizers, into a token stream for mkindex (see lmtk-tokens(5)) or text ids.\n"
		"Exit 0 done, 2 bad input or usage, 3 I/O error.",
		groups};
	char err[1024];
	struct tok *tok;
	int first, rc;

	msg_init(argv[0]);
	/* Megatron's --json-keys takes several values: "--json-keys a b" = "--json-keys a --json-keys b" */
	char **av = calloc((size_t)argc * 2 + 1, sizeof *av);
	int ac = 0;
	for (int i = 0; i < argc; i++) {
		av[ac++] = argv[i];
		if (strcmp(argv[i], "--json-keys") == 0 && i + 1 < argc) {
			av[ac++] = argv[++i];
			while (i + 1 < argc && argv[i + 1][0] != '-') {
				av[ac++] = "--json-keys";
				av[ac++] = argv[++i];
			}
		}
	}
	c.workers = 1;
	/* options may come after file operands too: opt_parse stops at an operand, so take it and
	 * parse the rest (opt_parse skips its argv[0], which is the operand just taken) */
	for (int base = 0; base < ac;) {
		first = base + opt_parse(&spec, ac - base, av + base);
		if (first > base && strcmp(av[first - 1], "--") == 0) {
			for (int i = first; i < ac; i++)
				on_opt(&c, O_INPUT, av[i], err, sizeof err);
			break;
		}
		if (first >= ac)
			break;
		on_opt(&c, O_INPUT, av[first], err, sizeof err);
		base = first;
	}
	if (c.nkeys == 0)
		c.keys[c.nkeys++] = "text";
	if (c.plain && c.nkeys > 1)
		die(EXIT_USAGE, "--plain input has no keys; drop --json-keys");
	if (c.hf && (c.vocab || c.merges))
		die(EXIT_USAGE, "give either --tokenizer-name-or-path or --vocab-file/--merge-file, not both");
	if (c.type && strcmp(c.type, "PretrainedFromHF") == 0 && !c.hf)
		die(EXIT_USAGE, "--tokenizer-type PretrainedFromHF needs --tokenizer-name-or-path");
	if (c.type && strcmp(c.type, "GPT2BPETokenizer") == 0 && c.hf)
		die(EXIT_USAGE, "--tokenizer-type GPT2BPETokenizer takes --vocab-file and --merge-file, "
			"not --tokenizer-name-or-path");
	if (bert_type(c.type) && (c.hf || c.merges || !c.vocab))
		die(EXIT_USAGE, "--tokenizer-type %s takes --vocab-file (BERT's vocab.txt) alone%s", c.type,
		    c.merges ? ", not --merge-file" : c.hf ? ", not --tokenizer-name-or-path" : "");
	if (c.hf)
		tok = tok_load_hf(c.hf, c.eod_token, err, sizeof err);
	else if (bert_type(c.type))
		tok = tok_load_bert(c.vocab, strcmp(c.type, "BertWordPieceLowerCase") == 0, err, sizeof err);
	else if (c.vocab && c.merges)
		tok = tok_load_gpt2(c.vocab, c.merges, err, sizeof err);
	else if (c.vocab)
		die(EXIT_USAGE, "--vocab-file without --merge-file: for BERT's vocab.txt give --tokenizer-type "
		    "BertWordPieceLowerCase or BertWordPieceCase");
	else
		die(EXIT_USAGE, "no tokenizer: give --vocab-file and --merge-file, --tokenizer-type BertWordPiece* "
		    "and --vocab-file, or --tokenizer-name-or-path");
	if (!tok)
		die(EXIT_USAGE, "%s", err);
	if (c.eod_token && !c.hf) {
		uint32_t id = tok_lookup(tok, c.eod_token, strlen(c.eod_token));
		if (id == BPE_NONE)
			die(EXIT_USAGE, "--eod-token '%s' is not in %s", c.eod_token, c.vocab);
		tok_set_eod(tok, id);
	}
	if (c.append_eod && tok_eod(tok) == BPE_NONE)
		die(EXIT_USAGE, "--append-eod: %s has no EOD token; name one with --eod-token", tok_describe(tok));
	if (!c.text && !c.decode && isatty(1))
		die(EXIT_USAGE, "the token stream is binary: pipe it into mkindex, or use --format text");
	rc = c.decode ? run_decode(&c, tok) : run_encode(&c, tok);
	tok_free(tok);
	free(av);
	return rc;
}
