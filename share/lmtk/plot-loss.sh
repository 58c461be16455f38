#!/bin/sh
# plot-loss - the loss curve of a training run, from its main log: an SVG chart and a summary.
#
# Usage: plot-loss [-t TITLE] LOG [OUT.svg]      (installed as PREFIX/bin/plot-loss; plot-loss(1))
#
# LOG is train's stdout (or Megatron-DeepSpeed's own main log; '-' reads stdin).  Two kinds of
# line carry the curve, wherever they sit in a line (a rank or timestamp prefix is fine):
#   " iteration       20/     300 | consumed samples: ... | lm loss: 8.019295E+00 | ..."
#   " validation loss at iteration 20 | lm loss value: 7.929597E+00 | ..."
# The summary goes to stdout: first, last and min training loss, the validation losses, the
# end-of-training validation and test losses, and a sparkline of the curve.  With OUT.svg, a
# line chart is written too (training loss against iteration, validation points, resume and
# rollback markers, loss spikes), a plain SVG file any browser opens.
#
# A log usually holds several runs: a job array appends each task's output, and each task
# resumes from the newest checkpoint, which can be older than the last line logged before the
# job died.  The chart shows the history of the weights that survived: when the iterations go
# back - a "train: resumed from ...: iteration N" line (Megatron: "successfully loaded
# checkpoint from ... at iteration N"), a "rolled back to ... (iteration N)" line after a loss
# spike, or a smaller iteration number without either - the points logged after iteration N are
# superseded.  They are drawn faint and dashed, kept out of the numbers, and counted.
#
# Pure POSIX sh and awk: runs on a login node with nothing installed.  The SVG is written to a
# temporary name and renamed, as every lmtk output.
# Exit: 0 done; 2 usage, an unreadable LOG or one without loss lines; 3 OUT.svg not written.
me=plot-loss
usage() { echo "usage: $me [-t TITLE] LOG [OUT.svg]" >&2; exit 2; }

help() {
	echo "usage: $me [-t TITLE] LOG [OUT.svg]"
	echo "The loss curve of a training log (train's stdout, or Megatron's main log; - is stdin):"
	echo "a summary on stdout and, with OUT.svg, an SVG chart.  -t TITLE: the chart's title."
	echo "Exit: 0 done; 2 usage, an unreadable LOG or one without loss lines; 3 OUT.svg not written."
	exit 0
}
case ${1:-} in --help) help ;; --) ;; --*) echo "$me: unknown option $1" >&2; usage ;; esac
title=
while getopts t:h o; do
	case $o in
	t) title=$OPTARG ;;
	h) help ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] && [ $# -le 2 ] || usage
log=$1 out=${2:-}
if [ "$log" != - ] && { [ ! -f "$log" ] || [ ! -r "$log" ]; }; then
	echo "$me: $log: not a readable file" >&2
	exit 2
fi
if [ -z "$title" ]; then
	case $log in
	-) title="lm loss" ;;
	*) title="lm loss: $(basename "$(cd "$(dirname "$log")" && pwd)")/$(basename "$log")" ;;
	esac
fi

# The sparkline in block characters on a UTF-8 terminal (or when the locale says nothing),
# in ASCII when the user chose another charset.
blocks="▁ ▂ ▃ ▄ ▅ ▆ ▇ █"
if [ -n "${LC_ALL:-${LC_CTYPE:-${LANG:-}}}" ]; then
	case $(locale charmap 2>/dev/null) in
	UTF-8 | utf8 | "") ;;
	*) blocks="_ . - ~ = + * #" ;;
	esac
fi

tmp=
if [ -n "$out" ]; then
	case $out in
	*/*) dir=${out%/*} dir=${dir:-/} ;;
	*) dir=. ;;
	esac
	tmp=$dir/.${out##*/}.tmp.$$
	trap 'rm -f "$tmp"' EXIT
	trap 'exit 130' INT TERM
	(: >"$tmp") 2>/dev/null || { echo "$me: $out: cannot write in $dir" >&2; exit 3; }
fi

