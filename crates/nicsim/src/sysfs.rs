//! The PCI face: one sysfs-like directory per port, as Linux presents a PCI function.
//!
//! ```text
//! <root>/devices/0000:5e:00.0/{vendor,device,class,config,resource,resource0,numa_node,...}
//! <root>/devices/0000:5e:00.0/driver -> ../../drivers/ixgbe     (only with --bound)
//! <root>/drivers/ixgbe/{bind,unbind}
//! ```
//! `nicsim exec` bind-mounts `<root>/devices` over `/sys/bus/pci/devices` and `<root>/drivers`
//! over `/sys/bus/pci/drivers`, so the relative `driver` link resolves the same way there.
//!
//! [`present_as_uio`] binds a function to `uio_pci_generic` as Linux shows it:
//! ```text
//! <root>/devices/0000:5e:00.0/driver -> ../../drivers/uio_pci_generic
//! <root>/devices/0000:5e:00.0/uio/uio0/{name,version,dev,device -> ../../../0000:5e:00.0}
//! <root>/class/uio/uio0 -> /sys/bus/pci/devices/0000:5e:00.0/uio/uio0   (/sys/class/uio)
//! <root>/dev/uio0                                                      (/dev/uio0, a FIFO)
//! ```

use crate::pciconfig::{CONFIG_LEN, DEVICE_82599ES_SFP, VENDOR_INTEL};
use crate::regs::BAR0_LEN;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directories of `<root>` that nicsim creates and removes.
pub const TREES: [&str; 7] = ["devices", "drivers", "class", "dev", "iommu_groups", "vfio", "module"];
/// Where the I/O BARs of virtio functions are mounted ([`crate::iofs`]), under the root.
pub const IO_BARS: &str = "io-bars";
/// The fake kernel driver name functions are bound to with `--bound`.
pub const FAKE_DRIVER: &str = "ixgbe";
/// The kernel driver DPDK's EAL claims functions from [DPDK: Linux drivers guide].
pub const UIO_DRIVER: &str = "uio_pci_generic";
/// The kernel driver a function is bound to for VFIO [Linux: Documentation/driver-api/vfio.rst].
pub const VFIO_DRIVER: &str = "vfio-pci";
/// The character-device major shown in `uioN/dev` (the kernel picks one at run time; 243 is
/// what it commonly picks).
const UIO_MAJOR: u32 = 243;
/// BAR4 (MSI-X table and PBA) is 16 KiB [DS 9.3.7.1.4].
pub const BAR4_LEN: usize = 0x4000;

/// PCI address of port `n`: bus 0x5e, functions 0–7 of consecutive devices (a dual-port card
/// is functions 0 and 1 of one device).
pub fn port_address(n: usize) -> String {
    format!("0000:5e:{:02x}.{}", n / 8, n % 8)
}

/// Physical address shown for port `n`'s BAR0 (never used for access: drivers map resource0).
pub fn bar0_phys(n: usize) -> u64 {
    0xF800_0000 + n as u64 * 0x0010_0000
}

/// The files of one function.
pub struct FunctionFiles {
    pub address: String,
    pub dir: PathBuf,
    pub config: File,
    pub resource0: File,
    pub resource4: File,
}

fn write_text(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(text.as_bytes())
}

fn sized_file(path: &Path, len: usize) -> std::io::Result<File> {
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
    f.set_len(len as u64)?;
    Ok(f)
}

/// The identity files of a function: `[vendor, device, subsystem vendor, subsystem device]`
/// and the revision.
fn identity(dir: &Path, ids: [u16; 4], revision: u8) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    write_text(&dir.join("vendor"), &format!("{:#06x}\n", ids[0]))?;
    write_text(&dir.join("device"), &format!("{:#06x}\n", ids[1]))?;
    write_text(&dir.join("class"), "0x020000\n")?;
    write_text(&dir.join("revision"), &format!("{revision:#04x}\n"))?;
    write_text(&dir.join("subsystem_vendor"), &format!("{:#06x}\n", ids[2]))?;
    write_text(&dir.join("subsystem_device"), &format!("{:#06x}\n", ids[3]))?;
    write_text(&dir.join("numa_node"), "0\n")
}

