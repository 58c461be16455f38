/* tokenize - JSON lines (or plain lines) -> token ids identical to HF tokenizers: byte-level BPE
 * (GPT-2, BLOOM) and BERT's WordPiece; with --split-sentences, each document's sentences (NLTK's
 * Punkt, punkt.h) as separate sequences, as Megatron makes BERT's data.
 *
 * The first half of the data pipeline: `tokenize ... < corpus.jsonl | mkindex --output-prefix P`.
 * Flags are Megatron's preprocessor's (--vocab-file, --merge-file, --tokenizer-type,
 * --tokenizer-name-or-path, --json-keys, --append-eod, --workers, --split-sentences,
 * --keep-newlines, --lang) so scripts port unchanged.  --train-punkt learns Punkt's parameters
 * from the input instead (NLTK's PunktTrainer), for --punkt-params.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "msg.h"
#include "num.h"
#include "progress.h"
#include "units.h"
#include "opt.h"
#include "tokstream.h"
#include "tokenize/jsonl.h"
#include "tokenize/punkt.h"
#include "tokenize/tok.h"
#include "tokenize/unicode.h"
#include "xalloc.h"

#define CHUNK (1 << 20)

struct cfg {
	const char *vocab, *merges, *hf, *type, *eod_token;
	const char *keys[TOKSTREAM_MAX_KEYS];
	int nkeys;
	const char **inputs;
	int ninputs;
	int plain, append_eod, workers, text, sentences, skip_bad, decode, quiet;
	int split, keep_newlines, train, format_given, workers_given;
	const char *punkt_params, *lang, *output;
	struct punkt_params *punkt;
};

enum { O_VOCAB = 1, O_MERGES, O_HF, O_TYPE, O_EOD, O_KEYS, O_INPUT, O_PLAIN, O_APPEND, O_WORKERS,
       O_FORMAT, O_SKIP, O_DECODE, O_QUIET, O_SPLIT, O_KEEPNL, O_PUNKT, O_LANG, O_TRAIN, O_OUTPUT = 'o' };

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
	{"format", O_FORMAT, "FMT", "stream (binary, for mkindex; default), text (ids, a document per line) or "
	 "sentences (with --split-sentences: the sentences as JSON lines, no tokenizer)"},
	{"skip-bad-lines", O_SKIP, NULL, "count and report bad input lines instead of stopping at the first"},
	{"decode", O_DECODE, NULL, "turn ids (a token stream, or text ids a document per line) back into text"},
	{"quiet", O_QUIET, NULL, "no progress and no summary on stderr"},
	{"split-sentences", O_SPLIT, NULL, "split each document into sentences (NLTK's Punkt, as Megatron) "
	 "and write each as its own sequence, for mkindex's _sentence datasets"},
	{"keep-newlines", O_KEEPNL, NULL, "with --split-sentences: keep the whitespace after a sentence in it "
	 "(Megatron's CustomLanguageVars)"},
	{"punkt-params", O_PUNKT, "FILE", "with --split-sentences: Punkt parameters from --train-punkt "
	 "(default: the built-in English ones)"},
	{"lang", O_LANG, "LANG", "with --split-sentences: Megatron's NLTK language; english (built in) only"},
	{"train-punkt", O_TRAIN, NULL, "learn Punkt parameters from the input's text (NLTK's PunktTrainer) "
	 "and write them as JSON, instead of tokenizing"},
	{"output", O_OUTPUT, "FILE", "with --train-punkt: write the parameters to FILE (default stdout)"},
	{0},
};

/* Megatron's preprocess_data.py flags that belong to mkindex here */
static const struct opt_hint hints[] = {
	{"output-prefix", "PREFIX", "--output-prefix belongs to mkindex: tokenize ... | mkindex --output-prefix %s"},
	{"dataset-impl", "IMPL", "--dataset-impl: mkindex always writes Megatron's mmap dataset (MMIDIDX); "
	 "drop it: tokenize ... | mkindex --output-prefix PREFIX"},
	{"log-interval", "N", "--log-interval: tokenize reports its progress on a terminal by itself; drop it"},
	{0},
};

