#!/usr/bin/env bash
# The BigScience presets, slurm/examples/{tr1-13B,tr8b-104B,tr11-176B-ml}.slurm: what
# slurm/mkslurm.sh makes of slurm/train.slurm.in, so the same script as train.slurm below their
# settings.  Each is run as a user tries it on a login node, DRY_RUN=1 bash PRESET with only the
# data and the tokenizer set, and its whole train command line goes through train --dry-run for
# the job its #SBATCH lines ask for.  The plan must be clean (exit 0, no error, no flag "accepted,
# no effect here": every flag a preset passes acts), and must report the model, the layout and
# the batch that this test computes on its own from the flags on that command line: the
# parameter count within 1% of the standard GPT formula l(12h^2 + 13h) + Vh (+ sh for learned
# positions), with V padded as Megatron pads it, and 13B/104B/176B once rounded; TP x PP x DP
# with DP = nodes x GPUs / (TP x PP); the global batch and its ramp-up.  Then make install
# PREFIX=tmp: the presets and their DeepSpeed configs are installed, and run from there they find
# PREFIX/bin and their config by themselves.  Last, CATALOGUE (mkindex weights) through
# train.slurm in a real run: the split files are written and trained on.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
[ -n "${LMTK_TMP:-}" ] || trap 'rm -rf "$T"' EXIT  # run.sh removes LMTK_TMP itself
cd "$T" || exit 3
MEG=$(tiny_dataset) || exit 3
PRESETS="tr1-13B:13 tr8b-104B:104 tr11-176B-ml:176"
MARK='^# ---- The rest is the same in every script generated'

# --- generated from the one template ------------------------------------------------------------
mkdir -p gen
if bash "$TOP/slurm/mkslurm.sh" "$T/gen" 2>gen.err; then
	for p in $PRESETS; do
		n=${p%%:*}
		check "${n//-/_}_is_generated_from_template" cmp "gen/examples/$n.slurm" "$TOP/slurm/examples/$n.slurm"
	done
	check presets_are_all_committed [ "$(cd gen/examples && ls)" = "$(cd "$TOP/slurm/examples" && ls *.slurm)" ]
else
	fail presets_generate "mkslurm.sh failed: $(head -c 400 gen.err)"
fi
sed -n "/$MARK/,\$p" "$TOP/slurm/train.slurm" >body.train
for p in $PRESETS; do
	n=${p%%:*}
	sed -n "/$MARK/,\$p" "$TOP/slurm/examples/$n.slurm" >"body.$n"
	check "${n//-/_}_runs_train_slurms_body" sh -c "[ -s body.train ] && cmp -s body.train body.$n"
	check "${n//-/_}_parses" bash -n "$TOP/slurm/examples/$n.slurm"
	check "${n//-/_}_config_is_json" "$PY" -c 'import json, sys; json.load(open(sys.argv[1]))' \
		"$TOP/slurm/examples/$n.ds_config.json"
done

# --- DRY_RUN=1 bash PRESET: the plan ------------------------------------------------------------
# GPT-2's vocabulary size without GPT-2's files: the dry run counts the entries of vocab.json
"$PY" -c 'import json; json.dump({"t%d" % i: i for i in range(50257)}, open("vocab.json", "w"))'
: >merges.txt
# the 176B preset reads a catalogue (mkindex weights) of two datasets
mkdir -p data/en data/fr
for l in en fr; do
	ln -s "$MEG/meg-gpt2-openwebtext_text_document.bin" "data/$l/owt_text_document.bin"
	ln -s "$MEG/meg-gpt2-openwebtext_text_document.idx" "data/$l/owt_text_document.idx"
done
printf '[{"dataset_path": "%s/data/en/owt_text_document", "ratio": 0.6},\n {"dataset_path": "%s/data/fr/owt_text_document", "ratio": 0.4}]\n' \
	"$T" "$T" >catalogue.json
# the plan computed here from a train command line (its words, one per line, on stdin) and the
# job's nodes and GPUs per node: "params P\ndp D\ngbs G\nrampup S I N" (the formula's count)
cat >plan.py <<'EOF'
import sys, math
words = sys.stdin.read().split("\n")
nodes, gpus, vocab = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def val(flag, default=None, n=1):
    if flag not in words:
        return default
    i = words.index(flag)
    v = words[i + 1:i + 1 + n]
    return v[0] if n == 1 else v
