#!/usr/bin/env bash
# share/lmtk/plot-loss.sh, the loss curve of a run: an SVG chart and a terminal summary.
# First a fabricated log (the log lines are the plotter's input spec): two runs appended, the
# second resumed from an older checkpoint than the first one's last line, a loss spike rolled
# back, an iteration line without a loss, end-of-training validation and test; the values the
# superseded lines carry are traps (the lowest of the log) that must not reach the numbers or
# the curve.  Then real logs of bin/train (a tiny model on the Megatron-written dataset): a run
# stopped by --exit-interval and resumed with --load, and a run whose job "died" after its
# last checkpoint (latest set back, as after a kill between saves), so the resume repeats
# iterations.  The SVG must be well-formed XML with one polyline point per surviving logged
# iteration, placed by value; the y axis must cover the losses; the summary's numbers must be
# the log's, character for character.
. "$(dirname "$0")/../lib.sh"
PL=$TOP/share/lmtk/plot-loss.sh
PY=/usr/bin/python3
cd "$T" || exit 3
export LC_ALL=C.UTF-8   # the sparkline in block characters (LC_ALL=C: in ASCII, tested below)
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT  # run.sh removes LMTK_TMP itself

# well_formed FILE: the SVG parses as XML (xmllint when installed, else python's parser)
well_formed() {
	if command -v xmllint >/dev/null; then xmllint --noout "$1" 2>/dev/null
	else "$PY" -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$1" 2>/dev/null; fi
}
# svg FILE: one "key value..." line per fact the checks need, read with an XML parser:
#   points N / xs X... / ys Y... (polyline#train), yaxis MIN MAX FRAME_TOP FRAME_BOTTOM,
#   yticks LABEL..., validation N, svgroot OK
svg() {
	"$PY" - "$1" <<'EOF'
import sys, xml.dom.minidom as m
d = m.parse(sys.argv[1])
root = d.documentElement
print("svgroot", root.tagName == "svg" and root.getAttribute("xmlns") == "http://www.w3.org/2000/svg")
pl = [p for p in d.getElementsByTagName("polyline") if p.getAttribute("id") == "train"]
pts = [tuple(map(float, p.split(","))) for p in pl[0].getAttribute("points").split()] if pl else []
print("points", len(pts))
print("xs", *[x for x, _ in pts])
print("ys", *[y for _, y in pts])
g = {e.getAttribute("id"): e for e in d.getElementsByTagName("g")}
ya = g["y-axis"]
lines = [float(l.getAttribute("y1")) for l in ya.getElementsByTagName("line")]
print("yaxis", ya.getAttribute("data-min"), ya.getAttribute("data-max"), min(lines), max(lines))
print("yticks", *[t.firstChild.data for t in ya.getElementsByTagName("text")])
print("validation", len(g["validation"].getElementsByTagName("circle")))
print("title", d.getElementsByTagName("title")[0].firstChild.data)
EOF
}
field() { sed -n "s/^$2 //p" "$1"; }   # field FACTS KEY
# sline SUMMARY KEY: the summary line "  KEY   rest", the rest
sline() { sed -n "s/^  $2  *//p" "$1"; }
# lm LOG: every training loss as logged, in order; vals LOG: the validation losses
lm() { grep -E ' iteration +[0-9]+/' "$1" | grep -o 'lm loss: [^ ]*' | cut -d' ' -f3; }
vals() { grep -o 'validation loss at iteration [0-9]* | lm loss value: [^ ]*' "$1" | sed 's/.* iteration \([0-9]*\) .*: \(.*\)/\2 (\1)/'; }
# the y coordinates put the lowest loss lowest, the highest highest (the SVG y axis points down),
# every point inside the frame, x strictly increasing
placed() {   # placed FACTS LOSSES...
	local f=$1; shift
	awk -v ys="$(field "$f" ys)" -v xs="$(field "$f" xs)" -v ax="$(field "$f" yaxis)" -v ls="$*" 'BEGIN {
		n = split(ys, y, " "); split(xs, x, " "); split(ls, l, " "); split(ax, a, " ")
		lo = hi = 1
		for (k = 1; k <= n; k++) {
			if (l[k] + 0 < l[lo] + 0) lo = k
			if (l[k] + 0 > l[hi] + 0) hi = k
			if (y[k] < a[3] - 0.05 || y[k] > a[4] + 0.05) exit 1
			if (k > 1 && x[k] <= x[k - 1]) exit 1
		}
		for (k = 1; k <= n; k++)
			if (y[k] > y[lo] || y[k] < y[hi]) exit 1
		if (n != split(ls, l, " ")) exit 1 }'
}
# covers FACTS MIN MAX: the y axis spans [MIN, MAX]
covers() { awk -v ax="$(field "$1" yaxis)" -v lo="$2" -v hi="$3" 'BEGIN { split(ax, a, " "); exit !(a[1] + 0 <= lo + 0 && a[2] + 0 >= hi + 0) }'; }
minof() { printf '%s\n' "$@" | sort -g | head -1; }
maxof() { printf '%s\n' "$@" | sort -g | tail -1; }

