//! Serving, one access at a time, a BAR that a driver maps with `mmap`, as a hypervisor serves
//! MMIO. The modern virtio interface has registers that act on each access (`queue_select` and
//! the feature selectors change what the next read returns [virtio 1.2 §4.1.4.3]), which a
//! shared page cannot do. So the command runs under ptrace: its `mmap` of a trapped
//! `resourceN` becomes an inaccessible anonymous mapping of the same length, every access there
//! faults, and nicsim decodes the instruction ([`super::x86`]), performs the access with
//! `pread`/`pwrite` on the BAR's file (which acts on it, docs/nicsim.md), writes the result
//! into the register and steps past it. Only `mmap` and `munmap` stop the command (a seccomp
//! filter); everything else runs at full speed.
//!
//! An 82599's BAR0 has its first page served so: CTRL, STATUS, EEC, EERD, I2CCTL and the
//! interrupt registers, which drivers poll within microseconds of a write (DPDK reads CTRL.RST
//! back 10 times a microsecond apart after a reset [DS 4.6.3.2], and bit-bangs the SFP+
//! module's I2C bus). A store there is taken by the device before the instruction completes
//! ([`Session::write_register`]), so the answer is there whenever nicsim's engine ran; the
//! rest of the BAR (the tails, every data-path register) stays the shared file, mapped as
//! the driver asked.

use super::vfio::{self, Vfio};
use super::x86::{self, Access, AluInto, Extend, Source};
use crate::session::Session;
use platform::process::tgid;
use platform::trace::{linux, Stop, Traced};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How much of a BAR's mapping is served access by access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// All of it, through the BAR's file, whose reads and writes act (virtio's, served by FUSE).
    Whole,
    /// Its first page, port `port`'s 82599 control registers: stores through the engine.
    FirstPage { port: usize },
}

/// A BAR whose mappings are served, wholly or in part, access by access.
#[derive(Debug, Clone)]
pub struct TrappedBar {
    pub path: PathBuf,
    pub served: Served,
}

const PAGE: u64 = 4096;

/// A BAR whose mappings are served access by access.
struct Bar {
    path: PathBuf,
    file: File,
    served: Served,
    /// (device, inode), to recognise the file behind a descriptor of the command.
    id: (u64, u64),
}

/// An `mmap` of a BAR under way in one thread.
#[derive(Clone, Copy)]
struct PendingMap {
    bar: usize,
    offset: u64,
    len: u64,
    /// What the command asked for, to map the part that is not served after the call.
    prot: u64,
    fd: u64,
}

/// A trapped mapping in one process of the command.
#[derive(Clone, Copy)]
struct Mapping {
    tgid: u32,
    start: u64,
    len: u64,
    bar: usize,
    /// Where in the BAR the mapping starts.
    offset: u64,
}

/// `mmap` and `munmap` (x86-64).
const TRACED_SYSCALLS: [i64; 2] = [linux::SYS_mmap, linux::SYS_munmap];

