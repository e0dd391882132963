//! PCI configuration space of one 82599ES function [DS 9.3], or of a transitional virtio-net
//! function [virtio 1.2 §4.1.2].
//!
//! The `config` file is shared between the driver (pread/pwrite, as through sysfs) and nicsim,
//! which polls it: read-only fields are restored when overwritten, COMMAND's memory-space and
//! bus-master bits gate BAR decoding and DMA, and BAR0 answers the standard sizing protocol.

use platform::MappedRegion;

/// Size of the `config` file (PCIe extended configuration space).
pub const CONFIG_LEN: usize = 4096;
/// The part of configuration space nicsim models (the legacy header and capabilities).
const MODELLED: usize = 256;

pub const VENDOR_INTEL: u16 = 0x8086;
pub const DEVICE_82599ES_SFP: u16 = 0x10FB;
pub const COMMAND: usize = 0x04;
pub const COMMAND_MSE: u16 = 1 << 1;
pub const COMMAND_BME: u16 = 1 << 2;
/// Bits of COMMAND the device implements: I/O, memory, bus master, parity, SERR, INTx disable.
const COMMAND_IMPLEMENTED: u16 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 6) | (1 << 8) | (1 << 10);
const BAR0: usize = 0x10;
const BAR0_HIGH: usize = 0x14;

/// The initial configuration-space image of a function whose BAR0 is at `bar0_phys`.
pub fn image(bar0_phys: u64) -> [u8; MODELLED] {
    let mut c = [0u8; MODELLED];
    let put16 = |c: &mut [u8; MODELLED], o: usize, v: u16| c[o..o + 2].copy_from_slice(&v.to_le_bytes());
    let put32 = |c: &mut [u8; MODELLED], o: usize, v: u32| c[o..o + 4].copy_from_slice(&v.to_le_bytes());
    put16(&mut c, 0x00, VENDOR_INTEL);
    put16(&mut c, 0x02, DEVICE_82599ES_SFP);
    // Memory decoding on, bus mastering off: the state after a kernel driver unbinds.
    put16(&mut c, COMMAND, COMMAND_MSE);
    put16(&mut c, 0x06, 1 << 4); // STATUS: capabilities list
    put32(&mut c, 0x08, 0x0200_0001); // class 02/00/00 (Ethernet), revision 01
    c[0x0C] = 0x10; // cache line size
    put32(&mut c, BAR0, (bar0_phys as u32 & 0xFFFE_0000) | 0b100); // 64-bit, non-prefetchable [DS 9.3.6.1]
    put32(&mut c, BAR0_HIGH, (bar0_phys >> 32) as u32);
    put16(&mut c, 0x2C, VENDOR_INTEL); // subsystem vendor
    put16(&mut c, 0x2E, 0x000C); // subsystem: Ethernet Server Adapter X520-2
    c[0x34] = 0x40; // capabilities pointer
    c[0x3D] = 0x01; // INTA
                    // Power management, v3; PMCSR at 0x44 reads D0 [DS 9.3.7.1.4].
    c[0x40] = 0x01;
    c[0x41] = 0x50;
    put16(&mut c, 0x42, 0x4823);
    // MSI: 64-bit, per-vector masking.
    c[0x50] = 0x05;
    c[0x51] = 0x70;
    put16(&mut c, 0x52, 0x0180);
    // MSI-X: 64 vectors, table in BAR4 at 0, PBA at 0x2000.
    c[0x70] = 0x11;
    c[0x71] = 0xA0;
    put16(&mut c, 0x72, 63);
    put32(&mut c, 0x74, 4);
    put32(&mut c, 0x78, 0x2000 | 4);
    // PCI Express v2 endpoint; Device Status 0xAA = 0 (no transactions pending); link x8 5 GT/s.
    c[0xA0] = 0x10;
    c[0xA1] = 0xE0;
    put16(&mut c, 0xA2, 0x0002);
    put16(&mut c, 0xB2, 0x1082);
    // VPD, end of list.
    c[0xE0] = 0x03;
    c
}

