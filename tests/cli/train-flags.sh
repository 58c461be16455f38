#!/usr/bin/env bash
# train never silently ignores a flag: the Megatron-DeepSpeed flags it does not act on are either
# refused (exit 2, before anything is written) or named in a start-up line with their reason, and
# both lists are in --help and train(1); the flags implemented beyond the model shape do what
# Megatron does (--finetune, --no-load-optim, --eval-only, --loss-scale, the TensorBoard switches,
# --log-path, --save made at start-up).  Data: a byte-level vocabulary and a corpus generated
# here, so nothing outside the project is needed.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
cd "$T" || exit 3

# a byte-level GPT-2 vocabulary without merges (GPT-2's byte-to-unicode mapping, 256 tokens, and
# <|endoftext|> as 256), and a corpus of generated English-like documents
"$PY" - <<'EOF' || exit 3
import json, random
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
vocab["<|endoftext|>"] = 256
json.dump(vocab, open("vocab.json", "w"))
open("merges.txt", "w").write("#version: 0.2\n")
random.seed(7)
words = "the of and to in is was for on that with as by at from his her an which are be this".split()
with open("corpus.jsonl", "w") as f:
    for d in range(300):
        text = " ".join(random.choice(words) for _ in range(random.randint(20, 200)))
        f.write(json.dumps({"text": text}) + "\n")
EOF
"$BIN/tokenize" --vocab-file vocab.json --merge-file merges.txt --append-eod <corpus.jsonl 2>/dev/null |
	"$BIN/mkindex" --output-prefix corpus 2>/dev/null || exit 3

MODEL=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
	--lr-warmup-iters 1 --lr-decay-style cosine --min-lr 1e-4 --train-iters 8
	--log-interval 1 --eval-interval 4 --eval-iters 1 --data-path corpus_text_document
	--data-cache-path cache --device cpu --threads 1)
GPT2=(--vocab-file vocab.json --merge-file merges.txt)
trn() { "$TR" "${MODEL[@]}" "${GPT2[@]}" "$@"; }
field() {  # field FILE ITER NAME: the value of NAME in the log line of iteration ITER
	grep -E "^ iteration +$2/" "$1" | sed "s/.*| $3: \([^ ]*\) |.*/\1/"
}

# --- refused: exit 2 before anything starts, one line per flag, what to use instead ---
expect_rc refused_prefix_lm_exits_2 2 trn --loss-on-targets-only --save refused-ckpt --save-interval 2
contains refused_prefix_lm_says_what_to_use "$T/err" '^train: --loss-on-targets-only: prefix-LM losses are not implemented; drop it$'
check refused_run_writes_nothing [ ! -e refused-ckpt ] && [ ! -s "$T/out" ]
expect_rc refused_t5_flag_exits_2 2 trn --noise-density 0.15 --universal-checkpoint
contains refused_t5_flag_named "$T/err" '^train: --noise-density: a T5/ICT/ViT flag'
contains refused_universal_named "$T/err" '^train: --universal-checkpoint: DeepSpeed universal checkpoints are not read'
contains refused_count_said "$T/err" '^train: 2 flags refused: nothing trained'
expect_rc refused_abbreviation_still_refused 2 trn --loss-on-targets
expect_rc optimizer_unknown_refused 2 trn --optimizer adagrad
contains optimizer_unknown_names_the_choices "$T/err" "'adagrad' is not one of adam, lamb, sgd"
expect_rc dataloader_cyclic_refused 2 trn --dataloader-type cyclic
expect_rc gelu_without_fusion_refused 2 trn --no-bias-gelu-fusion
contains gelu_without_fusion_says_erf "$T/err" 'exact erf GeLU'
expect_rc eval_only_false_refused 2 trn --eval-only False
contains eval_only_false_explained "$T/err" "bool\('False'\)"
expect_rc dry_run_with_refused_flag_plans 0 trn --dry-run --nodes 1 --gpus-per-node 1 --loss-on-targets-only
contains dry_run_warns_refused_flag "$T/err" '^train: warning: training would refuse --loss-on-targets-only'

