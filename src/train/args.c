#include "train/args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "num.h"
#include "xalloc.h"

enum {
	O_LAYERS = 1000, O_HIDDEN,   /* >= 128: long options only, no accidental -A */ O_FFN, O_HEADS, O_KV, O_SEQ, O_MAXPOS, O_POSEMB, O_EMBLN, O_BNB, O_DIVBY,
	O_PADTO, O_INITSTD, O_LNEPS, O_HDROP, O_ADROP, O_GLU,
	O_TP, O_PP, O_PPMETHOD, O_ZERO, O_OVERLAP, O_BUCKET, O_DEEPSPEED, O_CKPT, O_MBS, O_GBS, O_RAMPUP, O_TSAMPLES,
	O_TITERS, O_TTOKENS,
	O_LR, O_MINLR, O_DECAYSTYLE, O_WSAMPLES, O_WITERS, O_WFRAC, O_DSAMPLES, O_DITERS, O_DTOKENS,
	O_BF16, O_FP16, O_ACCFP32,
	O_DATA, O_DCACHE, O_SPLIT, O_WSPLIT, O_WSPLITPATH, O_VWSPLIT, O_VWSPLITPATH, O_TWSPLIT, O_TWSPLITPATH, O_TOKTYPE, O_VOCAB, O_MERGES, O_TOKPATH,
	O_SAVE, O_LOAD, O_SAVEINT, O_SAVEKEEP, O_SAVEKEEPEVERY,
	O_BATCHSIZE, O_WARMUP, O_MPSIZE,
	O_DRYRUN, O_FORMAT, O_NODES, O_GPUS, O_TFLOPS, O_PARAMS, O_GPUMEM, O_CKPTBW, O_VOCABSIZE, O_GPUMODEL, O_STEPMODEL,
	O_SEED, O_WD, O_CLIP, O_B1, O_B2, O_EPS, O_ILS, O_MINLS, O_LSWIN, O_HYST,
	O_LOGINT, O_TBDIR, O_TBTIMERS, O_TBBATCH, O_TBPPL, O_ZEROS, O_PNORM,
	O_EVALINT, O_EVALITERS, O_EXITINT, O_EXITDUR, O_KILL, O_SKIPRANGE, O_OVERRIDE, O_USECKPT,
	O_DEVICE, O_THREADS, O_SPIKE, O_SPIKEF, O_PEAK,
	O_OPTIMIZER, O_DATALOADER, O_EVALONLY, O_FINETUNE, O_NOLOADOPT, O_LOSSSCALE, O_TBLOGINT,
	O_TBNOLR, O_TBNOLS, O_LOGPATH, O_EODMASK, O_RESETPOS, O_RESETATT, O_POSTLN, O_OPENAIGELU,
	O_DEEPSCALE, O_DSCONFIG, O_CURRICULUM, O_CCDIR, O_CCINT, O_CPUTDP, O_CKNL, O_DSACK,
	O_CUDAGRAPH, O_PROFILE, O_PROFSTART, O_PROFEND, O_PROFRANKS, O_SGDMOM, O_EMBLRMULT, O_ALPHA, O_LAMBNOISE,
	O_MODELTYPE, O_TOKTYPES, O_NOBINHEAD, O_MASKPROB, O_SHORTSEQ, O_ENCSEQ, O_DECSEQ, O_EXTRAIDS,
};