if [ ! -x "$PY" ]; then
	skip plot_loss "$PY is not installed (make deps installs it)"
	exit 0
fi

# --- usage and bad input ---
expect_rc no_arguments_is_usage 2 sh "$PL"
contains usage_line_printed "$T/err" '^usage: plot-loss'
expect_rc missing_log_exits_2 2 sh "$PL" no-such.log out.svg
printf 'train: GPT-2-style model, 1 parameters\n iteration        1/      10 | consumed samples: 4 | grad norm: 0.0 |\n' >noloss.log
expect_rc log_without_loss_lines_exits_2 2 sh "$PL" noloss.log noloss.svg
contains no_loss_lines_message "$T/err" '^plot-loss: noloss.log: no loss lines'
[ ! -e noloss.svg ] && ! ls -A | grep -q '\.tmp\.' && ok no_chart_and_no_temporary_without_loss_lines ||
	fail no_chart_and_no_temporary_without_loss_lines "$(ls -A)"
: >empty.log
expect_rc empty_log_exits_2 2 sh "$PL" empty.log

# --- a fabricated log: resume from an older checkpoint, a rollback, a line without a loss ---
cat >fab.log <<'EOF'
train: GPT-2-style model, 6852096 parameters (2 layers, hidden 128, 4 heads, vocab 50257 padded to 50304) on CPU
train: 100 iterations, 800 samples, 102400 tokens; micro-batch 4, global batch 8
 iteration       10/     100 | consumed samples:           80 | lm loss: 1.061438E+01 | grad norm: 3.202 |
 iteration       20/     100 | consumed samples:          160 | lm loss: 9.937733E+00 | grad norm: 1.827 |
-----------------------------------------------------------------------------------------------
 validation loss at iteration 20 | lm loss value: 9.301816E+00 | lm loss PPL: 1.095791E+04 | 
-----------------------------------------------------------------------------------------------
 iteration       30/     100 | consumed samples:          240 | lm loss: 8.800000E+00 | grad norm: 1.1 |
 iteration       40/     100 | consumed samples:          320 | lm loss: 8.100000E+00 | grad norm: 1.0 |
 validation loss at iteration 40 | lm loss value: 8.000000E+00 | lm loss PPL: 2.98E+03 | 
saved checkpoint at iteration       40 to ck (0.46 s)
 iteration       50/     100 | consumed samples:          400 | lm loss: 7.600000E+00 | grad norm: 1.0 |
 iteration       60/     100 | consumed samples:          480 | lm loss: 1.000000E+00 | grad norm: 1.0 |
 validation loss at iteration 60 | lm loss value: 1.100000E+00 | lm loss PPL: 3.0E+00 | 
train: GPT-2-style model, 6852096 parameters (2 layers, hidden 128, 4 heads, vocab 50257 padded to 50304) on CPU
train: resumed from ck/global_step40: iteration 40, 320 samples consumed
 iteration       50/     100 | consumed samples:          400 | lm loss: 7.500000E+00 | grad norm: 1.0 |
 iteration       60/     100 | consumed samples:          480 | lm loss: 7.200000E+00 | grad norm: 1.0 |
 validation loss at iteration 60 | lm loss value: 7.300000E+00 | lm loss PPL: 1.4E+03 | 
