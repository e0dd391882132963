//! VFIO as `nicsim exec --vfio` serves it: the command's calls on `/dev/vfio/vfio`, the group
//! nodes `/dev/vfio/<n>` and the device descriptors they hand out are answered here, as the
//! kernel's vfio, vfio-pci and vfio_iommu_type1 answer them [Linux: Documentation/driver-api/
//! vfio.rst, include/uapi/linux/vfio.h]; the IOMMU itself is the engine's
//! ([`crate::dma::iommu`]), told of every container change before the call returns.
//!
//! The nodes are plain files, so the calls reach nicsim through the same ptrace as the BARs'
//! accesses: `openat`, `ioctl`, `pread64` and `pwrite64` stop the command, and those on
//! nicsim's files are answered here and skipped; every other one runs as it would. Each open
//! of `/dev/vfio/vfio` opens a file of its own (a container is one open file), and a device
//! descriptor is the function's BAR0 file, opened for the command: mapping it maps BAR0 as
//! vfio-pci's region 0 does, its first page served access by access ([`super::mmio_trap`]).

use crate::control::IommuOp;
use crate::session::Session;
use crate::sysfs;
use platform::process::tgid;
use platform::trace::{linux, Registers, Traced};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use platform::vfio::uapi::*;

const REGIONS: u32 = 9;
const IRQS: u32 = 5;

/// Each function `nicsim exec --vfio` bound, and the driver it was bound to before.
pub type Bound = Vec<(usize, Option<String>)>;

/// Binds every function of `trapped` (the BARs `nicsim exec` serves) to vfio-pci, its group
/// given to `owner`: the state that answers the command's calls, and what each function was
/// bound to before, for [`unbind_all`].
pub fn bind_all(
    root: &Path,
    trapped: &[super::TrappedBar],
    owner: Option<(u32, u32)>,
    memlock: Option<u64>,
) -> Result<(Vfio, Bound), String> {
    let ports: Vec<usize> = (0..trapped.len()).collect();
    let mut bound = Vec::new();
    for &port in &ports {
        match sysfs::present_as_vfio(root, port, owner) {
            Ok(before) => bound.push((port, before)),
            Err(e) => {
                unbind_all(root, &bound);
                return Err(format!("binding port {port} to vfio-pci: {e}"));
            }
        }
    }
    match Vfio::new(root, &ports, memlock) {
        Ok(v) => Ok((v, bound)),
        Err(e) => {
            unbind_all(root, &bound);
            Err(e)
        }
    }
}

/// Binds the functions [`bind_all`] bound back to what they were bound to.
pub fn unbind_all(root: &Path, bound: &[(usize, Option<String>)]) {
    for (port, before) in bound {
        sysfs::unbind_vfio(root, *port, before.as_deref());
    }
}

/// The system calls VFIO adds to the ones the BAR trap stops.
pub const SYSCALLS: [i64; 4] = [linux::SYS_openat, linux::SYS_ioctl, linux::SYS_pread64, linux::SYS_pwrite64];

/// One function bound to vfio-pci: its group, node and files.
struct Function {
    port: usize,
    address: String,
    /// A virtio-net function (else an 82599).
    virtio: bool,
    group: u32,
    node: (u64, u64),
    /// The file a device descriptor opens: the BAR a driver maps (an 82599's BAR0, a virtio
    /// function's BAR4).
    device_path: PathBuf,
    device_id: (u64, u64),
    bar0: File,
    bar4: File,
    config: File,
    /// The process that holds the group open, and the container it joined.
    opened_by: Option<u32>,
    container: Option<u64>,
    /// An exclusive lock on the node while a process of this `nicsim exec` may hold the group:
    /// the kernel lets one process open a group, whichever `nicsim exec` runs it.
    lock: Option<File>,
}

struct Container {
    id: u64,
    file: (u64, u64),
    path: PathBuf,
    tgid: u32,
    iommu_set: bool,
    /// Bytes mapped, counted against the process's RLIMIT_MEMLOCK as type1 counts pinned pages.
    locked: u64,
}

