# recall - pure-C reference engine for on-device recall.
# `make` builds ./recall and build/librecall.a; `make help` lists every target.
# Never -ffast-math / -Ofast: bit-exactness depends on IEEE semantics and a fixed reduction
# order. -ffp-contract=off stops the compiler from fusing a*b+c on its own; fmaf() is written
# explicitly wherever the canonical order uses a fused multiply-add.

CC      ?= cc
OPT     ?= -O2
BUILD   ?= build
CSTD     = -std=c11
WARN     = -Wall -Wextra -Wpedantic -Werror
FPFLAGS  = -ffp-contract=off -fno-fast-math
DEFS     = -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
INC      = -Isrc -Isimd -Iweights
CFLAGS  ?=
# fmaf() is exact (one rounding) whether the CPU fuses it or libm emulates it, so enabling the
# x86 FMA instructions changes speed, never bits. Added only when the build host has FMA; set
# FMA_FLAG= to build a binary for older x86 CPUs.
ifeq ($(shell uname -m),x86_64)
FMA_FLAG ?= $(shell grep -qw fma /proc/cpuinfo 2>/dev/null && echo -mfma)
endif
CFLAGS_ALL = $(CSTD) $(OPT) -g $(WARN) $(FPFLAGS) $(FMA_FLAG) $(DEFS) $(INC) $(EXTRA_CFLAGS) $(CFLAGS)
# Per-ISA kernel files (simd/): each is compiled for its instruction set only when the compiler
# targets x86-64 (the files are empty elsewhere); simd/simd.c picks a path at run time (cpuid),
# so the rest of the binary keeps the baseline flags. NEON needs no flag on aarch64.
ifneq ($(findstring x86_64,$(shell $(CC) -dumpmachine 2>/dev/null)),)
$(BUILD)/simd/kernels_avx2.o: SIMD_FLAGS = -mavx2 -mfma
$(BUILD)/simd/kernels_avx512.o: SIMD_FLAGS = -mavx512f -mavx512bw -mavx512vl -mfma
endif
LDLIBS   = -lm -lpthread
TEST_LDLIBS = -lcriterion

