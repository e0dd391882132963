//! The PCI face: one sysfs-like directory per port, as Linux presents a PCI function.
//!
//! ```text
//! <root>/devices/0000:5e:00.0/{vendor,device,class,config,resource,resource0,numa_node,...}
//! <root>/devices/0000:5e:00.0/driver -> ../../drivers/ixgbe     (only with --bound)
//! <root>/drivers/ixgbe/{bind,unbind}
//! ```
//! `nicsim exec` bind-mounts `<root>/devices` over `/sys/bus/pci/devices` and `<root>/drivers`
//! over `/sys/bus/pci/drivers`, so the relative `driver` link resolves the same way there.

use crate::pciconfig::{CONFIG_LEN, DEVICE_82599ES_SFP, VENDOR_INTEL};
use crate::regs::BAR0_LEN;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The fake kernel driver name functions are bound to with `--bound`.
pub const FAKE_DRIVER: &str = "ixgbe";

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

/// Creates the directory of port `n` under `root/devices`.
pub fn create_function(root: &Path, n: usize, bound: bool) -> std::io::Result<FunctionFiles> {
    let address = port_address(n);
    let dir = root.join("devices").join(&address);
    std::fs::create_dir_all(&dir)?;
    write_text(&dir.join("vendor"), &format!("{VENDOR_INTEL:#06x}\n"))?;
    write_text(&dir.join("device"), &format!("{DEVICE_82599ES_SFP:#06x}\n"))?;
    write_text(&dir.join("class"), "0x020000\n")?;
    write_text(&dir.join("revision"), "0x01\n")?;
    write_text(&dir.join("subsystem_vendor"), "0x8086\n")?;
    write_text(&dir.join("subsystem_device"), "0x000c\n")?;
    write_text(&dir.join("numa_node"), "0\n")?;
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
    let drivers = root.join("drivers").join(FAKE_DRIVER);
    std::fs::create_dir_all(&drivers)?;
    for f in ["bind", "unbind", "new_id", "remove_id"] {
        if !drivers.join(f).exists() {
            write_text(&drivers.join(f), "")?;
        }
    }
    if bound {
        let link = dir.join("driver");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(format!("../../drivers/{FAKE_DRIVER}"), &link)?;
    }
    Ok(FunctionFiles { address, dir, config, resource0 })
}

/// Emulates the kernel's `drivers/<name>/unbind`: if something wrote PCI addresses into it,
/// the named functions lose their `driver` link. Returns the addresses unbound.
pub fn process_unbind(root: &Path) -> Vec<String> {
    let unbind = root.join("drivers").join(FAKE_DRIVER).join("unbind");
    let Ok(text) = std::fs::read_to_string(&unbind) else { return Vec::new() };
    if text.trim().is_empty() {
        return Vec::new();
    }
    let _ = std::fs::write(&unbind, "");
    let mut done = Vec::new();
    for addr in text.split_whitespace() {
        let link = root.join("devices").join(addr).join("driver");
        if std::fs::symlink_metadata(&link).is_ok() && std::fs::remove_file(&link).is_ok() {
            done.push(addr.to_string());
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
        std::fs::remove_dir_all(&root).unwrap();
    }
}
