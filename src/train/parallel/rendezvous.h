/* rendezvous - ranks without MPI meet through files: rank 0's few bytes (the NCCL transport's
 * ncclUniqueIds) to every rank, with a bounded wait and an error that names who is missing.
 *
 * The GPU machines lent here have no MPI, and srun without PMIx gives the ranks nothing to talk
 * over; all they share is SLURM's environment (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID,
 * SLURM_STEP_ID) and a filesystem.  So, in a directory every rank sees (--save on a shared
 * filesystem for several nodes; /tmp is enough for one), under a name from the job and step:
 * in its subdirectory .lmtk-rendezvous-UID, as the names are easy to guess and the directory
 * may be a world-writable /tmp where another user could lay a file of theirs (an id of their
 * own, or a link) for the ranks to read.  That subdirectory is made 0700 and refused unless it
 * is a real directory of this user's that no one else may write; every file is opened
 * relative to it, without following links, and refused unless a regular file of this user's;
 * every file is written 0600 under a fresh temporary name (O_EXCL) and renamed into place:
 *
 *   rank 0   writes KEY.id (a fresh random nonce, the world size, the bytes) atomically
 *            (temporary name, fsync, rename), then waits for every other rank's acknowledgement;
 *   rank k   waits for KEY.id, reads it and writes KEY.ack.k: the id's nonce and a fresh nonce
 *            of its own;
 *   rank 0   once every rank has acknowledged this id, writes KEY.go: its nonce and every rank's
 *            own, and returns;
 *   rank k   returns when KEY.go holds both the id's nonce and its own.
 *
 * So every rank leaves only when all have the bytes, and every wait is bounded: rank 0 names the
 * ranks that never acknowledged, the others say whether rank 0 never wrote or never confirmed.
 * The nonces make files left under the same name by a crashed run harmless: rank 0 removes them
 * before it writes, a rank that read a stale id first sees the new one appear and acknowledges
 * again, and a stale go cannot hold a nonce this run's rank made.  rendezvous_clean() (rank 0,
 * once the ranks have formed their first communicator, which proves each read the id) removes
 * the files (the subdirectory stays: another job's ranks may be using it).  Polling costs a
 * small read every 20-200 ms per rank.  The subdirectory is hidden so it does not clutter a
 * checkpoint directory. */
#ifndef TRAIN_RENDEZVOUS_H
#define TRAIN_RENDEZVOUS_H

#include <stddef.h>

/* the subdirectory of DIR, followed by the effective uid in decimal */
#define RENDEZVOUS_SUBDIR ".lmtk-rendezvous-"

/* Rank 0's `bytes` bytes of buf to every rank of `world` through DIR/.lmtk-rendezvous-UID/KEY.*,
 * waiting at most `timeout` seconds.  0, or -1 + err (a file or directory of another user's
 * among them: refused). */
int rendezvous_bcast(const char *dir, const char *key, int rank, int world, double timeout,
		     void *buf, size_t bytes, char *err, size_t errlen);

/* Rank 0: removes the files once every rank is past rendezvous_bcast. */
void rendezvous_clean(const char *dir, const char *key, int world);

#endif