const struct opt args_opts[] = {
	/* model */
	{"model-type", O_MODELTYPE, "TYPE", "gpt (GPT/BLOOM decoder, the default), bert (Megatron's BertModel, pretrain_bert.py) or t5 (T5Model, pretrain_t5.py)"},
	{"num-tokentypes", O_TOKTYPES, "N", "bert: token-type embeddings (default 2, as pretrain_bert.py; 0 none)"},
	{"bert-no-binary-head", O_NOBINHEAD, NULL, "bert: no pooler, no binary (sentence-order) head, no sop loss"},
	{"num-layers", O_LAYERS, "N", "transformer layers"},
	{"hidden-size", O_HIDDEN, "N", "hidden size h"},
	{"ffn-hidden-size", O_FFN, "N", "MLP inner size (default 4h)"},
	{"num-attention-heads", O_HEADS, "N", "attention heads"},
	{"kv-channels", O_KV, "N", "per-head size (default and only value: h / heads; another is refused, by --dry-run too)"},
	{"seq-length", O_SEQ, "N", "tokens per sample"},
	{"encoder-seq-length", O_ENCSEQ, "N", "t5: the encoder's tokens per sample (instead of --seq-length, which it sets)"},
	{"decoder-seq-length", O_DECSEQ, "N", "t5: the decoder's tokens per sample (required)"},
	{"max-position-embeddings", O_MAXPOS, "N", "position table size (>= --seq-length; required, as in Megatron)"},
	{"position-embedding-type", O_POSEMB, "TYPE", "absolute (learned, default) or alibi; rotary is refused (by --dry-run too, which still prints its plan)"},
	{"embed-layernorm", O_EMBLN, NULL, "LayerNorm after the word embedding (BLOOM)"},
	{"make-vocab-size-divisible-by", O_DIVBY, "N", "pad the vocab to a multiple of N * TP (default 128)"},
	{"pad-vocab-size-to", O_PADTO, "N", "pad the vocab to exactly N instead (BLOOM: 250880)"},
	{"init-method-std", O_INITSTD, "F", "weight init std (default 0.02)"},
	{"layernorm-epsilon", O_LNEPS, "F", "LayerNorm epsilon (default 1e-5)"},
	{"hidden-dropout", O_HDROP, "F", "dropout after attention and MLP (default 0.1)"},
	{"attention-dropout", O_ADROP, "F", "dropout on attention probabilities (default 0.1)"},
	{"glu-activation", O_GLU, "NAME", "GLU MLP variant: refused (not implemented; the plan counts a GeLU MLP)"},
	{"openai-gelu", O_OPENAIGELU, NULL, "the tanh GeLU: lmtk's only GeLU (Megatron's fused bias-gelu)"},
	{"apply-residual-connection-post-layernorm", O_POSTLN, NULL, "residual from the layer norm's output (BERT's order)"},
	/* parallelism and batch */
	{"tensor-model-parallel-size", O_TP, "N", "tensor-parallel size TP (default 1)"},
	{"pipeline-model-parallel-size", O_PP, "N", "pipeline-parallel size PP (default 1)"},
	{"pp-partition-method", O_PPMETHOD, "M", "'type:transformer' (default) or 'type:transformer|embedding'"},
	{"zero-stage", O_ZERO, "N", "ZeRO stage 0 or 1 (default 1 with --deepspeed, else 0); under --deepspeed a config's stage wins"},
	{"overlap-grad-reduce", O_OVERLAP, NULL, "DP: reduce the gradients in buckets during the last micro-batch's backward, on a second stream (Megatron-LM's; --deepspeed: the config's overlap_comm)"},
	{"ddp-bucket-size", O_BUCKET, "N", "elements per gradient bucket, at least (default max(4e7, 1e6 x DP), Megatron-LM's; --deepspeed: the config's reduce_bucket_size, default 5e8)"},
	{"deepspeed", O_DEEPSPEED, NULL, "the DeepSpeed engine: ZeRO, and with --bf16 its ZeRO-1-like BF16 optimizer"},
	{"deepscale", O_DEEPSCALE, NULL, "DeepSpeed's old name for --deepspeed"},
	{"deepspeed_config", O_DSCONFIG, "FILE", "DeepSpeed's JSON config; under --deepspeed its batch, clipping, ZeRO, fp16/bf16 apply (train(1))"},
	{"deepscale_config", O_DSCONFIG, "FILE", "DeepSpeed's old name for --deepspeed_config"},
	{"curriculum-learning", O_CURRICULUM, NULL, "the sequence-length curriculum of --deepspeed_config's curriculum_learning block (also its \"enabled\": true)"},
	{"checkpoint-activations", O_CKPT, NULL, "keep only the input of each chunk of layers; the backward recomputes its layers (same dropout masks, same bits)"},
	{"checkpoint-num-layers", O_CKNL, "N", "layers per checkpointed chunk (default 1)"},
	{"deepspeed-activation-checkpointing", O_DSACK, NULL, "under --deepspeed with --checkpoint-activations, DeepSpeed's checkpoint function: the same recomputation"},
	{"micro-batch-size", O_MBS, "N", "samples per micro-batch per GPU (MBS)"},
	{"global-batch-size", O_GBS, "N", "samples per iteration (GBS; default MBS * DP)"},
	{"rampup-batch-size", O_RAMPUP, "START INCR SAMPLES", "batch-size ramp-up: from START by INCR over SAMPLES samples"},
	{"train-samples", O_TSAMPLES, "N", "train on N samples"},
	{"train-iters", O_TITERS, "N", "train for N iterations (not with --rampup-batch-size)"},
	{"train-tokens", O_TTOKENS, "N", "stop once N tokens were consumed"},
	/* schedule */
	{"lr", O_LR, "F", "peak learning rate"},
	{"min-lr", O_MINLR, "F", "final learning rate (default 0)"},
	{"lr-decay-style", O_DECAYSTYLE, "S", "linear (default), cosine or constant"},
	{"lr-warmup-samples", O_WSAMPLES, "N", "linear warmup over N samples"},
	{"lr-warmup-iters", O_WITERS, "N", "linear warmup over N iterations (iteration-based training)"},
	{"lr-warmup-fraction", O_WFRAC, "F", "warmup as a fraction of the decay"},
	{"lr-decay-samples", O_DSAMPLES, "N", "decay over N samples (default --train-samples)"},
	{"lr-decay-iters", O_DITERS, "N", "decay over N iterations (iteration-based training)"},
	{"lr-decay-tokens", O_DTOKENS, "N", "decay over N tokens instead"},
	/* precision */
	{"bf16", O_BF16, NULL, "bfloat16 weights and activations"},
	{"fp16", O_FP16, NULL, "float16 weights and activations"},
	{"accumulate-allreduce-grads-in-fp32", O_ACCFP32, NULL, "fp32 gradients with --fp16 (lmtk's gradients are always fp32)"},
	/* data and tokenizer */
	{"data-path", O_DATA, "[W] PREFIX...", "Megatron datasets, with weights to blend (--dry-run reads only the .idx)"},
	{"data-cache-path", O_DCACHE, "DIR", "where the sample-index caches go (default: beside the data)"},
	{"split", O_SPLIT, "S", "train,valid,test split of --data-path (default 969, 30, 1)"},
	{"train-weighted-split-paths", O_WSPLIT, "GROUP...", "BigScience: 'NAME: W S:E PREFIX, W S:E PREFIX...' (one group)"},
	{"train-weighted-split-paths-path", O_WSPLITPATH, "FILE", "the same, read from FILE (one line: \"GROUP\" \"GROUP\"...)"},
	{"valid-weighted-split-paths", O_VWSPLIT, "GROUP...", "named validation sets, one group each"},
	{"valid-weighted-split-paths-path", O_VWSPLITPATH, "FILE", "the same, read from FILE"},
	{"test-weighted-split-paths", O_TWSPLIT, "GROUP...", "named test sets, one group each"},
	{"test-weighted-split-paths-path", O_TWSPLITPATH, "FILE", "the same, read from FILE"},
	{"tokenizer-type", O_TOKTYPE, "TYPE", "GPT2BPETokenizer, PretrainedFromHF, or BertWordPieceLowerCase/BertWordPieceCase (bert, t5)"},
	{"vocab-file", O_VOCAB, "FILE", "GPT-2 vocab.json, or BERT's vocab.txt (BertWordPiece*): its entries are the vocabulary size"},
	{"merge-file", O_MERGES, "FILE", "GPT-2 merges.txt (must exist)"},
	{"tokenizer-name-or-path", O_TOKPATH, "PATH", "tokenizer.json, or a directory with one: vocab + added tokens"},
	{"dataloader-type", O_DATALOADER, "TYPE", "single (Megatron's pretraining sampler; cyclic is refused)"},
	{"mask-prob", O_MASKPROB, "F", "bert, t5: fraction of the tokens masked for the LM loss (default 0.15)"},
	{"short-seq-prob", O_SHORTSEQ, "F", "bert, t5: probability of a shorter target length (default 0.1)"},
	{"vocab-extra-ids", O_EXTRAIDS, "N", "t5: sentinel tokens <extra_id_0>... added to the vocabulary (T5's spans; required)"},
	{"eod-mask-loss", O_EODMASK, NULL, "no loss on positions whose input token is the end of document"},
	{"reset-position-ids", O_RESETPOS, NULL, "positions restart after each end-of-document token"},
	{"reset-attention-mask", O_RESETATT, NULL, "no attention across an end-of-document token"},
	/* checkpoints */
	{"save", O_SAVE, "DIR", "save checkpoints here (lmtk-checkpoint(5)); one run at a time: it locks DIR/.lmtk-save.lock"},
	{"load", O_LOAD, "DIR", "resume from the newest intact checkpoint in DIR, if any (lmtk's, or a Megatron-DeepSpeed checkpoint)"},
	{"save-interval", O_SAVEINT, "N", "save every N iterations (required with --save, as in Megatron)"},
	{"save-keep", O_SAVEKEEP, "N", "after each save keep the newest N steps in --save, remove older ones (lmtk's own)"},
	{"save-keep-every", O_SAVEKEEPEVERY, "M", "with --save-keep: also keep every step that is a multiple of M, forever"},
	{"finetune", O_FINETUNE, NULL, "--load the weights only: iteration, samples, optimizer and schedule start afresh"},
	{"no-load-optim", O_NOLOADOPT, NULL, "--load weights and counters, but a fresh optimizer and schedule"},
	{"eval-only", O_EVALONLY, "BOOL", "True: evaluate the validation and test sets once, train nothing"},
	/* deprecated in Megatron: rejected with its message */
	{"batch-size", O_BATCHSIZE, "N", "no longer valid: use --micro-batch-size"},
	{"warmup", O_WARMUP, "N", "no longer valid: use --lr-warmup-fraction"},
	{"model-parallel-size", O_MPSIZE, "N", "no longer valid: use --tensor-model-parallel-size"},
	/* planning */
	/* optimizer */
	{"optimizer", O_OPTIMIZER, "NAME", "adam (AdamW, the default), lamb (apex FusedLAMB) or sgd (torch SGD)"},
	{"sgd-momentum", O_SGDMOM, "F", "--optimizer sgd: momentum (default 0.9, as Megatron)"},
	{"lamb-layerwise-noise", O_LAMBNOISE, "STD", "--optimizer lamb: add N(0,1) noise times STD times the RMS of each tensor's update, after the trust ratio (default 0: none)"},
	{"embedding-lr-mult", O_EMBLRMULT, "ALPHA", "the word embedding (and its tied output copy) learns at lr * ALPHA (default 1; every optimizer)"},
	{"alpha", O_ALPHA, "ALPHA", "the large-batch study's name for --embedding-lr-mult"},
	{"seed", O_SEED, "N", "seed of the initial weights, dropout and the data order (default 1234)"},
	{"weight-decay", O_WD, "F", "AdamW weight decay, not on biases and layer norms (default 0.01)"},
	{"clip-grad", O_CLIP, "F", "clip the global gradient norm to F (default 1.0; 0 off)"},
	{"adam-beta1", O_B1, "F", "Adam beta1 (default 0.9)"},
	{"adam-beta2", O_B2, "F", "Adam beta2 (default 0.999)"},
	{"adam-eps", O_EPS, "F", "Adam epsilon (default 1e-8)"},
	{"use-bnb-optimizer", O_BNB, NULL, "bitsandbytes' 8-bit Adam (block-wise, 2 B/param of state) with StableEmbedding (LayerNorm after the word embedding, xavier-uniform init, fp32 state)"},
	{"loss-scale", O_LOSSSCALE, "F", "fp16: a static loss scale F instead of the dynamic one"},
	{"initial-loss-scale", O_ILS, "F", "fp16 dynamic loss scale to start from (default 2^32)"},
	{"min-loss-scale", O_MINLS, "F", "fp16 loss scale floor (default 1)"},
	{"loss-scale-window", O_LSWIN, "N", "fp16: clean steps before the scale doubles (default 1000)"},
	{"hysteresis", O_HYST, "N", "fp16: overflows tolerated before the scale halves (default 2)"},
	/* logging and evaluation */
	{"log-interval", O_LOGINT, "N", "one log line every N iterations (default 100)"},
	{"tensorboard-dir", O_TBDIR, "DIR", "write TensorBoard event files with Megatron's tags"},
	{"tensorboard-log-interval", O_TBLOGINT, "N", "training scalars to TensorBoard every N iterations (default 1)"},
	{"no-log-learnig-rate-to-tensorboard", O_TBNOLR, NULL, "no learning-rate scalars (Megatron's spelling)"},
	{"no-log-loss-scale-to-tensorboard", O_TBNOLS, NULL, "no loss-scale scalars"},
	{"codecarbon-dir", O_CCDIR, "DIR", "energy and emissions in CodeCarbon's CSV, DIR/emissions-RRR.csv per rank"},
	{"carbon-intensity", O_CCINT, "G", "--codecarbon-dir: grams CO2eq per kWh (default 475, CodeCarbon's world average)"},
	{"cpu-tdp", O_CPUTDP, "W", "--codecarbon-dir without readable RAPL: the CPU's TDP, half of it counted (default 85)"},
	{"log-path", O_LOGPATH, "DIR", "write the arguments to DIR/args_TIME.txt at start-up"},
	{"log-timers-to-tensorboard", O_TBTIMERS, NULL, "iteration time and throughput to TensorBoard"},
	{"log-batch-size-to-tensorboard", O_TBBATCH, NULL, "global batch size to TensorBoard"},
	{"log-validation-ppl-to-tensorboard", O_TBPPL, NULL, "validation perplexity to TensorBoard"},
	{"log-num-zeros-in-grad", O_ZEROS, NULL, "count zero gradient elements (always in the log line)"},
	{"log-params-norm", O_PNORM, NULL, "log the norm of the parameters"},
	{"eval-interval", O_EVALINT, "N", "validate every N iterations (default 1000)"},
	{"eval-iters", O_EVALITERS, "N", "global batches per validation (default 100)"},
	/* stopping */
	{"exit-interval", O_EXITINT, "N", "save and exit 0 when the iteration is a multiple of N"},
	{"exit-duration-in-mins", O_EXITDUR, "M", "save and exit 0 after M minutes"},
	{"cuda-graph", O_CUDAGRAPH, NULL, "after a warm-up step, capture the training step as a CUDA graph and replay it (one GPU, static shapes; see train(1))"},
	{"profile", O_PROFILE, NULL, "bracket iterations [--profile-step-start, --profile-step-end) with cudaProfilerStart/Stop (nsys --capture-range=cudaProfilerApi)"},
	{"profile-step-start", O_PROFSTART, "N", "first profiled iteration, counted from 0 as Megatron-LM (default 10)"},
	{"profile-step-end", O_PROFEND, "N", "profiling stops before this iteration (default 12)"},
	{"profile-ranks", O_PROFRANKS, "R...", "the global ranks that profile (default 0)"},
	{"kill-switch-path", O_KILL, "PATH", "exit 0 at start-up if PATH exists; save and exit 0 if it appears"},
	{"skip-train-iteration-range", O_SKIPRANGE, "A-B...", "consume these iterations' data without training on it"},
	{"override-lr-scheduler", O_OVERRIDE, NULL, "on --load, the flags' schedule wins over the checkpoint's"},
	{"use-checkpoint-lr-scheduler", O_USECKPT, NULL, "on --load, the checkpoint's schedule wins"},
	/* lmtk */
	{"device", O_DEVICE, "DEV", "cpu, cuda, cuda:N or auto (default auto: a GPU when there is one)"},
	{"threads", O_THREADS, "N", "CPU threads (default: $SLURM_CPUS_PER_TASK, else all online CPUs)"},
	{"spike-policy", O_SPIKE, "P", "none, skip or rollback on a loss spike (default none: count and log)"},
	{"spike-factor", O_SPIKEF, "F", "a spike is a loss above F x its running mean, or not finite (default 3)"},
	{"peak-tflops", O_PEAK, "F", "device peak TFLOP/s for the MFU field (default: the device's)"},
	/* planning */
	{"dry-run", O_DRYRUN, NULL, "plan the run: print the arithmetic, allocate and train nothing"},
	{"format", O_FORMAT, "FMT", "with --dry-run: text (default) or json"},
	{"nodes", O_NODES, "N", "nodes (default $SLURM_JOB_NUM_NODES)"},
	{"gpus-per-node", O_GPUS, "N", "GPUs per node (default $SLURM_GPUS_ON_NODE)"},
	{"assumed-tflops", O_TFLOPS, "F", "TFLOPs per GPU as Megatron logs them, for the time estimate"},
	{"gpu-model", O_GPUMODEL, "GPU", "without --assumed-tflops: days from the step model of an h100 or a100 (default a100)"},
	{"step-model", O_STEPMODEL, "WHAT", "the step model prices lmtk's kernels (lmtk, default) or what Megatron-DeepSpeed runs (megatron-deepspeed)"},
	{"assumed-params", O_PARAMS, "N", "parameter count for time and checkpoint size (e.g. 176e9; default: exact)"},
	{"gpu-memory", O_GPUMEM, "GIB", "device memory per GPU in GiB (default 80)"},
	{"checkpoint-bandwidth", O_CKPTBW, "GB/S", "aggregate write bandwidth for saves, GB/s (default 5)"},
	{"vocab-size", O_VOCABSIZE, "N", "tokenizer vocabulary when its files are not on this machine"},
	{0},
};