/// What a stopped call on a VFIO descriptor becomes.
enum Outcome {
    /// Not nicsim's: run it.
    Run,
    /// Run it, and see its result ([`Vfio::exit`]).
    RunToExit,
    /// Answered here: skip the call and return this (a negative errno on failure).
    Answer(i64),
    /// Run as another call (registers already changed).
    Rewritten,
}

/// The VFIO state of one `nicsim exec --vfio`.
pub struct Vfio {
    functions: Vec<Function>,
    containers: Vec<Container>,
    next_container: u64,
    containers_dir: PathBuf,
    /// Threads whose call was answered here: the value to return at its exit.
    answers: HashMap<u32, i64>,
    /// Threads inside an open of a group node: the function, taken at the exit if it opened.
    opening: HashMap<u32, usize>,
    /// The locked-memory limit pinned pages count against, instead of each process's
    /// RLIMIT_MEMLOCK (`nicsim exec --vfio-memlock`).
    memlock: Option<u64>,
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

fn open_rw(path: &Path) -> Result<File, String> {
    File::options().read(true).write(true).open(path).map_err(|e| format!("{}: {e}", path.display()))
}

impl Vfio {
    /// The functions of `ports` under `root`, bound to vfio-pci ([`sysfs::present_as_vfio`]).
    pub fn new(root: &Path, ports: &[usize], memlock: Option<u64>) -> Result<Vfio, String> {
        let mut functions = Vec::new();
        for &port in ports {
            let address = sysfs::port_address(port);
            let dir = root.join("devices").join(&address);
            let node_path = root.join("vfio").join(port.to_string());
            let virtio = std::fs::read_to_string(dir.join("vendor"))
                .is_ok_and(|v| v.trim() == format!("{:#06x}", crate::virtio::VENDOR_VIRTIO));
            let device_path = dir.join(if virtio { "resource4" } else { "resource0" });
            functions.push(Function {
                port,
                virtio,
                group: port as u32,
                node: file_id(&node_path).ok_or_else(|| format!("{}: missing", node_path.display()))?,
                bar0: open_rw(&dir.join("resource0"))?,
                device_id: file_id(&device_path).ok_or_else(|| format!("{}: missing", device_path.display()))?,
                device_path,
                bar4: open_rw(&dir.join("resource4"))?,
                config: open_rw(&dir.join("config"))?,
                address,
                opened_by: None,
                container: None,
                lock: None,
            });
        }
        let containers_dir = root.join("vfio").join("containers");
        std::fs::create_dir_all(&containers_dir).map_err(|e| format!("{}: {e}", containers_dir.display()))?;
        Ok(Vfio {
            functions,
            containers: Vec::new(),
            // Unique across every `nicsim exec` of one nicsim: the engine's IOMMU keys on it.
            next_container: u64::from(std::process::id()) << 20,
            containers_dir,
            answers: HashMap::new(),
            opening: HashMap::new(),
            memlock,
        })
    }

    /// At the entry of one of [`SYSCALLS`]: answers it, rewrites it or lets it run.
    pub fn entry(&mut self, traced: &Traced, tid: u32, session: &Session) -> std::io::Result<()> {
        let mut regs = traced.registers(tid)?;
        let outcome = match regs.syscall as i64 {
            linux::SYS_openat => self.open(tid, &mut regs),
            linux::SYS_ioctl => self.ioctl(tid, &mut regs, session),
            n => self.read_or_write(tid, &regs, n == linux::SYS_pwrite64, session),
        };
        match outcome {
            Outcome::Run => traced.resume(tid, 0),
            Outcome::RunToExit => traced.resume_to_syscall_exit(tid),
            Outcome::Answer(value) => {
                self.answers.insert(tid, value);
                // Number -1 skips the call; its result is set at the exit.
                regs.syscall = u64::MAX;
                traced.set_registers(tid, &regs)?;
                traced.resume_to_syscall_exit(tid)
            }
            Outcome::Rewritten => {
                traced.set_registers(tid, &regs)?;
                traced.resume_to_syscall_exit(tid)
            }
        }
    }