static int bert_type(const char *type)
{
	return type && (strcmp(type, "BertWordPieceLowerCase") == 0 || strcmp(type, "BertWordPieceCase") == 0);
}

static int on_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct cfg *c = ctx;
	int64_t n;
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
		c->workers_given = 1;
		if (num_int(arg, 1, 256, &n) != NUM_OK)
			return errf(err, errlen, "'%s' is not a worker count (1-256)", arg);
		c->workers = (int)n;
		return 0;
	case O_FORMAT:
		if (strcmp(arg, "text") && strcmp(arg, "stream") && strcmp(arg, "sentences"))
			return errf(err, errlen, "'%s': stream, text or sentences", arg);
		c->text = strcmp(arg, "text") == 0;
		c->sentences = strcmp(arg, "sentences") == 0;
		c->format_given = 1;
		return 0;
	case O_SKIP: c->skip_bad = 1; return 0;
	case O_DECODE: c->decode = 1; return 0;
	case O_QUIET: c->quiet = 1; return 0;
	case O_SPLIT: c->split = 1; return 0;
	case O_KEEPNL: c->keep_newlines = 1; return 0;
	case O_PUNKT: c->punkt_params = arg; return 0;
	case O_LANG:
		if (strcmp(arg, "english"))
			return errf(err, errlen, "'%s': only english is built in; train parameters for your language "
				    "with --train-punkt and give them with --punkt-params", arg);
		c->lang = arg;
		return 0;
	case O_TRAIN: c->train = 1; return 0;
	case O_OUTPUT: c->output = arg; return 0;
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
	unsigned long long docs, sents, tokens, bad;
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
	unsigned long long docs, sents, tokens, bytes, bad;
	char err[1024];
	FILE *out;
	struct progress pg;        /* bytes of input; the writer thread draws it */
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

/* One document's (or sentence's) ids into the chunk's output: a stream record, or a line of text. */
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
	if (n == 0)  /* Megatron skips documents (and sentences) without tokens */
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

/* The end of a document of sentences: a stream's end-of-document record, an empty line of text. */
static int emit_doc_end(const struct cfg *cfg, struct chunk *c, uint32_t key)
{
	if (out_reserve(c, 8) < 0)
		return -1;
	if (cfg->text) {
		c->out[c->outlen++] = '\n';
	} else {
		put_u32(c->out + c->outlen, TOKSTREAM_DOC_END);
		put_u32(c->out + c->outlen + 4, key);
		c->outlen += 8;
	}
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
	struct punkt_state *punkt;
	struct punkt_span *spans;
	size_t nspans, spancap;
	size_t *ends;           /* --split-sentences: where each kept sentence's ids end in ids */
	size_t endcap;
};

/* The texts of one input line (a JSON line's keys, or the plain line), into texts/tlens; NULL,
 * or why the line is bad (in whybuf).  *blank: a JSON line of whitespace, which is no document. */
static const char *parse_line(const struct cfg *cfg, char *line, size_t len, struct scratch *sc,
			      const char **texts, size_t *tlens, int *blank, char *whybuf, size_t whylen)
{
	struct jsonl_field f[TOKSTREAM_MAX_KEYS];
	char err[512];

	*blank = 0;
	if (cfg->plain) {
		size_t at;
		texts[0] = line, tlens[0] = len;
		if (!valid_utf8((unsigned char *)line, len, &at)) {
			snprintf(whybuf, whylen, "invalid UTF-8 at byte %zu", at + 1);
			return whybuf;
		}
		return NULL;
	}
	if (len == strspn(line, " \t")) {
		*blank = 1;  /* blank lines between JSON lines are not documents */
		return NULL;
	}
	if (jsonl_extract(line, len, cfg->keys, cfg->nkeys, f, &sc->text, &sc->tcap, err, sizeof err) < 0) {
		snprintf(whybuf, whylen, "malformed JSON at %s", err);
		return whybuf;
	}
	for (int k = 0; k < cfg->nkeys; k++) {
		if (f[k].found == 0) {
			char have[300];
			int n = jsonl_keys(line, len, have, sizeof have);
			snprintf(whybuf, whylen, "no key '%s' (--json-keys); the line's key%s: %s", cfg->keys[k],
				 n == 1 ? "" : "s", n ? have : "none");
			return whybuf;
		} else if (f[k].found < 0) {
			snprintf(whybuf, whylen, "key '%s' is not a string", cfg->keys[k]);
			return whybuf;
		}
	}
	for (int k = 0; k < cfg->nkeys; k++)
		texts[k] = sc->text + f[k].off, tlens[k] = f[k].len;
	return NULL;
}