/* Megatron-DeepSpeed flags train does not act on, each with its reason.  NOEFFECT: it cannot
 * change this run (the start-up line names it once); REFUSED: it would change the run and lmtk
 * does not do it, so the run stops before it starts (exit 2) saying what to use instead. */
#define NOFX(n, v, why) {n, v, ARG_NOEFFECT, why}
#define REFUSE(n, v, why) {n, v, ARG_REFUSED, why}
#define NOT_GPT "an ICT/ViT/retriever flag: train trains GPT, BLOOM, BERT and T5 models; drop it"
#define T5_NOISE "a T5/ICT/ViT flag of a later Megatron-LM's span corruption: --model-type t5 corrupts spans as T5Dataset did in 2021-22 (--mask-prob, geometric span lengths of mean 3); drop it"
#define MEMORY_ONLY "where or when the checkpointed inputs are kept, partitioned or synchronized: lmtk keeps each whole in its rank's memory, the recomputation is the same"
#define ZERO3 "a ZeRO-2/3 or offload setting: lmtk has ZeRO-1 (--zero-stage)"
#define FUSION "a kernel-fusion switch: the same math either way"
const struct args_other args_other[] = {
	/* cannot matter here */
	NOFX("distributed-backend", 1, "the transport follows the device: MPI between CPU ranks, NCCL between GPU ranks"),
	NOFX("DDP-impl", 1, "gradients are all-reduced by lmtk's own DP"),
	NOFX("use-contiguous-buffers-in-ddp", 0, "gradients are one contiguous buffer already"),
	NOFX("local_rank", 1, "the rank comes from the launcher's environment"),
	NOFX("lazy-mpu-init", 1, "process groups are set up by lmtk's dist"),
	NOFX("use-cpu-initialization", 0, "the initial weights are the same in any layout and on any device"),
	NOFX("num-workers", 1, "samples are read from the mmap'ed index, no loader processes"),
	NOFX("valid-num-workers", 1, "samples are read from the mmap'ed index, no loader processes"),
	NOFX("data-impl", 1, "every Megatron .bin/.idx is read through mmap"),
	NOFX("mmap-warmup", 0, "the mmap'ed index is paged in on demand"),
	NOFX("no-masked-softmax-fusion", 0, FUSION),
	NOFX("no-bias-dropout-fusion", 0, FUSION),
	NOFX("no-scatter-gather-tensors-in-pipeline", 0, "pipeline messages are sent whole"),
	NOFX("abort-on-unmet-fused-kernel-constraints", 0, "no fused-kernel constraints to meet"),
	NOFX("sync-tp-duplicated-parameters", 0, "replicated tensors are bit-identical across TP ranks by construction"),
	NOFX("no-query-key-layer-scaling", 0, "attention scores and softmax are fp32: the scaling cancels"),
	NOFX("attention-softmax-in-fp32", 0, "the softmax is always fp32"),
	NOFX("cpu-optimizer", 0, "where Adam runs: the same update"),
	NOFX("cpu_torch_adam", 0, "where Adam runs: the same update"),
	NOFX("adlr-autoresume", 0, "resume is SIGUSR1 + --load (slurm/train.slurm)"),
	NOFX("adlr-autoresume-interval", 1, "resume is SIGUSR1 + --load (slurm/train.slurm)"),
	NOFX("deepspeed_mpi", 0, "MPI is found from the launcher's environment"),
	NOFX("log-level", 1, "Python logging levels"),
	NOFX("log-level-replica", 1, "Python logging levels"),
	NOFX("tensorboard-queue-size", 1, "events are written as they come"),
	NOFX("init-method-xavier-uniform", 0, "Megatron-DeepSpeed reads it in its ViT model only; a GPT's weights keep the normal init of --init-method-std"),
	NOFX("onnx-safe", 1, "the fused tanh GeLU is used, as in Megatron with bias-gelu fusion on"),
	NOFX("no-load-rng", 0, "dropout is counter-based from --seed and the sample: there is no RNG state"),
	NOFX("no-save-rng", 0, "dropout is counter-based from --seed and the sample: there is no RNG state"),
	NOFX("distribute-checkpointed-activations", 0, MEMORY_ONLY),
	NOFX("partition-activations", 0, MEMORY_ONLY),
	NOFX("contigious-checkpointing", 0, MEMORY_ONLY),
	NOFX("checkpoint-in-cpu", 0, MEMORY_ONLY),
	NOFX("synchronize-each-layer", 0, MEMORY_ONLY),
	NOFX("profile-backward", 0, "DeepSpeed's timing of checkpointed layers, a profiling switch"),
	NOFX("zero-reduce-scatter", 0, ZERO3),
	NOFX("zero-contigious-gradients", 0, ZERO3),
	NOFX("zero-reduce-bucket-size", 1, "DeepSpeed's engine takes its bucket from the config's zero_optimization.reduce_bucket_size, which applies here under --deepspeed; without it, --ddp-bucket-size"),
	NOFX("zero-allgather-bucket-size", 1, ZERO3),
	NOFX("remote-device", 1, ZERO3),
	NOFX("use-pin-memory", 0, ZERO3),
	NOFX("scattered-embeddings", 0, ZERO3),
	NOFX("split-transformers", 0, ZERO3),
	NOFX("memory-centric-tiled-linear", 0, ZERO3),
	NOFX("tile-factor", 1, ZERO3),
	/* would change the run: refused */
	REFUSE("no-save-optim", 0, "lmtk checkpoints always hold the optimizer state; drop it (ckpt-merge-tp --format hf exports weights only)"),
	REFUSE("universal-checkpoint", 0, "DeepSpeed universal checkpoints are not read; use an lmtk checkpoint"),
	REFUSE("inference", 0, "train trains; drop it"),
	REFUSE("fp16-lm-cross-entropy", 0, "the cross-entropy is always computed in fp32; drop it"),
	REFUSE("fp32-residual-connection", 0, "the residual stream's precision is the backend's (fp32 on cpu; bf16 or fp16 on cuda); drop it"),
	REFUSE("num-layers-per-virtual-pipeline-stage", 1, "the interleaved pipeline schedule is not implemented; drop it for 1F1B (the same numerics)"),
	REFUSE("no-bias-gelu-fusion", 0, "without the fusion Megatron uses the exact erf GeLU, which is not implemented; drop it (the tanh GeLU), or add --openai-gelu"),
	REFUSE("loss-on-targets-only", 0, "prefix-LM losses are not implemented; drop it"),
	REFUSE("reweight-loss-based-on-position-frequency", 0, "prefix-LM loss weighting is not implemented; drop it"),
	REFUSE("pipeline-model-parallel-split-rank", 1, "the pipeline stage where T5's decoder begins: T5 is not split over pipeline stages here; train it with --pipeline-model-parallel-size 1 (TP and DP)"),
	REFUSE("retriever-seq-length", 1, NOT_GPT), REFUSE("sample-rate", 1, NOT_GPT),
	REFUSE("noise-density", 1, T5_NOISE), REFUSE("mean-noise-span-length", 1, T5_NOISE),
	REFUSE("ict-head-size", 1, NOT_GPT), REFUSE("biencoder-projection-dim", 1, NOT_GPT),
	REFUSE("biencoder-shared-query-context-model", 0, NOT_GPT), REFUSE("ict-load", 1, NOT_GPT),
	REFUSE("bert-load", 1, NOT_GPT), REFUSE("titles-data-path", 1, NOT_GPT),
	REFUSE("query-in-block-prob", 1, NOT_GPT), REFUSE("use-one-sent-docs", 0, NOT_GPT),
	REFUSE("evidence-data-path", 1, NOT_GPT), REFUSE("retriever-report-topk-accuracies", 2, NOT_GPT),
	REFUSE("retriever-score-scaling", 0, NOT_GPT), REFUSE("block-data-path", 1, NOT_GPT),
	REFUSE("embedding-path", 1, NOT_GPT), REFUSE("indexer-batch-size", 1, NOT_GPT),
	REFUSE("indexer-log-interval", 1, NOT_GPT), REFUSE("num-classes", 1, NOT_GPT),
	REFUSE("img-dim", 1, NOT_GPT), REFUSE("num-channels", 1, NOT_GPT), REFUSE("patch-dim", 1, NOT_GPT),
	{0, 0, 0, 0},
};

