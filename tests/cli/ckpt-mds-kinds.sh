#!/usr/bin/env bash
# Every checkpoint kind DeepSpeed 0.6/0.7 writes for Megatron-DeepSpeed, read by lmtk
# (src/ckpt/mds_ds.c, mds_uni.c; tests/ref/mds-format.md 2.8, 2.9) beside the bf16 ZeRO one of
# ckpt-mds.sh: fp16 with ZeRO stage 1 (zero_pp_rank_D_mp_rank_MM_optim_states.pt, the fp32
# partition saved without its padding, a pickled DynamicLossScaler), ZeRO stage 0 (param_shapes
# None; FP16_Optimizer's flat groups, or fp32's base optimizer, in mp_rank_MM_model_states.pt),
# and ds_to_universal.py's universal checkpoint (zero/NAME/{fp32,exp_avg,exp_avg_sq}.pt).  The
# fixtures are the real torch.save of those structures (tests/ref/mds-ckpt.py write-ds --optim),
# made from checkpoints train wrote and read back with torch.load against them.  Each converts
# (ckpt-merge-tp --from megatron-deepspeed --optimizer) to tensors equal to the fixture's, read
# with torch (mds-ckpt.py dump) - and so to the original shard, byte for byte; the fp16 loss
# scaler's state lands in the manifest as lmtk's scaler counts it; train --load takes each
# directory with its conversion's losses.  Without optimizer files, or with ones lmtk does not
# read (ZeRO's elastic form), a weights-only conversion works and says in one line what it left
# out; train --load of it needs --no-load-optim (exit 2 otherwise) and then trains.  Hostile
# inputs - a partition too short, a flat group too short, a moment or a universal tensor of the
# wrong shape, a universal checkpoint without the position embeddings its model has - exit 2
# naming the file.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
MDS=$TOP/tests/ref/mds-ckpt.py
MT=$BIN/ckpt-merge-tp
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
	skip ckpt_mds_kinds "python3-torch and python3-numpy are not installed (make deps installs them)"
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

# the fixtures, written and read back with torch against the original, in one python:
# NAME ORIGINAL OPTIM TP PP DP
FX="z16 $B fp16-zero 2 2 2
z16g $G fp16-zero 2 1 3
s16 $B fp16 2 2 2
s16g $G fp16 1 2 1
s32 $B fp32 2 2 2
uni $B universal 2 2 2"
declare -A ORIG KIND
while read -r n o k tp pp dp; do
	ORIG[$n]=$o KIND[$n]=$k
	echo "fixture_${n}_${k}_reads_back_with_torch write-ds --tp $tp --pp $pp --dp $dp --optim $k $o $n ; check $o $n"
done <<<"$FX" >batch
echo "fixture_gpt_universal write-ds --tp 2 --pp 1 --dp 1 --optim universal $G unig" >>batch
"$PY" "$MDS" batch <batch >write.out 2>&1
grep -E '^(ok|FAIL) ' write.out
[ "$(grep -cE '^(ok|FAIL) ' write.out)" = 7 ] || fail mds_kinds_batch_ran "$(tail -3 write.out)"
# the files each kind is made of (mds-format.md 2.8, 2.9)
if [ -f z16/global_step4/zero_pp_rank_1_mp_rank_03_optim_states.pt ] && ! ls z16/global_step4 | grep -q bf16_ &&
	[ "$(ls s16/global_step4 | grep -c _optim_states)" = 0 ] && [ "$(cat uni/latest_universal)" = global_step4_universal ] &&
	[ -f uni/global_step4_universal/zero/4.self_attention.dense.weight/exp_avg_sq.pt ]
then ok kinds_have_deepspeeds_file_names; else fail kinds_have_deepspeeds_file_names "$(ls z16/global_step4 s16/global_step4 uni | tr '\n' ' ')"; fi

