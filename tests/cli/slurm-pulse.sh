#!/usr/bin/env bash
# slurm-pulse against the real local cluster (tests/fixtures/slurm-cluster.sh) and SMTP sink:
# every PULSE wording, the alerts, dedup and recovery, hangs, drained nodes, SLURM unreachable;
# --json read by Python's json, its jobs compared with what squeue itself says.
. "$(dirname "$0")/../lib.sh"
SP=$BIN/slurm-pulse
SMTP=smtp://127.0.0.1:${LMTK_SMTP_PORT:-1}
if ! sinfo >/dev/null 2>&1; then
	fail slurm_cluster_available "sinfo fails with SLURM_CONF=${SLURM_CONF:-unset}: the fixture did not start"
	exit 1
fi
P="tp$$"                       # job names unique to this run
NAME="$P tr 13B; run's (main)"  # spaces and shell metacharacters on purpose
cleanup() {
	squeue --noheader --format=%A\ %j | awk -v p="$P" 'index($0, p) {print $1}' | xargs -r scancel
	scontrol update nodename=n2 state=resume >/dev/null 2>&1
}
trap cleanup EXIT
running() { [ "$(squeue --noheader --name="$1" --states=RUNNING --format=%i | wc -l)" -ge 1 ]; }
mails_with() { grep -l -- "$1" "$LMTK_SMTP_DIR"/*.eml 2>/dev/null | wc -l; }

# --- usage -----------------------------------------------------------------------------------
expect_rc usage_needs_job_name 2 $SP
contains usage_names_missing_flag "$T/err" -- '--job-name is required'
expect_rc usage_bad_regex 2 $SP --job-name 'a(' --regex
contains usage_bad_regex_says_why "$T/err" 'bad regular expression'
expect_rc usage_grace_needs_require_running 2 $SP --job-name x --grace 30
expect_rc usage_bad_duration 2 $SP --job-name x --stale-after soon
expect_rc help_exits_0 0 $SP --help
contains help_lists_progress_log "$T/out" -- '--progress-log FILE'
contains help_lists_json "$T/out" '^ +--json +print the jobs, alerts and bad nodes'
contains man_has_json_output_section "$TOP/man/man1/slurm-pulse.1" '^\.SH JSON OUTPUT$'
# squeue_jobs NAME: "id state partition" of every job so named, sorted: the peer for --json's jobs
squeue_jobs() { squeue --noheader --name="$1" --format='%i|%T|%P' | sort; }

# --- nothing running or scheduled: alert, one mail, no second mail, recovered later ----------
S=$T/pulse.state
mail_clear
expect_rc none_exits_1 1 $SP --job-name "$NAME" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S" --log "$T/main_log.txt"
contains none_alert_wording "$T/out" "^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}\] PULSE: \*\*\*ALERT: $P tr 13B; run's \(main\) is not RUNNING or SCHEDULED! Alert someone at Eng WG\*\*\*$"
contains none_alert_appended_to_log "$T/main_log.txt" 'is not RUNNING or SCHEDULED'
wait_for 10 test "$(mail_count)" -ge 1
check none_one_mail [ "$(mail_count)" = 1 ]
contains none_mail_subject "$(first_mail)" "^Subject: \[ALERT\] $P tr 13B; run's \(main\) is neither running nor scheduled to run"
contains none_mail_body "$(first_mail)" "is neither RUNNING nor SCHEDULED! Alert someone at Eng WG"
expect_rc none_again_exits_1 1 $SP --job-name "$NAME" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S"
sleep 0.5
check none_no_second_mail_in_window [ "$(mail_count)" = 1 ]
expect_rc json_none_exits_1 1 $SP --json --job-name "$NAME" --no-mail --log "$T/json_log.txt"
json_ok json_none_names_the_alert "$T/out" "
assert (j['job_name'], j['ok'], j['running'], j['pending'], j['jobs']) == (sys.argv[3], False, 0, 0, []), j
assert j['alerts'] == [{'alert': 'not-scheduled', 'message':
    'PULSE: ***ALERT: %s is not RUNNING or SCHEDULED! Alert someone at Eng WG***' % sys.argv[3]}], j['alerts']
assert (j['bad_nodes'], j['slurm_error'], j['mail_failures']) == ([], None, 0)
" "$NAME"
contains json_none_line_on_stderr "$T/err" "PULSE: \*\*\*ALERT: $P tr 13B; run's \(main\) is not RUNNING or SCHEDULED"
contains json_none_line_in_the_log "$T/json_log.txt" 'is not RUNNING or SCHEDULED'

# --- a job array: one task running, the rest pending on the array limit ----------------------
ARR=$(sbatch --parsable --job-name="$NAME" --array=1-3%1 --output=/dev/null --wrap 'sleep 300')
wait_for 20 running "$NAME"
expect_rc array_running_exits_0 0 $SP --job-name "$NAME" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S"
contains array_running_line "$T/out" "PULSE: $P tr 13B; run's \(main\) is running for [0-9:]+ since [0-9T:-]+ \(${ARR}_1 on 'debug' partition \(n[12]\)$"
contains array_limit_line "$T/out" "PULSE: $P tr 13B; run's \(main\) is waiting for the previous Job Array job to finish before scheduling a new one \(${ARR}_\[2-3%1\] on 'debug' partition\)$"
wait_for 10 test "$(mail_count)" -ge 2
contains recovered_mail_sent "$(last_mail)" "^Subject: \[RECOVERED\] $P tr 13B; run's \(main\) is neither running nor scheduled to run"
expect_rc healthy_again_exits_0 0 $SP --job-name "$NAME" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$S"
squeue_jobs "$NAME" >"$T/squeue.txt"
expect_rc json_array_exits_0 0 $SP --json --job-name "$NAME" --no-mail
json_ok json_array_jobs_are_squeues "$T/out" "
want = sorted(tuple(l.split('|')) for l in open(sys.argv[3]).read().splitlines())
got = sorted((x['id'], x['state'], x['partition']) for x in j['jobs'])
assert got == want and len(got) == 2, (got, want)
r = [x for x in j['jobs'] if x['status'] == 'running']
assert (j['ok'], j['running'], j['pending'], j['alerts']) == (True, 1, 1, []), j
assert r[0]['id'] == sys.argv[4] + '_1' and r[0]['nodelist'] in ('n1', 'n2') and r[0]['name'] == sys.argv[5], r
assert r[0]['line'].startswith('PULSE: %s is running for ' % sys.argv[5]) and isinstance(r[0]['start_time'], int), r
p = [x for x in j['jobs'] if x['status'] == 'pending'][0]
assert (p['reason'], p['nodelist']) == ('JobArrayTaskLimit', ''), p
" "$T/squeue.txt" "$ARR" "$NAME"
sleep 0.5
check healthy_sends_no_mail [ "$(mail_count)" = 2 ]

# --- pending on a dependency; scheduled with a start time; waiting to be scheduled -----------
DEP="$P-dep"
sbatch --parsable --job-name="$DEP" --dependency=afterok:"$ARR" --output=/dev/null --wrap true >/dev/null
expect_rc dependency_exits_0 0 $SP --job-name "$DEP"
contains dependency_line "$T/out" "PULSE: $DEP is waiting for the previous job to finish before scheduling a new one using the dependency mechanism \([0-9]+ on 'debug' partition\)$"
LATER="$P-later"
sbatch --parsable --job-name="$LATER" --begin=now+1hour --output=/dev/null --wrap true >/dev/null
expect_rc scheduled_exits_0 0 $SP --job-name "$LATER"
contains scheduled_line "$T/out" "PULSE: $LATER is scheduled to start in (0:5[89]:[0-9]{2}|1:00:00) \(at [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\) \([0-9]+ on 'debug' partition\)$"
HELD="$P-held"
sbatch --parsable --job-name="$HELD" --hold --output=/dev/null --wrap true >/dev/null
expect_rc waiting_exits_0 0 $SP --job-name "$HELD"
contains waiting_line "$T/out" "PULSE: $HELD is waiting to be scheduled \([0-9]+ on 'debug' partition\)$"

# --- exclusive reservations: pending is not enough -------------------------------------------
expect_rc require_running_pending_alerts 1 $SP --job-name "$HELD" --require-running
contains require_running_wording "$T/out" "\*\*\*ALERT: $HELD is SCHEDULED but not RUNNING \(pending for 0:00:[0-9]{2}\)"
squeue_jobs "$HELD" >"$T/squeue.txt"
expect_rc json_require_running_pending_exits_1 1 $SP --json --job-name "$HELD" --require-running
json_ok json_require_running_names_not_running "$T/out" "
want = [tuple(l.split('|')) for l in open(sys.argv[3]).read().splitlines()]
assert [(x['id'], x['state'], x['partition']) for x in j['jobs']] == want and want[0][1] == 'PENDING', (j['jobs'], want)
assert [a['alert'] for a in j['alerts']] == ['not-running'] and 'SCHEDULED but not RUNNING' in j['alerts'][0]['message']
assert (j['ok'], j['running'], j['pending'], j['jobs'][0]['status']) == (False, 0, 1, 'pending')
" "$T/squeue.txt"
expect_rc require_running_within_grace_ok 0 $SP --job-name "$HELD" --require-running --grace 30
expect_rc require_running_running_ok 0 $SP --job-name "$NAME" --require-running

# --- regex, users ----------------------------------------------------------------------------
expect_rc regex_matches_several 0 $SP --regex --job-name "$P-(dep|later)"
check regex_reports_both [ "$(grep -c 'PULSE:' "$T/out")" = 2 ]
expect_rc regex_is_anchored 1 $SP --regex --job-name "$P-de"
expect_rc user_filter_keeps_owner 0 $SP --job-name "$DEP" --user root
expect_rc user_filter_drops_others 1 $SP --job-name "$DEP" --user nobody
expect_rc unknown_user_is_usage_error 2 $SP --job-name "$DEP" --user no-such-user-lmtk
contains unknown_user_named "$T/err" "--user: no such user 'no-such-user-lmtk'"
expect_rc group_filter 0 $SP --job-name "$DEP" --group root
expect_rc group_unknown_is_usage_error 2 $SP --job-name "$DEP" --group no-such-group-lmtk

# --- hang detection --------------------------------------------------------------------------
LOG=$T/train_log.txt
printf ' iteration      100/  200000 | consumed samples: 3200 | lm loss: 2.7E+00 |\n[2026-01-01 00:00:00] PULSE: something else\n' > "$LOG"
touch -d '-2 hours' "$LOG"
sleep 3   # the running task must be older than --stale-after
HS=$T/hang.state
mail_clear
expect_rc stale_log_alerts 1 $SP --job-name "$NAME" --progress-log "$LOG" --stale-after 2s --state-file "$HS" --mail-to oncall@example.org --smtp-url $SMTP
contains stale_names_last_iteration "$T/out" "seems to hang: no new iteration line in $LOG for [0-9:]+ \(last: iteration 100, seen at [0-9-]+ [0-9:]+\)"
wait_for 10 test "$(mail_count)" -ge 1
check stale_mail_sent [ "$(mails_with 'seems to hang')" = 1 ]
expect_rc fresh_log_is_fine 0 $SP --job-name "$NAME" --progress-log "$LOG" --stale-after 60m
printf ' iteration      101/  200000 | consumed samples: 3232 |\n' >> "$LOG"
expect_rc new_iteration_clears 0 $SP --job-name "$NAME" --progress-log "$LOG" --stale-after 2s --state-file "$HS" --mail-to oncall@example.org --smtp-url $SMTP
wait_for 10 test "$(mails_with RECOVERED)" -ge 1
check stale_recovered_mail [ "$(mails_with 'RECOVERED.*seems to hang')" = 1 ]
# the same iteration for longer than the limit, although the file keeps changing (other writers)
sleep 3
echo "[2026-01-01 00:00:00] PULSE: unrelated line" >> "$LOG"
expect_rc same_iteration_goes_stale 1 $SP --job-name "$NAME" --progress-log "$LOG" --stale-after 2s --state-file "$HS"
contains stale_again_names_101 "$T/out" "last: iteration 101"
expect_rc json_stale_exits_1 1 $SP --json --job-name "$NAME" --progress-log "$LOG" --stale-after 2s --state-file "$HS"
json_ok json_stale_names_the_hang "$T/out" "
assert [a['alert'] for a in j['alerts']] == ['stale'] and 'last: iteration 101' in j['alerts'][0]['message'], j['alerts']
assert j['progress'] == {'log': sys.argv[3], 'iteration': 101, 'error': None, 'stale_after_seconds': 2}, j['progress']
" "$LOG"
# a run that never logs an iteration, although the pulse itself appends to the same file
NOITER=$T/noiter_log.txt
echo "starting up" > "$NOITER"
expect_rc no_iteration_line_goes_stale 1 $SP --job-name "$NAME" --log "$NOITER" --progress-log "$NOITER" --stale-after 2s --no-mail
contains no_iteration_line_wording "$T/out" "seems to hang: no iteration line in $NOITER since it started"
expect_rc stale_ignored_for_young_job 0 $SP --job-name "$NAME" --progress-log "$LOG" --stale-after 60m

# --- drained node: named with its reason, so the next sbatch can --exclude it ----------------
scontrol update nodename=n2 state=drain reason="lmtk-test bad gpu"
mail_clear
expect_rc drained_node_alerts 1 $SP --job-name "$NAME" --state-file "$T/node.state" --mail-to oncall@example.org --smtp-url $SMTP
contains drained_node_named "$T/out" "ALERT: node n2 is (drained|draining|mixed\+drain)[^:]*: lmtk-test bad gpu \('debug' partition\) - add --exclude=n2"
lacks healthy_node_not_named "$T/out" "node n1 is"
expect_rc json_drained_node_exits_1 1 $SP --json --job-name "$NAME" --no-mail
json_ok json_drained_node_is_named "$T/out" "
assert [(n['name'], n['reason'], n['partition']) for n in j['bad_nodes']] == [('n2', 'lmtk-test bad gpu', 'debug')], j['bad_nodes']
assert 'drain' in j['bad_nodes'][0]['state'] and [a['alert'] for a in j['alerts']] == ['node:n2'], j['alerts']
assert j['ok'] is False and j['running'] == 1
"
wait_for 10 test "$(mail_count)" -ge 1
contains drained_mail_subject "$(first_mail)" "^Subject: \[ALERT\] .*node n2 is"
scontrol update nodename=n2 state=resume
wait_for 10 sh -c "sinfo --noheader -n n2 -o %T | grep -qv '[*]'"
expect_rc resumed_node_clears 0 $SP --job-name "$NAME" --state-file "$T/node.state" --mail-to oncall@example.org --smtp-url $SMTP
wait_for 10 test "$(mails_with RECOVERED)" -ge 1
check resumed_node_recovered_mail [ "$(mails_with 'RECOVERED.*node n2')" = 1 ]

# --- SLURM stopped: a second cluster of our own, shut down -> alert, exit 3 ----------------------
C2=$T/cluster2
mkdir -p "$C2"
if out=$(bash "$TOP/tests/fixtures/slurm-cluster.sh" start "$C2" 2>"$T/c2.err"); then
	conf2=$(sed -n 's/^export SLURM_CONF=//p' <<<"$out")
	mail_clear
	SLURM_CONF=$conf2 expect_rc second_cluster_answers 1 $SP --job-name "$NAME" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$T/c2.state"
	bash "$TOP/tests/fixtures/slurm-cluster.sh" stop "$C2"
	wait_for 10 test "$(mail_count)" -ge 1
	mail_clear
	SLURM_CONF=$conf2 expect_rc slurm_stopped_exits_3 3 $SP --job-name "$NAME" --mail-to oncall@example.org --smtp-url $SMTP --state-file "$T/c2.state"
	check slurm_stopped_keeps_earlier_alert grep -q not-scheduled "$T/c2.state"
	SLURM_CONF=$conf2 expect_rc json_slurm_stopped_exits_3 3 $SP --json --job-name "$NAME" --no-mail
	json_ok json_slurm_stopped_says_why "$T/out" "
assert 'Unable to contact slurm controller' in j['slurm_error'] and j['ok'] is False and j['jobs'] == [], j
assert [a['alert'] for a in j['alerts']] == ['slurm-unreachable']
"
	contains slurm_stopped_alert "$T/out" "PULSE: \*\*\*ALERT: cannot check $P tr 13B; run's \(main\): SLURM is unreachable: squeue failed .*Unable to contact slurm controller"
	wait_for 10 test "$(mail_count)" -ge 1
	contains slurm_stopped_mail "$(first_mail)" "^Subject: \[ALERT\] cannot check .*: SLURM is unreachable"
	sleep 0.5
	check slurm_stopped_is_no_recovery [ "$(mail_count)" = 1 ]
else
	fail second_cluster_start "$(tail -5 "$T/c2.err")"
fi
PATH=/nonexistent expect_rc squeue_missing_exits_3 3 $SP --job-name "$NAME" --no-mail
contains squeue_missing_says_so "$T/out" "squeue: No such file or directory"
PATH=/nonexistent expect_rc json_squeue_missing_exits_3 3 $SP --json --job-name "$NAME" --no-mail
json_ok json_squeue_missing_says_so "$T/out" "assert 'squeue: No such file or directory' in j['slurm_error'], j['slurm_error']"
