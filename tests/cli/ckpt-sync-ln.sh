#!/usr/bin/env bash
# ckpt-sync-ln on a checkpoint that train writes: a tiny BLOOM-style model (ALiBi, embedding layer
# norm, 6 heads) trained on the real Megatron dataset, re-split to TP=2 by ckpt-merge-tp.  A clean
# split passes; layer norms perturbed on one rank - master weights and both Adam moments - are
# found, named, measured to the bit; --fix averages them (to a new directory, or in place,
# atomically) and then --check passes, train resumes; the tied word embeddings of two pipeline
# stages are compared too; what a parallel train writes passes; a damaged shard is bad input;
# --verify checks any checkpoint's files (8-bit Adam's too) against the manifest's checksums.
# --json is read by Python's json and checked against the same edits, CRC-32Cs computed here.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
SL=$BIN/ckpt-sync-ln
MT=$BIN/ckpt-merge-tp
MEG=$(tiny_dataset) || exit 3   # a dataset to train on; the reference one is not needed
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
	skip ckpt_sync_ln "python3-numpy is not installed (make deps installs it)"
	exit 0
fi
MODEL=(--num-layers 2 --hidden-size 96 --num-attention-heads 6 --position-embedding-type alibi
	--embed-layernorm --seq-length 64 --max-position-embeddings 64 --micro-batch-size 2
	--global-batch-size 4 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 2
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1 --train-iters 8)
trn() { "$BIN/train" "${MODEL[@]}" "$@"; }
no_output() { [ ! -e "$1" ] && ! ls -a "$(dirname "$1")" | grep -q "^\.$(basename "$1")\.tmp"; }

# safetensors and CRC-32C for the tests' own edits of shards (nothing but json, struct, numpy)
cat >st.py <<'EOF'
import json, struct
import numpy as np
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(data, crc=0):
    crc ^= 0xffffffff
    for b in data:
        crc = T[(crc ^ b) & 0xff] ^ (crc >> 8)
    return crc ^ 0xffffffff
def ordered(path):
    """{name: float32 array} in file order, and the metadata"""
    b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    return {k: np.frombuffer(b, "<f4", int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0])
            .reshape(v["shape"]).copy() for k, v in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0])}, meta
def resave(step, shard, tensors, meta):
    """rewrite a shard of a checkpoint and its manifest entry"""
    h, pos, blobs = {"__metadata__": meta}, 0, []
    for k, a in tensors.items():
        raw = np.ascontiguousarray(a, "<f4").tobytes()
        h[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [pos, pos + len(raw)]}
        pos += len(raw); blobs.append(raw)
    hb = json.dumps(h, sort_keys=True, separators=(",", ":")).encode(); hb += b" " * (-len(hb) % 8)
    data = b"".join(blobs)
    open(f"{step}/{shard}", "wb").write(struct.pack("<Q", len(hb)) + hb + data)
    m = json.load(open(f"{step}/manifest.json"))
    m["files"][shard] = {"bytes": len(data), "crc32c": "%08x" % crc32c(data)}
    open(f"{step}/manifest.json", "w").write(json.dumps(m, indent=1) + "\n")
EOF
export PYTHONPATH=$T

trn --exit-interval 6 --save c --save-interval 3 >train.out 2>&1 || { fail train_writes_a_checkpoint "$(tail -3 train.out)"; exit 0; }
"$MT" --input c --output c2 --target-tp 2 2>split.err || { fail resplit_to_tp2 "$(cat split.err)"; exit 0; }
cp -r c/global_step3 c2/global_step3   # an older step beside the newest, for --in-place