/// The I/O address of port `n`'s legacy virtio registers (BAR0 of a virtio function): above
/// 0xFFFF, outside x86's port space, so that a driver that would use `in`/`out` instructions
/// on the address instead of the `resource0` file (DPDK's, given a port address it can reach)
/// never touches a real port of the machine; it must use the file, or fail.
pub fn virtio_io_base(n: usize) -> u32 {
    0x0001_C000 + n as u32 * crate::virtio::legacy::BAR_LEN as u32
}

/// The physical address shown for port `n`'s BAR4 (virtio 1.x structures) of a virtio function.
pub fn virtio_bar4_phys(n: usize) -> u64 {
    0xFE00_0000 + n as u64 * crate::virtio::modern::BAR_LEN
}

/// The fake kernel driver virtio functions are bound to with `--bound`.
pub const FAKE_VIRTIO_DRIVER: &str = "virtio-pci";

/// Creates the directory of port `n` as a transitional virtio-net function: its `resource0`
/// and `resource4` are links to `bars`' files of its legacy registers and of its virtio 1.x
/// structures (see [`crate::iofs`]). Returns the address, the directory and the `config` file.
pub fn create_virtio_function(
    root: &Path,
    n: usize,
    bound: bool,
    bars: [&Path; 2],
) -> std::io::Result<(String, PathBuf, File)> {
    use crate::virtio::{DEVICE_NET_TRANSITIONAL, SUBSYSTEM_NET, VENDOR_VIRTIO};
    let address = port_address(n);
    let dir = root.join("devices").join(&address);
    identity(&dir, [VENDOR_VIRTIO, DEVICE_NET_TRANSITIONAL, VENDOR_VIRTIO, SUBSYSTEM_NET], 0)?;
    write_text(&dir.join("irq"), "0\n")?;
    write_text(&dir.join("enable"), "1\n")?;
    let io = u64::from(virtio_io_base(n));
    let mut resource =
        format!("{:#018x} {:#018x} {:#018x}\n", io, io + crate::virtio::legacy::BAR_LEN - 1, 0x0004_0101u64);
    let bar4 = virtio_bar4_phys(n);
    for bar in 1..13 {
        resource += &match bar {
            // 64-bit prefetchable memory, as Linux shows QEMU's virtio BAR4.
            4 => {
                format!("{:#018x} {:#018x} {:#018x}\n", bar4, bar4 + crate::virtio::modern::BAR_LEN - 1, 0x0014_220Cu64)
            }
            _ => format!("{:#018x} {:#018x} {:#018x}\n", 0, 0, 0),
        };
    }
    write_text(&dir.join("resource"), &resource)?;
    let config = sized_file(&dir.join("config"), CONFIG_LEN)?;
    relink(&bars[0].to_string_lossy(), &dir.join("resource0"))?;
    relink(&bars[1].to_string_lossy(), &dir.join("resource4"))?;
    create_driver(root, FAKE_VIRTIO_DRIVER)?;
    if bound {
        bind(root, &address, FAKE_VIRTIO_DRIVER)?;
    }
    Ok((address, dir, config))
}

/// Creates the directory of port `n` under `root/devices`.
pub fn create_function(root: &Path, n: usize, bound: bool) -> std::io::Result<FunctionFiles> {
    let address = port_address(n);
    let dir = root.join("devices").join(&address);
    identity(&dir, [VENDOR_INTEL, DEVICE_82599ES_SFP, 0x8086, 0x000c], 1)?;
    write_text(&dir.join("irq"), "0\n")?;
    write_text(&dir.join("enable"), "1\n")?;
    write_text(&dir.join("sriov_numvfs"), "0\n")?;
    write_text(&dir.join("max_vfs"), "0\n")?;
    // `start end flags` per resource: BAR0..5, ROM, then the SR-IOV BARs [Linux resource_show].
    let bar0 = bar0_phys(n);
    let mut resource = String::new();
    resource += &format!("{:#018x} {:#018x} {:#018x}\n", bar0, bar0 + BAR0_LEN as u64 - 1, 0x0014_0204u64);
    resource += &format!("{:#018x} {:#018x} {:#018x}\n", 0, 0, 0);
    resource +=
        &format!("{:#018x} {:#018x} {:#018x}\n", 0xE000 + n as u64 * 0x20, 0xE01F + n as u64 * 0x20, 0x0004_0101u64);
    resource += &format!("{:#018x} {:#018x} {:#018x}\n", 0, 0, 0);
    resource += &format!("{:#018x} {:#018x} {:#018x}\n", bar0 + 0x80000, bar0 + 0x83FFF, 0x0014_0204u64);
    for _ in 5..13 {
        resource += &format!("{:#018x} {:#018x} {:#018x}\n", 0, 0, 0);
    }
    write_text(&dir.join("resource"), &resource)?;
    let config = sized_file(&dir.join("config"), CONFIG_LEN)?;
    let resource0 = sized_file(&dir.join("resource0"), BAR0_LEN)?;
    // Every memory BAR with an address has its file: DPDK maps them all.
    let resource4 = sized_file(&dir.join("resource4"), BAR4_LEN)?;
    create_driver(root, FAKE_DRIVER)?;
    if bound {
        bind(root, &address, FAKE_DRIVER)?;
    }
    Ok(FunctionFiles { address, dir, config, resource0, resource4 })
}

