//! A file system of I/O BARs: files whose every `pread` and `pwrite` is one register access
//! that the device model answers, served over FUSE.
//!
//! A memory BAR is shared memory that nicsim polls; it cannot see a read, nor two writes of the
//! same register between two polls. An I/O BAR has registers that act on each access: legacy
//! virtio's queue select followed by the queue address, the notify register, the ISR that
//! clears when read. Linux lets user space reach an I/O BAR only through `pread`/`pwrite` on
//! `resource0` (as ixy's virtio driver does), so serving that file through FUSE with direct I/O
//! gives every access to the model, in order, from the thread that made it.
//!
//! Only what opening, reading, writing and listing files needs is answered; every other
//! request gets `ENOSYS`, which the kernel takes as "not supported".

use platform::fuse;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One file of registers.
pub trait IoFile: Send + Sync {
    /// Size in bytes (what `stat` shows; accesses beyond it read nothing).
    fn size(&self) -> u64;
    /// Answers a read of `buf.len()` bytes at `offset` by process `pid`.
    fn read(&self, offset: u64, buf: &mut [u8], pid: u32);
    /// Takes a write of `data` at `offset` by process `pid`.
    fn write(&self, offset: u64, data: &[u8], pid: u32);
}

/// A mounted file system of [`IoFile`]s, flat: `<dir>/<name>`. Dropping it detaches the mount.
pub struct IoFs {
    dir: PathBuf,
}

const ROOT: u64 = 1;
/// Requests and replies of the kernel's FUSE protocol 7.31 (`include/uapi/linux/fuse.h`).
const LOOKUP: u32 = 1;
const FORGET: u32 = 2;
const GETATTR: u32 = 3;
const SETATTR: u32 = 4;
const OPEN: u32 = 14;
const READ: u32 = 15;
const WRITE: u32 = 16;
const STATFS: u32 = 17;
const RELEASE: u32 = 18;
const FSYNC: u32 = 20;
const FLUSH: u32 = 25;
const INIT: u32 = 26;
const OPENDIR: u32 = 27;
const READDIR: u32 = 28;
const RELEASEDIR: u32 = 29;
const FSYNCDIR: u32 = 30;
const ACCESS: u32 = 34;
const INTERRUPT: u32 = 36;
const DESTROY: u32 = 38;
const BATCH_FORGET: u32 = 42;
const IN_HEADER: usize = 40;
/// How long the server polls for the next request after one, yielding its core between looks,
/// before it sleeps on the connection. A driver's accesses come in runs (a bring-up, a notify
/// per batch); a sleeping server on another core than the driver's costs each access two
/// wake-ups across cores, about 100 µs on this project's virtual machine, and a polling one
/// answers as fast as one on the driver's own core (docs/nicsim.md, "virtio: register access").
const SPIN: Duration = Duration::from_millis(1);
const MAX_WRITE: u32 = 4096;
/// Replies to OPEN: every read and write goes to the server, none through the page cache.
const FOPEN_DIRECT_IO: u32 = 1;
const ENOENT: i32 = 2;
const ENOSYS: i32 = 38;
const EINVAL: i32 = 22;

impl IoFs {
    /// Mounts `files` on `dir` (created if missing; a dead mount left there is removed first)
    /// and serves them from a thread of their own until the mount goes.
    pub fn mount(dir: &Path, files: Vec<(String, Arc<dyn IoFile>)>) -> Result<IoFs, String> {
        fuse::unmount(dir);
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let connection = fuse::mount(dir).map_err(|e| e.to_string())?;
        let server = Server { connection, files, last_thread: (0, 0) };
        std::thread::Builder::new()
            .name("nicsim-iofs".into())
            .spawn(move || server.run())
            .map_err(|e| format!("starting the I/O BAR server: {e}"))?;
        Ok(IoFs { dir: dir.to_path_buf() })
    }

