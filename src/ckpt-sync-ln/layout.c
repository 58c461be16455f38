/* ckpt-merge-tp's layout module, built into this program too (the Makefile links only the
 * files under src/ckpt-sync-ln/). */
#include "ckpt-merge-tp/layout.c"