fn create_driver(root: &Path, name: &str) -> std::io::Result<()> {
    let drivers = root.join("drivers").join(name);
    std::fs::create_dir_all(&drivers)?;
    for f in ["bind", "unbind", "new_id", "remove_id"] {
        if !drivers.join(f).exists() {
            write_text(&drivers.join(f), "")?;
        }
    }
    Ok(())
}

fn bind(root: &Path, address: &str, driver: &str) -> std::io::Result<()> {
    let link = root.join("devices").join(address).join("driver");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(format!("../../drivers/{driver}"), &link)
}

/// Binds port `n` to `uio_pci_generic` (see the module's diagram), as `dpdk-devbind.py -b
/// uio_pci_generic` does on a real machine; stays bound until nicsim stops. Idempotent.
pub fn present_as_uio(root: &Path, n: usize) -> std::io::Result<()> {
    let address = port_address(n);
    create_driver(root, UIO_DRIVER)?;
    bind(root, &address, UIO_DRIVER)?;
    let uio = root.join("devices").join(&address).join("uio").join(format!("uio{n}"));
    std::fs::create_dir_all(&uio)?;
    write_text(&uio.join("name"), &format!("{UIO_DRIVER}\n"))?;
    write_text(&uio.join("version"), "0.01.0\n")?;
    write_text(&uio.join("dev"), &format!("{UIO_MAJOR}:{n}\n"))?;
    relink(&format!("../../../{address}"), &uio.join("device"))?;
    let class = root.join("class").join("uio");
    std::fs::create_dir_all(&class)?;
    relink(&format!("/sys/bus/pci/devices/{address}/uio/uio{n}"), &class.join(format!("uio{n}")))?;
    let dev = root.join("dev");
    std::fs::create_dir_all(&dev)?;
    platform::fs::make_fifo(&dev.join(format!("uio{n}")))
}