# every class these pickles name, and every opcode, is one mds-format.md lists (section "Pickle")
PT=(z16/global_step4/*.pt s16/global_step4/*.pt s32/global_step4/*.pt uni/global_step4_universal/mp_rank_00_model_states.pt
	uni/global_step4_universal/zero/*/*.pt)
sed -n '/^## Pickle/,/^## [^P]/p' "$TOP/tests/ref/mds-format.md" >pickle.md 2>/dev/null
"$PY" "$MDS" globals "${PT[@]}" 2>&1 | sed 's/^[^:]*: //' | tr ' ' '\n' | grep . | sort -u >classes
missing=$(while read -r g; do grep -qF "\`$g\`" pickle.md || echo "$g"; done <classes)
if grep -q DynamicLossScaler classes && [ -s pickle.md ] && [ -z "$missing" ]; then ok every_pickled_class_is_documented
else fail every_pickled_class_is_documented "not in mds-format.md's Pickle section: ${missing:-$(head -3 classes)}"; fi
"$PY" "$MDS" opcodes "${PT[@]}" 2>&1 | sed 's/^[^:]*: //' | tr ' ' '\n' | grep . | sort -u >ops
missing=$(while read -r o; do grep -qE "(^|[ \`])$o([ \`]|$)" pickle.md || echo "$o"; done <ops)
if [ -s ops ] && [ -z "$missing" ]; then ok every_pickle_opcode_is_documented
else fail every_pickle_opcode_is_documented "not in mds-format.md's Pickle section: ${missing:-$(head -3 ops)}"; fi

# the conversion's tensors are the fixture's (read with torch: mds-ckpt.py dump), and the original's
cat >same.py <<'EOF'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: (b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], v["shape"]) for k, v in h.items() if k != "__metadata__"}
conv, fx = load(sys.argv[1]), load(sys.argv[2])
assert len(conv) > 20, sorted(conv)
bad = [k for k in conv if k not in fx or conv[k] != fx[k]]
assert not bad, bad[:5]
EOF
for n in z16 z16g s16 s16g s32 uni; do
	o=${ORIG[$n]}
	"$MT" --from megatron-deepspeed "$n" --output "$n.opt" --optimizer >"$n.opt.out" 2>&1
	"$PY" "$MDS" dump "$n" "$n.dump.safetensors" >"$n.dump.err" 2>&1
	"$PY" same.py "$n.opt/global_step4/rank_tp00_pp000.safetensors" "$n.dump.safetensors" >"$n.same" 2>&1 &&
		ok "${n}_${KIND[$n]}_converts_to_the_fixtures_tensors" ||
		fail "${n}_${KIND[$n]}_converts_to_the_fixtures_tensors" "$(tail -2 "$n.same") $(tail -1 "$n.opt.out")"
	cmp -s "$n.opt/global_step4/rank_tp00_pp000.safetensors" "$o/rank_tp00_pp000.safetensors" &&
		ok "${n}_${KIND[$n]}_is_the_original_shard_byte_for_byte" ||
		fail "${n}_${KIND[$n]}_is_the_original_shard_byte_for_byte" "$(tail -1 "$n.opt.out")"
done

# the manifest: Adam's step (ZeRO's and the bf16 optimizer's start-up step counted: mds-format.md
# 2.6, 2.8), and the fp16 loss scaler's state as lmtk's scaler counts it - the clean steps towards
# the next doubling, computed here from the pickled scaler by DeepSpeed's own rules
MDS=$MDS "$PY" - <<'EOF' >man.out 2>&1 && ok fp16_loss_scaler_and_adam_step_land_in_the_manifest || fail fp16_loss_scaler_and_adam_step_land_in_the_manifest "$(tail -3 man.out)"
import importlib.util, json, os, torch
spec = importlib.util.spec_from_file_location("mds", os.environ["MDS"])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
def man(n):
    return json.load(open(n + ".opt/global_step4/manifest.json"))
