#!/usr/bin/env bash
# cron on SLURM, on the local cluster with the period shortened to 10 s (LMTK_CRON_PERIOD):
# the scheduler fires on the clock's boundaries, a slow job never overlaps itself nor piles up,
# a failing job is reported in cron.log, output goes to the log folder, an empty folder is fine.
. "$(dirname "$0")/../lib.sh"
if ! sinfo >/dev/null 2>&1; then
	fail slurm_cluster_available "sinfo fails with SLURM_CONF=${SLURM_CONF:-unset}"
	exit 1
fi
C=$T/cron
mkdir -p "$C/cron.hourly" "$C/cron.daily" "$C/logs"
cp "$TOP"/cron/cron.sh "$TOP"/cron/cron-hourly.slurm "$TOP"/cron/cron-daily.slurm "$TOP"/cron/cron-report.sh "$C/"
cleanup() {
	for n in cron-hourly cron-daily tick fail tick.on-failure fail.on-failure; do scancel --name="$n" 2>/dev/null; done
}
trap cleanup EXIT

# a job slower than the period (20 s > 10 s), and one that fails
cat > "$C/cron.hourly/tick.slurm" <<JOB
#!/bin/bash
echo "start \$(date +%s) \$SLURM_JOB_ID" >> "$C/ticks"
sleep 20
echo "end \$(date +%s) \$SLURM_JOB_ID" >> "$C/ticks"
JOB
printf '#!/bin/bash\necho failing on purpose\nexit 3\n' > "$C/cron.hourly/fail.slurm"
echo "not a job" > "$C/cron.hourly/README.txt"

t0=$(date +%s)
(cd "$C" && LMTK_CRON_PERIOD=10 sbatch --quiet cron-hourly.slurm) || fail cron_hourly_submit "sbatch failed"
(cd "$C" && LMTK_CRON_PERIOD=600 sbatch --quiet cron-daily.slurm) || fail cron_daily_submit "sbatch failed"
# long enough for the first run plus four boundaries
sleep $(( 45 - ($(date +%s) - t0) ))

L=$C/logs/cron.log
fired=$(grep -c 'cron-hourly: fired at' "$L" 2>/dev/null)
check hourly_fired_every_period [ "${fired:-0}" -ge 4 ]
# every run after the first starts within 2 s of a 10 s boundary, one per boundary: no drift
late=$(grep 'cron-hourly: fired at' "$L" | sed 's/.*(epoch \([0-9]*\)).*/\1/' | tail -n +2 |
	awk '{ if ($1 % 10 > 2) bad++; slot = int($1 / 10); if (slot == prev) bad++; prev = slot } END { print bad + 0 }')
check hourly_anchored_to_clock [ "$late" = 0 ]
check hourly_resubmitted_itself [ "$(squeue --noheader --name=cron-hourly | wc -l)" -ge 1 ]

# tick: ran, never two at once, never more than one queued behind
started=$(grep -c '^start' "$C/ticks" 2>/dev/null)
check slow_job_ran [ "${started:-0}" -ge 2 ]
overlap=$(sort -k2,2n "$C/ticks" | awk '
	$1 == "start" { if (running) bad++; running = 1 }
	$1 == "end"   { running = 0 }
	END { print bad + 0 }')
check slow_job_never_overlaps_itself [ "$overlap" = 0 ]
contains slow_job_not_piled_up "$L" 'tick: previous run still queued \(job [0-9]+\), not queueing another'
check at_most_one_tick_pending [ "$(squeue --noheader --name=tick --states=PENDING | wc -l)" -le 1 ]

# failures are reported; output lands in the log folder, not next to the scripts
wait_for 15 grep -q 'fail (job [0-9]*) FAILED' "$L"
contains failed_job_reported "$L" "cron: fail \(job [0-9]+\) FAILED; its output: $C/logs/fail-[0-9]+\.out"
check job_output_in_log_folder test -n "$(ls "$C"/logs/tick-*.out 2>/dev/null)"
check no_output_in_script_folder [ -z "$(ls "$C"/cron.hourly/*.out "$C"/*.out 2>/dev/null)" ]
lacks non_slurm_files_ignored "$L" 'README'
lacks successful_job_not_reported "$L" 'tick \(job [0-9]+\) FAILED'

# the daily scheduler with an empty folder: runs, says so, and queues its next run
contains empty_folder_is_fine "$L" "cron-daily: no jobs in $C/cron.daily"
check daily_next_run_queued [ "$(squeue --noheader --name=cron-daily --states=PENDING --format=%r)" = BeginTime ]
