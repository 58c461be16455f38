#!/usr/bin/env bash
# fs-watchdog against real filesystems: tmpfs mounts with size= and nr_inodes= limits, filled
# across each threshold; alerts delivered to the SMTP sink; budgets checked against du -sb;
# train's newest checkpoint: recent, and in its backup.  --json is read by Python's json and its
# numbers compared with os.statvfs, du -sb and the manifests' mtimes.
. "$(dirname "$0")/../lib.sh"
FW=$BIN/fs-watchdog
SMTP=smtp://127.0.0.1:${LMTK_SMTP_PORT:-1}

# --- usage ---
expect_rc usage_no_checks_exits_2 2 $FW
contains usage_no_checks_says_what_to_give "$T/err" 'nothing to check'
expect_rc usage_bad_percentage_exits_2 2 $FW --check /tmp:space=85x
contains usage_bad_percentage_names_flag "$T/err" '^fs-watchdog: --check: .*not a percentage'
expect_rc usage_bad_size_exits_2 2 $FW --budget /tmp:lots
expect_rc help_exits_0 0 $FW --help
contains help_lists_budget "$T/out" '--budget DIR:SIZE'
contains help_lists_json "$T/out" '^ +--json +print every check'
contains man_has_json_output_section "$TOP/man/man1/fs-watchdog.1" '^\.SH JSON OUTPUT$'
expect_rc version_exits_0 0 $FW --version

# --- a real small filesystem ---
M=$T/mnt
mkdir -p "$M"
if ! mount -t tmpfs -o size=1m,nr_inodes=40 lmtk-test "$M" 2>"$T/mount.err"; then
	fail tmpfs_mount "cannot mount tmpfs (need root): $(cat "$T/mount.err")"
	exit 1
fi
trap 'umount -l "$M" 2>/dev/null' EXIT

expect_rc empty_fs_is_healthy 0 $FW --check "$M:space=50%,inodes=50%" --min-free "$M:100K"
contains empty_fs_says_good_standing "$T/out" 'All partitions are in a good standing$'

# space: 1 MiB tmpfs, 600 KiB file -> ~59%: over 50%, under 70%
head -c 614400 /dev/zero > "$M/ckpt.bin"
expect_rc space_over_threshold_alerts 1 $FW --check "$M:space=50%"
contains space_alert_wording "$T/out" "^\[[0-9-]+ [0-9:]+\] \[ALERT\] $M is getting close to being full: space at 5[0-9]\.[0-9]{2}%"
lacks space_alert_not_good_standing "$T/out" 'good standing'
expect_rc space_under_threshold_is_fine 0 $FW --check "$M:space=70%"
# df is the peer for the percentage
df_pct=$(df --output=pcent "$M" | tail -1 | tr -dc 0-9)
ours=$($FW -v --check "$M:space=99%" | sed -n 's/.*space \([0-9.]*\)% used.*/\1/p')
check space_percent_matches_df [ "$(printf '%.0f' "$ours")" -ge $((df_pct - 1)) -a "$(printf '%.0f' "$ours")" -le "$df_pct" ]

# min-free: 1 MiB - 600 KiB leaves ~424 KiB
expect_rc min_free_alerts_below 1 $FW --min-free "$M:500K"
contains min_free_wording "$T/out" "less than the 500.00 KiB minimum"
expect_rc min_free_fine_above 0 $FW --min-free "$M:300K"

# inodes: nr_inodes=40 (the root dir takes one); 25 more files -> 65%
for i in $(seq 25); do : > "$M/f$i"; done
expect_rc inodes_over_threshold_alert 1 $FW --check "$M:inodes=60%"
contains inodes_alert_wording "$T/out" "inodes at 6[0-9]\.[0-9]{2}% \([0-9]+ of 40; alert at 60%\)"
expect_rc inodes_under_threshold_fine 0 $FW --check "$M:inodes=80%"

