# The two quick-start commands (README): `make run` and `make test`.
BUILD ?= build
TEST_BUILD ?= build-test
JOBS ?= $(shell nproc)

.PHONY: setup build run test bench deb clean

setup:
	./scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

run: build
	./scripts/run-example.sh $(BUILD)

# The test build is -Werror with AddressSanitizer and UBSan.
test: setup
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPP_WERROR=ON -DPP_SANITIZE=ON >/dev/null
	cmake --build $(TEST_BUILD) -j$(JOBS)
	ctest --test-dir $(TEST_BUILD) --output-on-failure -j$(JOBS)

# The peers' venv (PyTorch 2.x, onnxruntime-training) first, so its setup shows; a failure
# there leaves a JSON line from bench/peers.sh and the other benchmarks still run.
bench: build
	-./scripts/bench-venv.sh >/dev/null
	./scripts/bench.sh $(BUILD)

# A Debian package of the library, headers, CLI, CMake package and onnxpipe.pc (cpack):
# $(BUILD)/deb/onnxpipe_<version>_amd64.deb
deb: build
	cmake --build $(BUILD) --target deb

clean:
	rm -rf $(BUILD) $(TEST_BUILD)