void args_init(struct train_args *a)
{
	memset(a, 0, sizeof *a);
	a->num_layers = a->hidden_size = a->ffn_hidden_size = a->num_attention_heads = -1;
	a->kv_channels = a->seq_length = a->max_position_embeddings = -1;
	a->decoder_seq_length = a->vocab_extra_ids = -1;
	a->make_vocab_size_divisible_by = 128;
	a->pad_vocab_size_to = -1;
	a->init_method_std = 0.02;
	a->layernorm_epsilon = 1e-5;
	a->hidden_dropout = a->attention_dropout = 0.1;
	a->tp = a->pp = 1;
	a->zero_stage = -1;
	a->checkpoint_num_layers = -1;
	a->micro_batch_size = a->global_batch_size = -1;
	a->train_samples = a->train_iters = a->train_tokens = -1;
	a->lr = a->lr_warmup_fraction = -1;
	a->lr_decay_style = "linear";
	a->lr_warmup_samples = a->lr_warmup_iters = -1;
	a->lr_decay_samples = a->lr_decay_iters = a->lr_decay_tokens = -1;
	a->save_interval = -1;
	a->format = FMT_TEXT;
	a->nodes = a->gpus_per_node = a->vocab_size = -1;
	a->assumed_tflops = a->assumed_params = -1;
	a->gpu_memory_gib = 80;
	a->checkpoint_gbps = 5;
	a->seed = 1234;
	a->weight_decay = 0.01;
	a->clip_grad = 1.0;
	a->adam_beta1 = 0.9;
	a->adam_beta2 = 0.999;
	a->adam_eps = 1e-8;
	a->initial_loss_scale = 4294967296.0;
	a->min_loss_scale = 1;
	a->carbon_intensity = 475;   /* CodeCarbon's world average, g CO2eq/kWh */
	a->cpu_tdp = 85;             /* CodeCarbon's default TDP */
	a->loss_scale_window = 1000;
	a->hysteresis = 2;
	a->log_interval = 100;
	a->optimizer = "adam";
	a->sgd_momentum = 0.9;
	a->embedding_lr_mult = 1;
	a->profile_step_start = 10;   /* Megatron-LM's defaults */
	a->profile_step_end = 12;
	a->nprofile_ranks = 1;
	a->eval_interval = 1000;
	a->eval_iters = 100;
	a->device = "auto";
	a->spike_factor = 3;
	a->tb_log_interval = 1;
	a->num_tokentypes = -1;
	a->mask_prob = 0.15;       /* Megatron's defaults */
	a->short_seq_prob = 0.1;
}

