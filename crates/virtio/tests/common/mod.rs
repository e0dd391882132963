//! What the driver's tests share: nicsim as a child process, and a lossless forwarding loop.
#![allow(dead_code)] // each test binary uses a different part

use ixgbe::queues::{Batch, BufferPool, Receive, Transmit};
use nicsim::session::Session;
use platform::fs::ScratchDir;
use platform::Reaped;
use std::process::Command;
use std::time::{Duration, Instant};

pub const N: usize = 256;
pub const POOL: usize = 1024;
pub const FRAMES: u64 = 20_000;

/// `nicsim serve` as a child process with ports of `devices`: not in this process, whose
/// driver confines itself when a queue starts, after which nicsim could not open /dev/fuse.
pub struct Sim {
    session: Session,
    child: Option<Reaped>,
    _scratch: ScratchDir,
}

impl Drop for Sim {
    /// nicsim stops on request and removes its tree before it exits; only then does the
    /// scratch directory go. Killed instead, its guardian would remove the tree while the
    /// directory is being removed, and could leave it behind.
    fn drop(&mut self) {
        let _ = self.session.shutdown();
        if let Some(child) = self.child.take() {
            let _ = child.wait_for_exit(Duration::from_secs(10));
        }
    }
}

impl std::ops::Deref for Sim {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

pub fn nicsim(test: &str, devices: &str) -> Sim {
    let bin = std::env::current_exe().unwrap().parent().unwrap().with_file_name("nicsim");
    assert!(bin.exists(), "{} is missing: build the workspace first (make test does)", bin.display());
    let scratch = ScratchDir::new("virtio-test", test).expect("a scratch directory under /dev/shm");
    let root = scratch.path().join("root");
    let child = Reaped::spawn(
        Command::new(bin)
            .arg("--root")
            .arg(&root)
            .args(["serve", "--ports", "2", "--cpu", "0", "--device", devices])
            .stdout(std::process::Stdio::null()),
    )
    .expect("spawning nicsim serve");
    let session = Session::connect(&root);
    session.wait_answering(Duration::from_secs(10)).expect("nicsim serve did not come up");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !session.stats().unwrap().ports.iter().all(|p| p.link_up) {
        assert!(Instant::now() < deadline, "links did not come up");
        std::thread::sleep(Duration::from_millis(5));
    }
    platform::sched::pin_current_thread(1).expect("pinning the driver to CPU 1");
    Sim { session, child: Some(child), _scratch: scratch }
}

/// Forwards from `rx` to `tx` until port 1's sink has every frame, checking conservation and
/// that every frame received starts where the generator's did: an Ethernet header with IPv4's
/// ethertype. A driver and device that disagree on the net header's length shift it (and the
/// transmit side shifts it back, so the sink alone would not see it).
pub fn forward<'a>(sim: &Sim, pool: &mut BufferPool<'a>, rx: &mut impl Receive<'a>, tx: &mut impl Transmit<'a>) {
    let mut batch = Batch::<32>::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut forwarded = 0u64;
    while sim.stats().unwrap().ports[1].sink_packets < FRAMES {
        for _ in 0..1000 {
            forwarded += rx.rx_batch(pool, &mut batch) as u64;
            for b in batch.iter_mut() {
                let header: [u8; 14] = b.data().read_bytes::<0, 14>();
                assert_eq!(header[12..14], [0x08, 0x00], "frame {forwarded} is shifted: {header:02x?}");
            }
            tx.tx_batch(pool, &mut batch);
            // Lossless: what the transmit queue could not take yet waits in the batch.
        }
        assert!(Instant::now() < deadline, "{forwarded} of {FRAMES} forwarded after 60 s");
    }
    let s = sim.stats().unwrap().ports[1].clone();
    assert_eq!(s.sink_packets, FRAMES, "every frame once");
    let lost: u64 = s.streams.iter().map(|(_, st)| st.lost).sum();
    assert_eq!(lost, 0, "none lost or out of order: {:?}", s.streams);
    assert_eq!(forwarded, FRAMES);
}
