#!/bin/bash
# Runs (as a SLURM job) only when a cron job failed: --dependency=afternotok:JOBID.
# Arguments: CRON_LOG NAME JOBID OUTPUT
#SBATCH --ntasks=1
printf '[%s] cron: %s (job %s) FAILED; its output: %s\n' "$(date '+%Y-%m-%d %H:%M:%S')" "$2" "$3" "$4" >> "$1"