saved checkpoint at iteration       60 to ck (0.46 s)
 iteration       70/     100 | consumed samples:          560 | lm loss: 2.000000E+00 | grad norm: 9.0 |
loss spike at iteration 73: lm loss 2.500000E+01 is above 3 x its running mean 7.100000E+00: rolling back
loss spike at iteration 73 (lm loss 2.500000E+01): rolled back to ck/global_step60 (iteration 60) and skipped the 104 samples it trained on since
 iteration       70/     100 | consumed samples:          560 | lm loss: 6.900000E+00 | grad norm: 1.0 |
 iteration       80/     100 | consumed samples:          640 | lm loss: 6.600000E+00 | grad norm: 1.0 |
 validation loss at iteration 80 | lm loss value: 6.700000E+00 | lm loss PPL: 8.1E+02 | 
 iteration       90/     100 | consumed samples:          720 | grad norm: 0.000 | num zeros: 0.0 | number of skipped iterations:  10 |
 iteration      100/     100 | consumed samples:          800 | lm loss: 6.400000E+00 | grad norm: 1.0 |
 validation loss at iteration 100 | lm loss value: 6.500000E+00 | lm loss PPL: 6.6E+02 | 
 validation loss at the end of training for val data | lm loss value: 6.510000E+00 | lm loss PPL: 6.7E+02 | 
 validation loss at the end of training for test data | lm loss value: 6.520000E+00 | lm loss PPL: 6.7E+02 | 
train: done at iteration 100/100: 800 samples
EOF
# the surviving curve: 10 20 30 40 (run 1), 50 60 (run 2), 70 80 100 (after the rollback; 90 has no loss)
FAB=(1.061438E+01 9.937733E+00 8.800000E+00 8.100000E+00 7.500000E+00 7.200000E+00 6.900000E+00 6.600000E+00 6.400000E+00)
expect_rc fabricated_log_plots 0 sh "$PL" fab.log fab.svg
cp "$T/out" fab.sum
check fabricated_svg_is_well_formed_xml well_formed fab.svg
svg fab.svg >fab.facts 2>fab.err || fail fabricated_svg_parses "$(tail -3 fab.err)"
[ "$(field fab.facts svgroot)" = True ] && ok svg_root_element || fail svg_root_element "$(head -3 fab.svg)"
[ "$(field fab.facts points)" = 9 ] && ok one_point_per_surviving_iteration ||
	fail one_point_per_surviving_iteration "$(field fab.facts points) points, wanted 9"
check points_placed_by_value placed fab.facts "${FAB[@]}"
[ "$(field fab.facts validation)" = 5 ] && ok validation_points_drawn || fail validation_points_drawn "$(field fab.facts validation), wanted 5"
check y_axis_covers_losses covers fab.facts 6.4 10.61438
[ "$(field fab.facts yticks | wc -w)" -ge 3 ] && ok y_axis_has_tick_labels || fail y_axis_has_tick_labels "$(field fab.facts yticks)"
check x_axis_has_ticks_and_label grep -q '<text x="[0-9.]*" y="[0-9.]*" text-anchor="middle">iteration</text>' fab.svg
[ "$(field fab.facts title)" = "lm loss: $(basename "$T")/fab.log" ] && ok title_names_the_log || fail title_names_the_log "$(field fab.facts title)"
[ "$(sline fab.sum 'lm loss')" = "first 1.061438E+01 (iteration 10), last 6.400000E+00 (iteration 100), min 6.400000E+00 (iteration 100)" ] &&
	ok summary_first_last_min_are_the_logs || fail summary_first_last_min_are_the_logs "$(sline fab.sum 'lm loss')"
[ "$(sline fab.sum validation)" = "9.301816E+00 (20), 8.000000E+00 (40), 7.300000E+00 (60), 6.700000E+00 (80), 6.500000E+00 (100)" ] &&
	ok summary_validation_losses || fail summary_validation_losses "$(sline fab.sum validation)"
