#!/usr/bin/env bash
# A checkpoint directory's readers and its pruner stay inside it (lmtk-checkpoint(5), "Pruning"
# and "latest"): train --save-keep never deletes a file through a symbolic link - a step that is
# a link is kept and named, a link inside a step is unlinked, its target untouched - and train
# --load, ckpt-merge-tp and ckpt-sync-ln refuse a `latest` (or a step) that resolves outside the
# directory, exit 2, naming the file and what it named.
. "$(dirname "$0")/../lib.sh"
TR=$BIN/train
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3
MODEL=(--num-layers 1 --hidden-size 8 --num-attention-heads 2 --seq-length 32
	--max-position-embeddings 32 --micro-batch-size 1 --global-batch-size 1 --lr 1e-3
	--min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 4 --lr-decay-iters 100000
	--data-path meg-gpt2-openwebtext_text_document --vocab-file "$MEG/gpt2-tiny-vocab.json"
	--merge-file "$MEG/gpt2-tiny-merges.txt" --split 949,50,1 --device cpu --threads 1
	--eval-iters 0 --log-interval 1)

# a directory of someone else's files: nothing here may lose one
precious() { mkdir -p "$1/sub" && echo keep >"$1/data" && echo keep >"$1/sub/more"; }
intact() { [ "$(cat "$1/data" 2>/dev/null)" = keep ] && [ "$(cat "$1/sub/more" 2>/dev/null)" = keep ]; }

# --- a step directory that is a link: kept, named, its target untouched ---
precious outside
# (the link's step is below where the run starts: a run never saves over a step it did not write,
# so one ahead of it would stop the run before its first step)
"$TR" "${MODEL[@]}" --train-iters 2 --save ck --save-interval 2 >first.out 2>first.err ||
	fail prune_first_run "$(head -c 300 first.err)"
ln -s ../outside ck/global_step1
"$TR" "${MODEL[@]}" --train-iters 4 --load ck --save ck --save-interval 2 --save-keep 1 >prune.out 2>prune.err
echo "exit $?" >>prune.err
check prune_keeps_the_target_of_a_step_link intact outside
check prune_keeps_a_step_that_is_a_link test -L ck/global_step1
contains prune_names_the_step_link_it_kept prune.err 'ck: kept global_step1: it is a symbolic link'
check prune_still_removes_real_steps sh -c '! test -e ck/global_step2 && test -d ck/global_step4'
contains prune_run_succeeds prune.err '^exit 0$'

# --- a link inside a step: unlinked when the step goes, never followed ---
precious outside2
"$TR" "${MODEL[@]}" --train-iters 2 --save ck2 --save-interval 1 >a.out 2>a.err ||
	fail ck2_first_run "$(head -c 300 a.err)"
ln -s ../../outside2 ck2/global_step1/linked_dir
ln -s ../../outside2/data ck2/global_step1/linked_file
"$TR" "${MODEL[@]}" --train-iters 3 --save ck2 --load ck2 --save-interval 1 --save-keep 1 >b.out 2>b.err ||
	fail ck2_second_run "$(head -c 300 b.err)"
check prune_unlinks_links_inside_a_step_never_their_targets intact outside2
check prune_removed_the_step_with_links sh -c '! test -e ck2/global_step1 && ! test -e ck2/.global_step1.deleting'

# --- `latest` naming a step outside --load ---
mkdir -p elsewhere ck3
cp -r ck2/global_step3 elsewhere/global_step8
cp -r ck2/global_step3 ck3/global_step3
echo ../elsewhere/global_step8 >ck3/latest
expect_rc load_refuses_latest_outside 2 "$TR" "${MODEL[@]}" --train-iters 9 --load ck3
contains load_refuses_latest_outside_names_both "$T/err" 'ck3/latest names \.\./elsewhere/global_step8, which resolves to .*/elsewhere/global_step8, outside ck3'
lacks load_refuses_latest_outside_trains_nothing "$T/out" 'iteration +9/'

# --- a global_stepN that is a link out of the directory ---
mkdir ck4
cp -r ck2/global_step3 ck4/global_step3
ln -s ../elsewhere/global_step8 ck4/global_step8
echo global_step8 >ck4/latest
expect_rc load_refuses_a_step_linked_outside 2 "$TR" "${MODEL[@]}" --train-iters 9 --load ck4
contains load_refuses_a_step_linked_outside_names_it "$T/err" 'ck4/latest names global_step8, which resolves to .*/elsewhere/global_step8, outside ck4'
# the fallback listing too: no `latest`, the newest step is the link
rm ck4/latest
expect_rc load_fallback_refuses_a_step_linked_outside 2 "$TR" "${MODEL[@]}" --train-iters 9 --load ck4
contains load_fallback_refuses_a_step_linked_outside_names_it "$T/err" 'ck4/global_step8 resolves to .*/elsewhere/global_step8, outside ck4'
echo global_step8 >ck4/latest

# --- the checkpoint library's readers ---
expect_rc merge_tp_refuses_latest_outside 2 "$BIN/ckpt-merge-tp" --input ck4 --output merged
contains merge_tp_refuses_latest_outside_names_it "$T/err" 'ck4/latest names global_step8, which resolves to .*elsewhere/global_step8, outside ck4'
check merge_tp_refuses_latest_outside_writes_nothing test ! -e merged
expect_rc sync_ln_refuses_latest_outside 2 "$BIN/ckpt-sync-ln" --check ck4
contains sync_ln_refuses_latest_outside_names_it "$T/err" 'ck4/latest names global_step8'
rm ck4/latest
expect_rc sync_ln_refuses_newest_step_linked_outside 2 "$BIN/ckpt-sync-ln" --check ck4
contains sync_ln_refuses_newest_step_linked_outside_names_it "$T/err" 'ck4/global_step8 resolves to .*elsewhere/global_step8, outside ck4'
# a step inside the directory still loads, through `latest` and directly
echo global_step3 >ck4/latest
expect_rc sync_ln_reads_a_step_inside 0 "$BIN/ckpt-sync-ln" --check ck4
rm -rf "$T"