    /// At a call's exit: the answer of a call answered here; a group taken if its open worked.
    pub fn exit(&mut self, traced: &Traced, tid: u32, ret: i64) {
        if let Some(value) = self.answers.remove(&tid) {
            if let Ok(mut regs) = traced.registers(tid) {
                regs.gp[0] = value as u64;
                let _ = traced.set_registers(tid, &regs);
            }
        }
        if let Some(f) = self.opening.remove(&tid) {
            if ret >= 0 {
                self.functions[f].opened_by = Some(tgid(tid));
            } else {
                self.functions[f].lock = None;
            }
        }
    }

    /// Process `pid` ended: its containers go (the engine resets their functions) and its
    /// groups are free.
    pub fn process_ended(&mut self, pid: u32, session: &Session) {
        for f in self.functions.iter_mut().filter(|f| f.opened_by == Some(pid)) {
            f.opened_by = None;
            f.lock = None;
        }
        let (gone, kept): (Vec<Container>, Vec<Container>) = self.containers.drain(..).partition(|c| c.tgid == pid);
        self.containers = kept;
        for c in gone {
            for f in self.functions.iter_mut().filter(|f| f.container == Some(c.id)) {
                f.container = None;
            }
            if let Err(e) = session.iommu(IommuOp::Release { container: c.id }) {
                eprintln!("nicsim exec: releasing VFIO container {}: {e}", c.id);
            }
            let _ = std::fs::remove_file(&c.path);
        }
    }

    /// Every process ended: releases what is left.
    pub fn finish(&mut self, session: &Session) {
        let pids: Vec<u32> = self.containers.iter().map(|c| c.tgid).collect();
        for pid in pids {
            self.process_ended(pid, session);
        }
        let _ = std::fs::remove_dir(&self.containers_dir);
    }