num = lambda s: int(s.replace("_", ""))
l, h, s = num(val("--num-layers")), num(val("--hidden-size")), num(val("--seq-length"))
tp, pp = num(val("--tensor-model-parallel-size")), num(val("--pipeline-model-parallel-size"))
# Megatron pads the vocabulary to a multiple of 128 x TP, or to --pad-vocab-size-to
vp = num(val("--pad-vocab-size-to")) if "--pad-vocab-size-to" in words else math.ceil(vocab / (128 * tp)) * 128 * tp
pos = 0 if val("--position-embedding-type") == "alibi" else s * h
print("params", l * (12 * h * h + 13 * h) + vp * h + pos)
print("dp", nodes * gpus // (tp * pp))
print("tp", tp, "pp", pp)
print("gbs", num(val("--global-batch-size")))
r = val("--rampup-batch-size", n=3)
print("rampup", *(num(x) for x in r) if r else ["none"])
EOF
# commas N: N with thousands separators, as the plan prints it
commas() { "$PY" -c "print(f'{int(\"$1\"):,}')"; }
mkdir -p tmpdir
for p in $PRESETS; do
	n=${p%%:*} size=${p#*:} t=${n//-/_}
	f=$TOP/slurm/examples/$n.slurm
	nodes=$(sed -n 's/^#SBATCH --nodes=//p' "$f")
	gpus=$(sed -n 's/^#SBATCH --gpus-per-node=//p' "$f")
	tasks=$(sed -n 's/^#SBATCH --ntasks-per-node=//p' "$f")
	check "${t}_asks_for_one_rank_per_gpu" [ -n "$gpus" -a "$gpus" = "$tasks" ]
	if [ "$n" = tr11-176B-ml ]; then
		data=(CATALOGUE="$T/catalogue.json" TOKENIZER="$T/bloom-tokenizer-not-here" EXTRA_ARGS="--vocab-size 250680")
		vocab=250680
	else
		data=(DATA_PATH="$MEG/meg-gpt2-openwebtext_text_document" VOCAB="$T/vocab.json" MERGES="$T/merges.txt")
		vocab=50257
	fi
	# a login node: no SLURM job; WORK for the run's directories, which a dry run must not create
	expect_rc "${t}_dry_run_exits_0" 0 env -u SLURM_JOB_ID -u SLURM_JOB_NUM_NODES -u SLURM_GPUS_ON_NODE \
		-u SLURM_NTASKS_PER_NODE -u SLURM_NTASKS TMPDIR="$T/tmpdir" LMTK="$TOP" WORK="$T/work-$n" \
		DRY_RUN=1 "${data[@]}" bash "$f"
	cat "$T/out" "$T/err" >"$n.plan"
	lacks "${t}_plan_has_no_error" "$n.plan" '[Ee]rror'
	lacks "${t}_every_flag_acts" "$n.plan" 'no effect'
	check "${t}_dry_run_writes_nothing" sh -c "[ ! -e '$T/work-$n' ] && [ -z \"\$(ls -A '$T/tmpdir')\" ]"
	# the command line the preset ran, a word per line
	sed -n "s|^$n.slurm: $TOP/bin/train --dry-run ||p" "$n.plan" | tr ' ' '\n' >"$n.words"
	check "${t}_runs_train_dry_run_with_its_flags" [ -s "$n.words" ]
	contains "${t}_passes_its_deepspeed_config" "$n.plan" \
		"^$n.slurm: .* --deepspeed --deepspeed_config $TOP/slurm/examples/$n.ds_config.json( |$)"
	"$PY" plan.py "$nodes" "$gpus" "$vocab" <"$n.words" >"$n.want" 2>plan.err || fail "${t}_flags_parse" "$(cat plan.err)"
	want_params=$(sed -n 's/^params //p' "$n.want")
	got=$(sed -n 's/^  parameters  *\([0-9,]*\)  *\([0-9]*B\), exact count$/\1 \2/p' "$n.plan")
	got_params=${got%% *} got_params=${got_params//,/}
	check "${t}_params_within_1pct_of_formula" "$PY" -c "import sys; g, w = $got_params, $want_params
sys.exit(0 if abs(g - w) <= 0.01 * w else 1)"
	check "${t}_formula_is_${size}B" [ "$("$PY" -c "print(round($want_params / 1e9))")" = "$size" ]
	check "${t}_plan_says_${size}B" [ "${got#* }" = "${size}B" ]
	read -r _ tp _ pp < <(grep '^tp ' "$n.want")
	dp=$(sed -n 's/^dp //p' "$n.want")
	check "${t}_dp_is_whole" [ $((nodes * gpus)) = $((tp * pp * dp)) ]
	contains "${t}_plan_layout" "$n.plan" "^  TP x PP x DP +$tp x $pp x $dp$"
	contains "${t}_plan_gpus" "$n.plan" "^  GPUs +$(commas $((nodes * gpus))) +$nodes nodes x $gpus "
	contains "${t}_plan_gbs" "$n.plan" "^  global batch size \(GBS\) +$(commas "$(sed -n 's/^gbs //p' "$n.want")") "
	read -r _ r0 r1 r2 < <(grep '^rampup ' "$n.want")
	if [ "$r0" = none ]; then
		contains "${t}_plan_batch_constant" "$n.plan" "^  global batch size +[0-9,]+ +constant"
	else
		contains "${t}_plan_rampup" "$n.plan" \
			"^  ramp-up +$r0 -> $(sed -n 's/^gbs //p' "$n.want") +by $r1: .* over $(commas "$r2") samples"
	fi
done
# what each run had of its own
contains tr1_13B_plan_fp16_zero1 tr1-13B.plan '^  optimizer state sharded over DP +yes +ZeRO-1'
contains tr8b_104B_plan_has_curriculum tr8b-104B.plan '^  curriculum \(sequence length\) +64 -> 2048 +fixed_linear over 36,000 steps'
contains tr11_176B_ml_plan_alibi tr11-176B-ml.plan '^    position embeddings +0 +alibi'
contains tr11_176B_ml_plan_bf16 tr11-176B-ml.plan '^  precision +bf16'
contains tr11_176B_ml_reads_catalogue_splits tr11-176B-ml.plan \
	"^tr11-176B-ml.slurm: .* --train-weighted-split-paths-path $T/tmpdir/[^ ]*/train-splits.txt --valid-weighted-split-paths-path "

# --- what a preset refuses, before anything starts ---------------------------------------------
P13=$TOP/slurm/examples/tr1-13B.slurm
expect_rc preset_without_data_exits_2 2 env LMTK="$TOP" VOCAB=v MERGES=m DRY_RUN=1 bash "$P13"
contains preset_without_data_names_both "$T/err" '^tr1-13B.slurm: set DATA_PATH .*, or CATALOGUE'
expect_rc preset_with_two_data_settings_exits_2 2 env LMTK="$TOP" VOCAB=v MERGES=m DRY_RUN=1 \
	DATA_PATH=d CATALOGUE="$T/catalogue.json" bash "$P13"
contains preset_with_two_data_settings_says_so "$T/err" '^tr1-13B.slurm: set DATA_PATH or CATALOGUE, not both'
expect_rc preset_missing_ds_config_exits_2 2 env LMTK="$TOP" VOCAB=v MERGES=m DRY_RUN=1 DATA_PATH=d \
	DS_CONFIG=no-such.json bash "$P13"
contains preset_missing_ds_config_names_it "$T/err" '^tr1-13B.slurm: DS_CONFIG=no-such.json: no such file'
printf '[{"dataset_path": "a b/x", "ratio": 1}]\n' >bad-catalogue.json
expect_rc preset_bad_catalogue_exits_2 2 env -u SLURM_JOB_ID TMPDIR="$T/tmpdir" LMTK="$TOP" TOKENIZER=t \
	DRY_RUN=1 CATALOGUE="$T/bad-catalogue.json" bash "$TOP/slurm/examples/tr11-176B-ml.slurm"
contains preset_bad_catalogue_names_entry "$T/err" "^mkindex: $T/bad-catalogue.json: \[0\]\.dataset_path: 'a b/x' holds a blank"

# --- installed ----------------------------------------------------------------------------------
P=$T/prefix
if make -C "$TOP" --no-print-directory install PREFIX="$P" >make.out 2>&1; then
	E=$P/share/lmtk/slurm/examples
	for p in $PRESETS; do
		n=${p%%:*} t=${p%%:*}
		t=${t//-/_}
		check "${t}_installed" cmp "$E/$n.slurm" "$TOP/slurm/examples/$n.slurm"
		check "${t}_config_installed" cmp "$E/$n.ds_config.json" "$TOP/slurm/examples/$n.ds_config.json"
		check "${t}_installed_executable" [ -x "$E/$n.slurm" ]
	done
	# from its install location, without LMTK: PREFIX/bin's train, PREFIX's config
	expect_rc installed_preset_dry_run_exits_0 0 env -u SLURM_JOB_ID -u LMTK PATH=/usr/bin:/bin TMPDIR="$T/tmpdir" \
		WORK="$T/w" DRY_RUN=1 DATA_PATH="$MEG/meg-gpt2-openwebtext_text_document" VOCAB="$T/vocab.json" \
		MERGES="$T/merges.txt" bash "$E/tr1-13B.slurm"
	contains installed_preset_finds_prefix_train_and_config "$T/out" \
		"^tr1-13B.slurm: $P/bin/train --dry-run .* --deepspeed_config $E/tr1-13B.ds_config.json$"
	# a copy elsewhere (sbatch runs one from its spool directory): train from PATH, the config from
	# the PATH's install
	mkdir -p spool
	cp "$E/tr11-176B-ml.slurm" spool/slurm_script
	expect_rc spooled_preset_dry_run_exits_0 0 env -u SLURM_JOB_ID -u LMTK PATH="$P/bin:/usr/bin:/bin" \
		TMPDIR="$T/tmpdir" WORK="$T/w" DRY_RUN=1 CATALOGUE="$T/catalogue.json" TOKENIZER=t \
		EXTRA_ARGS="--vocab-size 250680" bash spool/slurm_script
	contains spooled_preset_finds_path_train_and_config "$T/out" \
		"^tr11-176B-ml.slurm: $P/bin/train --dry-run .* --deepspeed_config $E/tr11-176B-ml.ds_config.json "
else
	fail make_install "$(tail -5 make.out)"
fi

# --- CATALOGUE in a real run (train.slurm, one process) ------------------------------------------
expect_rc train_slurm_trains_on_catalogue 0 env -u SLURM_JOB_ID LMTK="$TOP" LAUNCHER= CATALOGUE="$T/catalogue.json" \
	VOCAB="$MEG/gpt2-tiny-vocab.json" MERGES="$MEG/gpt2-tiny-merges.txt" \
	CHECKPOINT_PATH="$T/run/ckpt" TENSORBOARD_PATH= LOGS_PATH="$T/run/logs" KILL_SWITCH_PATH="$T/run/ks" \
	MODEL_ARGS="--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --max-position-embeddings 32" \
	TRAIN_ARGS="--micro-batch-size 2 --global-batch-size 4 --train-iters 2 --eval-interval 2 --eval-iters 1
		--lr 1e-3 --log-interval 1 --save-interval 2" EXTRA_ARGS="--device cpu --threads 1 --data-cache-path $T/run/cache" \
	bash "$TOP/slurm/train.slurm"
check catalogue_train_splits_written sh -c "\"$BIN/mkindex\" weights '$T/catalogue.json' --split train | cmp -s - '$T/run/logs/train-splits.txt'"
check catalogue_valid_splits_written sh -c "\"$BIN/mkindex\" weights '$T/catalogue.json' --split valid | cmp -s - '$T/run/logs/valid-splits.txt'"
contains catalogue_run_builds_train_from_both "$T/run/logs/main_log.txt" "^train: $T/data/fr/owt_text_document: train split"
contains catalogue_run_logs_per_language_valid_loss "$T/run/logs/main_log.txt" "^ valid_fr loss at iteration 2 "
