//! nicsim's integration tests, each file of this folder a module of one test binary:
//! `cargo test -p nicsim --test all -- fuzz::` runs one file's.
#![forbid(unsafe_code)]

mod common;
mod device_fast_paths;
mod device_queues;
mod device_registers;
mod dpdk_l2fwd;
mod dpdk_testpmd;
mod end_to_end;
mod engine_paths;
mod exec_trap;
mod faults;
mod fuzz;
mod register_order;
mod tinynf_pattern;
mod virtio_control;
mod virtio_net;
