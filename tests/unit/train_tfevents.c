/* train_tfevents.c - TensorBoard event files: the CRC, the spec's worked bytes, the framing, and a
 * file cut anywhere inside its last record still giving back every record before it.  The CRC and
 * framing constants were computed by a separate bit-at-a-time CRC-32C in Python (the same one as
 * tests/ref/tfevents-read.py), not by this module. */
#include "t.h"
#include "train/run/tfevents.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"

static const uint8_t worked[] = {
	0x09, 0x00, 0x00, 0x20, 0x40, 0xfc, 0x54, 0xd9, 0x41, 0x10, 0x0a, 0x2a, 0x0d,
	0x0a, 0x0b, 0x0a, 0x04, 0x6c, 0x6f, 0x73, 0x73, 0x15, 0x00, 0x00, 0x80, 0x3e,
};

static uint64_t le(const uint8_t *p, int k)
{
	uint64_t v = 0;
	for (int i = k - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

struct rec {
	const uint8_t *data;
	size_t n;
};

/* The reader's side of the framing, written from the spec: whole records into out (at most max),
 * *torn = 1 if the file ends inside a record.  The count, or -1 on a CRC mismatch. */
static int frames(const uint8_t *p, size_t len, struct rec *out, int max, int *torn)
{
	size_t off = 0;
	int n = 0;
	*torn = 0;
	while (off < len) {
		if (len - off < 12) {
			*torn = 1;
			break;
		}
		uint64_t dlen = le(p + off, 8);
		if (le(p + off + 8, 4) != tfevents_masked_crc32c(p + off, 8))
			return -1;
		if (len - off - 12 < dlen + 4) {
			*torn = 1;
			break;
		}
		if (le(p + off + 12 + dlen, 4) != tfevents_masked_crc32c(p + off + 12, dlen))
			return -1;
		if (n < max)
			out[n] = (struct rec){p + off + 12, (size_t)dlen};
		n++;
		off += 12 + dlen + 4;
	}
	return n;
}

static char *slurp(const char *path, size_t *len)
{
	char *data, err[512];
	if (file_read_all(path, &data, len, err, sizeof err) < 0) {
		printf("# %s\n", err);
		return NULL;
	}
	return data;
}

static double wall_of(const struct rec *r)
{
	double d;
	uint64_t u = le(r->data + 1, 8);
	memcpy(&d, &u, 8);
	return d;
}

int main(void)
{
	char tmp[256], dir[512];
	snprintf(tmp, sizeof tmp, "%s/t_tfevents.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 2;
	}

	T_CASE("crc32c_check_value_is_e3069283") {
		T_ASSERT(tfevents_crc32c("123456789", 9) == 0xe3069283u);
		T_ASSERT(tfevents_crc32c("", 0) == 0);
	}
	T_CASE("scalar_payload_is_the_specs_worked_bytes") {
		uint8_t buf[64];
		size_t n = tfevents_encode_scalar(buf, sizeof buf, 1700000000.5, 10, "loss", 0.25f);
		T_ASSERT(n == sizeof worked);
		T_ASSERT(memcmp(buf, worked, sizeof worked) == 0);
	}
	T_CASE("scalar_encoder_reports_the_size_and_writes_nothing_past_cap") {
		uint8_t buf[64];
		memset(buf, 0xee, sizeof buf);
		T_ASSERT(tfevents_encode_scalar(buf, 10, 1700000000.5, 10, "loss", 0.25f) == 26);
		for (size_t i = 10; i < sizeof buf; i++)
			T_ASSERT(buf[i] == 0xee);
		T_ASSERT(tfevents_encode_scalar(NULL, 0, 1.0, 0, "x", 1.0f) == 9 + 2 + 2 + 3 + 5);
	}
	T_CASE("framed_worked_record_carries_masked_crcs") {
		uint8_t len8[8] = {sizeof worked};
		T_ASSERT(tfevents_masked_crc32c("123456789", 9) == 0xc78ab0e5u);
		T_ASSERT(tfevents_masked_crc32c(len8, 8) == 0x2dd89b12u);
		T_ASSERT(tfevents_masked_crc32c(worked, sizeof worked) == 0x9a2edb0eu);
	}

	snprintf(dir, sizeof dir, "%s/a/b", tmp);
	T_CASE("open_makes_the_directories_and_writes_the_version_record_first") {
		char err[512];
		struct tfevents *w = tfevents_open(dir, err, sizeof err);
		T_ASSERT(w);
		if (!w)
			break;
		char host[256] = "";
		gethostname(host, sizeof host);
		char path[4096];
		snprintf(path, sizeof path, "%s", tfevents_path(w));
		const char *base = strrchr(path, '/') + 1;
		T_ASSERT(strncmp(path, dir, strlen(dir)) == 0 && base == path + strlen(dir) + 1);
		T_ASSERT(strncmp(base, "events.out.tfevents.", 20) == 0);
		T_ASSERT(strspn(base + 20, "0123456789") == 10 && base[30] == '.');
		T_STREQ(base + 31, host);
		long long secs = atoll(base + 20);
		T_ASSERT(llabs(secs - (long long)time(NULL)) <= 2);
		tfevents_close(w);

		size_t len;
		uint8_t *p = (uint8_t *)slurp(path, &len);
		struct rec r[2];
		int torn;
		T_ASSERT(p && frames(p, len, r, 2, &torn) == 1 && !torn);
		/* Event{wall_time, file_version = "brain.Event:2"}; step 0 is left out as proto3 does */
		static const uint8_t tail[] = {0x1a, 0x0d, 'b', 'r', 'a', 'i', 'n', '.', 'E', 'v',
					       'e', 'n', 't', ':', '2'};
		T_ASSERT(r[0].n == 9 + sizeof tail && r[0].data[0] == 0x09);
		T_ASSERT(memcmp(r[0].data + 9, tail, sizeof tail) == 0);
		T_ASSERT(wall_of(&r[0]) >= (double)secs && wall_of(&r[0]) < (double)secs + 1);
		free(p);
	}
	T_CASE("a_second_writer_in_the_same_second_never_clobbers_the_first") {
		char err[512], p1[4096];
		struct tfevents *a = tfevents_open(tmp, err, sizeof err);
		struct tfevents *b = tfevents_open(tmp, err, sizeof err);
		struct tfevents *c = tfevents_open(tmp, err, sizeof err);
		T_ASSERT(a && b && c);
		if (!a || !b || !c)
			break;
		snprintf(p1, sizeof p1, "%s", tfevents_path(a));
		T_ASSERT(strcmp(p1, tfevents_path(b)) != 0 && strcmp(tfevents_path(b), tfevents_path(c)));
		/* same second: the same name plus ".1", ".2"; it sorts after the first */
		size_t n = strlen(p1);
		if (strncmp(p1, tfevents_path(c), n) == 0) {
			T_STREQ(tfevents_path(c) + n, ".2");
			T_ASSERT(strcmp(p1, tfevents_path(c)) < 0);
		}
		T_ASSERT(tfevents_scalar(a, "x", 1, 1.0) == 0 && tfevents_scalar(c, "x", 1, 2.0) == 0);
		tfevents_close(a);
		tfevents_close(b);
		tfevents_close(c);
		size_t len;
		uint8_t *p = (uint8_t *)slurp(p1, &len);
		struct rec r[4];
		int torn;
		T_ASSERT(p && frames(p, len, r, 4, &torn) == 2 && !torn);
		free(p);
	}

	snprintf(dir, sizeof dir, "%s/run", tmp);
	char run[4096] = "";
	T_CASE("scalars_and_text_frame_back_to_back_with_the_protos_field_numbers") {
		char err[512];
		struct tfevents *w = tfevents_open(dir, err, sizeof err);
		T_ASSERT(w);
		if (!w)
			break;
		snprintf(run, sizeof run, "%s", tfevents_path(w));
		T_ASSERT(tfevents_scalar(w, "loss", 10, 0.25) == 0);
		T_ASSERT(tfevents_text(w, "args", 3, "hi") == 0);
		T_ASSERT(tfevents_scalar(w, "lr", 0, 6e-4) == 0);
		T_ASSERT(tfevents_scalar(w, "loss", 11, 0.125) == 0);
		T_ASSERT(tfevents_flush(w) == 0);
		tfevents_close(w);

		size_t len;
		uint8_t *p = (uint8_t *)slurp(run, &len), buf[64];
		struct rec r[8];
		int torn;
		T_ASSERT(p && frames(p, len, r, 8, &torn) == 5 && !torn);
		if (!p)
			break;
		/* scalars: byte for byte what the encoder makes of the same wall time */
		size_t n = tfevents_encode_scalar(buf, sizeof buf, wall_of(&r[1]), 10, "loss", 0.25f);
		T_ASSERT(r[1].n == n && memcmp(r[1].data, buf, n) == 0);
		n = tfevents_encode_scalar(buf, sizeof buf, wall_of(&r[3]), 0, "lr", 6e-4f);
		T_ASSERT(r[3].n == n && memcmp(r[3].data, buf, n) == 0);
		T_ASSERT(wall_of(&r[1]) <= wall_of(&r[4]));
		/* text: Event{step 3, summary} > Summary{value} > Value{tag 1, tensor 8, metadata 9},
		 * TensorProto{dtype 1 = DT_STRING 7, tensor_shape 2 = {}, string_val 8},
		 * SummaryMetadata{plugin_data 1 = PluginData{plugin_name 1 = "text"}} */
		static const uint8_t text[] = {
			0x10, 0x03, 0x2a, 0x1c, 0x0a, 0x1a, 0x0a, 0x04, 'a', 'r', 'g', 's',
			0x42, 0x08, 0x08, 0x07, 0x12, 0x00, 0x42, 0x02, 'h', 'i',
			0x4a, 0x08, 0x0a, 0x06, 0x0a, 0x04, 't', 'e', 'x', 't',
		};
		T_ASSERT(r[2].n == 9 + sizeof text && r[2].data[0] == 0x09);
		T_ASSERT(memcmp(r[2].data + 9, text, sizeof text) == 0);
		free(p);
	}
	T_CASE("a_file_cut_inside_its_last_record_keeps_every_earlier_record") {
		size_t len;
		uint8_t *p = (uint8_t *)slurp(run, &len);
		struct rec r[8];
		int torn, bad = 0;
		if (!p || frames(p, len, r, 8, &torn) != 5) {
			T_ASSERT(0);
			break;
		}
		size_t last = (size_t)(r[4].data - p) - 12;
		/* every cut from the record's first byte to its last-but-one, each of the whole file */
		for (size_t cut = last + 1; cut < len; cut++) {
			char err[512];
			T_ASSERT(file_write_atomic(run, p, len, 0644, err, sizeof err) == 0);
			T_ASSERT(truncate(run, (off_t)cut) == 0);
			size_t l2;
			uint8_t *q = (uint8_t *)slurp(run, &l2);
			if (!q || l2 != cut || frames(q, l2, r, 8, &torn) != 4 || !torn)
				bad++;
			free(q);
		}
		T_ASSERT(bad == 0);
		T_ASSERT(truncate(run, (off_t)last) == 0);
		size_t l3;
		uint8_t *q = (uint8_t *)slurp(run, &l3);
		T_ASSERT(q && frames(q, l3, r, 8, &torn) == 4 && !torn);
		free(q);
		free(p);
	}
	T_CASE("a_flipped_bit_in_a_whole_record_is_a_crc_mismatch") {
		uint8_t buf[64], rec[64];
		size_t n = tfevents_encode_scalar(buf, sizeof buf, 1700000000.5, 10, "loss", 0.25f);
		uint8_t len8[8] = {(uint8_t)n};
		uint32_t hc = tfevents_masked_crc32c(len8, 8), dc = tfevents_masked_crc32c(buf, n);
		memcpy(rec, len8, 8);
		for (int i = 0; i < 4; i++) {
			rec[8 + i] = (uint8_t)(hc >> 8 * i);
			rec[12 + n + i] = (uint8_t)(dc >> 8 * i);
		}
		memcpy(rec + 12, buf, n);
		struct rec r[1];
		int torn;
		T_ASSERT(frames(rec, n + 16, r, 1, &torn) == 1);
		rec[12 + 5] ^= 0x10;
		T_ASSERT(frames(rec, n + 16, r, 1, &torn) == -1);
	}
	T_CASE("a_long_text_grows_the_record_buffer") {
		char err[512];
		size_t big = 100000;
		char *s = malloc(big + 1);
		for (size_t i = 0; i < big; i++)
			s[i] = (char)('a' + i % 26);
		s[big] = 0;
		snprintf(dir, sizeof dir, "%s/long", tmp);
		struct tfevents *w = tfevents_open(dir, err, sizeof err);
		T_ASSERT(w && tfevents_text(w, "args", 1, s) == 0);
		if (!w)
			break;
		char path[4096];
		snprintf(path, sizeof path, "%s", tfevents_path(w));
		tfevents_close(w);
		size_t len;
		uint8_t *p = (uint8_t *)slurp(path, &len);
		struct rec r[2];
		int torn;
		T_ASSERT(p && frames(p, len, r, 2, &torn) == 2 && !torn);
		T_ASSERT(p && memmem(r[1].data, r[1].n, s, big) != NULL);
		free(p);
		free(s);
	}
	T_CASE("a_failed_write_cuts_the_file_back_to_whole_records_and_names_it") {
		char err[512];
		snprintf(dir, sizeof dir, "%s/full", tmp);
		struct tfevents *w = tfevents_open(dir, err, sizeof err);
		T_ASSERT(w);
		if (!w)
			break;
		char path[4096];
		snprintf(path, sizeof path, "%s", tfevents_path(w));
		struct stat st;
		stat(path, &st);
		/* A file size limit a few bytes into the next record: write(2) takes part of it, then
		 * fails with EFBIG, as a filling disk would (ENOSPC). */
		struct rlimit old, lim;
		getrlimit(RLIMIT_FSIZE, &old);
		lim = old;
		lim.rlim_cur = (rlim_t)st.st_size + 20;
		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &lim);
		int rc = tfevents_scalar(w, "loss", 1, 1.0);
		setrlimit(RLIMIT_FSIZE, &old);
		T_ASSERT(rc == -1);
		T_ASSERT(strstr(tfevents_error(w), path) && strstr(tfevents_error(w), "write"));
		struct stat st2;
		stat(path, &st2);
		T_ASSERT(st2.st_size == st.st_size);
		/* and the file goes on well-formed */
		T_ASSERT(tfevents_scalar(w, "loss", 2, 2.0) == 0);
		tfevents_close(w);
		size_t len;
		uint8_t *p = (uint8_t *)slurp(path, &len);
		struct rec r[4];
		int torn;
		T_ASSERT(p && frames(p, len, r, 4, &torn) == 2 && !torn);
		free(p);
	}
	T_CASE("open_under_a_regular_file_fails_naming_the_path") {
		char err[512], f[512], sub[600];
		snprintf(f, sizeof f, "%s/plain", tmp);
		FILE *fp = fopen(f, "w");
		if (fp)
			fclose(fp);
		snprintf(sub, sizeof sub, "%s/runs", f);
		T_ASSERT(tfevents_open(sub, err, sizeof err) == NULL);
		T_ASSERT(strstr(err, sub) != NULL);
	}

	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmp);
	T_DONE();
}