# --- budgets: the walk must agree with du -sb (hard links once, dirs and symlinks counted) ---
B=$T/tree
mkdir -p "$B/a/b/c" "$B/empty" "$B/sp ace"
head -c 100000 /dev/urandom > "$B/a/x"
head -c 5000 /dev/urandom > "$B/a/b/c/y"
ln "$B/a/x" "$B/a/b/x-hardlink"
ln -s ../x "$B/a/b/link"
printf 'hi' > "$B/sp ace/new
line"
du_b=$(du -sb "$B" | cut -f1)
$FW -v --budget "$B:1G" > "$T/out"
ours=$(sed -n 's/.*: \([0-9]*\) bytes (.*/\1/p' "$T/out")
check budget_bytes_equal_du_sb [ "$ours" = "$du_b" ]
expect_rc budget_over_alerts 1 $FW --budget "$B:$((du_b - 1))"
contains budget_alert_wording "$T/out" "budget \(alert at 100%\)"
expect_rc budget_at_pct_alerts 1 $FW --budget "$B:$((du_b * 2)),at=45%"
expect_rc budget_under_pct_fine 0 $FW --budget "$B:$((du_b * 2)),at=55%"

# --- what cannot be checked is an alert and exit 3 ---
expect_rc missing_path_exits_3 3 $FW --check "$T/nonexistent:space=50%"
contains missing_path_alert_names_it "$T/out" "\[ALERT\] cannot check $T/nonexistent: No such file or directory"
expect_rc missing_budget_dir_exits_3 3 $FW --budget "$T/nonexistent:1G"

# --- --json: one object on stdout, every check with its numbers, the failing one by name ---
# statvfs as Python's os module reads it is the peer for the numbers (nothing writes to $M now)
STATPY='
import os
v = os.statvfs(sys.argv[3])
used, avail = (v.f_blocks - v.f_bfree) * v.f_frsize, v.f_bavail * v.f_frsize
c = {x["check"]: x for x in j["checks"]}
'
expect_rc json_space_alert_exits_1 1 $FW --json --check "$M:space=50%,inodes=99%" --min-free "$M:100K"
json_ok json_names_the_failing_check "$T/out" "$STATPY
assert [x['check'] for x in j['checks']] == ['space', 'inodes', 'min-free'], j['checks']
assert [x['check'] for x in j['checks'] if x['status'] != 'ok'] == ['space'], j['checks']
assert (j['ok'], j['alerts'], j['errors'], j['mail_failures']) == (False, 1, 0, 0)
s = c['space']
assert (s['path'], s['key'], s['status']) == (sys.argv[3], 'space:' + sys.argv[3], 'alert'), s
assert s['message'].startswith('[ALERT] %s is getting close to being full: space at ' % sys.argv[3]), s['message']
assert (s['used_bytes'], s['total_bytes'], s['alert_percent']) == (used, used + avail, 50), s
assert abs(s['used_percent'] - 100 * used / (used + avail)) < 1e-9, s
i = c['inodes']
assert (i['status'], i['message'], i['used'], i['total']) == ('ok', None, v.f_files - v.f_ffree, v.f_files), i
assert (c['min-free']['available_bytes'], c['min-free']['minimum_bytes'], c['min-free']['status']) == (avail, 102400, 'ok')
" "$M"
contains json_report_lines_go_to_stderr "$T/err" "^\[[0-9-]+ [0-9:]+\] \[ALERT\] $M is getting close to being full: space at"
expect_rc json_inodes_alert_exits_1 1 $FW --json --check "$M:space=99%,inodes=60%" --min-free "$M:500K"
json_ok json_names_inodes_and_min_free "$T/out" "$STATPY
assert sorted(x['check'] for x in j['checks'] if x['status'] == 'alert') == ['inodes', 'min-free'], j['checks']
assert j['alerts'] == 2 and c['space']['status'] == 'ok' and c['space']['message'] is None
assert c['inodes']['used_percent'] >= 60 and 'inodes at' in c['inodes']['message']
" "$M"
expect_rc json_healthy_exits_0 0 $FW --json --check "$M:space=99%" --budget "$B:1G" -v
json_ok json_healthy_is_ok "$T/out" "
assert (j['ok'], j['alerts'], j['errors']) == (True, 0, 0) and all(x['status'] == 'ok' for x in j['checks'])
b = [x for x in j['checks'] if x['check'] == 'budget'][0]
assert b['bytes'] == int(sys.argv[3]) and b['budget_bytes'] == 1 << 30 and b['path'] == sys.argv[4], b   # du -sb
" "$du_b" "$B"
contains json_healthy_says_good_standing_on_stderr "$T/err" 'All partitions are in a good standing$'
expect_rc json_cannot_check_exits_3 3 $FW --json --check "$T/nonexistent:space=50%,inodes=50%" --min-free "$M:1K"
json_ok json_cannot_check_names_the_checks "$T/out" "
e = [(x['check'], x['path'], x['status']) for x in j['checks'] if x['status'] != 'ok']
assert e == [('space', sys.argv[3], 'error'), ('inodes', sys.argv[3], 'error')], e
assert (j['ok'], j['errors'], j['alerts']) == (False, 1, 0)
assert j['checks'][0]['message'] == '[ALERT] cannot check %s: No such file or directory' % sys.argv[3]
" "$T/nonexistent"
expect_rc json_log_run 1 $FW --json --check "$M:space=50%" --log "$T/json_log.txt" --no-mail
contains json_log_has_the_alert_line "$T/json_log.txt" '\[ALERT\] .* space at'

