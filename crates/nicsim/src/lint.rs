//! Driver lint: things a driver did that the datasheet forbids or leaves undefined.
//!
//! nicsim keeps going as hardware would and records one warning per (port, register, rule),
//! counting repeats. Register changes are observed by polling the BAR, so a value that a driver
//! writes and overwrites again between two polls is not seen; lint never reports a write that
//! did not happen, but it can miss one (see docs/nicsim.md).

use serde::{Deserialize, Serialize};

/// Rule identifiers (stable; tests and tools match on them).
pub mod rule {
    pub const RESERVED_BITS: &str = "reserved-bits";
    pub const READ_ONLY: &str = "read-only-write";
    pub const FCTRL_WHILE_RXEN: &str = "fctrl-while-rx-enabled";
    pub const QUEUE_BEFORE_RING: &str = "queue-enabled-before-ring";
    pub const TAIL_OUTSIDE_RING: &str = "tail-outside-ring";
    pub const RING_ALIGNMENT: &str = "ring-base-alignment";
    pub const RING_LENGTH: &str = "ring-length";
    pub const HEAD_WRITE: &str = "head-written-while-enabled";
    pub const HEAD_WB_ALIGNMENT: &str = "head-write-back-alignment";
    pub const BAR_WITHOUT_MSE: &str = "bar-access-without-memory-space";
    pub const DMA_WITHOUT_BME: &str = "dma-without-bus-master";
    pub const TX_DESCRIPTOR: &str = "invalid-tx-descriptor";
    pub const TX_FRAME_SIZE: &str = "tx-frame-size";
    pub const TAIL_BEFORE_ENABLE: &str = "tail-before-enable";
}

/// One warning.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LintWarning {
    pub port: usize,
    pub register: String,
    pub offset: u32,
    pub value: u32,
    pub rule: String,
    pub message: String,
    pub count: u64,
}

/// The warnings of one port.
#[derive(Debug, Default)]
pub struct Lints {
    port: usize,
    entries: Vec<LintWarning>,
}

/// At most this many distinct warnings are kept per port.
const MAX_DISTINCT: usize = 256;

impl Lints {
    pub fn new(port: usize) -> Self {
        Lints { port, entries: Vec::new() }
    }

    /// Records a warning; repeats of the same (register, rule) only bump its count.
    pub fn warn(&mut self, offset: u32, value: u32, rule: &str, message: String) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.offset == offset && e.rule == rule) {
            e.count += 1;
            e.value = value;
            return;
        }
        if self.entries.len() >= MAX_DISTINCT {
            return;
        }
        let register = crate::regs::name_of(offset);
        eprintln!("nicsim: lint: port {}: {register} = {value:#010x}: {message}", self.port);
        self.entries.push(LintWarning {
            port: self.port,
            register,
            offset,
            value,
            rule: rule.to_string(),
            message,
            count: 1,
        });
    }

    pub fn entries(&self) -> &[LintWarning] {
        &self.entries
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
