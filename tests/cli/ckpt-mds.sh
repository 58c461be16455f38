#!/usr/bin/env bash
# Megatron-DeepSpeed checkpoints read by lmtk (src/ckpt/mds.c): the fixtures of
# ckpt-mds-fixture.sh - checkpoints train wrote, rewritten by the real torch.save in DeepSpeed's
# pipeline layout (TP=2 PP=2 DP=2, and DP=5 whose flat groups are padded) and plain Megatron's
# (TP=2 x PP=2, TP=1, and a BLOOM at TP=2) - are converted back by ckpt-merge-tp --from
# megatron-deepspeed: with --optimizer the result is the original checkpoint's shard byte for
# byte (fp32 masters and both Adam moments, un-partitioned), without it the weights bit for bit
# and a fresh optimizer; other layouts and the HF export equal those made from the original;
# train resumes from a conversion with the original's losses (DeepSpeed's Adam step carried:
# apex counts one step more); ckpt-sync-ln --check reads them and finds a layer norm planted
# out of step on one TP rank, in the bf16 weights or the fp32 masters; a truncated .pt, a pickle
# with an opcode torch.save never writes, swapped ZeRO partitions, a missing partition and bf16
# and fp16 ZeRO files mixed are refused with exit 2, naming the file (the other kinds DeepSpeed
# writes: ckpt-mds-kinds.sh); memory running out is exit 3.  train
# --load takes the Megatron-DeepSpeed directory itself, in one process and in a TP=2 x PP=2 run,
# re-splitting it as it reads, with the losses of its conversion; without optimizer files only
# with --no-load-optim, from the bf16 weights.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
MDS=$TOP/tests/ref/mds-ckpt.py
MT=$BIN/ckpt-merge-tp
SL=$BIN/ckpt-sync-ln
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
	skip ckpt_mds "python3-torch and python3-numpy are not installed (make deps installs them)"
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
GPT=(--num-layers 2 --hidden-size 64 --num-attention-heads 4)
BLOOM=(--num-layers 2 --hidden-size 96 --num-attention-heads 6 --position-embedding-type alibi
	--embed-layernorm)
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --exit-interval 4 --save-interval 4 --save bloom >bloom.train 2>&1 ||
	{ fail bloom_trains "$(tail -3 bloom.train)"; exit 0; }
"$BIN/train" "${COMMON[@]}" "${GPT[@]}" --exit-interval 4 --save-interval 4 --save gpt >gpt.train 2>&1 ||
	{ fail gpt_trains "$(tail -3 gpt.train)"; exit 0; }
B=bloom/global_step4 G=gpt/global_step4

# the fixtures, as ckpt-mds-fixture.sh makes (and checks) them: NAME ORIGINAL write-ARGS
declare -A ORIG
fx() { local n=$1 o=$2; shift 2; ORIG[$n]=$o
	"$PY" "$MDS" "$@" "$o/global_step4" "$n" >"$n.w" 2>&1 || { fail "fixture_$n" "$(tail -3 "$n.w")"; return 1; }; }
fx ds bloom write-ds --tp 2 --pp 2 --dp 2
fx ds5 bloom write-ds --tp 2 --pp 1 --dp 5
fx dsg gpt write-ds --tp 2 --pp 2 --dp 2
fx meg gpt write-meg --tp 2 --pp 2
fx meg1 gpt write-meg --tp 1 --pp 1
fx megb bloom write-meg --tp 2 --pp 1

# safetensors for the checks (json, struct, numpy)
cat >st.py <<'EOF'
import json, struct
import numpy as np
def load(path):
    b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: np.frombuffer(b, "<f4", int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0]).reshape(v["shape"])
            for k, v in h.items()}
EOF

