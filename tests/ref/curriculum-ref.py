#!/usr/bin/python3
"""What a Megatron-DeepSpeed (BigScience fork) run with a DeepSpeed sequence-length curriculum
logs, iteration by iteration, written from DeepSpeed's CurriculumScheduler
(deepspeed/runtime/data_pipeline/curriculum_scheduler.py), megatron/training.py (the difficulty
of iteration + 1 asked before each step; consumed_train_tokens += samples * curriculum_seqlen)
and megatron/learning_rates.py (AnnealingLR with decay_tokens: warmup in samples, warmup_tokens
taken when num_steps == warmup_steps, num_tokens = consumed_train_tokens when the scheduler
steps, which is before the iteration's tokens are added).

    curriculum-ref.py DS_CONFIG.json ITERS GBS SEQ LR MIN_LR WARMUP_SAMPLES DECAY_TOKENS STYLE
prints one line per iteration: "it seqlen consumed_tokens lr" (lr as '%.3E', as the log line).
"""
import json
import math
import sys


class Scheduler:
    def __init__(self, cfg):
        self.min = cfg["min_difficulty"]
        self.max = cfg["max_difficulty"]
        self.type = cfg["schedule_type"]
        self.sc = cfg["schedule_config"]
        self.current = self.min

    def difficulty(self, step):
        sc = self.sc
        if self.type == "fixed_discrete":
            if step > sc["max_step"][-1]:
                return sc["difficulty"][-1]
            for i, m in enumerate(sc["max_step"]):
                if step <= m:
                    return sc["difficulty"][i]
        degree = 1 if self.type == "fixed_linear" else sc["root_degree"]
        d = (float(step) / sc["total_curriculum_step"]) ** (1.0 / degree)
        d = math.floor(d * (self.max - self.min) + self.min)
        d -= d % sc["difficulty_step"]
        return min(d, self.max)

    def update(self, step):
        if self.current < self.max:
            self.current = self.difficulty(step)
        return self.current


class AnnealingLR:
    def __init__(self, max_lr, min_lr, warmup_steps, decay_tokens, style):
        self.max_lr, self.min_lr = max_lr, min_lr
        self.warmup_steps, self.decay_tokens, self.style = warmup_steps, decay_tokens, style
        self.num_steps = self.num_tokens = self.warmup_tokens = 0

    def get_lr(self):
        if self.warmup_steps > 0 and self.num_steps <= self.warmup_steps:
            if self.num_steps == self.warmup_steps:
                self.warmup_tokens = self.num_tokens
            return self.max_lr * float(self.num_steps) / float(self.warmup_steps)
        if self.num_tokens > self.decay_tokens:
            return self.min_lr
        r = float(self.num_tokens - self.warmup_tokens) / float(self.decay_tokens - self.warmup_tokens)
        c = 0.5 * (math.cos(math.pi * r) + 1.0) if self.style == "cosine" else 1.0 - r
        return self.min_lr + c * (self.max_lr - self.min_lr)

    def step(self, increment, token_num):
        self.num_tokens = token_num
        self.num_steps += increment
        return self.get_lr()


def main():
    cfg = json.load(open(sys.argv[1]))["curriculum_learning"]
    iters, gbs, seq = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    lr, min_lr, warmup, decay = float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
    sched = Scheduler(cfg)
    anneal = AnnealingLR(lr, min_lr, warmup, decay, sys.argv[9])
    consumed = 0
    for it in range(1, iters + 1):
        seqlen = sched.update(it)                 # training.py: update_difficulty(iteration + 1)
        new_lr = anneal.step(gbs, consumed)       # inside train_step: tokens before this one's
        consumed += gbs * seqlen
        print(it, min(seqlen, seq), consumed, "%.3E" % new_lr)


main()