# --- no effect: accepted, named once in the start-up line with the reason ---
expect_rc noeffect_run_exits_0 0 trn --train-iters 2 --num-workers 2 --num-workers 8 \
	--no-masked-softmax-fusion --distributed-backend nccl --optimizer adam --dataloader-type single
contains noeffect_line_names_each_with_reason "$T/out" '^train: accepted, no effect here: --num-workers \(samples are read from the mmap.ed index, no loader processes\), --no-masked-softmax-fusion \(.*\), --distributed-backend \(.*\)$'
n=$(grep -o -- '--num-workers' "$T/out" | wc -l)
[ "$n" = 1 ] && ok noeffect_flag_named_once || fail noeffect_flag_named_once "--num-workers named $n times"
lacks noeffect_implemented_flags_not_listed "$T/out" 'no effect here:.*--(optimizer|dataloader-type)'
expect_rc plain_run_exits_0 0 trn --train-iters 2
lacks plain_run_has_no_noeffect_line "$T/out" 'no effect here'
# a bucket size cuts only the overlapped sums
expect_rc bucket_size_alone_exits_0 0 trn --train-iters 2 --ddp-bucket-size 1000
contains bucket_size_alone_named "$T/out" "no effect here: --ddp-bucket-size \(without --overlap-grad-reduce the DP"
expect_rc bucket_size_with_overlap_exits_0 0 trn --train-iters 2 --ddp-bucket-size 1000 --overlap-grad-reduce
lacks bucket_size_with_overlap_not_named "$T/out" 'no effect here:.*--ddp-bucket-size'
# --init-method-xavier-uniform: Megatron-DeepSpeed reads it only in VitModel (vit_model.py); its
# GPT keeps init_method_normal(--init-method-std) and scaled_init_method_normal, so the same run
cp "$T/out" plain.out
expect_rc xavier_run_exits_0 0 trn --train-iters 2 --init-method-xavier-uniform
contains xavier_named_with_reason "$T/out" "no effect here: --init-method-xavier-uniform \(Megatron-DeepSpeed reads it in its ViT model only; a GPT's weights keep the normal init of --init-method-std\)"
xc() { grep '^ iteration ' "$1" | sed 's/ elapsed time per iteration (s): [^|]*|//; s/ samples per second.*//'; }
[ -n "$(xc plain.out)" ] && [ "$(xc plain.out)" = "$(xc "$T/out")" ] && ok xavier_leaves_the_gpt_init_and_run_unchanged ||
	fail xavier_leaves_the_gpt_init_and_run_unchanged "$(xc "$T/out" | head -2)"

# --- the lists in --help and train(1) are the table's ---
"$TR" --help >help.txt 2>&1
MAN=$TOP/man/man1/train.1
man_flags() {  # the flags of train(1)'s FLAGS NOT ACTED ON subsection $1
	sed -n "/^\.SS $1\$/,/^\.S[SH] /p" "$MAN" | grep -o '\\fB\\-\\-[A-Za-z0-9_\\-]*' |
		sed 's/\\fB//; s/\\fR//; s/\\-/-/g' | sort
}
help_flags() {  # the flags of --help's paragraph starting with $1
	sed -n "/^$1/,/^\$/p" help.txt | grep -o -- '--[A-Za-z0-9_-]*' | sort
}
man_flags 'Accepted, no effect here' >man-noeffect
man_flags 'Refused' >man-refused
help_flags 'Accepted, no effect here' >help-noeffect
help_flags 'Refused, exit 2' | grep -vx -- '--dry-run' >help-refused
check help_lists_noeffect_flags [ "$(wc -l <help-noeffect)" -ge 40 ]
check help_lists_refused_flags [ "$(wc -l <help-refused)" -ge 30 ]
check man_and_help_agree_on_noeffect_flags cmp -s man-noeffect help-noeffect
check man_and_help_agree_on_refused_flags cmp -s man-refused help-refused
# every listed flag behaves as listed (given a value if it takes one: a switch refuses "=1", as
# argparse does)
bad=
while read -r f; do
	"$TR" --dry-run --nodes 1 --gpus-per-node 1 "${MODEL[@]}" "${GPT2[@]}" "$f=1" >/dev/null 2>e.txt
	grep -q -- "^train: $f takes no value" e.txt &&
		"$TR" --dry-run --nodes 1 --gpus-per-node 1 "${MODEL[@]}" "${GPT2[@]}" "$f" >/dev/null 2>e.txt
	grep -q -- "no effect here: $f (" e.txt || bad="$bad $f"
