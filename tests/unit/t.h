/* t.h - the unit-test protocol shared with tests/run.sh: one "ok NAME" or
 * "FAIL NAME: file:line: expr" line per case; main() returns nonzero if any failed. */
#ifndef T_H
#define T_H
#include <stdio.h>
#include <string.h>

static int t_failed;
static const char *t_case = "?";
static int t_case_bad;

#define T_CASE(name) for (t_case = (name), t_case_bad = 0; t_case; \
        (void)(t_case_bad ? 0 : printf("ok %s\n", t_case)), t_case = NULL)
#define T_ASSERT(expr) do { if (!(expr)) { \
        printf("FAIL %s: %s:%d: %s\n", t_case, __FILE__, __LINE__, #expr); \
        t_case_bad = 1; t_failed = 1; } } while (0)
#define T_STREQ(a, b) T_ASSERT(strcmp((a), (b)) == 0)
#define T_DONE() return t_failed
#endif
