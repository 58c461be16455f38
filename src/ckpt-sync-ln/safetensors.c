/* The safetensors reader/writer of train, built into this program (the Makefile links only
 * the files under src/ckpt-sync-ln/). */
#include "train/safetensors.c"