/// A transitional virtio-net function's space: Red Hat's IDs, the transitional device ID with
/// subsystem 1 (network) and revision 0 [virtio 1.2 §4.1.2.1]; BAR0, the legacy registers, in
/// I/O space at `io_base` [virtio 1.2 §4.1.4.8]; BAR4, the virtio 1.x structures, in 64-bit
/// memory at `bar4_phys`, each found through a capability [virtio 1.2 §4.1.4]. I/O and memory
/// decoding are on, bus mastering off.
pub fn image_virtio(io_base: u32, bar4_phys: u64) -> [u8; MODELLED] {
    use crate::virtio::modern;
    let mut c = [0u8; MODELLED];
    let put16 = |c: &mut [u8; MODELLED], o: usize, v: u16| c[o..o + 2].copy_from_slice(&v.to_le_bytes());
    let put32 = |c: &mut [u8; MODELLED], o: usize, v: u32| c[o..o + 4].copy_from_slice(&v.to_le_bytes());
    put16(&mut c, 0x00, crate::virtio::VENDOR_VIRTIO);
    put16(&mut c, 0x02, crate::virtio::DEVICE_NET_TRANSITIONAL);
    put16(&mut c, COMMAND, COMMAND_IO | COMMAND_MSE);
    put16(&mut c, 0x06, 1 << 4); // STATUS: capabilities list
    put32(&mut c, 0x08, 0x0200_0000); // class 02/00/00 (Ethernet), revision 0
    put32(&mut c, BAR0, (io_base & VIRTIO_BAR0_MASK) | 1);
    put32(&mut c, BAR4, (bar4_phys as u32 & VIRTIO_BAR4_MASK) | VIRTIO_BAR4_TYPE);
    put32(&mut c, BAR4 + 4, (bar4_phys >> 32) as u32);
    put16(&mut c, 0x2C, crate::virtio::VENDOR_VIRTIO);
    put16(&mut c, 0x2E, crate::virtio::SUBSYSTEM_NET);
    c[0x34] = 0x40; // capabilities pointer
    c[0x3D] = 0x01; // INTA
                    // virtio_pci_cap: vendor 0x09, next, length, cfg_type, bar, id, padding, offset, length
                    // [virtio 1.2 §4.1.4]; the notification capability adds its multiplier [§4.1.4.4].
    let caps: [(usize, u8, u64, u64); 4] = [
        (0x40, 1, modern::COMMON, modern::COMMON_LEN),
        (0x50, 3, modern::ISR, 1),
        (0x60, 4, modern::DEVICE, modern::DEVICE_LEN),
        (0x70, 2, modern::NOTIFY, modern::NOTIFY_LEN),
    ];
    for (i, &(at, cfg_type, offset, length)) in caps.iter().enumerate() {
        let next = caps.get(i + 1).map_or(0, |c| c.0 as u8);
        c[at..at + 5].copy_from_slice(&[0x09, next, if cfg_type == 2 { 20 } else { 16 }, cfg_type, 4]);
        put32(&mut c, at + 8, offset as u32);
        put32(&mut c, at + 12, length as u32);
    }
    put32(&mut c, 0x70 + 16, modern::NOTIFY_MULTIPLIER);
    c
}

/// I/O-space decoding in COMMAND.
pub const COMMAND_IO: u16 = 1 << 0;
/// The legacy registers take 32 bytes of I/O space: BAR0's address bits 31:5.
const VIRTIO_BAR0_MASK: u32 = !(crate::virtio::legacy::BAR_LEN as u32 - 1);
/// BAR4 of a virtio function: 16 KiB of 64-bit prefetchable memory.
const BAR4: usize = 0x20;
const VIRTIO_BAR4_MASK: u32 = !(crate::virtio::modern::BAR_LEN as u32 - 1);
const VIRTIO_BAR4_TYPE: u32 = 0b1100;

/// The kind of function a configuration space belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Ixgbe,
    VirtioNet,
}