/// Binds port `n` to `vfio-pci` in IOMMU group `n` (one function per group, as behind ACS),
/// as `dpdk-devbind.py -b vfio-pci` does, and makes the group's node, `<root>/vfio/<n>`
/// (`/dev/vfio/<n>` under `nicsim exec --vfio`), and the function's files `owner`'s, as an
/// administrator gives a group to the user who runs the driver. Returns the driver the
/// function was bound to before, for [`unbind_vfio`].
///
/// ```text
/// <root>/devices/0000:5e:00.0/driver -> ../../drivers/vfio-pci
/// <root>/devices/0000:5e:00.0/iommu_group -> ../../../../kernel/iommu_groups/0
/// <root>/iommu_groups/0/devices/0000:5e:00.0 -> /sys/bus/pci/devices/0000:5e:00.0
/// <root>/vfio/{vfio,0}                                 (/dev/vfio; ioctls served by nicsim exec)
/// <root>/module/vfio/parameters/enable_unsafe_noiommu_mode = N     (/sys/module/vfio)
/// ```
pub fn present_as_vfio(root: &Path, n: usize, owner: Option<(u32, u32)>) -> std::io::Result<Option<String>> {
    use std::os::unix::fs::PermissionsExt;
    let address = port_address(n);
    let dir = root.join("devices").join(&address);
    let before = std::fs::read_link(dir.join("driver"))
        .ok()
        .and_then(|t| Some(t.file_name()?.to_string_lossy().into_owned()))
        .filter(|d| d != VFIO_DRIVER);
    create_driver(root, VFIO_DRIVER)?;
    bind(root, &address, VFIO_DRIVER)?;
    relink(&format!("../../../../kernel/iommu_groups/{n}"), &dir.join("iommu_group"))?;
    let group = root.join("iommu_groups").join(n.to_string());
    std::fs::create_dir_all(group.join("devices"))?;
    write_text(&group.join("type"), "DMA\n")?;
    relink(&format!("/sys/bus/pci/devices/{address}"), &group.join("devices").join(&address))?;
    let vfio = root.join("vfio");
    std::fs::create_dir_all(&vfio)?;
    let container = vfio.join("vfio");
    if !container.exists() {
        write_text(&container, "")?;
        std::fs::set_permissions(&container, std::fs::Permissions::from_mode(0o666))?;
    }
    let node = vfio.join(n.to_string());
    write_text(&node, "")?;
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o600))?;
    let params = root.join("module").join("vfio").join("parameters");
    std::fs::create_dir_all(&params)?;
    write_text(&params.join("enable_unsafe_noiommu_mode"), "N\n")?;
    for module in ["vfio_pci", "vfio_iommu_type1"] {
        std::fs::create_dir_all(root.join("module").join(module))?;
    }
    if let Some((uid, gid)) = owner {
        // The device descriptor nicsim exec hands out is the function's BAR file: the user
        // maps it as the kernel's vfio-pci would let them.
        // A virtio function's BAR files are links into nicsim's FUSE file system, whose files
        // any user may open: nothing to give there.
        for f in [node, dir.join("resource0"), dir.join("resource4")] {
            if std::fs::symlink_metadata(&f).is_ok_and(|m| m.is_file()) {
                std::os::unix::fs::chown(&f, Some(uid), Some(gid))?;
            }
        }
    }
    Ok(before)
}

/// Undoes [`present_as_vfio`] for port `n`: bound to `before` again (or to nothing), its
/// group and node gone, its files root's again.
pub fn unbind_vfio(root: &Path, n: usize, before: Option<&str>) {
    let address = port_address(n);
    let dir = root.join("devices").join(&address);
    let _ = std::fs::remove_file(dir.join("iommu_group"));
    let _ = std::fs::remove_file(dir.join("driver"));
    if let Some(d) = before {
        let _ = bind(root, &address, d);
    }
    let _ = std::fs::remove_dir_all(root.join("iommu_groups").join(n.to_string()));
    let _ = std::fs::remove_file(root.join("vfio").join(n.to_string()));
    for f in [dir.join("resource0"), dir.join("resource4")] {
        if std::fs::symlink_metadata(&f).is_ok_and(|m| m.is_file()) {
            let _ = std::os::unix::fs::chown(&f, Some(0), Some(0));
        }
    }
}

fn relink(target: &str, link: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link)
}

