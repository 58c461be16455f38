/* The safetensors reader/writer of train, built into this program (the Makefile links only
 * the files under src/ckpt-merge-tp/). */
#include "train/safetensors.c"
