#include "msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *prog_name = "lmtk";

void msg_init(const char *argv0)
{
	const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
	prog_name = slash ? slash + 1 : (argv0 ? argv0 : "lmtk");
}

static void vmsg(const char *fmt, va_list ap)
{
	/* one fprintf per message so concurrent writers (srun ranks) don't interleave mid-line */
	char buf[4096];
	vsnprintf(buf, sizeof buf, fmt, ap);
	fprintf(stderr, "%s: %s\n", prog_name, buf);
}

void warnx_(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

void die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	exit(code);
}

int errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	if (!err || !len)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}
