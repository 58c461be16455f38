#!/usr/bin/env bash
# Issue 25: a failed allocation names what it was sizing ("out of memory for the token index:
# 12.00 GiB", src/lib/xalloc.h), never a bare "out of memory".  This greps src/ for string
# literals that end at "out of memory" and prints each one it finds, the CUDA backend's included:
# there may be none.
. "$(dirname "$0")/../lib.sh"
cd "$TOP" || exit 3

# a literal ending "out of memory" or "out of memory\n"; strstr() looking for the phrase is no message
grep -rnE 'out of memory(\\n)?"' src --include='*.c' --include='*.h' --include='*.cu' |
	grep -v 'strstr(' >"$T/bare"
if [ -s "$T/bare" ]; then
	fail no_bare_out_of_memory_in_src \
		"$(wc -l <"$T/bare") bare messages; name what was being sized (xalloc_err, xmalloc):
$(cat "$T/bare")"
else
	ok no_bare_out_of_memory_in_src
fi

rm -rf "$T"
