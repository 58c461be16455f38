/* setup - a run built from its flags and plan: the device, the ranks and their groups, the
 * model, the data, the optimizer and its schedule, a checkpoint to resume from, the logs. */
#ifndef TRAIN_RUN_SETUP_H
#define TRAIN_RUN_SETUP_H

#include <stddef.h>

#include "train/run/state.h"

/* r->a, r->p and r->cmdline given: 0, or -1 + err with r->fail_code (and r->fail_said) set */
int setup_run(struct run *r, char *err, size_t errlen);

#endif
