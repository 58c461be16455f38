#!/usr/bin/env bash
# slurm/*.slurm, the scripts dropped into cron.hourly/ and cron.daily/, run as real batch jobs
# on the local cluster, configured through their environment variables.
. "$(dirname "$0")/../lib.sh"
if ! sinfo >/dev/null 2>&1; then
	fail slurm_cluster_available "sinfo fails with SLURM_CONF=${SLURM_CONF:-unset}"
	exit 1
fi
P=wr$$
finished() { [ -z "$(squeue --noheader --jobs="$1" 2>/dev/null)" ]; }
export LMTK=$TOP

# slurm-pulse.slurm: the training (a running stand-in) and the other cron scheduler (absent)
mkdir -p "$T/logs" "$T/state"
TR=$(sbatch --parsable --job-name="$P-train" --output=/dev/null --wrap 'sleep 120')
wait_for 20 sh -c "squeue --noheader --jobs=$TR --states=RUNNING | grep -q ."
mail_clear
J=$(PULSE_JOB_NAME=$P-train PULSE_MAIN_LOG=$T/logs/main_log.txt PULSE_MAIL_TO=oncall@example.org \
	PULSE_STATE_DIR=$T/state PULSE_SMTP_URL=smtp://127.0.0.1:$LMTK_SMTP_PORT PULSE_OTHER_CRON=$P-cron-daily \
	sbatch --parsable --output="$T/pulse.out" "$TOP/slurm/slurm-pulse.slurm")
wait_for 30 finished "$J"
contains pulse_wrapper_reports_into_main_log "$T/logs/main_log.txt" "PULSE: $P-train is running for"
contains pulse_wrapper_watches_other_scheduler "$T/pulse.out" "ALERT: $P-cron-daily is not RUNNING or SCHEDULED"
wait_for 10 test "$(mail_count)" -ge 1
check pulse_wrapper_mails_scheduler_alert grep -q "^Subject: \[ALERT\] $P-cron-daily is neither running" "$LMTK_SMTP_DIR"/*.eml
check pulse_wrapper_keeps_state test -s "$T/state/pulse-$P-train.json"
scancel "$TR"

# fs-watchdog.slurm: its config file, and the cron-hourly scheduler (not running here)
printf 'check %s:space=100%%\nmin-free %s:1P\n' "$T" "$T" > "$T/fsw.conf"
mail_clear
J=$(FSW_CONFIG=$T/fsw.conf FSW_MAIL_TO=oncall@example.org FSW_STATE_DIR=$T/state \
	FSW_SMTP_URL=smtp://127.0.0.1:$LMTK_SMTP_PORT sbatch --parsable --cpus-per-task=2 \
	--output="$T/fsw.out" "$TOP/slurm/fs-watchdog.slurm")
wait_for 30 finished "$J"
contains fsw_wrapper_runs_config "$T/fsw.out" "\[ALERT\] $T is getting close to being full: .* less than the 1.00 PiB minimum"
contains fsw_wrapper_watches_cron_hourly "$T/fsw.out" "ALERT: cron-hourly is not RUNNING or SCHEDULED"
wait_for 10 test "$(mail_count)" -ge 2
check fsw_wrapper_mails_both [ "$(grep -l '^Subject: \[ALERT\]' "$LMTK_SMTP_DIR"/*.eml | wc -l)" = 2 ]