# --- a fresh split: every copy equal; the table lists every replicated tensor and buffer ---
expect_rc clean_tp2_checkpoint_passes 0 "$SL" c2
# embedding LN 2 + per layer LN1 2, dense bias, LN2 2, 4h->h bias = 6, x 2 layers + final LN 2: 16 tensors x 3 buffers
n=$(grep -cE '^[a-z_.0-9]+ +(weight|exp_avg|exp_avg_sq) +[0-9.]+e[-+][0-9]+ +-$' "$T/out")
[ "$n" = 48 ] && ok table_has_every_replicated_tensor_and_buffer || fail table_has_every_replicated_tensor_and_buffer "$n rows: $(head -5 "$T/out")"
contains table_header "$T/out" '^tensor +kind +max abs diff +ranks that differ$'
contains clean_summary "$T/out" 'c2/global_step6: TP=2 PP=1: all 48 replicated tensor buffers are equal across ranks \(bit-exact\)$'
lacks no_split_tensors_in_the_table "$T/out" 'query_key_value|dense_h_to_4h|word_embeddings|dense\.weight'
expect_rc json_clean_tp2_exits_0 0 "$SL" c2 --json
json_ok json_clean_lists_every_buffer_equal "$T/out" "
assert (j['dir'], j['format'], j['tp'], j['pp'], j['ok'], j['buffers'], j['differ'], j['largest']) == ('c2/global_step6', 'lmtk', 2, 1, True, 48, 0, None), j
assert len(j['tensors']) == 48 and all(t['max_abs_diff'] == 0 and t['ranks_that_differ'] == [] and t['copies'] == 2 for t in j['tensors'])
assert sorted({t['kind'] for t in j['tensors']}) == ['exp_avg', 'exp_avg_sq', 'weight']
assert not any(x in t['tensor'] for t in j['tensors'] for x in ('query_key_value', 'dense_h_to_4h', 'word_embeddings'))
"
expect_rc tp1_has_nothing_to_compare 0 "$SL" c
contains tp1_says_so "$T/out" 'TP=1 PP=1: no tensor has two copies; nothing to compare'
expect_rc json_tp1_exits_0 0 "$SL" --json c
json_ok json_tp1_has_nothing_to_compare "$T/out" "assert (j['tp'], j['ok'], j['buffers'], j['tensors']) == (1, True, 0, []), j"
# progress (LMTK_PROGRESS=1 into a file): verifying the shards' data sections (the manifest's
# bytes), comparing every copy (48 buffers of 96 floats on 2 ranks: 36 KiB); each ends at 100%,
# with the rate and ETA 0:00:00; stdout is what it is without it
manifest_bytes() { binsize "$("$PY" -c 'import json, sys; print(sum(f["bytes"] for f in json.load(open(sys.argv[1]))["files"].values()))' "$1/manifest.json")"; }
"$SL" c2 >clean.out 2>/dev/null
LMTK_PROGRESS=1 expect_rc check_with_progress_exits_0 0 "$SL" c2
check check_with_progress_same_stdout cmp "$T/out" clean.out
mb=$(manifest_bytes c2/global_step6)
contains progress_verifying_ends_at_the_manifests_bytes "$T/err" "^ckpt-sync-ln: verifying $mb of $mb \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
cmpb=$(binsize $((48 * 96 * 2 * 4)))
contains progress_comparing_ends_at_every_copy "$T/err" "^ckpt-sync-ln: comparing $cmpb of $cmpb \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
LMTK_PROGRESS=1 expect_rc verify_with_progress_exits_0 0 "$SL" --verify c2
contains progress_verify_ends_at_the_manifests_bytes "$T/err" "^ckpt-sync-ln: verifying $mb of $mb \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"

# --- perturb the layer norms of TP rank 1: master weights, exp_avg, exp_avg_sq ---
cp -r c2 p
"$PY" - p/global_step6 >want.txt <<'EOF'
import sys, st
import numpy as np
step, sh = sys.argv[1], "rank_tp01_pp000.safetensors"
t, meta = st.ordered(f"{step}/{sh}")
edits = (("layers.0.input_layernorm.weight", "weight", [0, 7, 11], 2.0 ** -10),
         ("exp_avg.layers.1.post_attention_layernorm.bias", "exp_avg", [3], 3e-4),
         ("exp_avg_sq.embed_layernorm.weight", "exp_avg_sq", [5, 6], 1e-7))
for k, kind, idx, d in edits:
    x = t[k].copy(); x[idx] += np.float32(d)
    diff = np.abs(x.astype(np.float64) - t[k].astype(np.float64)).max()   # the float32 truth
    t[k] = x
    print(k.split(".", 1)[1] if kind != "weight" else k, kind, repr(float(diff)))
