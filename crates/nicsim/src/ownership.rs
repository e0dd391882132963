//! Who owns a function: the processes that map its BAR0, grouped by the claim they share.
//!
//! On the card one driver owns a function (its VFIO device, DPDK's lock), and a process it
//! forks with that handle shares the ownership. Drivers of this project claim a function with
//! an exclusive `flock` on its `config` file; every process that holds that lock holds it
//! through one open file description, inherited across `fork` (as a driver's keeper inherits
//! it), so they are one owner. A process that maps the BAR without the lock is its own owner.

use std::fs::File;
use std::os::unix::fs::MetadataExt;

/// The identity of a function's `config` file, whose exclusive lock is the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimFile {
    dev: u64,
    ino: u64,
}

impl ClaimFile {
    pub fn of(file: &File) -> std::io::Result<ClaimFile> {
        let m = file.metadata()?;
        Ok(ClaimFile { dev: m.dev(), ino: m.ino() })
    }

    /// Whether process `pid` holds the exclusive `flock` on this file: `/proc/<pid>/fdinfo/<fd>`
    /// lists the locks held through that descriptor's open file description (proc(5)), so a
    /// process that opened the file again without the lock shows none.
    pub fn held_by(&self, pid: u32) -> bool {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
        fds.filter_map(|e| e.ok()).any(|fd| {
            let is_claim_file = std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino);
            is_claim_file
                && std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy()))
                    .is_ok_and(|info| info.lines().any(is_exclusive_flock))
        })
    }
}

/// A `lock:` line of fdinfo for an exclusive `flock`, e.g.
/// `lock:\t1: FLOCK  ADVISORY  WRITE 4242 00:2a:17 0 EOF`.
fn is_exclusive_flock(line: &str) -> bool {
    let mut words = line.split_whitespace();
    words.next() == Some("lock:") && words.nth(1) == Some("FLOCK") && words.nth(1) == Some("WRITE")
}

/// The owners among `mappers`: the processes that hold `claim` are one (listed first), every
/// other process is its own. Without a claim file every process is its own owner.
pub fn owners(mappers: &[u32], claim: Option<&ClaimFile>) -> Vec<Vec<u32>> {
    let (holders, others): (Vec<u32>, Vec<u32>) = mappers.iter().partition(|&&p| claim.is_some_and(|c| c.held_by(p)));
    let mut owners: Vec<Vec<u32>> = Vec::new();
    if !holders.is_empty() {
        owners.push(holders);
    }
    owners.extend(others.into_iter().map(|p| vec![p]));
    owners
}

#[cfg(test)]
mod tests {
    use super::*;
    use platform::Reaped;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    #[test]
    fn fdinfo_lock_lines_parse() {
        assert!(is_exclusive_flock("lock:\t1: FLOCK  ADVISORY  WRITE 4242 00:2a:17 0 EOF"));
        assert!(!is_exclusive_flock("lock:\t1: FLOCK  ADVISORY  READ 4242 00:2a:17 0 EOF"), "shared");
        assert!(!is_exclusive_flock("lock:\t1: POSIX  ADVISORY  WRITE 4242 00:2a:17 0 EOF"), "a record lock");
        assert!(!is_exclusive_flock("flags:\t02100002"));
    }

    /// This process takes the lock (through `flock(1)` on a shared description), a child that
    /// inherits the description shares it, and a child without it is a second owner.
    #[test]
    fn the_processes_that_share_the_lock_are_one_owner() {
        let dir = platform::fs::ScratchDir::new("nicsim-unit", "owners").unwrap();
        let path = dir.path().join("config");
        let file = File::create(&path).unwrap();
        let locked = Command::new("flock").args(["-x", "-n", "0"]).stdin(file.try_clone().unwrap()).status();
        assert!(locked.expect("flock(1) from util-linux").success(), "the lock is free");
        let claim = ClaimFile::of(&file).unwrap();
        let sharer = Reaped::spawn(Command::new("sleep").arg("60").stdin(file.try_clone().unwrap())).unwrap();
        let stranger =
            Reaped::spawn(Command::new("sleep").arg("60").stdin(File::open(&path).unwrap()).stdout(Stdio::null()))
                .unwrap();
        let me = std::process::id();
        let mappers = [stranger.id(), me, sharer.id()];
        // The children have exec'd once their descriptors show in /proc.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !claim.held_by(sharer.id()) {
            assert!(Instant::now() < deadline, "the child that inherited the description holds the lock");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!claim.held_by(stranger.id()), "another open of the file holds no lock");
        assert_eq!(owners(&mappers, Some(&claim)), vec![vec![me, sharer.id()], vec![stranger.id()]]);
        assert_eq!(owners(&mappers, None).len(), 3, "no claim file: each process alone");
        assert_eq!(owners(&[me, sharer.id()], Some(&claim)).len(), 1, "a driver and its keeper");
    }
}