done <help-noeffect
[ -z "$bad" ] && ok every_noeffect_flag_is_named_at_start_up || fail every_noeffect_flag_is_named_at_start_up "$bad"
bad=
while read -r f; do
	"$TR" "${MODEL[@]}" "${GPT2[@]}" "$f=1" >/dev/null 2>e.txt && bad="$bad $f"
	if grep -q -- "^train: $f takes no value" e.txt; then
		"$TR" "${MODEL[@]}" "${GPT2[@]}" "$f" >/dev/null 2>e.txt && bad="$bad $f"
	fi
	grep -q -- "^train: $f: " e.txt || bad="$bad $f"
done <help-refused
[ -z "$bad" ] && ok every_refused_flag_exits_2_naming_itself || fail every_refused_flag_exits_2_naming_itself "$bad"

# --- --save is made at start-up, and a bad one stops the run before the first iteration ---
expect_rc save_parents_created 0 trn --train-iters 2 --save deep/er/ckpt --save-interval 1
check save_parents_hold_the_checkpoint [ -f deep/er/ckpt/latest ]
: >afile
expect_rc save_under_a_file_exits_2 2 trn --save afile/ckpt --save-interval 1
contains save_under_a_file_named "$T/err" '^train: --save afile/ckpt: afile exists and is not a directory'
lacks save_under_a_file_trains_nothing "$T/out" '^ iteration '

# --- --finetune, --no-load-optim, --eval-only: a base checkpoint at iteration 4 ---
trn --save base --save-interval 4 --exit-interval 4 >base.out 2>&1 || fail base_run "$(tail -3 base.out)"
trn --train-iters 8 --log-interval 1 >fresh.out 2>&1
trn --load base >resume.out 2>&1
trn --load base --finetune >ft.out 2>&1
rc=$?
[ $rc = 0 ] && ok finetune_exits_0 || fail finetune_exits_0 "exit $rc: $(tail -3 ft.out)"
contains finetune_says_what_it_loaded ft.out '^train: loaded the weights of base/global_step4 \(--finetune\): iteration 0, 16 samples consumed, a fresh optimizer and schedule$'
# the same weights on the same data give the same loss; the iteration and schedule start afresh
l_ft=$(field ft.out 1 'lm loss') l_res=$(field resume.out 5 'lm loss')
[ -n "$l_ft" ] && [ "$l_ft" = "$l_res" ] && ok finetune_loads_the_weights_and_data_position || fail finetune_loads_the_weights_and_data_position "finetune it 1: $l_ft, resume it 5: $l_res"
check finetune_restarts_the_iteration grep -q '^ iteration        1/       8 | consumed samples:           20 | consumed tokens:          128 |' ft.out
lr_ft=$(field ft.out 1 'learning rate') lr_fresh=$(field fresh.out 1 'learning rate')
[ -n "$lr_ft" ] && [ "$lr_ft" = "$lr_fresh" ] && ok finetune_restarts_the_schedule || fail finetune_restarts_the_schedule "$lr_ft vs $lr_fresh"

trn --load base --no-load-optim >nlo.out 2>&1 || fail no_load_optim_exits_0 "$(tail -3 nlo.out)"
contains no_load_optim_says_what_it_loaded nlo.out '^train: loaded the weights of base/global_step4 \(--no-load-optim\): iteration 4, 16 samples consumed, a fresh optimizer and schedule$'
l5=$(field nlo.out 5 'lm loss') l6=$(field nlo.out 6 'lm loss') r6=$(field resume.out 6 'lm loss')
[ -n "$l5" ] && [ "$l5" = "$l_res" ] && ok no_load_optim_keeps_weights_and_iteration || fail no_load_optim_keeps_weights_and_iteration "$l5 vs $l_res"
[ -n "$l6" ] && [ "$l6" != "$r6" ] && ok no_load_optim_starts_adam_afresh || fail no_load_optim_starts_adam_afresh "iteration 6 loss $l6 equals the resumed run's"
lr5=$(field nlo.out 5 'learning rate')
[ "$lr5" = "$lr_fresh" ] && ok no_load_optim_restarts_the_schedule || fail no_load_optim_restarts_the_schedule "$lr5 vs $lr_fresh"

