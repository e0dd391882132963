//! `nicsim exec`: runs a command in a private mount namespace where nicsim's functions are the
//! machine's PCI devices, so an unmodified driver finds them where Linux puts them.
//!
//! Always: `<root>/devices` over `/sys/bus/pci/devices`, `<root>/drivers` over
//! `/sys/bus/pci/drivers`, and a hugetlbfs on `/mnt/huge` (where ixy and its ports look).
//! With `uio`: every function is bound to `uio_pci_generic` ([`sysfs::present_as_uio`]),
//! `/sys/class/uio` and `/dev/uioN` are added, and DPDK's EAL claims the functions.
//! With `vfio`: every function is bound to `vfio-pci` in an IOMMU group of its own, and the
//! command's VFIO calls are answered by [`vfio`], its DMA translated by nicsim's IOMMU.

/// Whether DPDK's ixgbe driver gave up on a port because nicsim answered later than the card
/// would, which only happens while nicsim's engine is off its core (docs/dpdk.md): CTRL.RST
/// still set after its 10 µs poll, at probe (`ixgbe_init_hw`: IXGBE_ERR_RESET_FAILED, -15) or at
/// port start; or an SFP+ identification misread because the bit-banged I2C bus was not
/// answered within the microseconds a clock phase lasts (IXGBE_ERR_SFP_NOT_SUPPORTED, -19).
/// Under `nicsim exec` those registers are served access by access ([`run_trapping_bars`]),
/// so this names a failure that should no longer happen.
pub fn dpdk_missed_a_deadline(log: &str) -> bool {
    [
        "Hardware Initialization Failure: -15",
        "Hardware Initialization Failure: -19",
        "rte_eth_dev_start",
        "Fail to start port",
    ]
    .iter()
    .any(|m| log.contains(m))
}
mod mmio_trap;
pub mod vfio;
pub mod x86;

use crate::sysfs;
pub use mmio_trap::{run_trapping_bars, Served, TrappedBar};
use std::path::{Path, PathBuf};

/// Where ixy and its ports expect a hugetlbfs mount.
const IXY_HUGETLBFS: &str = "/mnt/huge";

/// Sets up this process's view of the machine (see the module); call it while the process
/// has a single thread, then run the command. With `vfio`, the functions were bound to
/// vfio-pci ([`sysfs::present_as_vfio`]): `/dev/vfio`, `/sys/kernel/iommu_groups` and
/// `/sys/module/vfio*` are added.
pub fn enter(root: &Path, uio: bool, vfio: bool) -> Result<(), String> {
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
    if vfio {
        let fail = |e: platform::PlatformError| e.to_string();
        platform::ns::bind_mount(&root.join("iommu_groups"), Path::new("/sys/kernel/iommu_groups")).map_err(fail)?;
        platform::ns::extend_directory(Path::new("/dev"), &[("vfio".to_string(), root.join("vfio"))]).map_err(fail)?;
        let modules: Vec<(String, PathBuf)> = ["vfio", "vfio_pci", "vfio_iommu_type1"]
            .iter()
            .map(|m| (m.to_string(), root.join("module").join(m)))
            .collect();
        platform::ns::extend_directory(Path::new("/sys/module"), &modules).map_err(fail)?;
    }
    let huge = Path::new(IXY_HUGETLBFS);
    if !platform::fs::hugetlbfs_mounts().iter().any(|m| m == huge) {
        std::fs::create_dir_all(huge).map_err(|e| format!("cannot create {}: {e}", huge.display()))?;
        platform::ns::mount_hugetlbfs(huge).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The BARs under `root` that a driver may map but that must be served access by access
/// ([`run_trapping_bars`]): the modern interface's BAR4 (`resource4`) of every virtio function,
/// and the first page of every 82599's BAR0 (`resource0`).
pub fn trapped_bars(root: &Path) -> Vec<TrappedBar> {
    let virtio = format!("{:#06x}", crate::virtio::VENDOR_VIRTIO);
    (0..)
        .map(|n| (n, root.join("devices").join(sysfs::port_address(n))))
        .take_while(|(_, dir)| dir.is_dir())
        .map(|(port, dir)| match std::fs::read_to_string(dir.join("vendor")) {
            Ok(v) if v.trim() == virtio => TrappedBar { path: dir.join("resource4"), served: Served::Whole },
            _ => TrappedBar { path: dir.join("resource0"), served: Served::FirstPage { port } },
        })
        .collect()
}