orig = json.load(open("bloom/global_step4/manifest.json"))["optimizer"]["step"]
def next_doubling(cur_iter, last_overflow, window, fused):
    """updates until DeepSpeed doubles the scale: DynamicLossScaler when (cur_iter - last_overflow)
    is a multiple of the window, FP16_Optimizer when (cur_iter - last_overflow - 1) is one, > 0"""
    k = 1
    while True:
        c = cur_iter + k - 1
        x = c - last_overflow - (1 if fused else 0)
        if x % window == 0 and x > 0:
            return k
        k += 1
# fp16 ZeRO: the pickled DynamicLossScaler
sc = torch.load("z16/global_step4/zero_pp_rank_0_mp_rank_00_optim_states.pt")["optimizer_state_dict"]["loss_scaler"]
o = man("z16")["optimizer"]
assert o["loss_scale"] == sc.cur_scale, (o, vars(sc))
assert sc.scale_window - o["good_steps"] == next_doubling(sc.cur_iter, sc.last_overflow_iter, sc.scale_window, False), (o, vars(sc))
assert o["hysteresis_left"] == sc.cur_hysteresis, (o, vars(sc))
assert o["step"] == orig + 1, (o, orig)
# FP16_Optimizer (ZeRO stage 0): its own fields; it halves on every overflow
st = torch.load("s16/global_step4/mp_rank_00_model_states.pt")["optimizer"]
o = man("s16")["optimizer"]
assert o["loss_scale"] == st["cur_scale"], (o, st["cur_scale"])
assert st["scale_window"] - o["good_steps"] == next_doubling(st["cur_iter"], st["last_overflow_iter"], st["scale_window"], True), o
assert o["hysteresis_left"] == 1 and o["step"] == orig, o
# fp32 without ZeRO: no scaler; universal: no Adam step saved, the bf16 source's taken
o = man("s32")["optimizer"]
assert o["loss_scale"] == 1.0 and o["step"] == orig, o
assert man("uni")["optimizer"]["step"] == orig + 1, man("uni")["optimizer"]
for n in ("z16", "s16", "s32", "uni"):
    m = man(n)
    assert m["iteration"] == 4 and m["consumed_samples"] == 16, (n, m["iteration"])
EOF

# train --load takes each directory, with the losses of a resume from its conversion
losses() { grep '^ iteration ' "$1" | sed 's/.*iteration *\([0-9]*\)\/.*consumed samples: *\([0-9]*\) .*lm loss: \([^ ]*\) .*grad norm: \([^ ]*\) .*/\1 \2 \3 \4/'; }
for n in z16 s16 s32 uni s16g; do
	case $n in *g) M=("${GPT[@]}") ;; *) M=("${BLOOM[@]}") ;; esac
	"$BIN/train" "${COMMON[@]}" "${M[@]}" --load "$n" >"$n.dir.res" 2>&1; rc=$?
	"$BIN/train" "${COMMON[@]}" "${M[@]}" --load "$n.opt" >"$n.conv.res" 2>&1
	[ $rc = 0 ] && [ "$(losses "$n.dir.res" | wc -l)" = 4 ] && diff <(losses "$n.conv.res") <(losses "$n.dir.res") >/dev/null &&
		ok "train_load_of_${n}_${KIND[$n]}_is_its_conversions_resume" ||
		fail "train_load_of_${n}_${KIND[$n]}_is_its_conversions_resume" "exit $rc: $(grep -v '^ iter' "$n.dir.res" | tail -2)"
done

# --- weights only -----------------------------------------------------------------------------------
# no optimizer files: the fp16 model weights, and one line saying what was left out
rm -rf w16 && cp -r z16 w16 && rm w16/global_step4/zero_pp_rank_*
"$MT" --from megatron-deepspeed w16 --output w16.out >w16.mt 2>&1; rc=$?
[ $rc = 0 ] && [ "$(grep -c 'left out' w16.mt)" = 1 ] &&
	grep -q 'weights only, its float16 model weights: left out the fp32 master weights and Adam.s state (no optimizer files' w16.mt &&
	ok weights_only_conversion_says_what_it_left_out || fail weights_only_conversion_says_what_it_left_out "exit $rc: $(cat w16.mt)"