int args_int(const char *s, int64_t *v)
{
	return num_int(s, 0, INT64_MAX, v) == NUM_OK ? 0 : -1;
}

int args_float(const char *s, double *v)
{
	return num_float(s, v);
}

static int pos_int(const char *arg, int64_t *v, char *err, size_t errlen)
{
	if (args_int(arg, v) < 0 || *v <= 0)
		return errf(err, errlen, "'%s' is not a positive integer", arg);
	return 0;
}

/* A size the model or the run is built from, with its limit: every product the plan and the
 * model form of them (parameters, bytes, FLOPs: at most about 2^60) then fits in 64 bits, so no
 * size wraps into a negative count or a division by zero.  The limits are far above any model
 * trained (BLOOM-176B: 70 layers, hidden 14336, sequence 2048). */
static int size_int(const char *arg, int64_t *v, int64_t max, char *err, size_t errlen)
{
	if (pos_int(arg, v, err, errlen) < 0)
		return -1;
	if (*v > max)
		return errf(err, errlen, "%s is above the limit of %lld", arg, (long long)max);
	return 0;
}

/* A probability: [0, 1) - a dropout of 1 or more zeroes (or inverts) every activation */
static int prob(const char *arg, double *v, char *err, size_t errlen)
{
	if (args_float(arg, v) < 0 || *v < 0 || *v >= 1)
		return errf(err, errlen, "'%s' is not a probability in [0, 1)", arg);
	return 0;
}

/* Threads of the CPU backend: more than this machine could ever run is a mistake (OpenMP's
 * runtime crashes sizing 100000) */
#define ARGS_MAX_THREADS 4096

static int nonneg_int(const char *arg, int64_t *v, char *err, size_t errlen)
{
	if (args_int(arg, v) < 0)
		return errf(err, errlen, "'%s' is not a non-negative integer", arg);
	return 0;
}

static int num(const char *arg, double *v, double min, int min_open, char *err, size_t errlen)
{
	if (args_float(arg, v) < 0 || *v < min || (min_open && *v == min))
		return errf(err, errlen, "'%s' is not a number %s %g", arg, min_open ? ">" : ">=", min);
	return 0;
}

/* 'type:transformer', 'type:transformer|embedding' (either order, DeepSpeed matches the regex
 * case-insensitively against layer class names). */
static int partition_method(struct train_args *a, const char *arg, char *err, size_t errlen)
{
	char buf[128];
	int tr = 0, emb = 0;
	if (strncasecmp(arg, "type:", 5) != 0 || strlen(arg) >= sizeof buf)
		goto bad;
	snprintf(buf, sizeof buf, "%s", arg + 5);
	for (char *save = NULL, *w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save)) {
		if (strcasecmp(w, "transformer") == 0)
			tr = 1;
		else if (strcasecmp(w, "embedding") == 0)
			emb = 1;
		else
			goto bad;
	}
	if (!tr)
		goto bad;
	a->pp_partition_method = arg;
	a->pp_embedding = emb;
	return 0;
bad:
	return errf(err, errlen, "'%s': the plan knows 'type:transformer' and "
		    "'type:transformer|embedding'", arg);
}

/* Splits a multi-value argument (ARGS_SEP-joined by args_normalize) into at most max values,
 * kept in a copy that lives as long as the program; returns how many there are (which may be
 * more than max). */
static int split_values(const char *arg, const char **v, int max)
{
	char *copy = strdup(arg), *save = NULL;
	int n = 0;
	if (!copy)
		xalloc_die("a copy of a multi-value flag's values", strlen(arg) + 1);
	for (char *t = strtok_r(copy, ARGS_SEP, &save); t; t = strtok_r(NULL, ARGS_SEP, &save)) {
		if (n < max)
			v[n] = t;
		n++;
	}
	return n;
}

static int given(const struct train_args *a, int key)
{
	unsigned k = (unsigned)(key - O_LAYERS);
	return k < 64 * sizeof a->seen / sizeof *a->seen && (a->seen[k / 64] >> (k % 64) & 1);
}

