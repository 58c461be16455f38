#!/usr/bin/env bash
# A training step without host synchronisation (src/train/run/iter.c, struct ops_step), on the
# CUDA executor:
#  - inside the --profile range, every host synchronisation train makes leaves work queued on the
#    device (the executor's LMTK_CUDA_EXEC_SYNCS log: "CALL QUEUED"): the host reads iteration
#    k's scalars while iteration k+1 runs, and nothing in a step waits for the device to drain -
#    the same run made synchronous (LMTK_TRAIN_SYNC_STEP=1) drains it several times a step,
#    which shows the log sees such waits;
#  - the deferred read-back changes nothing a user sees: with gradient accumulation (2
#    micro-batches) and clipping active (--clip-grad below the norm), the log lines, the
#    TensorBoard scalars and every checkpoint (saved at iterations 3, 6 and 7) equal the
#    synchronous run's;
#  - train --cuda-graph (a warm-up step, two captured steps, the rest replayed) gives the eager
#    run's logs, TensorBoard scalars and checkpoints bit for bit over 8 iterations with the same
#    accumulation and clipping; the captures themselves succeed under the executor's rule that
#    refuses any host synchronisation while a stream captures;
#  - --fp16 keeps Megatron's loss scaler on the host and reads each step back once, at its end
#    (the next step's scale and learning rate hang on the overflow flag): one wait per step, for
#    the step's own scalars, none inside it; with a scale that doubles and overflows (skipped
#    steps) the logs, TensorBoard and checkpoints equal the synchronous run's;
#  - --cuda-graph is refused (exit 2, naming why) on the cpu backend, with dropout (its seed is a
#    per-iteration kernel argument), and where the step reads values back (LMTK_TRAIN_SYNC_STEP).
. "$(dirname "$0")/../lib.sh"
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
if [ ! -s "$EXEC" ]; then
	skip train_nosync "the executor plugin is not built (no CUDA toolkit headers)"
	exit 0
fi
cd "$T" || exit 3
python3 "$TOP/tests/ref/rand-dataset.py" rand 64 200 20000 3 || exit 3
run() {   # run NAME [flags]: env passes through
	local name=$1 prec=--bf16
	shift
	case " $* " in *" --fp16 "*) prec= ;; esac
	LMTK_CUDA_PLUGIN=$EXEC "$BIN/train" --num-layers 2 --hidden-size 64 \
		--num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 \
		--micro-batch-size 2 --global-batch-size 4 --lr 1e-3 $prec --data-path rand \
		--vocab-file vocab.json --merge-file merges.txt --split 1000,0,0 --eval-iters 0 \
		--log-interval 1 --device cuda --clip-grad 0.05 "$@" >"$name.log" 2>&1
}

# no synchronisation inside a step: iterations 3..5 profiled
prof="--train-iters 6 --profile --profile-step-start 2 --profile-step-end 5"
if LMTK_CUDA_EXEC_SYNCS=$T/syncs-deferred run prof-deferred $prof &&
   LMTK_TRAIN_SYNC_STEP=1 LMTK_CUDA_EXEC_SYNCS=$T/syncs-sync run prof-sync $prof; then
	n=$(wc -l <syncs-deferred)
	idle=$(awk '$NF == 0' syncs-deferred | wc -l)
	idle_sync=$(awk '$NF == 0' syncs-sync | wc -l)
	if [ "$idle" -eq 0 ] && [ "$n" -le 3 ] && [ "$idle_sync" -ge 3 ]; then
		ok step_makes_no_host_sync_that_drains_the_device
	else
		fail step_makes_no_host_sync_that_drains_the_device \
			"deferred: $n syncs in 3 iterations, $idle with nothing queued: $(head -5 syncs-deferred | tr '\n' ';'); synchronous: $idle_sync draining"
	fi
else
	fail step_makes_no_host_sync_that_drains_the_device "train failed: $(tail -3 prof-deferred.log prof-sync.log)"
fi

