//! Driver lint: things a driver did that the datasheet forbids or leaves undefined.
//!
//! nicsim keeps going as hardware would and records one warning per (port, register, rule),
//! counting repeats. Register changes are observed by polling the BAR, so a value that a driver
//! writes and overwrites again between two polls is not seen; lint never reports a write that
//! did not happen, but it can miss one (see docs/nicsim.md).

use serde::{Deserialize, Serialize};

/// What a warning is about. The names are what `nicsim lint` prints and tests match on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A reserved bit written with other than its reset value [DS 8.2.3: "write as read"].
    ReservedBits,
    /// FCTRL changed while RXCTRL.RXEN = 1 [DS 8.2.3.7.1].
    FctrlWhileRxEnabled,
    /// A queue enabled before its ring base and length [DS 4.6.7, 4.6.8].
    QueueEnabledBeforeRing,
    /// RDT or TDT outside the ring [DS 7.1.9, 7.2.3.3].
    TailOutsideRing,
    /// A ring base not 128-byte aligned [DS 8.2.3.8.1, 8.2.3.9.5].
    RingBaseAlignment,
    /// A ring length not a multiple of 128 bytes up to 512 KiB [DS 8.2.3.8.3, 8.2.3.9.7].
    RingLength,
    /// RDH or TDH written while the queue is enabled [DS 8.2.3.8.4, 8.2.3.9.8].
    HeadWrittenWhileEnabled,
    /// A head write-back address not 16-byte aligned [DS 7.2.3.5.2].
    HeadWriteBackAlignment,
    /// BAR0 written while PCI COMMAND.MSE is 0: the write never arrives.
    BarAccessWithoutMemorySpace,
    /// A queue enabled while PCI COMMAND.BME is 0: the device cannot read or write its ring.
    DmaWithoutBusMaster,
    /// A transmit descriptor with DEXT = 1 and a DTYP that is neither data nor context [DS 7.2.3.2].
    InvalidTxDescriptor,
    /// A transmit frame gathered over more bytes than any frame can have.
    TxFrameSize,
    /// Two or more processes map the function's BAR0 at once: two drivers own one device.
    SharedFunction,
    /// A virtqueue the driver broke: a descriptor index outside the table, a chain that loops,
    /// buffers in the wrong order or too small [virtio 1.2 §2.7].
    VirtqueueMalformed,
    /// A virtio-net header asking for what was not negotiated (GSO, checksum) [virtio 1.2 §5.1.6.2].
    VirtioHeader,
    /// A control command the device refused: malformed, or of a feature the driver did not
    /// negotiate [virtio 1.2 §5.1.6.5].
    VirtioControl,
}

impl Rule {
    /// The rule's name, as serialised.
    pub fn name(self) -> &'static str {
        match self {
            Rule::ReservedBits => "reserved-bits",
            Rule::FctrlWhileRxEnabled => "fctrl-while-rx-enabled",
            Rule::QueueEnabledBeforeRing => "queue-enabled-before-ring",
            Rule::TailOutsideRing => "tail-outside-ring",
            Rule::RingBaseAlignment => "ring-base-alignment",
            Rule::RingLength => "ring-length",
            Rule::HeadWrittenWhileEnabled => "head-written-while-enabled",
            Rule::HeadWriteBackAlignment => "head-write-back-alignment",
            Rule::BarAccessWithoutMemorySpace => "bar-access-without-memory-space",
            Rule::DmaWithoutBusMaster => "dma-without-bus-master",
            Rule::InvalidTxDescriptor => "invalid-tx-descriptor",
            Rule::TxFrameSize => "tx-frame-size",
            Rule::SharedFunction => "shared-function",
            Rule::VirtqueueMalformed => "virtqueue-malformed",
            Rule::VirtioHeader => "virtio-header",
            Rule::VirtioControl => "virtio-control",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One warning.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LintWarning {
    pub port: usize,
    pub register: String,
    pub offset: u32,
    pub value: u32,
    pub rule: Rule,
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
    pub fn warn(&mut self, offset: u32, value: u32, rule: Rule, message: String) {
        self.warn_named(&crate::regs::name_of(offset), offset, value, rule, message)
    }

    /// As [`Self::warn`], for a register that is not the 82599's: `register` names it.
    pub fn warn_named(&mut self, register: &str, offset: u32, value: u32, rule: Rule, message: String) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.offset == offset && e.rule == rule) {
            e.count += 1;
            e.value = value;
            e.message = message;
            return;
        }
        if self.entries.len() >= MAX_DISTINCT {
            return;
        }
        let register = register.to_string();
        eprintln!("nicsim: lint: port {}: {register} = {value:#010x}: {message}", self.port);
        self.entries.push(LintWarning { port: self.port, register, offset, value, rule, message, count: 1 });
    }

    pub fn entries(&self) -> &[LintWarning] {
        &self.entries
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::Rule;

    #[test]
    fn rule_names_are_what_serde_writes() {
        for rule in [
            Rule::ReservedBits,
            Rule::FctrlWhileRxEnabled,
            Rule::QueueEnabledBeforeRing,
            Rule::TailOutsideRing,
            Rule::RingBaseAlignment,
            Rule::RingLength,
            Rule::HeadWrittenWhileEnabled,
            Rule::HeadWriteBackAlignment,
            Rule::BarAccessWithoutMemorySpace,
            Rule::DmaWithoutBusMaster,
            Rule::InvalidTxDescriptor,
            Rule::TxFrameSize,
            Rule::SharedFunction,
            Rule::VirtqueueMalformed,
            Rule::VirtioHeader,
            Rule::VirtioControl,
        ] {
            let json = serde_json::to_string(&rule).unwrap();
            assert_eq!(json, format!("\"{}\"", rule.name()));
            assert_eq!(serde_json::from_str::<Rule>(&json).unwrap(), rule);
        }
    }
}