static void push_id(struct scratch *sc, size_t *n, uint32_t id)
{
	if (*n == sc->cap) {
		uint32_t *q = realloc(sc->ids, (sc->cap *= 2) * sizeof *q);
		if (!q)
			xalloc_die("a document's token ids", sc->cap * sizeof *q);
		sc->ids = q;
	}
	sc->ids[(*n)++] = id;
}

/* One text as Megatron's preprocessor encodes it with --split-sentences: Punkt's sentences, each
 * tokenized on its own, those without tokens dropped, the EOD after the last; a document only if
 * a sentence is left.  0, or -1 with err (a tokenizer failure). */
static int encode_sentences(struct pipeline *pl, struct tok_state *st, struct chunk *c, struct scratch *sc,
			    uint32_t key, const char *text, size_t len, char *err, size_t errlen)
{
	const struct cfg *cfg = pl->cfg;
	size_t n = 0, nsent = 0;

	if (punkt_split(cfg->punkt, cfg->keep_newlines, sc->punkt, text, len, &sc->spans, &sc->nspans,
			&sc->spancap) < 0)
		xalloc_die("the sentence spans of a document", 0);
	for (size_t i = 0; i < sc->nspans; i++) {
		size_t before = n;
		const struct punkt_span *sp = &sc->spans[i];
		if (tok_encode(pl->tok, st, text + sp->start, sp->end - sp->start, &sc->ids, &n, &sc->cap, err,
			       errlen) < 0)
			return -1;
		if (n == before)
			continue;
		if (nsent == sc->endcap) {
			size_t *e = realloc(sc->ends, (sc->endcap = sc->endcap ? 2 * sc->endcap : 64) * sizeof *e);
			if (!e)
				xalloc_die("the sentence ends of a document", sc->endcap * sizeof *e);
			sc->ends = e;
		}
		sc->ends[nsent++] = n;
	}
	if (nsent && cfg->append_eod)
		push_id(sc, &n, tok_eod(pl->tok)), sc->ends[nsent - 1] = n;
	for (size_t i = 0, from = 0; i < nsent; from = sc->ends[i++])
		if (emit(cfg, c, key, sc->ids + from, sc->ends[i] - from) < 0)
			xalloc_die("a chunk's output buffer", 0);
	if ((nsent || cfg->text) && emit_doc_end(cfg, c, key) < 0)
		xalloc_die("a chunk's output buffer", 0);
	c->sents += nsent;
	c->tokens += n;
	return 0;
}

/* s[0, n) as a JSON string */
static void put_json_string(struct chunk *c, const char *s, size_t n)
{
	if (out_reserve(c, 6 * n + 2) < 0)
		xalloc_die("a chunk's output buffer", 0);
	char *o = c->out + c->outlen;
	*o++ = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			*o++ = '\\', *o++ = (char)ch;
		else if (ch == '\n')
			*o++ = '\\', *o++ = 'n';
		else if (ch < 0x20)
			o += sprintf(o, "\\u%04x", ch);
		else
			*o++ = (char)ch;
	}
	*o++ = '"';
	c->outlen = (size_t)(o - c->out);
}