st.resave(step, sh, t, meta)
EOF
expect_rc check_finds_the_drift 1 "$SL" p
cp "$T/out" p.table
"$PY" - p.table want.txt <<'EOF' >p.cmp 2>&1 && ok table_names_exactly_the_perturbed_tensors_with_their_exact_diffs || fail table_names_exactly_the_perturbed_tensors_with_their_exact_diffs "$(tail -3 p.cmp)"
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.split() and l.split()[1] in ("weight", "exp_avg", "exp_avg_sq")]
want = {(n, k): float(d) for n, k, d in (l.split() for l in open(sys.argv[2]))}
differ = {(r[0], r[1]): (float(r[2]), r[3]) for r in rows if r[3] != "-"}
assert set(differ) == set(want), (sorted(differ), sorted(want))
for key, d in want.items():
    got, ranks = differ[key]
    assert ranks == "tp01", (key, ranks)
    assert abs(got - d) <= 1e-8 * d, (key, got, d)      # 9 significant digits: the float diff itself
assert all(float(r[2]) == 0 for r in rows if (r[0], r[1]) not in want)
print("ok", want)
EOF
contains summary_counts_and_names_the_largest "$T/out" 'p/global_step6: TP=2 PP=1: 3 of 48 replicated tensor buffers differ across ranks \(bit-exact\); the largest difference is 9\.76562500e-04, layers\.0\.input_layernorm\.weight weight$'
contains check_says_what_to_do "$T/err" '3 replicated tensor buffers differ across ranks; repair with --fix'
expect_rc json_check_finds_the_drift_exits_1 1 "$SL" p --json
json_ok json_names_exactly_the_perturbed_tensors "$T/out" "
want = {(n, k): float(d) for n, k, d in (l.split() for l in open(sys.argv[3]))}
differ = {(t['tensor'], t['kind']): t for t in j['tensors'] if t['differ_count']}
assert set(differ) == set(want), (sorted(differ), sorted(want))
for key, d in want.items():
    assert differ[key]['ranks_that_differ'] == ['tp01'] and differ[key]['max_abs_diff'] == d, (key, differ[key], d)
assert all(t['max_abs_diff'] == 0 for t in j['tensors'] if (t['tensor'], t['kind']) not in want)
big = max(want, key=want.get)
assert j['largest'] == {'tensor': big[0], 'kind': big[1], 'max_abs_diff': want[big]}, j['largest']
assert (j['dir'], j['ok'], j['buffers'], j['differ'], j['tolerance']) == ('p/global_step6', False, 48, 3, 0), j
" want.txt
contains json_check_says_what_to_do_on_stderr "$T/err" '3 replicated tensor buffers differ across ranks; repair with --fix'
expect_rc json_tolerance_above_the_drift_exits_0 0 "$SL" p --tolerance 0.001 --json
json_ok json_tolerance_above_the_drift_is_ok "$T/out" "assert (j['ok'], j['differ'], j['tolerance']) == (True, 0, 0.001), j"
expect_rc json_is_not_for_fix 2 "$SL" p --fix --output x --json
expect_rc tolerance_above_the_drift_passes 0 "$SL" p --tolerance 0.001
expect_rc tolerance_below_the_drift_fails 1 "$SL" p --tolerance 5e-8
n=$(grep -c ' tp01$' "$T/out")
[ "$n" = 3 ] && ok tolerance_counts_only_larger_diffs || fail tolerance_counts_only_larger_diffs "$n rows"
expect_rc merge_refuses_the_drifted_checkpoint 1 "$MT" --input p --output p.merged

