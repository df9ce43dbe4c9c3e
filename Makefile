# recall - pure-C reference engine for on-device recall.
# `make` builds ./recall and build/librecall.a; `make help` lists every target.
# The folders are layers (docs/README.md, "Layers"; tools/layers.sh checks every include):
#   src/ (the shared base) < src/formats < simd < src/engine < src/harness < weights (the converter)
#   < src/cli. librecall.a is base + formats + simd + engine; the harness and the converter are
#   librecall_harness.a and librecall_convert.a, linked by the CLI, the tests, bench/ and fuzz/.
.DEFAULT_GOAL := all
# Never fast-math (neither the -f flag nor -O fast): bit-exactness depends on IEEE semantics and a fixed reduction
# order. -ffp-contract=off stops the compiler from fusing a*b+c on its own; fmaf() is written
# explicitly wherever the canonical order uses a fused multiply-add.

CC      ?= cc
OPT     ?= -O2
BUILD   ?= build
CSTD     = -std=c11
WARN     = -Wall -Wextra -Wpedantic -Werror
FPFLAGS  = -ffp-contract=off -fno-fast-math
DEFS     = -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
INC      = -Isrc -Isrc/formats -Isimd -Isrc/engine -Isrc/harness -Iweights
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
$(BUILD)/simd/kernels_avx2.o $(BUILD)/simd/act_avx2.o $(BUILD)/simd/screen_avx2.o: SIMD_FLAGS = -mavx2 -mfma -mf16c
$(BUILD)/simd/kernels_avx512.o $(BUILD)/simd/act_avx512.o $(BUILD)/simd/screen_avx512.o: SIMD_FLAGS = -mavx512f -mavx512bw -mavx512vl -mfma -mf16c
$(BUILD)/simd/kernels_avx512vbmi.o: SIMD_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512vbmi -mfma -mf16c
$(BUILD)/simd/q8_avx512.o: SIMD_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c
$(BUILD)/simd/q8_avx2.o: SIMD_FLAGS = -mavx2 -mfma
$(BUILD)/simd/q8_avxvnni.o: SIMD_FLAGS = -mavx2 -mfma -mavxvnni
endif
# aarch64: the NEON q8 kernels with the dot-product extension (selected at run time, HWCAP ASIMDDP)
ifneq ($(findstring aarch64,$(shell $(CC) -dumpmachine 2>/dev/null)),)
$(BUILD)/simd/q8_neon_dot.o: SIMD_FLAGS = -march=armv8.2-a+dotprod
endif
LDLIBS   = -lm -lpthread
TEST_LDLIBS = -lcriterion

CLI_SRC  = $(wildcard src/cli/*.c)
LIB_SRC  = $(wildcard src/*.c src/formats/*.c simd/*.c src/engine/*.c)
HARNESS_SRC = $(wildcard src/harness/*.c)
HARNESS_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(HARNESS_SRC))
CONVERT_SRC = $(wildcard weights/*.c)
CONVERT_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(CONVERT_SRC))
# What the CLI, the tests, bench/ and fuzz/ link: the layers above the engine first.
TOOL_LIBS = $(BUILD)/librecall_harness.a $(BUILD)/librecall_convert.a $(BUILD)/librecall.a
CLI_OBJ  = $(patsubst %.c,$(BUILD)/%.o,$(CLI_SRC))
LIB_OBJ  = $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
TEST_SRC = $(wildcard tests/*.c)
TEST_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))
FUZZ_SRC = $(wildcard fuzz/fuzz_*.c)
DEPS     = $(LIB_OBJ:.o=.d) $(HARNESS_OBJ:.o=.d) $(CONVERT_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

# ---- what each target needs from Debian (tools/need.sh) ---------------------------------------
# Before a target compiles anything it checks its packages: as root with apt-get it installs the
# missing ones, otherwise it stops with one line naming them (RECALL_NO_INSTALL=1: never install).
NEED      = sh tools/need.sh
CC_PKG    = $(if $(findstring clang,$(CC)),clang,gcc)
HOST_ARCH = $(shell uname -m)
# The clang runtime libraries (sanitizers, libFuzzer) are a separate package from clang itself.
CLANG_RT  = $(shell clang -print-file-name=libclang_rt.$(1)-$(HOST_ARCH).a 2>/dev/null)
CLANG_NEED = clang:clang $(call CLANG_RT,$(1)):libclang-rt-dev
# cross_need(name, triple, debian arch, qemu binary)
cross_need = $(NEED) cross-test-$(1) $(2)-gcc:gcc-$(2) /usr/$(2)/include/stdio.h:libc6-dev-$(3)-cross \
  $(4):qemu-user-static
need-cc:
	@$(NEED) build $(firstword $(CC)):$(CC_PKG) /usr/include/stdio.h:libc6-dev
need-criterion:
	@$(NEED) test /usr/include/criterion/criterion.h:libcriterion-dev
need-time:
	@$(NEED) synth /usr/bin/time:time
need-fuzz:
	@$(NEED) fuzz $(if $(findstring clang,$(FUZZ_CC)),$(call CLANG_NEED,fuzzer))
need-san:
	@$(NEED) sanitizers $(if $(findstring clang,$(SAN_CC)),$(call CLANG_NEED,asan))
need-python:
	@$(NEED) python /usr/bin/python3:python3 /usr/lib/python3/dist-packages/numpy/__init__.py:python3-numpy \
	  /usr/lib/python3/dist-packages/pytest/__init__.py:python3-pytest \
	  /usr/lib/python3/dist-packages/regex/__init__.py:python3-regex
need-cross-aarch64:
	@$(call cross_need,aarch64,aarch64-linux-gnu,arm64,qemu-aarch64-static)
need-cross-armhf:
	@$(call cross_need,armhf,arm-linux-gnueabihf,armhf,qemu-arm-static)
need-cross-riscv64:
	@$(call cross_need,riscv64,riscv64-linux-gnu,riscv64,qemu-riscv64-static)
need-cross-s390x:
	@$(call cross_need,s390x,s390x-linux-gnu,s390x,qemu-s390x-static)
NEED_TARGETS = need-cc need-criterion need-time need-fuzz need-san need-train need-python need-slurm need-cross-aarch64 need-cross-armhf \
  need-cross-riscv64 need-cross-s390x

PHONY_EXTRA = test-full test-suite-run test-api test-sbs-run test-slurm test-replay-worldA test-replay-trained test-replay-wide \
  test-replay-templated test-python python demo-worldA train-world train-world-check train-world-grammar train-world-grammar-check train-world-templated train-world-templated-check test-replay synth-copy realshape bench-loop bench-long bench-history \
  bench-farback bench-device \
  soak soak-lsan \
  bench-tok bench-kv-pages bench-draft test-sbs
.PHONY: all help test layers demo clean fuzz-smoke synth bench $(PHONY_EXTRA) cross-test-aarch64 cross-bench-device shared install api-example \
  abi-check cli-doc \
  test-nothreads test-nommap asan ubsan tsan sanitize cross-test cross-test-armhf cross-test-riscv64 \
  cross-test-s390x fuzz fuzz-merge fuzz-seeds $(NEED_TARGETS)
all: recall $(TOOL_LIBS)

help:
	@echo "targets:"
	@echo "  all         ./recall, build/librecall.a (the engine) and the harness and converter libraries (default)"
	@echo "  test        the fast tier: the Criterion suite but the long tests named in tests/full_tier.txt,"
	@echo "              tools/layers.sh, the API example, abi_v1, side_by_side, the replay checks, the"
	@echo "              Python bindings' pytest suite (use -j2)"
	@echo "  test-full   everything: the same steps with every Criterion test and test-slurm (what CI runs; docs/TESTING.md)"
	@echo "  test-slurm  tools/slurm/ on a one-node Slurm started here (root): a sharded eval, a task SIGKILLed"
	@echo "              and requeued, merged = unsharded; missing and foreign shards refused (docs/SCALE.md)"
	@echo "  layers      check that every include goes down or sideways (tools/layers.sh)"
	@echo "  test-replay the engine against the Python replay's traces (tests/golden/*/replay, docs/REPLAY.md)"
	@echo "  demo        the trained world: a chat a person would write, on SP and on recall, its trace"
	@echo "  web         the engine for the browser: build/web/ (index.html, recall.wasm, JS, the demo world)"
	@echo "  serve-web   serve build/web on 127.0.0.1 (open the address it prints)"
	@echo "  test-web    the page in headless Chromium: a chat, its streamed answer and trace vs native, bad blobs"
	@echo "  bench-web   the demo world's replay under wasm (node) vs native scalar, one run"
	@echo "  demo-worldA the bundled random-weight worldA: benchmark problem 0 through the recall loop, its trace"
	@echo "  train-world retrain the wide world (tools/train_world: the trained world, wide wording, plain chats) into TRAIN_OUT (build/wide)"
	@echo "  train-world-check  retrain and compare with the committed MANIFEST.xxh64 (same bytes)"
	@echo "  train-world-grammar  only its first stage, the trained world (broad English, a phrasing grammar), into TRAIN_INIT"
	@echo "  train-world-grammar-check  that stage compared with tests/golden/trained/MANIFEST.xxh64"
	@echo "  train-world-templated  retrain the first, templated world (--world templated) into TRAIN_OUT-templated"
	@echo "  train-world-templated-check  the same, compared with tests/golden/templated/MANIFEST.xxh64"
	@echo "  realshape   64-token prefill + 16 decode steps on the synth blob (BENCH_ARGS='--simd avx2 --threads 2')"
	@echo "  bench-loop  fast vs reference loop schedule on worldA problem 0 (rows and time per turn)"
	@echo "  bench-draft plain vs --draft N decode tok/s + acceptance on the synth blob (BENCH_ARGS='--draft 8')"
	@echo "  bench-long  prefill/decode tok/s, KV bytes, peak RSS at 4k..32k on the synth blob (LONG_LENS=..,"
	@echo "              LONG_NEEDLE=1: a needle case as the prompt, its answer printed)"
	@echo "  bench-farback  far-back recall on the trained world: turn time, fires, BERT encodes and time per fire"
	@echo "              at 2k / 8k / 32k tokens (FARBACK_BLOB, FARBACK_BENCH, BENCH_ARGS='--cases 3 --len ..')"
	@echo "  bench-history  a rebuild's pooler time and peak RSS as the evicted history grows to 64k, with and"
	@echo "              without the pooler cache, and what else grows (HISTORY_LENS=..; synth blob)"
	@echo "  bench-device  one real-shape recall turn (4k tokens, rebuilds, fires, 128 decoded): peak RSS and where"
	@echo "              every MB goes, exact vs the device profile (synth blobs; BENCH_ARGS='--threads 2 ...')"
	@echo "  soak        200 worldA chat turns via recall chat --session, SIGKILLed at seeded points (SOAK_ARGS=)"
	@echo "  soak-lsan   a shorter soak with ./recall built with ASan + LeakSanitizer (build-asan/recall)"
	@echo "  bench-tok   tokenizer MB/s (BPE encode/decode, WordPiece encode), 1 thread, no blob needed"
	@echo "  bench-kv-pages  --kv-pages PPL vs budget + decode tok/s at the end (KVP_IDS, KVP_N, KVP_ARGS)"
	@echo "  test-sbs    bench/side_by_side.sh (recall vs llama-bench / an older tree) checked with fake engines"
	@echo "  synth       generate the real-shape synthetic world (random weights) and convert it to nf4"
	@echo "  synth-copy  the same shapes with a model that copies (bench-draft's copy-heavy case)"
	@echo "  bench       kernel + model benchmarks (checked bitwise vs scalar) on the synth blob"
	@echo "  cross-test-aarch64  NEON kernels vs scalar, the kv-pages and screening suites: cross gcc + qemu"
	@echo "  cross-bench-device  the device turn (shortened: CROSS_DEVICE_ARGS) natively and on NEON under qemu:"
	@echo "              the same digest, the peak within qemu's own memory (about two hours)"
	@echo "  fuzz-smoke  build the libFuzzer targets with clang + ASan/UBSan and run each briefly"
	@echo "  fuzz        every fuzz target for FUZZ_TIME seconds (default 600) on its committed corpus"
	@echo "  fuzz-merge  fold the inputs the fuzz runs found (new coverage only) into fuzz/corpus/"
	@echo "  fuzz-seeds  write the blob seeds made by the library's writer (screening tensors, RoPE profile)"
	@echo "  shared      build/librecall.so (objects built with -fPIC under build/pic) and build/recall.pc"
	@echo "  python      build/librecall.so copied into python/recall/: import recall (PYTHONPATH=python), pip install ./python"
	@echo "  test-python the Python bindings against the CLI, bitwise (python/tests, pytest; docs/PYTHON.md)"
	@echo "  install     recall, include/recall/{recall.h,status.h}, librecall.{a,so}, pkgconfig/recall.pc"
	@echo "              into DESTDIR/PREFIX (PREFIX=/usr/local)"
	@echo "  api-example tests/api_example.c (public API only, librecall.a) on worldA vs the loop golden"
	@echo "  abi-check   tests/abi_v1.c, built against the previous public header, on librecall.a and .so"
	@echo "  cli-doc     rewrite docs/CLI.md's generated part from ./recall help --markdown"
	@echo "  test-nothreads / test-nommap  the suite built with -DRECALL_NO_THREADS / -DRECALL_NO_MMAP"
	@echo "  asan / ubsan / tsan  the suite under a sanitizer (SAN_CC=clang), each in build-<name>/"
	@echo "  cross-test  aarch64 (NEON), armhf, riscv64 under qemu-user + the big-endian s390x refusal"
	@echo "  clean       remove build outputs"
	@echo "variables: CC=gcc|clang OPT=-O2 EXTRA_CFLAGS=..."
	@echo "packages: each target checks the Debian packages it needs (tools/need.sh); as root it installs"
	@echo "          them with apt-get, otherwise it names them in one line (RECALL_NO_INSTALL=1: never install)"

