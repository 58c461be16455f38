#!/usr/bin/env bash
# slurm/preprocess.slurm on the local cluster: a 4-task job array tokenizes contiguous byte
# ranges of Megatron's test corpus and a job it submits merges them; the result must be
# Megatron's own .bin/.idx byte for byte (the dataset Megatron wrote, where this checkout has it
# beside it: CI's ../shared; else the project's own dataset, built by one tokenize | mkindex),
# with the shards gone.  A corrupt line fails its task, and then no merge runs.
. "$(dirname "$0")/../lib.sh"
if ! sinfo >/dev/null 2>&1; then
	fail slurm_cluster_available "sinfo fails with SLURM_CONF=${SLURM_CONF:-unset}"
	exit 1
fi
if [ -n "$MEG_REF" ]; then MEG=$MEG_REF; else
	skip preprocess_megatron_byte_identity "the Megatron-written dataset is not here (../shared/data/megatron, or set LMTK_MEGATRON_DIR): the job array is checked against one tokenize | mkindex instead"
	MEG=$(tiny_dataset) || exit 3
fi
P=pp$$
gone() { [ -z "$(squeue --noheader --name="$1,$1-merge" 2>/dev/null)" ]; }
export LMTK=$TOP VOCAB=$MEG/gpt2-tiny-vocab.json MERGES=$MEG/gpt2-tiny-merges.txt
cd "$T" || exit 1

# --- the whole corpus, 4 shards --------------------------------------------------------------
mkdir -p "$T/ok"
J=$(INPUT=$MEG/openwebtext-1000.jsonl OUT_PREFIX=$T/ok/meg MERGE_OUTPUT=$T/ok/merge.out \
	sbatch --parsable --job-name="$P" --array=0-3 --cpus-per-task=2 --output="$T/ok/task-%a.out" \
	"$TOP/slurm/preprocess.slurm")
if wait_for 120 gone "$P"; then ok preprocess_jobs_finish; else fail preprocess_jobs_finish "$(squeue)"; fi
contains preprocess_task0_submits_merge "$T/ok/task-0.out" "merge job [0-9]+ runs when all of job array $J has succeeded"
contains preprocess_merge_checks "$T/ok/merge.out" "meg_text_document: ok: 1000 sequences, 1000 documents"
check preprocess_bin_byte_identical cmp "$T/ok/meg_text_document.bin" "$MEG/meg-gpt2-openwebtext_text_document.bin"
check preprocess_idx_byte_identical cmp "$T/ok/meg_text_document.idx" "$MEG/meg-gpt2-openwebtext_text_document.idx"
check preprocess_shards_removed [ -z "$(ls "$T/ok" | grep shard)" ]
docs=$(cat "$T"/ok/task-*.out | sed -n 's/^mkindex: .*shard[0-9]*_text_document.*: \([0-9]*\) documents.*/\1/p' |
	awk '{ s += $1; n++ } END { print n, s }')
check preprocess_four_shards_of_1000_documents [ "$docs" = "4 1000" ]

# --- a malformed line in the middle: its task fails, nothing is merged -------------------------
mkdir -p "$T/bad"
sed '500s/^{"text": *"/{"text" "/' "$MEG/openwebtext-1000.jsonl" > "$T/bad/corpus.jsonl"
check preprocess_corrupt_copy_differs_at_line_500 [ "$(cmp "$T/bad/corpus.jsonl" "$MEG/openwebtext-1000.jsonl" |
	sed 's/.* line //')" = 500 ]
J=$(INPUT=$T/bad/corpus.jsonl OUT_PREFIX=$T/bad/meg MERGE_OUTPUT=$T/bad/merge.out \
	sbatch --parsable --job-name="$P-bad" --array=0-3 --cpus-per-task=2 --output="$T/bad/task-%a.out" \
	"$TOP/slurm/preprocess.slurm")
if wait_for 120 gone "$P-bad"; then ok preprocess_bad_jobs_leave_queue; else
	fail preprocess_bad_jobs_leave_queue "$(squeue)"; scancel --name="$P-bad,$P-bad-merge"; fi
failed=$(grep -l 'preprocess: shard [0-9]* failed (exit 2)' "$T"/bad/task-*.out)
check preprocess_exactly_one_task_fails [ "$(echo "$failed" | grep -c .)" = 1 ]
states=$(for i in 0 1 2 3; do scontrol show job "${J}_$i" 2>/dev/null | grep -o 'JobState=[A-Z]*'; done | sort | tr '\n' ' ')
check preprocess_slurm_records_one_failed_task \
	[ "$states" = "JobState=COMPLETED JobState=COMPLETED JobState=COMPLETED JobState=FAILED " ]
MJ=$(sed -n 's/^preprocess: merge job \([0-9]*\) runs.*/\1/p' "$T/bad/task-0.out")
check preprocess_merge_job_cancelled sh -c "scontrol show job '$MJ' | grep -q 'JobState=CANCELLED Reason=DependencyNeverSatisfied'"
[ -n "$failed" ] && contains preprocess_error_names_input_line "$failed" "tokenize: $T/bad/corpus.jsonl:500: malformed JSON"
check preprocess_no_merge_ran [ ! -e "$T/bad/merge.out" ]
check preprocess_no_merged_output [ -z "$(ls "$T/bad" | grep -v shard | grep _document)" ]
check preprocess_other_shards_kept [ "$(ls "$T/bad" | grep -c 'shard.*_text_document\.bin$')" = 3 ]
