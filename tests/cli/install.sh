#!/usr/bin/env bash
# make install, as a new user does it: into a prefix of its own, then the installed pieces used
# from there.  plot-loss is a program on the PATH with --help and a man page; the SLURM and cron
# wrappers are installed (PREFIX/share/lmtk/slurm, .../cron) and run with bash outside SLURM in a
# clean environment (env -i, HOME a tmp dir).  With nothing configured each one stops at once,
# exit 2, naming the setting to set, and writes nothing outside the tmp dirs (strace: no file
# created, opened for writing, renamed or removed elsewhere; /checkpoints not even looked at).
# Configured, each finds lmtk's programs in PREFIX/bin (strace: the execve), from its own install
# location, from PATH when it is a copy elsewhere (as sbatch runs it), or from LMTK when set.
. "$(dirname "$0")/../lib.sh"
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT  # run.sh removes LMTK_TMP itself
P=$T/prefix H=$T/home
mkdir -p "$H" "$T/cwd"
cd "$T/cwd" || exit 3

if ! make -C "$TOP" --no-print-directory install PREFIX="$P" >"$T/make.out" 2>&1; then
	fail make_install "$(tail -5 "$T/make.out")"
	exit 0
fi
ok make_install

# --- plot-loss --------------------------------------------------------------------------------
expect_rc plot_loss_help_exits_0 0 "$P/bin/plot-loss" --help
contains plot_loss_help_prints_usage "$T/out" '^usage: plot-loss .*LOG'
MAN=$P/share/man/man1/plot-loss.1
if [ -f "$MAN" ] && MANWIDTH=80 man -l "$MAN" >"$T/man.out" 2>"$T/man.err" && [ ! -s "$T/man.err" ]; then
	contains plot_loss_man_page_renders "$T/man.out" '^ +plot-loss +- +the +loss +curve'
else
	fail plot_loss_man_page_renders "$MAN: $(cat "$T/man.err" 2>/dev/null)"
fi

# --- the wrappers are installed ---------------------------------------------------------------
missing=
for f in "$TOP"/slurm/*.slurm; do
	[ -x "$P/share/lmtk/slurm/${f##*/}" ] || missing="$missing slurm/${f##*/}"
done
for f in cron.sh cron-hourly.slurm cron-daily.slurm cron-report.sh cron.hourly cron.daily; do
	[ -e "$P/share/lmtk/cron/$f" ] || missing="$missing cron/$f"
done
[ -z "$missing" ] && ok wrappers_installed || fail wrappers_installed "not in $P/share/lmtk:$missing"
ls "$P"/share/lmtk/slurm/examples/*.env >/dev/null 2>&1 && ok site_example_installed ||
	fail site_example_installed "no $P/share/lmtk/slurm/examples/*.env"

# run NAME SCRIPT [VAR=VALUE...]: bash SCRIPT in a clean environment (PATH from $PATH_, else
# /usr/bin:/bin), traced; stdout in $T/out, stderr in $T/err, the exit status in $rc
run() {
	local name=$1 script=$2
	shift 2
	rc=0
	strace -f -qq -o "$T/$name.trace" -e trace=execve,open,openat,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir,link,linkat,symlink,symlinkat,truncate,stat,newfstatat,lstat,access,faccessat,faccessat2 \
		timeout 60 env -i PATH="${PATH_:-/usr/bin:/bin}" HOME="$H" "$@" bash "$script" >"$T/out" 2>"$T/err" || rc=$?
}
# confined NAME: the trace of NAME writes nothing outside $T and never names /checkpoints
confined() {
	local bad
	bad=$(grep -E '(creat|mkdir|mkdirat|rename[a-z0-9]*|unlink|unlinkat|rmdir|link|linkat|symlink|symlinkat|truncate)\(|open(at)?\(.*O_(WRONLY|RDWR|CREAT)' "$T/$1.trace" |
		grep -v ' = -1 E' | grep -o '"[^"]*"' | tr -d '"' | grep -v -e "^$T" -e '^/dev/' -e '^/proc/' -e '^[^/]')
	if grep -q '"/checkpoints' "$T/$1.trace"; then
		fail "$1_stays_in_tmp" "it looked at /checkpoints: $(grep -m1 '"/checkpoints' "$T/$1.trace")"
	elif [ -n "$bad" ]; then
		fail "$1_stays_in_tmp" "it wrote outside $T: $(echo $bad | head -c 300)"
	else
		ok "$1_stays_in_tmp"
	fi
}
# execs NAME PROGRAM: the trace of NAME shows PROGRAM executed
execs() {
	if grep -q "execve(\"$2\", .* = 0" "$T/$1.trace"; then ok "$1_runs_${2##*/}_from_$3"
	else fail "$1_runs_${2##*/}_from_$3" "no execve of $2 (rc $rc): $(head -c 300 "$T/err")"; fi
}