    /// Where file `name` is.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for IoFs {
    fn drop(&mut self) {
        fuse::unmount(&self.dir);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

struct Server {
    connection: File,
    files: Vec<(String, Arc<dyn IoFile>)>,
    /// The last thread seen and its process: FUSE names the thread that made a request.
    last_thread: (u32, u32),
}

/// The process on whose behalf thread `tid` accesses a file: its own (thread group), or the
/// child it traces, for `nicsim exec` serving a mapped BAR's accesses for the driver
/// (`crate::exec::run_trapping_bars`), so that the driver's memory is the one adopted for DMA.
fn process_of(tid: u32) -> u32 {
    let tgid = platform::process::tgid(tid);
    platform::process::children(tgid)
        .into_iter()
        .find(|&child| platform::process::status_field(child, "TracerPid:") == Some(tgid))
        .unwrap_or(tgid)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
}

/// Little-endian fields appended in order: the protocol's structures have no padding of their own.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn zeros(mut self, n: usize) -> Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
}

impl Server {
    fn run(mut self) {
        let mut request = vec![0u8; IN_HEADER + 4096 + MAX_WRITE as usize];
        // Polled while accesses come, slept on once they stop: see [`SPIN`]. If the connection
        // cannot be made non-blocking, reads block and never find it empty.
        let _ = fuse::set_nonblocking(&self.connection);
        let mut last_request = Instant::now();
        loop {
            let n = match self.connection.read(&mut request) {
                Ok(n) => {
                    last_request = Instant::now();
                    n
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if last_request.elapsed() >= SPIN {
                        let _ = fuse::wait_for_request(&self.connection);
                    } else {
                        // A driver on this core gets it back at once.
                        std::thread::yield_now();
                    }
                    continue;
                }
                // The request was interrupted before we read it.
                Err(e) if e.raw_os_error() == Some(ENOENT) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // ENODEV: unmounted.
                Err(_) => return,
            };
            let r = &request[..n];
            let (opcode, unique, node, tid) = (u32_at(r, 4), u64_at(r, 8), u64_at(r, 16), u32_at(r, 32));
            if tid != self.last_thread.0 {
                self.last_thread = (tid, process_of(tid));
            }
            let pid = self.last_thread.1;
            let body = r.get(IN_HEADER..).unwrap_or(&[]);
            let reply = match opcode {
                FORGET | BATCH_FORGET | INTERRUPT => continue,
                INIT => Ok(Out::default()
                    .u32(7)
                    .u32(31)
                    .u32(0) // max_readahead
                    .u32(0) // flags
                    .u16(16)
                    .u16(12)
                    .u32(MAX_WRITE)
                    .u32(1) // time_gran
                    .zeros(64 - 28)),
                LOOKUP => self.lookup(node, body),
                GETATTR | SETATTR => self.attr(node).map(|a| Out::default().u64(1).u32(0).u32(0).append(a)),
                OPEN => Ok(Out::default().u64(0).u32(FOPEN_DIRECT_IO).u32(0)),
                OPENDIR => Ok(Out::default().u64(0).u32(0).u32(0)),
                READ => self.read(node, body, pid),
                WRITE => self.write(node, body, pid),
                READDIR => Ok(self.readdir(body)),
                STATFS => Ok(Out::default().zeros(32).u32(0).u32(4096).u32(255).u32(4096).zeros(24)),
                RELEASE | RELEASEDIR | FLUSH | FSYNC | FSYNCDIR | ACCESS => Ok(Out::default()),
                DESTROY => {
                    self.send(unique, Ok(Out::default()));
                    return;
                }
                _ => Err(ENOSYS),
            };
            self.send(unique, reply);
        }
    }

    fn send(&mut self, unique: u64, reply: Result<Out, i32>) {
        let (error, payload) = match reply {
            Ok(o) => (0, o.0),
            Err(e) => (-e, Vec::new()),
        };
        let mut m = Out::default().u32((16 + payload.len()) as u32).u32(error as u32).u64(unique).0;
        m.extend_from_slice(&payload);
        // A reply to a request interrupted meanwhile is refused (ENOENT): nothing waits for it.
        let _ = self.connection.write(&m);
    }

    fn file(&self, node: u64) -> Option<&Arc<dyn IoFile>> {
        let i = node.checked_sub(ROOT + 1)?;
        self.files.get(i as usize).map(|(_, f)| f)
    }

    /// `fuse_attr` of a node.
    fn attr(&self, node: u64) -> Result<Out, i32> {
        let (size, mode, nlink) =
            if node == ROOT { (0, 0o40_755, 2) } else { (self.file(node).ok_or(ENOENT)?.size(), 0o100_600, 1) };
        Ok(Out::default()
            .u64(node)
            .u64(size)
            .u64(size.div_ceil(512))
            .zeros(24 + 12) // times
            .u32(mode)
            .u32(nlink)
            .u32(fuse::owner().0)
            .u32(fuse::owner().1)
            .u32(0)
            .u32(4096)
            .u32(0))
    }