# --- conversion back to lmtk: the original, byte for byte ---------------------------------------
for n in ds ds5 dsg meg meg1 megb; do
	o=${ORIG[$n]}
	"$MT" --from megatron-deepspeed "$n" --output "$n.opt" --optimizer >"$n.opt.out" 2>&1
	if cmp -s "$n.opt/global_step4/rank_tp00_pp000.safetensors" "$o/global_step4/rank_tp00_pp000.safetensors"
	then ok "${n}_with_optimizer_is_the_original_shard_byte_for_byte"
	else fail "${n}_with_optimizer_is_the_original_shard_byte_for_byte" "$(tail -2 "$n.opt.out")"; fi
	# without --optimizer: the weights (from the fp32 masters) bit for bit, a fresh optimizer
	"$MT" --from megatron-deepspeed "$n" --output "$n.w8" >"$n.w8.out" 2>&1
	"$PY" - "$n.w8/global_step4" "$o/global_step4" <<'EOF' >"$n.w8.cmp" 2>&1 && ok "${n}_weights_only_bit_exact_moments_zero_step_0" || fail "${n}_weights_only_bit_exact_moments_zero_step_0" "$(tail -3 "$n.w8.cmp") $(tail -1 "$n.w8.out")"
import json, sys
sys.path.insert(0, ".")
import st
a = st.load(sys.argv[1] + "/rank_tp00_pp000.safetensors"); b = st.load(sys.argv[2] + "/rank_tp00_pp000.safetensors")
assert sorted(a) == sorted(b), sorted(set(a) ^ set(b))[:4]
for k in b:
    if k.startswith("exp_avg"):
        assert not a[k].any(), k
    else:
        assert a[k].tobytes() == b[k].tobytes(), k
m = json.load(open(sys.argv[1] + "/manifest.json")); o = json.load(open(sys.argv[2] + "/manifest.json"))
assert m["optimizer"]["step"] == 0, m["optimizer"]
for k in ("iteration", "consumed_samples", "consumed_tokens", "data_position", "scheduler", "model"):
    assert m[k] == o[k], (k, m[k], o[k])
assert m["converted_from"]["weights"] == "fp32 master", m["converted_from"]
EOF
done
# the counters and the schedule come over; DeepSpeed's Adam step is apex's (one more: mds-format.md 2.6)
"$PY" - ds.opt/global_step4/manifest.json meg.opt/global_step4/manifest.json $B/manifest.json <<'EOF' >man.cmp 2>&1 && ok manifest_carries_counters_schedule_and_adam_step || fail manifest_carries_counters_schedule_and_adam_step "$(tail -3 man.cmp)"
import json, sys
d, m, o = (json.load(open(p)) for p in sys.argv[1:])
for k in ("iteration", "consumed_samples", "consumed_tokens", "data_position", "scheduler", "model"):
    assert d[k] == o[k], (k, d[k], o[k])
    assert m[k] == json.load(open(sys.argv[3].replace("bloom", "gpt")))[k], k
assert d["optimizer"]["step"] == o["optimizer"]["step"] + 1, (d["optimizer"], o["optimizer"])
assert m["optimizer"]["step"] == o["optimizer"]["step"], (m["optimizer"], o["optimizer"])
for k in ("beta1", "beta2", "eps", "weight_decay", "clip_grad"):
    assert d["optimizer"][k] == o["optimizer"][k], (k, d["optimizer"][k], o["optimizer"][k])
assert d["layout"] == {"tp": 1, "pp": 1, "dp": 2}, d["layout"]
EOF

# other layouts and the HF export: what the same commands make from the original
"$MT" bloom --output orig.tp2pp2 --target-tp 2 --target-pp 2 >/dev/null 2>&1
"$MT" --from megatron-deepspeed ds5 --output ds5.tp2pp2 --target-tp 2 --target-pp 2 --optimizer >ds5.tp2pp2.out 2>&1
same=1
for f in orig.tp2pp2/global_step4/*.safetensors; do cmp -s "$f" "ds5.tp2pp2/global_step4/${f##*/}" || same=0; done
[ $same = 1 ] && [ -f ds5.tp2pp2/global_step4/rank_tp01_pp001.safetensors ] && ok dp5_to_tp2_pp2_equals_the_originals_reshard ||
	fail dp5_to_tp2_pp2_equals_the_originals_reshard "$(tail -2 ds5.tp2pp2.out)"