# LC_ALL=C: numbers with a decimal point whatever the locale; the awk only moves UTF-8 bytes.
# Strings go through the environment: awk -v would interpret backslashes in them.
PL_LOG=$log PL_SVG=$tmp PL_OUT=$out PL_TITLE=$title PL_BLOCKS=$blocks LC_ALL=C awk '
function num(s) { return s ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
function after(re,   s) {   # the text matched by re with its leading label removed
	if (!match($0, re))
		return ""
	s = substr($0, RSTART, RLENGTH)
	sub(/^[^0-9]*/, "", s)
	return s
}
function value(label,   s) {   # "label X |" -> X
	if (!match($0, label " *[^ |]+"))
		return ""
	s = substr($0, RSTART + length(label), RLENGTH - length(label))
	gsub(/ /, "", s)
	return s
}
# Points after iteration `it` belong to weights that were thrown away: move them aside.
function supersede(it,   k, f) {
	f = n + 1
	while (f > 1 && ti[f - 1] > it)
		f--
	if (f <= n) {
		nseg++
		if (f > 1) {   # the stretch forks from the last point kept
			ns++; sx[ns] = ti[f - 1]; sy[ns] = tl[f - 1]; sseg[ns] = nseg; sfork[ns] = 1
		}
		for (k = f; k <= n; k++) {
			ns++; sx[ns] = ti[k]; sy[ns] = tl[k]; sseg[ns] = nseg
		}
		nsup += n - f + 1
		n = f - 1
	}
	f = nv + 1
	while (f > 1 && vi[f - 1] > it)
		f--
	for (k = f; k <= nv; k++) {
		nsv++; svx[nsv] = vi[k]; svy[nsv] = vl[k]
	}
	nsup += nv - f + 1
	nv = f - 1
}
function floor(x) { return x == int(x) || x >= 0 ? int(x) : int(x) - 1 }
function ceil(x) { return -floor(-x) }
function log10(x) { return log(x) / log(10) }
function step(range,   e, f) {   # a 1-2-5 step giving about 5 intervals over range
	if (range <= 0)
		range = 1
	e = 10 ^ floor(log10(range / 5))
	f = range / 5 / e
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * e
}
function decimals(st,   d) { d = -floor(log10(st) + 1e-9); return d < 0 ? 0 : d }
function X(it) { return sprintf("%.1f", ML + (it - x0) / (x1 - x0) * PW) }
function Y(v) {
	if (v > y1) v = y1
	if (v < y0) v = y0
	return sprintf("%.1f", MT + (y1 - v) / (y1 - y0) * PH)
}
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); gsub(/"/, "\\&quot;", s); return s }
function short(s) { return sprintf("%.4g", s + 0) }
function w(s) { print s > svg }

BEGIN {
	me = "plot-loss"; logname = ENVIRON["PL_LOG"]; svg = ENVIRON["PL_SVG"]; svgname = ENVIRON["PL_OUT"]
	title = ENVIRON["PL_TITLE"]; blocks = ENVIRON["PL_BLOCKS"]
	n = nv = ns = nsv = nseg = nsup = nres = nrb = nspk = runs = bad = 0
}

/ iteration +[0-9]+\/ *[0-9]+ *\|/ {
	lines++
	it = after(" iteration +[0-9]+") + 0
	if (n && it <= ti[n])
		supersede(it - 1)
	v = value("lm loss:")
	if (v == "") { noloss++; next }
	if (!num(v)) { bad++; next }
	n++; ti[n] = it; tl[n] = v + 0; ts[n] = v
	next
}
/validation loss at iteration [0-9]+ *\| *lm loss value:/ {
	it = after("validation loss at iteration [0-9]+") + 0
	v = value("lm loss value:")
	if (!num(v)) { bad++; next }
	if (nv && it <= vi[nv])
		supersede(it - 1)
	nv++; vi[nv] = it; vl[nv] = v + 0; vs[nv] = v
	next
}
/validation loss at the end of training for val data/ { endval = value("lm loss value:"); next }
/validation loss at the end of training for test data/ { endtest = value("lm loss value:"); next }
/train: [A-Za-z0-9-]+-style model, [0-9]+ parameters/ { runs++; next }
/train: resumed from .*: iteration [0-9]+/ || /successfully loaded checkpoint from .* at iteration [0-9]+/ {
	it = after("iteration [0-9]+") + 0
	supersede(it)
	nres++; resit[nres] = it
	next
}
/loss spike at iteration [0-9]+: lm loss / {
	nspk++; spkit[nspk] = after("iteration [0-9]+") + 0; spkv[nspk] = value("lm loss")
	next
}
/loss spike at iteration [0-9]+ .*rolled back to .*\(iteration [0-9]+\)/ {
	it = after("\\(iteration [0-9]+") + 0
	supersede(it)
	nrb++; rbit[nrb] = it
	next
}

END {
	if (!n) {
		printf "%s: %s: no loss lines (\" iteration N/ M | ... | lm loss: X |\"): %s\n", me,
		       logname, (lines ? lines " iteration lines without a loss" : "not a training log") > "/dev/stderr"
		exit 2
	}
	# the numbers, from the surviving curve
	first = 1; last = n; lo = 1; hi = 1
	for (k = 2; k <= n; k++) {
		if (tl[k] < tl[lo]) lo = k
		if (tl[k] > tl[hi]) hi = k
	}
	ymin = tl[lo]; ymax = tl[hi]
	for (k = 1; k <= nv; k++) {
		if (vl[k] < ymin) ymin = vl[k]
		if (vl[k] > ymax) ymax = vl[k]
	}

	# --- the summary ---
	print "loss curve of " logname
	if (runs > 1 || nres)
		printf "  runs        %d%s\n", (runs > nres ? runs : nres + 1), (nres ? resumes() : "")
	printf "  iterations  %d logged, %d to %d\n", n, ti[1], ti[n]
	printf "  lm loss     first %s (iteration %d), last %s (iteration %d), min %s (iteration %d)\n",
	       ts[first], ti[first], ts[last], ti[last], ts[lo], ti[lo]
	if (nv) {
		s = ""
		for (k = 1; k <= nv; k++) {
			if (nv > 8 && k == 3) { s = s ", ..."; k = nv - 4; continue }
			s = s (k > 1 ? ", " : "") vs[k] " (" vi[k] ")"
		}
		printf "  validation  %s\n", s
	}
	if (endval != "" || endtest != "")
		printf "  end         %s%s%s\n", endval != "" ? "validation " endval : "",
		       endval != "" && endtest != "" ? ", " : "", endtest != "" ? "test " endtest : ""
	if (nsup)
		printf "  superseded  %d points logged after a resume point or rollback (dashed in the chart)\n", nsup
	if (nrb)
		printf "  rollbacks   %d (to iteration %d%s)\n", nrb, rbit[1], (nrb > 1 ? ", ..." : "")
	if (nspk)
		printf "  spikes      %d (iteration %d%s)\n", nspk, spkit[1], (nspk > 1 ? ", ..." : "")
	if (bad || noloss)
		printf "  no loss     %d iteration line%s without a finite loss (every update skipped)\n", bad + noloss, (bad + noloss > 1 ? "s" : "")
	nb = split(blocks, blk, " ")
	cols = n < 60 ? n : 60
	smin = smax = ""
	for (c = 1; c <= cols; c++) {   # column c: the mean of its share of the points
		a = int((c - 1) * n / cols) + 1; b = int(c * n / cols); sum = 0
		for (k = a; k <= b; k++) sum += tl[k]
		col[c] = sum / (b - a + 1)
		if (smin == "" || col[c] < smin) smin = col[c]
		if (smax == "" || col[c] > smax) smax = col[c]
	}
	s = ""
	for (c = 1; c <= cols; c++) {
		lev = smax > smin ? int((col[c] - smin) / (smax - smin) * (nb - 1) + 0.5) + 1 : 1
		s = s blk[lev]
	}
	printf "  curve       %s %s %s   (iterations %d to %d)\n", short(col[1]), s, short(col[cols]), ti[1], ti[n]

	if (svg == "")
		exit 0

	# --- the chart ---
	W = 800; H = 480; ML = 72; MR = 24; MT = 56; MB = 56; PW = W - ML - MR; PH = H - MT - MB
	xs = step(ti[n]); if (xs < 1) xs = 1; x0 = 0; x1 = ceil(ti[n] / xs) * xs
	if (x1 <= x0) x1 = x0 + xs
	ys = step(ymax - ymin > 0 ? ymax - ymin : (ymax > 0 ? ymax : 1) / 10)
	y0 = floor(ymin / ys) * ys; y1 = ceil(ymax / ys) * ys
	if (y1 <= y0) y1 = y0 + ys
	yfmt = "%." decimals(ys) "f"
	w("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
	w("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" W "\" height=\"" H "\" viewBox=\"0 0 " W " " H "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">")
	w("<title>" esc(title) "</title>")
	w("<desc>" esc("training loss from " logname ": " n " logged iterations, " ti[1] " to " ti[n] ", first " ts[first] ", last " ts[last] ", min " ts[lo] "; " nv " validation points") "</desc>")
	w("<rect width=\"" W "\" height=\"" H "\" fill=\"white\"/>")
	w("<defs><clipPath id=\"plot\"><rect x=\"" ML "\" y=\"" MT "\" width=\"" PW "\" height=\"" PH "\"/></clipPath></defs>")
	w("<text x=\"" W / 2 "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" esc(title) "</text>")
	w("<text x=\"" W / 2 "\" y=\"42\" text-anchor=\"middle\" fill=\"#555\">" esc("last " short(tl[last]) " at iteration " ti[last] ", min " short(tl[lo]) (nv ? ", last validation " short(vl[nv]) : "")) "</text>")
	# grid, ticks and their labels
	w("<g id=\"y-axis\" data-min=\"" y0 "\" data-max=\"" y1 "\" stroke=\"#e4e4e4\">")
	for (k = 0; k <= int((y1 - y0) / ys + 0.5); k++) {
		v = y0 + k * ys; y = Y(v)
		w("<line x1=\"" ML "\" y1=\"" y "\" x2=\"" ML + PW "\" y2=\"" y "\"/>")
		w("<text class=\"tick\" x=\"" ML - 8 "\" y=\"" y + 4 "\" text-anchor=\"end\" stroke=\"none\" fill=\"#333\">" sprintf(yfmt, v) "</text>")
	}
	w("</g>")
	w("<g id=\"x-axis\" data-min=\"" x0 "\" data-max=\"" x1 "\" stroke=\"#e4e4e4\">")
	for (k = 0; k <= int((x1 - x0) / xs + 0.5); k++) {
		v = x0 + k * xs; x = X(v)
		w("<line x1=\"" x "\" y1=\"" MT "\" x2=\"" x "\" y2=\"" MT + PH "\"/>")
		w("<text class=\"tick\" x=\"" x "\" y=\"" MT + PH + 18 "\" text-anchor=\"middle\" stroke=\"none\" fill=\"#333\">" sprintf("%d", v) "</text>")
	}
	w("</g>")
	w("<rect x=\"" ML "\" y=\"" MT "\" width=\"" PW "\" height=\"" PH "\" fill=\"none\" stroke=\"#333\"/>")
	w("<text x=\"" ML + PW / 2 "\" y=\"" H - 12 "\" text-anchor=\"middle\">iteration</text>")
	w("<text x=\"18\" y=\"" MT + PH / 2 "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " MT + PH / 2 ")\">lm loss</text>")
	# resumes and rollbacks: where a run picked up
	for (k = 1; k <= nres; k++)
		marker(resit[k], "#2ca02c", "resumed at")
	for (k = 1; k <= nrb; k++)
		marker(rbit[k], "#d62728", "rolled back to")
	# superseded points, faint: one dashed line per abandoned stretch
	w("<g id=\"superseded\" clip-path=\"url(#plot)\" fill=\"none\" stroke=\"#aaa\" stroke-dasharray=\"4 3\">")
	for (k = 1; k <= ns; k++) {
		if (k == 1 || sseg[k] != sseg[k - 1]) pts = ""
		pts = pts (pts == "" ? "" : " ") X(sx[k]) "," Y(sy[k])
		if (k == ns || sseg[k + 1] != sseg[k])
			w("<polyline points=\"" pts "\"/>")
	}
	w("</g>")
	w("<g id=\"superseded-points\" clip-path=\"url(#plot)\" fill=\"#bbb\">")
	for (k = 1; k <= ns; k++)
		if (!sfork[k])
			w("<circle cx=\"" X(sx[k]) "\" cy=\"" Y(sy[k]) "\" r=\"2.5\"><title>superseded: iteration " sx[k] "</title></circle>")
	for (k = 1; k <= nsv; k++)
		w("<circle cx=\"" X(svx[k]) "\" cy=\"" Y(svy[k]) "\" r=\"3.5\"><title>superseded validation: iteration " svx[k] "</title></circle>")
	w("</g>")
	# the curve
	pts = ""
	for (k = 1; k <= n; k++)
		pts = pts (k > 1 ? " " : "") X(ti[k]) "," Y(tl[k])
	w("<polyline id=\"train\" points=\"" pts "\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" stroke-linejoin=\"round\"/>")
	if (n == 1)
		w("<circle cx=\"" X(ti[1]) "\" cy=\"" Y(tl[1]) "\" r=\"3\" fill=\"#1f77b4\"/>")
	w("<g id=\"validation\" fill=\"#ff7f0e\" stroke=\"white\">")
	for (k = 1; k <= nv; k++)
		w("<circle cx=\"" X(vi[k]) "\" cy=\"" Y(vl[k]) "\" r=\"4.5\"><title>validation at iteration " vi[k] ": " vs[k] "</title></circle>")
	w("</g>")
	w("<g id=\"spikes\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\">")
	for (k = 1; k <= nspk; k++)
		if (spkit[k] >= x0 && spkit[k] <= x1)
			w("<circle cx=\"" X(spkit[k]) "\" cy=\"" Y(spkv[k] + 0) "\" r=\"6\"><title>loss spike at iteration " spkit[k] ": " esc(spkv[k]) "</title></circle><text x=\"" X(spkit[k]) + 9 "\" y=\"" Y(spkv[k] + 0) + 14 "\" stroke=\"none\" fill=\"#d62728\">spike " short(spkv[k]) "</text>")
	w("</g>")
	# legend
	lx = ML + PW - 200; ly = MT + 24
	w("<g id=\"legend\"><rect x=\"" lx "\" y=\"" ly "\" width=\"190\" height=\"" 8 + 20 * (1 + (nv > 0) + (ns > 0)) "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ccc\"/>")
	ly += 18
	w("<line x1=\"" lx + 10 "\" y1=\"" ly - 4 "\" x2=\"" lx + 34 "\" y2=\"" ly - 4 "\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"" lx + 42 "\" y=\"" ly "\">training</text>")
	if (nv) {
		ly += 20
		w("<circle cx=\"" lx + 22 "\" cy=\"" ly - 4 "\" r=\"4.5\" fill=\"#ff7f0e\"/><text x=\"" lx + 42 "\" y=\"" ly "\">validation</text>")
	}
	if (ns) {
		ly += 20
		w("<line x1=\"" lx + 10 "\" y1=\"" ly - 4 "\" x2=\"" lx + 34 "\" y2=\"" ly - 4 "\" stroke=\"#aaa\" stroke-dasharray=\"4 3\"/><text x=\"" lx + 42 "\" y=\"" ly "\">superseded (resumed)</text>")
	}
	w("</g>")
	w("</svg>")
	if (close(svg) != 0) {
		printf "%s: %s: write failed\n", me, svgname > "/dev/stderr"
		exit 3
	}
	printf "  chart       %s (%dx%d SVG)\n", svgname, W, H
}
function marker(it, colour, label,   x) {
	if (it < x0 || it > x1)
		return
	x = X(it)
	w("<g class=\"marker\" stroke=\"" colour "\"><line x1=\"" x "\" y1=\"" MT "\" x2=\"" x "\" y2=\"" MT + PH "\" stroke-dasharray=\"6 4\"/><text x=\"" x + 4 "\" y=\"" MT + PH - 8 "\" stroke=\"none\" fill=\"" colour "\">" label " " it "</text></g>")
}
function resumes(   k, s) {
	s = " (resumed at iteration " resit[1]
	for (k = 2; k <= nres; k++)
		s = s ", " resit[k]
	return s ")"
}
' "$log"
rc=$?
[ $rc = 0 ] || exit $rc
if [ -n "$out" ]; then
	sync "$tmp" 2>/dev/null
	mv -f "$tmp" "$out" || { echo "$me: $out: cannot rename $tmp" >&2; exit 3; }
fi
exit 0