# the deferred read-back is invisible: logs, TensorBoard, checkpoints
strip() {   # the log lines without the wall-clock fields
	grep -E '^ iteration|^train: done|skipped' "$1" | sed -E 's/[0-9.]+ s$//;
		s/(elapsed time per iteration \(s\)|samples per second|TFLOPs|MFU): [0-9.%]+//g;
		s/ time remaining: [^|]*\|//'
}
if run same-deferred --train-iters 7 --save-interval 3 --save ck-deferred --tensorboard-dir tb-deferred &&
   LMTK_TRAIN_SYNC_STEP=1 run same-sync --train-iters 7 --save-interval 3 --save ck-sync --tensorboard-dir tb-sync; then
	strip same-deferred.log >a.txt
	strip same-sync.log >b.txt
	python3 "$TOP/tests/ref/tfevents-read.py" tb-deferred | grep -v -e '^TEXT' -e iteration-time >ta.txt
	python3 "$TOP/tests/ref/tfevents-read.py" tb-sync | grep -v -e '^TEXT' -e iteration-time >tb.txt
	same=1
	for s in 3 6 7; do
		cmp -s ck-deferred/global_step$s/rank_tp00_pp000.safetensors \
			ck-sync/global_step$s/rank_tp00_pp000.safetensors || same=0
	done
	clipped=$(grep -c 'grad norm: [1-9]' a.txt)
	if [ "$same" = 1 ] && [ "$(grep -c iteration a.txt)" -ge 7 ] && [ "$clipped" -ge 7 ] &&
	   [ -s ta.txt ] && cmp -s a.txt b.txt && cmp -s ta.txt tb.txt; then
		ok deferred_readback_gives_the_synchronous_logs_tfevents_and_checkpoints
	else
		fail deferred_readback_gives_the_synchronous_logs_tfevents_and_checkpoints \
			"checkpoints same: $same, clipped iterations $clipped; $(diff a.txt b.txt | head -4; diff ta.txt tb.txt | head -4)"
	fi
else
	fail deferred_readback_gives_the_synchronous_logs_tfevents_and_checkpoints \
		"train failed: $(tail -3 same-deferred.log same-sync.log)"
fi

# --fp16: the scaler's state machine on the host, one read-back at each step's end
f16="--fp16 --initial-loss-scale 65536 --loss-scale-window 2 --hysteresis 1 --train-iters 10 --save-interval 5"
if LMTK_CUDA_EXEC_SYNCS=$T/syncs-fp16 run fp16-deferred $f16 --save ck-f16d --tensorboard-dir tb-f16d \
	--profile --profile-step-start 5 --profile-step-end 8 &&
   LMTK_TRAIN_SYNC_STEP=1 run fp16-sync $f16 --save ck-f16s --tensorboard-dir tb-f16s; then
	strip fp16-deferred.log >a.txt
	strip fp16-sync.log >b.txt
	python3 "$TOP/tests/ref/tfevents-read.py" tb-f16d | grep -v -e '^TEXT' -e iteration-time >ta.txt
	python3 "$TOP/tests/ref/tfevents-read.py" tb-f16s | grep -v -e '^TEXT' -e iteration-time >tb.txt
	same=1
	for s in 5 10; do
		cmp -s ck-f16d/global_step$s/rank_tp00_pp000.safetensors \
			ck-f16s/global_step$s/rank_tp00_pp000.safetensors || same=0
	done
	waits=$(grep -c '^cudaEventSynchronize ' syncs-fp16)
	others=$(grep -vc '^cudaEventSynchronize ' syncs-fp16)
	skipped=$(grep -c 'skipped iterations: *1 ' a.txt)
	if [ "$same" = 1 ] && [ "$waits" = 3 ] && [ "$others" = 0 ] && [ "$skipped" -ge 1 ] &&
	   grep -q 'loss scale: 524288' a.txt && cmp -s a.txt b.txt && cmp -s ta.txt tb.txt; then
		ok fp16_reads_each_step_back_once_at_its_end_as_the_synchronous_run
	else
		fail fp16_reads_each_step_back_once_at_its_end_as_the_synchronous_run \
			"checkpoints same: $same, waits $waits, other syncs $others, skipped $skipped; $(diff a.txt b.txt | head -4)"
	fi
else
	fail fp16_reads_each_step_back_once_at_its_end_as_the_synchronous_run \
		"train failed: $(tail -3 fp16-deferred.log fp16-sync.log)"
fi

# --cuda-graph against the eager run
nodrop="--hidden-dropout 0 --attention-dropout 0 --train-iters 8 --save-interval 4"
if run graph $nodrop --cuda-graph --save ck-graph --tensorboard-dir tb-graph &&
   run eager $nodrop --save ck-eager --tensorboard-dir tb-eager; then
	strip graph.log >a.txt
	strip eager.log >b.txt
	python3 "$TOP/tests/ref/tfevents-read.py" tb-graph | grep -v -e '^TEXT' -e iteration-time >ta.txt
	python3 "$TOP/tests/ref/tfevents-read.py" tb-eager | grep -v -e '^TEXT' -e iteration-time >tb.txt
	same=1
	for s in 4 8; do
		cmp -s ck-graph/global_step$s/rank_tp00_pp000.safetensors \
			ck-eager/global_step$s/rank_tp00_pp000.safetensors || same=0
	done
	if [ "$same" = 1 ] && [ "$(grep -c iteration a.txt)" -ge 8 ] && [ -s ta.txt ] &&
	   cmp -s a.txt b.txt && cmp -s ta.txt tb.txt; then
		ok cuda_graph_replays_give_the_eager_run_bit_for_bit
	else
		fail cuda_graph_replays_give_the_eager_run_bit_for_bit \
			"checkpoints same: $same; $(diff a.txt b.txt | head -4; diff ta.txt tb.txt | head -4)"
	fi
