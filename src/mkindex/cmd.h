/* cmd - mkindex's subcommands; each returns the exit status (msg.h) or dies with it. */
#ifndef MKINDEX_CMD_H
#define MKINDEX_CMD_H

#include <stdint.h>

/* token stream on stdin -> {prefix}_{key}_document.bin/.idx per key.  dtype 0: Megatron's pick;
 * vocab 0: the stream's. */
int cmd_build(const char *prefix, int dtype, uint64_t vocab);
int cmd_merge(const char *out, char **in, int nin);
/* json: one JSON object on stdout instead of the text (mkindex(1), JSON OUTPUT) */
int cmd_info(const char *prefix, int json);
/* documents [first, end) one per line; sequences: a line per sequence, an empty line after each
 * document */
int cmd_dump(const char *prefix, int has_range, uint64_t first, uint64_t end, int sequences);
/* vocab 0: ids not checked; json as cmd_info */
int cmd_check(const char *prefix, uint64_t vocab, int json);

/* weights: what to print of a catalogue.  range[s]: split s's [start, end) of every dataset
 * (0 train, 1 valid, 2 test), printed when has_range[s]; split -1: the flags, else that split's
 * groups as a -path file holds them. */
struct weights_opts {
	double range[3][2];
	int has_range[3];
	int split;
	int no_per_dataset;   /* no valid_NAME/test_NAME set per dataset */
};
int cmd_weights(const char *catalogue, const struct weights_opts *o);

/* A catalogue, read and checked (weights.c): entry i's prefix (in doc), set name and ratio. */
struct weights_entry {
	const char *path;
	char *name;
	double ratio;
};
struct weights_cat {
	struct json_t *doc;
	struct weights_entry *e;
	size_t n;
};
/* 0, or -1 with err naming the file and its line ("F:3:17: ...") or the entry and key
 * ("F: [2].ratio: ..."), c left empty */
int weights_load(const char *file, struct weights_cat *c, char *err, size_t errlen);
void weights_free(struct weights_cat *c);

#endif