/// Which bytes software may change. Everything else is restored when overwritten.
fn writable(kind: Kind, offset: usize) -> u8 {
    if kind == Kind::VirtioNet {
        return match offset {
            0x04 => (COMMAND_IMPLEMENTED & 0xFF) as u8,
            0x05 => (COMMAND_IMPLEMENTED >> 8) as u8,
            0x0C | 0x0D | 0x3C => 0xFF,
            0x10..=0x13 => 0xFF, // BAR0 (sizing handled separately)
            0x20..=0x27 => 0xFF, // BAR4, 64-bit; BAR1-3 and 5 are not implemented
            _ => 0,
        };
    }
    match offset {
        0x04 => (COMMAND_IMPLEMENTED & 0xFF) as u8,
        0x05 => (COMMAND_IMPLEMENTED >> 8) as u8,
        0x0C | 0x0D | 0x3C => 0xFF, // cache line, latency timer, interrupt line
        0x10..=0x17 => 0xFF,        // BAR0 (sizing handled separately)
        0x44 | 0x45 => 0xFF,        // PMCSR
        0x52 | 0x53 | 0x54..=0x5F | 0x72 | 0x73 => 0xFF, // MSI / MSI-X control, address, data
        0xA8..=0xA9 | 0xB0..=0xB1 => 0xFF, // PCIe device and link control
        _ => 0,
    }
}

/// The device side of a function's configuration space.
pub struct PciConfig {
    kind: Kind,
    map: MappedRegion,
    shadow: [u8; MODELLED],
    scratch: [u8; MODELLED],
}

impl PciConfig {
    /// Takes over `map` (the shared `config` file) and writes the initial image into it.
    pub fn new(map: MappedRegion, bar0_phys: u64) -> Self {
        let shadow = image(bar0_phys);
        map.write_bytes(0, &shadow);
        PciConfig { kind: Kind::Ixgbe, map, shadow, scratch: [0; MODELLED] }
    }

    /// As [`Self::new`], for a virtio-net function with its legacy registers at `io_base` and
    /// its virtio 1.x structures at `bar4_phys`.
    pub fn new_virtio(map: MappedRegion, io_base: u32, bar4_phys: u64) -> Self {
        let shadow = image_virtio(io_base, bar4_phys);
        map.write_bytes(0, &shadow);
        PciConfig { kind: Kind::VirtioNet, map, shadow, scratch: [0; MODELLED] }
    }

    /// The COMMAND register.
    /// The shared mapping (what a driver reads and writes as the `config` file).
    pub fn region(&self) -> &MappedRegion {
        &self.map
    }

    pub fn command(&self) -> u16 {
        u16::from_le_bytes([self.shadow[COMMAND], self.shadow[COMMAND + 1]])
    }

    /// Memory-space decoding enabled (BAR0 accesses are honoured).
    pub fn memory_enabled(&self) -> bool {
        self.command() & COMMAND_MSE != 0
    }

    /// Bus mastering enabled (DMA allowed).
    pub fn bus_master(&self) -> bool {
        self.command() & COMMAND_BME != 0
    }

    /// The function is gone: its configuration space reads all-ones, as a read that no
    /// device answers completes on PCIe.
    pub fn remove(&mut self) {
        self.map.fill(0, self.map.len(), 0xFF);
    }

