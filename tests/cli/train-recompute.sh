#!/usr/bin/env bash
# train --checkpoint-activations: the backward recomputes each chunk of --checkpoint-num-layers
# layers from its kept input, with the forward's dropout masks, so a run with it is the run
# without it, bit for bit:
# 1. one rank, dropout on, GPT-2 and BLOOM shapes, chunks of 1, 2 (uneven) and all layers: every
#    logged loss, grad norm and learning rate of 10 iterations equal, and the checkpoint after them
#    (weights, fp32 master, Adam moments) byte-identical; another --seed is seen to differ;
# 2. DP 2, TP 2, PP 2 (1F1B: two micro-batches in flight share one recompute workspace) and
#    TP x PP, under mpirun: the same, every rank's shard byte-identical; PP 4 over 2
#    micro-batches logs what one rank logs;
# 3. the CUDA backend through the CPU executor: the same;
# 4. memory: the process's peak resident set, measured by the kernel (getrusage) with and without,
#    on a model whose activations dominate, drops by what --dry-run predicts (within 15%), and the
#    model's own allocation count equals --dry-run's activation figure;
# 5. TFLOPs: Megatron-DeepSpeed's training_log formula, 4 passes with --checkpoint-activations
#    (3 without) over the world size, against the TensorBoard timers at full precision; MFU
#    stays model FLOPs (no recomputation) per GPU;
# 6. the flags around it: DeepSpeed's activation_checkpointing block named in one start-up line,
#    an unknown key of it refused, --deepspeed-activation-checkpointing and
#    --checkpoint-num-layers said to do nothing where Megatron-DeepSpeed ignores them.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx .
D=(--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --log-interval 1 --eval-iters 0)
M=(--num-layers 3 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
	--micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 2 --train-iters 10
	--hidden-dropout 0.1 --attention-dropout 0.1 --save-interval 10 --device cpu --threads 2 "${D[@]}")
# the logged numbers of each iteration, without the timings
curve() { grep '^ iteration ' "$1" | sed 's/ elapsed time per iteration (s): [^|]*|//; s/ samples per second.*//'; }
# same_run LABEL A B: both ran, logged the same 10 iterations and saved byte-identical shards
same_run() {
	local label=$1 a=$2 b=$3 f n=0 bad=
	[ "$(curve "$a.out" | wc -l)" = 10 ] || { fail "$label" "$a: $(tail -2 "$a.out")"; return; }
	[ "$(curve "$b.out" | wc -l)" = 10 ] || { fail "$label" "$b: $(tail -2 "$b.out")"; return; }
	if ! diff <(curve "$a.out") <(curve "$b.out") >"$label.diff"; then
		fail "$label" "the logs differ: $(head -4 "$label.diff")"
		return
	fi
	for f in $(cd "$a" && find . -name '*.safetensors' | sort); do
		n=$((n + 1))
		cmp -s "$a/$f" "$b/$f" || bad="$bad $f"
	done
	[ $n -gt 0 ] && [ -z "$bad" ] && ok "$label" || fail "$label" "$n shards, differing:${bad:- none saved}"
}

# --- 1. one rank ------------------------------------------------------------------------------------
"$TR" "${M[@]}" --save g0 >g0.out 2>&1
"$TR" "${M[@]}" --save g1 --checkpoint-activations >g1.out 2>&1
"$TR" "${M[@]}" --save g2 --checkpoint-activations --checkpoint-num-layers 2 >g2.out 2>&1
same_run gpt2_checkpoint_activations_gives_the_same_losses_grads_and_weights g0 g1
same_run gpt2_chunks_of_2_of_3_layers_give_the_same_losses_grads_and_weights g0 g2
grep -q "^train: device memory: .*--checkpoint-activations: each chunk of 2 layers keeps only its output, the backward recomputes it" g2.out &&
	ok startup_line_says_what_is_recomputed || fail startup_line_says_what_is_recomputed "$(grep '^train: device' g2.out)"
"$TR" "${M[@]}" --save g3 --checkpoint-activations --seed 4321 >g3.out 2>&1
if [ -s g3/global_step10/rank_tp00_pp000.safetensors ] &&
	! cmp -s g0/global_step10/rank_tp00_pp000.safetensors g3/global_step10/rank_tp00_pp000.safetensors &&
	! diff -q <(curve g0.out) <(curve g3.out) >/dev/null; then
	ok another_seed_is_seen_to_differ
