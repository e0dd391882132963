//! The safenic command's integration tests, each file of this folder a module of one test
//! binary: `cargo test -p safenic --test all -- peers::` runs one file's.
#![forbid(unsafe_code)]

mod bad_input;
mod bench;
mod chaos;
mod cleanup;
mod common;
mod conformance;
mod csharp;
mod figures;
mod filter;
mod forwarding;
mod gen;
mod manifest;
mod peers;
mod queues;
mod vfio;
mod virtio;
mod xdp;