static void put_raw(struct chunk *c, const char *s)
{
	size_t n = strlen(s);
	if (out_reserve(c, n) < 0)
		xalloc_die("a chunk's output buffer", 0);
	memcpy(c->out + c->outlen, s, n);
	c->outlen += n;
}

/* --format sentences: one JSON object per input line, {"KEY": ["sentence", ...], ...}, the form
 * newer Megatron's preprocessor writes in its separate splitting step */
static void put_sentences(struct pipeline *pl, struct chunk *c, struct scratch *sc, const char **texts,
			  const size_t *tlens)
{
	const struct cfg *cfg = pl->cfg;
	int nk = cfg->plain ? 1 : cfg->nkeys;
	put_raw(c, "{");
	for (int k = 0; k < nk; k++) {
		const char *key = cfg->plain ? "text" : cfg->keys[k];
		if (punkt_split(cfg->punkt, cfg->keep_newlines, sc->punkt, texts[k], tlens[k], &sc->spans, &sc->nspans,
				&sc->spancap) < 0)
			xalloc_die("the sentence spans of a document", 0);
		if (k)
			put_raw(c, ", ");
		put_json_string(c, key, strlen(key));
		put_raw(c, ": [");
		for (size_t i = 0; i < sc->nspans; i++) {
			if (i)
				put_raw(c, ", ");
			put_json_string(c, texts[k] + sc->spans[i].start, sc->spans[i].end - sc->spans[i].start);
		}
		put_raw(c, "]");
		c->docs++;
		c->sents += sc->nspans;
	}
	put_raw(c, "}\n");
}

static void process(struct pipeline *pl, struct tok_state *st, struct chunk *c, struct scratch *sc)
{
	const struct cfg *cfg = pl->cfg;
	uint32_t eod = pl->tok ? tok_eod(pl->tok) : 0;
	unsigned long long lineno = c->line0;
	char err[512];
	char *p = c->data, *end = c->data + c->len;

	c->outlen = 0;
	c->docs = c->sents = c->tokens = c->bad = 0;
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
		char whybuf[600];
		int blank;
		const char *why = parse_line(cfg, line, len, sc, texts, tlens, &blank, whybuf, sizeof whybuf);

		if (blank)
			continue;
		if (why) {
			if (cfg->skip_bad) {
				if (c->bad++ == 0)
					snprintf(c->err, sizeof c->err, "%s:%llu: %s", c->fname, lineno, why);
				continue;
			}
			snprintf(c->err, sizeof c->err, "%s:%llu: %s", c->fname, lineno, why);
			return;
		}
		if (cfg->sentences) {
			put_sentences(pl, c, sc, texts, tlens);
			continue;
		}
		for (int k = 0; k < (cfg->plain ? 1 : cfg->nkeys); k++) {
			size_t n = 0;
			c->docs++;
			if (cfg->split) {
				if (encode_sentences(pl, st, c, sc, (uint32_t)k, texts[k], tlens[k], err, sizeof err) < 0) {
					snprintf(c->err, sizeof c->err, "%s:%llu: %s", c->fname, lineno, err);
					c->fatal = 1;
					return;
				}
				continue;
			}
			if (tok_encode(pl->tok, st, texts[k], tlens[k], &sc->ids, &n, &sc->cap, err, sizeof err) < 0) {
				snprintf(c->err, sizeof c->err, "%s:%llu: %s", c->fname, lineno, err);
				c->fatal = 1;
				return;
			}
			if (n && cfg->append_eod)
				push_id(sc, &n, eod);
			if (emit(cfg, c, (uint32_t)k, sc->ids, n) < 0)
				xalloc_die("a chunk's output buffer", 0);
			c->tokens += n;
		}
	}
}

static void *worker(void *arg)
{
	struct pipeline *pl = arg;
	struct tok_state *st = pl->tok ? tok_state_new(pl->tok) : NULL;
	struct scratch sc = {.ids = malloc(4096 * sizeof(uint32_t)), .cap = 4096};

	if ((pl->tok && !st) || !sc.ids || (pl->cfg->split && !(sc.punkt = punkt_state_new())))
		xalloc_die("a worker's tokenizer state and scratch buffers", 0);
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
	punkt_state_free(sc.punkt);
	free(sc.spans);
	free(sc.ends);
	return NULL;
}

