/* ckpt-merge-tp's shards module, built into this program too (the Makefile links only the
 * files under src/ckpt-sync-ln/). */
#include "ckpt-merge-tp/shards.c"
