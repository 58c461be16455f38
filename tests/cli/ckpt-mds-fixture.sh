#!/usr/bin/env bash
# The Megatron-DeepSpeed fixtures (tests/ref/mds-ckpt.py, tests/ref/mds-format.md): checkpoints
# that train writes for a tiny BLOOM (ALiBi, embedding layer norm) and a tiny GPT-2 (learned
# positions) are written by the real torch.save in Megatron-DeepSpeed's two layouts - DeepSpeed's
# pipeline checkpoint with the BF16 optimizer's ZeRO partitions (TP=2, PP=2, DP=2; and DP=5, whose
# flat groups need padding) and plain Megatron's model_optim_rng.pt (TP=2 x PP=2, TP=1) - with
# exactly the files DeepSpeed and Megatron name; read back with torch.load from the documented
# structure alone they give lmtk's fp32 master weights and both Adam moments bit for bit, bf16
# weights that are their round-to-nearest-even, the iteration and consumed samples, and through
# transformers' BLOOM converter's rules (transcribed) the same tensors under HF's names.  Every
# structural mistake a reader could make - TP ranks, DP partitions, PP stages or parameter groups
# swapped, a bf16 weight off by one unit - is caught.  `mds-ckpt.py dump` (what a C reader is
# compared with) holds lmtk's tensors bit for bit.  Every class the pickles name is in
# mds-format.md's list, so a reader written from the document reads these files.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
MDS=$TOP/tests/ref/mds-ckpt.py
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
	skip ckpt_mds_fixture "python3-torch and python3-numpy are not installed (make deps installs them)"
	exit 0
fi
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3

COMMON=(--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4
	--lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2 --adam-beta2 0.95
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1 --train-iters 8 --exit-interval 4 --save-interval 4)
"$BIN/train" "${COMMON[@]}" --num-layers 2 --hidden-size 96 --num-attention-heads 6 \
	--position-embedding-type alibi --embed-layernorm --save bloom >bloom.train 2>&1 ||
	{ fail bloom_trains "$(tail -3 bloom.train)"; exit 0; }
"$BIN/train" "${COMMON[@]}" --num-layers 2 --hidden-size 64 --num-attention-heads 4 --save gpt >gpt.train 2>&1 ||
	{ fail gpt_trains "$(tail -3 gpt.train)"; exit 0; }
B=bloom/global_step4 G=gpt/global_step4

# writes and checks, in one python (tests/ref/mds-ckpt.py batch: torch loads once)
"$PY" "$MDS" batch >write.out 2>&1 <<EOF
ds_bloom_tp2_pp2_dp2_reads_back_bit_exact write-ds --tp 2 --pp 2 --dp 2 $B ds ; check $B ds
ds_bloom_dp5_padded_groups_read_back_bit_exact write-ds --tp 2 --pp 1 --dp 5 $B ds5 ; check $B ds5
ds_gpt2_tp2_pp2_reads_back_bit_exact write-ds --tp 2 --pp 2 --dp 2 $G dsg ; check $G dsg
ds_bloom_tp3_vocab_repadded_reads_back_bit_exact write-ds --tp 3 --pp 1 --dp 1 $B ds3 ; check $B ds3
megatron_gpt2_tp2_pp2_reads_back_bit_exact write-meg --tp 2 --pp 2 $G meg ; check $G meg
megatron_gpt2_tp1_reads_back_bit_exact write-meg --tp 1 --pp 1 $G meg1 ; check $G meg1
megatron_bloom_tp2_reads_back_bit_exact write-meg --tp 2 --pp 1 $B megb ; check $B megb
EOF
grep -E '^(ok|FAIL) ' write.out
[ "$(grep -cE '^(ok|FAIL) ' write.out)" = 7 ] || fail mds_ckpt_batch_ran "$(tail -3 write.out)"