/* "1000 documents, 1361845 tokens": what the progress line and the summary count */
static void counts(const struct pipeline *pl, char *buf, size_t len)
{
	if (!pl->tok)   /* --format sentences: nothing tokenized */
		snprintf(buf, len, "%llu documents, %llu sentences", pl->docs, pl->sents);
	else if (pl->cfg->split)
		snprintf(buf, len, "%llu documents, %llu sentences, %llu tokens", pl->docs, pl->sents,
			 pl->tokens);
	else
		snprintf(buf, len, "%llu documents, %llu tokens", pl->docs, pl->tokens);
}

/* the progress line ends; the summary, in binary units as the line's (progress.h) */
static void summary(struct pipeline *pl)
{
	char n[96];
	counts(pl, n, sizeof n);
	progress_extra(&pl->pg, "%s", n);   /* a forced line ends on the final counts */
	pl->pg.done = pl->bytes;
	double t = progress_end(&pl->pg), mib = (double)pl->bytes / 1048576;
	if (pl->cfg->quiet)
		return;
	fprintf(stderr, "%s: %s, %.1f MiB in %.2f s (%.1f MiB/s), %llu bad lines\n", prog_name, n, mib, t,
		t > 0 ? mib / t : 0, pl->bad);
}

/* writes finished chunks in order; runs in its own thread */
static void *writer(void *arg)
{
	struct pipeline *pl = arg;
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
		pl->sents += c->sents;
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
		if (progress_due(&pl->pg)) {
			char n[96];
			counts(pl, n, sizeof n);
			progress_extra(&pl->pg, "%s", n);
			progress_update(&pl->pg, pl->bytes);
		}
		pthread_cond_broadcast(&pl->cv);
	}
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