int args_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	struct train_args *a = ctx;
	unsigned k = (unsigned)(key - O_LAYERS);
	if (k < 64 * sizeof a->seen / sizeof *a->seen)
		a->seen[k / 64] |= (uint64_t)1 << (k % 64);
	switch (key) {
	case O_LAYERS: return size_int(arg, &a->num_layers, 1 << 16, err, errlen);
	case O_HIDDEN: return size_int(arg, &a->hidden_size, 1 << 20, err, errlen);
	case O_FFN: return size_int(arg, &a->ffn_hidden_size, 1 << 22, err, errlen);
	case O_HEADS: return size_int(arg, &a->num_attention_heads, 1 << 16, err, errlen);
	case O_KV: return size_int(arg, &a->kv_channels, 1 << 16, err, errlen);
	case O_SEQ:
		a->seq_given = 1;
		return size_int(arg, &a->seq_length, 1 << 24, err, errlen);
	case O_MAXPOS: return size_int(arg, &a->max_position_embeddings, 1 << 24, err, errlen);
	case O_POSEMB:
		if (strcmp(arg, "absolute") == 0 || strcmp(arg, "learned") == 0)
			a->pos_emb = POS_LEARNED;
		else if (strcmp(arg, "alibi") == 0)
			a->pos_emb = POS_ALIBI;
		else if (strcmp(arg, "rotary") == 0)
			a->pos_emb = POS_ROTARY;
		else
			return errf(err, errlen, "'%s' is not one of absolute, alibi, rotary", arg);
		return 0;
	case O_EMBLN: a->embed_layernorm = 1; return 0;
	case O_BNB: a->use_bnb_optimizer = 1; return 0;
	case O_DIVBY: return size_int(arg, &a->make_vocab_size_divisible_by, 1 << 20, err, errlen);
	case O_PADTO: return size_int(arg, &a->pad_vocab_size_to, INT32_MAX / 2, err, errlen);
	case O_INITSTD: return num(arg, &a->init_method_std, 0, 1, err, errlen);
	case O_LNEPS: return num(arg, &a->layernorm_epsilon, 0, 1, err, errlen);
	case O_HDROP: return prob(arg, &a->hidden_dropout, err, errlen);
	case O_ADROP: return prob(arg, &a->attention_dropout, err, errlen);
	case O_GLU: a->glu_activation = arg; return 0;
	case O_TP: return size_int(arg, &a->tp, 1 << 16, err, errlen);
	case O_PP: return size_int(arg, &a->pp, 1 << 16, err, errlen);
	case O_PPMETHOD: return partition_method(a, arg, err, errlen);
	case O_ZERO:
		if (strcmp(arg, "0") == 0 || strcmp(arg, "1") == 0) {
			a->zero_stage = arg[0] - '0';
			return 0;
		}
		return errf(err, errlen, "'%s': the plan models ZeRO stages 0 and 1", arg);
	case O_OVERLAP: a->overlap_grad_reduce = 1; return 0;
	case O_BUCKET: return pos_int(arg, &a->ddp_bucket_size, err, errlen);
	case O_DEEPSPEED: a->deepspeed = 1; return 0;
	case O_CKPT: a->checkpoint_activations = 1; return 0;
	case O_CKNL: return pos_int(arg, &a->checkpoint_num_layers, err, errlen);
	case O_DSACK: a->ds_activation_checkpointing = 1; return 0;
	case O_MBS: return size_int(arg, &a->micro_batch_size, 1 << 20, err, errlen);
	case O_GBS: return size_int(arg, &a->global_batch_size, 1 << 30, err, errlen);
	case O_RAMPUP: {
		/* args_normalize() joined "START INCR SAMPLES" into one argument; a repeated flag
		 * replaces the values, as in argparse */
		const char *v[4];
		int n = split_values(arg, v, 4);
		a->nrampup = n;
		for (int i = 0; i < n && i < 3; i++)
			if (nonneg_int(v[i], &a->rampup[i], err, errlen) < 0)
				return -1;
		return 0;
	}
	case O_TSAMPLES: return size_int(arg, &a->train_samples, (int64_t)1 << 40, err, errlen);
	case O_TITERS: return size_int(arg, &a->train_iters, (int64_t)1 << 40, err, errlen);
	case O_TTOKENS: return size_int(arg, &a->train_tokens, (int64_t)1 << 50, err, errlen);
	case O_LR: return num(arg, &a->lr, 0, 0, err, errlen);
	case O_MINLR: a->min_lr_set = 1; return num(arg, &a->min_lr, 0, 0, err, errlen);
	case O_DECAYSTYLE:
		if (strcmp(arg, "linear") && strcmp(arg, "cosine") && strcmp(arg, "constant"))
			return errf(err, errlen, "'%s' is not one of linear, cosine, constant", arg);
		a->lr_decay_style = arg;
		return 0;
	case O_WSAMPLES: return nonneg_int(arg, &a->lr_warmup_samples, err, errlen);
	case O_WITERS: return nonneg_int(arg, &a->lr_warmup_iters, err, errlen);
	case O_WFRAC:
		if (num(arg, &a->lr_warmup_fraction, 0, 0, err, errlen) < 0 || a->lr_warmup_fraction > 1)
			return errf(err, errlen, "'%s' is not a fraction between 0 and 1", arg);
		return 0;
	case O_DSAMPLES: return pos_int(arg, &a->lr_decay_samples, err, errlen);
	case O_DITERS: return pos_int(arg, &a->lr_decay_iters, err, errlen);
	case O_DTOKENS: return pos_int(arg, &a->lr_decay_tokens, err, errlen);
	case O_BF16: a->bf16 = 1; return 0;
	case O_FP16: a->fp16 = 1; return 0;
	case O_ACCFP32: a->accumulate_fp32 = 1; return 0;
	case O_DATA:
		a->ndata_path = split_values(arg, a->data_path, ARGS_MAX_DATA + 1);
		if (a->ndata_path > ARGS_MAX_DATA)
			return errf(err, errlen, "more than %d values", ARGS_MAX_DATA);
		return 0;
	case O_SPLIT: a->split = arg; return 0;
	case O_DCACHE: a->data_cache_path = arg; return 0;
	case O_WSPLIT: case O_VWSPLIT: case O_TWSPLIT:
	case O_WSPLITPATH: case O_VWSPLITPATH: case O_TWSPLITPATH: {
		int w = key == O_WSPLIT || key == O_WSPLITPATH ? 0 : key == O_VWSPLIT || key == O_VWSPLITPATH ? 1 : 2;
		a->wsplit[w] = arg;
		a->wsplit_file[w] = key == O_WSPLITPATH || key == O_VWSPLITPATH || key == O_TWSPLITPATH;
		a->weighted_split_paths |= w == 0;
		return 0;
	}
	case O_TOKTYPE:
		if (strcmp(arg, "GPT2BPETokenizer") && strcmp(arg, "PretrainedFromHF") &&
		    strcmp(arg, "BertWordPieceLowerCase") && strcmp(arg, "BertWordPieceCase"))
			return errf(err, errlen, "'%s': train knows GPT2BPETokenizer, PretrainedFromHF, "
				    "BertWordPieceLowerCase and BertWordPieceCase", arg);
		a->tokenizer_type = arg;
		return 0;
	case O_VOCAB: a->vocab_file = arg; return 0;
	case O_MERGES: a->merge_file = arg; return 0;
	case O_TOKPATH: a->tokenizer_name_or_path = arg; return 0;
	case O_SAVE: a->save = arg; return 0;
	case O_LOAD: a->load = arg; return 0;
	case O_SAVEINT: return pos_int(arg, &a->save_interval, err, errlen);
	case O_SAVEKEEP: return pos_int(arg, &a->save_keep, err, errlen);
	case O_SAVEKEEPEVERY: return pos_int(arg, &a->save_keep_every, err, errlen);
	case O_BATCHSIZE:
		return errf(err, errlen, "argument is no longer valid, use --micro-batch-size instead");
	case O_WARMUP:
		return errf(err, errlen, "argument is no longer valid, use --lr-warmup-fraction instead");
	case O_MPSIZE:
		return errf(err, errlen, "argument is no longer valid, use --tensor-model-parallel-size "
			    "instead");
	case O_DRYRUN: a->dry_run = 1; return 0;
	case O_FORMAT:
		if (strcmp(arg, "text") == 0)
			a->format = FMT_TEXT;
		else if (strcmp(arg, "json") == 0)
			a->format = FMT_JSON;
		else
			return errf(err, errlen, "'%s' is not one of text, json", arg);
		return 0;
	case O_NODES: a->nodes_from = "--nodes"; return pos_int(arg, &a->nodes, err, errlen);
	case O_GPUS: a->gpus_from = "--gpus-per-node"; return pos_int(arg, &a->gpus_per_node, err, errlen);
	case O_TFLOPS: return num(arg, &a->assumed_tflops, 0, 1, err, errlen);
	case O_PARAMS:
		if (num(arg, &a->assumed_params, 0, 1, err, errlen) < 0)
			return -1;
		a->assumed_params = round(a->assumed_params);
		return 0;
	case O_GPUMEM: return num(arg, &a->gpu_memory_gib, 0, 1, err, errlen);
	case O_CKPTBW: return num(arg, &a->checkpoint_gbps, 0, 1, err, errlen);
	case O_VOCABSIZE: return size_int(arg, &a->vocab_size, INT32_MAX / 2, err, errlen);
	case O_GPUMODEL:   /* a device of the step model's table: main.c checks, knowing it */
		a->gpu_model = arg;
		return 0;
	case O_STEPMODEL:
		if (strcmp(arg, "lmtk") != 0 && strcmp(arg, "megatron-deepspeed") != 0)
			return errf(err, errlen, "'%s' is not one of lmtk, megatron-deepspeed", arg);
		a->step_model = arg;
		return 0;
	case O_SEED: return nonneg_int(arg, &a->seed, err, errlen);
	case O_WD: return num(arg, &a->weight_decay, 0, 0, err, errlen);
	case O_CLIP: a->given |= ARGS_GIVEN_CLIP; return num(arg, &a->clip_grad, 0, 0, err, errlen);
	case O_B1: return num(arg, &a->adam_beta1, 0, 0, err, errlen);
	case O_B2: return num(arg, &a->adam_beta2, 0, 0, err, errlen);
	case O_EPS: return num(arg, &a->adam_eps, 0, 1, err, errlen);
	case O_SGDMOM: a->sgd_momentum_given = 1; return num(arg, &a->sgd_momentum, 0, 0, err, errlen);
	case O_EMBLRMULT:
	case O_ALPHA:
		a->embedding_lr_mult_given = key == O_ALPHA ? "--alpha" : "--embedding-lr-mult";
		return num(arg, &a->embedding_lr_mult, 0, 0, err, errlen);
	case O_LAMBNOISE:
		a->lamb_noise_given = 1;
		return num(arg, &a->lamb_layerwise_noise, 0, 0, err, errlen);
	case O_ILS:
		a->given |= ARGS_GIVEN_INITIAL_LOSS_SCALE;
		return num(arg, &a->initial_loss_scale, 0, 1, err, errlen);
	case O_MINLS:
		a->given |= ARGS_GIVEN_MIN_LOSS_SCALE;
		return num(arg, &a->min_loss_scale, 0, 1, err, errlen);
	case O_LSWIN:
		a->given |= ARGS_GIVEN_LOSS_SCALE_WINDOW;
		return pos_int(arg, &a->loss_scale_window, err, errlen);
	case O_HYST: a->given |= ARGS_GIVEN_HYSTERESIS; return pos_int(arg, &a->hysteresis, err, errlen);
	case O_LOGINT: return pos_int(arg, &a->log_interval, err, errlen);
	case O_TBDIR: a->tensorboard_dir = arg; return 0;
	case O_TBTIMERS: a->tb_timers = 1; return 0;
	case O_TBBATCH: a->tb_batch = 1; return 0;
	case O_TBPPL: a->tb_ppl = 1; return 0;
	case O_ZEROS: a->log_zeros = 1; return 0;
	case O_PNORM: a->log_params_norm = 1; return 0;
	case O_EVALINT: return pos_int(arg, &a->eval_interval, err, errlen);
	case O_EVALITERS: return nonneg_int(arg, &a->eval_iters, err, errlen);
	case O_EXITINT: return pos_int(arg, &a->exit_interval, err, errlen);
	case O_EXITDUR: return num(arg, &a->exit_duration_mins, 0, 1, err, errlen);
	case O_KILL: a->kill_switch_path = arg; return 0;
	case O_PROFILE: a->profile = 1; return 0;
	case O_CUDAGRAPH: a->cuda_graph = 1; return 0;
	case O_PROFSTART:
		a->profile_range_given = 1;
		return nonneg_int(arg, &a->profile_step_start, err, errlen);
	case O_PROFEND:
		a->profile_range_given = 1;
		return nonneg_int(arg, &a->profile_step_end, err, errlen);
	case O_PROFRANKS: {
		a->profile_range_given = 1;
		const char *v[ARGS_MAX_PROFRANKS + 1];
		int n = split_values(arg, v, ARGS_MAX_PROFRANKS + 1);
		if (n > ARGS_MAX_PROFRANKS)
			return errf(err, errlen, "more than %d ranks", ARGS_MAX_PROFRANKS);
		a->nprofile_ranks = 0;
		for (int i = 0; i < n; i++)
			if (nonneg_int(v[i], &a->profile_ranks[a->nprofile_ranks++], err, errlen) < 0)
				return -1;
		return 0;
	}
	case O_SKIPRANGE: {
		const char *v[ARGS_MAX_SKIP + 1];
		int n = split_values(arg, v, ARGS_MAX_SKIP + 1);
		if (n > ARGS_MAX_SKIP)
			return errf(err, errlen, "more than %d ranges", ARGS_MAX_SKIP);
		a->nskip = 0;
		for (int i = 0; i < n; i++) {
			char *dash = strchr(v[i], '-'), buf[64];
			int64_t lo, hi;
			if (!dash || dash - v[i] >= (long)sizeof buf)
				return errf(err, errlen, "'%s' is not a range A-B", v[i]);
			snprintf(buf, sizeof buf, "%.*s", (int)(dash - v[i]), v[i]);
			if (args_int(buf, &lo) < 0 || args_int(dash + 1, &hi) < 0 || lo < 1 || hi < lo)
				return errf(err, errlen, "'%s' is not a range A-B of iterations, 1 <= A <= B", v[i]);
			a->skip[a->nskip][0] = lo;
			a->skip[a->nskip++][1] = hi;
		}
		return 0;
	}
	case O_OVERRIDE: a->override_lr_scheduler = 1; return 0;
	case O_USECKPT: a->use_checkpoint_lr_scheduler = 1; return 0;
	case O_DEVICE: a->device = arg; return 0;
	case O_THREADS: return size_int(arg, &a->threads, ARGS_MAX_THREADS, err, errlen);
	case O_SPIKE:
		if (strcmp(arg, "none") && strcmp(arg, "skip") && strcmp(arg, "rollback"))
			return errf(err, errlen, "'%s' is not one of none, skip, rollback", arg);
		a->spike_policy = arg[0] == 'n' ? 0 : arg[0] == 's' ? 1 : 2;
		return 0;
	case O_SPIKEF: return num(arg, &a->spike_factor, 1, 1, err, errlen);
	case O_PEAK: return num(arg, &a->peak_tflops, 0, 1, err, errlen);
	case O_OPTIMIZER:
		a->optimizer_given = 1;
		if (strcmp(arg, "adam") == 0 || strcmp(arg, "lamb") == 0 || strcmp(arg, "sgd") == 0) {
			a->optimizer = arg;
			return 0;
		}
		return errf(err, errlen, "'%s' is not one of adam, lamb, sgd", arg);
	case O_DATALOADER:
		if (strcmp(arg, "single") == 0)
			return 0;
		if (strcmp(arg, "cyclic") == 0)
			return errf(err, errlen, "'cyclic' is not implemented: use single, Megatron's "
				    "pretraining sampler (the default)");
		return errf(err, errlen, "'%s' is not one of single, cyclic", arg);
	case O_EVALONLY:
		/* argparse's type=bool: bool('False') is True in Python, so Megatron evaluates for any
		 * value; a value that reads as "no" is surely a mistake */
		if (!strcasecmp(arg, "false") || !strcmp(arg, "0") || !strcasecmp(arg, "no") || !*arg)
			return errf(err, errlen, "'%s': Megatron reads any value as True (Python's "
				    "bool('%s')); drop the flag to train", arg, arg);
		a->eval_only = 1;
		return 0;
	case O_FINETUNE: a->finetune = 1; return 0;
	case O_NOLOADOPT: a->no_load_optim = 1; return 0;
	case O_LOSSSCALE:
		a->given |= ARGS_GIVEN_LOSS_SCALE;
		return num(arg, &a->loss_scale, 0, 1, err, errlen);
	case O_TBLOGINT: return pos_int(arg, &a->tb_log_interval, err, errlen);
	case O_TBNOLR: a->tb_no_lr = 1; return 0;
	case O_TBNOLS: a->tb_no_loss_scale = 1; return 0;
	case O_CCDIR: a->codecarbon_dir = arg; return 0;
	case O_CCINT: return num(arg, &a->carbon_intensity, 0, 0, err, errlen);
	case O_CPUTDP: return num(arg, &a->cpu_tdp, 0, 1, err, errlen);
	case O_LOGPATH: a->log_path = arg; return 0;
	case O_EODMASK: a->eod_mask_loss = 1; return 0;
	case O_RESETPOS: a->reset_position_ids = 1; return 0;
	case O_RESETATT: a->reset_attention_mask = 1; return 0;
	case O_POSTLN: a->post_ln_residual = 1; return 0;
	case O_OPENAIGELU: a->openai_gelu = 1; return 0;
	case O_DEEPSCALE: a->deepspeed = 1; return 0;
	case O_DSCONFIG: a->deepspeed_config = arg; return 0;
	case O_CURRICULUM: a->curriculum_flag = 1; return 0;
	case O_MODELTYPE:
		if (strcmp(arg, "gpt") == 0)
			a->model_type = MT_GPT;
		else if (strcmp(arg, "bert") == 0)
			a->model_type = MT_BERT;
		else if (strcmp(arg, "t5") == 0)
			a->model_type = MT_T5;
		else
			return errf(err, errlen, "'%s' is not one of gpt, bert, t5", arg);
		return 0;
	case O_TOKTYPES:
		a->bert_flag = "--num-tokentypes";
		return nonneg_int(arg, &a->num_tokentypes, err, errlen);
	case O_NOBINHEAD: a->bert_flag = "--bert-no-binary-head"; a->bert_no_binary_head = 1; return 0;
	case O_MASKPROB:
		a->masklm_flag = "--mask-prob";
		if (num(arg, &a->mask_prob, 0, 0, err, errlen) < 0 || a->mask_prob > 1)
			return errf(err, errlen, "'%s' is not a probability", arg);
		return 0;
	case O_SHORTSEQ:
		a->masklm_flag = "--short-seq-prob";
		if (num(arg, &a->short_seq_prob, 0, 0, err, errlen) < 0 || a->short_seq_prob > 1)
			return errf(err, errlen, "'%s' is not a probability", arg);
		return 0;
	case O_ENCSEQ:
		a->t5_flag = "--encoder-seq-length";
		a->encoder_seq_given = 1;
		return pos_int(arg, &a->seq_length, err, errlen);
	case O_DECSEQ:
		a->t5_flag = "--decoder-seq-length";
		return pos_int(arg, &a->decoder_seq_length, err, errlen);
	case O_EXTRAIDS:
		a->t5_flag = "--vocab-extra-ids";
		return nonneg_int(arg, &a->vocab_extra_ids, err, errlen);
	}
	return errf(err, errlen, "unhandled option");
}

