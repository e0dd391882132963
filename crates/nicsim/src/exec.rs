//! `nicsim exec`: runs a command in a private mount namespace where nicsim's functions are the
//! machine's PCI devices, so an unmodified driver finds them where Linux puts them.
//!
//! Always: `<root>/devices` over `/sys/bus/pci/devices`, `<root>/drivers` over
//! `/sys/bus/pci/drivers`, and a hugetlbfs on `/mnt/huge` (where ixy and its ports look).
//! With `uio`: every function is bound to `uio_pci_generic` ([`sysfs::present_as_uio`]),
//! `/sys/class/uio` and `/dev/uioN` are added, and DPDK's EAL claims the functions.

use crate::sysfs;
use std::path::{Path, PathBuf};

/// Where ixy and its ports expect a hugetlbfs mount.
const IXY_HUGETLBFS: &str = "/mnt/huge";

/// Sets up this process's view of the machine (see the module); call it while the process
/// has a single thread, then run the command.
pub fn enter(root: &Path, uio: bool) -> Result<(), String> {
    let devices = root.join("devices");
    if !devices.is_dir() {
        return Err(format!(
            "no nicsim devices under {}: start `nicsim serve` first (or pass --root)",
            devices.display()
        ));
    }
    let ports: Vec<usize> = (0..).take_while(|&n| devices.join(sysfs::port_address(n)).is_dir()).collect();
    if uio {
        for &n in &ports {
            sysfs::present_as_uio(root, n).map_err(|e| format!("binding port {n} to uio_pci_generic: {e}"))?;
        }
    }
    platform::ns::enter_private_mount_namespace().map_err(|e| e.to_string())?;
    platform::ns::bind_mount(&devices, Path::new("/sys/bus/pci/devices")).map_err(|e| e.to_string())?;
    let drivers = root.join("drivers");
    if drivers.is_dir() {
        platform::ns::bind_mount(&drivers, Path::new("/sys/bus/pci/drivers")).map_err(|e| e.to_string())?;
    }
    if uio {
        let class = vec![("uio".to_string(), root.join("class").join("uio"))];
        platform::ns::extend_directory(Path::new("/sys/class"), &class).map_err(|e| e.to_string())?;
        let dev: Vec<(String, PathBuf)> =
            ports.iter().map(|n| (format!("uio{n}"), root.join("dev").join(format!("uio{n}")))).collect();
        platform::ns::extend_directory(Path::new("/dev"), &dev).map_err(|e| e.to_string())?;
    }
    let huge = Path::new(IXY_HUGETLBFS);
    if !platform::fs::hugetlbfs_mounts().iter().any(|m| m == huge) {
        std::fs::create_dir_all(huge).map_err(|e| format!("cannot create {}: {e}", huge.display()))?;
        platform::ns::mount_hugetlbfs(huge).map_err(|e| e.to_string())?;
    }
    Ok(())
}