else
	fail cuda_graph_replays_give_the_eager_run_bit_for_bit "train failed: $(tail -3 graph.log eager.log)"
fi

refused() {   # refused NAME NEEDLE [env] -- flags
	local name=$1 needle=$2
	shift 2
	"$@" >"$name.log" 2>&1
	local rc=$?
	if [ $rc = 2 ] && grep -q -- "--cuda-graph cannot replay.*$needle" "$name.log"; then
		ok "cuda_graph_refused_$name"
	else
		fail "cuda_graph_refused_$name" "exit $rc: $(tail -2 "$name.log")"
	fi
}
base="--num-layers 1 --hidden-size 64 --num-attention-heads 4 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
	--data-path rand --vocab-file vocab.json --merge-file merges.txt --split 1000,0,0
	--eval-iters 0 --train-iters 2 --cuda-graph"
refused on_cpu "has no CUDA graphs" "$BIN/train" $base --device cpu --hidden-dropout 0 --attention-dropout 0
refused with_dropout "dropout's seed" env LMTK_CUDA_PLUGIN="$EXEC" "$BIN/train" $base --device cuda --bf16
refused when_values_are_read_back "LMTK_TRAIN_SYNC_STEP" env LMTK_TRAIN_SYNC_STEP=1 \
	LMTK_CUDA_PLUGIN="$EXEC" "$BIN/train" $base --device cuda --bf16 --hidden-dropout 0 --attention-dropout 0
# the flags' reasons stop the plan too: --dry-run neither prices a graph train would refuse
refused dry_run_with_dropout "dropout's seed" "$BIN/train" --dry-run $base --bf16 --nodes 1 --gpus-per-node 1
"$BIN/train" --dry-run $base --bf16 --hidden-dropout 0 --attention-dropout 0 --nodes 1 \
	--gpus-per-node 2 --global-batch-size 4 >ranks.log 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--cuda-graph: 2 ranks" ranks.log && ok cuda_graph_refused_dry_run_two_ranks ||
	fail cuda_graph_refused_dry_run_two_ranks "exit $rc: $(tail -2 ranks.log)"

# the step model (train --dry-run): no host sync in the deferred step, one with --fp16 (at the
# end), three without the device's step (SGD: the micro-batch's losses and bad count, the norm);
# --cuda-graph
# prices every launch at gpu-model.py's GAP_GRAPH instead of GAP
dryrun() {   # dryrun OUT [flags]
	local out=$1
	shift
	"$BIN/train" --dry-run --format json --num-layers 3 --hidden-size 64 --num-attention-heads 4 \
		--seq-length 32 --max-position-embeddings 32 --micro-batch-size 3 \
		--global-batch-size 3 --train-iters 3 --lr 1e-4 --data-path rand \
		--vocab-file vocab.json --merge-file merges.txt --split 1000,0,0 --nodes 1 \
		--gpus-per-node 1 --gpu-model h100 --hidden-dropout 0 --attention-dropout 0 "$@" \
		>"$out" 2>"$out.err"
}
if dryrun d-eager.json --bf16 && dryrun d-graph.json --bf16 --cuda-graph && dryrun d-fp16.json --fp16 &&
   dryrun d-sgd.json --bf16 --optimizer sgd; then
	python3 - "$TOP/tests/bench/gpu-model.py" d-eager.json d-graph.json d-fp16.json d-sgd.json <<'PYEOF' &&
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("gm", sys.argv[1])
gm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gm)
e, g, f, sg = (json.load(open(x))["time"]["step_model"] for x in sys.argv[2:])
syncs = lambda s: [o["count"] for o in s["ops"] if o["op"].startswith("host syncs")][0]
saved = e["iteration_seconds"] - g["iteration_seconds"]
want = e["launches"] * (gm.GAP - gm.GAP_GRAPH)
ok = syncs(e) == 0 and syncs(g) == 0 and syncs(f) == 1 and syncs(sg) == 3
ok &= e["launches"] == g["launches"] > 0
ok &= abs(saved - want) < 1e-9 * e["iteration_seconds"] + 1e-12
if not ok:
    print("# syncs %s %s %s %s; graph saves %.3g s, want %.3g" % (syncs(e), syncs(g), syncs(f),
                                                             syncs(sg), saved, want))
sys.exit(0 if ok else 1)
PYEOF
	ok step_model_has_no_host_sync_and_graph_launch_gaps || fail step_model_has_no_host_sync_and_graph_launch_gaps "see above"
else
	fail step_model_has_no_host_sync_and_graph_launch_gaps "$(cat d-*.err)"
fi