# --- config file: same names as the flags ---
cat > "$T/fw.conf" <<CONF
# the run's filesystems
check $M:space=50%
min-free $M:100K
CONF
expect_rc config_alerts_like_flags 1 $FW --config "$T/fw.conf"
contains config_alert_wording "$T/out" "space at"
printf 'check %s:space=50%%\nchek %s:space=1%%\n' "$M" "$M" > "$T/bad.conf"
expect_rc bad_config_exits_3 3 $FW --config "$T/bad.conf"
contains bad_config_names_file_line "$T/out" "cannot check $T/bad.conf: $T/bad.conf:2: unknown setting 'chek'"
# a NUL byte inside a line ("mail-to a@b\0c@evil" would be read as "mail-to a@b"): the line is refused
printf 'check %s:space=50%%\nmail-to a@b\0c@evil\n' "$M" > "$T/nul.conf"
expect_rc nul_byte_in_config_exits_3 3 $FW --config "$T/nul.conf"
contains nul_byte_line_named "$T/out" "nul.conf:2: a NUL byte at column 12; the line is refused"
# rules from the command line add to those of the config file
printf 'chek %s:space=1%%\nmin-free %s:1P   # more than any tmpfs has\nbudget %s:lots\n' "$M" "$M" "$M" > "$T/bad2.conf"
expect_rc bad_lines_do_not_hide_good_ones 3 $FW --config "$T/bad2.conf"
contains every_bad_line_reported "$T/out" "bad2.conf:1: unknown setting 'chek'; .*bad2.conf:3: budget: "
contains good_line_after_bad_one_checked "$T/out" "less than the 1.00 PiB minimum"
expect_rc config_rules_still_apply 1 $FW --config "$T/fw.conf" --min-free "$M:1K"
expect_rc json_bad_config_exits_3 3 $FW --json --config "$T/bad2.conf"
json_ok json_bad_config_is_the_failing_check "$T/out" "
e = [x for x in j['checks'] if x['status'] == 'error']
assert [(x['check'], x['path']) for x in e] == [('config', sys.argv[3])], e
assert 'bad2.conf:1: unknown setting' in e[0]['message']
assert [x['check'] for x in j['checks'] if x['status'] == 'alert'] == ['min-free']   # the good line still checked
" "$T/bad2.conf"

# --- mail: once, no repeat inside the window, a reminder after it, recovered when cleared ---
if [ -z "${LMTK_SMTP_PORT:-}" ]; then
	fail mail_tests "no SMTP sink"
	exit 1