# exactly the files DeepSpeed and Megatron name (mds-format.md "Files")
want=$(for s in 01 03 04 06; do for r in 00 01; do echo "layer_$s-model_$r-model_states.pt"; done; done
	for m in 00 01 02 03; do echo "mp_rank_${m}_model_states.pt"; for d in 0 1; do
		echo "bf16_zero_pp_rank_${d}_mp_rank_${m}_optim_states.pt"; done; done; echo zero_to_fp32.py)
if [ "$(ls ds/global_step4 | sort)" = "$(echo "$want" | sort)" ] && [ "$(cat ds/latest)" = global_step4 ] &&
	[ "$(ls ds)" = "$(printf 'global_step4\nlatest')" ]; then ok ds_file_names
else fail ds_file_names "$(ls ds ds/global_step4 | tr '\n' ' ')"; fi
if [ "$(cd meg && find . -type f | sort | tr '\n' ' ')" = "./iter_0000004/mp_rank_00_000/model_optim_rng.pt ./iter_0000004/mp_rank_00_001/model_optim_rng.pt ./iter_0000004/mp_rank_01_000/model_optim_rng.pt ./iter_0000004/mp_rank_01_001/model_optim_rng.pt ./latest_checkpointed_iteration.txt " ] &&
	[ "$(cat meg/latest_checkpointed_iteration.txt)" = 4 ] && [ -f meg1/iter_0000004/mp_rank_00/model_optim_rng.pt ]
then ok megatron_file_names; else fail megatron_file_names "$(cd meg && find . -type f | tr '\n' ' ')"; fi
# the padding rule is exercised: DP=5 leaves a remainder that only the last rank's group_paddings holds
MDS=$MDS "$PY" - ds5/global_step4 <<'EOF' >pad.out 2>&1 && ok ds_group_paddings_on_the_last_rank_only || fail ds_group_paddings_on_the_last_rank_only "$(tail -3 pad.out)"
import importlib.util, os, sys, torch
spec = importlib.util.spec_from_file_location("mds", os.environ["MDS"])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
p = [torch.load(f"{sys.argv[1]}/bf16_zero_pp_rank_{d}_mp_rank_00_optim_states.pt", map_location="cpu")["optimizer_state_dict"]["group_paddings"] for d in range(5)]
assert all(x == [0, 0, 0] for x in p[:4]) and any(p[4]), p
EOF

# dump: the whole tensors under lmtk's names, what a C reader's conversion is compared with
"$PY" "$MDS" dump ds ds.safetensors >dump.err 2>&1 && "$PY" - ds.safetensors $B/rank_tp00_pp000.safetensors <<'EOF' >>dump.err 2>&1 && ok dump_holds_lmtks_tensors_bit_exact || fail dump_holds_lmtks_tensors_bit_exact "$(tail -3 dump.err)"
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}, h
d, dh = load(sys.argv[1]); l, lh = load(sys.argv[2])
assert set(l) <= set(d), sorted(set(l) - set(d))[:5]
bad = [k for k in l if d[k] != l[k] or dh[k]["shape"] != lh[k]["shape"]]
assert not bad, bad[:5]
assert dh["__metadata__"]["iteration"] == "4" and dh["__metadata__"]["consumed_train_samples"] == "16"
assert all(dh["bf16." + k]["dtype"] == "BF16" for k in l if not k.startswith("exp_avg"))
EOF

# every structural mistake is caught: swap two files (or edit one) in a copy and the check must
# fail.  The copies are made here; the edits and the checks run in one python.
mk() { local n=$1 src=$2; shift 2
	rm -rf "x-$n" && cp -r "$src" "x-$n" && (cd "x-$n" && "$@") >"$n.edit" 2>&1 ||
		fail "$n" "could not make the mistake: $(tail -2 "$n.edit")"; }
