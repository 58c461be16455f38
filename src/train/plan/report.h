/* report - a plan (plan.h) as readable text or as JSON with the same content.
 *
 * Text: one section per question the runs' READMEs answered by hand (model, layout and memory,
 * ramp-up, schedule, checkpoints, time, data), numbers right-aligned with thousands separators,
 * each line saying where its number came from (a flag, a default, a formula).  JSON: the same
 * numbers, unrounded, under stable keys for scripts; sizes in bytes, times in seconds and days.
 * Errors and warnings also go to stderr (main.c), so a plan piped into a file still shouts. */
#ifndef TRAIN_REPORT_H
#define TRAIN_REPORT_H

#include <stdio.h>

#include "train/plan/plan.h"

void report_text(const struct plan *p, FILE *f);
/* 0, or -1 if the JSON could not be built or written */
int report_json(const struct plan *p, FILE *f);

#endif
