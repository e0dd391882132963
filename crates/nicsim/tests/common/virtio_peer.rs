//! A minimal virtio-net driver, written in the tests from the specification as ixy's is
//! [virtio 1.2 §3.1, §4.1.4.8, §5.1]: registers through `pread`/`pwrite` on `resource0` (the
//! legacy interface) or `resource4` (virtio 1.x), one hugepage for the three split virtqueues
//! and their buffers, two-descriptor chains (net header, then frame). It checks nicsim's
//! device; it is no model of a good driver.

use nicsim::virtio::legacy::{layout, GUEST_FEATURES, HOST_FEATURES, QUEUE_NUM, QUEUE_PFN, QUEUE_SEL, STATUS};
use nicsim::virtio::{feature, modern, status, CTRL, QUEUES, RX, TX};
use platform::{DmaBacking, DmaMemory};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

pub const HEADER: usize = 10;
pub const BUFFER: usize = 2048;
const NEXT: u16 = 1;
const WRITE: u16 = 2;

/// A queue as the driver sees it: where its parts are in the hugepage, and its indices.
#[derive(Debug, Clone, Copy)]
pub struct Ring {
    pub size: u16,
    /// Offsets in the hugepage of the descriptor table, available and used rings.
    pub desc: usize,
    pub avail: usize,
    pub used: usize,
    pub avail_idx: u16,
    pub last_used: u16,
}

pub struct VirtioPeer {
    pub bar: File,
    /// Through `resource4`, the virtio 1.x interface, rather than the legacy `resource0`.
    pub modern: bool,
    /// The function's `config`, for the MAC address in the device configuration.
    pub mem: DmaMemory,
    pub rings: [Ring; QUEUES],
    /// Offset of the buffers: queue q's descriptor pair k uses header and buffer slots
    /// `q * 256 + k`.
    pub buffers: usize,
}

