#!/usr/bin/env bash
# make demo: the on-call side of a training run, end to end, on a throw-away local SLURM cluster
# (munge + slurmctld + two slurmd on 127.0.0.1) with an SMTP sink standing in for the mail server.
#
#   1. a stand-in training job array (share/lmtk/demo-train.slurm) writes a main log;
#   2. cron-hourly (its period shortened to 5 s) submits slurm/slurm-pulse.slurm from cron.hourly/,
#      which reports the job's pulse into the main log;
#   3. fs-watchdog checks the demo's filesystem and a budget;
#   4. the job is cancelled: slurm-pulse alerts, and the alert mail arrives, once.
# Everything started here is stopped by pid at the end.
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
export TOP
. "$TOP/tests/fixtures/fixtures.sh"
D=$(mktemp -d /tmp/lmtk-demo.XXXXXX)
trap 'fixtures_stop "$D/fx"; rm -rf "$D"' EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "starting a local SLURM cluster and an SMTP sink"
fixtures_start "$D/fx" || exit 3
sinfo

JOB=demo-tr1-13B
LOG=$D/logs/main_log.txt
mkdir -p "$D/logs" "$D/state"
step "submitting the training as a job array: sbatch --array=1-3%1 --job-name=$JOB"
sbatch --array=1-3%1 --job-name=$JOB --output="$D/logs/%x-%A_%a.out" "$TOP/share/lmtk/demo-train.slurm" "$LOG"
sleep 3
squeue

step "cron on SLURM: cron-hourly every 5 s, with slurm/slurm-pulse.slurm in cron.hourly/"
C=$D/cron
mkdir -p "$C/cron.hourly" "$C/cron.daily" "$C/logs"
cp "$TOP"/cron/cron.sh "$TOP"/cron/cron-*.slurm "$TOP"/cron/cron-report.sh "$C/"
cp "$TOP/slurm/slurm-pulse.slurm" "$C/cron.hourly/"
export LMTK=$TOP PULSE_JOB_NAME=$JOB PULSE_MAIN_LOG=$LOG PULSE_MAIL_TO=oncall@example.org \
	PULSE_STATE_DIR=$D/state PULSE_SMTP_URL=smtp://127.0.0.1:$LMTK_SMTP_PORT PULSE_OTHER_CRON=cron-hourly
(cd "$C" && LMTK_CRON_PERIOD=5 sbatch cron-hourly.slurm)
sleep 12
echo "-- $C/logs/cron.log:"
cat "$C/logs/cron.log"
echo "-- PULSE lines the cron job appended to the training's main log:"
grep PULSE "$LOG" | tail -4
scancel --name=cron-hourly

step "fs-watchdog: the demo filesystem, and a 1 MiB budget for the logs"
"$TOP/bin/fs-watchdog" --verbose --check "$D:space=99%,inodes=99%" --budget "$D/logs:1M" --no-mail
echo "(exit $?)"

step "the training dies: scancel --name=$JOB; slurm-pulse alerts (exit 1) and mails once"
scancel --name=$JOB
sleep 2
for run in 1 2; do
	"$TOP/bin/slurm-pulse" --job-name $JOB --log "$LOG" --mail-to oncall@example.org \
		--smtp-url "smtp://127.0.0.1:$LMTK_SMTP_PORT" --state-file "$D/state/demo.json"
	echo "(run $run: exit $?)"
done
sleep 1
echo "-- mail received by the sink:"
grep -h '^Subject:' "$LMTK_SMTP_DIR"/*.eml | sort | uniq -c
step "demo done; stopping the cluster"
