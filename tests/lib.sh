# Sourced by every tests/cli/*.sh.  A test prints one protocol line per case:
#   "ok NAME", "FAIL NAME: why" or "skip NAME: why"; tests/run.sh counts them.
# Fixtures started by run.sh are described by the environment: SLURM_CONF (local cluster),
# LMTK_SMTP_PORT / LMTK_SMTP_DIR (SMTP sink), LMTK_GIT_URL / LMTK_GIT_DIR / LMTK_GIT_TOKEN (git
# smart-HTTP + LFS server, tests/fixtures/git-server.sh), LMTK_TMP (a scratch dir removed at the end).
set -u
TOP=${TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=$TOP/bin
T=$(mktemp -d "${LMTK_TMP:-/tmp}/t.XXXXXX")
# idle OpenMP threads sleep rather than spin, idle MPI ranks yield: tests share the cores (see
# tests/run.sh)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

ok()   { echo "ok $1"; }
fail() { echo "FAIL $1: ${2:-}"; }
skip() { echo "skip $1: $2"; }

# check NAME COND...: ok when the command succeeds
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n" "command failed: $*"; fi; }

# expect_rc NAME RC CMD...: runs CMD with stdout in $T/out, stderr in $T/err; ok if exit == RC
expect_rc() {
  local n=$1 want=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"; local rc=$?
  if [ "$rc" = "$want" ]; then ok "$n"; return 0; fi
  fail "$n" "exit $rc, wanted $want; stderr: $(head -c 400 "$T/err")"; return 1
}

# contains NAME FILE PATTERN (grep -E)
contains()  { if grep -Eq -- "$3" "$2"; then ok "$1"; else fail "$1" "no /$3/ in $2: $(head -c 400 "$2")"; fi; }
lacks()     { if grep -Eq -- "$3" "$2"; then fail "$1" "unexpected /$3/ in $2"; else ok "$1"; fi; }

# binsize BYTES: a size as the progress lines and summaries print it (binary units, two decimals:
# "1023 B", "8.21 MiB"), with its "." escaped for a grep -E pattern
binsize() { awk -v b="$1" 'BEGIN { split("B KiB MiB GiB TiB", u, " "); i = 1
	while (b >= 1024 && i < 5) { b /= 1024; i++ }
	if (i == 1) printf "%d B", b; else printf "%.2f %s", b, u[i] }' | sed 's/\./\\./'; }

# wait_for SECONDS CMD...: poll until CMD succeeds
wait_for() { local end=$((SECONDS + $1)); shift; until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done; }

# Mails received by the SMTP sink, one file each (*.eml)
mail_count() { ls "$LMTK_SMTP_DIR"/*.eml 2>/dev/null | wc -l; }
mail_clear() { rm -f "$LMTK_SMTP_DIR"/*.eml; }
first_mail() { ls "$LMTK_SMTP_DIR"/*.eml 2>/dev/null | head -1; }
last_mail()  { ls "$LMTK_SMTP_DIR"/*.eml 2>/dev/null | tail -1; }

# For a test of what a run does through the CUDA executor (host syncs, bits, collectives, losses),
# not of one kernel: the executor's race shadow off (LMTK_CUDA_EXEC_SHADOW=0), which halves its CPU
# time.  Every kernel runs under the shadow, on awkward shapes and the whole model, in
# tests/cli/train-cuda.sh (train_cudaops, and train_model against PyTorch), which keeps it on.
cuda_exec_unshadowed() { export LMTK_CUDA_EXEC_SHADOW=0; }

# Megatron datasets.  MEG_REF: the reference dataset Megatron itself wrote (CI's
# ../shared/data/megatron, or $LMTK_MEGATRON_DIR); empty when it is not there, and the tests that
# compare against it then skip, saying so.  tiny_dataset: a dataset of the same shape and file
# names that the project makes itself (tests/ref/tiny-dataset.sh: GPT-2's first 5000 tokens, the
# test corpus), for the tests that need some dataset to train on; built once per `make check`,
# prints its directory.
MEG_REF=${LMTK_MEGATRON_DIR:-$TOP/../shared/data/megatron}
[ -f "$MEG_REF/meg-gpt2-openwebtext_text_document.idx" ] || MEG_REF=
tiny_dataset() {
	local d=${LMTK_TMP:-/tmp/lmtk-tests}/tiny-dataset
	mkdir -p "${d%/*}" || return 3
	bash "$TOP/tests/ref/tiny-dataset.sh" "$d" >"$d.log" 2>&1 ||
		{ echo "tiny_dataset: could not build it: $(tail -3 "$d.log")" >&2; return 3; }
	echo "$d"
}

# hf_encode ARGS... <INPUT >OUTPUT: the HF tokenizers peer (tests/ref/hf-encode.js, npm
# `tokenizers`) on INPUT.  Its output is kept under $LMTK_CACHE/hf, named by the hash of all it
# depends on - the input's bytes, the ARGS with each file among them replaced by its content's
# hash, hf-encode.js and the tokenizers package's version - so the peer, the slowest part of the
# tokenizer tests, runs again only when one of them changes.  Entries unread for 30 days go.
hf_encode() {
	local cache=${LMTK_CACHE:-/var/tmp/lmtk-cache}/hf nm=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}
	local key a tmp
	mkdir -p "$cache" || return 3
	tmp=$(mktemp "$cache/.in.XXXXXX") || return 3
	cat >"$tmp"
	key=$({ sha256sum <"$tmp"; sha256sum <"$TOP/tests/ref/hf-encode.js"; cat "$nm/tokenizers/package.json" 2>/dev/null
		for a in "$@"; do if [ -f "$a" ]; then echo "file $(sha256sum <"$a")"; else echo "arg $a"; fi; done; } |
		sha256sum | cut -c1-40)
	if [ ! -f "$cache/$key" ]; then
		node "$TOP/tests/ref/hf-encode.js" "$@" <"$tmp" >"$cache/.$key.$$" && mv -f "$cache/.$key.$$" "$cache/$key" ||
			{ rm -f "$tmp" "$cache/.$key.$$"; return 1; }
	fi
	rm -f "$tmp"
	find "$cache" -maxdepth 1 -type f -atime +30 -delete 2>/dev/null
	cat "$cache/$key"
}

# launch_ranks NAME NP ENVFN CMD...: CMD as NP processes at once, rank r's environment the words
# `ENVFN r NP` prints plus RANKS_ENV (words), its output in NAME.r; returns the largest exit
# status.  srun_ranks below is the srun step's; a test adds its own launcher's (torchrun's).
launch_ranks() {
	local name=$1 np=$2 envfn=$3 r rc=0 st pids=()
	shift 3
	for ((r = 0; r < np; r++)); do
		env $("$envfn" "$r" "$np") ${RANKS_ENV:-} "$@" >"$name.$r" 2>&1 &
		pids+=($!)
	done
	for r in "${pids[@]}"; do
		st=0
		wait "$r" || st=$?
		[ $st -gt $rc ] && rc=$st
	done
	return $rc
}

# srun_ranks NAME NP CMD...: CMD as NP tasks of one srun step (SLURM_PROCID, SLURM_LOCALID,
# SLURM_NTASKS, a fresh SLURM_JOB_ID each call), all at once, rank r's output in NAME.r; returns
# the largest exit status.  RANKS_ENV (words) is added to every rank's environment.
RANKS_JOB=${RANKS_JOB:-100}
srun_env() {
	echo "SLURM_JOB_ID=$RANKS_JOB SLURM_STEP_ID=0 SLURM_PROCID=$1 SLURM_LOCALID=$1" \
		"SLURM_NTASKS=$2 SLURM_STEP_NUM_TASKS=$2"
}
srun_ranks() {
	local name=$1 np=$2
	shift 2
	RANKS_JOB=$((RANKS_JOB + 1))
	launch_ranks "$name" "$np" srun_env "$@"
}

# json_ok NAME FILE PYTHON [ARG...]: ok when FILE (a program's stdout under --json) is exactly one
# JSON object, nothing before or after it, and the PYTHON statements about it (asserts on j, the
# object; the ARGs are sys.argv[3:]) hold.  Python's json module is the independent reader.
json_ok() {
	local n=$1 f=$2 code=$3 why
	shift 3
	if why=$(/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert isinstance(j, dict), "not one object: %s" % type(j).__name__
exec(sys.argv[2])' "$f" "$code" "$@" 2>&1); then ok "$n"
	else fail "$n" "$(printf '%s' "$why" | tail -2 | tr '\n' ' ') [stdout: $(head -c 200 "$f" | tr '\n' ' ')]"; fi
}
