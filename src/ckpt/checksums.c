/* checksums - see checksums.h. */
#include "ckpt/checksums.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crc32c.h"
#include "ckpt/stop.h"
#include "msg.h"
#include "ckpt/safetensors.h"
#include "ckpt/shards.h"
#include "ckpt/steplock.h"
#include "xalloc.h"

#define CHUNK (64u << 20)

static int by_offset(const void *a, const void *b)
{
	const struct st_tensor *x = *(const struct st_tensor *const *)a,
				*y = *(const struct st_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The CRC-32C and size of all of f's tensors' bytes in file order.  0, or -1 interrupted. */
static int crc_of(const struct st_file *f, struct progress *pg, uint32_t *crc, uint64_t *bytes)
{
	const struct st_tensor **t = malloc((f->ntensors + 1) * sizeof *t);
	if (!t)
		return -1;
	for (int i = 0; i < f->ntensors; i++)
		t[i] = &f->tensors[i];
	qsort(t, f->ntensors, sizeof *t, by_offset);
	*crc = 0;
	*bytes = 0;
	for (int i = 0; i < f->ntensors; i++) {
		const unsigned char *p = t[i]->data;
		for (size_t off = 0; off < t[i]->nbytes; off += CHUNK) {
			size_t len = t[i]->nbytes - off < CHUNK ? t[i]->nbytes - off : CHUNK;
			/* the next chunk streams from disk while this one is checksummed */
			uintptr_t a = ((uintptr_t)(p + off) + len) & ~(uintptr_t)4095,
				  end = (uintptr_t)f->map + f->size;
			if (a < end)
				madvise((void *)a, end - a < CHUNK ? end - a : CHUNK, MADV_WILLNEED);
			*crc = crc32c_update(*crc, p + off, len);
			progress_add(pg, len);
			if (stop_requested()) {
				free(t);
				return -1;
			}
		}
		*bytes += t[i]->nbytes;
	}
	free(t);
	return 0;
}

int cs_verify_step(const char *path, struct progress *pg, struct cs_result *res, char *err,
		   size_t errlen)
{
	char mpath[4400];
	json_error_t je;
	int rc, lock = STEPLOCK_GONE;
	memset(res, 0, sizeof *res);
	for (int tries = 0; lock == STEPLOCK_GONE && tries < 4; tries++) {
		free(res->dir);
		res->dir = NULL;
		if ((rc = sh_step_dir(path, &res->dir, err, errlen)))
			return rc;
		lock = steplock_shared(res->dir, err, errlen);
		if (lock == STEPLOCK_ERROR)
			return EXIT_FAILED;
	}
	if (lock == STEPLOCK_GONE)
		return errf(err, errlen, "%s: removed while it was being opened", res->dir), EXIT_FAILED;
	snprintf(mpath, sizeof mpath, "%s/manifest.json", res->dir);
	json_t *man = json_load_file(mpath, 0, &je), *files = json_object_get(man, "files");
	if (!man || !json_is_object(files) || json_object_size(files) == 0) {
		errf(err, errlen, "%s: %s", mpath, !man ? je.text : "no \"files\" to check");
		json_decref(man);
		steplock_release(lock);
		return EXIT_USAGE;
	}
	res->files = calloc(json_object_size(files), sizeof *res->files);
	if (!res->files) {
		json_decref(man);
		steplock_release(lock);
		return xalloc_err(err, errlen, "the manifest's file checks",
				  json_object_size(files) * sizeof *res->files), EXIT_FAILED;
	}
	const char *name;
	json_t *v;
	uint64_t total = 0;
	json_object_foreach(files, name, v)
		if (json_is_integer(json_object_get(v, "bytes")))
			total += json_integer_value(json_object_get(v, "bytes"));
	progress_begin(pg, "verifying", NULL, total);
	total = 0;
	rc = 0;
	json_object_foreach(files, name, v) {
		struct cs_file *f = &res->files[res->n++];
		const char *want_crc = json_string_value(json_object_get(v, "crc32c"));
		json_t *wb = json_object_get(v, "bytes");
		char fpath[4400], why[512];
		snprintf(f->name, sizeof f->name, "%s", name);
		if (!want_crc || !json_is_integer(wb) || strchr(name, '/') || name[0] == '.') {
			snprintf(f->why, sizeof f->why, "the manifest's entry is not {\"bytes\": N, "
				 "\"crc32c\": \"%%08x\"} of a file in the step");
			res->bad++;
			continue;
		}
		snprintf(fpath, sizeof fpath, "%s/%s", res->dir, name);
		struct st_file *sf = st_open(fpath, why, sizeof why);
		if (!sf) {   /* the message without the path, which the caller puts in front */
			size_t l = strlen(fpath);
			snprintf(f->why, sizeof f->why, "%s", strncmp(why, fpath, l) == 0 &&
				 strncmp(why + l, ": ", 2) == 0 ? why + l + 2 : why);
			res->bad++;
			continue;
		}
		uint32_t crc;
		if (crc_of(sf, pg, &crc, &f->bytes) < 0) {
			st_close(sf);
			rc = (errf(err, errlen, "interrupted"), EXIT_FAILED);
			break;
		}
		st_close(sf);
		total += f->bytes;
		snprintf(f->crc, sizeof f->crc, "%08x", crc);
		if ((json_int_t)f->bytes != json_integer_value(wb) || strcmp(f->crc, want_crc) != 0) {
			snprintf(f->why, sizeof f->why, "checksum mismatch: CRC-32C %s of %llu bytes, the "
				 "manifest says %.16s of %lld", f->crc, (unsigned long long)f->bytes,
				 want_crc, (long long)json_integer_value(wb));
			res->bad++;
			continue;
		}
		f->ok = 1;
	}
	progress_end(pg);
	res->bytes = total;
	json_decref(man);
	steplock_release(lock);
	return rc ? rc : res->bad ? EXIT_FINDING : EXIT_OK;
}

void cs_free(struct cs_result *res)
{
	free(res->dir);
	free(res->files);
	memset(res, 0, sizeof *res);
}
