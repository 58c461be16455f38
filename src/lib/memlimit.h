/* memlimit - how much memory this process may still allocate before the kernel kills it.
 *
 * A job under SLURM (or any container) runs in a memory cgroup whose limit is usually far below
 * the machine's memory: a process that allocates past it is killed by the OOM killer with
 * SIGKILL (exit 137) and no word in its log.  So a program about to allocate a known large
 * amount (train's model, whose size the plan computes) compares it with this first and refuses,
 * naming both numbers.
 *
 * The answer is the least of: MemAvailable from /proc/meminfo; for cgroup v1, the memory
 * controller's memory.limit_in_bytes minus memory.usage_in_bytes of this process's cgroup and
 * the limits of its ancestors (the hierarchy's); for cgroup v2, memory.max minus memory.current
 * likewise.  The cgroup's path comes from /proc/self/cgroup and its mount from
 * /proc/self/mountinfo; every number read is checked (a file that is not a number is ignored,
 * never trusted as 0).  "max" or v1's "no limit" (about 2^63) is no limit. */
#ifndef LMTK_MEMLIMIT_H
#define LMTK_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes this process may still allocate; `what` (when not NULL) names the binding limit, e.g.
 * "cgroup v1 memory.limit_in_bytes of /lmtk (1.50 GiB, 0.01 GiB in use)" or "MemAvailable".
 * 0 and *avail set, or -1 when nothing could be read (then nothing is known: do not refuse). */
int memlimit_available(uint64_t *avail, char *what, size_t whatlen);

#endif
