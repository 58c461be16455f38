/* manifest - the counters of a checkpoint's manifest.json checked before anything trusts them.
 *
 * A manifest is input from elsewhere: it may have been edited, damaged, or written by a broken
 * tool.  Loaded as it is, an "iteration" of -5 resumed a run at -5 that then saved over intact
 * steps, and an optimizer "step" of -1 stepped Adam into NaN weights.  So every reader (train's
 * --load, the tools' sh_open) passes the manifest through manifest_check() first, and refuses a
 * field out of its range naming the field and the file.
 *
 * The ranges: every counter is a whole number from 0 to 2^53 (a JSON number past that is not
 * exact); the learning rates finite and not negative; the loss scale finite and positive; TP and
 * PP from 1 to 65536.  The relations that hold for every manifest train writes: each iteration
 * adds its global batch to both the consumed samples and the data position (skipped ranges and
 * rollbacks add to the data position only), so consumed_samples <= data_position; nan
 * iterations are skipped iterations, which are iterations.  (The optimizer's step is not bound
 * by the iteration: DeepSpeed's count runs one ahead of Megatron's iteration, and a conversion
 * keeps it.)  Fields absent from older manifests are not required here; the readers require what
 * they need. */
#ifndef CKPT_MANIFEST_H
#define CKPT_MANIFEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define MANIFEST_COUNT_MAX ((int64_t)1 << 53)

/* 0, or -1 + err: "PATH: "FIELD" is V, why: the manifest is damaged or was edited; refusing to
 * load it" (path names the manifest in messages). */
int manifest_check(json_t *man, const char *path, char *err, size_t errlen);

#endif