swap() { mv "$1" x.tmp && mv "$2" "$1" && mv x.tmp "$2"; }
S=global_step4 I=iter_0000004
mk swapped_tp_layer_files_fail ds swap $S/layer_03-model_00-model_states.pt $S/layer_03-model_01-model_states.pt
mk swapped_embedding_tp_files_fail ds swap $S/layer_01-model_00-model_states.pt $S/layer_01-model_01-model_states.pt
mk swapped_dp_partitions_fail ds swap $S/bf16_zero_pp_rank_0_mp_rank_01_optim_states.pt $S/bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt
mk swapped_pp_stages_fail ds swap $S/mp_rank_00_model_states.pt $S/mp_rank_02_model_states.pt
mk swapped_megatron_tp_ranks_fail meg swap $I/mp_rank_00_001 $I/mp_rank_01_001
mk swapped_megatron_pp_stages_fail meg swap $I/mp_rank_00_000 $I/mp_rank_00_001
mk swapped_param_groups_fail ds true
mk swapped_megatron_param_groups_fail meg true
mk bf16_one_ulp_off_fails ds true
"$PY" "$MDS" batch >bad.out 2>&1 <<EOF
swapped_tp_layer_files_fail expect-fail check $B x-swapped_tp_layer_files_fail
swapped_embedding_tp_files_fail expect-fail check $B x-swapped_embedding_tp_files_fail
swapped_dp_partitions_fail expect-fail check $B x-swapped_dp_partitions_fail
swapped_pp_stages_fail expect-fail check $B x-swapped_pp_stages_fail
swapped_megatron_tp_ranks_fail expect-fail check $G x-swapped_megatron_tp_ranks_fail
swapped_megatron_pp_stages_fail expect-fail check $G x-swapped_megatron_pp_stages_fail
swapped_param_groups_fail mutate groups x-swapped_param_groups_fail/$S/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt ; expect-fail check $B x-swapped_param_groups_fail
swapped_megatron_param_groups_fail mutate groups-meg x-swapped_megatron_param_groups_fail/$I/mp_rank_00_000/model_optim_rng.pt ; expect-fail check $G x-swapped_megatron_param_groups_fail
bf16_one_ulp_off_fails mutate ulp x-bf16_one_ulp_off_fails/$S/layer_04-model_01-model_states.pt ; expect-fail check $B x-bf16_one_ulp_off_fails
EOF
grep -E '^(ok|FAIL) ' bad.out
[ "$(grep -cE '^(ok|FAIL) ' bad.out)" = 9 ] || fail mds_ckpt_batch_ran "$(tail -3 bad.out)"

# every class the pickles name, and every opcode, is one mds-format.md lists (section "Pickle")
"$PY" "$MDS" globals ds/global_step4/*.pt meg/iter_0000004/*/*.pt >globals.out 2>&1
sed 's/^[^:]*: //' globals.out | tr ' ' '\n' | grep . | sort -u >classes
sed -n '/^## Pickle/,/^## [^P]/p' "$TOP/tests/ref/mds-format.md" >pickle.md 2>/dev/null
missing=$(while read -r g; do grep -qF "\`$g\`" pickle.md || echo "$g"; done <classes)
if [ -s classes ] && [ -s pickle.md ] && [ -z "$missing" ]; then ok every_pickled_class_is_documented
else fail every_pickled_class_is_documented "not in mds-format.md's Pickle section: ${missing:-$(tail -2 globals.out)}"; fi
"$PY" "$MDS" opcodes ds/global_step4/*.pt ds5/global_step4/*.pt meg/iter_0000004/*/*.pt megb/iter_0000004/*/*.pt >opcodes.out 2>&1
sed 's/^[^:]*: //' opcodes.out | tr ' ' '\n' | grep . | sort -u >ops
missing=$(while read -r o; do grep -qE "(^|[ \`])$o([ \`]|$)" pickle.md || echo "$o"; done <ops)
if [ -s ops ] && [ -s pickle.md ] && [ -z "$missing" ]; then ok every_pickle_opcode_is_documented
else fail every_pickle_opcode_is_documented "not in mds-format.md's Pickle section: ${missing:-$(tail -2 opcodes.out)}"; fi
