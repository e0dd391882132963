# safenic: `make demo` shows nicsim with traffic flowing; `make test` runs every check.
CARGO ?= cargo

.PHONY: all setup build demo test bench audit sanitize fuzz stress fmt clean

all: build

setup:
	@scripts/setup

# The workspace, then every driver of drivers/drivers.toml by its own build command.
build:
	$(CARGO) build --workspace --release
	target/release/safenic-drivers build

demo: setup build
	scripts/demo

# Tests that start nicsim's engine or a polling driver each keep a core busy; the machine has
# two, so test binaries run one test at a time.
test: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) build --workspace
	target/debug/safenic-drivers build
	$(CARGO) test --workspace -- --test-threads=1
	$(MAKE) sanitize
	$(MAKE) audit

# platform's tests under AddressSanitizer and ThreadSanitizer (Miri cannot run them: they map
# files and hugepages). ThreadSanitizer needs the standard library built with it too.
SANITIZE_TARGET := x86_64-unknown-linux-gnu
sanitize: setup
	RUSTFLAGS="-Zsanitizer=address" $(CARGO) +nightly test -p platform --lib --target $(SANITIZE_TARGET) \
	  --target-dir target/sanitize-address -- --test-threads=1
	RUSTFLAGS="-Zsanitizer=thread" $(CARGO) +nightly test -Zbuild-std -p platform --lib --target $(SANITIZE_TARGET) \
	  --target-dir target/sanitize-thread -- --test-threads=1

# The hot paths of the release build contain no run-time check, unsafe stays in its two crates
# (each block with // SAFETY:), and the trusted kernel's tests pass under Miri. `safenic audit`
# runs safenic-audit (crates/audit) on the release safenic.
audit: setup build
	target/release/safenic audit
	$(CARGO) +nightly miri test -p invariants

# nicsim's own ceiling, then every model of every driver of drivers/drivers.toml with
# `bench = true`: forwarded Mpps and instructions per packet.
bench: setup build
	target/release/nicsim bench --seconds 10
	target/release/nicsim bench --seconds 10 --link-gbps 100
	target/release/safenic bench

# nicsim against random driver input for a long time, from a new seed each run (make test runs
# 10^5 cases from a fixed one). A failure prints the seed and case count that replay it.
FUZZ_CASES ?= 10000000
fuzz:
	NICSIM_FUZZ_CASES=$(FUZZ_CASES) NICSIM_FUZZ_SEED=$${NICSIM_FUZZ_SEED:-$$(date +%s)} \
	  $(CARGO) test -p nicsim --test fuzz -- --nocapture

# make test N times from a fresh clone, then N times with CPU 1 busy (scripts/stress-test).
STRESS_RUNS ?= 5
stress:
	scripts/stress-test $(STRESS_RUNS)

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	$(MAKE) -C drivers/c clean
