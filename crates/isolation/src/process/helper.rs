//! The helper process's side. The helper is this same program, started again with
//! `SAFENIC_ISOLATION_HELPER` in its environment; a constructor (`.init_array`) sees it before
//! `main` and serves calls instead, so no program needs to cooperate. Addresses of functions
//! and embedded libraries arrive as the trusted process's and are moved by the difference
//! between the two processes' load addresses of one anchor: same file, same offsets.

use super::control::{publish, wait_change, Control, Cpus, CONTROL_BYTES};
use crate::frame::{case_id, Binding, Entry, Frame, Invocation, RESULT_MAX};
use crate::library::MAX_SYMBOLS;
use crate::library::{Library, Loaded, Namespace, Prepared, Source};
use crate::region::{io_bytes, IoArea};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;

pub(crate) const ENVIRONMENT: &str = "SAFENIC_ISOLATION_HELPER";

static ANCHOR: u8 = 0;

/// This process's address of the anchor.
pub(crate) fn anchor() -> usize {
    std::hint::black_box(&ANCHOR) as *const u8 as usize
}

/// What the helper needs to know, as one environment variable.
pub(crate) struct Spec {
    pub fd: i32,
    pub input_bytes: usize,
    pub output_bytes: usize,
    pub parent: u32,
    pub anchor: usize,
    pub spin: Duration,
    pub cpu: Option<usize>,
    pub c_library: Library,
    pub symbols: Vec<&'static str>,
}

impl Spec {
    pub fn encode(&self) -> String {
        let library = match self.c_library.source {
            Source::System(name) => format!("s={name}"),
            Source::Embedded { name, elf } => format!("e={name}@{:x}+{}", elf.as_ptr() as usize, elf.len()),
        };
        format!(
            "{};{};{};{};{:x};{};{};{};{}",
            self.fd,
            self.input_bytes,
            self.output_bytes,
            self.parent,
            self.anchor,
            self.spin.as_micros(),
            self.cpu.map_or(-1, |c| c as i64),
            library,
            self.symbols.join(",")
        )
    }
}

// SAFETY: `.init_array` holds pointers to functions the loader calls before main with
// (argc, argv, envp), which a function without parameters may ignore.
#[used]
#[link_section = ".init_array"]
static HELPER_ENTRY: extern "C" fn() = helper_entry;

extern "C" fn helper_entry() {
    let Some(spec) = std::env::var_os(ENVIRONMENT) else { return };
    let code = match serve(&spec.to_string_lossy()) {
        Ok(never) => match never {},
        Err(message) => {
            eprintln!("isolation helper: {message}");
            70
        }
    };
    // SAFETY: ends this helper process without running the program it is a copy of.
    unsafe { libc::_exit(code) };
}

enum Never {}