"$MT" --from megatron-deepspeed --input meg1 --output meg1.tp2pp2 --target-tp 2 --target-pp 2 --optimizer >/dev/null 2>&1
"$MT" gpt --output gorig.tp2pp2 --target-tp 2 --target-pp 2 >/dev/null 2>&1
same=1
for f in gorig.tp2pp2/global_step4/*.safetensors; do cmp -s "$f" "meg1.tp2pp2/global_step4/${f##*/}" || same=0; done
[ $same = 1 ] && ok megatron_tp1_to_tp2_pp2_equals_the_originals_reshard || fail megatron_tp1_to_tp2_pp2_equals_the_originals_reshard "shards differ"
for n in ds meg; do
	o=${ORIG[$n]}
	"$MT" "$o" --output "$o.hf" --format hf >/dev/null 2>&1
	"$MT" --from megatron-deepspeed "$n" --output "$n.hf" --format hf >"$n.hf.out" 2>&1
	cmp -s "$o.hf/model.safetensors" "$n.hf/model.safetensors" && ok "${n}_hf_export_equals_the_originals" ||
		fail "${n}_hf_export_equals_the_originals" "$(tail -2 "$n.hf.out")"
done

# --- train resumes from a conversion ---------------------------------------------------------------
losses() { grep '^ iteration ' "$1" | sed 's/.*iteration *\([0-9]*\)\/.*consumed samples: *\([0-9]*\) .*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2 \3 \4/'; }
"$BIN/train" "${COMMON[@]}" "${GPT[@]}" --load gpt >gpt.res 2>&1
"$BIN/train" "${COMMON[@]}" "${GPT[@]}" --load meg.opt >meg.res 2>&1; rc=$?
if [ $rc = 0 ] && [ "$(losses gpt.res | wc -l)" = 4 ] && diff <(losses gpt.res) <(losses meg.res) >/dev/null &&
	[ "$(losses meg.res | head -1 | cut -d' ' -f1,2)" = "5 20" ]
then ok train_resumes_a_megatron_conversion_with_the_originals_losses
else fail train_resumes_a_megatron_conversion_with_the_originals_losses "exit $rc: $(losses gpt.res | head -2) vs $(losses meg.res | head -2) $(tail -1 meg.res)"; fi
# DeepSpeed's bf16 optimizer took one Adam step more than updates (its start-up step): the first
# loss is the original's, and every loss is the original's resumed with that step count
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load bloom >bloom.res 2>&1
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load ds.opt >ds.res 2>&1; rc=$?
cp -r bloom bloom.step5 && sed -i 's/"step": 4,/"step": 5,/' bloom.step5/global_step4/manifest.json
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load bloom.step5 >bloom5.res 2>&1
if [ $rc = 0 ] && [ "$(losses ds.res | wc -l)" = 4 ] && [ "$(losses ds.res | head -1)" = "$(losses bloom.res | head -1)" ] &&
	diff <(losses bloom5.res) <(losses ds.res) >/dev/null && ! diff <(losses bloom.res) <(losses ds.res) >/dev/null
then ok train_resumes_a_deepspeed_conversion_with_its_adam_step
else fail train_resumes_a_deepspeed_conversion_with_its_adam_step "exit $rc: $(losses bloom5.res | tail -1) vs $(losses ds.res | tail -1) $(tail -1 ds.res)"; fi

# train --load takes the Megatron-DeepSpeed directory itself, re-splitting it as it reads
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load ds >dsdir.res 2>&1; rc=$?
[ $rc = 0 ] && diff <(losses ds.res) <(losses dsdir.res) >/dev/null &&
	grep -q '^train: resumed from ds/global_step4 (Megatron-DeepSpeed, TP=2 PP=2 DP=2, re-split to TP=1 PP=1): iteration 4, 16 samples consumed' dsdir.res &&
	ok train_load_of_a_deepspeed_dir_is_its_conversions_resume ||
	fail train_load_of_a_deepspeed_dir_is_its_conversions_resume "exit $rc: $(grep -v '^ iter' dsdir.res | tail -2)"
"$BIN/train" "${COMMON[@]}" "${GPT[@]}" --load meg >megdir.res 2>&1; rc=$?
[ $rc = 0 ] && diff <(losses gpt.res) <(losses megdir.res) >/dev/null &&
	ok train_load_of_a_megatron_dir_has_the_originals_losses ||
	fail train_load_of_a_megatron_dir_has_the_originals_losses "exit $rc: $(grep -v '^ iter' megdir.res | tail -2)"
