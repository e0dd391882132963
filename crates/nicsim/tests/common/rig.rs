//! A port in one process, as the device-model tests drive it: a "driver" writes the BAR
//! through a second mapping of the same file, the port is scanned as the engine would, and DMA
//! goes to a flat test region.

use super::twice;
use nicsim::dma::{DmaSpace, FlatDmaSpace, Location, Window};
use nicsim::lint::Rule;
use nicsim::pciconfig::{PciConfig, CONFIG_LEN};
use nicsim::port::{Port, TxBatch};
use nicsim::regs::*;
use platform::MappedRegion;

pub const DMA_BASE: u64 = 0x4000_0000;
pub const DMA_LEN: usize = 1 << 21;

/// The flat test memory; with `windows` off it never reports a contiguous window, so the
/// receive and transmit fast paths decline every frame and the general paths do all the work.
pub struct TestDma {
    pub flat: FlatDmaSpace,
    pub windows: bool,
    /// The driver released its memory: nothing resolves any more.
    pub released: bool,
}

impl DmaSpace for TestDma {
    fn locate(&self, phys: u64) -> Option<Location> {
        if self.released {
            return None;
        }
        self.flat.locate(phys)
    }
    fn window(&self, phys: u64) -> Option<Window> {
        if self.windows && !self.released {
            self.flat.window(phys)
        } else {
            None
        }
    }
    fn region(&self, index: usize) -> &MappedRegion {
        self.flat.region(index)
    }
}

/// A port plus the driver's view of its BAR and config space.
pub struct Rig {
    pub port: Port,
    pub bar: MappedRegion,
    pub cfg: MappedRegion,
    pub dma: TestDma,
}

impl Rig {
    pub fn new() -> Rig {
        let (bar_dev, bar) = twice(BAR0_LEN, "bar");
        let (cfg_dev, cfg) = twice(CONFIG_LEN, "cfg");
        let mut port = Port::new(0, bar_dev, PciConfig::new(cfg_dev, 0xF800_0000), 0, 10.0);
        // Link up at once: these tests drive the port without the slow path's clock.
        port.set_link_setup(std::time::Duration::ZERO);
        let flat = FlatDmaSpace { region: MappedRegion::anonymous(DMA_LEN).unwrap(), base: DMA_BASE };
        let dma = TestDma { flat, windows: true, released: false };
        let mut r = Rig { port, bar, cfg, dma };
        r.cfg.write_u16(4, r.cfg.read_u16(4) | 0b110); // memory space + bus master
        r.sync();
        r
    }
    pub fn rd(&self, reg: u32) -> u32 {
        self.bar.read_u32(reg as usize)
    }
    /// A driver write, then the device notices it.
    pub fn wr(&mut self, reg: u32, v: u32) {
        self.bar.write_u32(reg as usize, v);
        self.sync();
    }
    pub fn sync(&mut self) {
        self.port.scan_all();
        self.port.poll_doorbells();
        self.port.poll_tx_doorbells();
    }
    pub fn lint_rules(&self) -> Vec<Rule> {
        self.port.lint.entries().iter().map(|w| w.rule).collect()
    }
    pub fn mem(&self) -> &MappedRegion {
        &self.dma.flat.region
    }

    /// RX queue 0 with `n` descriptors at DMA offset 0, buffers of 2 KiB from 0x10000.
    pub fn rx_ring(&mut self, n: u32, advanced: bool, drop_en: bool) {
        for i in 0..n as usize {
            self.mem().write_u64(i * 16, DMA_BASE + 0x10000 + i as u64 * 2048);
            self.mem().write_u64(i * 16 + 8, 0);
        }
        self.wr(rdbal(0), DMA_BASE as u32);
        self.wr(rdbah(0), 0);
        self.wr(rdlen(0), n * 16);
        let desc = if advanced { 1 << SRRCTL_DESCTYPE_SHIFT } else { 0 };
        self.wr(srrctl(0), 2 | desc | if drop_en { SRRCTL_DROP_EN } else { 0 });
        self.wr(rxdctl(0), RXDCTL_ENABLE);
        self.wr(FCTRL, FCTRL_UPE | FCTRL_MPE | FCTRL_BAM);
        self.wr(RXCTRL, RXCTRL_RXEN);
    }

    /// TX queue `q` with `n` descriptors at DMA offset 0x8000 + q * 0x1000.
    pub fn tx_ring(&mut self, q: u32, n: u32, head_wb: Option<u64>) -> usize {
        let off = 0x8000 + q as usize * 0x1000;
        self.wr(tdbal(q), (DMA_BASE + off as u64) as u32);
        self.wr(tdlen(q), n * 16);
        if let Some(h) = head_wb {
            self.wr(tdwbal(q), h as u32 | 1);
        }
        self.wr(DMATXCTL, self.rd(DMATXCTL) | DMATXCTL_TE);
        self.wr(txdctl(q), TXDCTL_ENABLE);
        off
    }

    pub fn transmit(&mut self) -> Vec<Vec<u8>> {
        let mut batch = TxBatch::new(64);
        let mut out = Vec::new();
        // Far in the future: the wire is always free.
        for k in 1..50 {
            batch.clear();
            self.port.transmit(&mut self.dma, k * 1_000_000_000, &mut batch);
            out.extend(batch.iter().map(|(f, _)| f.to_vec()));
        }
        out
    }
}

pub fn frame(len: usize, tag: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ tag).collect();
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0]);
    f
}
