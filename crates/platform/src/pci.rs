//! A PCI function through its sysfs directory: the path for machines without an IOMMU, on which
//! the device must be trusted with all of memory. A function bound to vfio-pci is opened through
//! VFIO instead (`crate::vfio`), behind the IOMMU.
//!
//! The directory holds `vendor`, `device`, `config` (configuration space, read and written
//! with pread/pwrite) and `resource0` (BAR0, mapped shared). The sysfs root is a parameter,
//! so the same code opens a real function under `/sys/bus/pci/devices` or one of nicsim's.
//!
//! # Soundness
//! A [`PciFunction`] reads configuration space and sets memory decoding and bus mastering, and
//! hands out no register file: `map_bar0` is crate-private (`crate::i82599` maps an 82599's
//! BAR0 and polices every write), and [`IoBar`] opens only a function that is not on sysfs, a
//! simulated one, whose DMA its simulator resolves only into its owner's hugepage memory. A real
//! device is opened only before `main`, for the functions named on the command line, and a
//! process that did so opens no simulated device, whose DMA could reach the real one's rings.

use crate::error::PlatformError;
use crate::mem::MappedRegion;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Default sysfs root of PCI functions.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// PCI COMMAND register (config offset 0x04) bits [PCI spec; 82599 DS 9.3.3.3].
pub const COMMAND: u64 = 0x04;
pub const COMMAND_MEMORY_SPACE: u16 = 1 << 1;
pub const COMMAND_BUS_MASTER: u16 = 1 << 2;

/// Normalises `BB:DD.F` or `DDDD:BB:DD.F` to `DDDD:BB:DD.F` (lower-case hex).
pub fn normalize_address(address: &str) -> Result<String, PlatformError> {
    let bad = || PlatformError::BadAddress { address: address.to_string() };
    let parts: Vec<&str> = address.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [b, df] => ("0000", *b, *df),
        [d, b, df] => (*d, *b, *df),
        _ => return Err(bad()),
    };
    let (dev, func) = devfn.split_once('.').ok_or_else(bad)?;
    let hex = |s: &str, width: usize, max: u32| -> Result<u32, PlatformError> {
        let v = u32::from_str_radix(s, 16).map_err(|_| bad())?;
        (s.len() <= width && !s.is_empty() && v <= max).then_some(v).ok_or_else(bad)
    };
    let (d, b, v, f) = (hex(domain, 4, 0xFFFF)?, hex(bus, 2, 0xFF)?, hex(dev, 2, 0x1F)?, hex(func, 1, 7)?);
    Ok(format!("{d:04x}:{b:02x}:{v:02x}.{f:x}"))
}

/// An open PCI function.
#[derive(Debug)]
pub struct PciFunction {
    /// BAR0 as mapped before `main` (`crate::before_main`), until [`Self::map_bar0`] takes it;
    /// first, so that it is unmapped before the claim goes.
    bar: Mutex<Option<MappedRegion>>,
    opened_before_main: bool,
    dir: PathBuf,
    address: String,
    root: PathBuf,
    config: File,
    /// Opened through VFIO: configuration space and BAR0 through the device descriptor.
    vfio: Option<crate::vfio::Device>,
}

impl PciFunction {
    /// Opens the function `address` under `root` (e.g. [`SYSFS_PCI_DEVICES`]). A real device
    /// (one on sysfs) is open to a process only if it named the device on its command line:
    /// it was opened then, before `main` (`crate::before_main`), and is handed out here once;
    /// a process that did so opens no simulated device.
    pub fn open(root: &Path, address: &str) -> Result<Self, PlatformError> {
        let address = normalize_address(address)?;
        let dir = root.join(&address);
        if !dir.is_dir() {
            return Err(PlatformError::DeviceNotFound { address, root: root.to_path_buf() });
        }
        if crate::vfio::is_bound(&dir) {
            return Self::open_vfio(root, address, dir);
        }
        if crate::vfio::active() {
            return Err(PlatformError::NotOpenedBeforeMain {
                address,
                why: "this process drives functions through VFIO, where a device is given I/O virtual addresses: \
                      bind this function to vfio-pci too, or drive it from another process"
                    .to_string(),
            });
        }
        if let Some(opened) = crate::before_main::take(&dir) {
            return opened;
        }
        if crate::fs::path_is_sysfs(&dir) {
            return Err(not_named(&address));
        }
        // nicsim resolves a simulated device's DMA in its owner's hugepages: in a process with
        // a real device, those hold the real device's rings.
        if real_device_opened() {
            return Err(PlatformError::NotOpenedBeforeMain {
                address,
                why: "this process drives a real device, and a simulated one could write that device's rings: \
                      drive the simulated device from another process"
                    .to_string(),
            });
        }
        let mut simulated = simulated_devices();
        if simulated.refused {
            return Err(PlatformError::NotOpenedBeforeMain {
                address,
                why: "this process runs DPDK, whose hugepage memory holds pointers a simulated device's DMA could \
                      overwrite: drive the simulated device from another process"
                    .to_string(),
            });
        }
        let function = Self::open_config(root, &address)?;
        // A directory of another kind may still lead to a real device's files.
        if crate::fs::is_sysfs(&function.config).unwrap_or(true) {
            return Err(not_named(&address));
        }
        simulated.opened = true;
        Ok(function)
    }

