#!/bin/bash
# Runs (as a SLURM job) only when a cron job failed: --dependency=afternotok:JOBID.
# Arguments: CRON_LOG NAME JOBID OUTPUT
#SBATCH --ntasks=1
[ $# = 4 ] && [ -n "$1" ] || { echo "usage: cron-report.sh CRON_LOG NAME JOBID OUTPUT (cron.sh submits it)" >&2; exit 2; }
printf '[%s] cron: %s (job %s) FAILED; its output: %s\n' "$(date '+%Y-%m-%d %H:%M:%S')" "$2" "$3" "$4" >> "$1"
