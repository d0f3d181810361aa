# The two quick-start commands (README): `make run` and `make test`; `make test-zoo` runs
# the whole model zoo (docs/tests.md, "The suite's time").
BUILD ?= build
TEST_BUILD ?= build-test
JOBS ?= $(shell nproc)
# `make test` goes on with the rest of the zoo when the suite leaves it time within this
# many seconds from its start (0: never): CI (CI=true) gives it 25 minutes.
TEST_BUDGET ?= $(if $(CI),1500,0)
START := $(shell date +%s)
# a compiler cache, where there is one, for the rebuilds
CCACHE := $(if $(shell command -v ccache),-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)

.PHONY: setup build run test-build test test-zoo bench deb clean

# the build's Debian packages only: `make run` downloads no Python package
setup:
	./scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CCACHE) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

# the command alone (not the tests, examples and benchmarks that `build` makes too)
run: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CCACHE) >/dev/null
	cmake --build $(BUILD) --target onnxpipe_cli -j$(JOBS)
	./scripts/run-example.sh $(BUILD)

# The test build is -Werror with AddressSanitizer, LeakSanitizer and UBSan; the tests'
# Python venvs come with it. Its CUDA code is compiled once, to PTX for compute_80, which
# the driver compiles for any GPU from the A100 on (the kernels have no per-architecture
# code): half the CPU time of `80;90`'s two binaries (docs/tests.md).
TEST_CUDA_ARCH ?= 80-virtual
test-build: setup
	./scripts/setup.sh --tests
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPP_WERROR=ON -DPP_SANITIZE=ON \
	    -DCMAKE_CUDA_ARCHITECTURES=$(TEST_CUDA_ARCH) $(CCACHE) >/dev/null
	cmake --build $(TEST_BUILD) -j$(JOBS)

test: test-build
	./scripts/test.sh $(TEST_BUILD) $(JOBS) $(TEST_BUDGET) $(START)

test-zoo: test-build
	ctest --test-dir $(TEST_BUILD) -R '^test_zoo_' --output-on-failure -j$(JOBS)

# The benchmarks use the tests' venvs (bench/pipeline.sh, hf_peers.sh) and the peers' own
# (PyTorch 2.x, onnxruntime-training), set up first so that their setup shows; a failure
# there leaves a JSON line from bench/peers.sh and the other benchmarks still run.
bench: build
	./scripts/setup.sh --tests
	-./scripts/bench-venv.sh >/dev/null
	./scripts/bench.sh $(BUILD)

# A Debian package of the library, headers, CLI, CMake package and onnxpipe.pc (cpack):
# $(BUILD)/deb/onnxpipe_<version>_amd64.deb
deb: build
	cmake --build $(BUILD) --target deb

clean:
	rm -rf $(BUILD) $(TEST_BUILD)