fi
S=$T/fw.state
mail_clear
expect_rc mail_first_alert 1 $FW --check "$M:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S"
wait_for 10 test "$(mail_count)" -ge 1
check mail_first_alert_sent_one [ "$(mail_count)" = 1 ]
contains mail_subject "$(first_mail)" "^Subject: \[ALERT\] $M filesystem is getting close to being full"
contains mail_envelope_to "$(first_mail)" "^X-Envelope-To: oncall@example.org"
expect_rc mail_second_run_still_alerts 1 $FW --check "$M:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S"
sleep 0.5
check mail_not_repeated_inside_window [ "$(mail_count)" = 1 ]
sleep 1.2
expect_rc mail_reminder_run 1 $FW --check "$M:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S" --remind-every 1s
wait_for 10 test "$(mail_count)" -ge 2
check mail_reminder_sent [ "$(mail_count)" = 2 ]
contains mail_reminder_says_still_active "$(last_mail)" "still active"
rm -f "$M/ckpt.bin"
expect_rc mail_recovered_run_is_healthy 0 $FW --check "$M:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S"
wait_for 10 test "$(mail_count)" -ge 3
contains mail_recovered_subject "$(last_mail)" "^Subject: \[RECOVERED\] $M filesystem is getting close to being full"
expect_rc mail_healthy_again_sends_nothing 0 $FW --check "$M:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S"
sleep 0.5
check mail_no_mail_when_healthy [ "$(mail_count)" = 3 ]

# a mail server that is down: the alert is printed, the exit says the job was not done, and
# the next run retries (the state does not claim it was mailed)
head -c 614400 /dev/zero > "$M/ckpt.bin"
S2=$T/fw2.state
expect_rc mail_server_down_exits_3 3 $FW --check "$M:space=50%" --mail-to oncall@example.org --smtp-url smtp://127.0.0.1:1 --state-file "$S2"
contains mail_server_down_says_so "$T/err" "mail to oncall@example.org via smtp://127.0.0.1:1 failed"
mail_clear
expect_rc mail_retried_next_run 1 $FW --check "$M:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S2"
wait_for 10 test "$(mail_count)" -ge 1
check mail_retry_delivered [ "$(mail_count)" = 1 ]

# a path that cannot be checked any more is not a recovery of its alerts
mkdir -p "$M/sub"
S3=$T/fw3.state
mail_clear
expect_rc held_alert_raised 1 $FW --check "$M/sub:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S3"
rmdir "$M/sub"
expect_rc held_path_gone_exits_3 3 $FW --check "$M/sub:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S3"
wait_for 10 test "$(mail_count)" -ge 2
sleep 0.5
check unreadable_path_sends_no_recovered_mail [ -z "$(grep -l '^Subject: \[RECOVERED\]' "$LMTK_SMTP_DIR"/*.eml)" ]
check unreadable_path_keeps_alert_in_state grep -q "space:$M/sub" "$S3"

# the state's lock planted as a dangling symbolic link: refused, its target not created, no state
# written; the state cannot be used, so the run exits 3 (fs-watchdog(1), EXIT STATUS)
S4=$T/fw4.state
ln -s "$T/made-by-fs-watchdog" "$S4.lock"
expect_rc state_lock_symlink_exits_3 3 $FW --check "$M:space=50%" --no-mail --state-file "$S4"
contains state_lock_symlink_says_why "$T/err" "fw4\.state\.lock: is a symbolic link; refusing"
check state_lock_symlink_creates_nothing [ ! -e "$T/made-by-fs-watchdog" ]
check state_lock_symlink_no_state_written [ ! -e "$S4" ]
rm -f "$S4.lock"

# --log appends the same lines
expect_rc log_run 1 $FW --check "$M:space=50%" --log "$T/main_log.txt" --no-mail
contains log_has_alert_line "$T/main_log.txt" '\[ALERT\] .* space at'

