#include "train/run/tfevents.h"

#include "crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "msg.h"
#include "xalloc.h"

/* Field numbers, from tensorboard/compat/proto/{event,summary,tensor,tensor_shape,types}.proto.
 * All are below 16, so every key is one byte. */
enum {
	EVENT_WALL_TIME = 1,          /* double */
	EVENT_STEP = 2,               /* int64 */
	EVENT_FILE_VERSION = 3,       /* string */
	EVENT_SUMMARY = 5,            /* Summary */
	SUMMARY_VALUE = 1,            /* repeated Summary.Value */
	VALUE_TAG = 1,                /* string */
	VALUE_SIMPLE_VALUE = 2,       /* float */
	VALUE_TENSOR = 8,             /* TensorProto */
	VALUE_METADATA = 9,           /* SummaryMetadata */
	METADATA_PLUGIN_DATA = 1,     /* SummaryMetadata.PluginData */
	PLUGIN_NAME = 1,              /* string */
	TENSOR_DTYPE = 1,             /* DataType enum */
	TENSOR_SHAPE = 2,             /* TensorShapeProto; empty = rank 0 */
	TENSOR_STRING_VAL = 8,        /* repeated bytes */
	DT_STRING = 7,
};

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* A record on disk: u64 length, u32 masked CRC of the length, data, u32 masked CRC of data. */
enum { HEAD = 12, TAIL = 4 };

struct tfevents {
	int fd;              /* O_APPEND: after a cut-back the next record goes to the new end */
	off_t end;           /* bytes of whole records in the file, where a failed write cuts back to */
	int broken;          /* the cut-back failed: anything appended would follow a torn record */
	uint8_t *buf;        /* the record being framed, HEAD + data + TAIL; grows as needed */
	size_t cap;
	char path[4096];
	char err[4096 + 128];
};

/* CRC-32C lives in the library (crc32c.h): checkpoints use it too, on gigabytes. */
uint32_t tfevents_crc32c(const void *p, size_t n)
{
	return crc32c(p, n);
}