[ "$(sline fab.sum end)" = "validation 6.510000E+00, test 6.520000E+00" ] && ok summary_end_of_training || fail summary_end_of_training "$(sline fab.sum end)"
[ "$(sline fab.sum runs)" = "2 (resumed at iteration 40)" ] && ok summary_counts_runs_and_resumes || fail summary_counts_runs_and_resumes "$(sline fab.sum runs)"
[ "$(sline fab.sum iterations)" = "9 logged, 10 to 100" ] && ok summary_iterations || fail summary_iterations "$(sline fab.sum iterations)"
# 50, 60 and the validation at 60 of run 1; 70 before the rollback
contains superseded_points_counted fab.sum '^  superseded +4 points'
contains rollback_reported fab.sum '^  rollbacks +1 \(to iteration 60\)'
contains spike_reported fab.sum '^  spikes +1 \(iteration 73\)'
contains line_without_loss_reported fab.sum '^  no loss +1 iteration line'
lacks superseded_values_not_in_the_numbers fab.sum '1\.000000E\+00|1\.100000E\+00|2\.000000E\+00'
check superseded_stretches_drawn_dashed grep -q '<g id="superseded" .*stroke-dasharray' fab.svg
grep -q '>resumed at 40</text>' fab.svg && grep -q '>rolled back to 60</text>' fab.svg &&
	ok resume_and_rollback_marked || fail resume_and_rollback_marked "$(grep -c marker fab.svg) markers"
spark=$(sline fab.sum curve | awk '{ print $2 }')
[ "$(printf %s "$spark" | wc -m)" = 9 ] && [ "${spark:0:1}" = █ ] && [ "${spark: -1}" = ▁ ] &&
	ok sparkline_one_block_per_point_high_to_low || fail sparkline_one_block_per_point_high_to_low "'$spark'"
LC_ALL=C sh "$PL" fab.log >ascii.sum 2>&1
[ "$(sline ascii.sum curve | awk '{ print $2 }')" = '#*=~-..__' ] &&
	ok sparkline_in_ascii_outside_utf8 || fail sparkline_in_ascii_outside_utf8 "$(sline ascii.sum curve)"
contains summary_names_the_chart fab.sum '^  chart +fab.svg \(800x480 SVG\)'
ls -A | grep -q '\.tmp\.' && fail no_temporary_left "$(ls -A)" || ok no_temporary_left
# without OUT.svg: the summary only; from stdin
sh "$PL" - <fab.log >stdin.sum 2>&1
[ $? = 0 ] && [ "$(sline stdin.sum 'lm loss')" = "$(sline fab.sum 'lm loss')" ] && ! grep -q '^  chart' stdin.sum &&
	ok summary_only_from_stdin || fail summary_only_from_stdin "$(head -5 stdin.sum)"
expect_rc unwritable_chart_exits_3 3 sh "$PL" fab.log no-such-dir/x.svg
# a rank prefix before the line (srun --label, or DeepSpeed's launcher) changes nothing
sed 's/^/0: /' fab.log >prefixed.log
sh "$PL" prefixed.log >prefixed.sum 2>&1
[ "$(sline prefixed.sum 'lm loss')" = "$(sline fab.sum 'lm loss')" ] && ok rank_prefixed_lines_read ||
	fail rank_prefixed_lines_read "$(sline prefixed.sum 'lm loss')"

# --- real logs from bin/train: a tiny model on a Megatron dataset the project makes ---
MEG=$(tiny_dataset) || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
	--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 3e-3
	--min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 4 --train-iters 30 --log-interval 1
	--eval-interval 10 --eval-iters 2 --save-interval 10
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1)
# run 1 stops at 15 on --exit-interval (saved), run 2 resumes from it
"$BIN/train" "${MODEL[@]}" --save r --exit-interval 15 >real.log 2>real.err &&
	"$BIN/train" "${MODEL[@]}" --save r --load r >>real.log 2>>real.err
rc=$?
if [ $rc != 0 ] || ! grep -q 'train: resumed from r/global_step15: iteration 15' real.log; then
	fail real_run_and_resume "exit $rc: $(tail -3 real.err) $(grep '^train:' real.log)"