# --json while alerts are mailed and recovered: the RECOVERED line goes to stderr and the log,
# stdout stays one object; a mail server that is down is counted, exit 3 as in the text
S5=$T/fw5.state
mail_clear
expect_rc json_mail_alert_exits_1 1 $FW --json --check "$M:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S5"
json_ok json_mail_alert_counts_it "$T/out" "assert (j['alerts'], j['mail_failures'], j['checks'][0]['status']) == (1, 0, 'alert'), j"
wait_for 10 test "$(mail_count)" -ge 1
mv "$M/ckpt.bin" "$T/ckpt.bin.away"
expect_rc json_recovered_run_exits_0 0 $FW --json --check "$M:space=50%" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S5" --log "$T/json_log.txt"
json_ok json_recovered_run_is_one_object "$T/out" "assert j['ok'] is True and [x['status'] for x in j['checks']] == ['ok'], j"
contains json_recovered_line_on_stderr "$T/err" "RECOVERED: $M filesystem is getting close to being full"
contains json_recovered_line_in_the_log "$T/json_log.txt" "RECOVERED: $M filesystem"
mv "$T/ckpt.bin.away" "$M/ckpt.bin"
expect_rc json_mail_server_down_exits_3 3 $FW --json --check "$M:space=50%" --mail-to oncall@example.org --smtp-url smtp://127.0.0.1:1 --state-file "$T/fw6.state"
json_ok json_mail_server_down_is_counted "$T/out" "assert (j['ok'], j['alerts'], j['errors'], j['mail_failures']) == (False, 1, 0, 1), j"
contains json_mail_server_down_says_so "$T/err" "mail to oncall@example.org via smtp://127.0.0.1:1 failed"