/// Emulates the kernel's `drivers/<name>/unbind`: if something wrote PCI addresses into it,
/// the named functions lose their `driver` link. Returns the addresses unbound.
pub fn process_unbind(root: &Path) -> Vec<String> {
    let mut done = Vec::new();
    for driver in [FAKE_DRIVER, FAKE_VIRTIO_DRIVER] {
        let unbind = root.join("drivers").join(driver).join("unbind");
        let Ok(text) = std::fs::read_to_string(&unbind) else { continue };
        if text.trim().is_empty() {
            continue;
        }
        let _ = std::fs::write(&unbind, "");
        for addr in text.split_whitespace() {
            let link = root.join("devices").join(addr).join("driver");
            if std::fs::symlink_metadata(&link).is_ok() && std::fs::remove_file(&link).is_ok() {
                done.push(addr.to_string());
            }
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_directory_looks_like_sysfs() {
        let root = std::env::temp_dir().join(format!("nicsim-sysfs-test-{}", std::process::id()));
        let f = create_function(&root, 1, true).unwrap();
        assert_eq!(f.address, "0000:5e:00.1");
        assert_eq!(std::fs::read_to_string(f.dir.join("device")).unwrap(), "0x10fb\n");
        assert_eq!(std::fs::read_to_string(f.dir.join("vendor")).unwrap(), "0x8086\n");
        assert_eq!(f.resource0.metadata().unwrap().len(), BAR0_LEN as u64);
        let res = std::fs::read_to_string(f.dir.join("resource")).unwrap();
        let first: Vec<u64> =
            res.lines().next().unwrap().split(' ').map(|x| u64::from_str_radix(&x[2..], 16).unwrap()).collect();
        assert_eq!(first[1] - first[0] + 1, BAR0_LEN as u64);
        assert_eq!(std::fs::read_link(f.dir.join("driver")).unwrap(), Path::new("../../drivers/ixgbe"));
        assert!(f.dir.join("driver/unbind").exists(), "the relative link resolves");
        std::fs::write(f.dir.join("driver/unbind"), "0000:5e:00.1").unwrap();
        assert_eq!(process_unbind(&root), vec!["0000:5e:00.1".to_string()]);
        assert!(std::fs::symlink_metadata(f.dir.join("driver")).is_err());
        assert_eq!(f.resource4.metadata().unwrap().len(), BAR4_LEN as u64, "BAR4 has its file, as DPDK maps it");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_function_bound_to_uio_looks_as_linux_shows_it() {
        use std::os::unix::fs::FileTypeExt;
        let root = std::env::temp_dir().join(format!("nicsim-uio-test-{}", std::process::id()));
        let f = create_function(&root, 1, false).unwrap();
        present_as_uio(&root, 1).unwrap();
        present_as_uio(&root, 1).expect("binding again changes nothing");
        assert_eq!(std::fs::read_link(f.dir.join("driver")).unwrap(), Path::new("../../drivers/uio_pci_generic"));
        let uio = f.dir.join("uio/uio1");
        assert_eq!(std::fs::read_to_string(uio.join("name")).unwrap(), "uio_pci_generic\n");
        assert_eq!(std::fs::read_to_string(uio.join("dev")).unwrap(), "243:1\n");
        assert_eq!(std::fs::read_to_string(uio.join("device/vendor")).unwrap(), "0x8086\n", "device -> the function");
        assert_eq!(
            std::fs::read_link(root.join("class/uio/uio1")).unwrap(),
            Path::new("/sys/bus/pci/devices/0000:5e:00.1/uio/uio1")
        );
        assert!(std::fs::metadata(root.join("dev/uio1")).unwrap().file_type().is_fifo(), "/dev/uio1 can be polled");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_virtio_function_shows_an_io_bar_out_of_port_space_and_a_memory_bar4() {
        let root = std::env::temp_dir().join(format!("nicsim-virtio-sysfs-test-{}", std::process::id()));
        let (bar0, bar4) = (root.join("bar0"), root.join("bar4"));
        let (address, dir, _config) = create_virtio_function(&root, 1, false, [&bar0, &bar4]).unwrap();
        assert_eq!(address, "0000:5e:00.1");
        assert_eq!(std::fs::read_to_string(dir.join("device")).unwrap(), "0x1000\n");
        let lines: Vec<Vec<u64>> = std::fs::read_to_string(dir.join("resource"))
            .unwrap()
            .lines()
            .map(|l| l.split(' ').map(|x| u64::from_str_radix(&x[2..], 16).unwrap()).collect())
            .collect();
        assert_eq!(lines.len(), 13);
        assert_eq!(lines[0][2] & 0x100, 0x100, "BAR0 is I/O");
        assert!(lines[0][0] > 0xFFFF, "no real x86 port: {:#x}", lines[0][0]);
        assert_eq!(lines[0][1] - lines[0][0] + 1, crate::virtio::legacy::BAR_LEN);
        assert_eq!(lines[4][2] & 0x200, 0x200, "BAR4 is memory");
        assert_eq!(lines[4][1] - lines[4][0] + 1, crate::virtio::modern::BAR_LEN);
        assert_eq!(std::fs::read_link(dir.join("resource0")).unwrap(), bar0);
        assert_eq!(std::fs::read_link(dir.join("resource4")).unwrap(), bar4);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