else
	fail another_seed_is_seen_to_differ "the comparison cannot tell runs apart"
fi
B=(--position-embedding-type alibi --embed-layernorm --apply-residual-connection-post-layernorm)
"$TR" "${M[@]}" "${B[@]}" --save b0 >b0.out 2>&1
"$TR" "${M[@]}" "${B[@]}" --save b1 --checkpoint-activations --checkpoint-num-layers 3 >b1.out 2>&1
same_run bloom_one_chunk_of_all_layers_gives_the_same_losses_grads_and_weights b0 b1

# --- 2. DP, TP, PP ----------------------------------------------------------------------------------
if ! command -v mpirun >/dev/null || [ ! -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	skip recompute_under_dp_tp_pp "no mpirun or no build/lib/lmtk/train-mpi.so (Open MPI: make deps installs it)"
else
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	P=("${M[@]}" --num-layers 4 --threads 1)
	# np tp pp chunk
	for layout in "2 1 1 1" "2 2 1 2" "2 1 2 1" "2 1 2 3" "4 2 2 1"; do
		set -- $layout
		name=dp$(($1 / $2 / $3))_tp$2_pp$3
		rm -rf $name.0 $name.$4   # a run never saves over another run's steps: fresh directories
		mpirun --oversubscribe -np $1 "$TR" "${P[@]}" --tensor-model-parallel-size $2 \
			--pipeline-model-parallel-size $3 --save $name.0 >$name.0.out 2>&1
		mpirun --oversubscribe -np $1 "$TR" "${P[@]}" --tensor-model-parallel-size $2 \
			--pipeline-model-parallel-size $3 --checkpoint-activations --checkpoint-num-layers $4 \
			--save $name.$4 >$name.$4.out 2>&1
		grep -q "DP=$(($1 / $2 / $3)) TP=$2 PP=$3" $name.$4.out ||
			{ fail "${name}_chunks_of_$4_run" "$(tail -3 $name.$4.out)"; continue; }
		same_run "${name}_chunks_of_$4_give_the_same_losses_grads_and_weights" $name.0 $name.$4
	done
	# 4 stages, 2 micro-batches: fewer in flight than stages, so each stage holds 2 slots (the
	# plan's min(PP - stage, micro-batches)); the same bits as one rank, with and without
	"$TR" "${P[@]}" --global-batch-size 4 --save one >one.out 2>&1
	mpirun --oversubscribe -np 4 "$TR" "${P[@]}" --global-batch-size 4 --pipeline-model-parallel-size 4 \
		--checkpoint-activations --save pp4 >pp4.out 2>&1
	if diff <(curve one.out) <(curve pp4.out) >pp4.diff && [ "$(curve one.out | wc -l)" = 10 ]; then
		ok pp4_with_2_micro_batches_and_recomputation_logs_what_one_rank_logs
	else
		fail pp4_with_2_micro_batches_and_recomputation_logs_what_one_rank_logs "$(head -4 pp4.diff; tail -n 2 pp4.out)"
	fi
fi

# --- 3. the CUDA backend, through the CPU executor --------------------------------------------------
EXEC=$TOP/build/lib/lmtk/train-cuda-exec.so
cuda_exec_unshadowed
if [ ! -s "$EXEC" ]; then
	skip cuda_exec_recompute "no $EXEC (make builds it from src/train/cuda and tests/cuda-exec)"
else
	C=("${M[@]}" --seq-length 32 --max-position-embeddings 32 --global-batch-size 4 --device cuda --bf16)
	LMTK_CUDA_PLUGIN=$EXEC "$TR" "${C[@]}" --save c0 >c0.out 2>&1
	LMTK_CUDA_PLUGIN=$EXEC "$TR" "${C[@]}" --save c2 --checkpoint-activations --checkpoint-num-layers 2 >c2.out 2>&1
	same_run cuda_exec_chunks_of_2_give_the_same_losses_grads_and_weights c0 c2
fi

# --- 4. memory --------------------------------------------------------------------------------------
# 4 layers, hidden 128, seq 512, micro-batch 8: activations ~5x the weights and optimizer
W=(--num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 512 --max-position-embeddings 512
	--micro-batch-size 8 --global-batch-size 8 --lr 1e-4 --train-iters 1 --device cpu --threads 2 "${D[@]}")
"$TR" "${W[@]}" >m0.out 2>&1
"$TR" "${W[@]}" --checkpoint-activations >m1.out 2>&1
"$TR" "${W[@]}" --dry-run --format json --nodes 1 --gpus-per-node 1 >m.json 2>m.err
"$PY" - m0.out m1.out m.json >mem.txt 2>&1 <<'PYEOF'
import json, re, sys
def rss(path):
    m = re.search(r"peak resident set was ([0-9.]+) GiB", open(path).read())
    return float(m.group(1))
def alloc(path):
    m = re.search(r"of which the layers' and the logits ([0-9.]+) GiB \(--dry-run: ([0-9.]+) GiB\)", open(path).read())
    return float(m.group(1)), float(m.group(2))
plan = json.load(open(sys.argv[3]))["memory"]["worst_stage_gib"]
predicted = plan["activations"] - plan["activations_checkpointed"]
measured = rss(sys.argv[1]) - rss(sys.argv[2])
print(f"measured drop {measured:.3f} GiB (peak RSS {rss(sys.argv[1]):.3f} -> {rss(sys.argv[2]):.3f}), "
      f"predicted {predicted:.3f} GiB")
assert predicted > 0.05, predicted
assert abs(measured - predicted) <= 0.15 * predicted, (measured, predicted)
for path, key in ((sys.argv[1], "activations"), (sys.argv[2], "activations_checkpointed")):
    got, said = alloc(path)
    assert abs(got - plan[key]) < 0.002 and abs(said - plan[key]) < 0.002, (path, got, said, plan[key])
PYEOF
[ $? = 0 ] && ok "peak_memory_drops_as_dry_run_predicts_within_15_percent" ||
	fail peak_memory_drops_as_dry_run_predicts_within_15_percent "$(tail -n 3 mem.txt; tail -n 2 m0.out m1.out m.err)"

# --- 5. TFLOPs --------------------------------------------------------------------------------------
tflops_ok() {   # tflops_ok LABEL PASSES WORLD RUN...: every iteration's TFLOPs x time = Megatron's FLOPs / world
	local label=$1 passes=$2 world=$3
	shift 3
	"$@" --tensorboard-dir tb.$label --log-timers-to-tensorboard --peak-tflops 0.01 >tf.$label.out 2>&1
	"$PY" "$TOP/tests/ref/tfevents-read.py" tb.$label >tf.$label.txt 2>&1 &&
	"$PY" - tf.$label.txt $passes $world tf.$label.out >tf.$label.chk 2>&1 <<'PYEOF'
import re, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if not l.startswith("TEXT")]
t = {int(s): float(v) for tag, s, v in rows if tag == "iteration-time/iteration-time"}
f = {int(s): float(v) for tag, s, v in rows if tag == "iteration-time/TFLOPs per gpu (estimated)"}
passes, world = int(sys.argv[2]), int(sys.argv[3])
B, s, L, h, V = 8, 64, 4, 64, 5120   # gbs, seq, layers, hidden, padded vocab
# Megatron-DeepSpeed training.py training_log
flops = 24 * passes * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
assert len(t) == 10 and t.keys() == f.keys(), (len(t), len(f))
for k in t:
    assert abs(f[k] * t[k] * world * 1e12 - flops) <= 1e-5 * flops, (k, f[k] * t[k] * world * 1e12, flops)
# MFU: model FLOPs (6 x the matrix weights, lm head included, + 12 L h s per token; no
# recomputation) per GPU over --peak-tflops, from the logged samples per second
F = 4 * h
model = 6 * (L * (4 * h * h + 2 * h * F) + V * h) + 12 * L * h * s
n = 0
for line in open(sys.argv[4]):
    m = re.search(r"samples per second: ([0-9.]+) .* MFU: ([0-9.]+)%", line)
    if m:
        sps, mfu = float(m.group(1)), float(m.group(2)) / 100
        want = model * s * sps / (0.01e12 * world)
        assert abs(mfu - want) <= 2e-3 * want + 1e-4, (mfu, want)
        n += 1
assert n == 10, n
PYEOF
	[ $? = 0 ] && ok "$label" || fail "$label" "$(tail -3 tf.$label.chk tf.$label.out)"
}
Q=("${M[@]}" --num-layers 4 --save-interval 1000)
tflops_ok tflops_count_3_passes_without_recomputation 3 1 "$TR" "${Q[@]}"
tflops_ok tflops_count_4_passes_with_recomputation 4 1 "$TR" "${Q[@]}" --checkpoint-activations
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	tflops_ok tflops_and_mfu_are_per_gpu_over_the_world_size 4 2 mpirun --oversubscribe -np 2 "$TR" "${Q[@]}" \
		--threads 1 --checkpoint-activations
