#!/usr/bin/env bash
# ckpt-merge-tp --format megatron-deepspeed (src/ckpt/mdsw.c): lmtk checkpoints of a tiny BLOOM
# trained in bf16 (ALiBi, embedding layer norm; re-split to TP=2 PP=2 first, so the input's
# layout is not the output's) and a tiny GPT-2 trained in fp16 (learned positions, a loss scale
# that has doubled) become DeepSpeed pipeline checkpoints at TP/PP 1/1, 2/2 (DP 2) and 2/1 (DP
# 5 and 3: flat groups that need padding): bf16 ZeRO partitions for the bf16 run, fp16 ZeRO-1 ones
# for the fp16 run.  Read with torch.load alone (weights_only=False, as Megatron loads them):
# tests/ref/mds-write-check.py checks the files, the zip container, the args Namespace and
# counters, RNG states equal to Python's, numpy's and torch's own generators seeded as Megatron
# seeds them, param_shapes in DeepSpeed's order with TP-local shapes, partition sizes and
# paddings as DeepSpeed computes them, the loss scaler; mds-ckpt.py check compares every tensor
# with the lmtk checkpoint (masters and moments bit for bit, the weights their rounding).  Read
# back with --from megatron-deepspeed they give the original shard byte for byte and the same
# counters, schedule and optimizer state, and train --load of the Megatron-DeepSpeed directory
# resumes with the original's losses.  Bad input exits 2 naming what is wrong.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
MT=$BIN/ckpt-merge-tp
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
	skip ckpt_mds_write "python3-torch and python3-numpy are not installed (make deps installs them)"
	exit 0
fi
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3

COMMON=(--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4
	--lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --adam-beta2 0.95
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1 --train-iters 8)
BLOOM=(--num-layers 2 --hidden-size 96 --num-attention-heads 6 --position-embedding-type alibi
	--embed-layernorm --bf16)
# a small initial scale and window: no overflow in 4 steps, and the scale doubles once
GPT=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --fp16 --initial-loss-scale 4096
	--loss-scale-window 3)
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --exit-interval 4 --save-interval 4 --save bloom >bloom.train 2>&1 ||
	{ fail bloom_trains "$(tail -3 bloom.train)"; exit 0; }
"$BIN/train" "${COMMON[@]}" "${GPT[@]}" --exit-interval 4 --save-interval 4 --save gpt >gpt.train 2>&1 ||
	{ fail gpt_trains "$(tail -3 gpt.train)"; exit 0; }
B=bloom/global_step4 G=gpt/global_step4
"$MT" bloom --output bloom22 --target-tp 2 --target-pp 2 >split.out 2>&1 || fail bloom_resplit "$(tail -2 split.out)"

# NAME INPUT ORIGINAL PRECISION TP PP DP
OUTS="b11 bloom22 $B bf16 1 1 1
b22 bloom22 $B bf16 2 2 2
b25 bloom $B bf16 2 1 5
g11 gpt $G fp16 1 1 1
g22 gpt $G fp16 2 2 2
g21 gpt $G fp16 2 1 3"
while read -r n in o prec tp pp dp; do
	"$MT" "$in" --format megatron-deepspeed --target-tp "$tp" --target-pp "$pp" --target-dp "$dp" \
		--output "$n" >"$n.out" 2>&1 && ok "${n}_${prec}_tp${tp}_pp${pp}_dp${dp}_written" ||
		fail "${n}_${prec}_tp${tp}_pp${pp}_dp${dp}_written" "$(tail -2 "$n.out")"
done <<<"$OUTS"
# the run's precision picks the optimizer's files
if [ -f b22/global_step4/bf16_zero_pp_rank_1_mp_rank_03_optim_states.pt ] && ! ls g22/global_step4 | grep -q bf16_ &&
	[ -f g22/global_step4/zero_pp_rank_1_mp_rank_03_optim_states.pt ] && grep -q 'bf16 weights, bf16 ZeRO partitions' b11.out &&
	grep -q 'fp16 weights, fp16 ZeRO-1 partitions' g11.out
then ok precision_picks_bf16_or_fp16_zero_files; else fail precision_picks_bf16_or_fp16_zero_files "$(ls b22/global_step4 g22/global_step4 | tr '\n' ' ')"; fi