# --- checkpoints: the newest one recent (--max-age) and backed up (SAVE,BACKUP) ---
mkstep() {  # DIR N AGE: a step as train leaves it, its manifest written AGE ago
	mkdir -p "$1/global_step$2" && echo '{"iteration": '"$2"'}' >"$1/global_step$2/manifest.json" &&
		touch -d "$3" "$1/global_step$2/manifest.json" && echo "global_step$2" >"$1/latest"
}
CS=$T/ck/save CB=$T/ck/backup
mkstep "$CS" 100 '10 minutes ago' && mkstep "$CB" 100 '10 minutes ago'
expect_rc checkpoint_recent_and_backed_up_is_fine 0 $FW --checkpoint "$CS,$CB" --max-age 3h -v
contains checkpoint_verbose_says_age "$T/out" "$CS: the newest checkpoint is global_step100, saved 0:1[0-9]:[0-9]{2} ago \([0-9-]+ [0-9:]+\); alert after 3:00:00$"
contains checkpoint_verbose_says_backed_up "$T/out" "$CB: holds global_step100, the newest checkpoint$"
mkstep "$CS" 200 '5 hours ago'
expect_rc checkpoint_too_old_alerts 1 $FW --checkpoint "$CS" --max-age 3h
contains checkpoint_too_old_wording "$T/out" "\[ALERT\] $CS: the newest checkpoint, global_step200, was saved 5:00:[0-9]{2} ago \([0-9-]+ [0-9:]+\), more than 3:00:00: is the run still saving\?$"
expect_rc checkpoint_younger_than_the_bound_is_fine 0 $FW --checkpoint "$CS" --max-age 6h
expect_rc json_checkpoint_too_old_exits_1 1 $FW --json --checkpoint "$CS,$CB" --max-age 3h
json_ok json_checkpoint_too_old_names_both_checks "$T/out" "
import os, time
c = {x['check']: x for x in j['checks']}
a, b = c['checkpoint-age'], c['checkpoint-backup']
m = int(os.stat(sys.argv[3] + '/global_step200/manifest.json').st_mtime)
assert (a['status'], a['step'], a['saved'], a['max_age_seconds']) == ('alert', 'global_step200', m, 3 * 3600), a
assert 5 * 3600 <= a['age_seconds'] <= 5 * 3600 + 120 and 'is the run still saving?' in a['message'], a
assert (b['status'], b['step'], b['backup'], b['backup_step']) == ('alert', 'global_step200', sys.argv[4], 'global_step100'), b
assert 600 <= b['backup_age_seconds'] <= 1200 and 'is not backed up' in b['message'], b
assert j['alerts'] == 2
" "$CS" "$CB"
expect_rc checkpoint_not_backed_up_alerts 1 $FW --checkpoint "$CS,$CB" --max-age 6h
contains checkpoint_not_backed_up_wording "$T/out" "\[ALERT\] $CS: the newest checkpoint, global_step200, is not backed up: the newest in $CB is global_step100, saved 0:1[0-9]:[0-9]{2} ago$"
lacks checkpoint_not_backed_up_is_not_too_old "$T/out" 'is the run still saving'
# a daily backup may lag: BACKUP_AGE
expect_rc checkpoint_backup_within_its_age_is_fine 0 $FW --checkpoint "$CS,$CB" --max-age 6h,26h
touch -d '2 days ago' "$CB/global_step100/manifest.json"
expect_rc checkpoint_backup_older_than_its_age_alerts 1 $FW --checkpoint "$CS,$CB" --max-age 6h,26h
expect_rc checkpoint_backup_only_without_max_age 1 $FW --checkpoint "$CS,$CB"
contains checkpoint_backup_only_says_not_backed_up "$T/out" 'is not backed up'
mkdir -p "$T/ck/none"
expect_rc checkpoint_empty_backup_alerts 1 $FW --checkpoint "$CS,$T/ck/none" --max-age 6h
contains checkpoint_empty_backup_wording "$T/out" "is not backed up: $T/ck/none has no checkpoint \(no $T/ck/none/latest\)$"
echo global_step300 >"$T/ck/none/latest"
expect_rc checkpoint_latest_naming_a_missing_step_alerts 1 $FW --checkpoint "$T/ck/none" --max-age 6h
contains checkpoint_latest_missing_step_wording "$T/out" "\[ALERT\] $T/ck/none has no usable checkpoint: $T/ck/none/latest names global_step300, which has no manifest.json$"
expect_rc checkpoint_missing_save_cannot_check 3 $FW --checkpoint "$T/ck/gone" --max-age 6h
contains checkpoint_missing_save_wording "$T/out" "\[ALERT\] cannot check $T/ck/gone: No such file or directory"
expect_rc checkpoint_missing_backup_cannot_check 3 $FW --checkpoint "$CS,$T/ck/gone" --max-age 6h
expect_rc checkpoint_without_anything_to_check_is_usage 2 $FW --checkpoint "$CS"
contains checkpoint_usage_says_why "$T/err" 'nothing to check without --max-age'
expect_rc checkpoint_bad_max_age_is_usage 2 $FW --checkpoint "$CS" --max-age soon
printf 'checkpoint %s,%s\nmax-age 6h,26h\n' "$CS" "$CB" >"$T/ck.conf"
expect_rc checkpoint_from_the_config_file 1 $FW --config "$T/ck.conf"
contains checkpoint_config_file_checks_the_backup "$T/out" 'is not backed up'
# mailed once under its own subject; recovered when the backup catches up
mail_clear
SC=$T/ck.state
expect_rc checkpoint_mail_alert 1 $FW --checkpoint "$CS,$CB" --max-age 6h --mail-to oncall@example.org --smtp-url $SMTP --state-file "$SC"
wait_for 10 test "$(mail_count)" -ge 1
contains checkpoint_mail_subject "$(first_mail)" "^Subject: \[ALERT\] $CS: the newest checkpoint is not backed up"
mkstep "$CB" 200 '5 hours ago'
expect_rc checkpoint_mail_recovered_run 0 $FW --checkpoint "$CS,$CB" --max-age 6h --mail-to oncall@example.org --smtp-url $SMTP --state-file "$SC"
wait_for 10 test "$(mail_count)" -ge 2
contains checkpoint_mail_recovered "$(last_mail)" "^Subject: \[RECOVERED\] $CS: the newest checkpoint is not backed up"

# secrets never in argv: a URL with a password is refused
expect_rc smtp_password_in_url_refused 2 $FW --check "$M:space=50%" --smtp-url smtp://u:pw@127.0.0.1:25
contains smtp_password_refusal_explains "$T/err" 'smtp-auth-file'
