# web/web.mk - recall in the browser (docs/WEB.md), included by the Makefile.
#
# The engine is compiled with Debian's clang for wasm32-wasi against Debian's wasi-libc, as a WASI
# "reactor": one module that exports the page's entry points (web/web_api.c) and the CLI's main,
# with the few WASI calls it makes served by web/wasi.js (an in-memory file system, no network).
# Why not emscripten: Debian's emscripten (3.1.6) brings a node/python toolchain, its own libc and
# JS runtime; wasi-libc + clang is the C11/libc/libm build this engine already is, its imports are
# a short list we can read (web/wasi.js), and the same module runs under node for the benchmark.
# -DRECALL_NO_THREADS -DRECALL_NO_MMAP: a browser worker has neither (one thread, blob in memory).
# -msimd128: the wasm kernel path (simd/kernels_wasm.c), the same bits as scalar.
# Two modules: recall.wasm (SIMD128, the exact fmaf emulated in double) and recall-relaxed.wasm, the
# same objects but simd/kernels_wasm.c built with -mrelaxed-simd, whose kernels use
# f32x4.relaxed_madd where the module proves at load that the engine fuses it (else the same
# emulation). clang 14 emits relaxed-simd's pre-standard opcodes, which browsers refuse: that one
# file and the link are Debian's clang-16 (the standard opcodes).
WEB      = $(BUILD)/web
WEB_OBJ_DIR = $(BUILD)/wasm
WEB_CC   = clang --target=wasm32-wasi
WEB_OPT  = -O2
WEB_CFLAGS = $(CSTD) $(WEB_OPT) $(WARN) $(FPFLAGS) -msimd128 -include web/wasm_fmaf.h $(DEFS) -DRECALL_NO_THREADS -DRECALL_NO_MMAP $(INC)
# 8 MiB of stack as a native main thread has (wasm-ld's default is 64 KiB); memory grows on demand.
WEB_LDFLAGS = -mexec-model=reactor -Wl,-z,stack-size=8388608 -Wl,--strip-debug
WEB_SRC  = $(LIB_SRC) $(HARNESS_SRC) $(CONVERT_SRC) $(CLI_SRC) web/web_api.c
WEB_OBJ  = $(patsubst %.c,$(WEB_OBJ_DIR)/%.o,$(WEB_SRC))
# The world the page opens first: the one `make demo` runs (its blob and dialogue).
WEB_FILES = $(WEB)/index.html $(WEB)/page.js $(WEB)/recall.js $(WEB)/wasi.js $(WEB)/worker.js $(WEB)/loop_view.js \
  $(WEB)/style.css \
  $(WEB)/world.blob $(WEB)/demo_bench.json
WEB_PORT ?= 8737

WEB_CC16 = clang-16 --target=wasm32-wasi
WEB_RELAXED_OBJ = $(filter-out $(WEB_OBJ_DIR)/simd/kernels_wasm.o,$(WEB_OBJ)) $(WEB_OBJ_DIR)/relaxed/kernels_wasm.o

need-web:
	@$(NEED) web clang:clang /usr/lib/wasm32-wasi/libc.a:wasi-libc \
	  $(shell clang -print-resource-dir 2>/dev/null)/lib/wasi/libclang_rt.builtins-wasm32.a:libclang-rt-14-dev-wasm32 \
	  clang-16:clang-16 wasm-ld-16:lld-16 /usr/lib/llvm-16/lib/clang/16/lib/wasi/libclang_rt.builtins-wasm32.a:libclang-rt-16-dev-wasm32

$(WEB_OBJ_DIR)/%.o: %.c web/wasm_fmaf.h web/web.mk | need-web
	@mkdir -p $(dir $@)
	$(WEB_CC) $(WEB_CFLAGS) -MMD -MP -c $< -o $@
# The CLI's main becomes web_cli's callee: a reactor has no _start.
$(WEB_OBJ_DIR)/src/cli/main.o: WEB_CFLAGS += -Dmain=rc_cli_main

$(WEB)/recall.wasm: $(WEB_OBJ)
	@mkdir -p $(dir $@)
	$(WEB_CC) $(WEB_LDFLAGS) -o $@ $^ -lm
$(WEB_OBJ_DIR)/relaxed/kernels_wasm.o: simd/kernels_wasm.c simd/kernels_wasm_madd.h web/wasm_fmaf.h web/web.mk | need-web
	@mkdir -p $(dir $@)
	$(WEB_CC16) $(WEB_CFLAGS) -mrelaxed-simd -MMD -MP -c $< -o $@
$(WEB)/recall-relaxed.wasm: $(WEB_RELAXED_OBJ)
	@mkdir -p $(dir $@)
	$(WEB_CC16) $(WEB_LDFLAGS) -o $@ $^ -lm
# The kernel self-test (tests/simd_selftest.c, standalone) as a WASI command: every kernel of the
# wasm path against the scalar reference, bitwise, run under node by make test-web.
WEB_LIB_OBJ = $(patsubst %.c,$(WEB_OBJ_DIR)/%.o,$(LIB_SRC))
$(WEB_OBJ_DIR)/simd_selftest.wasm: tests/simd_selftest.c $(WEB_LIB_OBJ) web/wasm_fmaf.h web/web.mk | need-web
	$(WEB_CC) $(WEB_CFLAGS) -Itests -DRC_SELFTEST_MAIN -Wl,-z,stack-size=8388608 -o $@ tests/simd_selftest.c \
	  $(WEB_LIB_OBJ) -lm