    fn lookup(&self, parent: u64, body: &[u8]) -> Result<Out, i32> {
        let name = body.split(|&b| b == 0).next().unwrap_or(&[]);
        if parent != ROOT {
            return Err(ENOENT);
        }
        let i = self.files.iter().position(|(n, _)| n.as_bytes() == name).ok_or(ENOENT)?;
        let node = ROOT + 1 + i as u64;
        let attr = self.attr(node)?;
        Ok(Out::default().u64(node).u64(0).u64(1).u64(1).u32(0).u32(0).append(attr))
    }

    fn read(&self, node: u64, body: &[u8], pid: u32) -> Result<Out, i32> {
        let f = self.file(node).ok_or(EINVAL)?;
        let (offset, size) = (u64_at(body, 8), u32_at(body, 16) as u64);
        let len = size.min(f.size().saturating_sub(offset)) as usize;
        let mut data = vec![0u8; len];
        if len > 0 {
            f.read(offset, &mut data, pid);
        }
        Ok(Out(data))
    }

    fn write(&self, node: u64, body: &[u8], pid: u32) -> Result<Out, i32> {
        let f = self.file(node).ok_or(EINVAL)?;
        let (offset, size) = (u64_at(body, 8), u32_at(body, 16) as usize);
        let data = body.get(40..40 + size).ok_or(EINVAL)?;
        let len = (size as u64).min(f.size().saturating_sub(offset)) as usize;
        if len > 0 {
            f.write(offset, &data[..len], pid);
        }
        // The whole write is taken, as a store beyond a BAR's end is dropped.
        Ok(Out::default().u32(size as u32).u32(0))
    }

    /// `fuse_dirent`s from entry `offset` on, as many as fit in the requested size.
    fn readdir(&self, body: &[u8]) -> Out {
        let (offset, size) = (u64_at(body, 8) as usize, u32_at(body, 16) as usize);
        let names = [".", ".."].into_iter().chain(self.files.iter().map(|(n, _)| n.as_str()));
        let mut out = Out::default();
        for (i, name) in names.enumerate().skip(offset) {
            let (node, kind) = if i < 2 { (ROOT, 4) } else { (ROOT + i as u64 - 1, 8) };
            let entry = (24 + name.len()).next_multiple_of(8);
            if out.0.len() + entry > size {
                break;
            }
            out = out.u64(node).u64(i as u64 + 1).u32(name.len() as u32).u32(kind);
            out.0.extend_from_slice(name.as_bytes());
            out = out.zeros(entry - 24 - name.len());
        }
        out
    }
}

impl Out {
    fn append(mut self, other: Out) -> Self {
        self.0.extend_from_slice(&other.0);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;
    use std::sync::Mutex;

    /// Records every access, and reads back a counter that each read advances: what no
    /// shared-memory file could show.
    #[derive(Default)]
    struct Probe {
        log: Mutex<Vec<(bool, u64, Vec<u8>)>>,
    }

    impl IoFile for Probe {
        fn size(&self) -> u64 {
            32
        }
        fn read(&self, offset: u64, buf: &mut [u8], _pid: u32) {
            let mut log = self.log.lock().unwrap();
            buf.fill(log.len() as u8);
            log.push((false, offset, buf.to_vec()));
        }
        fn write(&self, offset: u64, data: &[u8], pid: u32) {
            assert_eq!(pid, std::process::id(), "the writer is named");
            self.log.lock().unwrap().push((true, offset, data.to_vec()));
        }
    }

    #[test]
    fn every_access_reaches_the_model_in_order() {
        let dir = std::env::temp_dir().join(format!("nicsim-iofs-test-{}", std::process::id()));
        let probe = Arc::new(Probe::default());
        let fs = IoFs::mount(&dir, vec![("resource0".into(), probe.clone())]).expect("mounting (needs root)");
        let f = std::fs::OpenOptions::new().read(true).write(true).open(fs.path("resource0")).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 32);
        f.write_all_at(&[1, 0], 14).unwrap();
        f.write_all_at(&[1, 0], 14).unwrap();
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, 19).unwrap();
        assert_eq!(b, [2], "two writes of the same value are two accesses");
        f.read_exact_at(&mut b, 19).unwrap();
        assert_eq!(b, [3], "a read is seen too");
        let mut past = [0u8; 4];
        assert_eq!(f.read_at(&mut past, 32).unwrap(), 0, "nothing beyond the BAR");
        let log = probe.log.lock().unwrap().clone();
        assert_eq!(log[0], (true, 14, vec![1, 0]));
        assert_eq!(log.len(), 4);
        let names: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names, vec!["resource0".to_string()]);
        drop(f);
        drop(fs);
        assert!(!dir.exists(), "the mount point goes with the mount");
    }
}