# --- --fix --output: the mean of the copies, everything else bit for bit ---
LMTK_PROGRESS=1 expect_rc fix_to_output_exits_0 0 "$SL" p --fix --output f
fb=$(manifest_bytes f/global_step6)
contains fix_progress_writing_ends_at_the_outputs_bytes "$T/err" "^ckpt-sync-ln: writing $fb of $fb \(100%\), [0-9.]+ (B|KiB|MiB|GiB)/s, ETA 0:00:00\$"
expect_rc fixed_checkpoint_passes_check 0 "$SL" f
"$PY" - p/global_step6 f/global_step6 <<'EOF' >f.cmp 2>&1 && ok fix_writes_the_mean_to_every_rank_and_copies_the_rest || fail fix_writes_the_mean_to_every_rank_and_copies_the_rest "$(tail -3 f.cmp)"
import sys, json, st
import numpy as np
p, f = sys.argv[1:]
a0, _ = st.ordered(p + "/rank_tp00_pp000.safetensors"); a1, _ = st.ordered(p + "/rank_tp01_pp000.safetensors")
b0, _ = st.ordered(f + "/rank_tp00_pp000.safetensors"); b1, _ = st.ordered(f + "/rank_tp01_pp000.safetensors")
assert list(a0) == list(b0) and list(a1) == list(b1)   # same tensors, same order
changed = []
split = ("query_key_value", "dense_h_to_4h", "word_embeddings", "dense.weight", "dense_4h_to_h.weight")
for k in a0:
    if not any(x in k for x in split) and not (a0[k] == a1[k]).all():  # a drifted replicated tensor
        mean = ((a0[k].astype(np.float64) + a1[k].astype(np.float64)) / 2).astype(np.float32)
        assert (b0[k] == mean).all() and (b1[k] == mean).all(), k
        changed.append(k)
    else:
        assert (b0[k] == a0[k]).all() and (b1[k] == a1[k]).all(), k
assert sorted(changed) == sorted(["layers.0.input_layernorm.weight", "exp_avg.layers.1.post_attention_layernorm.bias",
                                  "exp_avg_sq.embed_layernorm.weight"]), changed
m = json.load(open(f + "/manifest.json"))
assert m["layout"] == {"tp": 2, "pp": 1, "dp": 1} and open(f + "/../latest").read() == "global_step6\n"
print("ok")
EOF
"$MT" --input f --output f1 2>f1.err && trn --load f1 >f1.train 2>&1 &&
	grep -q 'resumed from f1/global_step6: iteration 6' f1.train && ok train_resumes_from_the_repaired_checkpoint ||
	fail train_resumes_from_the_repaired_checkpoint "$(cat f1.err; grep train: f1.train | tail -2)"
expect_rc fix_needs_an_output 2 "$SL" p --fix
expect_rc fix_refuses_an_existing_output 2 "$SL" p --fix --output f

# --- --fix --in-place: swapped atomically, latest untouched, nothing left over ---
cp -r p q
cp q/latest latest.before
expect_rc fix_in_place_exits_0 0 "$SL" q --fix --in-place
expect_rc in_place_fixed_passes_check 0 "$SL" q
cmp -s q/global_step6/rank_tp01_pp000.safetensors f/global_step6/rank_tp01_pp000.safetensors &&
	cmp -s q/global_step6/manifest.json f/global_step6/manifest.json && ok in_place_result_equals_the_output_one ||
	fail in_place_result_equals_the_output_one "differs"
cmp -s q/latest latest.before && cmp -s q/global_step3/rank_tp00_pp000.safetensors c2/global_step3/rank_tp00_pp000.safetensors &&
	ok in_place_leaves_latest_and_other_steps_alone || fail in_place_leaves_latest_and_other_steps_alone "$(cat q/latest)"
ls -a q | grep -q tmp && fail in_place_leaves_no_temporaries "$(ls -a q)" || ok in_place_leaves_no_temporaries
expect_rc in_place_with_nothing_to_fix_exits_0 0 "$SL" q --fix --in-place
contains in_place_with_nothing_to_fix_says_so "$T/err" 'nothing to repair; left as it was'
expect_rc check_with_output_is_usage 2 "$SL" p --output x
expect_rc no_dir_is_usage 2 "$SL" --check
expect_rc two_dirs_is_usage 2 "$SL" p q

