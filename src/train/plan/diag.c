#include "train/plan/diag.h"

#include <stdarg.h>
#include <stdio.h>

#include "xalloc.h"

static void add(char ***list, int *n, const char *fmt, va_list ap)
{
	char *s;
	char **l = xrealloc(*list, (size_t)(*n + 1) * sizeof *l, "the plan's list of messages");
	if (vasprintf(&s, fmt, ap) < 0)
		xalloc_die("a message of the plan", 0);
	l[(*n)++] = s;
	*list = l;
}

void plan_error(struct plan *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(&p->errors, &p->nerrors, fmt, ap);
	va_end(ap);
}

void plan_warning(struct plan *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(&p->warnings, &p->nwarnings, fmt, ap);
	va_end(ap);
}

void plan_note(struct plan *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add(&p->notes, &p->nnotes, fmt, ap);
	va_end(ap);
}
