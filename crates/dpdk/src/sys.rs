//! The raw layer: bindgen's declarations of the DPDK calls this crate makes and of the shim's
//! wrappers (`csrc/shim.h`), generated at build time from the installed headers.

#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code)]
#![allow(clippy::all, clippy::undocumented_unsafe_blocks)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
