# llmux — the two commands that do everything on a fresh Debian 12 machine:
#   make run    install what is missing, build, generate the demo model, serve it on :8080
#   make test   install what is missing, build, generate the test models, run every test
#
# Other targets: build, models, bench, clean. Variables: BUILD (build dir),
# JOBS, CMAKE_FLAGS (e.g. -DLLMUX_CUDA=ON), LLAMA_CPP_DIR (an existing llama.cpp checkout),
# PORT, HOST.

BUILD       ?= build
JOBS        ?= $(shell nproc)
CMAKE_FLAGS ?=
PORT        ?= 8080
HOST        ?= 127.0.0.1
MODELS      ?= models

ifdef LLAMA_CPP_DIR
LLAMA_FLAG  := -DLLAMA_CPP_DIR=$(abspath $(LLAMA_CPP_DIR))
LLAMA_STAMP :=
else
LLAMA_FLAG  :=
LLAMA_STAMP := third_party/llama.cpp/.git/HEAD
endif

MAKE_MODEL := $(BUILD)/tools/make_model/llmux-make-model
TEST_MODELS := $(MODELS)/tiny.gguf $(MODELS)/tiny-qwen2.gguf
NODE_MODULES := tests/integration/node_modules/.package-lock.json

.PHONY: run test build deps models bench clean

run: build $(MODELS)/demo.gguf
	$(BUILD)/src/llmux serve --model $(MODELS)/demo.gguf --host $(HOST) --port $(PORT)

test: build $(TEST_MODELS) $(NODE_MODULES)
	cd $(BUILD) && ctest --output-on-failure --timeout 600

build: deps $(LLAMA_STAMP) $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target llmux llmux-make-model llmux_unit_tests

deps:
	@scripts/install-deps.sh

third_party/llama.cpp/.git/HEAD:
	scripts/fetch-llama.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(LLAMA_FLAG) $(CMAKE_FLAGS)

models: $(TEST_MODELS) $(MODELS)/demo.gguf

$(MODELS)/%.gguf: | $(MAKE_MODEL)
	@mkdir -p $(MODELS)
	$(MAKE_MODEL) --preset $* --out $@

$(MAKE_MODEL):
	$(MAKE) build

$(NODE_MODULES): tests/integration/package.json tests/integration/package-lock.json
	cd tests/integration && npm ci --no-audit --no-fund --loglevel=error

bench: build
	bench/compare.sh

clean:
	rm -rf $(BUILD)