$(LIB_OBJ) $(HARNESS_OBJ) $(CONVERT_OBJ) $(CLI_OBJ) $(TEST_OBJ): | need-cc
$(TEST_OBJ) $(BUILD)/run_tests: | need-criterion

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SIMD_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/librecall.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/librecall_harness.a: $(HARNESS_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/librecall_convert.a: $(CONVERT_OBJ)
	@rm -f $@
	ar rcs $@ $^

# RECALL_BIN: the CLI binary. Build variants put theirs under their BUILD dir and run the suite in
# a shadow root (see VARIANT_RUN) so that ./recall at the top stays the native build.
RECALL_BIN ?= recall
$(RECALL_BIN): $(CLI_OBJ) $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)

$(BUILD)/run_tests: $(TEST_OBJ) $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(TEST_LDLIBS) $(LDLIBS)

# The folders are layers: every include goes down or sideways (tools/layers.sh; also part of `make test`).
layers:
	sh tools/layers.sh

# Tests run from the repository root (fixtures live in tests/golden). Two tiers, one suite
# (docs/TESTING.md, "Two tiers"): `make test` is the fast tier, `make test-full` everything. They
# differ only in the Criterion tests named in tests/full_tier.txt, which the fast tier leaves out by
# name (each is covered there by a cheaper test; the file and docs/TESTING.md say which); every
# other step is the same in both. The steps are separate prerequisites so that `make -j2` runs them
# side by side with the Criterion run (which forks one test process per core itself): the serial
# tail of replays and examples used to leave a core idle for minutes.
FULL_TIER  := $(shell sed -e 's/[[:space:]]*\#.*//' -e '/^[[:space:]]*$$/d' tests/full_tier.txt)
tier_empty :=
tier_space := $(tier_empty) $(tier_empty)
tier_bar   := |
# Criterion's extended glob: !(a|b) runs every test but a and b. TEST_ARGS comes after it, so that a
# --filter of the caller's replaces it.
FAST_FILTER = --filter '!($(subst $(tier_space),$(tier_bar),$(strip $(FULL_TIER))))'
TEST_STEPS = test-suite-run layers test-api test-sbs-run test-replay-worldA test-replay-trained test-replay-wide \
  test-replay-templated test-python
test: $(TEST_STEPS)
	@echo "make test: the fast tier passed ($(words $(FULL_TIER)) Criterion tests left to make test-full)"
test-full: FULL = 1
test-full: $(TEST_STEPS) test-slurm
	@echo "make test-full: every test passed"
# A name in tests/full_tier.txt that is no test (renamed, misspelt) would leave the list and the
# docs wrong without failing anything, so each must be one of --list's.
test-suite-run: $(RECALL_BIN) $(BUILD)/run_tests
	@./$(BUILD)/run_tests --list | awk '/^[A-Za-z0-9_]+: [0-9]+ tests?$$/ {s = $$1; sub(/:$$/, "", s); next} \
	  {sub(/^[^A-Za-z0-9_]+/, ""); print s "/" $$0}' >$(BUILD)/test-names.txt
	@for t in $(FULL_TIER); do grep -qxF "$$t" $(BUILD)/test-names.txt || \
	  { echo "tests/full_tier.txt: $$t is not a test (./$(BUILD)/run_tests --list)"; exit 1; }; done
	./$(BUILD)/run_tests $(if $(FULL),,$(FAST_FILTER)) $(TEST_ARGS)