    fn open(&mut self, tid: u32, regs: &mut Registers) -> Outcome {
        let Some(path) = read_c_string(tid, regs.syscall_args()[1]) else { return Outcome::Run };
        if path == "/dev/vfio/vfio" {
            let id = self.next_container;
            self.next_container += 1;
            let file = self.containers_dir.join(format!("{}-{id}", std::process::id()));
            let made = std::fs::write(&file, b"")
                .and_then(|()| std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)));
            let Some(id_of_file) = made.ok().and_then(|()| file_id(&file)) else {
                return Outcome::Answer(-(linux::ENOMEM as i64));
            };
            let Some(at) = place_c_string(tid, regs, &file) else { return Outcome::Answer(-(linux::EFAULT as i64)) };
            regs.set_syscall_arg(1, at);
            self.containers.push(Container {
                id,
                file: id_of_file,
                path: file,
                tgid: tgid(tid),
                iommu_set: false,
                locked: 0,
            });
            return Outcome::Rewritten;
        }
        let Some(group) = path.strip_prefix("/dev/vfio/").and_then(|g| g.parse::<u32>().ok()) else {
            return Outcome::Run;
        };
        let Some(f) = self.functions.iter().position(|f| f.group == group) else { return Outcome::Run };
        if let Some(holder) = self.functions[f].opened_by {
            if Path::new(&format!("/proc/{holder}")).exists() {
                return Outcome::Answer(-(linux::EBUSY as i64));
            }
        }
        let node = root_node(&self.containers_dir, group);
        let locked = File::open(&node).ok().filter(|file| platform::fs::try_lock_exclusive(file).unwrap_or(false));
        let Some(lock) = locked else { return Outcome::Answer(-(linux::EBUSY as i64)) };
        self.functions[f].lock = Some(lock);
        self.opening.insert(tid, f);
        Outcome::RunToExit
    }

    fn kind_of(&self, tid: u32, fd: u64) -> Option<Descriptor> {
        let id = file_id(Path::new(&format!("/proc/{tid}/fd/{}", fd as i32)))?;
        if let Some(c) = self.containers.iter().position(|c| c.file == id) {
            return Some(Descriptor::Container(c));
        }
        if let Some(f) = self.functions.iter().position(|f| f.node == id) {
            return Some(Descriptor::Group(f));
        }
        let f = self.functions.iter().position(|f| f.device_id == id && f.container.is_some())?;
        Some(Descriptor::Device(f))
    }

    fn ioctl(&mut self, tid: u32, regs: &mut Registers, session: &Session) -> Outcome {
        let [fd, request, arg, ..] = regs.syscall_args();
        let request = request & 0xffff_ffff;
        let answer = match self.kind_of(tid, fd) {
            None => return Outcome::Run,
            Some(Descriptor::Container(c)) => self.container_ioctl(tid, c, request, arg, session),
            Some(Descriptor::Group(f)) if request == GROUP_GET_DEVICE_FD => return self.device_fd(tid, f, regs),
            Some(Descriptor::Group(f)) => self.group_ioctl(tid, f, request, arg, session),
            Some(Descriptor::Device(f)) => self.device_ioctl(tid, f, request, arg, session),
        };
        Outcome::Answer(answer.unwrap_or_else(|errno| -(errno as i64)))
    }

    fn container_ioctl(&mut self, tid: u32, c: usize, request: u64, arg: u64, session: &Session) -> Result<i64, i32> {
        let id = self.containers[c].id;
        let has_group = self.functions.iter().any(|f| f.container == Some(id));
        match request {
            GET_API_VERSION => Ok(0),
            CHECK_EXTENSION => Ok(i64::from(arg == TYPE1_IOMMU || arg == TYPE1V2_IOMMU)),
            SET_IOMMU => {
                if !has_group || !(arg == TYPE1_IOMMU || arg == TYPE1V2_IOMMU) {
                    return Err(linux::EINVAL);
                }
                if self.containers[c].iommu_set {
                    return Err(linux::EBUSY);
                }
                self.containers[c].iommu_set = true;
                Ok(0)
            }
            IOMMU_GET_INFO if self.containers[c].iommu_set => write_iommu_info(tid, arg).map(|()| 0),
            IOMMU_MAP_DMA if self.containers[c].iommu_set => {
                let m = read_bytes(tid, arg, 32).ok_or(linux::EFAULT)?;
                let (flags, vaddr, iova, len) = (u32_at(&m, 4), u64_at(&m, 8), u64_at(&m, 16), u64_at(&m, 24));
                if flags & !3 != 0 || flags == 0 {
                    return Err(linux::EINVAL);
                }
                let pid = tgid(tid);
                let limit = memlock_limit(pid, self.memlock);
                let locked: u64 = self.containers.iter().filter(|o| o.tgid == pid).map(|o| o.locked).sum();
                if limit.is_some_and(|l| locked.saturating_add(len) > l) {
                    return Err(linux::ENOMEM);
                }
                session.iommu(IommuOp::Map { container: id, pid, vaddr, iova, len }).map_err(|e| {
                    eprintln!("nicsim exec: VFIO_IOMMU_MAP_DMA of {vaddr:#x} at IOVA {iova:#x}+{len:#x}: {e}");
                    errno_of(&e)
                })?;
                self.containers[c].locked += len;
                Ok(0)
            }
            IOMMU_UNMAP_DMA if self.containers[c].iommu_set => {
                let m = read_bytes(tid, arg, 24).ok_or(linux::EFAULT)?;
                if u32_at(&m, 4) != 0 {
                    return Err(linux::EINVAL);
                }
                let (iova, len) = (u64_at(&m, 8), u64_at(&m, 16));
                let bytes = session.iommu(IommuOp::Unmap { container: id, iova, len }).map_err(|e| errno_of(&e))?;
                self.containers[c].locked = self.containers[c].locked.saturating_sub(bytes);
                write_bytes(tid, arg + 16, &bytes.to_le_bytes()).ok_or(linux::EFAULT)?;
                Ok(0)
            }
            IOMMU_GET_INFO | IOMMU_MAP_DMA | IOMMU_UNMAP_DMA => Err(linux::EINVAL),
            _ => Err(linux::ENOTTY),
        }
    }

    fn group_ioctl(&mut self, tid: u32, f: usize, request: u64, arg: u64, session: &Session) -> Result<i64, i32> {
        match request {
            GROUP_GET_STATUS => {
                // The group holds one function, bound to vfio-pci: always viable.
                let flags: u32 = 1 | if self.functions[f].container.is_some() { 2 } else { 0 };
                write_bytes(tid, arg + 4, &flags.to_le_bytes()).ok_or(linux::EFAULT)?;
                Ok(0)
            }
            GROUP_SET_CONTAINER => {
                let fd = read_bytes(tid, arg, 4).map(|b| u32_at(&b, 0)).ok_or(linux::EFAULT)?;
                let Some(Descriptor::Container(c)) = self.kind_of(tid, u64::from(fd)) else {
                    return Err(linux::EINVAL);
                };
                if self.functions[f].container.is_some() {
                    return Err(linux::EBUSY);
                }
                let (container, pid, port) = (self.containers[c].id, self.containers[c].tgid, self.functions[f].port);
                session.iommu(IommuOp::Attach { container, pid, port }).map_err(|e| {
                    eprintln!("nicsim exec: VFIO_GROUP_SET_CONTAINER: {e}");
                    linux::EINVAL
                })?;
                self.functions[f].container = Some(container);
                Ok(0)
            }
            GROUP_UNSET_CONTAINER => {
                let id = self.functions[f].container.take().ok_or(linux::EINVAL)?;
                if !self.functions.iter().any(|o| o.container == Some(id)) {
                    let _ = session.iommu(IommuOp::Release { container: id });
                    if let Some(c) = self.containers.iter_mut().find(|c| c.id == id) {
                        c.iommu_set = false;
                        c.locked = 0;
                    }
                }
                Ok(0)
            }
            _ => Err(linux::ENOTTY),
        }
    }

    /// `VFIO_GROUP_GET_DEVICE_FD`: becomes an `openat` of the BAR file a driver maps.
    fn device_fd(&mut self, tid: u32, f: usize, regs: &mut Registers) -> Outcome {
        let refuse = |errno: i32| Outcome::Answer(-(errno as i64));
        let Some(name) = read_c_string(tid, regs.syscall_args()[2]) else { return refuse(linux::EFAULT) };
        let func = &self.functions[f];
        let ready = func.container.is_some_and(|id| self.containers.iter().any(|c| c.id == id && c.iommu_set));
        if name != func.address || !ready {
            return refuse(linux::EINVAL);
        }
        let path = func.device_path.clone();
        let Some(at) = place_c_string(tid, regs, &path) else { return refuse(linux::EFAULT) };
        regs.syscall = linux::SYS_openat as u64;
        regs.set_syscall_arg(0, linux::AT_FDCWD as u64);
        regs.set_syscall_arg(1, at);
        regs.set_syscall_arg(2, (linux::O_RDWR | linux::O_CLOEXEC) as u64);
        regs.set_syscall_arg(3, 0);
        Outcome::Rewritten
    }

    fn device_ioctl(&mut self, tid: u32, f: usize, request: u64, arg: u64, session: &Session) -> Result<i64, i32> {
        match request {
            DEVICE_GET_INFO => {
                // flags RESET | PCI, nine regions, five interrupt kinds, no capabilities.
                let info = [3u32, REGIONS, IRQS, 0, 0];
                write_words(tid, arg + 4, &info, arg)?;
                Ok(0)
            }
            DEVICE_GET_REGION_INFO => {
                let index = read_bytes(tid, arg + 8, 4).map(|b| u32_at(&b, 0)).ok_or(linux::EFAULT)?;
                let (size, flags) = region(self.functions[f].virtio, index).ok_or(linux::EINVAL)?;
                let mut out = Vec::with_capacity(28);
                out.extend_from_slice(&flags.to_le_bytes());
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(&0u32.to_le_bytes());
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&(u64::from(index) << REGION_SHIFT).to_le_bytes());
                write_bytes(tid, arg + 4, &out).ok_or(linux::EFAULT)?;
                Ok(0)
            }
            DEVICE_GET_IRQ_INFO => {
                let index = read_bytes(tid, arg + 8, 4).map(|b| u32_at(&b, 0)).ok_or(linux::EFAULT)?;
                // (flags, count): INTx maskable and automasked, MSI, 64 MSI-X vectors [DS
                // 7.3.1], error and request notifications; all signalled by eventfd.
                let (flags, count): (u32, u32) = match index {
                    0 => (1 | 2 | 4, 1),
                    1 => (1 | 8, 1),
                    2 => (1 | 8, 64),
                    3 | 4 => (1, 1),
                    _ => return Err(linux::EINVAL),
                };
                let mut out = flags.to_le_bytes().to_vec();
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
                write_bytes(tid, arg + 4, &out).ok_or(linux::EFAULT)?;
                Ok(0)
            }
            // Taken, never signalled: nicsim raises no interrupts (docs/nicsim.md).
            DEVICE_SET_IRQS => {
                let index = read_bytes(tid, arg + 8, 4).map(|b| u32_at(&b, 0)).ok_or(linux::EFAULT)?;
                if index >= IRQS {
                    return Err(linux::EINVAL);
                }
                Ok(0)
            }
            DEVICE_RESET => {
                session.reset_function(self.functions[f].port).map_err(|_| linux::EINVAL)?;
                Ok(0)
            }
            _ => Err(linux::ENOTTY),
        }
    }

    /// `pread64`/`pwrite64` on a device descriptor: a region's bytes.
    fn read_or_write(&mut self, tid: u32, regs: &Registers, write: bool, session: &Session) -> Outcome {
        let [fd, buf, count, offset, ..] = regs.syscall_args();
        let Some(Descriptor::Device(f)) = self.kind_of(tid, fd) else { return Outcome::Run };
        let func = &self.functions[f];
        let (index, at) = ((offset >> REGION_SHIFT) as u32, offset & ((1 << REGION_SHIFT) - 1));
        let Some((size, _)) = region(func.virtio, index) else {
            return Outcome::Answer(-(linux::EINVAL as i64));
        };
        let count = count.min(size.saturating_sub(at)).min(4096);
        let file = match index {
            0 => &func.bar0,
            4 => &func.bar4,
            CONFIG_REGION => &func.config,
            _ => return Outcome::Answer(-(linux::EINVAL as i64)),
        };
        if count == 0 {
            return Outcome::Answer(0);
        }
        let done = if write {
            read_bytes(tid, buf, count as usize).and_then(|data| {
                // A dword store to an 82599's first page acts on the device now, as an MMIO
                // store does.
                if !func.virtio && index == 0 && at < 4096 && count == 4 && at % 4 == 0 {
                    session.write_register(func.port, at as u32, u32_at(&data, 0)).ok()
                } else {
                    file.write_all_at(&data, at).ok()
                }
            })
        } else {
            let mut data = vec![0u8; count as usize];
            file.read_exact_at(&mut data, at).ok().and_then(|()| write_bytes(tid, buf, &data))
        };
        Outcome::Answer(if done.is_some() { count as i64 } else { -(linux::EFAULT as i64) })
    }
}