# (a) the structure Megatron-DeepSpeed and DeepSpeed expect, and every tensor, read with torch
while read -r n in o prec tp pp dp; do
	"$PY" "$TOP/tests/ref/mds-write-check.py" "$o" "$n" "$prec" "$tp" "$pp" "$dp" >"$n.check" 2>&1 &&
		ok "${n}_is_what_megatron_deepspeed_expects" || fail "${n}_is_what_megatron_deepspeed_expects" "$(tail -3 "$n.check")"
	echo "${n}_tensors_are_the_lmtk_checkpoints check $o $n" >>batch
done <<<"$OUTS"
grep -q '^paddings [1-9]' g21.check && grep -q '^paddings [1-9]' b25.check && ok flat_groups_padded_at_dp3_and_dp5 ||
	fail flat_groups_padded_at_dp3_and_dp5 "no group needed padding: $(cat g21.check b25.check)"
"$PY" "$TOP/tests/ref/mds-ckpt.py" batch <batch >tensors.out 2>&1
grep -E '^(ok|FAIL) ' tensors.out
[ "$(grep -cE '^(ok|FAIL) ' tensors.out)" = 6 ] || fail mds_ckpt_batch_ran "$(tail -3 tensors.out)"

# (b) back into lmtk: the original shard byte for byte, and the same state around it
while read -r n in o prec tp pp dp; do
	"$MT" --from megatron-deepspeed "$n" --optimizer --output "$n.back" >"$n.back.out" 2>&1 &&
		cmp -s "$n.back/global_step4/rank_tp00_pp000.safetensors" "$o/rank_tp00_pp000.safetensors" &&
		ok "${n}_reads_back_to_the_original_shard_byte_for_byte" ||
		fail "${n}_reads_back_to_the_original_shard_byte_for_byte" "$(tail -2 "$n.back.out")"
	"$PY" - "$o/manifest.json" "$n.back/global_step4/manifest.json" <<'PYEOF' >"$n.man" 2>&1 &&
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("iteration", "consumed_samples", "consumed_tokens", "data_position", "skipped_iterations",
          "valid_positions", "scheduler", "optimizer", "model"):
    assert a[k] == b[k], (k, a[k], b[k])
PYEOF
		ok "${n}_reads_back_with_the_same_counters_schedule_and_optimizer" ||
		fail "${n}_reads_back_with_the_same_counters_schedule_and_optimizer" "$(tail -2 "$n.man")"
done <<<"$OUTS"

# train --load of the Megatron-DeepSpeed directory resumes as the lmtk checkpoint does
losses() { grep '^ iteration ' "$1" | sed 's/.*iteration *\([0-9]*\)\/.*consumed samples: *\([0-9]*\) .*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2 \3 \4/'; }
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load bloom >bloom.res 2>&1
"$BIN/train" "${COMMON[@]}" "${GPT[@]}" --load gpt >gpt.res 2>&1
for n in b22 g22; do
	case $n in g*) M=("${GPT[@]}") o=gpt ;; *) M=("${BLOOM[@]}") o=bloom ;; esac
	"$BIN/train" "${COMMON[@]}" "${M[@]}" --load "$n" >"$n.res" 2>&1; rc=$?
	[ $rc = 0 ] && [ "$(losses "$o.res" | wc -l)" = 4 ] && diff <(losses "$n.res") <(losses "$o.res") >/dev/null &&
		ok "train_load_of_${n}_resumes_with_the_originals_losses" ||
		fail "train_load_of_${n}_resumes_with_the_originals_losses" "exit $rc: $(diff <(losses "$n.res") <(losses "$o.res") | head -3) $(grep -v '^ iter' "$n.res" | tail -2)"
done

# the .pt writer alone (tests/unit/ckpt_ptw.c writes it): every integer form at its edges, floats,
# UTF-8, bytes, the classes, tensors - and ZIP64 records, forced on a small file - as torch.load
# and Python's zipfile read them
PTW=$TOP/build/tests/ckpt_ptw
if [ -x "$PTW" ]; then
	"$PTW" write plain.pt && "$PTW" write z64.pt zip64 && "$PY" - plain.pt z64.pt <<'PYEOF' >ptw.out 2>&1 &&
