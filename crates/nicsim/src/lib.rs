//! nicsim: a software Intel 82599ES that unmodified user-space drivers run on.
//!
//! A driver opens a PCI function directory (`vendor`, `device`, `config`, `resource0`, …),
//! maps BAR0 from `resource0`, enables bus mastering through `config`, and hands the device
//! physical addresses of hugepage memory. nicsim presents exactly those files, polls the BAR
//! for register writes, and moves frames between the driver's descriptor rings and its wire
//! side (generators, sinks, loopback cables, pcap). See docs/nicsim.md.
#![forbid(unsafe_code)]

pub mod access_cost;
pub mod ceiling;
pub mod chaos;
pub mod control;
pub mod dma;
pub mod engine;
pub mod exec;
pub mod flow_control;
pub mod guardian;
pub mod histogram;
pub mod iofs;
pub mod lint;
pub mod ownership;
pub mod pciconfig;
pub mod peer;
pub mod port;
pub mod regs;
pub mod rx_cost;
pub mod server;
pub mod session;
pub mod shared_log;
pub mod sysfs;
pub mod virtio;
pub mod wire;
