# safenic: `make demo` shows nicsim with traffic flowing; `make test` runs the audit, the lints and
# every test of the workspace; `make test-slow` the suites too slow for it (CI runs both).
CARGO ?= cargo

# Every driver, and everything else we build, is compiled for one named x86-64 level: Rust with
# -C target-cpu, C with -march (drivers/drivers.toml passes {isa} on). Default: x86-64-v3 where
# the CPU has it (scripts/isa-level); `make ISA=x86-64-v2 …` to choose.
ISA ?= $(shell scripts/isa-level)
export RUSTFLAGS := -C target-cpu=$(ISA)

.PHONY: all setup build audit-tool vet demo test test-slow check test-mpk test-tinynf test-peers test-chaos soak chaos-report bench bench-smoke bench-dpdk-smoke bench-dpdk bench-isolation bench-virtio bench-vfio bench-queues bench-xdp test-long audit sanitize fuzz stress fmt clean

all: build

setup:
	@scripts/setup
	@scripts/isa-level $(ISA)

# The workspace, then every driver of drivers/drivers.toml by its own build command, and the
# two l2fwds: crates/dpdk's and DPDK's C one, its reference.
build:
	$(CARGO) build --workspace --release
	$(CARGO) build --release -p dpdk --examples
	target/release/safenic-drivers build
	scripts/build-dpdk-l2fwd $(ISA)

demo: setup build
	scripts/demo

# The audit first: it vets the sources before anything of the workspace is built, and gives
# its verdict before any test runs audited code. Tests that start nicsim's engine or a polling
# driver each keep a core busy; the machine has two, so test binaries run one test at a time.
# From a fresh clone, incremental compilation only writes caches nothing reads: without it the
# builds take about 6 % less.
test: export CARGO_INCREMENTAL = 0
test: setup
	$(MAKE) audit
	$(CARGO) fmt --all -- --check
	$(CARGO) fmt $(AUDIT_MANIFEST) -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	cd / && $(CARGO) clippy $(AUDIT_AT) --locked --all-targets -- -D warnings
	$(CARGO) build --workspace
	target/debug/safenic-drivers build
	scripts/build-dpdk-l2fwd $(ISA)
	$(CARGO) test --workspace -- --test-threads=1
	cd / && $(CARGO) test $(AUDIT_AT) --locked --release -- --test-threads=1

# What would take `make test` past its 15 minutes, each a target of its own: the sanitizers
# (three more builds of their own), the MPK tests in a QEMU guest, and the benches' smoke tests.
# .ci/run runs it after `make test`; about 10 minutes.
test-slow: setup
	$(MAKE) sanitize
	$(MAKE) test-mpk
	$(MAKE) bench-smoke
	$(MAKE) bench-dpdk-smoke
	$(MAKE) test-long

# The longer runs of `make test`'s suites, beside what it keeps of each: the C baseline's peers
# and bad-input tests over AF_XDP (the Rust driver's are in make test), the benches' tests, flow
# spreading over queues in the restricted and const models (flexible's is in make test) — the
# ignored tests of tests/xdp.rs, tests/bench.rs and tests/queues.rs — and nicsim's fuzz cases
# up to the 100 000th of the same seed (make test runs the first 30 000).
test-long: setup
	$(CARGO) test -p safenic --test all -- --test-threads=1 --ignored xdp:: bench:: queues::
	NICSIM_FUZZ_CASES=100000 $(CARGO) test -p nicsim --test all -- --test-threads=1 fuzz::

# The contributors' fast loop, at most 3 minutes on a warm tree: format, clippy, the workspace's
# unit tests, and one forwarding test per driver: the const model of each driver of the
# manifest's conformance suite (10^6 frames each way), and the Rust driver between virtio ports.
check: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) build --workspace
	target/debug/safenic-drivers build
	$(CARGO) test --workspace --lib --bins -- --test-threads=1
	$(CARGO) test -p safenic --test all -- --test-threads=1 const_forwards_a_million_each_way \
	  virtio::flexible_forwards_every_frame_once_between_virtio_ports --skip legacy

# crates/isolation's tests in a guest with protection keys (QEMU's software emulation emulates
# PKU on any x86-64 host), the MPK backend's required: on a host without PKU, cargo test can
# run only the process backend's half. About 20 seconds; part of `make test-slow`.
test-mpk: setup
	scripts/test-mpk

# Linux network stacks as peers (crates/safenic/tests/peers.rs): two network namespaces joined
# by nicsim's ports through TAP interfaces, ping, iperf3 and tcpdump through the Rust driver on
# the 82599 and on virtio-net and through the C baseline. Part of `make test`; this runs only them.
test-peers: setup
	$(CARGO) build --workspace
	target/debug/safenic-drivers build
	$(CARGO) test -p safenic --test all -- --test-threads=1 peers::

# The Rust driver, every model, against a hostile device (crates/safenic/tests/chaos.rs):
# 10^6 hostile write-backs, a stall and every wire fault, each followed by an exact check that
# traffic flows again; a surprise reset and removal, after which it must exit with one line.
# Part of `make test`; `make soak SECONDS=600` gives every fault about that many seconds.
test-chaos: setup
	$(CARGO) build --workspace
	$(CARGO) test -p safenic --test all -- --test-threads=1 chaos::