/// Group `group`'s node in nicsim's root, beside the containers' directory.
fn root_node(containers_dir: &Path, group: u32) -> PathBuf {
    containers_dir.with_file_name(group.to_string())
}

enum Descriptor {
    Container(usize),
    Group(usize),
    Device(usize),
}

/// Region `index` of a function under vfio-pci: (size, flags READ 1 | WRITE 2 | MMAP 4). An
/// 82599's BAR4 holds the MSI-X table, which the kernel keeps to itself: read and write only.
/// A virtio function's BAR0 is I/O space, never mapped; its BAR4 holds the virtio 1.x
/// structures, mapped (and then served access by access).
fn region(virtio: bool, index: u32) -> Option<(u64, u32)> {
    match (virtio, index) {
        (false, 0) => Some((crate::regs::BAR0_LEN as u64, 1 | 2 | 4)),
        (false, 4) => Some((sysfs::BAR4_LEN as u64, 1 | 2)),
        (true, 0) => Some((crate::virtio::legacy::BAR_LEN, 1 | 2)),
        (true, 4) => Some((crate::virtio::modern::BAR_LEN, 1 | 2 | 4)),
        (_, CONFIG_REGION) => Some((crate::pciconfig::CONFIG_LEN as u64, 1 | 2)),
        (_, i) if i < REGIONS => Some((0, 0)),
        _ => None,
    }
}

