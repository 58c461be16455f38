/* pickle - the opcode machine behind pt.h (see pt.h for what it reads and why it runs
 * nothing).  Internal to src/ckpt: pt.c hands it data.pkl's bytes, it hands back the root of
 * a checked value tree whose values are all in f->vals_, storages registered through
 * pt_storage_add_(). */
#ifndef CKPT_PICKLE_H
#define CKPT_PICKLE_H

#include "ckpt/pt.h"

/* Reads the pickle p[0..n) (entry: its name for messages) into f->root.  0, or -1 and f->err
 * ("PATH: ENTRY offset N (OPCODE): what").  Values made before a failure stay in f->vals_. */
int pkl_load(struct pt_file *f, const uint8_t *p, size_t n, const char *entry);

/* pt.c: the storage KEY of the zip, registered once (a second use must agree on dtype and
 * numel); NULL and msg on a problem (missing entry, wrong size, compressed). */
const struct pt_storage *pt_storage_add_(struct pt_file *f, const char *key, enum pt_dtype dtype,
					 int64_t numel, const char *location, char *msg,
					 size_t msglen);

#endif