SECONDS ?= 60
soak: setup
	$(CARGO) build --workspace
	SAFENIC_SOAK_SECONDS=$(SECONDS) $(CARGO) test -p safenic --test all -- --test-threads=1 --nocapture chaos::

# Every driver of the manifest the report compares (Rust, C gcc, C under ASan+UBSan), every
# model, against each kind of fault: the table in docs/results.md and docs/bench/chaos.json.
chaos-report: setup build
	target/release/safenic chaos --only rust,c-gcc,c-asan --out docs/bench --splice docs/results.md

# The bench's quick profile as a smoke test: every driver and model measured once (RFC 2544
# with short trials, latency, callgrind), results and figures written, read back and checked
# for sane figures (nothing about speed is asserted); then the isolation bench, briefly
# (`safenic bench-virtio` runs briefly in crates/safenic/tests/bench.rs).
bench-smoke: setup build
	rm -rf target/bench-quick
	target/release/safenic bench --profile quick --out target/bench-quick
	target/release/safenic bench-isolation --rounds 1 --window-ms 2
	target/release/safenic bench-vfio --callgrind-seconds 1 --drivers rust --modes flexible
	target/release/safenic bench-queues --callgrind-seconds 1 --drivers rust --modes const --rate-seconds 0.5
	target/release/safenic bench-xdp --callgrind-seconds 1 --rate-seconds 0.5 --rounds 1

# The l2fwd pair of bench-dpdk, briefly: DPDK's C l2fwd and ours under callgrind on net_null and
# on nicsim, and the overload test (about a minute). Part of `make test-slow`.
bench-dpdk-smoke: setup build
	target/release/safenic bench-dpdk --callgrind-seconds 1 --overload-seconds 0.5 --repetitions 1

# platform's tests under AddressSanitizer and ThreadSanitizer (Miri cannot run them: they map
# files and hugepages). ThreadSanitizer needs the standard library built with it too. The DPDK
# API's tests, l2fwd included, under AddressSanitizer (DPDK's own libraries are not instrumented).
# A process that enables a queue confines itself, signalling each of its threads, and
# ThreadSanitizer's own thread takes no signal: the one unit test that does (in a child of its
# own) runs in cargo test and under AddressSanitizer, not here.
SANITIZE_TARGET := x86_64-unknown-linux-gnu
sanitize: setup
	RUSTFLAGS="-Zsanitizer=address" $(CARGO) +nightly test -p platform --lib --target $(SANITIZE_TARGET) \
	  --target-dir target/sanitize-address -- --test-threads=1
	RUSTFLAGS="-Zsanitizer=address" $(CARGO) +nightly test -p dpdk --target $(SANITIZE_TARGET) \
	  --target-dir target/sanitize-address -- --test-threads=1
	RUSTFLAGS="-Zsanitizer=thread" $(CARGO) +nightly test -Zbuild-std -p platform --lib --target $(SANITIZE_TARGET) \
	  --target-dir target/sanitize-thread -- --test-threads=1 --skip i82599::tests::an_enable_programs

# safenic-audit (crates/audit) is built apart from what it audits: a workspace of its own, from
# its own Cargo.lock, from outside the repository (so that no cargo configuration of the
# repository applies), linking no audited crate (docs/safety.md, "The audit").
AUDIT_MANIFEST = --manifest-path $(CURDIR)/crates/audit/Cargo.toml
AUDIT_AT = $(AUDIT_MANIFEST) --target-dir $(CURDIR)/target/audit
AUDIT = target/audit/release/safenic-audit
audit-tool:
	cd / && $(CARGO) build $(AUDIT_AT) --locked --release --bin safenic-audit

# Before anything of the workspace is built or run: cargo configuration, build scripts,
# procedural macros and what they use, unsafe code in the sources, dependencies.
vet: setup audit-tool
	$(AUDIT) vet --root .

# Then the build, and the verdict on it: the hot paths of the release build contain no run-time
# check, unsafe stays in its rooms (each block with // SAFETY:), the dependencies are allowed,
# every public item of the trusted crates has its # Soundness note (docs/safety.md lists them).
# After that verdict, what runs audited code: the C# driver's loops read from it running on
# the build's nicsim (safenic-audit jit), and the trusted kernel's tests under Miri.
audit: vet
	$(MAKE) build
	$(AUDIT) --binary target/release/safenic --root . --isa $(ISA)
	$(AUDIT) jit --root . --isa $(ISA)
	RUSTFLAGS= $(CARGO) +nightly miri test -p invariants

# nicsim's own ceiling, then every model of every driver of drivers/drivers.toml with
# `bench = true`, interleaved and repeated: RFC 2544 throughput, latency at 10-100% of it,
# instructions and estimated cycles per packet (callgrind), and Rust's ratios to C. Writes
# docs/bench/results.{json,md}, docs/figures/ and the current table in docs/results.md.
# PROFILE=full adds every RFC 2544 frame size (about an hour and a half).
PROFILE ?= standard
bench: setup build
	target/release/safenic bench --profile $(PROFILE) --out docs/bench --figures docs/figures --splice docs/results.md
	$(MAKE) bench-virtio
	$(MAKE) bench-vfio
	$(MAKE) bench-queues
	$(MAKE) bench-xdp

