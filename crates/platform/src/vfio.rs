//! A PCI function through VFIO with a type1 IOMMU [Linux: Documentation/driver-api/vfio.rst]:
//! the way a driver runs without root, and the device reaches only the memory it was given.
//!
//! A function bound to `vfio-pci` is opened through its IOMMU group (`/dev/vfio/<group>`),
//! which joins this process's one container (`/dev/vfio/vfio`); its BAR0 is mapped and its
//! configuration space read and written through the device descriptor the group hands out.
//! DMA memory ([`crate::dma::DmaRegion`]) is then mapped into the container at I/O virtual
//! addresses (IOVAs) chosen here, and those IOVAs are what a device is given: nothing reads
//! `pagemap`, and the IOMMU refuses the device every other address. A mapping is removed only
//! when its region is unmapped, which [`crate::dma::retention`] holds back until every queue
//! that may use it confirmed it stopped. When the process ends, however it ends, the kernel
//! removes the mappings and resets the function.
//!
//! # Soundness
//! Descriptors are opened and owned here; each `ioctl` passes a buffer of this module whose
//! `argsz` is at most the buffer's length, so the kernel reads and writes inside it. The only
//! addresses given to the kernel for DMA are those of a live [`MappedRegion`] of DMA memory,
//! mapped for exactly its length and unmapped before that region is unmapped
//! ([`IovaMapping`] is dropped first).

use crate::error::PlatformError;
use crate::mem::MappedRegion;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// The kernel driver a function is bound to for VFIO.
pub const VFIO_DRIVER: &str = "vfio-pci";

/// The VFIO requests and values used here [include/uapi/linux/vfio.h], for this back end and
/// for nicsim, which answers them.
pub mod uapi {
    /// `_IO(';', 100 + n)`.
    const fn vfio_ioctl(n: u64) -> u64 {
        (b';' as u64) << 8 | (100 + n)
    }
    pub const GET_API_VERSION: u64 = vfio_ioctl(0);
    pub const CHECK_EXTENSION: u64 = vfio_ioctl(1);
    pub const SET_IOMMU: u64 = vfio_ioctl(2);
    pub const GROUP_GET_STATUS: u64 = vfio_ioctl(3);
    pub const GROUP_SET_CONTAINER: u64 = vfio_ioctl(4);
    pub const GROUP_UNSET_CONTAINER: u64 = vfio_ioctl(5);
    pub const GROUP_GET_DEVICE_FD: u64 = vfio_ioctl(6);
    pub const DEVICE_GET_INFO: u64 = vfio_ioctl(7);
    pub const DEVICE_GET_REGION_INFO: u64 = vfio_ioctl(8);
    pub const DEVICE_GET_IRQ_INFO: u64 = vfio_ioctl(9);
    pub const DEVICE_SET_IRQS: u64 = vfio_ioctl(10);
    pub const DEVICE_RESET: u64 = vfio_ioctl(11);
    /// On a container (on a device descriptor the same number is another request).
    pub const IOMMU_GET_INFO: u64 = vfio_ioctl(12);
    pub const IOMMU_MAP_DMA: u64 = vfio_ioctl(13);
    pub const IOMMU_UNMAP_DMA: u64 = vfio_ioctl(14);
    pub const TYPE1_IOMMU: u64 = 1;
    pub const TYPE1V2_IOMMU: u64 = 3;
    /// A region's offset in a device descriptor is its index shifted by this (vfio-pci).
    pub const REGION_SHIFT: u64 = 40;
    pub const CONFIG_REGION: u32 = 7;
}

use uapi::*;

const GROUP_VIABLE: u32 = 1;
const REGION_MMAP: u32 = 4;
const REGION_CAPS: u32 = 8;
const BAR0_REGION: u32 = 0;
const CAP_SPARSE_MMAP: u16 = 1;
const CAP_IOVA_RANGE: u16 = 1;
const DMA_READ_WRITE: u32 = 3;
/// IOVAs are handed out from here, in 2 MiB steps: above the 32-bit space and its interrupt
/// window, where every x86 IOMMU translates.
const IOVA_BASE: u64 = 1 << 32;
const IOVA_ALIGN: u64 = crate::hugepage::HUGEPAGE as u64;

/// This process's container, once a function was opened through VFIO.
struct Container {
    file: File,
    /// The groups joined to it (kept open: closing one leaves the container).
    groups: Vec<(u32, File)>,
    /// The IOVA ranges the IOMMU translates, and the next IOVA to hand out.
    ranges: Vec<(u64, u64)>,
    next_iova: u64,
    /// Bytes mapped, for the RLIMIT_MEMLOCK message.
    mapped: u64,
}