/// `VFIO_IOMMU_GET_INFO`: page sizes and the IOVA-range and DMA-limit capabilities, or only
/// the size needed when the caller's buffer is too small (as the kernel does).
fn write_iommu_info(tid: u32, arg: u64) -> Result<(), i32> {
    let argsz = read_bytes(tid, arg, 4).map(|b| u32_at(&b, 0)).ok_or(linux::EFAULT)?;
    const BASE: u32 = 24;
    let ranges = crate::dma::iommu::IOVA_RANGES;
    let range_cap = 16 + 16 * ranges.len() as u32;
    let needed = BASE + range_cap + 12;
    // flags: PGSIZES | CAPS; 4 KiB, 2 MiB and 1 GiB pages.
    let mut out = Vec::new();
    out.extend_from_slice(&needed.to_le_bytes());
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&0x4020_1000u64.to_le_bytes());
    let fits = argsz >= needed;
    out.extend_from_slice(&(if fits { BASE } else { 0 }).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    if fits {
        // VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE (1), then ..._DMA_AVAIL (3).
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&(BASE + range_cap).to_le_bytes());
        out.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        for (start, end) in ranges {
            out.extend_from_slice(&start.to_le_bytes());
            out.extend_from_slice(&end.to_le_bytes());
        }
        out.extend_from_slice(&3u16.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&65535u32.to_le_bytes());
    }
    out.truncate(if fits { out.len() } else { (argsz as usize).clamp(16, BASE as usize) });
    write_bytes(tid, arg, &out).ok_or(linux::EFAULT)
}