# no optimizer files: refused unless --no-load-optim, which takes the bf16 weights
rm -rf noopt && cp -r ds5 noopt && rm noopt/global_step4/bf16_zero_*
expect_rc train_load_without_optimizer_state_refused 2 "$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load noopt
contains train_load_without_optimizer_state_says_why "$T/err" 'without optimizer state .*--no-load-optim'
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load noopt --no-load-optim >noopt.res 2>&1; rc=$?
"$MT" --from megatron-deepspeed noopt --output noopt.lmtk >noopt.mt 2>&1
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load noopt.lmtk --no-load-optim >noopt.lres 2>&1
[ $rc = 0 ] && [ "$(losses noopt.res | wc -l)" = 4 ] && diff <(losses noopt.res) <(losses noopt.lres) >/dev/null &&
	grep -q 'weights only, its bfloat16 model weights: left out the fp32 master weights' noopt.mt &&
	ok no_optimizer_files_load_the_bf16_weights || fail no_optimizer_files_load_the_bf16_weights "exit $rc: $(tail -2 noopt.res) $(tail -1 noopt.mt)"
"$PY" - noopt.lmtk/global_step4/rank_tp00_pp000.safetensors $B/rank_tp00_pp000.safetensors <<'EOF' >noopt.cmp 2>&1 && ok bf16_weights_are_the_masters_rounding || fail bf16_weights_are_the_masters_rounding "$(tail -2 noopt.cmp)"
import sys
import numpy as np
sys.path.insert(0, ".")
import st
a = st.load(sys.argv[1]); b = st.load(sys.argv[2])
for k in b:
    if k.startswith("exp_avg"):
        continue
    u = b[k].view(np.uint32).astype(np.uint64)
    want = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    assert a[k].view(np.uint32).tobytes() == want.tobytes(), k
EOF
# a parallel run (mpirun, where Open MPI is installed) loads its parts straight from the files
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	ND=(--hidden-dropout 0 --attention-dropout 0)
	"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" "${ND[@]}" --load ds.opt >nd.res 2>&1
	mpirun --oversubscribe -np 4 "$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" "${ND[@]}" \
		--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --load ds >nd.par 2>&1; rc=$?
	"$PY" - <(losses nd.res) <(losses nd.par) <<'EOF' >nd.cmp 2>&1 && [ $rc = 0 ] && grep -q 're-split to TP=2 PP=2' nd.par && ok parallel_train_loads_a_deepspeed_dir_with_the_same_losses || fail parallel_train_loads_a_deepspeed_dir_with_the_same_losses "exit $rc: $(grep -v '^ iter' nd.par | tail -2; tail -1 nd.cmp)"
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 4, (a, b)
for x, y in zip(a, b):   # the same up to the order of sums across ranks (fp32)
    assert x[:2] == y[:2] and all(abs(float(u) - float(v)) <= 1e-5 * abs(float(u)) + 2e-3 * (i == 3) for i, (u, v) in enumerate(zip(x[2:], y[2:]), 2)), (x, y)
EOF
else
	skip parallel_train_loads_a_deepspeed_dir_with_the_same_losses "mpirun or train-mpi.so is not here"
fi

# --- ckpt-sync-ln --check ---------------------------------------------------------------------------
for n in ds ds5 meg megb; do
	expect_rc "sync_ln_${n}_replicas_equal" 0 "$SL" --from megatron-deepspeed "$n" --check
done
contains sync_ln_compares_bf16_weights_and_masters "$T/out" 'bf16 weight.*-$'
# torch edits of the fixtures (the pickled classes stood in for by mds-ckpt.py)
cat >edit.py <<'EOF'
import importlib.util, os, sys, torch
spec = importlib.util.spec_from_file_location("mds", os.environ["MDS"])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
what, path = sys.argv[1], sys.argv[2]
sd = torch.load(path, map_location="cpu")
if what == "ln-bf16":        # one element of a layer norm of this TP rank's layer file
    sd["input_layernorm.weight"].view(-1)[5] += 0.25
    torch.save(sd, path)
