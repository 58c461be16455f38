#!/usr/bin/env bash
# The fuzz harnesses (tests/fuzz/, `make fuzz`) built with gcc and replayed over their seed
# corpus and every input that once crashed a parser (tests/fuzz/regress/<name>/): each parser
# must get through all of them - a crash, an abort or a hang here is a regression.
. "$(dirname "$0")/../lib.sh"
R=$TOP/build/fuzz-replay
for src in "$TOP"/tests/fuzz/*_*.c; do
	n=$(basename "$src" .c)
	if [ ! -x "$R/$n" ]; then
		fail "${n}_replay_built" "$R/$n is missing (make check builds it)"
		continue
	fi
	dirs=("$TOP/tests/fuzz/corpus/$n")
	[ -d "$TOP/tests/fuzz/regress/$n" ] && dirs+=("$TOP/tests/fuzz/regress/$n")
	seeds=$(find "${dirs[@]}" -maxdepth 1 -type f 2>/dev/null | wc -l)
	if [ "$seeds" = 0 ]; then
		fail "${n}_has_seeds" "no inputs in tests/fuzz/corpus/$n"
		continue
	fi
	timeout 120 "$R/$n" "${dirs[@]}" >"$T/$n.out" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q "^replay: $seeds inputs$" "$T/$n.out"; then ok "${n}_replays_its_${seeds}_inputs"
	else fail "${n}_replays_its_${seeds}_inputs" "exit $rc: $(tail -3 "$T/$n.out")"; fi
done
rm -rf "$T"