fi

# --- 6. the flags around it -------------------------------------------------------------------------
cat >ds.json <<'JSON'
{"train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0,
 "zero_optimization": {"stage": 0},
 "activation_checkpointing": {"partition_activations": true, "contiguous_memory_optimization": false,
  "cpu_checkpointing": true, "number_checkpoints": 3, "synchronize_checkpoint_boundary": false,
  "profile": false}}
JSON
S=("${M[@]}" --train-iters 3 --clip-grad 1.0 --deepspeed --deepspeed_config ds.json)
"$TR" "${S[@]}" --checkpoint-activations --deepspeed-activation-checkpointing --save ds1 >ds1.out 2>&1
n=$(grep -c '^train: .*activation_checkpointing' ds1.out)
[ "$n" = 1 ] && grep -q "^train: accepted, no effect here: .*--deepspeed_config (ds.json: activation_checkpointing's partition_activations, cpu_checkpointing, number_checkpoints: .*nothing to partition" ds1.out &&
	grep -q '^ iteration *3/' ds1.out && ok ds_activation_checkpointing_block_named_in_one_startup_line ||
	fail ds_activation_checkpointing_block_named_in_one_startup_line "$n lines: $(grep -v '^ iter' ds1.out | head -5)"
"$TR" "${S[@]}" --checkpoint-activations --deepspeed-activation-checkpointing --dry-run >dsdry.out 2>dsdry.err
grep -q "no effect here: .*--deepspeed_config (ds.json: activation_checkpointing's partition_activations" dsdry.err &&
	ok ds_activation_checkpointing_block_named_by_dry_run || fail ds_activation_checkpointing_block_named_by_dry_run "$(cat dsdry.err | head -5)"