/* bytes of input when every input is a regular file (for the ETA), else 0 */
static uint64_t input_size(const struct cfg *cfg)
{
	uint64_t total = 0;
	struct stat st;
	for (int i = 0; i < (cfg->ninputs ? cfg->ninputs : 1); i++) {
		const char *name = cfg->ninputs ? cfg->inputs[i] : "-";
		if ((strcmp(name, "-") == 0 ? fstat(0, &st) : stat(name, &st)) < 0 || !S_ISREG(st.st_mode))
			return 0;
		total += (uint64_t)st.st_size;
	}
	return total;
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
	progress_begin(&pl.pg, "reading", NULL, input_size(cfg));
	if (cfg->quiet)
		pl.pg.on = 0;
	pthread_mutex_init(&pl.mu, NULL);
	pthread_cond_init(&pl.cv, NULL);
	if (!pl.slots)
		xalloc_die("the reader's chunk slots", pl.nslots * sizeof *pl.slots);
	if (!cfg->text && !cfg->sentences) {
		h.level = cfg->split ? TOKSTREAM_SENTENCES : TOKSTREAM_DOCUMENTS;
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
					xalloc_die("a chunk of input", c->cap);
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
		summary(&pl);
		die(pl.failed == 3 ? EXIT_FAILED : EXIT_USAGE, "%s", pl.err);
	}
	/* lines read and not one document: a dead end ("--json-keys txt" for a corpus of "text"),
	 * not an empty dataset; no end marker, so mkindex refuses the stream too */
	if (pl.bad && pl.docs == 0) {
		fflush(stdout);
		summary(&pl);
		die(EXIT_USAGE, "no document: all %llu lines read were bad; the first: %s", pl.bad, pl.err);
	}
	if (!cfg->text && !cfg->sentences && tokstream_write_end(stdout) < 0)
		die(EXIT_FAILED, "writing the output: %s", strerror(errno));
	if (fflush(stdout) != 0)
		die(EXIT_FAILED, "writing the output: %s", strerror(errno));
	summary(&pl);
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

/* base: the bytes of the inputs before this one, for the progress line; grows by this one's */
static void decode_file(const char *path, const struct tok *tok, struct progress *pg, uint64_t *base)
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
		/* a stream of sentences: a line per sentence, an empty line after each document */
		while ((rc = tokstream_next(&r, &key, &n, err, sizeof err)) > 0) {
			if (rc == 1)
				decode_ids(tok, r.ids, n, name);
			else
				putchar('\n');
			if (progress_due(pg))
				progress_update(pg, *base + r.offset);
		}
		if (rc < 0)
			die(EXIT_USAGE, "%s", err);
		*base += r.offset;
		tokstream_close(&r);
	} else {
		char *line = NULL, *p, *e;
		size_t cap = 0, n = 0, idcap = 1024;
		uint32_t *ids = malloc(idcap * sizeof *ids);
		unsigned long long lineno = 0;
		ssize_t got;
		while ((got = getline(&line, &cap, f)) >= 0) {
			char where[600];
			lineno++;
			*base += (uint64_t)got;
			if (progress_due(pg))
				progress_update(pg, *base);
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
	struct progress pg;
	uint64_t bytes = 0;
	progress_begin(&pg, "decoding", NULL, input_size(cfg));
	if (cfg->quiet)
		pg.on = 0;
	if (!cfg->ninputs)
		decode_file("-", tok, &pg, &bytes);
	for (int i = 0; i < cfg->ninputs; i++)
		decode_file(cfg->inputs[i], tok, &pg, &bytes);
	if (fflush(stdout) != 0)
		die(EXIT_FAILED, "writing the output: %s", strerror(errno));
	pg.done = bytes;
	progress_end(&pg);
	return EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * --train-punkt: the texts of every document (each key's, in order), joined by blank lines so that
 * each starts a paragraph, are one training text for Punkt */

static int run_train_punkt(const struct cfg *cfg)
{
	struct scratch sc = {0};
	char *text = NULL, *line = NULL, trained_on[1024];
	size_t len = 0, cap = 0, lcap = 0;
	unsigned long long docs = 0, bad = 0;
	char first_bad[1024] = "", err[1024];
	double t0 = units_now();
	int nfiles = cfg->ninputs ? cfg->ninputs : 1;
	size_t off = (size_t)snprintf(trained_on, sizeof trained_on, "tokenize --train-punkt:");
	uint64_t read = 0;   /* bytes of input, for the progress line */
	struct progress pg;

	progress_begin(&pg, "reading", NULL, input_size(cfg));
	if (cfg->quiet)
		pg.on = 0;

	for (int fi = 0; fi < nfiles; fi++) {
		const char *name = cfg->ninputs ? cfg->inputs[fi] : "-";
		FILE *f = strcmp(name, "-") == 0 ? stdin : fopen(name, "rb");
		const char *shown = f == stdin ? "<stdin>" : name, *base = strrchr(shown, '/');
		unsigned long long lineno = 0;
		unsigned long long docs0 = docs;
		ssize_t got;
		if (!f)
			die(EXIT_FAILED, "%s: %s", name, strerror(errno));
		while ((got = getline(&line, &lcap, f)) >= 0) {
			size_t l = (size_t)got;
			const char *texts[TOKSTREAM_MAX_KEYS];
			size_t tlens[TOKSTREAM_MAX_KEYS];
			char whybuf[600];
			int blank;
			lineno++;
			read += l;
			if (progress_due(&pg))
				progress_update(&pg, read);
			if (l && line[l - 1] == '\n')
				l--;
			if (l && line[l - 1] == '\r' && !cfg->plain)
				l--;
			const char *why = parse_line(cfg, line, l, &sc, texts, tlens, &blank, whybuf, sizeof whybuf);
			if (blank)
				continue;
			if (why) {
				if (!cfg->skip_bad)
					die(EXIT_USAGE, "%s:%llu: %s", shown, lineno, why);
				if (bad++ == 0)
					snprintf(first_bad, sizeof first_bad, "%s:%llu: %s", shown, lineno, why);
				continue;
			}
			for (int k = 0; k < (cfg->plain ? 1 : cfg->nkeys); k++) {
				if (len + tlens[k] + 2 > cap) {
					cap = cap ? cap : 1 << 20;
					while (len + tlens[k] + 2 > cap)
						cap *= 2;
					if (!(text = realloc(text, cap)))
						die(EXIT_FAILED, "out of memory for %zu bytes of training text", cap);
				}
				if (docs || k) {
					memcpy(text + len, "\n\n", 2);
					len += 2;
				}
				memcpy(text + len, texts[k], tlens[k]);
				len += tlens[k];
			}
			docs++;
		}
		if (ferror(f))
			die(EXIT_FAILED, "%s: read error: %s", shown, strerror(errno));
		if (f != stdin)
			fclose(f);
		if (off < sizeof trained_on)
			off += (size_t)snprintf(trained_on + off, sizeof trained_on - off, "%s %llu documents of %s",
						fi ? "," : "", docs - docs0, base ? base + 1 : shown);
	}
	for (int k = 0; k < (cfg->plain ? 0 : cfg->nkeys) && off < sizeof trained_on; k++)
		off += (size_t)snprintf(trained_on + off, sizeof trained_on - off, "%s%s", k ? " " : ", key ",
					cfg->keys[k]);
	free(line);
	free(sc.text);
	if (bad && !docs)   /* lines read and nothing to learn from: a dead end, not empty parameters */
		die(EXIT_USAGE, "no document: all %llu lines read were bad; the first: %s", bad, first_bad);

	progress_update(&pg, read);
	progress_end(&pg);
	/* the three scans of the text: 3 * len bytes */
	struct punkt_train_stats stats;
	progress_begin(&pg, "training: scanned", NULL, 3 * (uint64_t)len);
	if (cfg->quiet)
		pg.on = 0;
	struct punkt_params *p = punkt_train(text ? text : "", len, &stats, &pg, err, sizeof err);
	progress_end(&pg);
	if (!p)
		die(EXIT_FAILED, "%s", err);
	char *json = punkt_params_json(p, trained_on);
	if (!json)
		xalloc_die("the trained Punkt parameters' JSON", 0);
	size_t jlen = strlen(json);
	if (cfg->output) {
		if (file_write_atomic(cfg->output, json, jlen, 0644, err, sizeof err) < 0)
			die(EXIT_FAILED, "%s", err);
	} else if (fwrite(json, 1, jlen, stdout) != jlen || fflush(stdout) != 0) {
		die(EXIT_FAILED, "writing the output: %s", strerror(errno));
	}
	if (!cfg->quiet) {
		size_t na, nc, ns, no;
		punkt_params_counts(p, &na, &nc, &ns, &no);
		fprintf(stderr, "%s: Punkt parameters from %llu documents, %.1f MiB of text, %llu tokens: %zu "
			"abbreviations, %zu collocations, %zu sentence starters, %zu types with orthographic contexts; "
			"%.2f s%s%s\n", prog_name, docs, (double)len / 1048576, (unsigned long long)stats.tokens, na, nc, ns,
			no, units_now() - t0, cfg->output ? "; wrote " : "", cfg->output ? cfg->output : "");
	}
	if (bad)
		warn("skipped %llu bad lines; the first: %s", bad, first_bad);
	free(json);
	free(text);
	punkt_params_free(p);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	static struct cfg c;
	struct optgroup groups[] = {{opts, on_opt, &c, NULL}, {0}};
	struct optspec spec = {
		"(--vocab-file V --merge-file M | --tokenizer-type BertWordPiece[LowerCase|Case] --vocab-file V |\n"
		"       --tokenizer-name-or-path P) [--json-keys K...] [--append-eod]\n"
		"       [--split-sentences [--keep-newlines] [--punkt-params F]]\n"
		"       [--workers N] [--format stream|text] [--plain] [FILE...]\n"
		"       tokenize --decode (TOKENIZER FLAGS AS ABOVE) [FILE]\n"
		"       tokenize --train-punkt [--json-keys K...] [--plain] [-o PARAMS.json] [FILE...]",
		"Tokenize JSON lines (or plain lines) with byte-level BPE or BERT's WordPiece, ids identical\n"
		"to Hugging Face tokenizers, into a token stream for mkindex (see lmtk-tokens(5)) or text ids;\n"
		"with --split-sentences each document's sentences (NLTK's Punkt, as Megatron's preprocessor)\n"
		"as separate sequences.  --train-punkt learns Punkt parameters from the text instead.\n"
		"Exit 0 done, 2 bad input or usage, 3 I/O error.",
		groups, hints, 0};
	char err[1024];
	struct tok *tok;
	int first, rc;

	msg_init(argv[0]);
	c.workers = 1;
	first = opt_parse(&spec, argc, argv);
	for (int i = first; i < argc; i++)
		on_opt(&c, O_INPUT, argv[i], err, sizeof err);
	if (c.nkeys == 0)
		c.keys[c.nkeys++] = "text";
	if (c.plain && c.nkeys > 1)
		die(EXIT_USAGE, "--plain input has no keys; drop --json-keys");
	if (c.train) {
		const char *extra = c.vocab ? "--vocab-file" : c.merges ? "--merge-file" : c.hf ? "--tokenizer-name-or-path"
			: c.type ? "--tokenizer-type" : c.eod_token ? "--eod-token" : c.append_eod ? "--append-eod"
			: c.decode ? "--decode" : c.split ? "--split-sentences" : c.keep_newlines ? "--keep-newlines"
			: c.punkt_params ? "--punkt-params" : c.lang ? "--lang" : c.format_given ? "--format"
			: c.workers_given ? "--workers" : NULL;
		if (extra)
			die(EXIT_USAGE, "--train-punkt learns from the text alone, on one thread; drop %s", extra);
		return run_train_punkt(&c);
	}
	if (c.output)
		die(EXIT_USAGE, "--output is for --train-punkt; the token stream goes to standard output");
	if (!c.split && (c.keep_newlines || c.punkt_params || c.lang))
		die(EXIT_USAGE, "%s needs --split-sentences", c.keep_newlines ? "--keep-newlines" :
		    c.punkt_params ? "--punkt-params" : "--lang");
	if (c.split && c.decode)
		die(EXIT_USAGE, "--split-sentences is for tokenizing; --decode shows a stream's sentences as they are");
	if (c.split && c.punkt_params && c.lang)
		die(EXIT_USAGE, "--lang picks the built-in parameters; --punkt-params gives others: drop one");
	if (c.sentences && !c.split)
		die(EXIT_USAGE, "--format sentences shows the sentences of --split-sentences; add it");
	if (c.split && !(c.punkt = c.punkt_params ? punkt_params_load(c.punkt_params, err, sizeof err)
				    : punkt_params_builtin(err, sizeof err)))
		die(EXIT_USAGE, "--punkt-params: %s", err);
	if (c.sentences) {
		const char *extra = c.vocab ? "--vocab-file" : c.merges ? "--merge-file" : c.hf ? "--tokenizer-name-or-path"
			: c.type ? "--tokenizer-type" : c.eod_token ? "--eod-token" : c.append_eod ? "--append-eod" : NULL;
		if (extra)
			die(EXIT_USAGE, "--format sentences writes text, not tokens; drop %s", extra);
		rc = run_encode(&c, NULL);
		punkt_params_free(c.punkt);
		return rc;
	}
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
	if (!c.text && !c.sentences && !c.decode && isatty(1))
		die(EXIT_USAGE, "the token stream is binary: pipe it into mkindex, or use --format text");
	rc = c.decode ? run_decode(&c, tok) : run_encode(&c, tok);
	tok_free(tok);
	punkt_params_free(c.punkt);
	return rc;
}