/// Runs `command` with its mappings of `bars` served access by access, the first pages of
/// 82599 BARs through the nicsim serving `root`, and its VFIO calls answered by `vfio` if
/// given; returns its exit code (128 + the signal that ended it). SIGINT and SIGTERM to this
/// process are passed on once.
pub fn run_trapping_bars(
    command: &mut Command,
    bars: &[TrappedBar],
    root: &Path,
    vfio: Option<Vfio>,
) -> Result<i32, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut syscalls = TRACED_SYSCALLS.to_vec();
    if vfio.is_some() {
        syscalls.extend(vfio::SYSCALLS);
    }
    let mut traced = Traced::spawn(command, &syscalls).map_err(|e| {
        format!("cannot run {program} under ptrace: {e} (is it installed and on PATH, and ptrace allowed?)")
    })?;
    // Opened once the command runs, so that nicsim counts these accesses as the command's.
    let bars = bars
        .iter()
        .map(|b| {
            let path = &b.path;
            let file =
                File::options().read(true).write(true).open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let m = file.metadata().map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(Bar { path: path.clone(), file, served: b.served, id: (m.dev(), m.ino()) })
        })
        .collect::<Result<Vec<_>, String>>();
    let bars = match bars {
        Ok(b) => b,
        Err(e) => {
            let _ = traced.kill(linux::SIGKILL);
            return Err(e);
        }
    };
    let mut trap = Trap { bars, mappings: Vec::new(), pending: HashMap::new(), session: Session::connect(root), vfio };
    let _passing_on = PassOnTermination::start(traced.pid);
    loop {
        let stop = traced.next_stop().map_err(|e| format!("tracing {program}: {e}"))?;
        let resumed = match stop {
            Stop::Exited { tid, code } if tid == traced.pid => {
                if let Some(v) = trap.vfio.as_mut() {
                    v.finish(&trap.session);
                }
                return Ok(code);
            }
            Stop::Exited { tid, .. } => {
                if let Some(v) = trap.vfio.as_mut() {
                    v.process_ended(tid, &trap.session);
                }
                Ok(())
            }
            Stop::Interrupted => Ok(()),
            Stop::Event { tid } => traced.resume(tid, 0),
            // Job control would stop a traced command for good: it is not passed on.
            Stop::Signal { tid, signal }
                if [linux::SIGSTOP, linux::SIGTSTP, linux::SIGTTIN, linux::SIGTTOU].contains(&signal) =>
            {
                traced.resume(tid, 0)
            }
            Stop::Signal { tid, signal } => traced.resume(tid, signal),
            Stop::SyscallEntry { tid } => trap.syscall_entry(&traced, tid),
            Stop::SyscallExit { tid, ret } => {
                trap.syscall_exit(&traced, tid, ret);
                traced.resume(tid, 0)
            }
            Stop::Fault { tid, addr } => match trap.serve(&traced, tid, addr) {
                Ok(true) => traced.resume(tid, 0),
                Ok(false) => traced.resume(tid, linux::SIGSEGV),
                Err(why) => {
                    eprintln!("nicsim exec: {why}");
                    traced.resume(tid, linux::SIGSEGV)
                }
            },
        };
        // A thread killed while stopped (the command exiting) cannot be resumed: not an error.
        if let Err(e) = resumed {
            if e.raw_os_error() != Some(linux::ESRCH) {
                return Err(format!("tracing {program}: {e}"));
            }
        }
    }
}