# ... and on the relaxed-simd module's kernels (the fused ones where node's engine fuses)
$(WEB_OBJ_DIR)/simd_selftest-relaxed.wasm: tests/simd_selftest.c $(filter-out $(WEB_OBJ_DIR)/simd/kernels_wasm.o,$(WEB_LIB_OBJ)) \
  $(WEB_OBJ_DIR)/relaxed/kernels_wasm.o web/wasm_fmaf.h web/web.mk | need-web
	$(WEB_CC16) $(WEB_CFLAGS) -Itests -DRC_SELFTEST_MAIN -Wl,-z,stack-size=8388608 -o $@ tests/simd_selftest.c \
	  $(filter %.o,$^) -lm
$(WEB)/world.blob: $(DEMO_BLOB)
	@mkdir -p $(dir $@)
	cp $< $@
$(WEB)/demo_bench.json: $(DEMO_BENCH)
	@mkdir -p $(dir $@)
	cp $< $@
$(WEB)/%: web/%
	@mkdir -p $(dir $@)
	cp $< $@

web: $(WEB)/recall.wasm $(WEB)/recall-relaxed.wasm $(WEB_FILES)
	@echo "web: $(WEB)/ (recall.wasm $$(du -k $(WEB)/recall.wasm | cut -f1) KiB, recall-relaxed.wasm $$(du -k $(WEB)/recall-relaxed.wasm | cut -f1) KiB); make serve-web, then open http://127.0.0.1:$(WEB_PORT)/"

# A loopback-only static server for the site (python3's http.server: no network beyond 127.0.0.1).
serve-web: web
	@$(NEED) serve-web python3:python3
	@echo "serve-web: open http://127.0.0.1:$(WEB_PORT)/ (Ctrl-C stops)"
	cd $(WEB) && python3 -m http.server $(WEB_PORT) --bind 127.0.0.1

# The page in a real browser (web/test_web.mjs): Debian's chromium-headless-shell driven by npm's
# puppeteer-core, installed into build/node (tools/need.sh; nothing is downloaded at run time).
WEB_NODE = $(BUILD)/node
# node 20's engine has relaxed-simd behind a flag (later ones ship it, and may not know the flag)
WEB_NODE_RELAXED := $(shell node --v8-options 2>/dev/null | grep -q -e '--experimental-wasm-relaxed-simd ' && echo --experimental-wasm-relaxed-simd)
need-web-test:
	@$(NEED) test-web node:nodejs npm:npm /usr/bin/chromium-headless-shell:chromium-headless-shell
	@$(NEED) --npm test-web $(WEB_NODE) puppeteer-core@24
test-web: need-web-test web recall $(DEMO_BLOB) $(BUILD)/worldA-f32.blob $(WEB_OBJ_DIR)/simd_selftest.wasm \
  $(WEB_OBJ_DIR)/simd_selftest-relaxed.wasm
	$(CC) $(CSTD) -O2 $(WARN) $(FPFLAGS) $(FMA_FLAG) -Iweb web/fmaf_check.c -o $(BUILD)/fmaf_check -lm
	./$(BUILD)/fmaf_check
	node web/run_wasi.mjs $(WEB_OBJ_DIR)/simd_selftest.wasm > $(BUILD)/web-selftest.log; s=$$?; tail -3 $(BUILD)/web-selftest.log; \
	  test $$s = 0 && grep -q '^path wasm (.*): [1-9][0-9]* passed, 0 failed' $(BUILD)/web-selftest.log || \
	  { echo "test-web: the wasm kernel path failed its self-test or did not run"; exit 1; }
	@# the worker's choice of module: relaxed-simd refused without node 20's flag, fused with it
	test -z "$(WEB_NODE_RELAXED)" || { v=$$(node web/madd_probe.mjs); echo "without the flag: $$v"; test "$$v" = 'relaxedMadd: unsupported'; }
	v=$$(node $(WEB_NODE_RELAXED) web/madd_probe.mjs); echo "$$v"; test "$$v" = 'relaxedMadd: fused'
	node $(WEB_NODE_RELAXED) web/run_wasi.mjs $(WEB_OBJ_DIR)/simd_selftest-relaxed.wasm > $(BUILD)/web-selftest-relaxed.log; s=$$?; \
	  tail -3 $(BUILD)/web-selftest-relaxed.log; test $$s = 0 && \
	  grep -q '^path wasm (.*): [1-9][0-9]* passed, 0 failed' $(BUILD)/web-selftest-relaxed.log && \
	  grep -q '^wasm kernels: fused multiply-add' $(BUILD)/web-selftest-relaxed.log || \
	  { echo "test-web: the relaxed-simd module's fused kernels failed their self-test or did not run"; exit 1; }
	node web/test_web.mjs --recall ./recall --site $(WEB) --blob $(DEMO_BLOB) --bench $(DEMO_BENCH) \
	  --problem $(DEMO_PROBLEM) --other-blob $(BUILD)/worldA-f32.blob --node-modules $(WEB_NODE)/node_modules --out $(BUILD)

# The world's replay under wasm (node, the page's own WASI glue; and in Chromium when make test-web
# has installed its driver) against native scalar, one run.
bench-web: web recall $(DEMO_BLOB)
	bash bench/web_vs_native.sh ./recall $(WEB) $(DEMO_BLOB) $(DEMO_BENCH) $(DEMO_PROBLEM) 3 $(WEB_NODE)/node_modules

.PHONY: web serve-web test-web bench-web need-web need-web-test
-include $(WEB_OBJ:.o=.d) $(WEB_OBJ_DIR)/relaxed/kernels_wasm.d