CLI_SRC  = src/main.c $(wildcard src/cli_*.c)
LIB_SRC  = $(filter-out $(CLI_SRC),$(wildcard src/*.c)) $(wildcard weights/*.c) $(wildcard simd/*.c)
CLI_OBJ  = $(patsubst %.c,$(BUILD)/%.o,$(CLI_SRC))
LIB_OBJ  = $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
TEST_SRC = $(wildcard tests/*.c)
TEST_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))
FUZZ_SRC = $(wildcard fuzz/fuzz_*.c)
DEPS     = $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

.PHONY: all help test demo clean fuzz-smoke synth bench cross-test-aarch64
all: recall $(BUILD)/librecall.a

help:
	@echo "targets:"
	@echo "  all         ./recall and build/librecall.a (default)"
	@echo "  test        build and run the Criterion suite"
	@echo "  demo        convert the bundled tiny worldA model and run the main job on it"
	@echo "  synth       generate the real-shape synthetic world (random weights) and convert it to nf4"
	@echo "  bench       kernel + model benchmarks (checked bitwise vs scalar) on the synth blob"
	@echo "  cross-test-aarch64  NEON kernels vs scalar: Debian cross gcc + qemu-aarch64-static"
	@echo "  fuzz-smoke  build the libFuzzer targets with clang + ASan/UBSan and run each briefly"
	@echo "  clean       remove build outputs"
	@echo "variables: CC=gcc|clang OPT=-O2 EXTRA_CFLAGS=..."

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SIMD_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/librecall.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

recall: $(CLI_OBJ) $(BUILD)/librecall.a
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)

$(BUILD)/run_tests: $(TEST_OBJ) $(BUILD)/librecall.a
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(TEST_LDLIBS) $(LDLIBS)

# Tests run from the repository root (fixtures live in tests/golden).
test: recall $(BUILD)/run_tests
	./$(BUILD)/run_tests $(TEST_ARGS)

# The main job on the bundled tiny model: convert worldA, then replay benchmark problem 0 through
# the recall loop (faithful mode), writing the trace that tests/golden/worldA/ holds as a golden.
WORLDA = tests/golden/worldA
demo: recall
	./recall convert --qwen2 $(WORLDA)/qwen2 --bge $(WORLDA)/bge --pooler $(WORLDA)/pooler.pt \
	  --gate $(WORLDA)/gate.npz --bridge $(WORLDA)/bge_head.npz --quiet -o $(BUILD)/worldA-f32.blob
	./recall replay $(BUILD)/worldA-f32.blob --bench tests/golden/recall_bench.json --problem 0 \
	  --trace $(BUILD)/demo-trace.json

# Synthetic real-shape world (random weights; ~3.6 GB of inputs under build/synth, not committed).
SYNTH ?= $(BUILD)/synth
$(BUILD)/gen_synth: bench/gen_synth.c $(BUILD)/librecall.a
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
$(BUILD)/bench_open: bench/bench_open.c $(BUILD)/librecall.a
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
synth: recall $(BUILD)/gen_synth $(BUILD)/bench_open
	@test -f $(SYNTH)/qwen2/config.json || ./$(BUILD)/gen_synth $(SYNTH) tests/golden/tokenizers
	@echo "== convert the real-shape world to nf4 (wall time, peak RSS)"
	@/usr/bin/time -f "convert: %e s wall, %M KB peak RSS" ./recall convert --qwen2 $(SYNTH)/qwen2 --bge $(SYNTH)/bge \
	  --pooler $(SYNTH)/pooler.safetensors --gate $(SYNTH)/gate.npz --bridge $(SYNTH)/bge_head.npz \
	  --weights nf4 --quiet -o $(SYNTH)/r1-1.5b-nf4.blob
	@./$(BUILD)/bench_open $(SYNTH)/r1-1.5b-nf4.blob
	@/usr/bin/time -f "recall info: %e s wall, %M KB peak RSS" ./recall info $(SYNTH)/r1-1.5b-nf4.blob >/dev/null

# Benchmarks (bench/bench.c; needs `make synth` for the model part). BENCH_ARGS=--quick for a
# shorter run, RECALL_BENCH_PATHS=avx2 to time one path.
$(BUILD)/bench: bench/bench.c $(BUILD)/librecall.a
	$(CC) $(CFLAGS_ALL) -DBENCH_FLAGS='"$(CFLAGS_ALL)"' -o $@ $^ $(LDLIBS)
bench: $(BUILD)/bench
	./$(BUILD)/bench $(BENCH_ARGS)

# NEON path: cross-compile the library + the standalone kernel self-test (no Criterion on arm64)
# and run it under qemu (timings there mean nothing).
CROSS_CC ?= aarch64-linux-gnu-gcc
QEMU_AARCH64 ?= qemu-aarch64-static
cross-test-aarch64:
	$(MAKE) --no-print-directory CC=$(CROSS_CC) FMA_FLAG= BUILD=$(BUILD)/aarch64 $(BUILD)/aarch64/librecall.a
	$(CROSS_CC) $(CSTD) $(OPT) $(WARN) $(FPFLAGS) $(DEFS) $(INC) -DRC_SELFTEST_MAIN -o $(BUILD)/aarch64/simd_selftest \
	  tests/simd_selftest.c $(BUILD)/aarch64/librecall.a $(LDLIBS)
	$(QEMU_AARCH64) -L /usr/aarch64-linux-gnu $(BUILD)/aarch64/simd_selftest

FUZZ_CC    ?= clang
FUZZ_FLAGS  = $(CSTD) -O1 -g $(FPFLAGS) $(DEFS) $(INC) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TIME  ?= 20
fuzz-smoke:
	@mkdir -p $(BUILD)/fuzz
	@set -e; for f in $(FUZZ_SRC); do \
	  n=$$(basename $$f .c); \
	  echo "== $$n"; \
	  $(FUZZ_CC) $(FUZZ_FLAGS) -o $(BUILD)/fuzz/$$n $$f $(LIB_SRC) -lm -lpthread; \
	  mkdir -p $(BUILD)/fuzz/corpus-$$n; \
	  seeds=""; [ -d fuzz/corpus/$$n ] && seeds=fuzz/corpus/$$n; \
	  $(BUILD)/fuzz/$$n -max_total_time=$(FUZZ_TIME) -rss_limit_mb=2048 $(BUILD)/fuzz/corpus-$$n $$seeds; \
	done

clean:
	rm -rf $(BUILD) recall

-include $(DEPS)
