#include "train/plan/check.h"
#include "train/plan/diag.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"
#include "train/data/vocab.h"
#include "train/data/bertdata.h"

#define LL(x) ((long long)(x))

/* "DP 8 (384 GPUs from --nodes 48 x --gpus-per-node 8, / --tensor-model-parallel-size 4 x
 * --pipeline-model-parallel-size 12)": where DP comes from, for messages */
static const char *dp_words(const struct plan *p, char *buf, size_t len)
{
	snprintf(buf, len, "DP %lld (%lld GPUs from %s %lld x %s %lld, / --tensor-model-parallel-size "
		 "%lld x --pipeline-model-parallel-size %lld)", LL(p->dp), LL(p->world),
		 p->a->nodes_from, LL(p->a->nodes), p->a->gpus_from, LL(p->a->gpus_per_node),
		 LL(p->tp), LL(p->pp));
	return buf;
}

static void resolve_vocab(struct plan *p)
{
	const struct train_args *a = p->a;
	char err[1024];
	int64_t n = -1;
	int rc;

	int wordpiece = a->tokenizer_type && strncmp(a->tokenizer_type, "BertWordPiece", 13) == 0;
	if (a->model_type == MT_BERT && !wordpiece)
		plan_error(p, "--model-type bert needs --tokenizer-type BertWordPieceLowerCase or "
			   "BertWordPieceCase with --vocab-file vocab.txt (BertDataset's [CLS], [SEP], "
			   "[MASK] and \"##\" pieces)");
	if (a->model_type == MT_T5 && !wordpiece)
		plan_error(p, "--model-type t5 needs --tokenizer-type BertWordPieceLowerCase or "
			   "BertWordPieceCase with --vocab-file vocab.txt (T5Dataset's [MASK], [BOS], "
			   "[EOS], sentinels and \"##\" pieces; pretrain_t5.py's default is "
			   "BertWordPieceLowerCase)");
	if (wordpiece && a->model_type == MT_GPT)
		plan_error(p, "--tokenizer-type %s is for --model-type bert or t5 (Megatron's BERT "
			   "tokenizer has no end-of-document token for a GPT)", a->tokenizer_type);
	if (wordpiece) {
		struct bertdata_vocab v;
		if (!a->vocab_file) {
			plan_error(p, "--tokenizer-type %s needs --vocab-file vocab.txt", a->tokenizer_type);
		} else if (a->merge_file) {
			plan_error(p, "--merge-file is GPT2BPETokenizer's; %s reads --vocab-file only",
				   a->tokenizer_type);
		} else if (a->tokenizer_name_or_path) {
			plan_error(p, "--tokenizer-name-or-path is PretrainedFromHF's; %s reads --vocab-file",
				   a->tokenizer_type);
		} else if (bertdata_vocab_load(&v, a->vocab_file, a->model_type == MT_T5 &&
					       a->vocab_extra_ids > 0 ? (int32_t)a->vocab_extra_ids : 0,
					       err, sizeof err) < 0) {
			plan_error(p, "--vocab-file: %s", err);
		} else {
			/* Megatron's _BertWordPieceTokenizer: vocab.txt and the [BOS], [EOS] it adds
			 * (and T5's --vocab-extra-ids sentinels) */
			p->vocab = v.size;
			p->vocab_from = "--vocab-file";
			bertdata_vocab_free(&v);
			if (a->vocab_size > 0 && a->vocab_size != p->vocab)
				plan_error(p, "--vocab-size %lld contradicts --vocab-file %s, which gives %lld "
				           "tokens ([BOS] and [EOS]%s included)", LL(a->vocab_size),
				           a->vocab_file, LL(p->vocab), a->model_type == MT_T5 ?
					   ", and the --vocab-extra-ids sentinels" : "");
		}
		return;
	}
	if (a->tokenizer_type && strcmp(a->tokenizer_type, "GPT2BPETokenizer") == 0 &&
	    !a->vocab_file)
		plan_error(p, "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
	if (a->tokenizer_type && strcmp(a->tokenizer_type, "PretrainedFromHF") == 0 &&
	    !a->tokenizer_name_or_path)
		plan_error(p, "--tokenizer-type PretrainedFromHF needs --tokenizer-name-or-path");
	if (a->vocab_file && !a->merge_file)
		plan_error(p, "--vocab-file needs --merge-file (GPT2BPETokenizer reads both)");
	if (a->vocab_file && a->tokenizer_name_or_path)
		plan_error(p, "give either --vocab-file/--merge-file or --tokenizer-name-or-path, not both");

	const char *file = a->tokenizer_name_or_path ? a->tokenizer_name_or_path : a->vocab_file;
	const char *flag = a->tokenizer_name_or_path ? "--tokenizer-name-or-path" : "--vocab-file";
	/* the merges are not needed to train on token ids, but a tokenizer named is a tokenizer
	 * recorded (the checkpoint's, an export's): it must be the file given.  Where the vocabulary
	 * too is not on this machine (a plan made elsewhere, --vocab-size) it is said with it. */
	if (a->merge_file && access(a->merge_file, R_OK) != 0 &&
	    !(a->vocab_size > 0 && a->vocab_file && access(a->vocab_file, F_OK) != 0))
		plan_error(p, "--merge-file %s: %s", a->merge_file, strerror(errno));
	if (file) {
		rc = a->tokenizer_name_or_path ? vocab_hf(file, &n, err, sizeof err)
					       : vocab_gpt2(file, &n, err, sizeof err);
		if (rc == 0) {
			p->vocab = n;
			p->vocab_from = flag;
			if (a->vocab_size > 0 && a->vocab_size != n)
				plan_error(p, "--vocab-size %lld contradicts %s %s, which has %lld tokens",
				           LL(a->vocab_size), flag, file, LL(n));
			return;
		}
		if (rc == VOCAB_BAD || a->vocab_size <= 0) {
			plan_error(p, "%s: %s%s", flag, err, rc == VOCAB_MISSING ?
			           "; give --vocab-size N when the tokenizer is not on this machine" : "");
			return;
		}
		plan_note(p, "%s %s is not on this machine: vocabulary from --vocab-size", flag, file);
	}
	if (a->vocab_size > 0) {
		p->vocab = a->vocab_size;
		p->vocab_from = "--vocab-size";
		return;
	}
	if (!file)
		plan_error(p, "no tokenizer: give --vocab-file and --merge-file, --tokenizer-name-or-path, "
		           "or --vocab-size N");
}

static void check_schedule_flags(struct plan *p)
{
	const struct train_args *a = p->a;
	if (a->train_iters > 0) {
		if (a->lr_decay_samples > 0)
			plan_error(p, "--lr-decay-samples with --train-iters: iteration-based training takes "
			           "--lr-decay-iters");
		if (a->lr_warmup_samples > 0)
			plan_error(p, "--lr-warmup-samples with --train-iters: iteration-based training takes "
			           "--lr-warmup-iters");
		if (a->lr_warmup_fraction >= 0 && a->lr_warmup_iters > 0)
			plan_error(p, "--lr-warmup-fraction and --lr-warmup-iters: give one");
	}
	if (a->train_samples > 0) {
		if (a->lr_decay_iters > 0)
			plan_error(p, "--lr-decay-iters with --train-samples: sample-based training takes "
			           "--lr-decay-samples (or --lr-decay-tokens)");
		if (a->lr_warmup_iters > 0)
			plan_error(p, "--lr-warmup-iters with --train-samples: sample-based training takes "
			           "--lr-warmup-samples");
		if (a->lr_warmup_fraction >= 0 && a->lr_warmup_samples > 0)
			plan_error(p, "--lr-warmup-fraction and --lr-warmup-samples: give one");
	}
	if (a->lr >= 0 && a->min_lr > a->lr)
		plan_error(p, "--min-lr %g is larger than --lr %g", a->min_lr, a->lr);
	if (a->save && a->save_interval <= 0)
		plan_error(p, "--save needs --save-interval (Megatron asserts it)");
	if (a->save_keep > 0 && !a->save)
		plan_error(p, "--save-keep prunes the checkpoints of --save: give --save DIR");
	if (a->save_keep_every > 0 && a->save_keep <= 0)
		plan_error(p, "--save-keep-every keeps milestones beside the newest --save-keep N steps: "
			   "give --save-keep too");
}

/* The first GPT-only option given (ALiBi, rotary, BLOOM's embedding layer norm, 8-bit Adam's
 * StableEmbedding, the document masks, the curriculum, weighted split paths), or NULL: what
 * Megatron's BertModel and T5Model do not have */
static const char *gpt_only_flag(const struct train_args *a)
{
	return a->pos_emb == POS_ALIBI ? "--position-embedding-type alibi"
	       : a->pos_emb == POS_ROTARY ? "--position-embedding-type rotary"
	       : a->embed_layernorm ? "--embed-layernorm"
	       : a->use_bnb_optimizer ? "--use-bnb-optimizer (its StableEmbedding)"
	       : a->eod_mask_loss ? "--eod-mask-loss"
	       : a->reset_position_ids ? "--reset-position-ids"
	       : a->reset_attention_mask ? "--reset-attention-mask"
	       : a->curriculum_flag || a->curriculum.enabled ? "the sequence-length curriculum"
	       : a->weighted_split_paths || a->wsplit[1] || a->wsplit[2]
	       ? "--{train,valid,test}-weighted-split-paths" : NULL;
}

/* --model-type t5: pretrain_t5.py's T5Model and T5Dataset (src/train/model/t5.c) */
/* What a run would stop on in its setup, known from the flags alone: checked here so that
 * --dry-run reports them with the rest (train(1): the same complete list).  What depends on the
 * device (a backend without 8-bit Adam, LAMB or profiler ranges) is the run's to find. */
static void check_run_flags(struct plan *p)
{
	const struct train_args *a = p->a;
	int lamb = strcmp(a->optimizer, "lamb") == 0, sgd = strcmp(a->optimizer, "sgd") == 0;
	if (a->profile && a->profile_step_end <= a->profile_step_start)
		plan_error(p, "--profile-step-end %lld must be above --profile-step-start %lld",
			   LL(a->profile_step_end), LL(a->profile_step_start));
	if ((lamb || sgd) && a->use_bnb_optimizer)
		plan_error(p, "--optimizer %s and --use-bnb-optimizer (8-bit Adam) are two optimizers: "
			   "choose one", a->optimizer);
	if (a->lamb_noise_given && !lamb)
		plan_error(p, "--lamb-layerwise-noise is LAMB's: it needs --optimizer lamb (not %s)",
			   a->optimizer);
	if (a->pos_emb == POS_ROTARY)
		plan_error(p, "--position-embedding-type rotary is not implemented; use absolute or alibi");
	if (a->spike_policy == 2 && !a->save)
		plan_error(p, "--spike-policy rollback needs --save: it rolls back to the last checkpoint");
	if (a->glu_activation)
		plan_error(p, "--glu-activation is not implemented: the MLP is GeLU");
	if (a->kv_channels > 0 && a->num_attention_heads > 0 &&
	    a->kv_channels * a->num_attention_heads != a->hidden_size)
		plan_error(p, "--kv-channels other than hidden/heads is not implemented");
}

static void check_t5(struct plan *p)
{
	const struct train_args *a = p->a;
	/* what Megatron's T5Model has not: refused rather than ignored */
	const char *gpt = gpt_only_flag(a);
	if (gpt)
		plan_error(p, "%s is not in Megatron's T5 (learned positions, the padding masks, one "
			   "sentence dataset): drop it with --model-type t5", gpt);
	if (a->ndata_path > 1)
		plan_error(p, "--model-type t5 reads one sentence dataset (--data-path PREFIX); blends "
			   "are not implemented for T5");
	if (a->seq_given && a->encoder_seq_given)
		plan_error(p, "--seq-length and --encoder-seq-length: give one (Megatron asserts "
			   "--encoder-seq-length is None when --seq-length is given)");
	if (a->decoder_seq_length <= 0)
		plan_error(p, "--model-type t5 needs --decoder-seq-length (T5Dataset's decoder length)");
	else if (a->max_position_embeddings > 0 &&
		 a->max_position_embeddings < a->decoder_seq_length)
		plan_error(p, "--max-position-embeddings %lld is smaller than --decoder-seq-length %lld",
			   LL(a->max_position_embeddings), LL(a->decoder_seq_length));
	if (a->vocab_extra_ids <= 0)
		plan_error(p, "--model-type t5 needs --vocab-extra-ids N > 0: T5Dataset replaces each "
			   "masked span by a sentinel <extra_id_K> (Megatron's T5 scripts give 100)");
	if (a->pp > 1)
		plan_error(p, "--pipeline-model-parallel-size %lld: T5 is not split over pipeline "
			   "stages here (Megatron's T5 places its encoder and decoder with "
			   "--pipeline-model-parallel-split-rank, which lmtk does not implement); use "
			   "--pipeline-model-parallel-size 1 with TP and DP", LL(a->pp));
}

const char *check_defer_flags(const struct train_args *a)
{
	if (a->model_type == MT_BERT)
		return "--model-type bert (its steps read their losses back)";
	if (a->optimizer && strcmp(a->optimizer, "adam") != 0)
		return "an optimizer other than the one-launch AdamW";
	if (a->use_bnb_optimizer)
		return "--use-bnb-optimizer (not the one-launch AdamW)";
	if (a->spike_policy)
		return "--spike-policy skip or rollback (each step's loss is read back)";
	if (a->log_zeros)
		return "--log-num-zeros-in-grad (each step's gradient is read back)";
	return NULL;
}

const char *check_graph_flags(const struct train_args *a)
{
	const char *why = check_defer_flags(a);
	if (a->device && strcmp(a->device, "cpu") == 0)
		return "--device cpu has no CUDA graphs (use --device cuda)";
	if (why)
		return why;
	if (a->model_type == MT_T5)
		return "--model-type t5 (its loss mask comes from the data)";
	if (a->nrampup)
		return "--rampup-batch-size changes the step's shapes";
	if (a->curriculum_flag || a->curriculum.enabled)
		return "curriculum learning changes the step's shapes";
	if (a->hidden_dropout > 0 || a->attention_dropout > 0)
		return "dropout's seed changes every iteration (set --hidden-dropout 0 and "
		       "--attention-dropout 0)";
	if (a->eod_mask_loss)
		return "--eod-mask-loss changes the loss's scale per micro-batch";
	if (a->reset_attention_mask || a->reset_position_ids)
		return "--reset-attention-mask and --reset-position-ids copy per-sample masks";
	if (a->fp16)
		return "--fp16 (the loss scale, a kernel argument, changes with the scaler)";
	return NULL;
}

/* Every check that needs only the flags.  Returns 1 if the plan cannot be computed. */
int check_flags(struct plan *p)
{
	const struct train_args *a = p->a;
	int blocking = 0;

	static const struct { const char *flag; size_t off; } required[] = {
		{"--num-layers", offsetof(struct train_args, num_layers)},
		{"--hidden-size", offsetof(struct train_args, hidden_size)},
		{"--num-attention-heads", offsetof(struct train_args, num_attention_heads)},
		{"--seq-length", offsetof(struct train_args, seq_length)},
		{"--micro-batch-size", offsetof(struct train_args, micro_batch_size)},
	};
	for (size_t i = 0; i < sizeof required / sizeof *required; i++)
		if (*(const int64_t *)((const char *)a + required[i].off) <= 0) {
			plan_error(p, "%s is required", a->model_type == MT_T5 && i == 3
				   ? "--encoder-seq-length (or --seq-length)" : required[i].flag);
			blocking = 1;
		}
	if (a->cuda_graph) {
		const char *why = check_graph_flags(a);
		if (why)
			plan_error(p, "--cuda-graph cannot replay this run's step: %s", why);
	}
	if (a->pos_emb == POS_ROTARY && a->max_position_embeddings > 0)
		plan_error(p, "--max-position-embeddings with --position-embedding-type rotary: Megatron "
		           "asserts there is none");
	if (a->pos_emb != POS_ROTARY && a->max_position_embeddings <= 0) {
		plan_error(p, "--max-position-embeddings is required (Megatron asserts it with %s position "
		           "embeddings)", a->pos_emb == POS_ALIBI ? "alibi" : "absolute");
		blocking |= a->pos_emb == POS_LEARNED;
	}
	if (a->max_position_embeddings > 0 && a->seq_length > 0 &&
	    a->max_position_embeddings < a->seq_length)
		plan_error(p, "--max-position-embeddings %lld is smaller than --seq-length %lld",
		           LL(a->max_position_embeddings), LL(a->seq_length));
	if (a->hidden_size > 0 && a->num_attention_heads > 0 && a->kv_channels <= 0 &&
	    a->hidden_size % a->num_attention_heads)
		plan_error(p, "--hidden-size %lld is not divisible by --num-attention-heads %lld (give "
		           "--kv-channels)", LL(a->hidden_size), LL(a->num_attention_heads));
	if (a->num_attention_heads > 0 && a->num_attention_heads % a->tp)
		plan_error(p, "--num-attention-heads %lld is not divisible by --tensor-model-parallel-size "
		           "%lld", LL(a->num_attention_heads), LL(a->tp));
	if (a->hidden_size > 0) {
		int64_t f = a->ffn_hidden_size > 0 ? a->ffn_hidden_size : 4 * a->hidden_size;
		if (f % a->tp)
			plan_error(p, "--ffn-hidden-size %lld%s is not divisible by --tensor-model-parallel-size "
			           "%lld", LL(f), a->ffn_hidden_size > 0 ? "" : " (4 x --hidden-size)", LL(a->tp));
	}
	if (a->bf16 && a->fp16)
		plan_error(p, "--bf16 and --fp16: give one");
	if (a->model_type != MT_BERT && a->bert_flag)
		plan_error(p, "%s is a BERT flag: add --model-type bert, or drop it", a->bert_flag);
	if (a->model_type == MT_GPT && a->masklm_flag)
		plan_error(p, "%s is a BERT and T5 flag (their datasets' masking): add --model-type "
			   "bert or t5, or drop it", a->masklm_flag);
	if (a->model_type != MT_T5 && a->t5_flag)
		plan_error(p, "%s is a T5 flag: add --model-type t5, or drop it", a->t5_flag);
	if (a->model_type == MT_T5)
		check_t5(p);
	if (a->model_type == MT_BERT) {
		/* what Megatron's BertModel has not: refused rather than ignored */
		const char *gpt = gpt_only_flag(a);
		if (gpt)
			plan_error(p, "%s is not in Megatron's BERT (learned positions, the padding mask, "
				   "one sentence dataset): drop it with --model-type bert", gpt);
		if (a->ndata_path > 1)
			plan_error(p, "--model-type bert reads one sentence dataset (--data-path PREFIX); "
				   "blends are not implemented for BERT");
	}
	if (a->glu_activation)
		plan_warning(p, "--glu-activation %s is not modelled: the parameter count and memory assume "
			"a plain GeLU MLP", a->glu_activation);

	if (a->train_iters <= 0 && a->train_samples <= 0) {
		plan_error(p, "give --train-samples or --train-iters: the length of the run");
		blocking = 1;
	}
	if (a->train_iters > 0 && a->train_samples > 0) {
		plan_error(p, "--train-iters and --train-samples: give one");
		blocking = 1;
	}
	if (a->nrampup && a->nrampup != 3) {
		plan_error(p, "--rampup-batch-size takes three values, START INCR SAMPLES; got %d", a->nrampup);
		blocking = 1;
	}
	if (a->nrampup && a->train_iters > 0)
		plan_error(p, "--rampup-batch-size with --train-iters: the ramp-up needs --train-samples "
		           "(Megatron: expected no batch-size rampup for iteration-based training)");
	check_schedule_flags(p);
	check_run_flags(p);

	if (a->nodes <= 0 || a->gpus_per_node <= 0) {
		plan_error(p, "%s%s%s: the layout needs the GPU count (or run inside a SLURM allocation: "
		           "SLURM_JOB_NUM_NODES, SLURM_GPUS_ON_NODE)",
		           a->nodes <= 0 ? "--nodes" : "", a->nodes <= 0 && a->gpus_per_node <= 0 ? " and " : "",
		           a->gpus_per_node <= 0 ? "--gpus-per-node" : "");
		blocking = 1;
	} else {
		int64_t world = a->nodes * a->gpus_per_node;
		if (world % (a->tp * a->pp)) {
			plan_error(p, "world size %lld (%s %lld x %s %lld) is not divisible by "
			           "--tensor-model-parallel-size %lld x --pipeline-model-parallel-size %lld = %lld",
			           LL(world), a->nodes_from, LL(a->nodes), a->gpus_from, LL(a->gpus_per_node),
			           LL(a->tp), LL(a->pp), LL(a->tp * a->pp));
			blocking = 1;
		}
	}
	if (a->ndata_path && a->weighted_split_paths)
		plan_error(p, "--data-path and --train-weighted-split-paths[-path] are mutually exclusive");
	if (a->weighted_split_paths && a->dry_run)
		plan_note(p, "--train-weighted-split-paths: not read by the plan; it has no data section");

	resolve_vocab(p);
	if (p->vocab <= 0)
		blocking = 1;
	if (p->vocab > 0) {
		if (a->pad_vocab_size_to > 0 && a->pad_vocab_size_to < p->vocab)
			plan_error(p, "--pad-vocab-size-to %lld is smaller than the vocabulary, %lld (%s)",
			           LL(a->pad_vocab_size_to), LL(p->vocab), p->vocab_from);
		if (a->pad_vocab_size_to > 0 && a->pad_vocab_size_to % a->make_vocab_size_divisible_by)
			plan_error(p, "--pad-vocab-size-to %lld is not divisible by "
			           "--make-vocab-size-divisible-by %lld", LL(a->pad_vocab_size_to),
			           LL(a->make_vocab_size_divisible_by));
		if (a->pad_vocab_size_to > 0 && a->pad_vocab_size_to % a->tp)
			plan_error(p, "--pad-vocab-size-to %lld is not divisible by --tensor-model-parallel-size "
			           "%lld: the embedding is split over TP", LL(a->pad_vocab_size_to), LL(a->tp));
	}
	return blocking;
}

/* the layout's own constraints, checked even when something else stops the plan */
void check_layout(struct plan *p)
{
	const struct train_args *a = p->a;
	int64_t units = p->L + (a->pp_embedding ? 2 : 0), mdp = p->mbs * p->dp;
	char dp[512];

	if (a->cuda_graph && p->world > 1)
		plan_error(p, "--cuda-graph: %lld ranks (a step is captured on one GPU only; drop it for "
			   "multi-GPU runs)", LL(p->world));
	if (p->gbs % mdp)
		plan_error(p, "--global-batch-size %lld is not divisible by --micro-batch-size %lld x %s = %lld",
		           LL(p->gbs), LL(p->mbs), dp_words(p, dp, sizeof dp), LL(mdp));
	if (units % p->pp && a->pp_embedding)
		plan_error(p, "--num-layers %lld + 2 embeddings = %lld partition units (--pp-partition-method "
		           "%s) are not divisible by --pipeline-model-parallel-size %lld", LL(p->L),
		           LL(units), p->partition, LL(p->pp));
	else if (units % p->pp)
		plan_error(p, "--num-layers %lld is not divisible by --pipeline-model-parallel-size %lld "
		           "(--pp-partition-method %s)%s", LL(p->L), LL(p->pp), p->partition,
		           (p->L + 2) % p->pp == 0 ? "; 'type:transformer|embedding' would split the "
		           "layers and both embeddings evenly, as BLOOM-176B did" : "");
	if (units < p->pp)
		plan_error(p, "--pipeline-model-parallel-size %lld is larger than the %lld partition units: "
		           "stages would be empty", LL(p->pp), LL(units));
}

void check_ramp(struct plan *p)
{
	const struct train_args *a = p->a;
	const struct ramp *r = &p->ramp;
	int64_t mdp = p->mbs * p->dp;
	char dp[512], *list = NULL;
	size_t len = 0;
	FILE *f;
	int bad = 0, ramp_rows = 0;

	dp_words(p, dp, sizeof dp);
	f = open_memstream(&list, &len);
	for (int i = 0; i < r->nst; i++) {
		if (r->st[i].gbs == p->gbs || !ramp_row_steps(r, i))
			continue;
		ramp_rows++;
		if (r->st[i].gbs % mdp) {
			if (bad < 8)
				fprintf(f, "%s%lld", bad ? ", " : "", LL(r->st[i].gbs));
			bad++;
		}
	}
	if (bad > 8)
		fprintf(f, ", ... (%d of the %d ramp-up values)", bad, ramp_rows);
	fclose(f);
	if (bad) {
		plan_error(p, "--rampup-batch-size %lld %lld %lld: global batch size%s %s %s not divisible by "
		           "--micro-batch-size %lld x %s = %lld; Megatron stops at the first such iteration "
		           "(make START and INCR multiples of %lld, or use a smaller DP)",
		           LL(a->rampup[0]), LL(a->rampup[1]), LL(a->rampup[2]), bad > 1 ? "s" : "", list,
		           bad > 1 ? "are" : "is", LL(p->mbs), dp, LL(mdp), LL(mdp));
		p->indivisible = list;
	} else {
		free(list);
	}
}
