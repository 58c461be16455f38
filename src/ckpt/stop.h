/* stop - SIGINT and SIGTERM as a request to stop, for the long loops over a checkpoint.
 *
 * A merge or a repair of hundreds of GB must not die half way with its temporaries left behind:
 * stop_catch() turns the two signals into a flag that stop_requested() reads between chunks, and
 * the caller unwinds, removes what it made, and exits. */
#ifndef CKPT_STOP_H
#define CKPT_STOP_H

/* Installs the SIGINT/SIGTERM handlers. */
void stop_catch(void);
/* A SIGINT or SIGTERM arrived since stop_catch(). */
int stop_requested(void);

#endif