impl VirtioPeer {
    pub fn read(&self, at: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0; len];
        self.bar.read_exact_at(&mut b, at).unwrap();
        b
    }
    pub fn write(&self, at: u64, bytes: &[u8]) {
        self.bar.write_all_at(bytes, at).unwrap();
    }
    fn status_at(&self) -> u64 {
        if self.modern {
            modern::COMMON + modern::common::DEVICE_STATUS
        } else {
            STATUS
        }
    }
    pub fn status(&self) -> u8 {
        self.read(self.status_at(), 1)[0]
    }
    pub fn set_status(&self, status: u8) {
        self.write(self.status_at(), &[status]);
    }
    /// The MAC address in the device configuration [virtio 1.2 §5.1.4].
    pub fn config_mac(&self) -> [u8; 6] {
        let at = if self.modern { modern::DEVICE } else { nicsim::virtio::legacy::CONFIG_MAC };
        self.read(at, 6).try_into().unwrap()
    }

    /// Opens function `address` under `devices`, resets it, negotiates `features` (of those
    /// offered) and gives it its three queues, without setting DRIVER_OK.
    pub fn open(devices: &Path, address: &str, features: u64) -> VirtioPeer {
        Self::open_through(devices, address, features, false)
    }

    /// As [`Self::open`], through the virtio 1.x interface (`VERSION_1` is added to `features`).
    pub fn open_modern(devices: &Path, address: &str, features: u64) -> VirtioPeer {
        Self::open_through(devices, address, features | feature::VERSION_1, true)
    }

    fn open_through(devices: &Path, address: &str, features: u64, modern: bool) -> VirtioPeer {
        let dir = devices.join(address);
        let config = File::options().read(true).write(true).open(dir.join("config")).unwrap();
        let mut cmd = [0u8; 2];
        config.read_exact_at(&mut cmd, 4).unwrap();
        config.write_all_at(&(u16::from_le_bytes(cmd) | 0b111).to_le_bytes(), 4).unwrap(); // I/O, memory, bus master
        let resource = if modern { "resource4" } else { "resource0" };
        let bar = File::options().read(true).write(true).open(dir.join(resource)).unwrap();
        let mem =
            DmaMemory::allocate(2 << 20, DmaBacking::HugetlbfsFile(None)).expect("a hugepage (make test sets them up)");
        let mut peer = VirtioPeer {
            bar,
            modern,
            mem,
            rings: [Ring { size: 0, desc: 0, avail: 0, used: 0, avail_idx: 0, last_used: 0 }; QUEUES],
            buffers: 0,
        };
        peer.set_status(0);
        assert_eq!(peer.status(), 0, "the reset is done when the write returns");
        peer.set_status(status::ACKNOWLEDGE);
        peer.set_status(status::ACKNOWLEDGE | status::DRIVER);
        if modern {
            peer.negotiate_modern(features);
        } else {
            let offered = u32::from_le_bytes(peer.read(HOST_FEATURES, 4).try_into().unwrap()) as u64;
            assert_eq!(offered & features, features, "the device offers {offered:#x}");
            peer.write(GUEST_FEATURES, &(features as u32).to_le_bytes());
        }
        let mut at = 0;
        for q in 0..QUEUES {
            let size = peer.select_queue(q);
            let pfn = (peer.mem.phys(at) / 4096) as u32;
            let (desc, avail, used) = layout(pfn, size);
            let base = peer.mem.phys(at);
            peer.rings[q] = Ring {
                size,
                desc: at,
                avail: at + (avail - base) as usize,
                used: at + (used - base) as usize,
                avail_idx: 0,
                last_used: 0,
            };
            assert_eq!(desc, base);
            if modern {
                use modern::common::*;
                for (field, addr) in [(QUEUE_DESC, desc), (QUEUE_DRIVER, avail), (QUEUE_DEVICE, used)] {
                    peer.write(modern::COMMON + field, &addr.to_le_bytes());
                }
                peer.write(modern::COMMON + QUEUE_ENABLE, &1u16.to_le_bytes());
            } else {
                peer.write(QUEUE_PFN, &pfn.to_le_bytes());
            }
            at = (peer.rings[q].used + 6 + 8 * size as usize).next_multiple_of(4096);
        }
        peer.buffers = at;
        peer
    }

    /// Selects queue `q`; its size.
    fn select_queue(&self, q: usize) -> u16 {
        if self.modern {
            use modern::common::{QUEUE_SELECT, QUEUE_SIZE};
            self.write(modern::COMMON + QUEUE_SELECT, &(q as u16).to_le_bytes());
            u16::from_le_bytes(self.read(modern::COMMON + QUEUE_SIZE, 2).try_into().unwrap())
        } else {
            self.write(QUEUE_SEL, &(q as u16).to_le_bytes());
            u16::from_le_bytes(self.read(QUEUE_NUM, 2).try_into().unwrap())
        }
    }

    /// Feature negotiation through the common configuration, to FEATURES_OK [virtio 1.2 §3.1.1].
    fn negotiate_modern(&self, features: u64) {
        use modern::common::*;
        let mut offered = 0u64;
        for half in 0..2u32 {
            self.write(modern::COMMON + DEVICE_FEATURE_SELECT, &half.to_le_bytes());
            let bits = u32::from_le_bytes(self.read(modern::COMMON + DEVICE_FEATURE, 4).try_into().unwrap());
            offered |= u64::from(bits) << (32 * half);
        }
        assert_eq!(offered & features, features, "the device offers {offered:#x}");
        for half in 0..2u32 {
            self.write(modern::COMMON + DRIVER_FEATURE_SELECT, &half.to_le_bytes());
            self.write(modern::COMMON + DRIVER_FEATURE, &((features >> (32 * half)) as u32).to_le_bytes());
        }
        self.set_status(status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK);
        assert_ne!(self.status() & status::FEATURES_OK, 0, "the device took the features");
    }

    pub fn driver_ok(&self) {
        let s = self.status();
        self.set_status(s | status::DRIVER_OK);
    }

    fn slot(&self, q: usize, k: u16) -> (usize, usize) {
        let i = q * 256 + k as usize;
        (self.buffers + i * 16, self.buffers + 3 * 256 * 16 + i * BUFFER)
    }

    fn put_desc(&self, q: usize, i: u16, offset: usize, len: u32, flags: u16, next: u16) {
        self.raw_desc(q, i, self.mem.phys(offset), len, flags, next);
    }

    /// Makes chain `head` available on queue `q`.
    pub fn offer(&mut self, q: usize, head: u16) {
        let r = &mut self.rings[q];
        let region = self.mem.region();
        region.write_u16(r.avail + 4 + 2 * (r.avail_idx % r.size) as usize, head);
        r.avail_idx = r.avail_idx.wrapping_add(1);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        region.write_u16(r.avail + 2, r.avail_idx);
    }

    /// Posts pair `k` of the receive queue: a header descriptor and a buffer descriptor.
    pub fn post_rx(&mut self, k: u16) {
        let (h, b) = self.slot(RX, k);
        self.put_desc(RX, 2 * k, h, HEADER as u32, WRITE | NEXT, 2 * k + 1);
        self.put_desc(RX, 2 * k + 1, b, BUFFER as u32, WRITE, 0);
        self.offer(RX, 2 * k);
    }

    /// Sends `frame` through pair `k` of the transmit queue with `header`.
    pub fn send(&mut self, k: u16, header: [u8; HEADER], frame: &[u8]) {
        let (h, b) = self.slot(TX, k);
        self.mem.region().write_bytes(h, &header);
        self.mem.region().write_bytes(b, frame);
        self.put_desc(TX, 2 * k, h, HEADER as u32, NEXT, 2 * k + 1);
        self.put_desc(TX, 2 * k + 1, b, frame.len() as u32, 0, 0);
        self.offer(TX, 2 * k);
    }

    /// Writes raw descriptor `i` of queue `q` (for tests of what a bad driver does).
    pub fn raw_desc(&self, q: usize, i: u16, phys: u64, len: u32, flags: u16, next: u16) {
        let r = self.mem.region();
        let at = self.rings[q].desc + 16 * i as usize;
        r.write_u64(at, phys);
        r.write_u32(at + 8, len);
        r.write_u16(at + 12, flags);
        r.write_u16(at + 14, next);
    }

    /// The used elements the device returned since the last call, as (head, len).
    pub fn used(&mut self, q: usize) -> Vec<(u16, u32)> {
        let r = &mut self.rings[q];
        let region = self.mem.region();
        let idx = region.read_u16(r.used + 2);
        let mut out = Vec::new();
        while r.last_used != idx {
            let at = r.used + 4 + 8 * (r.last_used % r.size) as usize;
            out.push((region.read_u32(at) as u16, region.read_u32(at + 4)));
            r.last_used = r.last_used.wrapping_add(1);
        }
        out
    }

    /// Waits until queue `q` has returned `n` chains in all, collecting them.
    pub fn wait_used(&mut self, q: usize, n: usize, within: Duration) -> Vec<(u16, u32)> {
        let deadline = Instant::now() + within;
        let mut all = Vec::new();
        while all.len() < n {
            all.extend(self.used(q));
            assert!(Instant::now() < deadline, "queue {q}: {} of {n} chains came back", all.len());
            std::thread::sleep(Duration::from_millis(1));
        }
        all
    }

    /// The bytes the device wrote into receive pair `k`: header, frame.
    pub fn received(&self, k: u16, len: u32) -> (Vec<u8>, Vec<u8>) {
        let (h, b) = self.slot(RX, k);
        let mut header = vec![0; HEADER];
        self.mem.region().read_bytes(h, &mut header);
        let mut frame = vec![0; len as usize - HEADER];
        self.mem.region().read_bytes(b, &mut frame);
        (header, frame)
    }

    /// Sends a control command (class, command, data) as ixy does: header, data, ack in three
    /// descriptors. Returns the ack.
    pub fn control(&mut self, class: u8, command: u8, data: &[u8]) -> u8 {
        let mut bytes = vec![class, command];
        bytes.extend_from_slice(data);
        let pieces: Vec<&[u8]> = if data.is_empty() { vec![&bytes] } else { vec![&bytes[..2], &bytes[2..]] };
        self.control_chain(&pieces)
    }

    /// Sends the command whose device-readable bytes are `pieces`, one descriptor each, then a
    /// one-byte ack descriptor. Returns the ack.
    pub fn control_chain(&mut self, pieces: &[&[u8]]) -> u8 {
        const AT: usize = 2048;
        assert!(pieces.len() < 200 && pieces.iter().all(|p| p.len() <= AT));
        let r = self.mem.region();
        let base = self.slot(CTRL, 0).1;
        for (k, piece) in pieces.iter().enumerate() {
            r.write_bytes(base + k * AT, piece);
            self.put_desc(CTRL, k as u16, base + k * AT, piece.len() as u32, NEXT, k as u16 + 1);
        }
        let ack = base + pieces.len() * AT;
        r.write_bytes(ack, &[0xEE]);
        self.put_desc(CTRL, pieces.len() as u16, ack, 1, WRITE, 0);
        self.offer(CTRL, 0);
        let used = self.wait_used(CTRL, 1, Duration::from_secs(5));
        assert_eq!(used, vec![(0, 1)], "the control chain comes back with its 1-byte ack");
        let mut b = [0u8];
        self.mem.region().read_bytes(ack, &mut b);
        b[0]
    }
}

/// The features a driver like ixy's negotiates.
pub const IXY_FEATURES: u64 =
    feature::CSUM | feature::GUEST_CSUM | feature::MAC | feature::CTRL_VQ | feature::CTRL_RX | feature::ANY_LAYOUT;
