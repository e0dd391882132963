//! What one register access through a virtio function's BAR files costs a driver, beside a
//! plain system call made on the same host in the same run (`nicsim bench-access`): the
//! legacy interface's `resource0` and the modern interface's `resource4`, a notify written
//! and the status read, each as `pwrite`/`pread` as ixy's and DPDK's drivers make them. A
//! hypervisor's notify through an ioeventfd costs 1–2 µs; what a FUSE round trip costs here
//! is what this measures, beside the floor of any reply through the kernel to a caller that
//! sleeps: a byte to a sleeping thread and back. Rounds alternate the kinds, so that a slow
//! minute of the host slows them all; each figure is the median over the rounds of a round's
//! mean.

use crate::virtio::{legacy, modern, status, TX};
use serde::Serialize;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Instant;

/// One kind of access and what it cost.
#[derive(Debug, Clone, Serialize)]
pub struct AccessCost {
    pub access: &'static str,
    pub ns: f64,
    /// `ns` over the plain system call's.
    pub ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub function: String,
    pub rounds: usize,
    pub per_round: usize,
    /// A `pread` of one byte of `/dev/zero`: a system call that reaches no device.
    pub syscall_ns: f64,
    /// A byte to a thread that sleeps until it comes and back, over a socket pair: the least a
    /// reply costs from a server that does not spin while the caller sleeps, as a FUSE
    /// request's does whatever the transport.
    pub wakeup_ns: f64,
    /// `wakeup_ns` over the plain system call's.
    pub wakeup_ratio: f64,
    pub accesses: Vec<AccessCost>,
}

/// One timed operation: the file, and whether it reads or writes how many bytes where.
struct Op {
    name: &'static str,
    file: File,
    offset: u64,
    write: Option<Vec<u8>>,
    /// What a read must return: the access reached the device and it answered.
    expect: Option<u8>,
}

