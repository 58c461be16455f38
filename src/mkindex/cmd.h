/* cmd - mkindex's subcommands; each returns the exit status (msg.h) or dies with it. */
#ifndef MKINDEX_CMD_H
#define MKINDEX_CMD_H

#include <stdint.h>

/* token stream on stdin -> {prefix}_{key}_document.bin/.idx per key.  dtype 0: Megatron's pick;
 * vocab 0: the stream's. */
int cmd_build(const char *prefix, int dtype, uint64_t vocab);
int cmd_merge(const char *out, char **in, int nin);
int cmd_info(const char *prefix);
/* documents [first, end) one per line; sequences: a line per sequence, an empty line after each
 * document */
int cmd_dump(const char *prefix, int has_range, uint64_t first, uint64_t end, int sequences);
/* vocab 0: ids not checked */
int cmd_check(const char *prefix, uint64_t vocab);

#endif
