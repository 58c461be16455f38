/* merge - concatenate datasets the way Megatron's MMapIndexedDatasetBuilder.merge_file_ does.
 *
 * Every input is verified before a byte is written (a merge of a corrupt shard would hide it in
 * a larger file), and must have the first input's dtype.  The .bin bytes are copied by the
 * kernel where it can (copy_file_range), the .idx arrays rewritten on the fly: nothing of the
 * inputs is held in memory beyond their mapped .idx. */
#include <stdlib.h>

#include "cmd.h"
#include "idxwrite.h"
#include "msg.h"
#include "xalloc.h"

int cmd_merge(const char *out, char **in, int nin)
{
	struct idx *x = calloc((size_t)nin, sizeof *x);
	char err[2048];
	int rc = EXIT_OK;

	if (!x)
		xalloc_die("the input indexes", (size_t)nin * sizeof *x);
	for (int k = 0; k < nin; k++)
		x[k].bin_fd = -1;
	for (int k = 0; k < nin && rc == EXIT_OK; k++) {
		int r = idx_open(&x[k], in[k], err, sizeof err);
		if (r < 0) {
			warn("%s", err);
			rc = r == IDX_EIO ? EXIT_FAILED : EXIT_USAGE;
		}
	}
	char *o = idx_prefix(out);   /* "merged.bin" means the pair merged.bin/.idx */
	if (!o)
		xalloc_die("the output prefix", 0);
	out = o;
	if (rc == EXIT_OK) {
		struct progress pg;
		int r = idx_merge(out, x, nin, &pg, err, sizeof err);
		if (r < 0) {
			warn("%s; nothing written", err);
			rc = r == -2 ? EXIT_USAGE : EXIT_FAILED;
		}
	}
	if (rc == EXIT_OK) {
		uint64_t n = 0, t = 0;
		for (int k = 0; k < nin; k++)
			n += x[k].n, t += x[k].tokens;
		warn("%s.{bin,idx}: %d datasets merged: %llu sequences, %llu tokens, %s", out, nin,
		     (unsigned long long)n, (unsigned long long)t, idx_dtype_name(x[0].dtype));
	}
	for (int k = 0; k < nin; k++)
		idx_close(&x[k]);
	free(x);
	free(o);
	return rc;
}