# --- pipeline stages: the tied word embeddings of the first and last stage are compared ---
"$MT" --input c2 --output pp --target-tp 2 --target-pp 2 2>pp.err || fail resplit_to_pp2 "$(cat pp.err)"
want=$("$PY" - pp/global_step6 <<'EOF'
import sys, st
import numpy as np
step, sh = sys.argv[1], "rank_tp00_pp001.safetensors"
t, meta = st.ordered(f"{step}/{sh}")
x = t["word_embeddings.weight"].copy(); x[17, 3] += np.float32(0.25)
print("%.8e" % abs(float(x[17, 3]) - float(t["word_embeddings.weight"][17, 3])))
t["word_embeddings.weight"] = x
st.resave(step, sh, t, meta)
EOF
)
expect_rc pp2_tied_embeddings_drift_is_found 1 "$SL" pp
contains pp2_names_the_stage "$T/out" "^word_embeddings\\.weight +weight +$want +tp00/pp001\$"
expect_rc json_pp2_exits_1 1 "$SL" pp --json
json_ok json_pp2_names_the_stage "$T/out" "
d = [(t['tensor'], t['kind'], t['ranks_that_differ']) for t in j['tensors'] if t['differ_count']]
assert d == [('word_embeddings.weight', 'weight', ['tp00/pp001'])] and j['pp'] == 2, d
assert '%.8e' % j['largest']['max_abs_diff'] == sys.argv[3], j['largest']
" "$want"

