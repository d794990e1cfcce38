# The commands of README.md ("The two commands"):
#   make demo   installs dependencies, builds, trains the `small` llama on the fortunes corpus
#               and prints a sample of its text (scripts/demo.sh)
#   make test   installs dependencies, builds (the fuzz harnesses' clang tree too), runs
#               every test: ctest's whole list, TEST_JOBS (2) at a time; what .ci/run runs
#   make check  builds and runs the fast tier (ctest -L fast: the unit tests and the quick
#               integration tests), a few minutes: the loop to run after every change
#   make fuzz   runs each fuzz harness for FUZZ_SECONDS (600) seconds (fuzz/README.md)
# `make` alone builds. The ctest labels (fast, unit, integration, cluster, deploy, fuzz,
# slow) are set in CMakeLists.txt; `cd build && ctest -L cluster` runs one of them.
BUILD ?= build
JOBS ?= $(shell nproc)
TEST_JOBS ?= 2
FUZZ_SECONDS ?= 600

.PHONY: all build deps demo check test unit bench fuzz clean
all: build

build:
	@test -f $(BUILD)/Makefile || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

deps:
	bash scripts/install_deps.sh

demo: deps
	$(MAKE) build
	bash scripts/demo.sh $(ARGS)

check: build
	cd $(BUILD) && ctest -L fast -j $(TEST_JOBS) --output-on-failure --timeout 600

test:
	bash scripts/install_deps.sh --test
	$(MAKE) build
	bash scripts/fuzz.sh --build-only --jobs $(JOBS)
	cd $(BUILD) && ctest -j $(TEST_JOBS) --output-on-failure --timeout 1200

unit: build
	$(BUILD)/unit_tests

bench: build
	bash bench/run_all.sh

fuzz:
	bash scripts/install_deps.sh --test
	bash scripts/fuzz.sh --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD)