# virtio-net: the Rust driver (modern and legacy interface) beside the C baseline's (legacy)
# between nicsim's virtio-net functions, instructions and estimated cycles per packet under
# callgrind in interleaved rounds. Writes its table into docs/results.md (docs/virtio.md).
VIRTIO_SECONDS ?= 10
VIRTIO_ROUNDS ?= 3
bench-virtio: setup build
	target/release/safenic bench-virtio --callgrind-seconds $(VIRTIO_SECONDS) --rounds $(VIRTIO_ROUNDS) --splice docs/results.md

# Every driver with a VFIO path (Rust, C clang, C gcc) in every model through sysfs and through
# VFIO (as nobody under nicsim exec --vfio), instructions and estimated cycles per packet under
# callgrind, the two paths interleaved in rounds. Writes its table into docs/results.md
# (docs/vfio.md).
VFIO_SECONDS ?= 5
VFIO_ROUNDS ?= 3
bench-vfio: setup build
	target/release/safenic bench-vfio --callgrind-seconds $(VFIO_SECONDS) --rounds $(VFIO_ROUNDS) --splice docs/results.md

# AF_XDP: the Rust driver beside the C baseline (libxdp) between two veth pairs of namespaces
# it makes, copy mode, each fed by safenic gen through AF_XDP: instructions and estimated cycles
# per packet under callgrind, then packets per second and CPU time per packet in user space and
# in the kernel, in interleaved rounds. Writes its table into docs/results.md (docs/afxdp.md).
XDP_SECONDS ?= 8
XDP_RATE_SECONDS ?= 5
XDP_ROUNDS ?= 5
bench-xdp: setup build
	target/release/safenic bench-xdp --callgrind-seconds $(XDP_SECONDS) --rate-seconds $(XDP_RATE_SECONDS) --rounds $(XDP_ROUNDS) --splice docs/results.md

# Every driver with several queue pairs (Rust, C clang, C gcc, Ada) in every model on 1, 2, 4 and 16
# queue pairs of one core, RSS spreading 1024 flows: instructions and estimated cycles per packet
# under callgrind, how evenly flows spread, and one against two cores' forwarding rate on this
# host. Writes its tables into docs/results.md (docs/queues.md).
QUEUES_SECONDS ?= 3
QUEUES_ROUNDS ?= 3
bench-queues: setup build
	target/release/safenic bench-queues --callgrind-seconds $(QUEUES_SECONDS) --rounds $(QUEUES_ROUNDS) --splice docs/results.md

# The Rust l2fwd (crates/dpdk) beside DPDK's C l2fwd, paired in one run: instructions per
# forwarded packet under callgrind on net_null, and the overload test on net_null and on nicsim.
# Writes its tables into docs/results.md (docs/dpdk.md).
DPDK_SECONDS ?= 20
bench-dpdk: setup build
	$(CARGO) build --release -p dpdk --examples
	target/release/safenic bench-dpdk --callgrind-seconds $(DPDK_SECONDS) --splice docs/results.md

# The cost of isolating a C library (crates/isolation, docs/isolation.md): the empty call,
# buffers, snappy and libpng, each called directly, in an MPK domain (where the host has PKU)
# and in a helper process, interleaved in rounds. Writes its table into docs/results.md.
bench-isolation: setup build
	target/release/safenic bench-isolation --splice docs/results.md

# nicsim against random driver input for a long time, from a new seed each run (make test runs
# 10^5 cases from a fixed one). A failure prints the seed and case count that replay it.
FUZZ_CASES ?= 10000000
fuzz:
	NICSIM_FUZZ_CASES=$(FUZZ_CASES) NICSIM_FUZZ_SEED=$${NICSIM_FUZZ_SEED:-$$(date +%s)} \
	  $(CARGO) test -p nicsim --test all -- --nocapture fuzz::

# TinyNF's agent pattern offered without pause (tests/tinynf_pattern.rs, its ignored tests): at
# 10 % and at line rate, and from full rings, TINYNF_RUNS runs of TINYNF_FRAMES frames each way.
# Its verdict depends on the host (docs/nicsim.md, "TinyNF's agent"), so neither make test nor
# CI runs it; make test runs the same agents in bursts of half a ring, whose verdict does not.
TINYNF_RUNS ?= 20
TINYNF_FRAMES ?= 100000000
test-tinynf: setup
	NICSIM_TINYNF_RUNS=$(TINYNF_RUNS) NICSIM_TINYNF_FRAMES=$(TINYNF_FRAMES) \
	  $(CARGO) test -p nicsim --test all -- --test-threads=1 --ignored tinynf_pattern::

# make test N times from a fresh clone, then N times with CPU 1 busy (scripts/stress-test).
STRESS_RUNS ?= 5
stress:
	scripts/stress-test $(STRESS_RUNS)

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	$(MAKE) -C drivers/c clean
