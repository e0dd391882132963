//! When `nicsim serve` dies without stopping (SIGKILL, a crash), its drivers must still see
//! the device go, as they would see a card pulled from its slot: every register reads
//! all-ones. A small guardian process, started by serve, waits for serve's end and then does
//! what serve's own shutdown does to the devices (see [`crate::port::Port::remove`]) and
//! removes the tree serve left behind.
//!
//! Serve's end is the end of a pipe: the guardian reads its standard input, whose other end
//! only serve holds, and reads end-of-file once serve has exited, however it exited.

use crate::server::remove_tree;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The hidden subcommand that runs [`watch`].
pub const SUBCOMMAND: &str = "guard";

/// A running guardian; serve keeps it for its whole life.
pub struct Guardian {
    child: Child,
}

impl Guardian {
    /// Starts `exe --root <root> guard [--remove-root]`: `exe` is nicsim's own binary.
    pub fn spawn(exe: &Path, root: &Path, remove_root: bool) -> std::io::Result<Guardian> {
        let mut command = Command::new(exe);
        command.arg("--root").arg(root).arg(SUBCOMMAND);
        if remove_root {
            command.arg("--remove-root");
        }
        let child = command.stdin(Stdio::piped()).stdout(Stdio::null()).spawn()?;
        Ok(Guardian { child })
    }

    /// After serve's own clean shutdown: the guardian finds nothing left to do and exits.
    pub fn release(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The guardian's life: waits for end-of-file on standard input, then, if serve left its
/// devices behind, makes them read all-ones and removes them, the socket and (with
/// `remove_root`) the root. Returns the PCI addresses it removed.
pub fn watch(root: &Path, remove_root: bool) -> Vec<String> {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    // Serve never writes; anything it did write is ignored until end-of-file.
    while !matches!(stdin.read(&mut sink), Ok(0) | Err(_)) {}
    remove_left_behind(root, remove_root)
}

/// What [`watch`] does once serve is gone.
pub fn remove_left_behind(root: &Path, remove_root: bool) -> Vec<String> {
    let mut removed = Vec::new();
    for dir in function_dirs(root) {
        for (file, len) in [("resource0", crate::regs::BAR0_LEN), ("config", crate::pciconfig::CONFIG_LEN)] {
            // Through the file, not a mapping: the pages are those the drivers map.
            if let Ok(f) = OpenOptions::new().write(true).open(dir.join(file)) {
                let _ = f.write_all_at(&vec![0xFF; len], 0);
            }
        }
        if let Some(name) = dir.file_name() {
            removed.push(name.to_string_lossy().into_owned());
        }
    }
    remove_tree(root, remove_root);
    removed
}

/// The function directories under `root/devices`, in address order.
fn function_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join("devices")) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("0000:")))
        .collect();
    dirs.sort();
    dirs
}

/// Says on standard error what the guardian did, one line per function.
pub fn report(removed: &[String]) {
    let mut err = std::io::stderr();
    for a in removed {
        let _ = writeln!(err, "nicsim: serve ended without stopping; {a} now reads all-ones and is removed");
    }
}
