# dtrain: the two commands, and a few helpers, over CMake.
# `make help` prints this block.
#
#   make demo        install what the demo needs, build, run the example job
#                    on the local Slurm cluster (started when none is
#                    configured)
#   make demo-gpt    the same with the GPT example (jobs/gpt-tiny-2x2.json)
#   make demo-llama  the same with the Llama example (jobs/llama-tiny-2x2.json)
#   make test        install what is missing, the test tools too, build, run
#                    every test (also under AddressSanitizer + UBSan, in a
#                    CPU-only build; the Release configuration is compiled too)
#   make test-fast   the unit tests of the normal build only (no cluster)
#   make build       configure and build into build/ (warnings are errors)
#   make bench       install the peers too, build, measure dtrain against its
#                    peers (PyTorch, OpenBLAS, MPI, dd, srun): one table, also
#                    as JSON (bench/README.md)
#   make bench-checkpoint  checkpoint write bandwidth against dd, async stall,
#                    load (docs/performance.md)
#   make gpu-bundle  the GPU device check's archive (runtime/gpu/README.md)
#   make cluster-up | cluster-down | cluster-status
#                    the local Slurm cluster of build/cluster (site/cluster.sh)
#   make install     install the programs and libdtrain (PREFIX, /usr/local)
#   make deps        install the Debian packages of site/deps.list for the
#                    purposes of the goals named with it: the demo's always,
#                    the test tools for test, the peers for bench
#                    (site/install-deps.sh: root; idempotent; DEPS_FOR=test
#                    adds the test tools)
#   make clean       stop the local cluster, remove build/
#
# Variables: BUILD (build), ASAN_BUILD (build/asan), REL_BUILD
# (build/release), JOBS (the cores), PREFIX (/usr/local), DEPS_FOR.

BUILD      ?= build
ASAN_BUILD ?= build/asan
REL_BUILD  ?= build/release
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local
comma      := ,
DEPS_FOR   ?= demo$(if $(filter test test-fast,$(MAKECMDGOALS)),$(comma)test)$(if \
              $(filter bench bench-checkpoint,$(MAKECMDGOALS)),$(comma)bench)

.PHONY: all help deps build build-asan build-release gpu-bundle test test-fast demo demo-gpt demo-llama bench bench-checkpoint cluster-up \
        cluster-down cluster-status install clean

all: build

help:
	@sed -n '1,/^$$/{2d;/^$$/q;s/^# \{0,1\}//;p}' Makefile

# One install for every goal on the command line: one `apt-get update`.
deps:
	@bash site/install-deps.sh --for $(DEPS_FOR)

# Development and CI builds treat warnings as errors (DTRAIN_WERROR); a plain
# `cmake` configure, as users and packagers run it, does not.
build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTRAIN_WERROR=ON \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# The sanitizer build is also the CPU-only one, configured as on a machine
# without the CUDA toolkit (the default DTRAIN_CUDA=AUTO, finding nothing),
# so that `make test` catches a CPU-only break wherever it runs. It is
# compiled at -O1, as AddressSanitizer's documentation advises for speed.
build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
	  -DDTRAIN_SANITIZE=ON -DDTRAIN_WERROR=ON \
	  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS)

# The Release configuration a user or packager picks first, compiled (not
# tested) with warnings as errors: gcc at -O3 warns where -O2 does not
# (maybe-uninitialized), and this catches it before a user's build does.
build-release: deps
	@cmake -S . -B $(REL_BUILD) -DCMAKE_BUILD_TYPE=Release -DDTRAIN_WERROR=ON -DDTRAIN_TESTS=OFF >/dev/null
	@cmake --build $(REL_BUILD) -j$(JOBS)

# Every test, in the normal build and then in the sanitizer build (the
# Release build only compiles).
test: build build-asan build-release
	@bash tests/run-tests.sh $(BUILD) $(ASAN_BUILD)

# The unit tests of the normal build only (quick, no cluster).
test-fast: build
	@cd $(BUILD) && ctest -L unit --output-on-failure -j$(JOBS)

# dtrain for a lent GPU machine: one archive with every library it needs
# but the driver, CUDA and NCCL (site/gpu-bundle.sh, runtime/gpu/README.md)
gpu-bundle: deps
	@bash site/gpu-bundle.sh $(CURDIR)/$(BUILD)/gpu-bundle

demo: build
	@bash site/demo.sh $(BUILD)

# The GPT example (jobs/gpt-tiny-2x2.json): a byte-level GPT on the fortunes.
demo-gpt: build
	@bash site/demo.sh $(BUILD) jobs/gpt-tiny-2x2.json

# The Llama example (jobs/llama-tiny-2x2.json): a byte-level Llama on the fortunes.
demo-llama: build
	@bash site/demo.sh $(BUILD) jobs/llama-tiny-2x2.json

# Every benchmark, alternating dtrain and its peer, one table (bench/README.md).
bench: build
	@/usr/bin/python3 bench/run.py $(BUILD)

# Checkpoint write bandwidth against dd, async stall, load (docs/performance.md).
bench-checkpoint: build
	@bash bench/checkpoint.sh $(BUILD)

cluster-up: deps
	@bash site/cluster.sh up --dir $(CURDIR)/$(BUILD)/cluster

cluster-down:
	@bash site/cluster.sh down --dir $(CURDIR)/$(BUILD)/cluster

cluster-status:
	@bash site/cluster.sh status --dir $(CURDIR)/$(BUILD)/cluster

install: build
	@cmake --install $(BUILD)

clean:
	@bash site/cluster.sh down --dir $(CURDIR)/$(BUILD)/cluster 2>/dev/null || true
	rm -rf $(BUILD)