# A step beside the Criterion run writes its output to BUILD/test-NAME.log and prints its last line
# (all of it when it fails), so that the Criterion run's lines stay readable.
quiet_step = @mkdir -p $(BUILD) && { $(2); } >$(BUILD)/test-$(1).log 2>&1 && tail -1 $(BUILD)/test-$(1).log || \
  { cat $(BUILD)/test-$(1).log; echo "make test: step $(1) failed (log: $(BUILD)/test-$(1).log)"; exit 1; }
# The public-API example runs one worldA turn through librecall.a and checks it against the golden;
# abi_v1 does the same compiled against the previous public header.
test-api: $(BUILD)/api_example $(BUILD)/abi_v1 $(BUILD)/worldA-f32.blob
	$(call quiet_step,api_example,./$(BUILD)/api_example $(BUILD)/worldA-f32.blob $(GOLDEN_LOOP))
	$(call quiet_step,abi_v1,./$(BUILD)/abi_v1 $(BUILD)/worldA-f32.blob $(GOLDEN_LOOP))
test-sbs-run:
	$(call quiet_step,side_by_side,bash bench/test_side_by_side.sh)
# The engine against the independent Python replay of the loop (docs/REPLAY.md): each trace in
# WORLD/replay/ rerun by recall replay and judged by recall compare (also part of `make test`), one
# make target per world so that they run in parallel. Like the Criterion tests (tests/fixture.h),
# these steps run the engine at one thread (RECALL_THREADS, unless set): they run beside each other,
# and one thread per core costs the least CPU; the thread counts have their own tests.
TEST_THREADS = RECALL_THREADS=$${RECALL_THREADS:-1}
test-replay-worldA: $(RECALL_BIN)
	$(call quiet_step,replay-worldA,$(TEST_THREADS) sh tests/replay_check.sh ./$(RECALL_BIN) $(WORLDA) \
	  tests/golden/recall_bench.json 4)
test-replay-trained: $(RECALL_BIN)
	$(call quiet_step,replay-trained,$(TEST_THREADS) sh tests/replay_check.sh ./$(RECALL_BIN) $(TRAINED) \
	  $(TRAINED)/replay/bench.json 12)
test-replay-wide: $(RECALL_BIN)
	$(call quiet_step,replay-wide,$(TEST_THREADS) sh tests/replay_check.sh ./$(RECALL_BIN) $(WIDE) \
	  $(WIDE)/replay/bench.json 12)
test-replay-templated: $(RECALL_BIN)
	$(call quiet_step,replay-templated,$(TEST_THREADS) sh tests/replay_check.sh ./$(RECALL_BIN) $(TEMPLATED) \
	  $(TEMPLATED)/replay/bench.json 12)
test-replay: test-replay-worldA test-replay-trained test-replay-wide test-replay-templated
# The Python bindings (python/, docs/PYTHON.md) against the command line, bitwise, on worldA and the
# trained world; their error paths and threads. test-full also runs the cases marked "full".
PYTHON ?= /usr/bin/python3
test-python: need-python $(RECALL_BIN) $(BUILD)/librecall.so $(BUILD)/worldA-f32.blob $(BUILD)/trained-f32.blob
	$(call quiet_step,python,$(TEST_THREADS) RECALL_LIB=$(BUILD)/librecall.so RECALL_BIN=./$(RECALL_BIN) BUILD=$(BUILD) \
	  $(if $(FULL),RECALL_FULL=1) $(PYTHON) -m pytest -q -p no:cacheprovider python/tests)
# tools/slurm/ against a real one-node Slurm started on this machine (tests/slurm_check.sh,
# docs/SCALE.md): a sharded eval with a task SIGKILLed and requeued merges to the unsharded run.
# Part of test-full only (it starts daemons and needs root); about 1.5 min on 2 cores.
need-slurm:
	@$(NEED) test-slurm slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge pgrep:procps ss:iproute2
test-slurm: need-slurm $(RECALL_BIN) $(BUILD)/worldA-f32.blob
	$(call quiet_step,slurm,bash tests/slurm_check.sh ./$(RECALL_BIN) $(BUILD)/worldA-f32.blob)
# bench/side_by_side.sh checked with fake engines (no llama.cpp needed; also part of `make test`)
test-sbs:
	bash bench/test_side_by_side.sh

# ---- public library: shared object, pkg-config file, install, the API example ------------------
PREFIX  ?= /usr/local
DESTDIR ?=
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
# VERSION and soname policy (docs/API.md): MAJOR.MINOR.PATCH; the soname is librecall.so.MAJOR and
# changes only when a program linked against an earlier library would stop working (a symbol
# removed, a frozen struct changed). Appending option fields or adding functions is a MINOR step.
VERSION  = 0.6.0
SOMAJOR  = $(firstword $(subst ., ,$(VERSION)))
API_HEADERS = src/recall.h src/status.h
# The shared object links position-independent copies of the library objects (build/pic/).
# Only the public API is exported (src/librecall.map); the rule checks the dynamic symbol table.
$(BUILD)/librecall.so: $(LIB_SRC) src/librecall.map
	+$(MAKE) --no-print-directory BUILD=$(BUILD)/pic EXTRA_CFLAGS="$(EXTRA_CFLAGS) -fPIC" $(BUILD)/pic/librecall.a
	$(CC) -shared -Wl,-soname,librecall.so.$(SOMAJOR) -Wl,--version-script=src/librecall.map -o $@ \
	  -Wl,--whole-archive $(BUILD)/pic/librecall.a -Wl,--no-whole-archive $(LDLIBS)
	@ln -sf librecall.so $(BUILD)/librecall.so.$(SOMAJOR)
	@bad=$$(nm -D --defined-only $@ | awk '$$2 ~ /^[TDBRVW]$$/ && $$3 !~ /^recall_/ {print $$3}'); \
	  test -z "$$bad" || { echo "$@ exports non-API symbols:" $$bad; rm -f $@; exit 1; }; \
	  echo "$@: exports $$(nm -D --defined-only $@ | grep -c ' T recall_') recall_* functions, nothing else"
$(BUILD)/recall.pc: recall.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCDIR@|$(INCDIR)|g' \
	  -e 's|@VERSION@|$(VERSION)|g' $< > $@
shared: $(BUILD)/librecall.so $(BUILD)/recall.pc
# `import recall` from the checkout (PYTHONPATH=python) or, after this, `pip install ./python`:
# the package's own copy of the library (python/recall/_lib.py: the lookup order).
python: need-python $(BUILD)/librecall.so
	cp $(BUILD)/librecall.so python/recall/librecall.so.0
	@echo "python: PYTHONPATH=python $(PYTHON) -c 'import recall', or pip install --no-build-isolation --no-index ./python"
install: recall $(BUILD)/librecall.a $(BUILD)/librecall.so
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(INCDIR)/recall $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 755 recall $(DESTDIR)$(PREFIX)/bin/recall
	install -m 644 $(API_HEADERS) $(DESTDIR)$(INCDIR)/recall/
	install -m 644 $(BUILD)/librecall.a $(DESTDIR)$(LIBDIR)/librecall.a
	install -m 755 $(BUILD)/librecall.so $(DESTDIR)$(LIBDIR)/librecall.so.$(VERSION)
	ln -sf librecall.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librecall.so.$(SOMAJOR)
	ln -sf librecall.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/librecall.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCDIR@|$(INCDIR)|g' \
	  -e 's|@VERSION@|$(VERSION)|g' recall.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/recall.pc

# A user's program: only "recall.h" (src/ is where it lives in the tree) and librecall.a.
$(BUILD)/api_example: tests/api_example.c tests/check.h $(BUILD)/librecall.a src/recall.h src/status.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(OPT) -g $(WARN) $(EXTRA_CFLAGS) $(CFLAGS) -Isrc -DRC_API_EXAMPLE_MAIN -o $@ $< \
	  $(BUILD)/librecall.a $(LDLIBS)
# The ABI promise (docs/API.md): a program compiled against the previous public header
# (tests/abi_v1/recall.h, API version 1) runs correctly against this library, linked with
# librecall.a (`make test`) and with librecall.so (`make abi-check`, which also lists the .so's
# versioned symbols).
ABI_V1_CC = $(CC) $(CSTD) $(OPT) -g $(WARN) $(EXTRA_CFLAGS) $(CFLAGS) -Itests/abi_v1 -Isrc -DRC_ABI_V1_MAIN
$(BUILD)/abi_v1: tests/abi_v1.c tests/check.h tests/abi_v1/recall.h $(BUILD)/librecall.a
	@mkdir -p $(dir $@)
	$(ABI_V1_CC) -o $@ $< $(BUILD)/librecall.a $(LDLIBS)
$(BUILD)/abi_v1_shared: tests/abi_v1.c tests/check.h tests/abi_v1/recall.h $(BUILD)/librecall.so
	$(ABI_V1_CC) -o $@ $< -L$(BUILD) -l:librecall.so.$(SOMAJOR) -Wl,-rpath,$(abspath $(BUILD)) $(LDLIBS)
