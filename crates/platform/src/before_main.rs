//! Real devices are opened before `main`, so that no code of the program that drives them runs
//! unconfined or as root.
//!
//! Safe code running as root can write any byte of its own process through `/proc/self/mem`,
//! the trusted crates' state included, and start programs that stay root; a confinement applied
//! later cannot undo what was written. So `platform` opens a real device only here, in a
//! function the C runtime calls from `.init_array` before any code of the program runs (its
//! `main`, and every crate it links but the trusted ones, which the audit refuses
//! `link_section` in). It takes the PCI functions named on the command line
//! (`/proc/self/cmdline`: any argument, or part of one, that is the address of a function under
//! `/sys/bus/pci/devices`), opens each network controller among them that no kernel driver
//! holds, claims it and maps its BAR0, and then confines the process (`crate::confine`): the
//! keeper forked, every thread restricted, root given up. [`crate::PciFunction::open`] hands
//! out these functions, once each, and refuses every other function on sysfs.
//!
//! A process that names no such function is left as it was. What went wrong with a function
//! that was named is kept, and is what opening it later returns.
//!
//! # Soundness
//! The public items only read what happened before `main` ([`confined_before_main`]) or name
//! the environment variable of pretend real devices ([`AS_REAL_ENV`]), which can only make a
//! process stricter: a function taken as real is opened, and the process confined, as a real
//! device is.

use crate::error::PlatformError;
use crate::pci::PciFunction;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Names a directory of pretend PCI functions (nicsim's) that are opened before `main` as if
/// they were real, where named on the command line: how the tests run this path on a machine
/// without the card. It can only make a process stricter: the functions there are opened,
/// and the process confined, exactly as for a real device.
pub const AS_REAL_ENV: &str = "SAFENIC_DEVICES_AS_REAL";

/// The base class of network controllers in a function's class code [PCI spec, class 02h].
const NETWORK_CONTROLLER: u32 = 0x02;

/// A function named on the command line, by its directory's device and inode (what every path
/// to it resolves to), and what opening it gave, until it is taken.
struct Named {
    dir: (u64, u64),
    address: String,
    opened: Option<Result<PciFunction, PlatformError>>,
}

static NAMED: Mutex<Vec<Named>> = Mutex::new(Vec::new());

fn named() -> MutexGuard<'static, Vec<Named>> {
    NAMED.lock().unwrap_or_else(|e| e.into_inner())
}

// SAFETY: the C runtime calls every function in `.init_array` once, before `main`, on the
// only thread (glibc passes argc, argv and envp, which a function taking none ignores under
// the C calling convention); the function unwinds into nothing and uses only what glibc has
// set up by then (the allocator, system calls, the environment).
#[used]
#[link_section = ".init_array"]
static OPEN_BEFORE_MAIN: extern "C" fn() = open_before_main;

extern "C" fn open_before_main() {
    // Miri runs the trusted kernel's tests, which open no device, and isolates them from /proc.
    if cfg!(miri) {
        return;
    }
    // Nothing may unwind out of this function; a panic leaves the functions unopened.
    let opened = std::panic::catch_unwind(open_named_functions).unwrap_or_default();
    *named() = opened;
}

static CONFINED_BEFORE_MAIN: AtomicBool = AtomicBool::new(false);

/// Whether this process opened a device before `main` and was confined then, before any of its
/// own code ran.
pub fn confined_before_main() -> bool {
    CONFINED_BEFORE_MAIN.load(Ordering::SeqCst)
}

/// The function at `dir` if it was named on the command line: opened (once), or why not.
pub(crate) fn take(dir: &Path) -> Option<Result<PciFunction, PlatformError>> {
    std::hint::black_box(&OPEN_BEFORE_MAIN);
    let meta = std::fs::metadata(dir).ok()?;
    let mut named = named();
    let entry = named.iter_mut().find(|n| n.dir == (meta.dev(), meta.ino()))?;
    Some(entry.opened.take().unwrap_or_else(|| {
        Err(PlatformError::NotOpenedBeforeMain {
            address: entry.address.clone(),
            why: "it was opened once already in this process".to_string(),
        })
    }))
}