trn --load base --eval-only True --save base --save-interval 4 >eo.out 2>&1
rc=$?
[ $rc = 0 ] && ok eval_only_exits_0 || fail eval_only_exits_0 "exit $rc: $(tail -3 eo.out)"
lacks eval_only_trains_nothing eo.out '^ iteration '
contains eval_only_evaluates eo.out '^ validation loss at the end of training for val data \| lm loss value: '
check eval_only_saves_nothing [ "$(ls base)" = "$(printf 'global_step4\nlatest\nlatest_checkpointed_iteration.txt')" ]

# --- fp16's static loss scale ---
trn --fp16 --loss-scale 4096 >ls.out 2>&1 || fail static_loss_scale_run "$(tail -3 ls.out)"
n=$(grep -c ' loss scale: 4096.0 |' ls.out)
[ "$n" = 8 ] && ok static_loss_scale_never_changes || fail static_loss_scale_never_changes "$n of 8 lines at 4096"
trn --fp16 --initial-loss-scale 4096 --loss-scale-window 2 >dls.out 2>&1
check dynamic_loss_scale_grows_without_it grep -q '^ iteration        8/.* loss scale: 65536.0 |' dls.out
trn --loss-scale 4096 --train-iters 2 >ls32.out 2>&1
contains loss_scale_without_fp16_said ls32.out '^train: --loss-scale: no effect without --fp16, as in Megatron$'

# --- --deepspeed_config: under --deepspeed its fp16 block and gradient_clipping rule ---
cat >ds.json <<'JSON'
{"train_micro_batch_size_per_gpu": 2, "train_batch_size": 4, "gradient_clipping": 0.05,
 "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 12, "loss_scale_window": 2},
 "steps_per_print": 10}
JSON
trn --fp16 --deepspeed --deepspeed_config ds.json --clip-grad 1.0 >ds.out 2>&1 || fail ds_config_run "$(tail -3 ds.out)"
check ds_config_initial_scale_power grep -q '^ iteration        1/.* loss scale: 4096.0 |' ds.out
check ds_config_loss_scale_window grep -q '^ iteration        8/.* loss scale: 65536.0 |' ds.out
contains ds_config_overridden_clip_named ds.out "no effect here: .*--clip-grad \(under --deepspeed ds.json's gradient_clipping = 0.05 applies\)"
# the same run from Megatron's own flags: the same losses and grad norms, iteration by iteration
trn --fp16 --clip-grad 0.05 --initial-loss-scale 4096 --loss-scale-window 2 >dsm.out 2>&1
curve() { grep '^ iteration ' "$1" | sed 's/.*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2/'; }
c1=$(curve ds.out) c2=$(curve dsm.out)
check ds_config_equals_the_megatron_flags [ "$(echo "$c1" | wc -l)" = 8 -a "$c1" = "$c2" ]
trn --fp16 --clip-grad 1.0 --initial-loss-scale 4096 --loss-scale-window 2 >dsc.out 2>&1
check ds_config_clipping_changes_the_run [ "$(curve dsc.out)" != "$(curve ds.out)" ]
expect_rc ds_config_batch_mismatch_exits_2 2 "$TR" "${MODEL[@]}" "${GPT2[@]}" --fp16 --deepspeed \
	--deepspeed_config ds.json --global-batch-size 8