    /// Applies what software wrote since the last poll. Returns true if COMMAND changed.
    pub fn poll(&mut self) -> bool {
        self.map.read_bytes(0, &mut self.scratch);
        if self.scratch == self.shadow {
            return false;
        }
        let old_command = self.command();
        let mut fixed = self.scratch;
        for (i, b) in fixed.iter_mut().enumerate() {
            let w = writable(self.kind, i);
            *b = (*b & w) | (self.shadow[i] & !w);
        }
        // BAR0 low: the 82599's address bits 31:17 are writable, type bits read 0100b (64-bit
        // memory); the virtio function's bits 31:5, type 01b (I/O).
        let low = u32::from_le_bytes(fixed[BAR0..BAR0 + 4].try_into().expect("4 bytes"));
        let bar0 = match self.kind {
            Kind::Ixgbe => (low & 0xFFFE_0000) | 0b100,
            Kind::VirtioNet => (low & VIRTIO_BAR0_MASK) | 1,
        };
        fixed[BAR0..BAR0 + 4].copy_from_slice(&bar0.to_le_bytes());
        if self.kind == Kind::VirtioNet {
            let low = u32::from_le_bytes(fixed[BAR4..BAR4 + 4].try_into().expect("4 bytes"));
            fixed[BAR4..BAR4 + 4].copy_from_slice(&((low & VIRTIO_BAR4_MASK) | VIRTIO_BAR4_TYPE).to_le_bytes());
        }
        if fixed != self.scratch {
            self.map.write_bytes(0, &fixed);
        }
        self.shadow = fixed;
        self.command() != old_command
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> PciConfig {
        PciConfig::new(MappedRegion::anonymous(CONFIG_LEN).unwrap(), 0xF800_0000)
    }

    #[test]
    fn identity_and_defaults() {
        let c = cfg();
        assert_eq!(c.map.read_u32(0), 0x10FB_8086);
        assert_eq!(c.map.read_u32(0x08) >> 24, 0x02, "class network");
        assert_eq!(c.map.read_u32(0x10) & 0b110, 0b100, "64-bit memory BAR");
        assert_eq!(c.map.read_u16(0x44) & 3, 0, "D0");
        assert!(c.memory_enabled() && !c.bus_master());
    }

    #[test]
    fn command_bits_and_read_only_fields() {
        let mut c = cfg();
        c.map.write_u32(0, 0xDEAD_BEEF); // vendor/device are read-only
        c.map.write_u16(COMMAND, 0xFFFF);
        assert!(c.poll());
        assert_eq!(c.map.read_u32(0), 0x10FB_8086);
        assert_eq!(c.command(), COMMAND_IMPLEMENTED);
        assert!(c.bus_master());
    }

    #[test]
    fn a_virtio_function_has_an_io_bar_of_32_bytes() {
        let mut c = PciConfig::new_virtio(MappedRegion::anonymous(CONFIG_LEN).unwrap(), 0xC040, 0xFE00_4000);
        assert_eq!(c.map.read_u32(0), 0x1000_1AF4);
        assert_eq!(c.map.read_u16(0x2E), 1, "subsystem: network");
        assert_eq!(c.map.read_u32(0x10), 0xC041);
        c.map.write_u32(0x10, 0xFFFF_FFFF);
        c.map.write_u32(0x14, 0xFFFF_FFFF);
        c.poll();
        assert_eq!(c.map.read_u32(0x10), 0xFFFF_FFE1, "32 bytes of I/O space");
        assert_eq!(c.map.read_u32(0x14), 0, "no BAR1");
        c.map.write_u16(COMMAND, COMMAND_IO | COMMAND_BME);
        c.poll();
        assert!(c.bus_master());
    }

    #[test]
    fn a_virtio_function_has_a_memory_bar_of_16k_and_its_capabilities() {
        let mut c = PciConfig::new_virtio(MappedRegion::anonymous(CONFIG_LEN).unwrap(), 0xC040, 0xFE00_4000);
        assert_eq!(c.map.read_u32(0x20), 0xFE00_400C, "64-bit prefetchable memory");
        c.map.write_u32(0x20, 0xFFFF_FFFF);
        c.poll();
        assert_eq!(c.map.read_u32(0x20), 0xFFFF_C00C, "16 KiB");
        // Walk the list as a driver does: (cfg_type, bar, offset, length) of each vendor capability.
        let byte = |at: usize| {
            let mut b = [0u8];
            c.map.read_bytes(at, &mut b);
            b[0]
        };
        let mut found = Vec::new();
        let mut at = byte(0x34) as usize;
        while at != 0 {
            assert_eq!(byte(at), 0x09, "vendor-specific");
            found.push((byte(at + 3), byte(at + 4), c.map.read_u32(at + 8), c.map.read_u32(at + 12)));
            at = byte(at + 1) as usize;
        }
        assert_eq!(found, vec![(1, 4, 0, 0x3C), (3, 4, 0x1000, 1), (4, 4, 0x2000, 8), (2, 4, 0x3000, 12)]);
        assert_eq!(c.map.read_u32(0x70 + 16), 4, "notify_off_multiplier");
        assert_ne!(c.map.read_u16(0x06) & (1 << 4), 0, "STATUS says there is a list");
    }

    #[test]
    fn bar_sizing_reports_128k() {
        let mut c = cfg();
        c.map.write_u32(0x10, 0xFFFF_FFFF);
        c.poll();
        assert_eq!(c.map.read_u32(0x10), 0xFFFE_0004);
        c.map.write_u32(0x10, 0xF800_0000);
        c.poll();
        assert_eq!(c.map.read_u32(0x10), 0xF800_0004);
    }
}
