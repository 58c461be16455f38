/* logs - what a run tells: its start-up lines, Megatron's log line every --log-interval
 * iterations, the TensorBoard scalars (tfevents.h) with Megatron-DeepSpeed's tags, the
 * --codecarbon-dir energy rows (energy.h), the --log-path args file, the summary at the end.
 *
 * Only world rank 0 prints (every rank computes the same numbers: logs_quiet); warnings come
 * from any rank.  A TensorBoard or energy file that fails mid-run is warned about once and
 * closed: the run goes on without it. */
#ifndef TRAIN_RUN_LOGS_H
#define TRAIN_RUN_LOGS_H

#include <stddef.h>
#include <stdint.h>

#include "train/run/state.h"

/* printf to stdout, unless quiet (world ranks other than 0) */
void logs_quiet(int quiet);
int logs_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* one line and a flush (the data's progress lines come through it) */
void logs_line(const char *line);

/* --log-path: this run's command line in DIR/args_TIME.txt.  0, or -1 + err. */
int logs_write_args(const char *dir, const char *cmdline, char *err, size_t errlen);

/* What the run is: the model, the batch and the layout, the optimizer and its state, the flags
 * that do nothing here, the memory allocated - once the model is built (c: its config). */
void logs_startup(const struct run *r, const struct model_config *c);

/* TensorBoard (--tensorboard-dir, world rank 0) and --codecarbon-dir, once the run knows its
 * iteration.  0, or -1 + err with r->fail_code set. */
int logs_open(struct run *r, char *err, size_t errlen);

/* One TensorBoard scalar, when TensorBoard is open */
void logs_scalar(struct run *r, const char *tag, int64_t step, double v);

/* An iteration accounted (iter.c): its TensorBoard scalars, the energy counters, and every
 * --log-interval the log line, from L's counters, which start again after it. */
void logs_iteration(struct run *r, struct loop *L, const struct iter *q);

/* One row of --codecarbon-dir's CSV, and its TensorBoard scalars */
void logs_energy_row(struct run *r, int64_t it);

/* The last lines: how the run ended (rc, stop), its totals since t_start, the memory peak;
 * then the last energy row, and every log closed. */
void logs_close(struct run *r, int rc, int stop, double t_start);

#endif
