#include "ckpt/mds_int.h"
int mds_open_uni_(struct mds *c, char *err, size_t errlen) { (void)c; return fail(err, errlen, "todo"); }