abi-check: $(BUILD)/abi_v1 $(BUILD)/abi_v1_shared $(BUILD)/worldA-f32.blob
	./$(BUILD)/abi_v1 $(BUILD)/worldA-f32.blob $(GOLDEN_LOOP)
	./$(BUILD)/abi_v1_shared $(BUILD)/worldA-f32.blob $(GOLDEN_LOOP)
	@objdump -T $(BUILD)/abi_v1_shared | grep -qE '[(]RECALL_0[)] +recall_open$$' || \
	  { echo "abi_v1_shared does not bind recall_open@RECALL_0"; exit 1; }
	@echo "abi-check: the version-1 program runs on librecall.a and librecall.so.$(SOMAJOR) (RECALL_0 symbols)"

$(BUILD)/worldA-f32.blob: $(RECALL_BIN)
	./$(RECALL_BIN) convert --qwen2 $(WORLDA)/qwen2 --bge $(WORLDA)/bge --pooler $(WORLDA)/pooler.pt \
	  --gate $(WORLDA)/gate.npz --bridge $(WORLDA)/bge_head.npz --quiet -o $@
# docs/CLI.md: its generated part is `recall help --markdown` (tests/test_cli_opts.c checks it).
cli-doc: $(RECALL_BIN)
	@{ sed '/^<!-- generated by `recall help --markdown`/q' docs/CLI.md; ./$(RECALL_BIN) help --markdown; \
	   sed -n '/^<!-- end of the generated part -->/,$$p' docs/CLI.md; } > docs/CLI.md.tmp && \
	  mv docs/CLI.md.tmp docs/CLI.md && echo "docs/CLI.md: generated part rewritten"
api-example: $(BUILD)/api_example $(BUILD)/worldA-f32.blob
	./$(BUILD)/api_example $(BUILD)/worldA-f32.blob $(WORLDA)/loop_A_seed0_faithful_fp32.json

# ---- build variants, each running the whole suite ----------------------------------------------
# VARIANT_RUN(dir, extra make args): builds ./recall, the suite and the API example under dir, then
# runs them in dir/root, a shadow of the repo root (tests -> the real tests/, recall -> dir/recall,
# build/ its own, so fixtures are converted by the variant's own code).
define VARIANT_RUN
	+$(MAKE) --no-print-directory BUILD=$(1) RECALL_BIN=$(1)/recall $(2) $(1)/recall $(1)/run_tests $(1)/api_example
	@mkdir -p $(1)/root/build
	@ln -sfn $(CURDIR)/tests $(1)/root/tests
	@ln -sfn $(CURDIR)/docs $(1)/root/docs
	@ln -sfn $(CURDIR)/$(1)/recall $(1)/root/recall
	cd $(1)/root && $(SAN_ENV) $(CURDIR)/$(1)/run_tests $(TEST_ARGS)
	cd $(1)/root && ./recall convert --qwen2 tests/golden/worldA/qwen2 --bge tests/golden/worldA/bge \
	  --pooler tests/golden/worldA/pooler.pt --gate tests/golden/worldA/gate.npz \
	  --bridge tests/golden/worldA/bge_head.npz --quiet -o build/worldA-f32.blob
	cd $(1)/root && $(SAN_ENV) $(CURDIR)/$(1)/api_example build/worldA-f32.blob \
	  tests/golden/worldA/loop_A_seed0_faithful_fp32.json
endef
test-nothreads:
	$(call VARIANT_RUN,build-nothreads,EXTRA_CFLAGS=-DRECALL_NO_THREADS)
	@! nm build-nothreads/librecall.a | grep -w 'U pthread_[a-z_]*' || \
	  (echo "librecall.a still calls pthreads with -DRECALL_NO_THREADS"; exit 1)
test-nommap:
	$(call VARIANT_RUN,build-nommap,EXTRA_CFLAGS=-DRECALL_NO_MMAP)
	@! nm build-nommap/librecall.a | grep -w 'U mmap' || \
	  (echo "librecall.a still calls mmap with -DRECALL_NO_MMAP"; exit 1)
SAN_CC ?= clang
SAN_OPT = OPT=-O1 FMA_FLAG= CC=$(SAN_CC)
# fast_unwind_on_malloc=0: full leak stacks through Criterion (no frame pointers), so that
# tests/lsan.supp can match Criterion's own runner allocations.
asan: SAN_ENV = ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp
asan: need-san
	$(call VARIANT_RUN,build-asan,$(SAN_OPT) EXTRA_CFLAGS="-fsanitize=address -fno-omit-frame-pointer")
# (a variable: a literal comma would split the $(call) arguments)
UBSAN_FLAGS = -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all
ubsan: SAN_ENV = UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ubsan: need-san
	$(call VARIANT_RUN,build-ubsan,$(SAN_OPT) EXTRA_CFLAGS="$(UBSAN_FLAGS)")
# TSan: Criterion's process arena cannot start under TSan ("Could not initialize inheritable
# arena"), so the TSan check is standalone: the CLI converter and the public-API example (the
# whole golden worldA turn, every model on the thread pool) at 2 and 4 threads.
tsan: need-san
	+$(MAKE) --no-print-directory BUILD=build-tsan RECALL_BIN=build-tsan/recall $(SAN_OPT) \
	  EXTRA_CFLAGS="-fsanitize=thread" build-tsan/recall build-tsan/api_example
	TSAN_OPTIONS=halt_on_error=1 build-tsan/recall convert --qwen2 $(WORLDA)/qwen2 --bge $(WORLDA)/bge \
	  --pooler $(WORLDA)/pooler.pt --gate $(WORLDA)/gate.npz --bridge $(WORLDA)/bge_head.npz --weights nf4 \
	  --quiet -o build-tsan/worldA-nf4.blob
	TSAN_OPTIONS=halt_on_error=1 build-tsan/recall convert --qwen2 $(WORLDA)/qwen2 --bge $(WORLDA)/bge \
	  --pooler $(WORLDA)/pooler.pt --gate $(WORLDA)/gate.npz --bridge $(WORLDA)/bge_head.npz \
	  --quiet -o build-tsan/worldA-f32.blob
	for t in 2 4; do TSAN_OPTIONS=halt_on_error=1 RECALL_THREADS=$$t build-tsan/api_example \
	  build-tsan/worldA-f32.blob $(GOLDEN_LOOP) || exit 1; done
sanitize: asan ubsan tsan

