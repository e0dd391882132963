//! A minimal legacy virtio-net driver, written in the tests from the specification as ixy's
//! is [virtio 1.2 §3.1, §4.1.4.8, §5.1]: registers through `pread`/`pwrite` on `resource0`,
//! one hugepage for the three split virtqueues and their buffers, two-descriptor chains (net
//! header, then frame). It checks nicsim's device; it is no model of a good driver.

use nicsim::virtio::legacy::{layout, GUEST_FEATURES, HOST_FEATURES, QUEUE_NUM, QUEUE_PFN, QUEUE_SEL, STATUS};
use nicsim::virtio::{feature, status, CTRL, QUEUES, RX, TX};
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
    pub fn status(&self) -> u8 {
        self.read(STATUS, 1)[0]
    }

    /// Opens function `address` under `devices`, resets it, negotiates `features` (of those
    /// offered) and gives it its three queues, without setting DRIVER_OK.
    pub fn open(devices: &Path, address: &str, features: u64) -> VirtioPeer {
        let dir = devices.join(address);
        let config = File::options().read(true).write(true).open(dir.join("config")).unwrap();
        let mut cmd = [0u8; 2];
        config.read_exact_at(&mut cmd, 4).unwrap();
        config.write_all_at(&(u16::from_le_bytes(cmd) | 0b101).to_le_bytes(), 4).unwrap(); // I/O + bus master
        let bar = File::options().read(true).write(true).open(dir.join("resource0")).unwrap();
        let mem =
            DmaMemory::allocate(2 << 20, DmaBacking::HugetlbfsFile(None)).expect("a hugepage (make test sets them up)");
        let mut peer = VirtioPeer {
            bar,
            mem,
            rings: [Ring { size: 0, desc: 0, avail: 0, used: 0, avail_idx: 0, last_used: 0 }; QUEUES],
            buffers: 0,
        };
        peer.write(STATUS, &[0]);
        assert_eq!(peer.status(), 0, "the reset is done when the write returns");
        peer.write(STATUS, &[status::ACKNOWLEDGE]);
        peer.write(STATUS, &[status::ACKNOWLEDGE | status::DRIVER]);
        let offered = u32::from_le_bytes(peer.read(HOST_FEATURES, 4).try_into().unwrap()) as u64;
        assert_eq!(offered & features, features, "the device offers {offered:#x}");
        peer.write(GUEST_FEATURES, &(features as u32).to_le_bytes());
        let mut at = 0;
        for q in 0..QUEUES {
            peer.write(QUEUE_SEL, &(q as u16).to_le_bytes());
            let size = u16::from_le_bytes(peer.read(QUEUE_NUM, 2).try_into().unwrap());
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
            peer.write(QUEUE_PFN, &pfn.to_le_bytes());
            at = (peer.rings[q].used + 6 + 8 * size as usize).next_multiple_of(4096);
        }
        peer.buffers = at;
        peer
    }

    pub fn driver_ok(&self) {
        let s = self.status();
        self.write(STATUS, &[s | status::DRIVER_OK]);
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
        let (cmd, _) = self.slot(CTRL, 0);
        let (data_at, _) = self.slot(CTRL, 1);
        let (ack, _) = self.slot(CTRL, 2);
        let r = self.mem.region();
        r.write_bytes(cmd, &[class, command]);
        r.write_bytes(data_at, data);
        r.write_bytes(ack, &[0xEE]);
        self.put_desc(CTRL, 0, cmd, 2, NEXT, 1);
        self.put_desc(CTRL, 1, data_at, data.len() as u32, NEXT, 2);
        self.put_desc(CTRL, 2, ack, 1, WRITE, 0);
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