elif what == "ln-master":    # the fp32 master of layers.0.input_layernorm.weight (no-decay group's first)
    sd["optimizer"]["fp32_from_fp16_params"][2][0].view(-1)[5] += 1e-3
    torch.save(sd, path)
EOF
rm -rf x && cp -r ds x && MDS=$MDS "$PY" edit.py ln-bf16 x/global_step4/layer_03-model_01-model_states.pt >edit.out 2>&1
expect_rc sync_ln_finds_a_bf16_layer_norm_desync 1 "$SL" --from megatron-deepspeed x --check
contains sync_ln_names_the_bf16_desync "$T/out" '^layers\.0\.input_layernorm\.weight +bf16 weight +[0-9.e+-]+ +tp01/pp000$'
lacks sync_ln_masters_still_equal "$T/out" 'fp32 master +[0-9.e+-]+ +tp'
expect_rc json_sync_ln_bf16_desync_exits_1 1 "$SL" --from megatron-deepspeed x --json
json_ok json_sync_ln_names_the_bf16_desync "$T/out" "
d = [(t['tensor'], t['kind'], t['ranks_that_differ']) for t in j['tensors'] if t['differ_count']]
assert d == [('layers.0.input_layernorm.weight', 'bf16 weight', ['tp01/pp000'])], d
assert (j['format'], j['ok'], j['differ']) == ('megatron-deepspeed', False, 1), j
assert j['largest']['tensor'] == 'layers.0.input_layernorm.weight' and abs(j['largest']['max_abs_diff'] - 0.25) < 0.01, j['largest']
assert {t['kind'] for t in j['tensors']} == {'bf16 weight', 'fp32 master', 'exp_avg', 'exp_avg_sq'}, {t['kind'] for t in j['tensors']}
"
rm -rf y && cp -r meg y && MDS=$MDS "$PY" edit.py ln-master y/iter_0000004/mp_rank_01_000/model_optim_rng.pt >>edit.out 2>&1
expect_rc sync_ln_finds_a_master_layer_norm_desync 1 "$SL" --from megatron-deepspeed y --check
contains sync_ln_names_the_master_desync "$T/out" '^layers\.0\.input_layernorm\.weight +fp32 master +1\.0[0-9]*e-03 +tp01/pp000$'
expect_rc merge_refuses_the_desync 1 "$MT" --from megatron-deepspeed y --output y.out --optimizer
[ ! -e y.out ] && ok merge_refused_writes_nothing || fail merge_refused_writes_nothing "y.out exists"
expect_rc merge_averages_the_desync 0 "$MT" --from megatron-deepspeed y --output y.avg --optimizer --average

# --- refused, naming the file --------------------------------------------------------------------------
rm -rf z && cp -r ds z && head -c 20000 ds/global_step4/bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt \
	>z/global_step4/bf16_zero_pp_rank_1_mp_rank_01_optim_states.pt
expect_rc truncated_pt_is_exit_2 2 "$MT" --from megatron-deepspeed z --output z.out --optimizer
contains truncated_pt_names_the_file "$T/err" 'bf16_zero_pp_rank_1_mp_rank_01_optim_states\.pt: '
expect_rc truncated_pt_sync_ln_exit_2 2 "$SL" --from megatron-deepspeed z
# a pickle Python would load (NONE, POP after PROTO) but torch.save never writes: refused by name
rm -rf z && cp -r ds z && "$PY" - z/global_step4/mp_rank_01_model_states.pt <<'EOF' >op.out 2>&1
import sys, zipfile
p = sys.argv[1]
zin = zipfile.ZipFile(p); items = [(i, zin.read(i.filename)) for i in zin.infolist()]; zin.close()
with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
    for i, data in items:
        if i.filename.endswith("/data.pkl"):
            assert data[:2] == b"\x80\x02"
            data = data[:2] + b"N0" + data[2:]
        z.writestr(i.filename, data)
