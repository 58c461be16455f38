#!/usr/bin/env bash
# A model too big for the memory this job may use is refused before anything is allocated
# (exit 3, naming both numbers and what to change) instead of being killed by the OOM killer
# with an empty log.  A real memory cgroup (v1's memory controller, or v2's memory.max) is made
# under this test's own, the run moved into it.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3

# our memory cgroup: v1 (hierarchy with the memory controller) or v2
mount_of() {  # fstype [controller]: the mount point
	awk -v t="$1" -v c="${2:-}" '{ for (i = 1; i <= NF; i++) if ($i == "-") break;
		if ($(i+1) != t) next; if (c != "" && ("," $(i+3) ",") !~ ("," c ",")) next; print $5; exit }' /proc/self/mountinfo
}
CG= LIMITF= V=
if m=$(mount_of cgroup memory) && [ -n "$m" ]; then
	p=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3; exit}' /proc/self/cgroup)
	CG=$m$p/lmtk-memlimit-$$ LIMITF=memory.limit_in_bytes V=v1
elif m=$(mount_of cgroup2) && [ -n "$m" ] && grep -qw memory "$m/cgroup.controllers" 2>/dev/null; then
	p=$(awk -F: '$1 == "0" {print $3; exit}' /proc/self/cgroup)
	CG=$m$p/lmtk-memlimit-$$ LIMITF=memory.max V=v2
fi
if [ -z "$CG" ] || ! mkdir "$CG" 2>/dev/null || ! echo 1500000000 >"$CG/$LIMITF" 2>/dev/null; then
	[ -n "$CG" ] && rmdir "$CG" 2>/dev/null
	skip memory_cgroup_tests "no memory cgroup can be made here (not root, or no memory controller)"
	exit 0
fi
trap 'rmdir "$CG" 2>/dev/null' EXIT
incg() { sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$CG" "$@"; }

COMMON=(--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4
	--lr 1e-3 --data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1 --eval-iters 0
	--train-iters 2)
# 1.2B parameters (24 x 12 x 2048^2): about 18 GiB of weights, gradients and Adam in fp32
incg "$TR" "${COMMON[@]}" --num-layers 24 --hidden-size 2048 --num-attention-heads 16 >big.out 2>big.err
rc=$?
[ $rc = 3 ] && ok too_big_for_the_cgroup_refused || fail too_big_for_the_cgroup_refused "exit $rc (137: killed by the OOM killer): $(tail -2 big.err)"
contains refusal_names_both_numbers big.err "the model needs about [0-9.]+ GiB of memory, and this process may allocate 1\.[0-9]+ GiB \(cgroup $V $LIMITF"
contains refusal_says_what_to_change big.err 'sbatch --mem.*--micro-batch-size.*--checkpoint-activations'
lacks refusal_trains_nothing big.out '^ iteration '
# a model that fits runs in the same cgroup
incg "$TR" "${COMMON[@]}" --num-layers 2 --hidden-size 64 --num-attention-heads 4 >small.out 2>small.err
rc=$?
[ $rc = 0 ] && grep -q 'done at iteration 2/2' small.out && ok model_that_fits_runs_in_the_cgroup ||
	fail model_that_fits_runs_in_the_cgroup "exit $rc: $(tail -2 small.err)"
