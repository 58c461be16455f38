#!/usr/bin/env bash
# One checkpoint writer (src/ckpt/save.h) for train and the tools: a step train saves and the same
# step ckpt-merge-tp rewrites in the same layout (TP 1 -> TP 1) are the same files, byte for byte -
# the step's names (its readers' .lock too), manifest.json, the shard, `latest` and
# latest_checkpointed_iteration.txt - and neither leaves a publish record or a temporary behind.
. "$(dirname "$0")/../lib.sh"
MEG=$(tiny_dataset) || exit 3
cd "$T" || exit 3
cp "$MEG"/meg-gpt2-openwebtext_text_document.bin "$MEG"/meg-gpt2-openwebtext_text_document.idx . || exit 3

"$BIN/train" --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 \
	--max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 1e-3 \
	--train-iters 3 --data-path meg-gpt2-openwebtext_text_document \
	--vocab-file "$MEG/gpt2-tiny-vocab.json" --merge-file "$MEG/gpt2-tiny-merges.txt" \
	--split 949,50,1 --device cpu --threads 1 --eval-iters 0 --log-interval 1 \
	--save run --save-interval 3 >train.out 2>&1 || { fail train_saves "$(tail -3 train.out)"; exit 0; }
"$BIN/ckpt-merge-tp" --input run --output merged 2>merge.err || { fail merge_tp1 "$(tail -3 merge.err)"; exit 0; }

# every name under the two saves, less train's run lock (the --save directory's, not the step's)
( cd run && find . | grep -v '^\./\.lmtk-save\.lock$' | sort ) >run.files
( cd merged && find . | sort ) >merged.files
if cmp -s run.files merged.files; then ok same_names_in_both_saves
else fail same_names_in_both_saves "$(diff run.files merged.files | head -5 | tr '\n' ' ')"; fi
grep -qx './global_step3/.lock' merged.files && ok tool_step_has_the_readers_lock ||
	fail tool_step_has_the_readers_lock "$(tr '\n' ' ' <merged.files)"
lacks no_publish_record_or_temporary_left run.files '\.lmtk-publishing|\.tmp\.'
lacks no_publish_record_or_temporary_left_by_the_tool merged.files '\.lmtk-publishing|\.tmp\.'
for f in latest latest_checkpointed_iteration.txt global_step3/manifest.json \
	global_step3/rank_tp00_pp000.safetensors; do
	if cmp -s "run/$f" "merged/$f"; then ok "same_bytes_${f//[\/.]/_}"
	else fail "same_bytes_${f//[\/.]/_}" "run/$f and merged/$f differ: $(cmp "run/$f" "merged/$f" 2>&1 | head -1)"; fi
done
# the files train wrote are the format's, not just each other's (lmtk-checkpoint(5))
[ "$(cat run/latest)" = global_step3 ] && [ "$(cat run/latest_checkpointed_iteration.txt)" = 3 ] &&
	ok latest_names_the_step || fail latest_names_the_step "$(cat run/latest run/latest_checkpointed_iteration.txt)"
tail -c 2 run/global_step3/manifest.json | od -c | grep -q '}  \\n' && ok manifest_ends_in_a_newline ||
	fail manifest_ends_in_a_newline "$(tail -c 2 run/global_step3/manifest.json | od -c | head -1)"