impl Op {
    fn once(&self, buf: &mut [u8; 2]) -> Result<(), String> {
        let r = match &self.write {
            Some(bytes) => self.file.write_at(bytes, self.offset).map(drop),
            None => self.file.read_exact_at(&mut buf[..1], self.offset),
        };
        r.map_err(|e| format!("{}: {e}", self.name))?;
        match self.expect {
            Some(v) if buf[0] != v => Err(format!("{}: read {:#x}, the device holds {v:#x}", self.name, buf[0])),
            _ => Ok(()),
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Measures the virtio function in `dir` (a directory of `nicsim serve --device virtio-net`'s
/// `devices`): `rounds` rounds of `per_round` of each access. The function is reset and left
/// with the status ACKNOWLEDGE: run it on a function no driver uses.
pub fn measure(dir: &Path, rounds: usize, per_round: usize) -> Result<Report, String> {
    let open = |name: &str| {
        File::options().read(true).write(true).open(dir.join(name)).map_err(|e| {
            format!(
                "{}: {e} (is it a virtio function of a running nicsim serve --device virtio-net?)",
                dir.join(name).display()
            )
        })
    };
    let config = open("config")?;
    let mut command = [0u8; 2];
    config.read_exact_at(&mut command, 4).map_err(|e| format!("config: {e}"))?;
    // I/O and memory space on, as a driver sets them before touching a BAR.
    config.write_all_at(&(u16::from_le_bytes(command) | 0b11).to_le_bytes(), 4).map_err(|e| format!("config: {e}"))?;
    let (io, mem) = (open("resource0")?, open("resource4")?);
    io.write_all_at(&[0], legacy::STATUS).map_err(|e| format!("resource0: {e}"))?;
    io.write_all_at(&[status::ACKNOWLEDGE], legacy::STATUS).map_err(|e| format!("resource0: {e}"))?;
    let notify_tx = modern::NOTIFY + TX as u64 * u64::from(modern::NOTIFY_MULTIPLIER);
    let ops = [
        Op {
            name: "plain system call (pread of /dev/zero)",
            file: File::open("/dev/zero").map_err(|e| format!("/dev/zero: {e}"))?,
            offset: 0,
            write: None,
            expect: Some(0),
        },
        Op {
            name: "legacy QUEUE_NOTIFY write (pwrite, resource0)",
            file: io.try_clone().map_err(|e| e.to_string())?,
            offset: legacy::QUEUE_NOTIFY,
            write: Some((TX as u16).to_le_bytes().to_vec()),
            expect: None,
        },
        Op {
            name: "legacy STATUS read (pread, resource0)",
            file: io,
            offset: legacy::STATUS,
            write: None,
            expect: Some(status::ACKNOWLEDGE),
        },
        Op {
            name: "modern queue notify write (pwrite, resource4)",
            file: mem.try_clone().map_err(|e| e.to_string())?,
            offset: notify_tx,
            write: Some((TX as u16).to_le_bytes().to_vec()),
            expect: None,
        },
        Op {
            name: "modern device_status read (pread, resource4)",
            file: mem,
            offset: modern::COMMON + modern::common::DEVICE_STATUS,
            write: None,
            expect: Some(status::ACKNOWLEDGE),
        },
    ];
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); ops.len()];
    let mut wakeups = Vec::with_capacity(rounds);
    let echo = Echo::start()?;
    let mut buf = [0u8; 2];
    for _ in 0..rounds.max(1) {
        for (op, m) in ops.iter().zip(means.iter_mut()) {
            let t = Instant::now();
            for _ in 0..per_round.max(1) {
                op.once(&mut buf)?;
            }
            m.push(t.elapsed().as_nanos() as f64 / per_round.max(1) as f64);
        }
        let t = Instant::now();
        for _ in 0..per_round.max(1) {
            echo.round_trip()?;
        }
        wakeups.push(t.elapsed().as_nanos() as f64 / per_round.max(1) as f64);
    }
    echo.stop()?;
    let wakeup_ratio = median(wakeups.iter().zip(&means[0]).map(|(w, s)| w / s.max(1.0)).collect());
    let ratios: Vec<Vec<f64>> =
        means.iter().map(|m| m.iter().zip(&means[0]).map(|(a, s)| a / s.max(1.0)).collect()).collect();
    let syscall_ns = median(means[0].clone());
    let accesses = ops
        .iter()
        .zip(means.into_iter().zip(ratios))
        .skip(1)
        .map(|(op, (m, r))| AccessCost { access: op.name, ns: median(m), ratio: median(r) })
        .collect();
    Ok(Report {
        function: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        rounds: rounds.max(1),
        per_round: per_round.max(1),
        syscall_ns,
        wakeup_ns: median(wakeups),
        wakeup_ratio,
        accesses,
    })
}

/// A thread that sends back each byte it reads, sleeping in `read` in between.
struct Echo {
    ours: UnixStream,
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

impl Echo {
    fn start() -> Result<Echo, String> {
        let (ours, mut theirs) =
            UnixStream::pair().map_err(|e| format!("a socket pair for the wake-up round trip: {e}"))?;
        let thread = std::thread::Builder::new()
            .name("nicsim-echo".into())
            .spawn(move || {
                let mut b = [0u8; 1];
                // Until the other end closes (a read of 0 bytes).
                while theirs.read(&mut b)? == 1 {
                    theirs.write_all(&b)?;
                }
                Ok(())
            })
            .map_err(|e| format!("cannot start the echo thread: {e}"))?;
        Ok(Echo { ours, thread })
    }

    fn round_trip(&self) -> Result<(), String> {
        let mut b = [0x5a];
        (&self.ours).write_all(&b).and_then(|_| (&self.ours).read_exact(&mut b)).map_err(|e| format!("echo: {e}"))?;
        if b[0] != 0x5a {
            return Err(format!("echo: sent 0x5a, got {:#x} back", b[0]));
        }
        Ok(())
    }

    fn stop(self) -> Result<(), String> {
        self.ours.shutdown(std::net::Shutdown::Both).map_err(|e| format!("echo: {e}"))?;
        self.thread.join().map_err(|_| "the echo thread panicked".to_string())?.map_err(|e| format!("echo: {e}"))
    }
}