contains ds_config_batch_mismatch_named "$T/err" 'ds.json: train_batch_size 4 but --global-batch-size 8: make them agree'
contains ds_config_inert_key_named ds.out "no effect here: .*--deepspeed_config \(ds.json: steps_per_print: "
# DeepSpeed's old name reads the same file the same way
trn --fp16 --deepscale --deepscale_config ds.json --train-iters 2 >dsold.out 2>&1
check ds_config_old_names grep -q '^ iteration        1/.* loss scale: 4096.0 |' dsold.out
# a static scale: loss_scale > 0 stays where it is
sed 's/"loss_scale": 0/"loss_scale": 1024/' ds.json >dss.json
trn --fp16 --deepspeed --deepspeed_config dss.json >dss.out 2>&1 || fail ds_config_static_run "$(tail -3 dss.out)"
check ds_config_static_loss_scale [ "$(field dss.out 1 'loss scale')/$(field dss.out 8 'loss scale')" = 1024.0/1024.0 ]
# no gradient_clipping: DeepSpeed's default clips nothing, whatever Megatron's --clip-grad says
sed 's/"gradient_clipping": 0.05,//' ds.json >dsnc.json
trn --fp16 --deepspeed --deepspeed_config dsnc.json >dsnc.out 2>&1 || fail ds_config_noclip_run "$(tail -3 dsnc.out)"
trn --fp16 --clip-grad 0 --initial-loss-scale 4096 --loss-scale-window 2 >dsm0.out 2>&1
check ds_config_no_clipping_by_default [ -n "$(curve dsnc.out)" -a "$(curve dsnc.out)" = "$(curve dsm0.out)" -a "$(curve dsnc.out)" != "$(curve dsc.out)" ]
# without --deepspeed Megatron-DeepSpeed never opens the file: Megatron's scaler (2^32) runs, the
# file is named; a missing one is still an error, before anything is written
trn --fp16 --deepspeed_config ds.json --train-iters 2 >dsoff.out 2>&1 || fail ds_config_off_run "$(tail -3 dsoff.out)"
check ds_config_without_deepspeed_not_applied grep -q '^ iteration        1/.* loss scale: 4294967296.0 |' dsoff.out
contains ds_config_without_deepspeed_named dsoff.out "no effect here: .*--deepspeed_config \(ds.json: without --deepspeed Megatron-DeepSpeed does not read it"
expect_rc ds_config_missing_exits_2 2 trn --fp16 --deepspeed_config ds_config.4242.json --save dsmiss --save-interval 2
contains ds_config_missing_named "$T/err" '^train: --deepspeed_config ds_config.4242.json: unable to open'
check ds_config_missing_writes_nothing [ ! -e dsmiss ] && [ ! -s "$T/out" ]

# --- TensorBoard switches and --log-path ---
trn --tensorboard-dir tb --tensorboard-log-interval 3 --no-log-learnig-rate-to-tensorboard \
	--log-path logs >tb.out 2>&1 || fail tb_run "$(tail -3 tb.out)"
"$PY" "$TOP/tests/ref/tfevents-read.py" tb >tb.txt 2>/dev/null
steps=$(awk -F'\t' '$1 == "lm-loss-training/lm loss" {print $2}' tb.txt | tr '\n' ' ')
[ "$steps" = "3 6 " ] && ok tensorboard_log_interval_thins_the_scalars || fail tensorboard_log_interval_thins_the_scalars "steps: $steps"
lacks tensorboard_no_learning_rate tb.txt '^learning-rate/'
contains tensorboard_validation_still_written tb.txt '^lm-loss-validation/lm loss validation	4	'
check log_path_holds_the_command_line grep -q -- '--log-path logs' logs/args_*.txt

# --- the end-of-document token the eod flags need ---
mkdir hf && "$PY" -c '
import json
v = json.load(open("vocab.json"))
json.dump({"model": {"type": "BPE", "vocab": v, "merges": []}, "added_tokens": []}, open("hf/tokenizer.json", "w"))'
expect_rc eod_flag_needs_eos_token 2 "$TR" "${MODEL[@]}" --eod-mask-loss --tokenizer-type PretrainedFromHF --tokenizer-name-or-path hf
contains eod_flag_names_special_tokens_map "$T/err" 'eos_token'
