/* rendezvous - ranks without MPI meet through files: rank 0's few bytes (the NCCL transport's
 * ncclUniqueIds) to every rank, with a bounded wait and an error that names who is missing.
 *
 * The GPU machines lent here have no MPI, and srun without PMIx gives the ranks nothing to talk
 * over; all they share is SLURM's environment (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID,
 * SLURM_STEP_ID) and a filesystem.  So, in a directory every rank sees (--save on a shared
 * filesystem for several nodes; /tmp is enough for one), under a name from the job and step:
 *
 *   rank 0   writes KEY.id (a random nonce, the world size, the bytes) atomically (temporary
 *            name, fsync, rename), then waits for an acknowledgement from every other rank;
 *   rank k   waits for KEY.id, reads it and writes KEY.ack.k holding the nonce it read;
 *   rank 0   once every rank has acknowledged this nonce, writes KEY.go (the nonce) and returns;
 *   rank k   returns when KEY.go holds the nonce it acknowledged.
 *
 * So every rank leaves only when all have the bytes, and every wait is bounded: rank 0 names the
 * ranks that never acknowledged, the others say whether rank 0 never wrote or never confirmed.
 * The nonce makes files left by a crashed run under the same name harmless: rank 0 removes them
 * first, and a rank that read a stale id before that sees the new one appear and acknowledges
 * again; a stale go never matches.  rendezvous_clean() (rank 0, once the ranks have formed their
 * first communicator, which proves each read the id) removes the files.  Polling costs a stat
 * and a small read every 20-200 ms per rank. */
#ifndef TRAIN_RENDEZVOUS_H
#define TRAIN_RENDEZVOUS_H

#include <stddef.h>

/* Rank 0's `bytes` bytes of buf to every rank of `world` through DIR/.lmtk-rendezvous-KEY.*,
 * waiting at most `timeout` seconds.  0, or -1 + err. */
int rendezvous_bcast(const char *dir, const char *key, int rank, int world, double timeout,
		     void *buf, size_t bytes, char *err, size_t errlen);

/* Rank 0: removes the files once every rank is past rendezvous_bcast. */
void rendezvous_clean(const char *dir, const char *key, int world);

#endif