"$PY" - w16.out/global_step4/rank_tp00_pp000.safetensors $B/rank_tp00_pp000.safetensors <<'EOF' >w16.cmp 2>&1 && ok weights_only_are_the_fp16_weights || fail weights_only_are_the_fp16_weights "$(tail -2 w16.cmp)"
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: np.frombuffer(b, "<f4", int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0]) for k, v in h.items()}
a, b = load(sys.argv[1]), load(sys.argv[2])
for k in b:
    if k.startswith("exp_avg"):
        assert not a[k].any(), k
    else:
        assert a[k].tobytes() == b[k].astype(np.float16).astype(np.float32).tobytes(), k
EOF
expect_rc weights_only_with_optimizer_refused 2 "$MT" --from megatron-deepspeed w16 --output w16.x --optimizer
contains weights_only_with_optimizer_says_why "$T/err" 'no optimizer state lmtk reads \(no optimizer files'
# train --load: refused without --no-load-optim (as Megatron refuses), trains with it
expect_rc train_load_of_weights_only_refused 2 "$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load w16
contains train_load_of_weights_only_says_no_load_optim "$T/err" 'w16/global_step4: .*without optimizer state .*no optimizer files.*--no-load-optim'
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load w16 --no-load-optim >w16.res 2>&1; rc=$?
"$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load w16.out --no-load-optim >w16.lres 2>&1
[ $rc = 0 ] && [ "$(losses w16.res | wc -l)" = 4 ] && diff <(losses w16.res) <(losses w16.lres) >/dev/null &&
	ok train_load_of_weights_only_with_no_load_optim_trains || fail train_load_of_weights_only_with_no_load_optim_trains "exit $rc: $(tail -2 w16.res)"
# optimizer files of a kind lmtk does not read (ZeRO's elastic form: per-group states, no step)
rm -rf el && cp -r z16 el && MDS=$MDS "$PY" - el/global_step4/zero_pp_rank_*_optim_states.pt <<'EOF' >el.edit 2>&1
import importlib.util, os, sys, torch
spec = importlib.util.spec_from_file_location("mds", os.environ["MDS"])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
for p in sys.argv[1:]:   # stage_1_and_2.py _get_base_optimizer_state: per group, padding removed
    sd = torch.load(p); o = sd["optimizer_state_dict"]; pads = o["group_paddings"]
    st = o["base_optimizer_state"]["state"]
    o["base_optimizer_state"] = [{k: v[:v.numel() - pads[g]] for k, v in st[g].items()} for g in sorted(st)]
    with open(p, "wb") as f:
        torch.save(sd, f)
EOF
"$MT" --from megatron-deepspeed el --output el.out >el.mt 2>&1; rc=$?
[ $rc = 0 ] && [ "$(grep -c 'left out' el.mt)" = 1 ] && grep -q 'left out .*an elastic ZeRO checkpoint' el.mt &&
	ok unreadable_optimizer_kind_converts_weights_only_saying_so || fail unreadable_optimizer_kind_converts_weights_only_saying_so "exit $rc: $(cat el.mt) $(tail -2 el.edit)"
cmp -s el.out/global_step4/rank_tp00_pp000.safetensors w16.out/global_step4/rank_tp00_pp000.safetensors &&
	ok unreadable_optimizer_kind_gives_the_weights || fail unreadable_optimizer_kind_gives_the_weights "differs from w16's"
expect_rc train_load_of_unreadable_optimizer_refused 2 "$BIN/train" "${COMMON[@]}" "${BLOOM[@]}" --load el
contains train_load_of_unreadable_optimizer_says_why "$T/err" 'elastic ZeRO.*--no-load-optim'