import argparse, collections, sys, zipfile, torch
for p in sys.argv[1:]:
    assert zipfile.ZipFile(p).testzip() is None, p
    try:
        d = torch.load(p, weights_only=False)
    except TypeError:   # torch < 1.13
        d = torch.load(p)
    assert d["ints"] == [0, 1, 255, 256, 65535, 65536, -1, -256, 2**31 - 1, 2**31, -2**31, -2**31 - 1,
                         2**32 - 1, 2**40, 2**63 - 1, -2**63, -129, 128, 32768], d["ints"]
    assert d["f"] == 1.5 and d["neg"] == -0.125 and d["s"] == "h\u00e9llo \u2713" and d["b"] == bytes(range(256))
    assert d["none"] is None and d["t"] is True and d["tup"] == (1, "x") and d["set"] == set()
    assert type(d["od"]) is collections.OrderedDict and d["od"] == {"a": 1}
    assert type(d["ns"]) is argparse.Namespace and vars(d["ns"]) == {"x": 2}
    assert type(d["size"]) is torch.Size and d["size"] == (2, 3) and d["dtype"] is torch.bfloat16
    w = torch.tensor([[1.5, -2.25, 0.0], [3e38, -1e-30, 7.0]], dtype=torch.float32)
    assert d["w"].dtype == torch.float32 and torch.equal(d["w"], w), d["w"]
    assert d["h"].dtype == torch.uint8 and d["h"].tolist() == [1, 128, 255]
PYEOF
		ok pt_writer_values_and_zip64_load_in_torch || fail pt_writer_values_and_zip64_load_in_torch "$(tail -3 ptw.out)"
else
	skip pt_writer_values_and_zip64_load_in_torch "$PTW not built (make build/tests/ckpt_ptw)"
fi

# --- bad input: exit 2, saying what to do -------------------------------------------------------
"$BIN/train" "${COMMON[@]}" --num-layers 2 --hidden-size 64 --num-attention-heads 4 --exit-interval 2 \
	--save-interval 2 --save fp32 >fp32.train 2>&1 || fail fp32_trains "$(tail -2 fp32.train)"
expect_rc fp32_run_refused 2 "$MT" fp32 --format megatron-deepspeed --output fp32.out
contains fp32_run_says_give_dtype "$T/err" 'fp32/global_step2: the run.s recorded precision is fp32 .*give --dtype bf16 or --dtype fp16'
[ ! -e fp32.out ] && ok fp32_run_writes_nothing || fail fp32_run_writes_nothing "fp32.out exists"
expect_rc fp32_dtype_refused 2 "$MT" fp32 --format megatron-deepspeed --dtype fp32 --output fp32.out
contains fp32_dtype_says_bf16_or_fp16 "$T/err" '--dtype is bf16 or fp16'
expect_rc unknown_dtype_refused 2 "$MT" fp32 --format megatron-deepspeed --dtype int8 --output fp32.out
contains unknown_dtype_names_it "$T/err" "'int8' is not fp32, bf16 or fp16"
"$MT" fp32 --format megatron-deepspeed --dtype fp16 --output fp32.out >fp32.mt 2>&1 &&
	[ -f fp32.out/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt ] && ok fp32_run_with_dtype_fp16_is_written ||
	fail fp32_run_with_dtype_fp16_is_written "$(tail -2 fp32.mt)"
expect_rc target_dp_needs_the_format 2 "$MT" bloom --target-dp 2 --output x.out
expect_rc output_exists_refused 2 "$MT" gpt --format megatron-deepspeed --output g11
contains output_exists_says_force "$T/err" 'g11.*--force'
before=$(ls -i g11/global_step4/mp_rank_00_model_states.pt)
"$MT" gpt --format megatron-deepspeed --target-tp 2 --output g11 --force >force.out 2>&1 &&
	[ -f g11/global_step4/mp_rank_01_model_states.pt ] && [ "$(ls -i g11/global_step4/mp_rank_00_model_states.pt)" != "$before" ] &&
	ok force_replaces_an_earlier_output || fail force_replaces_an_earlier_output "$(tail -2 force.out)"