# --- nothing configured: exit 2 naming what to set, nothing touched -----------------------------
S=$P/share/lmtk/slurm C=$P/share/lmtk/cron
# WRAPPER VARIABLE: the setting each must ask for first (its documented required one)
while read -r w var; do
	n=bare_${w//[.\/-]/_}
	PATH_=$P/bin:/usr/bin:/bin run "$n" "$P/share/lmtk/$w"
	[ "$rc" = 2 ] && ok "${n}_exits_2" || fail "${n}_exits_2" "exit $rc: $(head -c 300 "$T/err")"
	contains "${n}_names_$var" "$T/err" "$var"
	confined "$n"
done <<'EOF'
slurm/fs-watchdog.slurm FSW_CONFIG
slurm/slurm-pulse.slurm PULSE_JOB_NAME
slurm/hub-sync.slurm HUB_SYNC_REPO
slurm/ckpt-backup.slurm CKPT_BACKUP_SAVE
slurm/train.slurm DATA_PATH
slurm/setup-test-n2.slurm DATA_PATH
slurm/preprocess.slurm INPUT
cron/cron-hourly.slurm LMTK_CRON_DIR
cron/cron-daily.slurm LMTK_CRON_DIR
cron/cron.sh CRON_NAME
cron/cron-report.sh usage
demo-train.slurm usage
EOF

# --- configured: the programs of PREFIX/bin are found ---------------------------------------------
mkdir -p "$T/d" "$T/state"
printf 'check %s:space=99%%\n' "$T/d" >"$T/fsw.conf"
FSW=(FSW_CONFIG="$T/fsw.conf" FSW_MAIL_TO=nobody@localhost FSW_SMTP_URL=smtp://127.0.0.1:1 FSW_STATE_DIR="$T/state")
# from its own install location: PREFIX/bin is not on PATH
run fsw_installed "$S/fs-watchdog.slurm" "${FSW[@]}"
execs fsw_installed "$P/bin/fs-watchdog" install
execs fsw_installed "$P/bin/slurm-pulse" install
[ -s "$T/state/fs-watchdog.json" ] && ok fsw_installed_ran_the_check || fail fsw_installed_ran_the_check "no state file (rc $rc): $(head -c 300 "$T/err")"
confined fsw_installed
# a copy elsewhere (as sbatch runs a script, from its spool): found on PATH, or not at all
mkdir -p "$T/spool"
cp "$S/fs-watchdog.slurm" "$T/spool/"
PATH_=$P/bin:/usr/bin:/bin run fsw_copy "$T/spool/fs-watchdog.slurm" "${FSW[@]}"
execs fsw_copy "$P/bin/fs-watchdog" path
run fsw_copy_no_path "$T/spool/fs-watchdog.slurm" "${FSW[@]}"
[ "$rc" = 2 ] && ok fsw_copy_not_on_path_exits_2 || fail fsw_copy_not_on_path_exits_2 "exit $rc"
contains fsw_copy_not_on_path_names_LMTK "$T/err" 'set LMTK'
# LMTK, when set, wins
mkdir -p "$T/other/bin"
for p in fs-watchdog slurm-pulse; do printf '#!/bin/sh\necho "%s $*" >>"%s/other/ran"\n' "$p" "$T" >"$T/other/bin/$p"; chmod +x "$T/other/bin/$p"; done
PATH_=$P/bin:/usr/bin:/bin run fsw_lmtk "$S/fs-watchdog.slurm" "${FSW[@]}" LMTK="$T/other"
[ "$rc" = 0 ] && grep -q "^fs-watchdog --config $T/fsw.conf" "$T/other/ran" && ! grep -q "execve(\"$P/bin/.* = 0" "$T/fsw_lmtk.trace" &&
	ok fsw_lmtk_set_is_used || fail fsw_lmtk_set_is_used "rc $rc: $(cat "$T/other/ran" 2>/dev/null)"

# the others, configured as documented, each reach their program (which may then fail: no SLURM,
# no repository, no data)
run pulse_installed "$S/slurm-pulse.slurm" PULSE_JOB_NAME=t-train PULSE_MAIL_TO=nobody@localhost \
	PULSE_SMTP_URL=smtp://127.0.0.1:1 PULSE_STATE_DIR="$T/state" PULSE_MAIN_LOG="$T/logs/main_log.txt"
execs pulse_installed "$P/bin/slurm-pulse" install
confined pulse_installed
run hub_installed "$S/hub-sync.slurm" HUB_SYNC_REPO="$T/no-repo" HUB_SYNC_TOKEN_FILE="$T/no-token"
execs hub_installed "$P/bin/hub-sync" install
confined hub_installed
mkdir -p "$T/save/global_step1"
echo global_step1 >"$T/save/latest"
echo '{}' >"$T/save/global_step1/manifest.json"
run backup_installed "$S/ckpt-backup.slurm" CKPT_BACKUP_SAVE="$T/save" CKPT_BACKUP_DEST="$T/backup"
execs backup_installed "$P/bin/ckpt-sync-ln" install
confined backup_installed
run train_installed "$S/train.slurm" DATA_PATH="$T/no-data" VOCAB="$T/v" MERGES="$T/m" LAUNCHER=
execs train_installed "$P/bin/train" install
confined train_installed
run n2_installed "$S/setup-test-n2.slurm" DATA_PATH="$T/no-data" VOCAB="$T/v" MERGES="$T/m" LAUNCHER= TP=1
execs n2_installed "$P/bin/train" install
confined n2_installed
run prep_installed "$S/preprocess.slurm" MODE=merge NSHARDS=1 OUT_PREFIX="$T/pp/corpus"
execs prep_installed "$P/bin/mkindex" install
confined prep_installed
# cron: LMTK_CRON_DIR without cron.sh is refused, naming what to copy there (not run further:
# with a cron.sh it would sbatch)
mkdir -p "$T/mycron"
run cron_empty_dir "$C/cron-hourly.slurm" LMTK_CRON_DIR="$T/mycron"
[ "$rc" = 2 ] && ok cron_dir_without_cron_sh_exits_2 || fail cron_dir_without_cron_sh_exits_2 "exit $rc"
contains cron_dir_without_cron_sh_says_so "$T/err" "no cron.sh in $T/mycron"
confined cron_empty_dir