    /// Opens a function bound to vfio-pci through its IOMMU group (`crate::vfio`). A device the
    /// kernel's VFIO gives counts as real (no simulated one opens after it); one a simulator
    /// serves as simulated.
    fn open_vfio(root: &Path, address: String, dir: PathBuf) -> Result<Self, PlatformError> {
        if crate::dma::physical_regions_made() {
            return Err(PlatformError::Vfio(format!(
                "DMA memory with physical addresses was allocated before {address} was opened through VFIO, \
                 and its IOMMU could not translate them: open every VFIO function before allocating DMA memory"
            )));
        }
        if real_sysfs_device_opened() {
            return Err(PlatformError::NotOpenedBeforeMain {
                address,
                why: "this process drives a real device through sysfs: drive VFIO functions from another process"
                    .to_string(),
            });
        }
        let device = crate::vfio::open(&dir, &address)?;
        if !device.real && real_device_opened() {
            return Err(PlatformError::NotOpenedBeforeMain {
                address,
                why: "this process drives a real device: drive a simulated one from another process".to_string(),
            });
        }
        if device.real {
            REAL_VFIO_DEVICE.store(true, std::sync::atomic::Ordering::SeqCst);
        } else {
            simulated_devices().opened = true;
        }
        let config = device.descriptor().map_err(|e| PlatformError::io("duplicating a VFIO descriptor", e))?;
        Ok(Self::claimed(root, address, dir, config, Some(device)))
    }

    /// A function whose configuration is reached through `config` (kept open while it lives:
    /// the confinement lets a claim's descriptor stay).
    fn claimed(root: &Path, address: String, dir: PathBuf, config: File, vfio: Option<crate::vfio::Device>) -> Self {
        claims().push(config.as_raw_fd());
        PciFunction {
            bar: Mutex::new(None),
            opened_before_main: false,
            dir,
            address,
            root: root.to_path_buf(),
            config,
            vfio,
        }
    }

    /// Opens the function's configuration space, whatever file system it is on.
    pub(crate) fn open_config(root: &Path, address: &str) -> Result<Self, PlatformError> {
        let address = normalize_address(address)?;
        let dir = root.join(&address);
        let config =
            OpenOptions::new().read(true).write(true).open(dir.join("config")).map_err(|e| match e.kind() {
                std::io::ErrorKind::PermissionDenied if crate::confine::is_confined() => {
                    PlatformError::OpenedAfterConfinement { address: address.clone() }
                }
                std::io::ErrorKind::PermissionDenied => {
                    PlatformError::NotRoot { what: "writing PCI configuration space" }
                }
                _ => PlatformError::io(format!("opening {}/config", dir.display()), e),
            })?;
        Ok(Self::claimed(root, address, dir, config, None))
    }