EOF
expect_rc unknown_opcode_is_exit_2 2 "$MT" --from megatron-deepspeed z --output z.out
contains unknown_opcode_names_file_and_opcode "$T/err" 'mp_rank_01_model_states\.pt: .*data\.pkl offset 3 \(POP\): opcode 0x30 POP is not one torch\.save writes'
[ ! -e z.out ] && ok refused_input_writes_nothing || fail refused_input_writes_nothing "z.out exists"
rm -rf z && cp -r ds z && mv z/global_step4/bf16_zero_pp_rank_0_mp_rank_02_optim_states.pt x.tmp &&
	mv z/global_step4/bf16_zero_pp_rank_1_mp_rank_02_optim_states.pt z/global_step4/bf16_zero_pp_rank_0_mp_rank_02_optim_states.pt &&
	mv x.tmp z/global_step4/bf16_zero_pp_rank_1_mp_rank_02_optim_states.pt
expect_rc swapped_zero_partitions_refused 2 "$MT" --from megatron-deepspeed z --output z.out --optimizer
contains swapped_zero_partitions_named "$T/err" 'bf16_zero_pp_rank_0_mp_rank_02_optim_states\.pt: param_slice_mappings'
rm -f z/global_step4/bf16_zero_pp_rank_1_mp_rank_02_optim_states.pt
expect_rc missing_zero_partition_refused 2 "$MT" --from megatron-deepspeed z --output z.out
contains missing_zero_partition_named "$T/err" 'bf16_zero_pp_rank_1_mp_rank_02_optim_states\.pt: missing'
rm -rf z && cp -r ds z && cp ds/global_step4/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt z/global_step4/zero_pp_rank_0_mp_rank_00_optim_states.pt
expect_rc bf16_and_fp16_zero_files_mixed_refused 2 "$MT" --from megatron-deepspeed z --output z.out
contains bf16_and_fp16_zero_files_mixed_named "$T/err" 'z/global_step4: both bf16_zero_\* and zero_\* optimizer files'

# --- out of memory: exit 3, could not do the job, as every program's, not 2 (bad input) ----------------
# a shim fails jansson's json_pack for the learning-rate schedule's object only, as memory running
# out there would
cat >nomem.c <<'EOF'
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
typedef struct json_t json_t;
typedef struct json_error_t json_error_t;
json_t *json_vpack_ex(json_error_t *error, size_t flags, const char *fmt, va_list ap);
json_t *json_pack(const char *fmt, ...)
{
	va_list ap;
	json_t *j;
	if (strstr(fmt, "s:f,s:f,s:I,s:I,s:s,s:b"))
		return NULL;
	va_start(ap, fmt);
	j = json_vpack_ex(NULL, 0, fmt, ap);
	va_end(ap);
	return j;
}
EOF
if cc -shared -fPIC -o nomem.so nomem.c 2>cc.err; then
	expect_rc mds_out_of_memory_is_exit_3 3 env LD_PRELOAD="$T/nomem.so" "$MT" --from megatron-deepspeed ds --output m.out
	contains mds_out_of_memory_names_what "$T/err" 'out of memory for the converted learning-rate schedule'
	[ ! -e m.out ] && ok mds_out_of_memory_writes_nothing || fail mds_out_of_memory_writes_nothing "m.out exists"
else
	skip mds_out_of_memory_is_exit_3 "cannot build an LD_PRELOAD shim: $(head -c 200 cc.err)"
fi

# --- usage ----------------------------------------------------------------------------------------------
expect_rc mds_without_from_hints_it 2 "$MT" ds --output u.out
contains mds_without_from_hint "$T/err" 'add --from megatron-deepspeed'
expect_rc lmtk_with_from_mds_refused 2 "$MT" --from megatron-deepspeed bloom --output u.out
contains lmtk_with_from_mds_says_so "$T/err" 'is an lmtk checkpoint'
expect_rc optimizer_without_from_refused 2 "$MT" bloom --output u.out --optimizer
expect_rc optimizer_with_hf_refused 2 "$MT" --from megatron-deepspeed ds --output u.out --format hf --optimizer
expect_rc sync_ln_fix_mds_refused 2 "$SL" --from megatron-deepspeed ds --fix --in-place
expect_rc bad_from_refused 2 "$MT" --from megatron ds --output u.out