/// Writes `words` at `at`, no further than the caller's `argsz` (read at `base`) allows.
fn write_words(tid: u32, at: u64, words: &[u32], base: u64) -> Result<(), i32> {
    let argsz = read_bytes(tid, base, 4).map(|b| u32_at(&b, 0)).ok_or(linux::EFAULT)? as u64;
    let room = argsz.saturating_sub(at - base) / 4;
    let bytes: Vec<u8> = words.iter().take(room as usize).flat_map(|w| w.to_le_bytes()).collect();
    write_bytes(tid, at, &bytes).ok_or(linux::EFAULT)
}

/// The errno a failed engine request names first ("EEXIST: …"), EINVAL otherwise.
fn errno_of(message: &str) -> i32 {
    match message.split(':').next() {
        Some("EEXIST") => linux::EEXIST,
        Some("EFAULT") => linux::EFAULT,
        _ => linux::EINVAL,
    }
}

/// Process `pid`'s RLIMIT_MEMLOCK in bytes (or `instead`); `None` if unlimited or it may lock
/// any amount (CAP_IPC_LOCK, bit 14), as type1 accounts pinned pages.
fn memlock_limit(pid: u32, instead: Option<u64>) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let caps = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    if u64::from_str_radix(caps.trim(), 16).ok()? & (1 << 14) != 0 {
        return None;
    }
    if instead.is_some() {
        return instead;
    }
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max locked memory"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn read_bytes(tid: u32, at: u64, len: usize) -> Option<Vec<u8>> {
    let mem = File::open(format!("/proc/{tid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, at).ok()?;
    Some(buf)
}

fn write_bytes(tid: u32, at: u64, data: &[u8]) -> Option<()> {
    let mem = File::options().write(true).open(format!("/proc/{tid}/mem")).ok()?;
    mem.write_all_at(data, at).ok()
}

/// A NUL-terminated string of at most 4 KiB in thread `tid`'s memory.
fn read_c_string(tid: u32, at: u64) -> Option<String> {
    let mem = File::open(format!("/proc/{tid}/mem")).ok()?;
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    while out.len() < 4096 {
        let n = mem.read_at(&mut chunk, at + out.len() as u64).ok().filter(|&n| n > 0)?;
        if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return String::from_utf8(out).ok();
        }
        out.extend_from_slice(&chunk[..n]);
    }
    None
}

/// Writes `path` as a C string below the thread's stack pointer, past the red zone (the call
/// is in progress: nothing of the thread's uses that memory until it returns).
fn place_c_string(tid: u32, regs: &Registers, path: &Path) -> Option<u64> {
    let bytes = path.as_os_str().as_encoded_bytes();
    let at = (regs.gp[4] - 128 - 4096) & !15;
    let mut data = bytes.to_vec();
    data.push(0);
    write_bytes(tid, at, &data)?;
    Some(at)
}
