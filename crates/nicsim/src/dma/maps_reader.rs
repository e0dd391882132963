//! Reads the drivers' `/proc/<pid>/maps` on a thread of its own, every
//! [`RELEASE_LOOK_PERIOD`], for the engine to compare with the memory it keeps. Under line rate
//! one read took the engine 100–160 µs, time in which the device neither received nor
//! transmitted; the comparison itself takes a microsecond.

use super::proc::{read_maps, VmaKey, RELEASE_LOOK_PERIOD};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// One read of the maps of `pids`, begun at `started`: what it shows holds for memory known
/// before then.
pub(super) struct MapsRead {
    pub started: Instant,
    pub pids: Vec<u32>,
    pub lines: Vec<VmaKey>,
}

impl MapsRead {
    /// A read made now, on the calling thread.
    pub fn now(pids: Vec<u32>) -> MapsRead {
        let started = Instant::now();
        let lines = read_maps(&pids);
        MapsRead { started, pids, lines }
    }
}

#[derive(Default)]
struct Shared {
    /// The processes to read.
    pids: Mutex<Vec<u32>>,
    /// The latest read not yet taken.
    latest: Mutex<Option<MapsRead>>,
    stop: AtomicBool,
}

/// The reading thread; stopped and joined when dropped.
pub(super) struct MapsReader {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl MapsReader {
    pub fn start() -> std::io::Result<MapsReader> {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        let thread = std::thread::Builder::new().name("nicsim-maps".into()).spawn(move || {
            while !theirs.stop.load(Ordering::Relaxed) {
                std::thread::park_timeout(RELEASE_LOOK_PERIOD);
                let pids = theirs.pids.lock().map(|p| p.clone()).unwrap_or_default();
                if pids.is_empty() || theirs.stop.load(Ordering::Relaxed) {
                    continue;
                }
                let read = MapsRead::now(pids);
                if let Ok(mut latest) = theirs.latest.lock() {
                    *latest = Some(read);
                }
            }
        })?;
        Ok(MapsReader { shared, thread: Some(thread) })
    }

    /// Reads the maps of `pids` from now on.
    pub fn watch(&self, pids: Vec<u32>) {
        if let Ok(mut p) = self.shared.pids.lock() {
            *p = pids;
        }
    }

    /// The latest read, if one came since the last call. Never waits: while the reader is
    /// storing one, the engine takes it at its next look.
    pub fn take(&self) -> Option<MapsRead> {
        self.shared.latest.try_lock().ok()?.take()
    }
}

impl Drop for MapsReader {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use platform::MappedRegion;

    /// The next read the reader hands over that began after `after`.
    fn next_read(reader: &MapsReader, after: Instant) -> MapsRead {
        loop {
            match reader.take() {
                Some(read) if read.started > after => return read,
                _ => std::thread::sleep(RELEASE_LOOK_PERIOD / 4),
            }
        }
    }

    #[test]
    fn reads_begun_after_a_change_show_it() {
        let path = std::env::temp_dir().join(format!("nicsim-maps-reader-{}", std::process::id()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        file.set_len(4096).unwrap();
        let me = std::process::id();
        let reader = MapsReader::start().unwrap();
        reader.watch(vec![me]);
        let map = MappedRegion::map_file(&file, 0, 4096, false).unwrap();
        let start = map.virt_addr() as u64;
        let mapped = Instant::now();
        let read = next_read(&reader, mapped);
        assert_eq!(read.pids, [me]);
        assert!(read.lines.iter().any(|k| k.pid == me && k.start == start), "the mapping is in a later read");
        drop(map);
        let unmapped = Instant::now();
        let read = next_read(&reader, unmapped);
        assert!(!read.lines.iter().any(|k| k.pid == me && k.start == start), "and gone from one after its unmapping");
        std::fs::remove_file(&path).unwrap();
        // Dropping the reader stops and joins its thread.
        drop(reader);
    }
}
