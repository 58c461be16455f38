# cron.sh - cron for clusters without crontab, run inside a SLURM job.  Sourced by
# cron-hourly.slurm and cron-daily.slurm with CRON_NAME (cron-hourly) and CRON_PERIOD (seconds).
#
# 1. Resubmit the scheduler job itself FIRST, so one failing cron job can't break the chain,
#    with --begin at the next period boundary of the wall clock (10:00, 11:00, ... or local
#    midnight): a late start never shifts the schedule, unlike the old "--begin=now+1hour".
#    --dependency=singleton keeps the next scheduler job from starting while this one runs.
# 2. sbatch every *.slurm in cron.hourly/ (cron.daily/): an empty folder is fine.  Each job is
#    named after its file and submitted with --dependency=singleton, so a slow job never overlaps
#    itself; if the previous one is still queued, no second copy is queued behind it.  Output goes
#    to the log folder, never to the script folder.
# 3. Each job gets a small companion job (afternotok) that writes "FAILED" to the cron log if
#    the job fails; when it succeeds the companion is dropped (--kill-on-invalid-dep).
#
# Environment (all optional):
#   LMTK_CRON_DIR        folder holding the cron-*.slurm scripts and cron.hourly/, cron.daily/
#                        (default: the directory sbatch was run from)
#   LMTK_CRON_LOG_DIR    job output and cron.log (default: $LMTK_CRON_DIR/logs)
#   LMTK_CRON_PERIOD     override the period in seconds (tests use 15)
#   LMTK_CRON_KEEP_DAYS  delete job output older than this (default 30)
#   LMTK_CRON_SBATCH_ARGS extra sbatch arguments for every cron job (e.g. "--partition=prepost")

if [ -z "${CRON_NAME:-}" ] || [ -z "${CRON_PERIOD:-}" ]; then
	echo "cron.sh: sourced by cron-hourly.slurm or cron-daily.slurm, which set CRON_NAME and CRON_PERIOD" >&2
	exit 2
fi
set -u
CRON_DIR=${LMTK_CRON_DIR:-${SLURM_SUBMIT_DIR:-$PWD}}
LOG_DIR=${LMTK_CRON_LOG_DIR:-$CRON_DIR/logs}
CRON_PERIOD=${LMTK_CRON_PERIOD:-$CRON_PERIOD}
FOLDER=$CRON_DIR/cron.${CRON_NAME#cron-}
CRON_LOG=$LOG_DIR/cron.log
export LMTK_CRON_DIR=$CRON_DIR LMTK_CRON_LOG_DIR=$LOG_DIR

mkdir -p "$LOG_DIR"
log() { printf '[%s] %s: %s\n' "$(date '+%Y-%m-%d %H:%M:%S')" "$CRON_NAME" "$*" >> "$CRON_LOG"; }

# --- 1. the next run, anchored to the clock -----------------------------------------------------
now=$(date +%s)
if [ "$CRON_PERIOD" = 86400 ]; then
	# local midnight, asked of date(1) so that a daylight-saving change does not shift it
	next=$(date -d 'tomorrow 00:00' +%s)
else
	off=$(date +%z)  # local UTC offset, so that periods align with the local clock (+05:30 too)
	off_s=$(( (${off:0:1}1) * (10#${off:1:2} * 3600 + 10#${off:3:2} * 60) ))
	next=$(( ((now + off_s) / CRON_PERIOD + 1) * CRON_PERIOD - off_s ))
fi
begin=$(date -d "@$next" '+%Y-%m-%dT%H:%M:%S')
if out=$(cd "$CRON_DIR" && sbatch --parsable --job-name="$CRON_NAME" --begin="$begin" \
	--dependency=singleton --output="$LOG_DIR/$CRON_NAME-%j.out" "$CRON_DIR/$CRON_NAME.slurm" 2>&1); then
	log "fired at $(date -d "@$now" '+%H:%M:%S') (epoch $now); next run at $begin (job ${out%%;*})"
else
	log "ERROR: could not resubmit $CRON_NAME: $out"
fi

# --- 2. the jobs --------------------------------------------------------------------------------
shopt -s nullglob
jobs=("$FOLDER"/*.slurm)
[ ${#jobs[@]} -eq 0 ] && log "no jobs in $FOLDER"
for f in "${jobs[@]}"; do
	name=$(basename "$f" .slurm)
	queued=$(squeue --noheader --me --name="$name" --states=PENDING --format=%i 2>/dev/null | head -1)
	if [ -n "$queued" ]; then
		log "$name: previous run still queued (job $queued), not queueing another"
		continue
	fi
	# shellcheck disable=SC2086
	if id=$(sbatch --parsable --job-name="$name" --dependency=singleton \
		--output="$LOG_DIR/$name-%j.out" ${LMTK_CRON_SBATCH_ARGS:-} "$f" 2>&1); then
		id=${id%%;*}
		log "$name: submitted job $id"
		sbatch --parsable --quiet --job-name="$name.on-failure" --dependency=afternotok:"$id" \
			--kill-on-invalid-dep=yes --output=/dev/null --time=5 \
			"$CRON_DIR/cron-report.sh" "$CRON_LOG" "$name" "$id" "$LOG_DIR/$name-$id.out" >/dev/null 2>&1 ||
			log "$name: could not submit the failure report for job $id"
	else
		log "$name: ERROR: sbatch failed: $(echo "$id" | tr '\n' ' ')"
	fi
done

# --- 3. housekeeping: job output must not pile up forever ---------------------------------------
find "$LOG_DIR" -maxdepth 1 -name '*.out' -mtime +"${LMTK_CRON_KEEP_DAYS:-30}" -delete 2>/dev/null
exit 0
