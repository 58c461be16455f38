#!/usr/bin/env bash
# train --codecarbon-dir (the 13B recipe): DIR/emissions-RRR.csv with CodeCarbon's columns and
# units, a row per log interval and one at exit, cumulative; the CPU by RAPL (a powercap tree
# whose package counter a writer advances at a known power, with a wrap-around and a sub-domain
# that must not be counted) or CodeCarbon's TDP rule; RAM by its 3 W per 8 GB; emissions by
# --carbon-intensity; TensorBoard scalars; a resumed run appends; an unwritable DIR is an error.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
PY=/usr/bin/python3
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
MODEL=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64
	--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--eval-iters 0)

# CodeCarbon's EmissionsData fields, in order (codecarbon/output.py), and lmtk's one more
COLS='timestamp,project_name,run_id,duration,emissions,emissions_rate,cpu_power,gpu_power,ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,country_name,country_iso_code,region,cloud_provider,cloud_region,os,python_version,cpu_count,cpu_model,gpu_count,gpu_model,longitude,latitude,ram_total_size,tracking_mode,on_cloud,cpu_energy_source'

# --- the TDP rule (no RAPL): 85 W x 0.5, RAM 3 W per 8 GB -------------------------------------
LMTK_POWERCAP_DIR=$T/none "$TR" "${MODEL[@]}" --train-iters 10 --log-interval 5 \
	--codecarbon-dir cc --carbon-intensity 400 --tensorboard-dir tb >a.out 2>a.err
rc=$?
[ $rc = 0 ] && ok tdp_run_exits_0 || fail tdp_run_exits_0 "exit $rc: $(tail -2 a.err)"
[ "$(head -1 cc/emissions-000.csv)" = "$COLS" ] && ok header_is_codecarbons || fail header_is_codecarbons "$(head -1 cc/emissions-000.csv)"
contains startup_line_says_tdp a.out '^train: --codecarbon-dir cc: .*CPU by TDP 85 W x 0.5'
check_rows() {  # check_rows FILE SOURCE WATTS ROWS: CodeCarbon's arithmetic on every row
	"$PY" - "$@" <<'PYEOF'
import csv, sys
path, source, watts, nrows = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
rows = list(csv.DictReader(open(path)))
assert len(rows) == nrows, (len(rows), nrows)
prev = 0.0
for r in rows:
    f = {k: float(r[k]) for k in ("duration", "emissions", "cpu_power", "ram_power", "cpu_energy",
                                  "gpu_energy", "ram_energy", "energy_consumed", "ram_total_size")}
    assert r["cpu_energy_source"] == source and r["tracking_mode"] == "machine", r
    assert f["duration"] > prev; prev = f["duration"]
    total = f["cpu_energy"] + f["gpu_energy"] + f["ram_energy"]
    assert abs(f["energy_consumed"] - total) <= 1e-6 * total, r
    assert abs(f["emissions"] - total * 400 / 1000) <= 1e-6 * f["emissions"], r
    assert abs(f["ram_power"] - f["ram_total_size"] * 3 / 8) <= 1e-3 * f["ram_power"], r
    assert abs(f["ram_energy"] - f["ram_power"] * f["duration"] / 3.6e6) <= 0.01 * f["ram_energy"], r
    # the CPU: the known power over the whole run (RAPL: within the writer's jitter)
    tol = 1e-3 if source == "tdp" else 0.25
    assert abs(f["cpu_energy"] * 3.6e6 / f["duration"] - watts) <= tol * watts, (r, watts)
PYEOF
}
check_rows cc/emissions-000.csv tdp 42.5 3 2>rows.err && ok tdp_rows_follow_codecarbons_rules || fail tdp_rows_follow_codecarbons_rules "$(tail -1 rows.err)"
if "$PY" "$TOP/tests/ref/tfevents-read.py" tb >tb.txt 2>/dev/null; then
	n=$(grep -c '^energy/energy consumed (kWh)	' tb.txt)
	[ "$n" = 3 ] && ok tensorboard_energy_scalars || fail tensorboard_energy_scalars "$n energy scalars"
else
	fail tensorboard_energy_scalars "the reader failed"
fi
# a resumed run appends its rows, with its own run id, under the one header
"$TR" "${MODEL[@]}" --train-iters 5 --log-interval 5 --codecarbon-dir cc --carbon-intensity 400 >b.out 2>&1
[ "$(grep -c '^timestamp,' cc/emissions-000.csv)" = 1 ] && [ "$(wc -l <cc/emissions-000.csv)" = 6 ] &&
	[ "$(cut -d, -f3 cc/emissions-000.csv | sort -u | wc -l)" = 3 ] && ok second_run_appends ||
	fail second_run_appends "$(cut -d, -f1-4 cc/emissions-000.csv)"

# --- RAPL: package 0 advanced at 20 W, wrapping at 40 J - every 2 s, more than once between
# the two rows (the run's 40 iterations take several seconds; a tenth of a second each): train must read it more often than a row (every iteration) so that it never wraps
# twice unseen; its sub-domain must not count ---------------------------------------------------
mkdir -p rapl/intel-rapl:0/intel-rapl:0:0 rapl/intel-rapl:0:0
echo 40000000 >rapl/intel-rapl:0/max_energy_range_uj
echo 38000000 >rapl/intel-rapl:0/energy_uj
echo 30000000 >rapl/intel-rapl:0:0/max_energy_range_uj
echo 0 >rapl/intel-rapl:0:0/energy_uj
"$PY" - rapl <<'PYEOF' &
import os, sys, time
root = sys.argv[1]; t0 = time.time()
def put(path, v):
    tmp = path + ".tmp"
    with open(tmp, "w") as f: f.write("%d\n" % v)
    os.replace(tmp, path)
while os.path.exists(root + "/run"):
    el = time.time() - t0
    put(root + "/intel-rapl:0/energy_uj", int(38e6 + el * 20e6) % 40000000)   # 20 W
    put(root + "/intel-rapl:0:0/energy_uj", int(el * 500e6) % 30000000)       # not a package
    time.sleep(0.005)
PYEOF
WRITER=$!
touch rapl/run
sleep 0.3
LMTK_POWERCAP_DIR=$T/rapl "$TR" "${MODEL[@]}" --train-iters 40 --log-interval 40 \
	--codecarbon-dir rc --carbon-intensity 400 >r.out 2>r.err
rc=$?
rm -f rapl/run
wait $WRITER
[ $rc = 0 ] && ok rapl_run_exits_0 || fail rapl_run_exits_0 "exit $rc: $(tail -2 r.err)"
contains startup_line_says_rapl r.out 'CPU by RAPL \(1 package\)'
check_rows rc/emissions-000.csv rapl 20 2 2>rrows.err && ok rapl_energy_is_the_package_counters || fail rapl_energy_is_the_package_counters "$(tail -1 rrows.err)"

# --- errors ---------------------------------------------------------------------------------------
echo x >notadir
expect_rc unwritable_dir_exits_3 3 "$TR" "${MODEL[@]}" --train-iters 2 --codecarbon-dir notadir/cc
contains unwritable_dir_named "$T/err" 'notadir/cc'
expect_rc bad_intensity_exits_2 2 "$TR" "${MODEL[@]}" --train-iters 2 --codecarbon-dir cc --carbon-intensity -1
rm -rf "$T"
