/* ckpt-merge-tp's progress module, built into this program too (the Makefile links only the
 * files under src/ckpt-sync-ln/). */
#include "ckpt-merge-tp/progress.c"