fn open_named_functions() -> Vec<Named> {
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let addresses = named_addresses(&cmdline);
    if addresses.is_empty() {
        return Vec::new();
    }
    let mut roots = vec![(PathBuf::from(crate::pci::SYSFS_PCI_DEVICES), false)];
    if let Some(dir) = std::env::var_os(AS_REAL_ENV) {
        roots.push((PathBuf::from(dir), true));
    }
    let mut named = Vec::new();
    for address in &addresses {
        for (root, pretend) in &roots {
            let dir = root.join(address);
            // Under `nicsim exec`, nicsim's functions are mounted at the sysfs path: not real.
            let real = *pretend || crate::fs::path_is_sysfs(&dir);
            let Ok(meta) = std::fs::metadata(&dir) else { continue };
            if real && meta.is_dir() {
                let opened = open_one(root, &dir, address, *pretend);
                named.push(Named { dir: (meta.dev(), meta.ino()), address: address.clone(), opened: Some(opened) });
            }
        }
    }
    if named.iter().any(|n| matches!(n.opened, Some(Ok(_)))) {
        match crate::confine::confine_process() {
            // Under valgrind the process is not confined (`crate::confine` says why).
            Ok(()) => CONFINED_BEFORE_MAIN.store(crate::confine::is_confined(), Ordering::SeqCst),
            Err(e) => {
                let why = e.to_string();
                for n in named.iter_mut().filter(|n| matches!(n.opened, Some(Ok(_)))) {
                    n.opened =
                        Some(Err(PlatformError::NotOpenedBeforeMain { address: n.address.clone(), why: why.clone() }));
                }
            }
        }
    }
    named
}

/// Opens one named function: a network controller that no kernel driver holds, decided from
/// the files anyone may read before its configuration space is opened.
fn open_one(root: &Path, dir: &Path, address: &str, pretend: bool) -> Result<PciFunction, PlatformError> {
    let class = std::fs::read_to_string(dir.join("class")).unwrap_or_default();
    let class = u32::from_str_radix(class.trim().trim_start_matches("0x"), 16).unwrap_or(0);
    if class >> 16 != NETWORK_CONTROLLER {
        return Err(PlatformError::NotOpenedBeforeMain {
            address: address.to_string(),
            why: format!("it is not a network controller (class {class:06x}): name a network port"),
        });
    }
    if let Ok(driver) = std::fs::read_link(dir.join("driver")) {
        let driver = driver.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        return Err(PlatformError::BoundToKernelDriver { address: address.to_string(), driver, root: root.into() });
    }
    let mut function = PciFunction::open_config(root, address)?;
    function.claim()?;
    function.map_bar0_before_main(pretend)?;
    Ok(function)
}

/// The normalised PCI addresses in a command line (arguments separated by NUL bytes): every
/// argument, and every part of one between characters that no address holds (`=`, `,`, `/`…).
fn named_addresses(cmdline: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let pieces = cmdline.split(|&b| !(b.is_ascii_hexdigit() || b == b':' || b == b'.'));
    for piece in pieces.filter(|p| p.contains(&b':') && p.contains(&b'.')) {
        let Ok(text) = std::str::from_utf8(piece) else { continue };
        if let Ok(address) = crate::pci::normalize_address(text) {
            if !out.contains(&address) {
                out.push(address);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_found_wherever_an_argument_holds_them() {
        let cmdline = b"safenic\0fwd\0restricted\x0003:00.0\0--ports=0000:03:00.1,5E:00.0\0/x/0000:07:00.0/y\0\
                        03:00.0\0v1.2:3\0a:b\x0012:34:56.7\0";
        assert_eq!(named_addresses(cmdline), ["0000:03:00.0", "0000:03:00.1", "0000:5e:00.0", "0000:07:00.0"]);
        assert!(named_addresses(b"cargo\0test\0--test-threads=1\0").is_empty());
    }
}