uint32_t tfevents_masked_crc32c(const void *p, size_t n)
{
	uint32_t c = tfevents_crc32c(p, n);
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* The protobuf writer.  Like snprintf it keeps counting past cap, so one call both encodes and,
 * when the buffer was too small, says how big it must be. */
struct pb {
	uint8_t *p;
	size_t n, cap;
};

static void put(struct pb *b, const void *src, size_t k)
{
	if (k && b->n + k <= b->cap)
		memcpy(b->p + b->n, src, k);
	b->n += k;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	for (; v >= 0x80; v >>= 7)
		n++;
	return n;
}

static void put_varint(struct pb *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;
	for (; v >= 0x80; v >>= 7)
		t[n++] = (uint8_t)(v | 0x80);
	t[n++] = (uint8_t)v;
	put(b, t, n);
}

static void put_key(struct pb *b, int field, int wire)
{
	put_varint(b, (uint64_t)field << 3 | (uint64_t)wire);
}

static void put_le(struct pb *b, uint64_t v, size_t k)
{
	uint8_t t[8];
	for (size_t i = 0; i < k; i++)
		t[i] = (uint8_t)(v >> 8 * i);
	put(b, t, k);
}

static void put_double(struct pb *b, int field, double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	put_key(b, field, WIRE_I64);
	put_le(b, u, 8);
}

static void put_float(struct pb *b, int field, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	put_key(b, field, WIRE_I32);
	put_le(b, u, 4);
}

/* The key and length of a length-delimited field; its len bytes must follow. */
static void put_len(struct pb *b, int field, size_t len)
{
	put_key(b, field, WIRE_LEN);
	put_varint(b, len);
}

static void put_bytes(struct pb *b, int field, const void *p, size_t n)
{
	put_len(b, field, n);
	put(b, p, n);
}

/* The size of a length-delimited field holding n bytes: key, length, payload. */
static size_t len_field(size_t n)
{
	return 1 + varint_len(n) + n;
}

/* wall_time and step, which every Event starts with.  proto3 leaves out a zero step. */
static void put_event_head(struct pb *b, double wall_time, int64_t step)
{
	put_double(b, EVENT_WALL_TIME, wall_time);
	if (step) {
		put_key(b, EVENT_STEP, WIRE_VARINT);
		put_varint(b, (uint64_t)step);  /* int64: a negative step is ten bytes, as protobuf does */
	}
}

static size_t encode_version(uint8_t *buf, size_t cap, double wall_time)
{
	static const char version[] = "brain.Event:2";
	struct pb b = {buf, 0, cap};
	put_event_head(&b, wall_time, 0);
	put_bytes(&b, EVENT_FILE_VERSION, version, sizeof version - 1);
	return b.n;
}

size_t tfevents_encode_scalar(uint8_t *buf, size_t cap, double wall_time, int64_t step,
			      const char *tag, float value)
{
	size_t ntag = strlen(tag);
	size_t value_len = len_field(ntag) + 1 + 4;  /* tag, simple_value */
	size_t summary_len = len_field(value_len);
	struct pb b = {buf, 0, cap};

	put_event_head(&b, wall_time, step);
	put_len(&b, EVENT_SUMMARY, summary_len);
	put_len(&b, SUMMARY_VALUE, value_len);
	put_bytes(&b, VALUE_TAG, tag, ntag);
	put_float(&b, VALUE_SIMPLE_VALUE, value);
	return b.n;
}

/* The text plugin's summary (tensorboard/plugins/text/summary_v2.py, text_pb): metadata names
 * the plugin (its TextPluginData content is version 0, which serializes to nothing), the tensor
 * is a rank-0 DT_STRING.  tensor_shape is written, empty, because TensorFlow's make_tensor_proto
 * sets it; a reader treats an absent one the same. */
static size_t encode_text(uint8_t *buf, size_t cap, double wall_time, int64_t step,
			  const char *tag, const char *text)
{
	static const char plugin[] = "text";
	size_t ntag = strlen(tag), ntext = strlen(text);
	size_t plugin_len = len_field(sizeof plugin - 1);                   /* PluginData */
	size_t meta_len = len_field(plugin_len);                            /* SummaryMetadata */
	size_t tensor_len = 2 + len_field(0) + len_field(ntext);            /* dtype, shape, string_val */
	size_t value_len = len_field(ntag) + len_field(tensor_len) + len_field(meta_len);
	size_t summary_len = len_field(value_len);
	struct pb b = {buf, 0, cap};

	put_event_head(&b, wall_time, step);
	put_len(&b, EVENT_SUMMARY, summary_len);
	put_len(&b, SUMMARY_VALUE, value_len);
	put_bytes(&b, VALUE_TAG, tag, ntag);
	put_len(&b, VALUE_TENSOR, tensor_len);
	put_key(&b, TENSOR_DTYPE, WIRE_VARINT);
	put_varint(&b, DT_STRING);
	put_len(&b, TENSOR_SHAPE, 0);
	put_bytes(&b, TENSOR_STRING_VAL, text, ntext);
	put_len(&b, VALUE_METADATA, meta_len);
	put_len(&b, METADATA_PLUGIN_DATA, plugin_len);
	put_bytes(&b, PLUGIN_NAME, plugin, sizeof plugin - 1);
	return b.n;
}

static double now(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static int fail(struct tfevents *w, const char *what, int e)
{
	return errf(w->err, sizeof w->err, "%s: %s: %s", w->path, what, strerror(e));
}

/* Room for a record whose data is n bytes. */
static int reserve(struct tfevents *w, size_t n)
{
	if (HEAD + n + TAIL <= w->cap)
		return 0;
	size_t cap = w->cap * 2 > HEAD + n + TAIL ? w->cap * 2 : HEAD + n + TAIL;
	uint8_t *p = realloc(w->buf, cap);
	if (!p)
		return fail(w, "framing a record", ENOMEM);
	w->buf = p;
	w->cap = cap;
	return 0;
}

static void le(uint8_t *p, uint64_t v, size_t k)
{
	for (size_t i = 0; i < k; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

/* Frames the n data bytes already at buf + HEAD and appends the record with one write(2). */
static int append(struct tfevents *w, size_t n)
{
	uint8_t *r = w->buf;
	size_t len = HEAD + n + TAIL, off = 0;

	if (w->broken)
		return errf(w->err, sizeof w->err,
			    "%s: a failed write could not be cut back; no more records", w->path);
	le(r, n, 8);
	le(r + 8, tfevents_masked_crc32c(r, 8), 4);
	le(r + HEAD + n, tfevents_masked_crc32c(r + HEAD, n), 4);
	while (off < len) {
		ssize_t k = write(w->fd, r + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int e = k < 0 ? errno : EIO;  /* 0 for a nonzero count: never for a regular file */
			/* A torn record in the middle would hide every record after it from readers. */
			if (off && ftruncate(w->fd, w->end) < 0)
				w->broken = 1;
			return fail(w, "write", e);
		}
		off += (size_t)k;
	}
	w->end += (off_t)len;
	return 0;
}

int tfevents_scalar(struct tfevents *w, const char *tag, int64_t step, double value)
{
	double t = now();
	size_t n;
	while ((n = tfevents_encode_scalar(w->buf + HEAD, w->cap - HEAD - TAIL, t, step, tag,
					   (float)value)) > w->cap - HEAD - TAIL)
		if (reserve(w, n) < 0)
			return -1;
	return append(w, n);
}

int tfevents_text(struct tfevents *w, const char *tag, int64_t step, const char *text)
{
	double t = now();
	size_t n;
	while ((n = encode_text(w->buf + HEAD, w->cap - HEAD - TAIL, t, step, tag, text)) >
	       w->cap - HEAD - TAIL)
		if (reserve(w, n) < 0)
			return -1;
	return append(w, n);
}

int tfevents_flush(struct tfevents *w)
{
	if (fsync(w->fd) < 0)
		return fail(w, "fsync", errno);
	return 0;
}

void tfevents_close(struct tfevents *w)
{
	if (!w)
		return;
	fsync(w->fd);
	close(w->fd);
	free(w->buf);
	free(w);
}

const char *tfevents_error(const struct tfevents *w)
{
	return w ? w->err : "";
}

const char *tfevents_path(const struct tfevents *w)
{
	return w->path;
}

/* mkdir -p; an existing directory is fine, anything else in the way shows up at open(2). */
static int mkdirs(const char *dir, char *err, size_t errlen)
{
	char p[4096];
	if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
		return errf(err, errlen, "%s: path too long", dir);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return errf(err, errlen, "%s: cannot create directory: %s", p, strerror(errno));
		if (!c)
			return 0;
		*s = c;
	}
}

struct tfevents *tfevents_open(const char *dir, char *err, size_t errlen)
{
	char host[256], d[4096];
	struct timeval tv;
	struct tfevents *w;
	size_t n;

	snprintf(d, sizeof d, "%s", *dir ? dir : ".");
	for (n = strlen(d); n > 1 && d[n - 1] == '/'; n--)
		d[n - 1] = 0;
	if (mkdirs(d, err, errlen) < 0)
		return NULL;
	if (gethostname(host, sizeof host) < 0)
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = 0;
	for (char *s = host; *s; s++)  /* the name is one path component */
		if (*s == '/')
			*s = '_';

	if (!(w = calloc(1, sizeof *w)) || !(w->buf = malloc(w->cap = 4096))) {
		free(w);
		xalloc_err_in(err, errlen, d, "the event file's writer", sizeof *w + 4096);
		return NULL;
	}
	gettimeofday(&tv, NULL);
	/* Two writers in the same second on the same host (a restarted job, a second run into the
	 * same directory) get the same name; O_EXCL and a suffix keep the first one intact. */
	w->fd = -1;
	for (int i = 0; i < 1000 && w->fd < 0; i++) {
		char sfx[16] = "";
		if (i)
			snprintf(sfx, sizeof sfx, ".%d", i);
		int len = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s%s", d,
				   (long long)tv.tv_sec, host, sfx);
		if (len >= (int)sizeof w->path) {
			errf(err, errlen, "%s: path too long for an event file", d);
			goto fail;
		}
		w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
		if (w->fd < 0 && errno != EEXIST) {
			errf(err, errlen, "%s: cannot create: %s", w->path, strerror(errno));
			goto fail;
		}
	}
	if (w->fd < 0) {
		errf(err, errlen, "%s: 1000 event files from this second already", w->path);
		goto fail;
	}
	n = encode_version(w->buf + HEAD, w->cap - HEAD - TAIL,
			   (double)tv.tv_sec + (double)tv.tv_usec / 1e6);
	if (append(w, n) < 0) {
		errf(err, errlen, "%s", w->err);
		close(w->fd);
		unlink(w->path);  /* an event file without its version record is only litter */
		goto fail;
	}
	return w;
fail:
	free(w->buf);
	free(w);
	return NULL;
}