    /// The normalised address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The function's sysfs directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn read_hex_file(&self, name: &str) -> Result<u32, PlatformError> {
        let path = self.dir.join(name);
        let text =
            std::fs::read_to_string(&path).map_err(|e| PlatformError::io(format!("reading {}", path.display()), e))?;
        let t = text.trim();
        u32::from_str_radix(t.trim_start_matches("0x"), 16)
            .map_err(|_| PlatformError::io(format!("parsing {}", path.display()), std::io::Error::other(t.to_string())))
    }

    /// `(vendor, device)` from the sysfs files.
    pub fn ids(&self) -> Result<(u16, u16), PlatformError> {
        Ok((self.read_hex_file("vendor")? as u16, self.read_hex_file("device")? as u16))
    }

    /// Fails with [`PlatformError::WrongDevice`] unless the function is `vendor:device`.
    pub fn expect_ids(&self, vendor: u16, device: u16, name: &'static str) -> Result<(), PlatformError> {
        let (v, d) = self.ids()?;
        if (v, d) != (vendor, device) {
            return Err(PlatformError::WrongDevice {
                address: self.address.clone(),
                vendor: v,
                device: d,
                expected: name,
            });
        }
        Ok(())
    }

    /// The kernel driver the function is bound to, if any (the `driver` link's target name).
    pub fn bound_driver(&self) -> Option<String> {
        let target = std::fs::read_link(self.dir.join("driver")).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }

    /// Fails with [`PlatformError::BoundToKernelDriver`] if a kernel driver owns the function
    /// (vfio-pci, which hands it to user space, does not when it was opened through VFIO).
    pub fn expect_unbound(&self) -> Result<(), PlatformError> {
        if self.vfio.is_some() {
            return Ok(());
        }
        match self.bound_driver() {
            Some(driver) => Err(PlatformError::BoundToKernelDriver {
                address: self.address.clone(),
                driver,
                root: self.root.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Reads a 16-bit configuration register.
    pub fn config_read_u16(&self, offset: u64) -> Result<u16, PlatformError> {
        let mut b = [0u8; 2];
        self.config_read(offset, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<(), PlatformError> {
        match &self.vfio {
            Some(d) => d.config_read(offset, buf),
            None => self.config.read_exact_at(buf, offset),
        }
        .map_err(|e| PlatformError::io("reading PCI config", e))
    }

    /// Whether the function was opened through VFIO (its DMA addresses are IOVAs).
    pub fn through_vfio(&self) -> bool {
        self.vfio.is_some()
    }

    /// Reads a 32-bit configuration register.
    pub fn config_read_u32(&self, offset: u64) -> Result<u32, PlatformError> {
        let mut b = [0u8; 4];
        self.config_read(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a 16-bit configuration register.
    pub(crate) fn config_write_u16(&self, offset: u64, value: u16) -> Result<(), PlatformError> {
        match &self.vfio {
            Some(d) => d.config_write(offset, &value.to_le_bytes()),
            None => self.config.write_all_at(&value.to_le_bytes(), offset),
        }
        .map_err(|e| PlatformError::io("writing PCI config", e))
    }

    /// Sets memory-space decoding and bus mastering in COMMAND (a 16-bit read-modify-write).
    pub fn enable_memory_and_bus_master(&self) -> Result<(), PlatformError> {
        let cmd = self.config_read_u16(COMMAND)?;
        self.config_write_u16(COMMAND, cmd | COMMAND_MEMORY_SPACE | COMMAND_BUS_MASTER)
    }

    /// Takes the function for this process until this `PciFunction` is dropped (or the
    /// process ends): an exclusive `flock` on its `config` file, as DPDK's lock files and VFIO's
    /// group ownership keep a second driver from resetting a device under the first. Every
    /// driver of this project claims its functions before touching them (the C drivers lock
    /// the same file). Fails with [`PlatformError::InUse`], naming the owner, if another
    /// process holds the function.
    pub fn claim(&self) -> Result<(), PlatformError> {
        use rustix::fs::FlockOperation;
        // Through VFIO the group is the claim: the kernel lets one process open it.
        if self.vfio.is_some() {
            return Ok(());
        }
        match rustix::fs::flock(&self.config, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK) => {
                Err(PlatformError::InUse { address: self.address.clone(), owner: lock_owner(&self.config) })
            }
            Err(e) => Err(PlatformError::io(format!("locking {}/config", self.dir.display()), e.into())),
        }
    }

    /// Claims the function ([`Self::claim`]) and maps BAR0 (`resource0`) whole; fails unless
    /// it has exactly `expected_len` bytes. The claim is what keeps a second mapping away (in
    /// this process too: a lock is per open file), so the mapping should not outlive `self`.
    /// A real device's BAR0 was mapped before `main`, and is handed out here once. Crate-
    /// private: a raw register file lets any register be written, so a device's registers are
    /// reached only through its model (`crate::i82599`):
    ///
    /// ```compile_fail,E0624
    /// fn raw_registers(f: &platform::PciFunction) {
    ///     let _ = f.map_bar0(0x20000);
    /// }
    /// ```
    pub(crate) fn map_bar0(&self, expected_len: usize) -> Result<MappedRegion, PlatformError> {
        self.claim()?;
        let region = if let Some(d) = &self.vfio {
            d.map_bar0(&self.address)?
        } else if self.opened_before_main {
            let taken = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take();
            taken.ok_or_else(|| PlatformError::NotOpenedBeforeMain {
                address: self.address.clone(),
                why: "its BAR0 is mapped already: map it once".to_string(),
            })?
        } else {
            self.map_whole_bar0(false)?
        };
        if region.len() != expected_len {
            return Err(PlatformError::io(
                format!(
                    "{} has {:#x} bytes, expected {expected_len:#x}",
                    self.dir.join("resource0").display(),
                    region.len()
                ),
                std::io::Error::other("BAR0 size mismatch"),
            ));
        }
        Ok(region)
    }

    /// Maps BAR0 before `main` and keeps it for [`Self::map_bar0`]. The process refuses second
    /// mappings from then on ([`crate::refuse_second_mappings`]), and its queues get keepers
    /// (`crate::keeper`), as for a real device; a `pretend` one (`before_main::AS_REAL_ENV`)
    /// too. A real function's files are all on sysfs and a pretend one's none: a pretend
    /// `resource0` that led to a real device would get that device without its claim.
    pub(crate) fn map_bar0_before_main(&mut self, pretend: bool) -> Result<(), PlatformError> {
        let resource0 = self.dir.join("resource0");
        for file in [self.dir.join("config"), resource0] {
            if crate::fs::path_is_sysfs(&file) == pretend {
                return Err(PlatformError::NotOpenedBeforeMain {
                    address: self.address.clone(),
                    why: format!(
                        "{} is {}on sysfs, unlike the rest of the function: give the function's own directory",
                        file.display(),
                        if pretend { "" } else { "not " }
                    ),
                });
            }
        }
        let region = self.map_whole_bar0(true)?;
        self.bar = Mutex::new(Some(region));
        self.opened_before_main = true;
        Ok(())
    }

    /// Maps `resource0` whole. A real device's is mapped only before `main` (`before_main`
    /// says so): a file on sysfs mapped at any other time is refused.
    fn map_whole_bar0(&self, before_main: bool) -> Result<MappedRegion, PlatformError> {
        let path = self.dir.join("resource0");
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => PlatformError::NotRoot { what: "mapping a PCI BAR" },
            _ => PlatformError::io(format!("opening {}", path.display()), e),
        })?;
        let inspecting = |e: std::io::Error| PlatformError::io(format!("inspecting {}", path.display()), e);
        let meta = file.metadata().map_err(inspecting)?;
        // A symbolic link to `/dev/mem` would make physical memory a device's registers.
        if !meta.is_file() {
            return Err(PlatformError::io(
                format!("mapping {}", path.display()),
                std::io::Error::other("not a BAR: a device's resource0 is a regular file"),
            ));
        }
        let on_sysfs = crate::fs::is_sysfs(&file).map_err(inspecting)?;
        if on_sysfs && !before_main {
            return Err(not_named(&self.address));
        }
        // A real device's DMA memory must have no second mapping that could rewrite its rings,
        // and its queues get keepers (`crate::keeper`).
        if before_main {
            crate::mapped_once::refuse_second_mappings()?;
            REAL_DEVICE.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let len = meta.len() as usize;
        let region = MappedRegion::map_file_unchecked(&file, 0, len, false)
            .map_err(|e| PlatformError::io(format!("mapping {}", path.display()), e))?;
        if let Ok(range) = crate::mapped_once::FileRange::of_file(&file, 0, len) {
            bars().push((region.virt_addr(), len, range));
        }
        Ok(region)
    }
}

/// A BAR reached through `pread`/`pwrite` on its `resourceN` file: an I/O BAR as Linux allows
/// for I/O space (legacy virtio's registers), or nicsim's virtio 1.x memory BAR, whose every
/// access must reach the device as vfio's region files allow. Every access is one system
/// call: for set-up and notifications, not per packet.
#[derive(Debug)]
pub struct IoBar {
    file: File,
    /// Where the BAR starts in the file: 0 for `resourceN`, the region's offset in a VFIO
    /// device descriptor.
    base: u64,
    len: u64,
}

/// The descriptors of the open [`IoBar`]s: a claimed function's registers, which a confined
/// process keeps (`crate::confine`), as it keeps the claim.
static IO_BARS: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

fn io_bars() -> std::sync::MutexGuard<'static, Vec<RawFd>> {
    IO_BARS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `fd` is an open [`IoBar`].
pub(crate) fn is_io_bar(fd: RawFd) -> bool {
    io_bars().contains(&fd)
}

impl Drop for IoBar {
    fn drop(&mut self) {
        let fd = self.file.as_raw_fd();
        io_bars().retain(|&f| f != fd);
    }
}

impl IoBar {
    /// Reads `N` bytes at `offset`.
    pub fn read<const N: usize>(&self, offset: u64) -> Result<[u8; N], PlatformError> {
        let mut b = [0u8; N];
        self.check(offset, N)?;
        self.file.read_exact_at(&mut b, self.base + offset).map_err(|e| PlatformError::io("reading an I/O BAR", e))?;
        Ok(b)
    }

    /// Writes `bytes` at `offset`.
    pub fn write(&self, offset: u64, bytes: &[u8]) -> Result<(), PlatformError> {
        self.check(offset, bytes.len())?;
        self.file.write_all_at(bytes, self.base + offset).map_err(|e| PlatformError::io("writing an I/O BAR", e))
    }

    fn check(&self, offset: u64, len: usize) -> Result<(), PlatformError> {
        if offset.checked_add(len as u64).is_some_and(|end| end <= self.len) {
            Ok(())
        } else {
            Err(PlatformError::io(
                format!("an access of {len} bytes at {offset:#x}"),
                std::io::Error::other(format!("outside the {}-byte I/O BAR", self.len)),
            ))
        }
    }
}

impl PciFunction {
    /// Claims the function ([`Self::claim`]) and opens BAR `index` for `pread`/`pwrite`. Only a
    /// function that is not on sysfs (nicsim's): a real device is opened before `main` or not
    /// at all, and that path exists for mapped memory BARs only so far.
    pub fn open_io_bar(&self, index: u8) -> Result<IoBar, PlatformError> {
        self.claim()?;
        if let Some(d) = &self.vfio {
            // The region of the device descriptor, as vfio-pci offers every BAR.
            let (file, base, len) = d.region_file(u32::from(index), &self.address)?;
            io_bars().push(file.as_raw_fd());
            return Ok(IoBar { file, base, len });
        }
        let path = self.dir.join(format!("resource{index}"));
        if crate::fs::path_is_sysfs(&self.dir) || crate::fs::path_is_sysfs(&path) {
            return Err(PlatformError::NotOpenedBeforeMain {
                address: self.address.clone(),
                why: "a real device's BAR is not opened for pread/pwrite before main yet: safenic drives nicsim's virtio-net functions only (docs/virtio.md)".to_string(),
            });
        }
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => PlatformError::NotRoot { what: "opening a PCI I/O BAR" },
            _ => PlatformError::io(format!("opening {}", path.display()), e),
        })?;
        let len = file.metadata().map_err(|e| PlatformError::io(format!("inspecting {}", path.display()), e))?.len();
        io_bars().push(file.as_raw_fd());
        Ok(IoBar { file, base: 0, len })
    }
}

/// Why a real device is not open to this process.
fn not_named(address: &str) -> PlatformError {
    PlatformError::NotOpenedBeforeMain {
        address: address.to_string(),
        why: format!(
            "this process did not name it when it started: start the program as root with {address} among its \
             arguments (a real device is opened, and the process confined, before the program's own code runs)"
        ),
    }
}

/// Every BAR mapping `map_bar0` made: its address, length and the pages it maps.
static BARS: Mutex<Vec<(usize, usize, crate::mapped_once::FileRange)>> = Mutex::new(Vec::new());

fn bars() -> std::sync::MutexGuard<'static, Vec<(usize, usize, crate::mapped_once::FileRange)>> {
    BARS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The BAR mappings of this process that are still mapped (`is_live`, from
/// `crate::mapped_once::frozen`), by address and length: those a child forked meanwhile
/// inherits (`crate::keeper`).
pub(crate) fn mapped_bars(is_live: &dyn Fn(usize, &crate::mapped_once::FileRange) -> bool) -> Vec<(usize, usize)> {
    let mut bars = bars();
    bars.retain(|(addr, _, range)| is_live(*addr, range));
    bars.iter().map(|&(addr, len, _)| (addr, len)).collect()
}

impl Drop for PciFunction {
    fn drop(&mut self) {
        let fd = self.config.as_raw_fd();
        claims().retain(|&c| c != fd);
    }
}

/// Descriptors of the `config` files that open [`PciFunction`]s hold: written only through
/// this module, so the confinement lets them stay open.
static CLAIMS: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

pub(crate) fn claims() -> std::sync::MutexGuard<'static, Vec<RawFd>> {
    CLAIMS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `fd` is the `config` file of an open [`PciFunction`].
pub(crate) fn is_claim(fd: RawFd) -> bool {
    claims().contains(&fd)
}

/// The `config` descriptors of the open [`PciFunction`]s, whose locks are the claims.
pub(crate) fn claimed_descriptors() -> Vec<RawFd> {
    claims().clone()
}

/// Simulated devices (not on sysfs) in this process: whether one was opened, and whether they
/// are refused from now on.
struct Simulated {
    opened: bool,
    refused: bool,
}

static SIMULATED: Mutex<Simulated> = Mutex::new(Simulated { opened: false, refused: false });

fn simulated_devices() -> std::sync::MutexGuard<'static, Simulated> {
    SIMULATED.lock().unwrap_or_else(|e| e.into_inner())
}

/// From now on this process opens no simulated device: for a process whose hugepage memory
/// holds what a device must not write (DPDK's, whose mbufs hold pointers), since a simulated
/// device's DMA reaches any of its owner's hugepages. Fails if one was opened already.
///
/// # Soundness
/// It only makes the process stricter.
pub fn refuse_simulated_devices() -> Result<(), PlatformError> {
    let mut simulated = simulated_devices();
    if simulated.opened {
        return Err(PlatformError::Refused(
            "this process opened a simulated device (nicsim's), whose DMA could overwrite the pointers in DPDK's \
             hugepage memory: run DPDK in another process"
                .to_string(),
        ));
    }
    simulated.refused = true;
    Ok(())
}

/// Set once this process mapped the BAR of a device on sysfs: real hardware.
static REAL_DEVICE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Set once this process opened a real device through the kernel's VFIO.
static REAL_VFIO_DEVICE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process drives a real device, through sysfs or VFIO: it opens no simulated
/// one, whose DMA resolves into its owner's hugepages.
pub(crate) fn real_device_opened() -> bool {
    real_sysfs_device_opened() || REAL_VFIO_DEVICE.load(std::sync::atomic::Ordering::SeqCst)
}

/// Whether this process has mapped the BAR of a real device on sysfs, which no IOMMU confines:
/// its queues get keepers (`crate::keeper`).
pub(crate) fn real_sysfs_device_opened() -> bool {
    REAL_DEVICE.load(std::sync::atomic::Ordering::SeqCst)
}

/// The process holding a `flock` on `file`, and its command name, from /proc/locks, whose
/// lines read `1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF` (device major and minor in
/// hex, inode in decimal).
fn lock_owner(file: &File) -> Option<(u32, String)> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata().ok()?;
    let (major, minor) = (rustix::fs::major(m.dev()), rustix::fs::minor(m.dev()));
    let want = format!("{major:02x}:{minor:02x}:{}", m.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid: u32 = locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // Waiters are listed as `1: -> FLOCK …`: not owners.
        (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&want.as_str())).then(|| f.get(4)?.parse().ok())?
    })?;
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim().to_string()).unwrap_or_default();
    Some((pid, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_normalise() {
        assert_eq!(normalize_address("5e:00.1").unwrap(), "0000:5e:00.1");
        assert_eq!(normalize_address("0000:5E:00.0").unwrap(), "0000:5e:00.0");
        for bad in ["", "5e", "5e:00", "5e:20.0", "5e:00.8", "x:00.0", "12345:00:00.0", "1:2:3:4"] {
            assert!(normalize_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_claimed_function_is_refused_naming_its_owner() {
        let scratch = crate::fs::ScratchDir::new("platform-unit", "claim").unwrap();
        let address = "0000:01:00.0";
        std::fs::create_dir(scratch.path().join(address)).unwrap();
        std::fs::write(scratch.path().join(address).join("config"), [0u8; 256]).unwrap();
        let first = PciFunction::open(scratch.path(), address).unwrap();
        first.claim().unwrap();
        let second = PciFunction::open(scratch.path(), address).unwrap();
        let e = second.claim().unwrap_err().to_string();
        let me = format!("in use by process {} (", std::process::id());
        assert!(e.contains(address) && e.contains(&me) && e.contains("stop that driver first"), "{e}");
        drop(first);
        second.claim().expect("free again once its owner let go");
    }

    #[test]
    fn missing_function_names_the_fix() {
        let e = PciFunction::open(Path::new("/nonexistent"), "0000:01:00.0").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("not found under /nonexistent") && msg.contains("ls /nonexistent"), "{msg}");
        assert!(!msg.contains('\n'));
    }
}