static CONTAINER: Mutex<Option<Container>> = Mutex::new(None);

fn container() -> MutexGuard<'static, Option<Container>> {
    CONTAINER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this process maps its DMA memory into a VFIO container (it opened a function
/// through VFIO): DMA addresses are IOVAs.
pub fn active() -> bool {
    container().is_some()
}

/// A region of a device descriptor.
#[derive(Debug, Clone, Copy)]
struct Region {
    offset: u64,
    size: u64,
}

/// A function opened through VFIO: its device descriptor and the regions used here.
#[derive(Debug)]
pub(crate) struct Device {
    file: File,
    bar0: Region,
    config: Region,
    /// BAR0 may be mapped whole (no sparse areas leave part of it out).
    bar0_mappable: bool,
    /// Whether the group node is the kernel's (a character device) rather than a simulator's.
    pub(crate) real: bool,
}

fn vfio_error(what: String) -> PlatformError {
    PlatformError::Vfio(what)
}

/// A buffer for a VFIO call: 8-byte aligned, `argsz` (its first word) set to its length.
fn buffer(len: usize) -> Vec<u64> {
    let mut b = vec![0u64; len.div_ceil(8)];
    b[0] = (len as u64) & 0xffff_ffff;
    b
}

fn bytes(b: &[u64]) -> Vec<u8> {
    b.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

/// `ioctl(fd, request, buf)` for a request that takes a structure led by `argsz`.
fn ioctl_buffer(file: &File, request: u64, buf: &mut [u64]) -> std::io::Result<i32> {
    // `argsz` never exceeds the buffer: the kernel reads and writes within it.
    let len = (buf.len() * 8) as u64;
    buf[0] = (buf[0] & !0xffff_ffff) | (buf[0] & 0xffff_ffff).min(len);
    // SAFETY: `buf` is a live, writable, 8-byte-aligned buffer of `len` bytes whose first
    // word's `argsz` is at most `len`, which bounds what a VFIO call reads or writes; the
    // descriptor is open for the call's duration.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), request as libc::c_ulong, buf.as_mut_ptr()) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `ioctl(fd, request, value)` for a request that takes an integer (or nothing).
fn ioctl_value(file: &File, request: u64, value: u64) -> std::io::Result<i32> {
    // SAFETY: these requests take their argument as an integer and access no memory of ours.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), request as libc::c_ulong, value as libc::c_ulong) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Whether the function in `dir` is bound to vfio-pci.
pub(crate) fn is_bound(dir: &Path) -> bool {
    std::fs::read_link(dir.join("driver")).is_ok_and(|t| t.file_name().is_some_and(|n| n == VFIO_DRIVER))
}

/// Opens the function `address` in `dir` through its IOMMU group, joining this process's
/// container (made at the first function).
pub(crate) fn open(dir: &Path, address: &str) -> Result<Device, PlatformError> {
    let group_link = std::fs::read_link(dir.join("iommu_group")).map_err(|_| {
        vfio_error(format!(
            "{address} is bound to vfio-pci but is in no IOMMU group: the kernel runs without an IOMMU; \
             enable it (intel_iommu=on or amd_iommu=on on the kernel command line), or unbind the function \
             and run as root through sysfs"
        ))
    })?;
    let group: u32 = group_link.file_name().and_then(|n| n.to_str()?.parse().ok()).ok_or_else(|| {
        vfio_error(format!(
            "{address}'s IOMMU group is `{}`, not a number: this is vfio-pci's no-IOMMU mode, which gives the \
             device all of memory and is refused; enable the IOMMU instead",
            group_link.display()
        ))
    })?;
    let node = format!("/dev/vfio/{group}");
    let group_file = OpenOptions::new().read(true).write(true).open(&node).map_err(|e| match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => vfio_error(format!(
            "no permission to open {node} (IOMMU group of {address}): give it to your user \
             (`chown $USER {node}`, or a udev rule) or run as root"
        )),
        Some(libc::EBUSY) => vfio_error(format!(
            "{node} (IOMMU group of {address}) is open in another process: stop that driver first, or give another port"
        )),
        // vfio-pci's no-IOMMU mode names the node `noiommu-<group>`: it gives the device all of
        // memory, and is refused.
        Some(libc::ENOENT) if Path::new(&format!("/dev/vfio/noiommu-{group}")).exists() => vfio_error(format!(
            "{address} is in vfio-pci's no-IOMMU mode (/dev/vfio/noiommu-{group}), which gives the device all of \
             memory: enable the IOMMU (intel_iommu=on or amd_iommu=on), or unbind the function and run as root \
             through sysfs"
        )),
        Some(libc::ENOENT) => vfio_error(format!(
            "{node} does not exist: load vfio-pci (`modprobe vfio-pci`) and bind {address} to it \
             (`dpdk-devbind.py -b vfio-pci {address}`)"
        )),
        _ => PlatformError::io(format!("opening {node}"), e),
    })?;
    let real = group_file.metadata().is_ok_and(|m| m.file_type().is_char_device());
    let mut status = buffer(8);
    ioctl_buffer(&group_file, GROUP_GET_STATUS, &mut status)
        .map_err(|e| PlatformError::io(format!("VFIO_GROUP_GET_STATUS on {node}"), e))?;
    if (status[0] >> 32) as u32 & GROUP_VIABLE == 0 {
        return Err(vfio_error(format!(
            "IOMMU group {group} of {address} is not viable: every function in it must be bound to vfio-pci \
             or to no driver; now {}",
            group_members(group)
        )));
    }
    let mut guard = container();
    if guard.is_none() {
        *guard = Some(new_container()?);
    }
    let c = guard.as_mut().expect("made above");
    let fd = c.file.as_raw_fd() as u64;
    let mut arg = [fd];
    ioctl_buffer_raw(&group_file, GROUP_SET_CONTAINER, &mut arg)
        .map_err(|e| PlatformError::io(format!("joining {node} to this process's VFIO container"), e))?;
    if c.groups.is_empty() {
        set_iommu(c)?;
    }
    crate::pci::claims().push(group_file.as_raw_fd());
    c.groups.push((group, group_file));
    let group_file = &c.groups.last().expect("pushed").1;
    let name = std::ffi::CString::new(address).map_err(|_| PlatformError::BadAddress { address: address.into() })?;
    // SAFETY: the request takes a NUL-terminated name, which `name` holds for the call.
    let device_fd = unsafe { libc::ioctl(group_file.as_raw_fd(), GROUP_GET_DEVICE_FD as libc::c_ulong, name.as_ptr()) };
    if device_fd < 0 {
        return Err(PlatformError::io(
            format!("VFIO_GROUP_GET_DEVICE_FD for {address}"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: the call returned a new descriptor that nothing else owns.
    let file = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(device_fd) };
    drop(guard);
    let mut info = buffer(24);
    ioctl_buffer(&file, DEVICE_GET_INFO, &mut info)
        .map_err(|e| PlatformError::io(format!("VFIO_DEVICE_GET_INFO for {address}"), e))?;
    let regions = (info[1] & 0xffff_ffff) as u32;
    if regions <= CONFIG_REGION {
        return Err(vfio_error(format!("{address} has {regions} VFIO regions: not a PCI function under vfio-pci")));
    }
    let (bar0, bar0_mappable) = region_info(&file, BAR0_REGION, address)?;
    let (config, _) = region_info(&file, CONFIG_REGION, address)?;
    crate::pci::claims().push(file.as_raw_fd());
    Ok(Device { file, bar0, config, bar0_mappable, real })
}

/// `ioctl(fd, request, &word)` for a request that takes a pointer to an integer.
fn ioctl_buffer_raw(file: &File, request: u64, arg: &mut [u64; 1]) -> std::io::Result<i32> {
    // SAFETY: the request reads one 32-bit integer at the pointer, which `arg` holds (the low
    // half of a live u64, little-endian).
    let r = unsafe { libc::ioctl(file.as_raw_fd(), request as libc::c_ulong, arg.as_mut_ptr()) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn new_container() -> Result<Container, PlatformError> {
    let file =
        OpenOptions::new().read(true).write(true).open("/dev/vfio/vfio").map_err(|e| {
            vfio_error(format!("cannot open /dev/vfio/vfio ({e}): load vfio-pci (`modprobe vfio-pci`)"))
        })?;
    let version = ioctl_value(&file, GET_API_VERSION, 0).map_err(|e| PlatformError::io("VFIO_GET_API_VERSION", e))?;
    if version != 0 {
        return Err(vfio_error(format!("the kernel speaks VFIO API {version}, not 0: this driver knows only 0")));
    }
    crate::pci::claims().push(file.as_raw_fd());
    Ok(Container { file, groups: Vec::new(), ranges: Vec::new(), next_iova: IOVA_BASE, mapped: 0 })
}

/// Chooses the type1 IOMMU (v2 where offered) and reads the IOVA ranges it translates.
fn set_iommu(c: &mut Container) -> Result<(), PlatformError> {
    let kind = [TYPE1V2_IOMMU, TYPE1_IOMMU]
        .into_iter()
        .find(|&k| ioctl_value(&c.file, CHECK_EXTENSION, k).is_ok_and(|r| r > 0))
        .ok_or_else(|| {
            vfio_error("the kernel offers no type1 IOMMU to VFIO: enable the IOMMU (intel_iommu=on)".into())
        })?;
    ioctl_value(&c.file, SET_IOMMU, kind).map_err(|e| PlatformError::io("VFIO_SET_IOMMU", e))?;
    let mut info = buffer(24);
    ioctl_buffer(&c.file, IOMMU_GET_INFO, &mut info).map_err(|e| PlatformError::io("VFIO_IOMMU_GET_INFO", e))?;
    let needed = (info[0] & 0xffff_ffff) as usize;
    if needed > 24 {
        info = buffer(needed);
        ioctl_buffer(&c.file, IOMMU_GET_INFO, &mut info).map_err(|e| PlatformError::io("VFIO_IOMMU_GET_INFO", e))?;
    }
    let b = bytes(&info);
    let mut at = u32_at(&b, 16) as usize;
    while at != 0 && at + 16 <= b.len() {
        let (id, next) = (u16::from_le_bytes([b[at], b[at + 1]]), u32_at(&b, at + 4) as usize);
        if id == CAP_IOVA_RANGE {
            let n = u32_at(&b, at + 8) as usize;
            c.ranges = (0..n).map(|i| (u64_at(&b, at + 16 + 16 * i), u64_at(&b, at + 24 + 16 * i))).collect();
        }
        at = next;
    }
    // Without the capability (kernels before 5.4), the 48 bits every x86 IOMMU translates.
    if c.ranges.is_empty() {
        c.ranges = vec![(IOVA_BASE, (1 << 48) - 1)];
    }
    Ok(())
}

/// Region `index`'s offset and size, and whether it may be mapped whole.
fn region_info(file: &File, index: u32, address: &str) -> Result<(Region, bool), PlatformError> {
    let mut info = buffer(32);
    info[1] = u64::from(index);
    ioctl_buffer(file, DEVICE_GET_REGION_INFO, &mut info)
        .map_err(|e| PlatformError::io(format!("VFIO_DEVICE_GET_REGION_INFO {index} for {address}"), e))?;
    let needed = (info[0] & 0xffff_ffff) as usize;
    if needed > 32 {
        info = buffer(needed);
        info[1] = u64::from(index);
        ioctl_buffer(file, DEVICE_GET_REGION_INFO, &mut info)
            .map_err(|e| PlatformError::io(format!("VFIO_DEVICE_GET_REGION_INFO {index} for {address}"), e))?;
    }
    let b = bytes(&info);
    let flags = u32_at(&b, 4);
    let region = Region { size: u64_at(&b, 16), offset: u64_at(&b, 24) };
    let mut whole = flags & REGION_MMAP != 0;
    if flags & REGION_CAPS != 0 {
        let mut at = u32_at(&b, 12) as usize;
        while at != 0 && at + 8 <= b.len() {
            if u16::from_le_bytes([b[at], b[at + 1]]) == CAP_SPARSE_MMAP {
                // Only the listed areas may be mapped: whole only if one area covers it all.
                let n = u32_at(&b, at + 8) as usize;
                let areas: Vec<(u64, u64)> =
                    (0..n).map(|i| (u64_at(&b, at + 16 + 16 * i), u64_at(&b, at + 24 + 16 * i))).collect();
                whole &= areas.iter().any(|&(o, s)| o == 0 && s >= region.size);
            }
            at = u32_at(&b, at + 4) as usize;
        }
    }
    Ok((region, whole))
}

/// The functions of IOMMU group `group` and their drivers, for the message of a group that is
/// not viable.
fn group_members(group: u32) -> String {
    let dir = format!("/sys/kernel/iommu_groups/{group}/devices");
    let members: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let driver = std::fs::read_link(e.path().join("driver"))
                        .ok()
                        .and_then(|t| Some(t.file_name()?.to_string_lossy().into_owned()))
                        .unwrap_or_else(|| "no driver".into());
                    format!("{name} ({driver})")
                })
                .collect()
        })
        .unwrap_or_default();
    if members.is_empty() {
        format!("{dir} lists no functions")
    } else {
        members.join(", ")
    }
}

impl Device {
    /// A second descriptor of the device.
    pub(crate) fn descriptor(&self) -> std::io::Result<File> {
        self.file.try_clone()
    }

    /// A descriptor of the device and where region `index` lies in it (offset, size), for
    /// `pread`/`pwrite`; refused for a region the function does not have.
    pub(crate) fn region_file(&self, index: u32, address: &str) -> Result<(File, u64, u64), PlatformError> {
        let (region, _) = region_info(&self.file, index, address)?;
        if region.size == 0 {
            return Err(vfio_error(format!("{address} has no BAR {index} through VFIO: give a BAR it has")));
        }
        let file = self.descriptor().map_err(|e| PlatformError::io("duplicating a VFIO descriptor", e))?;
        Ok((file, region.offset, region.size))
    }

    /// Reads configuration space at `offset`.
    pub(crate) fn config_read(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.check_config(offset, buf.len())?;
        self.file.read_exact_at(buf, self.config.offset + offset)
    }

    /// Writes configuration space at `offset`.
    pub(crate) fn config_write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.check_config(offset, data.len())?;
        self.file.write_all_at(data, self.config.offset + offset)
    }

    fn check_config(&self, offset: u64, len: usize) -> std::io::Result<()> {
        if offset.checked_add(len as u64).is_some_and(|end| end <= self.config.size) {
            Ok(())
        } else {
            Err(std::io::Error::other(format!("offset {offset:#x} is outside the configuration region")))
        }
    }

    /// Maps BAR0 whole through the device descriptor.
    pub(crate) fn map_bar0(&self, address: &str) -> Result<MappedRegion, PlatformError> {
        if !self.bar0_mappable {
            return Err(vfio_error(format!(
                "{address}'s BAR0 cannot be mapped whole through VFIO (no mmap, or sparse areas): this driver \
                 needs every register of it"
            )));
        }
        MappedRegion::map_file_unchecked(&self.file, self.bar0.offset, self.bar0.size as usize, false)
            .map_err(|e| PlatformError::io(format!("mapping BAR0 of {address} through VFIO"), e))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let fd = self.file.as_raw_fd();
        crate::pci::claims().retain(|&c| c != fd);
    }
}

/// DMA memory mapped into the container at an IOVA; unmapped when dropped.
#[derive(Debug)]
pub(crate) struct IovaMapping {
    pub(crate) iova: u64,
    len: u64,
}

/// Maps `region` (DMA memory of this process) into the container at a fresh IOVA, if this
/// process has a container; `None` if it has none (DMA addresses are physical).
pub(crate) fn map_dma(region: &MappedRegion) -> Result<Option<IovaMapping>, PlatformError> {
    let mut guard = container();
    let Some(c) = guard.as_mut() else { return Ok(None) };
    let len = region.len() as u64;
    let iova = c
        .ranges
        .iter()
        .map(|&(start, end)| (c.next_iova.max(start).next_multiple_of(IOVA_ALIGN), end))
        .find(|&(at, end)| at.checked_add(len - 1).is_some_and(|last| last <= end))
        .map(|(at, _)| at)
        .ok_or_else(|| vfio_error(format!("no IOVA range has {len:#x} bytes left: allocate less DMA memory")))?;
    let mut map = buffer(32);
    map[0] |= u64::from(DMA_READ_WRITE) << 32;
    map[1] = region.virt_addr() as u64;
    map[2] = iova;
    map[3] = len;
    if let Err(e) = ioctl_buffer(&c.file, IOMMU_MAP_DMA, &mut map) {
        if e.raw_os_error() == Some(libc::ENOMEM) {
            let needed = (c.mapped + len).div_ceil(1 << 20);
            let limit = rustix::process::getrlimit(rustix::process::Resource::Memlock).current;
            let limit = limit.map_or("unlimited".to_string(), |l| format!("{} MiB", l >> 20));
            return Err(vfio_error(format!(
                "VFIO could not pin {} MiB of DMA memory: RLIMIT_MEMLOCK is {limit}, and the driver needs {needed} MiB \
                 locked; raise it (`ulimit -l {}` or `prlimit --memlock={}`, LimitMEMLOCK= for a service)",
                len >> 20,
                needed << 10,
                needed << 20
            )));
        }
        return Err(PlatformError::io("VFIO_IOMMU_MAP_DMA", e));
    }
    c.next_iova = iova + len;
    c.mapped += len;
    Ok(Some(IovaMapping { iova, len }))
}

impl Drop for IovaMapping {
    fn drop(&mut self) {
        let mut guard = container();
        let Some(c) = guard.as_mut() else { return };
        let mut unmap = buffer(24);
        unmap[1] = self.iova;
        unmap[2] = self.len;
        if ioctl_buffer(&c.file, IOMMU_UNMAP_DMA, &mut unmap).is_ok() {
            c.mapped = c.mapped.saturating_sub(self.len);
        }
    }
}