/* --- argv ----------------------------------------------------------------------------------- */

/* records an args_other flag once in the list of its class */
static void record_other(struct train_args *a, const struct args_other *g)
{
	const struct args_other **list = g->cls == ARG_REFUSED ? a->refused : a->noeffect;
	int *n = g->cls == ARG_REFUSED ? &a->nrefused : &a->nnoeffect;
	for (int i = 0; i < *n; i++)
		if (list[i] == g)
			return;
	if (*n < ARGS_MAX_OTHER)
		list[(*n)++] = g;
}

/* args_other's keys: their index from here */
#define OTHER_KEY 100000

static int other_opt(void *ctx, int key, const char *arg, char *err, size_t errlen)
{
	(void)arg, (void)err, (void)errlen;
	record_other(ctx, &args_other[key - OTHER_KEY]);
	return 0;
}

/* "--f a b c": one occurrence, as argparse has it, so that a later --f replaces the values instead
 * of adding to them: args_opt gets them joined by ARGS_SEP */
static int multi_opt(void *ctx, int key, const char *const *vals, int n, char *err, size_t errlen)
{
	char *joined = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&joined, &len);
	if (!f)
		xalloc_die("a multi-value flag's joined values", 0);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? ARGS_SEP : "", vals[i]);
	if (fclose(f) != 0)
		xalloc_die("a multi-value flag's joined values", len);
	return args_opt(ctx, key, joined, err, errlen);  /* the values live on: they are kept */
}