"$TR" "${S[@]}" --save ds0 >ds0.out 2>&1
cmp -s ds0/global_step3/rank_tp00_pp000.safetensors ds1/global_step3/rank_tp00_pp000.safetensors &&
	ok ds_checkpointing_recomputes_to_the_same_weights || fail ds_checkpointing_recomputes_to_the_same_weights "$(tail -2 ds1.out)"
grep -q '^ iteration *3/' ds1.out && ! grep -q "^train: accepted, no effect here: .*--deepspeed-activation-checkpointing" ds1.out &&
	ok ds_checkpointing_with_checkpoint_activations_is_not_called_inert ||
	fail ds_checkpointing_with_checkpoint_activations_is_not_called_inert "$(grep '^train: accepted' ds1.out; tail -n 1 ds1.out)"
sed 's/"profile": false/"profile": false, "partition_activation": true/' ds.json >bad.json
"$TR" "${M[@]}" --deepspeed --deepspeed_config bad.json >bad.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q "^train: --deepspeed_config bad.json: activation_checkpointing.partition_activation: unknown" bad.out &&
	ok unknown_activation_checkpointing_key_refused || fail unknown_activation_checkpointing_key_refused "exit $rc: $(tail -2 bad.out)"
"$TR" "${M[@]}" --train-iters 3 --deepspeed-activation-checkpointing --checkpoint-num-layers 2 >inert.out 2>&1
grep -q "^train: accepted, no effect here: .*--checkpoint-num-layers (without --checkpoint-activations no layer is checkpointed)" inert.out &&
	grep -q "^train: accepted, no effect here: .*--deepspeed-activation-checkpointing (without --deepspeed" inert.out &&
	ok inert_checkpointing_flags_are_named || fail inert_checkpointing_flags_are_named "$(grep '^train: accepted' inert.out)"
"$TR" "${M[@]}" --checkpoint-num-layers 0 >zero.out 2>&1
[ $? = 2 ] && ok checkpoint_num_layers_must_be_positive || fail checkpoint_num_layers_must_be_positive "$(tail -1 zero.out)"
rm -rf "$T"