else
	expect_rc real_log_plots 0 sh "$PL" real.log real.svg
	cp "$T/out" real.sum
	check real_svg_is_well_formed_xml well_formed real.svg
	svg real.svg >real.facts 2>real.err2 || fail real_svg_parses "$(tail -3 real.err2)"
	mapfile -t L < <(lm real.log)
	n=$(grep -cE ' iteration +[0-9]+/ +30 \|.*lm loss:' real.log)
	[ "$n" = 30 ] && [ "$(field real.facts points)" = 30 ] && ok real_one_point_per_logged_iteration ||
		fail real_one_point_per_logged_iteration "$(field real.facts points) points for $n logged iterations"
	check real_points_placed_by_value placed real.facts "${L[@]}"
	mapfile -t V < <(vals real.log | cut -d' ' -f1)
	check real_y_axis_covers_training_and_validation covers real.facts "$(minof "${L[@]}" "${V[@]}")" "$(maxof "${L[@]}" "${V[@]}")"
	min=$(printf '%s\n' "${L[@]}" | awk '{ print NR, $1 }' | sort -g -k2,2 -k1,1 | head -1)
	want="first ${L[0]} (iteration 1), last ${L[29]} (iteration 30), min ${min#* } (iteration ${min%% *})"
	[ "$(sline real.sum 'lm loss')" = "$want" ] && ok real_summary_numbers_are_the_logs ||
		fail real_summary_numbers_are_the_logs "'$(sline real.sum 'lm loss')' != '$want'"
	want=$(vals real.log | paste -sd, | sed 's/,/, /g')
	[ -n "$want" ] && [ "$(sline real.sum validation)" = "$want" ] && ok real_summary_validation_is_the_logs ||
		fail real_summary_validation_is_the_logs "'$(sline real.sum validation)' != '$want'"
	[ "$(field real.facts validation)" = 3 ] && ok real_validation_points_drawn || fail real_validation_points_drawn "$(field real.facts validation)"
	[ "$(sline real.sum runs)" = "2 (resumed at iteration 15)" ] && ok real_summary_sees_the_resume || fail real_summary_sees_the_resume "$(sline real.sum runs)"
	want=$(grep -o 'end of training for val data | lm loss value: [^ ]*' real.log | sed 's/.*: //')
	[ -n "$want" ] && grep -q "^  end  *validation $want, test " real.sum && ok real_end_of_training_losses ||
		fail real_end_of_training_losses "$(sline real.sum end)"
	lacks real_nothing_superseded real.sum '^  superseded'
fi

# a job that died after logging iteration 25 with its newest checkpoint at 20: the resume
# repeats 21-25, and those of the first run are superseded
"$BIN/train" "${MODEL[@]}" --save d --exit-interval 25 >died.log 2>died.err
echo global_step20 >d/latest && echo 20 >d/latest_checkpointed_iteration.txt && rm -rf d/global_step25
"$BIN/train" "${MODEL[@]}" --save d --load d >>died.log 2>>died.err
rc=$?
if [ $rc != 0 ] || ! grep -q 'train: resumed from d/global_step20: iteration 20' died.log; then
	fail died_run_resumes_from_20 "exit $rc: $(tail -3 died.err) $(grep '^train:' died.log)"
else
	expect_rc died_log_plots 0 sh "$PL" died.log died.svg
	cp "$T/out" died.sum
	check died_svg_is_well_formed_xml well_formed died.svg
	svg died.svg >died.facts 2>/dev/null
	# the kept curve: run 1's 1-20, run 2's 21-30
	mapfile -t L < <( (lm died.log | head -20; lm died.log | tail -10))
	[ "$(field died.facts points)" = 30 ] && ok died_one_point_per_surviving_iteration ||
		fail died_one_point_per_surviving_iteration "$(field died.facts points) points, wanted 30"
	check died_points_are_the_resumed_runs placed died.facts "${L[@]}"
	contains died_superseded_counted died.sum '^  superseded +5 points'
	[ "$(sline died.sum 'lm loss' | sed 's/,.*//')" = "first ${L[0]} (iteration 1)" ] &&
		grep -q "last ${L[29]} (iteration 30)" died.sum && ok died_summary_numbers ||
		fail died_summary_numbers "$(sline died.sum 'lm loss')"
fi
