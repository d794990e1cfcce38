# The two commands of README.md:
#   make demo   installs dependencies, builds, trains the `small` llama on the fortunes corpus
#   make test   installs dependencies, builds, runs every test (unit + integration, and
#               each fuzz harness for a few seconds: the `fuzz_short` test)
#   make fuzz   runs each fuzz harness for FUZZ_SECONDS (600) seconds (fuzz/README.md)
# `make` alone builds.
BUILD ?= build
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 600

.PHONY: all build deps demo test unit bench fuzz clean
all: build

build:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

deps:
	bash scripts/install_deps.sh

demo: deps
	$(MAKE) build
	bash scripts/demo.sh $(ARGS)

test:
	bash scripts/install_deps.sh --test
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure --timeout 1200

unit: build
	$(BUILD)/unit_tests

bench: build
	bash bench/run_all.sh

fuzz:
	bash scripts/install_deps.sh --test
	bash scripts/fuzz.sh --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD)