fn serve(spec: &str) -> Result<Never, String> {
    let fields: Vec<&str> = spec.splitn(9, ';').collect();
    let [fd, input, output, parent, anchor_hex, spin, cpu, library, symbols] = fields[..] else {
        return Err(format!("malformed {ENVIRONMENT}"));
    };
    let number = |s: &str| s.parse::<usize>().map_err(|_| format!("malformed {ENVIRONMENT}: {s}"));
    let (fd, input_bytes, output_bytes, parent) =
        (number(fd)? as i32, number(input)?, number(output)?, number(parent)? as i32);
    let parent_anchor = usize::from_str_radix(anchor_hex, 16).map_err(|_| format!("malformed anchor {anchor_hex}"))?;
    let spin = Duration::from_micros(number(spin)? as u64);
    let delta = anchor().wrapping_sub(parent_anchor);
    if let Ok(cpu) = cpu.parse::<usize>() {
        pin(cpu)?;
    }

    // SAFETY: prctl with integer arguments: the helper dies with the thread that started it.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    // SAFETY: getppid takes no arguments.
    if unsafe { libc::getppid() } != parent {
        return Err("the trusted process is gone".into());
    }
    let len = CONTROL_BYTES + io_bytes(input_bytes, output_bytes);
    // SAFETY: maps the shared memfd the trusted process created for this helper.
    let base =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    if base == libc::MAP_FAILED {
        return Err(format!("mapping the shared memory: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the mapping keeps the memory; the descriptor is not needed any more.
    unsafe { libc::close(fd) };
    // SAFETY: the control page starts the mapping; both processes access it only atomically.
    let control = unsafe { &*(base as *const Control) };
    let area = IoArea {
        base: (base as *mut u8).wrapping_add(CONTROL_BYTES),
        input_cap: input_bytes,
        output_cap: output_bytes,
    };

    // The library's code (its initialisers, threads they would start) runs only once the
    // helper is confined: no writes, no other process reached, the loading allowlist.
    report_faults(control)?;
    let names: Vec<&str> = symbols.split(',').filter(|s| !s.is_empty()).collect();
    let mut binding = Binding { case: 0, isolated: true };
    let loaded = prepare(library, delta)
        .and_then(|(prepared, name)| {
            binding.case = case_id(name, &names);
            platform::confine::sandbox_this_process().map_err(|e| e.to_string())?;
            super::seccomp::apply(super::seccomp::Stage::Load)?;
            load(prepared, &names)
        })
        .and_then(|table| super::seccomp::apply(super::seccomp::Stage::Serve).map(|()| table));
    let table = match loaded {
        Ok(t) => t,
        Err(message) => {
            report(area, control, &message);
            return Err(message);
        }
    };
    let cpus = || Cpus { mine: &control.helper_cpu.0, theirs: &control.caller_cpu.0 };
    // Before the first request: a caller on this CPU then knows not to poll for the answer.
    cpus().note();
    publish(&control.ready.0, 1, &control.caller_sleeps.0);

    let mut last = 0;
    loop {
        let cpus = cpus();
        let Some(request) =
            wait_change(&control.request.0, last, &control.helper_sleeps.0, cpus, spin, None, &mut || false)
        else {
            continue;
        };
        let sequence = request.value;
        last = sequence;
        let frame = area.frame();
        // SAFETY: the frame was written by the trusted process before it published the request.
        let (run, function) = unsafe { ((*frame).run.wrapping_add(delta), (*frame).function.wrapping_add(delta)) };
        let invocation = Invocation {
            frame,
            input: area.input(),
            output: area.output(),
            function,
            symbols: table.as_ptr(),
            binding,
        };
        // SAFETY: `run` is the trusted process's entry for this call's types, moved to this
        // process's load address; the areas are mapped and the frame is prepared.
        unsafe {
            let entry: Entry = std::mem::transmute::<usize, Entry>(run);
            entry(&invocation);
        }
        publish(&control.response.0, sequence, &control.caller_sleeps.0);
    }
}

/// The library the spec names, ready to load (nothing of its code has run), and its name.
fn prepare(library: &str, delta: usize) -> Result<(Prepared, &'static str), String> {
    let library = if let Some(name) = library.strip_prefix("s=") {
        Library::system(Box::leak(name.to_string().into_boxed_str()))
    } else if let Some(rest) = library.strip_prefix("e=") {
        let (name, place) = rest.split_once('@').ok_or("malformed library")?;
        let (address, len) = place.split_once('+').ok_or("malformed library")?;
        let address = usize::from_str_radix(address, 16).map_err(|_| "malformed library address")?.wrapping_add(delta);
        let len: usize = len.parse().map_err(|_| "malformed library length")?;
        // SAFETY: the same embedded bytes as in the trusted process, at this process's address
        // of them (same file, same offset); they live as long as the program.
        let elf: &'static [u8] = unsafe { std::slice::from_raw_parts(address as *const u8, len) };
        Library::embedded(Box::leak(name.to_string().into_boxed_str()), elf)
    } else {
        return Err("malformed library".into());
    };
    Ok((Prepared::new(&library).map_err(|e| e.0)?, library.name()))
}

/// Loads the prepared library (its initialisers run) and resolves `names`.
fn load(prepared: Prepared, names: &[&str]) -> Result<[usize; MAX_SYMBOLS], String> {
    let loaded = Loaded::open_prepared(prepared, Namespace::Main).map_err(|e| e.0)?;
    let table = loaded.symbols(names).map_err(|e| e.0)?;
    std::mem::forget(loaded);
    Ok(table)
}

fn pin(cpu: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it (cpu is checked against its size).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(format!("CPU {cpu} is beyond the CPU set"));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!("pinning the helper to CPU {cpu}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

static CONTROL: AtomicPtr<Control> = AtomicPtr::new(std::ptr::null_mut());

/// The helper records which fault signal ends it (for the caller's violation) and then dies of
/// it, as it would have.
fn report_faults(control: &Control) -> Result<(), String> {
    CONTROL.store(control as *const Control as *mut Control, Ordering::SeqCst);
    crate::signal_stack::install_alternate_stack(None)?;
    for signal in crate::signal_stack::FAULT_SIGNALS {
        // SAFETY: plain data, then a valid sigaction call with an async-signal-safe handler.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record_fault as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESETHAND;
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(format!("sigaction: {}", std::io::Error::last_os_error()));
            }
        }
    }
    Ok(())
}

/// Records the signal in the control page and returns: the handler is reset, so the faulting
/// instruction (or abort's second raise) ends the helper with the default action.
extern "C" fn record_fault(signal: i32, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    let control = CONTROL.load(Ordering::SeqCst);
    if control.is_null() {
        return;
    }
    // SAFETY: the control page stays mapped for the helper's life; the kernel passes a valid
    // siginfo to an SA_SIGINFO handler.
    unsafe {
        let fault = &(*control).fault;
        fault.code.store((*info).si_code as u32, Ordering::SeqCst);
        fault.address.store((*info).si_addr() as u64, Ordering::SeqCst);
        fault.signal.store(signal as u32, Ordering::SeqCst);
    }
}

/// Tells the trusted process why the helper could not start.
fn report(area: IoArea, control: &Control, message: &str) {
    let frame: *mut Frame = area.frame();
    let bytes = message.as_bytes();
    let n = bytes.len().min(RESULT_MAX);
    // SAFETY: the frame is mapped; the trusted process reads it only after `ready` says 2.
    let frame = unsafe { &mut *frame };
    frame.result[..n].copy_from_slice(&bytes[..n]);
    frame.output_len = n as u64;
    publish(&control.ready.0, 2, &control.caller_sleeps.0);
}