void args_groups(struct train_args *a, struct optgroup *g)
{
	static struct opt *other;
	if (!other) {
		size_t n = 0;
		while (args_other[n].name)
			n++;
		if (!(other = calloc(n + 1, sizeof *other)))
			xalloc_die("the table of accepted and refused Megatron flags", (n + 1) * sizeof *other);
		for (size_t i = 0; i < n; i++)   /* help NULL: --help lists them by class */
			other[i] = (struct opt){args_other[i].name, OTHER_KEY + (int)i,
				args_other[i].values == 2 ? "V..." : args_other[i].values ? "V" : NULL, NULL};
	}
	g[0] = (struct optgroup){args_opts, args_opt, a, multi_opt};
	g[1] = (struct optgroup){other, other_opt, a, NULL};
	g[2] = (struct optgroup){0};
}

char *args_other_list(enum arg_class cls, int width, int indent)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);
	int col = indent, first = 1;
	for (const struct args_other *g = args_other; g->name; g++) {
		int n = (int)strlen(g->name) + 2;  /* "--name" */
		if (g->cls != cls)
			continue;
		if (!first) {
			if (col + n + 2 > width) {
				fprintf(f, ",\n%*s", indent, "");
				col = indent;
			} else {
				fputs(", ", f);
				col += 2;
			}
		}
		first = 0;
		fprintf(f, "--%s", g->name);
		col += n;
	}
	if (fclose(f) != 0 || !s)
		xalloc_die("the list of accepted or refused flags for --help", len);
	return s;
}

/* The long name of an option of args_opts, by its key */
static const char *name_of(int key)
{
	for (const struct opt *o = args_opts; o->name; o++)
		if (o->key == key)
			return o->name;
	return "?";
}

void args_name_inert(struct train_args *a)
{
	static const int scaler[] = {O_ILS, O_MINLS, O_LSWIN, O_HYST},
		resume[] = {O_OVERRIDE, O_USECKPT},
		tb[] = {O_TBLOGINT, O_TBTIMERS, O_TBBATCH, O_TBPPL, O_TBNOLR, O_TBNOLS},
		carbon[] = {O_CCINT, O_CPUTDP};
	struct { const int *keys; size_t n; int inert; const char *why; } groups[] = {
		{scaler, 4, !a->fp16, "without --fp16 there is no loss scaler, as in Megatron"},
		{resume, 2, !a->load, "without --load there is no checkpoint schedule to weigh"},
		{tb, 6, !a->tensorboard_dir, "without --tensorboard-dir nothing is written to "
		 "TensorBoard"},
		{carbon, 2, !a->codecarbon_dir, "without --codecarbon-dir no energy is tracked"},
	};
	for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
		for (size_t i = 0; groups[g].inert && i < groups[g].n; i++)
			if (given(a, groups[g].keys[i]))
				args_noeffect_add(a, name_of(groups[g].keys[i]), "%s", groups[g].why);
	if (given(a, O_SPLIT) && a->weighted_split_paths)
		args_noeffect_add(a, "split", "the weighted split paths give each set's own split");
	if (given(a, O_PPMETHOD) && a->pp <= 1)
		args_noeffect_add(a, "pp-partition-method", "at PP=1 there is one stage, holding every "
				  "layer");
	if (a->ds_act_keys[0])
		args_noeffect_add(a, "deepspeed_config", "%s: activation_checkpointing's %s: one device "
				  "per rank keeps each checkpointed chunk input whole in its own memory - "
				  "nothing to partition, lay out, move to the CPU, synchronize or profile%s",
				  a->deepspeed_config, a->ds_act_keys, a->checkpoint_activations ? "" :
				  "; without --checkpoint-activations nothing is checkpointed");
}

void args_noeffect_add(struct train_args *a, const char *name, const char *fmt, ...)
{
	char *why = NULL, *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&why, fmt, ap);
	va_end(ap);
	if (n < 0 || asprintf(&s, "%s%s--%s (%s)", a->noeffect_more ? a->noeffect_more : "",
			      a->noeffect_more ? ", " : "", name, why) < 0)
		xalloc_die("the line of flags that have no effect", 0);
	free(why);
	free(a->noeffect_more);
	a->noeffect_more = s;
}

char *args_noeffect_line(const struct train_args *a)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f;
	if (!a->nnoeffect && !a->noeffect_more)
		return NULL;
	f = open_memstream(&s, &len);
	for (int i = 0; i < a->nnoeffect; i++)
		fprintf(f, "%s--%s (%s)", i ? ", " : "", a->noeffect[i]->name, a->noeffect[i]->why);
	if (a->noeffect_more)
		fprintf(f, "%s%s", a->nnoeffect ? ", " : "", a->noeffect_more);
	if (fclose(f) != 0 || !s)
		xalloc_die("the line of flags that have no effect", len);
	return s;
}

/* SLURM_GPUS_ON_NODE is a number; SLURM_GPUS_PER_NODE may be "a100:8" */
static int env_count(const char *name, int64_t *v, char *err, size_t errlen)
{
	const char *s = getenv(name), *colon;
	if (!s || !*s)
		return 0;
	colon = strrchr(s, ':');
	if (args_int(colon ? colon + 1 : s, v) < 0 || *v <= 0)
		return errf(err, errlen, "%s='%s' is not a count; give it as a flag", name, s);
	return 1;
}

int args_from_slurm(struct train_args *a, char *err, size_t errlen)
{
	static const char *nodes_vars[] = {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"};
	static const char *gpu_vars[] = {"SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"};
	int r;
	for (int i = 0; i < 2 && a->nodes < 0; i++) {
		if ((r = env_count(nodes_vars[i], &a->nodes, err, errlen)) < 0)
			return -1;
		if (r)
			a->nodes_from = nodes_vars[i];
	}
	for (int i = 0; i < 2 && a->gpus_per_node < 0; i++) {
		if ((r = env_count(gpu_vars[i], &a->gpus_per_node, err, errlen)) < 0)
			return -1;
		if (r)
			a->gpus_from = gpu_vars[i];
	}
	return 0;
}