# --- what a parallel train writes (mpirun, where Open MPI is installed): nothing to repair ---
# train averages replicated gradients over TP and sums the tied embeddings' over the first and
# last stage, so its TP=2 x PP=2 checkpoint after 6 steps is bit-identical across its copies
if command -v mpirun >/dev/null && [ -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
	mpirun --oversubscribe -np 4 "$BIN/train" "${MODEL[@]}" --num-layers 4 --tensor-model-parallel-size 2 \
		--pipeline-model-parallel-size 2 --exit-interval 6 --save par --save-interval 6 >par.train 2>&1 ||
		fail parallel_train_writes_a_checkpoint "$(grep -v '^ iter' par.train | tail -3)"
	expect_rc parallel_trains_checkpoint_has_equal_copies 0 "$SL" par
	contains parallel_check_covers_tp_and_the_tied_embeddings "$T/out" '^word_embeddings\.weight +exp_avg_sq +0\.00000000e\+00 +-$'
else
	skip parallel_trains_checkpoint_has_equal_copies "no mpirun or no build/lib/lmtk/train-mpi.so (Open MPI: make deps installs it)"
fi

# --- damaged input ---
cp -r c2 d
"$PY" -c "
p = 'd/global_step6/rank_tp00_pp000.safetensors'
b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x01; open(p, 'wb').write(b)"
expect_rc bit_flip_is_bad_input 2 "$SL" d &&
	contains bit_flip_names_the_shard "$T/err" 'd/global_step6/rank_tp00_pp000\.safetensors: checksum mismatch'
expect_rc fix_of_a_damaged_checkpoint_writes_nothing 2 "$SL" d --fix --output d.out
no_output d.out && ok damaged_fix_leaves_nothing || fail damaged_fix_leaves_nothing "$(ls -a)"
expect_rc no_such_checkpoint 2 "$SL" nothing-here

# --- --verify: every file against the manifest's size and CRC-32C, nothing else ---
expect_rc verify_a_good_checkpoint 0 "$SL" --verify c2
contains verify_lists_every_file "$T/out" '^rank_tp01_pp000\.safetensors +[0-9]+ +[0-9a-f]{8}  ok$'
contains verify_summary "$T/out" '^c2/global_step6: every file matches the manifest \(2 files, [0-9]+ bytes, CRC-32C\) in '
expect_rc verify_a_bit_flip_is_a_finding 1 "$SL" --verify d
contains verify_names_the_bad_file "$T/out" '^rank_tp00_pp000\.safetensors +[0-9]+ +[0-9a-f]{8}  BAD$'
contains verify_says_why "$T/err" 'd/global_step6/rank_tp00_pp000\.safetensors: checksum mismatch: CRC-32C [0-9a-f]{8} of [0-9]+ bytes, the manifest says'
expect_rc json_verify_bit_flip_exits_1 1 "$SL" --verify d --json
json_ok json_verify_names_the_flipped_file "$T/out" "
import json as J, struct, st
bad = [f for f in j['files'] if not f['ok']]
assert [f['name'] for f in bad] == ['rank_tp00_pp000.safetensors'], j['files']
assert (j['ok'], j['bad_files'], j['file_count'], j['dir']) == (False, 1, 2, 'd/global_step6'), j
m = J.load(open('d/global_step6/manifest.json'))['files']
b = open('d/global_step6/rank_tp00_pp000.safetensors', 'rb').read()
data = b[8 + struct.unpack('<Q', b[:8])[0]:]
assert bad[0]['crc32c'] == '%08x' % st.crc32c(data) != m[bad[0]['name']]['crc32c'], (bad[0], m)
assert bad[0]['bytes'] == len(data) and 'checksum mismatch' in bad[0]['problem'], bad[0]
good = [f for f in j['files'] if f['ok']]
assert good and all((f['crc32c'], f['bytes'], f['problem']) == (m[f['name']]['crc32c'], m[f['name']]['bytes'], None) for f in good), good
assert j['bytes'] == sum(f['bytes'] for f in j['files'])
"
contains json_verify_warns_on_stderr "$T/err" 'd/global_step6/rank_tp00_pp000\.safetensors: checksum mismatch'
expect_rc json_verify_good_exits_0 0 "$SL" --verify c2 --json
json_ok json_verify_good_is_ok "$T/out" "
assert (j['ok'], j['bad_files'], j['file_count'], len(j['files'])) == (True, 0, 2, 2) and all(f['ok'] for f in j['files']), j
"
cp -r c2 v && truncate -s 100 v/global_step6/rank_tp01_pp000.safetensors
expect_rc verify_a_truncated_file_is_a_finding 1 "$SL" --verify v/global_step6
contains verify_truncated_says_so "$T/err" 'v/global_step6/rank_tp01_pp000\.safetensors: truncated or not a safetensors file'
expect_rc json_verify_truncated_exits_1 1 "$SL" --verify v/global_step6 --json
json_ok json_verify_names_the_truncated_file "$T/out" "
assert [(f['name'], f['ok']) for f in j['files']] == [('rank_tp00_pp000.safetensors', True), ('rank_tp01_pp000.safetensors', False)], j['files']
assert 'truncated or not a safetensors file' in j['files'][1]['problem'], j['files'][1]
"
rm v/global_step6/rank_tp01_pp000.safetensors
expect_rc verify_a_missing_file_is_a_finding 1 "$SL" --verify v
: >v/global_step6/manifest.json
expect_rc verify_without_a_manifest_is_bad_input 2 "$SL" --verify v/global_step6
expect_rc json_verify_without_a_manifest_exits_2 2 "$SL" --verify v/global_step6 --json
check json_verify_without_a_manifest_prints_nothing [ ! -s "$T/out" ]
expect_rc verify_is_not_with_tolerance 2 "$SL" --verify c2 --tolerance 1e-3
expect_rc verify_is_not_with_fix 2 "$SL" --verify --fix --in-place c2
# any lmtk checkpoint: 8-bit Adam's, which --check refuses, verifies
trn --exit-interval 2 --save b8 --save-interval 2 --use-bnb-optimizer >b8.out 2>&1
grep -q '"kind": "bnb-adam8bit"' b8/global_step2/manifest.json &&
	expect_rc verify_an_8bit_adam_checkpoint 0 "$SL" --verify b8 ||
	fail verify_an_8bit_adam_checkpoint "no 8-bit Adam checkpoint: $(tail -2 b8.out)"

# --- --help and the man page document the same options ---
"$SL" --help >help.txt 2>&1
missing=
for o in $(grep -oE '^ +--[a-z-]+' help.txt | tr -d ' '); do
	grep -q -- "$(echo "$o" | sed 's/-/\\\\-/g')" "$TOP/man/man1/ckpt-sync-ln.1" || missing="$missing $o"
done
[ -z "$missing" ] && ok help_options_are_in_the_man_page || fail help_options_are_in_the_man_page "missing:$missing"
rm -rf "$T"
