/* ckpt - what an lmtk checkpoint is, and the library that reads, checks and rewrites one
 * (lmtk-checkpoint(5) is the user's description; this is the code's).
 *
 *   SAVE/latest                               "global_stepN": the newest complete step
 *   SAVE/latest_checkpointed_iteration.txt    "N", Megatron's name for the same
 *   SAVE/global_stepN/manifest.json           iteration, counters, schedule, optimizer state,
 *                                             the layout (TP x PP, which stage holds which
 *                                             layer), the model's shape, and every shard's
 *                                             size and CRC-32C
 *   SAVE/global_stepN/.lock                   empty: readers flock(2) it shared (steplock.h)
 *   SAVE/global_stepN/rank_tpXX_ppYYY.safetensors
 *                                             one per TP rank and PP stage: each parameter's
 *                                             fp32 master weight, then exp_avg.NAME and
 *                                             exp_avg_sq.NAME (Adam's moments), in the model
 *                                             table's order, TP-split as Megatron splits it
 *
 * A step appears complete or not at all: it is written under a temporary name, fsynced and
 * renamed into place, and only then does `latest` move.  Nothing is trusted before it is
 * checked: the manifest parses, every shard exists with its recorded size and checksum, every
 * tensor has its rank's shape.
 *
 * The library (src/ckpt, linked by train, ckpt-merge-tp and ckpt-sync-ln; no program compiles
 * another program's sources):
 *   safetensors.h  the tensor file format: streaming writer, checked reader
 *   layout.h       the tensor table from the manifest's model, TP splits, PP stage placement
 *   shards.h       one step opened: manifest and every shard mapped and verified; full tensors
 *                  gathered block by block from the ranks' parts
 *   reshard.h      a step written in another TP/PP layout, streaming
 *   outdir.h       an output directory that appears complete or not at all
 *   stop.h         SIGINT/SIGTERM as a request to stop, so long work unwinds cleanly (its
 *                  progress line is lib/progress.h's)
 *   pt.h           PyTorch .pt files (torch.save's zip + pickle) read without running any
 *                  of the pickle's code: the way in for Megatron-DeepSpeed checkpoints
 *   steplock.h     the readers' lock of a step (STEPDIR/.lock), so pruning (train
 *                  --save-keep) never removes a step being read
 *   checksums.h    a step's files against the manifest's sizes and CRC-32Cs, for any
 *                  checkpoint: a copy's check (ckpt-sync-ln --verify, backups)
 *   mds.h          a Megatron-DeepSpeed checkpoint (DeepSpeed's pipeline files with the bf16
 *                  optimizer's ZeRO partitions, or plain Megatron's model_optim_rng.pt) read
 *                  as lmtk's tensors and manifest, streamed, and presented as a shards.h
 *                  checkpoint that reshard.h, sh_compare and train's load take as they are
 *   tokrec.h       the manifest's record of the tokenizer files (absolute path, size, SHA-256):
 *                  train's of the files it was given, ckpt-merge-tp --from hf's of an HF dir's
 *
 *   save.h         the one writer of a step, train's and the tools': the step directory and its
 *                  lock, shard metadata, the manifest's text and files, the publish (`latest`)
 *
 * train writes and loads its own steps with train/run/ckpt.c (over safetensors.h and save.h):
 * the layout of its model table is the one layout.h repeats, and the tests prove the two agree
 * byte for byte. */
#ifndef CKPT_CKPT_H
#define CKPT_CKPT_H

#include "ckpt/checksums.h"
#include "ckpt/layout.h"
#include "ckpt/mds.h"
#include "outdir.h"
#include "ckpt/pt.h"
#include "ckpt/reshard.h"
#include "ckpt/safetensors.h"
#include "ckpt/save.h"
#include "ckpt/shards.h"
#include "ckpt/steplock.h"
#include "ckpt/tokrec.h"
#include "ckpt/stop.h"

#endif