# The bundled worlds: worldA (random weights, the Hugging Face goldens), the wide world (the
# trained world continued on facts, questions and small talk as people word them: what `make demo`
# and a person meet first), the trained world (broad English in a phrasing grammar; the loop's
# span, edge and rerank pins are on it) and the templated world (the first trained world, which
# knows the benchmark's own keywords and templates; older loop features are pinned on it).
# docs/WORLD.md walks through the trained worlds.
WORLDA    = tests/golden/worldA
WIDE      = tests/golden/wide
TRAINED   = tests/golden/trained
TEMPLATED = tests/golden/templated
DEMO_PROBLEM ?= 0
# What `make demo` runs and the page (make web) opens first: the wide world and its dialogue.
DEMO_BLOB  = $(BUILD)/wide-f32.blob
DEMO_BENCH = $(WIDE)/demo_bench.json
# ... in the chat setting docs/WORLD.md recommends (the reference's faithful loop answers two of its
# three questions on this world: DEMO_LOOP="--mode faithful" shows it; --rerank words --top-k 1,
# one block at every fire, also two: docs/LOOP.md "One block when the words single it out")
DEMO_LOOP ?= --mode clean --span exchange --edge exchange --rerank single
# world_blob(name, folder, weights, more convert options): a bundled world converted like the
# real artifacts. The trained world's first two layers' attention stays exact under --numerics q8
# (docs/PROFILES.md, "Layers kept exact": measured on the 1,024-id world before this one, where q8's
# mean |dNLL| was over target without it; on this world q8 answers the benchmark as exact does with
# or without it, RC_bge 96 of 102 recommended, and its mean |dNLL| to exact is 0.015 with it, 0.030
# without: docs/PROFILES.md; the exact profile never reads it).
TRAINED_Q8_EXACT = --q8-exact 0-1:qkvo
# Its nf4 blob keeps every layer's v_proj in bf16 (docs/NUMERICS.md, "NF4": the copy is read from
# the value rows; measured on the 1,024-id world, nf4 RC_bge 82 -> 91 of 102 against f32's 93; on
# this world nf4 answers 101 of 102 with or without it, f32 96).
TRAINED_NF4_KEEP = --nf4-keep 0-3:v
define world_blob
$(BUILD)/$(1)-$(3).blob: $(RECALL_BIN) $$(wildcard $(2)/*.* $(2)/qwen2/* $(2)/bge/*)
	./$(RECALL_BIN) convert --qwen2 $(2)/qwen2 --bge $(2)/bge --pooler $(2)/pooler.pt \
	  --gate $(2)/gate.npz --bridge $(2)/bge_head.npz --weights $(3) $(4) --quiet -o $$@
endef
$(foreach w,f32 nf4,$(eval $(call world_blob,trained,$(TRAINED),$(w),$(TRAINED_Q8_EXACT) $(if $(filter nf4,$(w)),$(TRAINED_NF4_KEEP)))) $(eval $(call world_blob,templated,$(TEMPLATED),$(w))))
# the wide world keeps its parent's keys (the same decoder shape, continued)
$(foreach w,f32 nf4,$(eval $(call world_blob,wide,$(WIDE),$(w),$(TRAINED_Q8_EXACT) $(if $(filter nf4,$(w)),$(TRAINED_NF4_KEEP)))))
# The README's first command: the trained world (docs/WORLD.md) converted like the real
# artifacts, its demo chat (demo_bench.json: three facts a person tells, small talk, the questions)
# replayed through the recall loop on the SP arm (no recall) and the RC_bge arm (recall), each
# question's reply printed, the RC_bge trace drawn.
demo: recall $(DEMO_BLOB)
	@echo "demo: the wide world is told three facts, chats, then is asked for each ($(DEMO_BENCH))."
	@echo "      It answers facts like these asked back in the fact's words, at once or later (\"When does my train leave?\""
	@echo "      after \"My train leaves at 8:05.\"), but not all of them, nor a question naming the fact otherwise (\"When do I"
	@echo "      get in?\" for a flight that lands): a tiny model trained for this one job (docs/WORLD.md, \"Status\")."
	@echo "== SP arm (the gist only: the fact has scrolled out of the window)"
	./recall replay $(DEMO_BLOB) --bench $(DEMO_BENCH) --problem $(DEMO_PROBLEM) $(DEMO_LOOP) \
	  --arm SP --trace $(BUILD)/demo-trace-sp.json 2>$(BUILD)/demo-sp.txt; s=$$?; cat $(BUILD)/demo-sp.txt; exit $$s
	@echo "== RC_bge arm (recall: the gate fires, the bridge head brings the block back)"
	./recall replay $(DEMO_BLOB) --bench $(DEMO_BENCH) --problem $(DEMO_PROBLEM) $(DEMO_LOOP) \
	  --trace $(BUILD)/demo-trace.json 2>$(BUILD)/demo-rc.txt; s=$$?; cat $(BUILD)/demo-rc.txt; exit $$s
	./recall trace-svg $(BUILD)/demo-trace.json -o $(BUILD)/demo-trace.svg
	@echo "== the answers (each reply's text after </think>)"
	@awk -f tools/train_world/demo_answers.awk $(BUILD)/demo-sp.txt $(BUILD)/demo-rc.txt
	@echo "demo: traces in $(BUILD)/demo-trace.json (RC_bge) and $(BUILD)/demo-trace-sp.json (SP),"
	@echo "      picture in $(BUILD)/demo-trace.svg (open it in a browser); docs/WORLD.md explains them"
	@printf '%s\n' "try your own: printf 'Just so you know, my dentist is Dr. Halvorsen.\nHow was your weekend?\nWho is my dentist?\n' \\" \
	  "      | ./recall chat $(DEMO_BLOB) $(DEMO_LOOP)"
# The bundled random-weight worldA, whose loop the Hugging Face goldens hold bit for bit: converted,
# benchmark problem 0 replayed through the recall loop, its trace drawn (docs/VERIFYING.md).
demo-worldA: recall
	./recall convert --qwen2 $(WORLDA)/qwen2 --bge $(WORLDA)/bge --pooler $(WORLDA)/pooler.pt \
	  --gate $(WORLDA)/gate.npz --bridge $(WORLDA)/bge_head.npz --quiet -o $(BUILD)/worldA-f32.blob
	./recall replay $(BUILD)/worldA-f32.blob --bench tests/golden/recall_bench.json --problem 0 \
	  --trace $(BUILD)/demo-worldA-trace.json
	./recall trace-svg $(BUILD)/demo-worldA-trace.json -o $(BUILD)/demo-worldA-trace.svg
# Retrain the bundled worlds (tools/train_world/train.py: Debian python3 + python3-torch +
# python3-numpy, CPU, one thread, seeded, the same bytes: docs/WORLD.md). train-world writes the
# wide world into TRAIN_OUT in three stages, each resumable (checkpoints every 250 steps) and under
# 90 minutes on the 2-core development machine: 1. the trained world from scratch into TRAIN_INIT
# (the grammar's world, 59 minutes; skipped once TRAIN_INIT holds a MANIFEST.xxh64, so
# TRAIN_INIT=tests/golden/trained starts from the committed one), 2. its decoder continued on the
# wide wording (train.py --wording wide) into TRAIN_WIDE (skipped likewise), 3. that decoder
# continued on plain chats with the look-up-or-not decision's loss (--wording plain), then the
# gate, BERT and the bridge afresh. The -check targets compare a retrain's files with the
# committed manifest.
TRAIN_OUT ?= $(BUILD)/wide
TRAIN_INIT ?= $(BUILD)/trained
TRAIN_WIDE ?= $(BUILD)/wide-stage2
# OpenBLAS is told its kernels (Haswell: AVX2 + FMA, on every x86-64 host this project runs on):
# Debian's OpenBLAS does not know Zen 5 and falls back to its SSE3 "Prescott" kernels, 3x slower.
# One thread (torch's and OpenBLAS's): the recipe runs beside other work and gives the same bytes.
TRAIN_PY = OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/train_world/train.py
need-train:
	@$(NEED) train-world /usr/lib/python3/dist-packages/torch/__init__.py:python3-torch \
	  /usr/lib/python3/dist-packages/numpy/__init__.py:python3-numpy \
	  /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3:libopenblas0-pthread \
	  /usr/share/dict/american-english:wamerican /usr/share/wordnet/data.noun:wordnet-base
train-world-grammar: need-train
	@if [ -f $(TRAIN_INIT)/MANIFEST.xxh64 ]; then echo "train-world: stage 1 is there ($(TRAIN_INIT))"; \
	else $(TRAIN_PY) --out $(TRAIN_INIT); fi
train-world: train-world-grammar
	@if [ -f $(TRAIN_WIDE)/MANIFEST.xxh64 ]; then echo "train-world: stage 2 is there ($(TRAIN_WIDE))"; \
	else $(TRAIN_PY) --init $(TRAIN_INIT) --wording wide --out $(TRAIN_WIDE); fi
	$(TRAIN_PY) --init $(TRAIN_WIDE) --wording plain --out $(TRAIN_OUT)
train-world-check: train-world
	cd $(TRAIN_OUT) && diff MANIFEST.xxh64 $(CURDIR)/$(WIDE)/MANIFEST.xxh64 && echo "train-world: same bytes as $(WIDE)"
train-world-grammar-check: train-world-grammar
	cd $(TRAIN_INIT) && diff MANIFEST.xxh64 $(CURDIR)/$(TRAINED)/MANIFEST.xxh64 && \
	  echo "train-world-grammar: same bytes as $(TRAINED)"
# The templated world (tests/golden/templated): train-world-templated-check compares with its manifest.
train-world-templated: need-train
	$(TRAIN_PY) --world templated --out $(TRAIN_OUT)-templated
train-world-templated-check: train-world-templated
	cd $(TRAIN_OUT)-templated && diff MANIFEST.xxh64 $(CURDIR)/$(TEMPLATED)/MANIFEST.xxh64 && \
	  echo "train-world-templated: same bytes as $(TEMPLATED)"

# Synthetic real-shape world (random weights; ~3.6 GB of inputs under build/synth, not committed).
SYNTH ?= $(BUILD)/synth
$(BUILD)/gen_synth: bench/gen_synth.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
$(BUILD)/bench_open: bench/bench_open.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
synth: need-time recall $(BUILD)/gen_synth $(BUILD)/bench_open
	@test -f $(SYNTH)/qwen2/config.json || ./$(BUILD)/gen_synth $(SYNTH) tests/golden/tokenizers
	@echo "== convert the real-shape world to nf4 (wall time, peak RSS)"
	@/usr/bin/time -f "convert: %e s wall, %M KB peak RSS" ./recall convert --qwen2 $(SYNTH)/qwen2 --bge $(SYNTH)/bge \
	  --pooler $(SYNTH)/pooler.safetensors --gate $(SYNTH)/gate.npz --bridge $(SYNTH)/bge_head.npz \
	  --weights nf4 --quiet -o $(SYNTH)/r1-1.5b-nf4.blob
	@./$(BUILD)/bench_open $(SYNTH)/r1-1.5b-nf4.blob
	@/usr/bin/time -f "recall info: %e s wall, %M KB peak RSS" ./recall info $(SYNTH)/r1-1.5b-nf4.blob >/dev/null
# The copy world (bench/gen_synth.c --copy-world): the same shapes, a model whose greedy replies
# copy (for --draft's copy-heavy case); its bge / pooler / heads are the synth world's.
SYNTH_COPY ?= $(BUILD)/synth-copy
synth-copy: recall $(BUILD)/gen_synth
	@test -f $(SYNTH)/r1-1.5b-nf4.blob || $(MAKE) synth
	@test -f $(SYNTH_COPY)/qwen2/config.json || ./$(BUILD)/gen_synth --copy-world $(SYNTH_COPY) tests/golden/tokenizers
	@test -f $(SYNTH_COPY)/r1-1.5b-nf4-copy.blob || ./recall convert --qwen2 $(SYNTH_COPY)/qwen2 --bge $(SYNTH)/bge \
	  --pooler $(SYNTH)/pooler.safetensors --gate $(SYNTH)/gate.npz --bridge $(SYNTH)/bge_head.npz \
	  --weights nf4 --quiet -o $(SYNTH_COPY)/r1-1.5b-nf4-copy.blob

# Benchmarks (bench/bench.c; needs `make synth` for the model part). BENCH_ARGS=--quick for a
# shorter run, RECALL_BENCH_PATHS=avx2 to time one path.
$(BUILD)/bench: bench/bench.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -DBENCH_FLAGS='"$(CFLAGS_ALL)"' -o $@ $^ $(LDLIBS)
bench: $(BUILD)/bench
	./$(BUILD)/bench $(BENCH_ARGS)
# Tokenizer throughput (bench/bench_tok.c): real tokenizer files, no blob; BENCH_TOK_ARGS='--mb 6 --runs 5'.
$(BUILD)/bench_tok: bench/bench_tok.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
bench-tok: $(BUILD)/bench_tok
	./$(BUILD)/bench_tok $(BENCH_TOK_ARGS)
# Page-sparse decode (bench/bench_kv_pages.c): PPL against the page budget on one chunk and the
# decode tok/s at its end; KVP_IDS (whitespace ids), KVP_N, KVP_ARGS='--configs dense,64:1024 ...'.
$(BUILD)/bench_kv_pages: bench/bench_kv_pages.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
bench-kv-pages: $(BUILD)/bench_kv_pages
	./$(BUILD)/bench_kv_pages $(SYNTH)/r1-1.5b-nf4.blob $(KVP_IDS) $(KVP_N) $(KVP_ARGS)
# recall's side of bench/side_by_side.sh (llama-bench's tests and protocol, jsonl lines).
$(BUILD)/bench_sbs: bench/bench_sbs.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
# Decode step time against the context depth (bench/bench_depth.c), depths interleaved per round.
$(BUILD)/bench_depth: bench/bench_depth.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)

# Real-shape decoder smoke (64-token prefill + 16 decode steps, finite logits) and the loop's fast
# vs reference schedule (rows and wall time per turn, outputs checked bitwise).
$(BUILD)/realshape: bench/realshape.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
$(BUILD)/bench_loop: bench/bench_loop.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
$(BUILD)/bench_screen: bench/bench_screen.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
realshape: $(BUILD)/realshape
	./$(BUILD)/realshape $(SYNTH)/r1-1.5b-nf4.blob $(BENCH_ARGS)
bench-loop: $(BUILD)/bench_loop $(BUILD)/worldA-f32.blob
	./$(BUILD)/bench_loop $(BUILD)/worldA-f32.blob tests/golden/recall_bench.json $(BENCH_ARGS)
# Exact speculative decoding (bench/bench_draft.c): plain vs --draft N decode tok/s and acceptance on
# the real-shape synth blob (benchmark replies, a copy-heavy feed, random ids), interleaved.
$(BUILD)/bench_draft: bench/bench_draft.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
# The copy-heavy case also runs on the copy world (`make synth-copy`) when it is there: the random
# world never copies, so its copy case only shows the cost of rejected drafts.
bench-draft: $(BUILD)/bench_draft
	./$(BUILD)/bench_draft $(SYNTH)/r1-1.5b-nf4.blob tests/golden/recall_bench.json $(BENCH_ARGS)
	@if [ -f $(SYNTH_COPY)/r1-1.5b-nf4-copy.blob ]; then \
	  ./$(BUILD)/bench_draft $(SYNTH_COPY)/r1-1.5b-nf4-copy.blob tests/golden/recall_bench.json --case copy $(BENCH_ARGS); \
	else echo "bench-draft: no copy world ($(SYNTH_COPY)); make synth-copy adds the copy-heavy case on a model that copies"; fi
# Long context on the synth blob (bench/longctx_bench.c): per length a fresh process (peak RSS per
# length): prefill tok/s, decode tok/s at the end of the context, KV bytes, peak RSS.
# LONG_LENS='4096 8192' to pick lengths; BENCH_ARGS='--threads 2 --numerics q8 --kv f16'; RECALL_BENCH_LOAD=huge.
# LONG_NEEDLE=1: the prefill is a `recall longctx` needle case of at most N positions (BOS + prompt +
# 16 greedy steps) instead of pseudo-random ids; the line ends with the reply ids, and the case's
# expected answer is printed before it (`recall detokenize BLOB` gives the reply's text).
LONG_LENS ?= 4096 8192 16384 32768
$(BUILD)/longctx_bench: bench/longctx_bench.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
bench-long: $(BUILD)/longctx_bench $(if $(LONG_NEEDLE),recall)
	@for n in $(LONG_LENS); do \
	  if [ -n "$(LONG_NEEDLE)" ]; then \
	    d=$(BUILD)/long-needle-$$n; \
	    ./recall longctx $(SYNTH)/r1-1.5b-nf4.blob --task needle --len $$((n - 17)) --prompts $$d --no-run \
	      --json $$d/cases.json >/dev/null || exit 1; \
	    echo "needle case at $$n: expected $$(grep -o '"expected": *"[0-9]*"' $$d/cases.json | grep -o '[0-9][0-9]*')"; \
	    ./$(BUILD)/longctx_bench $(SYNTH)/r1-1.5b-nf4.blob --decode 16 $(BENCH_ARGS) --prompt $$d/case-0.ids || exit 1; \
	  else ./$(BUILD)/longctx_bench $(SYNTH)/r1-1.5b-nf4.blob --len $$n $(BENCH_ARGS) || exit 1; fi; \
	done

# A rebuild as the evicted history grows (bench/bench_history.c): pooler time (wall, CPU), the
# rebuild's 800-row forward and the peak RSS per history length, one process each, without the
# pooler cache and with one that holds the whole history; then what else grows (--other: the
# archive, the bridge keys, a fire's scoring, the session file). HISTORY_LENS='1024 4096',
# BENCH_ARGS='--threads 2 --reps 3'. bench/history_plot.py draws the table into an SVG.
HISTORY_LENS ?= 1024 4096 16384 65536
HISTORY_CACHE_MB ?= 2600
$(BUILD)/bench_history: bench/bench_history.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
bench-history: $(BUILD)/bench_history
	./$(BUILD)/bench_history $(SYNTH)/r1-1.5b-nf4.blob --len $(firstword $(HISTORY_LENS)) --reps 1 $(BENCH_ARGS)
	@for n in $(HISTORY_LENS); do \
	  ./$(BUILD)/bench_history $(SYNTH)/r1-1.5b-nf4.blob --len $$n --rows 0 $(BENCH_ARGS) || exit 1; \
	  ./$(BUILD)/bench_history $(SYNTH)/r1-1.5b-nf4.blob --len $$n --rows 0 --cache-mb $(HISTORY_CACHE_MB) $(BENCH_ARGS) \
	    || exit 1; \
	done
	./$(BUILD)/bench_history $(SYNTH)/r1-1.5b-nf4.blob --other $(lastword $(HISTORY_LENS))

# The footprint of one whole recall turn at real shape (bench/bench_device.c, docs/MEMORY.md "device"):
# a 4k-token conversation with eviction, the rebuilds, fires with their BERT encodes and 128 decoded
# tokens through the public API, one process per profile: peak RSS, the blob's bytes and the pages the
# turn touched by part, anonymous memory, what max_memory is checked against. exact runs on the synth
# nf4 blob, device (--numerics q8, --kv f16) on the same world converted with --weights nf4
# --bge-weights nf4 --lm-head-screen (made here once). Heavy: not part of `make test`.
# BENCH_ARGS='--threads 2 --history 4096 --decode 128 --pooler-cache MB'.
DEVICE_BLOB ?= $(SYNTH)/r1-1.5b-device.blob
$(BUILD)/bench_device: bench/bench_device.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
$(DEVICE_BLOB): | $(RECALL_BIN)
	@test -f $(SYNTH)/r1-1.5b-nf4.blob || $(MAKE) synth
	./recall convert --qwen2 $(SYNTH)/qwen2 --bge $(SYNTH)/bge --pooler $(SYNTH)/pooler.safetensors \
	  --gate $(SYNTH)/gate.npz --bridge $(SYNTH)/bge_head.npz --weights nf4 --bge-weights nf4 --lm-head-screen \
	  --quiet -o $@
bench-device: recall $(BUILD)/bench_device $(DEVICE_BLOB)
	@echo "host: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $$(nproc) cores; $$(date -u +%FT%TZ)"
	./$(BUILD)/bench_device $(SYNTH)/r1-1.5b-nf4.blob --profile exact $(BENCH_ARGS)
	./$(BUILD)/bench_device $(DEVICE_BLOB) --profile device $(BENCH_ARGS)

# Far-back recall's cost (bench/bench_farback.c): per distance, `longctx --task farfact`'s chats through the
# RC_bge loop: turn time, each fire's BERT encodes and wall time, peak RSS; then a cold and a warm fire
# and the bridge scoring alone on the archive at the question. FARBACK_BLOB / FARBACK_BENCH: another
# world (a retrained tests/golden/trained converts to the default blob).
FARBACK_BLOB ?= $(BUILD)/trained-f32.blob
FARBACK_BENCH ?= $(TRAINED)/eval_bench.json
$(BUILD)/bench_farback: bench/bench_farback.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
bench-farback: $(BUILD)/bench_farback $(FARBACK_BLOB)
	./$(BUILD)/bench_farback $(FARBACK_BLOB) $(FARBACK_BENCH) $(BENCH_ARGS)

# Long-running sessions (bench/soak.c, not part of `make test`): an uninterrupted reference chat,
# then the same chat SIGKILLed at seeded points and restarted from the session file; checks every
# state against the reference and reports peak RSS. SOAK_ARGS: --turns N --kills K --seed S
# --reply-cap M. soak-lsan runs a shorter one with the ASan/LSan build of ./recall.
$(BUILD)/soak: bench/soak.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
soak: $(RECALL_BIN) $(BUILD)/soak $(BUILD)/worldA-f32.blob
	./$(BUILD)/soak ./$(RECALL_BIN) $(BUILD)/worldA-f32.blob $(SOAK_ARGS)
soak-lsan: $(BUILD)/soak $(BUILD)/worldA-f32.blob
	+$(MAKE) --no-print-directory BUILD=build-asan RECALL_BIN=build-asan/recall $(SAN_OPT) \
	  EXTRA_CFLAGS="-fsanitize=address -fno-omit-frame-pointer" build-asan/recall
	ASAN_OPTIONS=detect_leaks=1 ./$(BUILD)/soak build-asan/recall $(BUILD)/worldA-f32.blob --turns 30 --kills 4 \
	  $(SOAK_ARGS)

# Cross builds (Debian's cross gcc + qemu-user; timings there mean nothing). Each builds the library,
# the standalone SIMD kernel self-test (no Criterion on the target) and the public-API example, and
# runs both under qemu: the self-test checks every kernel of the target's paths bitwise against
# scalar; the example (blob converted on the build host) checks the tokenizer round trip and the
# API's error values, and forwards the first CROSS_N ids of the worldA golden conversation, whose
# logits must be bitwise those of the native build (which passed the full golden turn; a whole
# turn takes minutes to hours under qemu). aarch64 checks NEON and scalar; armhf (32-bit) and
# riscv64 are scalar. s390x (big-endian) must refuse the little-endian blob with a clear message.
# Packages: gcc-<triple> libc6-dev-<arch>-cross qemu-user-static.
CROSS_BUILD ?= build-cross
CROSS_N     ?= 48
GOLDEN_LOOP  = $(WORLDA)/loop_A_seed0_faithful_fp32.json
$(BUILD)/worldA-logits.bin: $(BUILD)/api_example $(BUILD)/worldA-f32.blob
	./$(BUILD)/api_example $(BUILD)/worldA-f32.blob $(GOLDEN_LOOP) --write-logits $@ $(CROSS_N)
# the q8 numerics profile's logits on the nf4 blob (the cross builds must give the same bits)
$(BUILD)/worldA-nf4.blob: $(RECALL_BIN)
	./$(RECALL_BIN) convert --qwen2 $(WORLDA)/qwen2 --bge $(WORLDA)/bge --pooler $(WORLDA)/pooler.pt \
	  --gate $(WORLDA)/gate.npz --bridge $(WORLDA)/bge_head.npz --weights nf4 --quiet -o $@
$(BUILD)/worldA-logits-q8.bin: $(BUILD)/api_example $(BUILD)/worldA-nf4.blob
	./$(BUILD)/api_example $(BUILD)/worldA-nf4.blob $(GOLDEN_LOOP) --write-logits $@ $(CROSS_N) q8
define CROSS_BUILD_LIB
	+$(MAKE) --no-print-directory CC=$(2)-gcc FMA_FLAG= BUILD=$(CROSS_BUILD)/$(1) $(CROSS_BUILD)/$(1)/librecall.a \
	  $(CROSS_BUILD)/$(1)/librecall_harness.a $(CROSS_BUILD)/$(1)/librecall_convert.a $(CROSS_BUILD)/$(1)/api_example
	$(2)-gcc $(CSTD) $(OPT) $(WARN) $(FPFLAGS) $(DEFS) $(INC) -DRC_SELFTEST_MAIN -o $(CROSS_BUILD)/$(1)/simd_selftest \
	  tests/simd_selftest.c $(CROSS_BUILD)/$(1)/librecall.a $(LDLIBS)
endef
define CROSS_RUN
	$(call CROSS_BUILD_LIB,$(1),$(2))
	$(3) -L /usr/$(2) $(CROSS_BUILD)/$(1)/simd_selftest
	$(3) -L /usr/$(2) $(CROSS_BUILD)/$(1)/api_example $(BUILD)/worldA-f32.blob $(GOLDEN_LOOP) \
	  --check-logits $(BUILD)/worldA-logits.bin $(CROSS_N)
endef
# The kv-pages and screening suites on the target (their path tests then check NEON against
# scalar): the Criterion sources unchanged, built against tests/cross/criterion (a stand-in runner,
# one process per test) and run under qemu from a shadow root whose ./recall runs the target's CLI
# under qemu too (some tests call ./recall). CROSS_SUITES_FILTER picks tests ('kv_pages/*'; a
# leading ! leaves out): by default all but the four screened loop goldens, which replay whole
# worldA conversations (about 40 min each under qemu on a shared machine; CROSS_SUITES_FILTER=
# runs them too). Their kernels are the self-test's, their picks those of lm_screen/adversarial_ties.
CROSS_SUITES = tests/test_kv_pages.c tests/test_lm_head_screen.c
CROSS_SUITES_FILTER ?= '!lm_screen/goldens_*'
define CROSS_SUITES_RUN
	+$(MAKE) --no-print-directory CC=$(2)-gcc FMA_FLAG= BUILD=$(CROSS_BUILD)/$(1) RECALL_BIN=$(CROSS_BUILD)/$(1)/recall \
	  $(CROSS_BUILD)/$(1)/recall
	$(2)-gcc $(CSTD) $(OPT) $(FPFLAGS) $(DEFS) $(INC) -isystem tests/cross -o $(CROSS_BUILD)/$(1)/suites $(CROSS_SUITES) \
	  tests/fixture.c tests/cross/criterion_shim.c $(CROSS_BUILD)/$(1)/librecall_harness.a \
	  $(CROSS_BUILD)/$(1)/librecall_convert.a $(CROSS_BUILD)/$(1)/librecall.a $(LDLIBS)
	@mkdir -p $(CROSS_BUILD)/$(1)/root/build
	@ln -sfn $(CURDIR)/tests $(CROSS_BUILD)/$(1)/root/tests
	@printf '#!/bin/sh\nexec $(3) -L /usr/$(2) $(CURDIR)/$(CROSS_BUILD)/$(1)/recall "$$@"\n' >$(CROSS_BUILD)/$(1)/root/recall
	@chmod +x $(CROSS_BUILD)/$(1)/root/recall
	cd $(CROSS_BUILD)/$(1)/root && $(3) -L /usr/$(2) $(CURDIR)/$(CROSS_BUILD)/$(1)/suites $(CROSS_SUITES_FILTER)
endef
cross-test-aarch64: need-cross-aarch64 $(BUILD)/worldA-f32.blob $(BUILD)/worldA-logits.bin $(BUILD)/worldA-logits-q8.bin
	$(call CROSS_RUN,aarch64,aarch64-linux-gnu,qemu-aarch64-static)
	@# the q8 profile: NEON with the dot-product extension (qemu's CPU has it), NEON without it
	@# (RECALL_NO_DOT=1), scalar: the kernels against the oracle, then the logits of the native build
	for env in "" RECALL_NO_DOT=1 RECALL_SIMD=scalar; do \
	  env $$env qemu-aarch64-static -L /usr/aarch64-linux-gnu $(CROSS_BUILD)/aarch64/simd_selftest || exit 1; \
	  env $$env qemu-aarch64-static -L /usr/aarch64-linux-gnu $(CROSS_BUILD)/aarch64/api_example \
	    $(BUILD)/worldA-nf4.blob $(GOLDEN_LOOP) --check-logits $(BUILD)/worldA-logits-q8.bin $(CROSS_N) q8 || exit 1; \
	done
	RECALL_SIMD=scalar qemu-aarch64-static -L /usr/aarch64-linux-gnu $(CROSS_BUILD)/aarch64/api_example \
	  $(BUILD)/worldA-f32.blob $(GOLDEN_LOOP) --check-logits $(BUILD)/worldA-logits.bin $(CROSS_N)
	$(call CROSS_SUITES_RUN,aarch64,aarch64-linux-gnu,qemu-aarch64-static)
	@# CROSS_FULL=1: also the whole golden turn on NEON (about 1.5 min under qemu-aarch64)
	$(if $(CROSS_FULL),qemu-aarch64-static -L /usr/aarch64-linux-gnu $(CROSS_BUILD)/aarch64/api_example \
	  $(BUILD)/worldA-f32.blob $(GOLDEN_LOOP))
cross-test-armhf: need-cross-armhf $(BUILD)/worldA-f32.blob $(BUILD)/worldA-logits.bin
	$(call CROSS_RUN,armhf,arm-linux-gnueabihf,qemu-arm-static)
cross-test-riscv64: need-cross-riscv64 $(BUILD)/worldA-f32.blob $(BUILD)/worldA-logits.bin
	$(call CROSS_RUN,riscv64,riscv64-linux-gnu,qemu-riscv64-static)
# Big-endian: the example must fail at recall_open with the loader's byte-order message.
cross-test-s390x: need-cross-s390x $(BUILD)/worldA-f32.blob
	$(call CROSS_BUILD_LIB,s390x,s390x-linux-gnu)
	@out=$$(qemu-s390x-static -L /usr/s390x-linux-gnu $(CROSS_BUILD)/s390x/api_example $(BUILD)/worldA-f32.blob \
	  $(GOLDEN_LOOP) 2>&1); rc=$$?; echo "$$out"; \
	  if [ $$rc -ne 0 ] && echo "$$out" | grep -q "big-endian hosts are not supported"; then \
	    echo "s390x: blob refused with the byte-order message (as promised)"; \
	  else echo "s390x: expected a refusal naming the byte order (exit $$rc)"; exit 1; fi
# The device profile's real-shape recall turn (bench/bench_device.c) on NEON under qemu-aarch64, the
# same turn natively: the same digest of every event and the reply, the peak within qemu's own memory
# (tools/cross_device.sh). qemu runs it 400x slower than this host, so the turn is shortened:
# CROSS_DEVICE_ARGS (default a 665-token conversation, 11 rebuilds, 2 fires with their BERT encodes,
# 4 decoded tokens: 16 s natively, about two hours under qemu; the 4k turn would take days).
CROSS_DEVICE_ARGS ?= --history 640 --decode 4 --threads 1
cross-bench-device: need-cross-aarch64 $(BUILD)/bench_device $(DEVICE_BLOB)
	$(call CROSS_BUILD_LIB,aarch64,aarch64-linux-gnu)
	aarch64-linux-gnu-gcc $(CSTD) $(OPT) $(WARN) $(FPFLAGS) $(DEFS) $(INC) -o $(CROSS_BUILD)/aarch64/bench_device \
	  bench/bench_device.c $(CROSS_BUILD)/aarch64/librecall_harness.a $(CROSS_BUILD)/aarch64/librecall_convert.a \
	  $(CROSS_BUILD)/aarch64/librecall.a $(LDLIBS)
	sh tools/cross_device.sh ./$(BUILD)/bench_device $(CROSS_BUILD)/aarch64/bench_device $(DEVICE_BLOB) \
	  $(CROSS_DEVICE_ARGS)
cross-test: cross-test-aarch64 cross-test-armhf cross-test-riscv64 cross-test-s390x

FUZZ_CC    ?= clang
FUZZ_FLAGS  = $(CSTD) -O1 -g $(FPFLAGS) $(DEFS) $(INC) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TIME  ?= 20
FUZZ_BIN    = $(patsubst fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
# One fuzzer binary per fuzz/fuzz_<name>.c, all linked with one copy of the library built with
# coverage + ASan + UBSan instrumentation (build/fuzzlib).
FUZZ_LIBS   = $(BUILD)/fuzzlib/librecall_harness.a $(BUILD)/fuzzlib/librecall_convert.a $(BUILD)/fuzzlib/librecall.a
$(BUILD)/fuzzlib/librecall.a: $(LIB_SRC) $(HARNESS_SRC) $(CONVERT_SRC) | need-fuzz
	+$(MAKE) --no-print-directory BUILD=$(BUILD)/fuzzlib CC=$(FUZZ_CC) OPT=-O1 FMA_FLAG= \
	  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" $(FUZZ_LIBS)
$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c $(BUILD)/fuzzlib/librecall.a | need-fuzz
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIBS) -lm -lpthread
# FUZZ_RUN(time): every target for `time` seconds; new inputs go to build/fuzz/corpus-<name>, the
# committed seeds (fuzz/corpus/<name>) are read only. Every target runs even when an earlier one
# crashed; artifacts go to build/fuzz/found-<target>/ (turn each into a regression test) and the
# run fails at the end naming the targets.
define FUZZ_RUN
	@failed=""; for f in $(FUZZ_SRC); do \
	  n=$$(basename $$f .c); \
	  echo "== $$n ($(1) s)"; \
	  mkdir -p $(BUILD)/fuzz/corpus-$$n; \
	  seeds=""; [ -d fuzz/corpus/$$n ] && seeds=fuzz/corpus/$$n; \
	  $(BUILD)/fuzz/$$n -max_total_time=$(1) -rss_limit_mb=2048 -artifact_prefix=$(BUILD)/fuzz/ \
	    -print_final_stats=1 $(BUILD)/fuzz/corpus-$$n $$seeds 2>&1 | grep -E "^(stat::number_of_executed_units|stat::new_units_added|==|INFO: seed corpus)|ERROR|SUMMARY" || true; \
	  test -z "$$(ls $(BUILD)/fuzz/crash-* $(BUILD)/fuzz/leak-* $(BUILD)/fuzz/timeout-* $(BUILD)/fuzz/oom-* 2>/dev/null)" || \
	    { echo "$$n: crash artifact in $(BUILD)/fuzz/"; failed="$$failed $$n"; \
	      mkdir -p $(BUILD)/fuzz/found-$$n; mv $(BUILD)/fuzz/crash-* $(BUILD)/fuzz/leak-* $(BUILD)/fuzz/timeout-* \
	        $(BUILD)/fuzz/oom-* $(BUILD)/fuzz/found-$$n/ 2>/dev/null || true; }; \
	done; \
	test -z "$$failed" || { echo "fuzz: artifacts for:$$failed (build/fuzz/found-<target>/)"; exit 1; }
endef
fuzz-smoke: $(FUZZ_BIN)
	$(call FUZZ_RUN,$(FUZZ_TIME))
# The fixed-budget run (default 10 minutes per target).
fuzz: FUZZ_TIME = 600
fuzz: $(FUZZ_BIN)
	$(call FUZZ_RUN,$(FUZZ_TIME))

# The seeds that need the library's writer (blobs with screening tensors and a RoPE profile).
$(BUILD)/fuzz_seeds: fuzz/make_seeds.c $(TOOL_LIBS)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS)
fuzz-seeds: $(BUILD)/fuzz_seeds
	./$(BUILD)/fuzz_seeds fuzz/corpus

# Folds what the runs found into the committed corpus: only inputs that add coverage (libFuzzer
# -merge=1), so fuzz/corpus stays small.
fuzz-merge: $(FUZZ_BIN)
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); [ -d $(BUILD)/fuzz/corpus-$$n ] || continue; \
	  mkdir -p fuzz/corpus/$$n; \
	  $(BUILD)/fuzz/$$n -merge=1 -rss_limit_mb=2048 fuzz/corpus/$$n $(BUILD)/fuzz/corpus-$$n 2>&1 | grep -E "MERGE-OUTER: [0-9]+ new files" || true; \
	done

clean:
	rm -rf $(BUILD) recall build-nothreads build-nommap build-asan build-ubsan build-tsan $(CROSS_BUILD)

# recall in the browser: make web, serve-web, test-web, bench-web (docs/WEB.md)
include web/web.mk

-include $(DEPS)