/// Passes SIGINT or SIGTERM to this process on to the command, once, from a thread of its own.
/// The tracing loop cannot: a signal that comes while it serves a stop does not interrupt the
/// `waitpid` it waits in next, which then waits for as long as the command runs (a loaded host
/// made that likely: the command never saw its SIGTERM). Stops when dropped.
struct PassOnTermination {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl PassOnTermination {
    fn start(pid: u32) -> PassOnTermination {
        use std::sync::atomic::Ordering;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watching = done.clone();
        std::thread::spawn(move || {
            while !watching.load(Ordering::Relaxed) {
                if platform::signals::terminate_requested() {
                    let _ = platform::signals::send(pid, platform::signals::Signal::Terminate);
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        });
        PassOnTermination { done }
    }
}

impl Drop for PassOnTermination {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

struct Trap {
    bars: Vec<Bar>,
    mappings: Vec<Mapping>,
    /// Threads inside an `mmap` of a BAR.
    pending: HashMap<u32, PendingMap>,
    /// The nicsim whose engine takes the stores to an 82599's first page.
    session: Session,
    /// The VFIO calls' state under `nicsim exec --vfio`.
    vfio: Option<Vfio>,
}

impl Trap {
    fn bar_behind(&self, tid: u32, fd: i32) -> Option<usize> {
        let m = std::fs::metadata(format!("/proc/{tid}/fd/{fd}")).ok()?;
        self.bars.iter().position(|b| b.id == (m.dev(), m.ino()))
    }

    /// At `mmap` of a BAR: map inaccessible anonymous memory instead, where the command asked
    /// (MAP_FIXED kept), and note it at the exit. At `munmap`: forget what it covers.
    fn syscall_entry(&mut self, traced: &Traced, tid: u32) -> std::io::Result<()> {
        let mut regs = traced.registers(tid)?;
        if let Some(v) = self.vfio.as_mut() {
            if vfio::SYSCALLS.contains(&(regs.syscall as i64)) {
                return v.entry(traced, tid, &self.session);
            }
        }
        let args = regs.syscall_args();
        if regs.syscall == linux::SYS_munmap as u64 {
            let (start, end, tgid) = (args[0], args[0].saturating_add(args[1]), tgid(tid));
            self.mappings.retain(|m| m.tgid != tgid || m.start + m.len <= start || end <= m.start);
            return traced.resume(tid, 0);
        }
        let Some(bar) = self.bar_behind(tid, args[4] as i32) else { return traced.resume(tid, 0) };
        // Through a VFIO device descriptor a BAR lies at its region's offset (index × 2^40).
        let offset = args[5] & ((1 << platform::vfio::uapi::REGION_SHIFT) - 1);
        if matches!(self.bars[bar].served, Served::FirstPage { .. }) && offset >= PAGE {
            // The first page is not in this mapping: nothing of it is served.
            return traced.resume(tid, 0);
        }
        self.pending.insert(tid, PendingMap { bar, offset, len: args[1], prot: args[2], fd: args[4] });
        let placement = args[3] & (linux::MAP_FIXED | linux::MAP_FIXED_NOREPLACE) as u64;
        regs.set_syscall_arg(2, linux::PROT_NONE as u64);
        regs.set_syscall_arg(3, (linux::MAP_PRIVATE | linux::MAP_ANONYMOUS) as u64 | placement);
        regs.set_syscall_arg(4, u64::MAX);
        regs.set_syscall_arg(5, 0);
        traced.set_registers(tid, &regs)?;
        traced.resume_to_syscall_exit(tid)
    }

    /// After the `mmap` of a BAR: note what is served; for an 82599's BAR0, map the pages after
    /// the first one as the command asked, over the inaccessible memory.
    fn syscall_exit(&mut self, traced: &Traced, tid: u32, ret: i64) {
        if let Some(v) = self.vfio.as_mut() {
            v.exit(traced, tid, ret);
        }
        let Some(p) = self.pending.remove(&tid) else { return };
        // -4095..-1 are errors [syscall(2)].
        if (-4095..0).contains(&ret) {
            return;
        }
        let start = ret as u64;
        let mut len = p.len;
        if matches!(self.bars[p.bar].served, Served::FirstPage { .. }) && p.len > PAGE {
            let flags = (linux::MAP_SHARED | linux::MAP_FIXED) as u64;
            let args = [start + PAGE, p.len - PAGE, p.prot, flags, p.fd, p.offset + PAGE];
            match traced.inject_syscall(tid, linux::SYS_mmap, args) {
                Ok(r) if r as u64 == start + PAGE => len = PAGE,
                // Left inaccessible, the whole mapping is served: slower, the same answers.
                Ok(r) => {
                    eprintln!("nicsim exec: mapping the rest of {}: error {}", self.bars[p.bar].path.display(), -r)
                }
                Err(e) => eprintln!("nicsim exec: mapping the rest of {}: {e}", self.bars[p.bar].path.display()),
            }
        }
        self.mappings.push(Mapping { tgid: tgid(tid), start, len, bar: p.bar, offset: p.offset });
    }

    /// Stores the low `size` bytes of `value` at `offset` of BAR `bar`: a dword of an 82599's
    /// first page through the engine (taken before the instruction completes), else the file.
    fn store(&self, bar: usize, offset: u64, size: usize, value: u64) -> Result<(), String> {
        let bar = &self.bars[bar];
        let through_engine = match bar.served {
            Served::FirstPage { port } if size == 4 && offset % 4 == 0 => {
                let taken = self.session.write_register(port, offset as u32, value as u32);
                if let Err(e) = &taken {
                    eprintln!("nicsim exec: {} at {offset:#x}: {e}; written to the file", bar.path.display());
                }
                taken.is_ok()
            }
            _ => false,
        };
        if !through_engine {
            bar.file
                .write_all_at(&value.to_le_bytes()[..size], offset)
                .map_err(|e| format!("{} at {offset:#x}: {e}", bar.path.display()))?;
        }
        Ok(())
    }

    /// Performs the access at `addr` if it lies in a trapped mapping: `Ok(false)` if not (a
    /// real fault, delivered as such).
    fn serve(&mut self, traced: &Traced, tid: u32, addr: u64) -> Result<bool, String> {
        let tgid = tgid(tid);
        let covers = |m: &&Mapping, owner: u32| m.tgid == owner && m.start <= addr && addr - m.start < m.len;
        if !self.mappings.iter().any(|m| covers(&m, tgid)) {
            // A forked child inherits its parent's mappings, trapped ones included.
            let parent = platform::process::status_field(tgid, "PPid:").unwrap_or(0);
            let Some(m) = self.mappings.iter().find(|m| covers(m, parent)) else { return Ok(false) };
            let inherited = Mapping { tgid, ..*m };
            self.mappings.push(inherited);
        }
        let Some(m) = self.mappings.iter().find(|m| covers(m, tgid)) else { return Ok(false) };
        let bar = &self.bars[m.bar];
        let offset = m.offset + (addr - m.start);
        let mut regs = traced.registers(tid).map_err(|e| e.to_string())?;
        let code = instruction_bytes(tid, regs.rip);
        let decoded = x86::decode(&code).ok_or_else(|| {
            format!(
                "cannot serve the access at {:#x} to {} (instruction {:02x?} at {:#x}): only moves and ADD, OR, AND, SUB, XOR, CMP, TEST with memory are served (docs/nicsim.md)",
                offset,
                bar.path.display(),
                &code[..code.len().min(8)],
                regs.rip
            )
        })?;
        let failed = |e: std::io::Error| format!("{} at {offset:#x}: {e}", bar.path.display());
        let value_of = |regs: &platform::trace::Registers, source: Source| match source {
            Source::Register(r) => x86::register_value(&regs.gp, r),
            Source::Immediate(v) => v,
        };
        match decoded.access {
            Access::Store { size, value } => self.store(m.bar, offset, size, value_of(&regs, value))?,
            Access::Load { size, reg, into } => {
                let raw = read_bar(bar, offset, size).map_err(failed)?;
                let n = x86::register_index(reg);
                regs.gp[n] = x86::load_into(regs.gp[n], raw, size, reg, into);
            }
            Access::Alu { op, size, operand, into } => {
                // One read and, unless it only compares, one write: as the CPU's locked-free
                // read-modify-write does on uncached memory.
                let memory = read_bar(bar, offset, size).map_err(failed)?;
                let right = value_of(&regs, operand);
                match into {
                    AluInto::Memory => {
                        let (result, flags) = x86::alu(op, memory, right, size, regs.flags);
                        regs.flags = flags;
                        if x86::writes(op) {
                            self.store(m.bar, offset, size, result)?;
                        }
                    }
                    AluInto::Register(reg) => {
                        let left = x86::register_value(&regs.gp, reg);
                        let (result, flags) = x86::alu(op, left, memory, size, regs.flags);
                        regs.flags = flags;
                        if x86::writes(op) {
                            let n = x86::register_index(reg);
                            let into = if size == 4 || size == 8 {
                                Extend::Zero { width: size }
                            } else {
                                Extend::Merge { width: size }
                            };
                            regs.gp[n] = x86::load_into(regs.gp[n], result, size, reg, into);
                        }
                    }
                }
            }
        }
        regs.rip += decoded.len as u64;
        traced.set_registers(tid, &regs).map_err(|e| e.to_string())?;
        Ok(true)
    }
}

/// `size` bytes of `bar` at `offset`, little-endian.
fn read_bar(bar: &Bar, offset: u64, size: usize) -> std::io::Result<u64> {
    let mut raw = [0u8; 8];
    bar.file.read_exact_at(&mut raw[..size], offset)?;
    Ok(u64::from_le_bytes(raw))
}

/// Up to 15 bytes (the longest instruction) at `rip` in thread `tid`'s memory; fewer where
/// the code ends at an unmapped page.
fn instruction_bytes(tid: u32, rip: u64) -> Vec<u8> {
    let Ok(mem) = File::open(Path::new(&format!("/proc/{tid}/mem"))) else { return Vec::new() };
    let mut code = vec![0u8; 15];
    let mut have = 0;
    while have < code.len() {
        match mem.read_at(&mut code[have..], rip + have as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => have += n,
        }
    }
    code.truncate(have);
    code
}