# --- hostile inputs: exit 2, naming the file ----------------------------------------------------------
# (WHAT FIXTURE FILE EXPECTED-PATTERN: the edit is torch's, in edit.py)
cat >edit.py <<'EOF'
import importlib.util, os, sys, torch
spec = importlib.util.spec_from_file_location("mds", os.environ["MDS"])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
what, path = sys.argv[1], sys.argv[2]
sd = torch.load(path)
if what == "short-partition":    # DP rank 0's fp32 partition of group 1 loses its last element
    g = sd["optimizer_state_dict"]["single_partition_of_fp32_groups"]; g[1] = g[1][:-1].clone()
elif what == "short-flat":       # FP16_Optimizer's flat group 2 loses its last element
    g = sd["optimizer"]["fp32_groups_flat"]; g[2] = g[2][:-1].clone()
elif what == "moment-shape":     # fp32's exp_avg of parameter 0 transposed
    s = sd["optimizer"]["state"][0]; s["exp_avg"] = s["exp_avg"].t().contiguous()
elif what == "universal-shape":  # the whole tensor one row short
    sd["param"] = sd["param"][:-1].clone()
else:
    raise SystemExit("edit.py: no edit " + what)
with open(path, "wb") as f:
    torch.save(sd, f)
EOF
bad() { local n=$1 what=$2 src=$3 file=$4 pat=$5
	rm -rf "x-$n" && cp -r "$src" "x-$n" && MDS=$MDS "$PY" edit.py "$what" "x-$n/$file" >"$n.edit" 2>&1 ||
		{ fail "$n" "could not make the edit: $(tail -2 "$n.edit")"; return; }
	expect_rc "$n" 2 "$MT" --from megatron-deepspeed "x-$n" --output "x-$n.out" --optimizer &&
		contains "${n}_names_the_file" "$T/err" "x-$n/${file//./\\.}: $pat"
	[ ! -e "x-$n.out" ] || fail "${n}_writes_nothing" "x-$n.out exists"
}
bad zero_partition_too_short_refused short-partition z16 global_step4/zero_pp_rank_0_mp_rank_01_optim_states.pt "group 1's fp32 partition has 20735 elements; the partition holds 20736"
bad flat_group_too_short_refused short-flat s16 global_step4/mp_rank_01_model_states.pt "group 2's fp32_groups_flat has"
bad fp32_moment_of_wrong_shape_refused moment-shape s32 global_step4/mp_rank_02_model_states.pt "exp_avg .*has shape"
bad universal_tensor_of_wrong_shape_refused universal-shape uni global_step4_universal/zero/3.mlp.dense_4h_to_h.weight/exp_avg.pt "param .*has shape"
expect_rc universal_without_position_embeddings_refused 2 "$MT" --from megatron-deepspeed unig --output unig.out
contains universal_without_position_embeddings_names_the_file "$T/err" 'unig/global_step4_universal/zero/tied_modules\.embed\.position_embeddings\.weight/fp32\.pt: missing \(ds_to_universal\.py leaves position embeddings out'
# a universal checkpoint whose param_shapes names a path out of zero/ is refused, nothing read there
rm -rf x-path && cp -r uni x-path && MDS=$MDS "$PY" - x-path/global_step4_universal/mp_rank_00_model_states.pt <<'EOF' >path.edit 2>&1
import collections, importlib.util, os, sys, torch
spec = importlib.util.spec_from_file_location("mds", os.environ["MDS"])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
sd = torch.load(sys.argv[1])
g = sd["param_shapes"][2]   # the no-decay group: '3.input_layernorm.weight' spelled '+3.input_...'
sd["param_shapes"][2] = collections.OrderedDict(("+" + k if k == "3.input_layernorm.weight" else k, v) for k, v in g.items())
torch.save(sd, sys.argv[1])
EOF
expect_rc universal_unsafe_name_refused 2 "$MT" --from megatron-deepspeed x-path --output x-path.out
contains universal_unsafe_name_says_so "$T/err" "mp_rank_00_model_states\.pt: param_shapes names '\+3\.input_layernorm\.weight', which is no directory name under zero/"
