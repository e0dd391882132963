//! The in-process backend: a protection key per domain (Intel SDM Vol. 3A §4.6.2), under which
//! the domain's stack, heap, I/O area and its library's data live. Inside, the domain may
//! write only memory under its key and read the rest of the process; two PKRU writes per call
//! (trampoline.rs). A fault or a time-out resumes at the entry point (signals.rs, watchdog.rs),
//! and the domain is discarded: its library's data written back from the snapshot taken at
//! load (namespace.rs), its heap and stack returned to the kernel's zero pages.

mod namespace;
mod signals;
mod trampoline;
mod watchdog;

use crate::config::Config;
use crate::executor::Executor;
use crate::frame::{Binding, Entry, Invocation};
use crate::region::{io_bytes, page_up, IoArea, Mapping};
use crate::violation::{SetupError, ViolationKind};
use namespace::LibraryNamespace;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use trampoline::{isolation_mpk_enter, isolation_mpk_state};
use watchdog::Watch;

const GUARD: usize = 4096;

/// What a domain keeps across discards, and what a dropped domain leaves for the next one of
/// the same library: a link namespace cannot be unloaded, and keys are few (15).
struct Core {
    c_library_name: &'static str,
    sizes: (usize, usize, usize, usize),
    key: u32,
    memory: Mapping,
    stack: (usize, usize),
    heap: (usize, usize),
    area: IoArea,
    namespace: LibraryNamespace,
}

// SAFETY: a Core is owned by one domain (or the pool) at a time; its raw addresses are its own
// mappings.
unsafe impl Send for Core {}

static POOL: Mutex<Vec<Core>> = Mutex::new(Vec::new());

pub(crate) struct MpkDomain {
    core: Option<Core>,
    binding: Binding,
    rights: u32,
    watch: Option<Arc<Watch>>,
    timeout: Option<Duration>,
}

impl MpkDomain {
    pub fn new(config: &Config) -> Result<MpkDomain, SetupError> {
        signals::install().map_err(SetupError)?;
        let sizes = (config.stack_bytes, config.heap_bytes, config.input_bytes, config.output_bytes);
        let name = config.c_library.name();
        let pooled = {
            let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
            pool.iter().position(|core| core.c_library_name == name && core.sizes == sizes).map(|i| pool.swap_remove(i))
        };
        let mut core = match pooled {
            Some(core) => core,
            None => Core::new(config)?,
        };
        core.namespace.resolve(&config.symbols)?;
        let rights = crate::pku::domain_rights(core.key, signals::signal_key());
        let watch = config.timeout.map(Watch::new);
        let binding = Binding { case: config.case(), isolated: true };
        Ok(MpkDomain { core: Some(core), binding, rights, watch, timeout: config.timeout })
    }

    fn core(&self) -> &Core {
        self.core.as_ref().expect("a live domain has its core")
    }
}

impl Core {
    fn new(config: &Config) -> Result<Core, SetupError> {
        let key = crate::pku::alloc().map_err(|e| {
            SetupError(format!("no protection key left ({e}): at most 15 MPK domains live at once; drop one, or use the process backend"))
        })?;
        let stack_bytes = page_up(config.stack_bytes);
        let heap_bytes = page_up(config.heap_bytes);
        let io = io_bytes(config.input_bytes, config.output_bytes);
        let total = GUARD + stack_bytes + GUARD + heap_bytes + GUARD + io + GUARD;
        let memory = Mapping::new(total, libc::PROT_NONE, None)?;
        let base = memory.base as usize;
        let stack = (base + GUARD, stack_bytes);
        let heap = (stack.0 + stack_bytes + GUARD, heap_bytes);
        let io_base = heap.0 + heap_bytes + GUARD;
        for (address, len) in [stack, heap, (io_base, io)] {
            crate::pku::protect(address, len, libc::PROT_READ | libc::PROT_WRITE, key)
                .map_err(|e| SetupError(format!("tagging a domain's memory with key {key}: {e}")))?;
        }
        let namespace = LibraryNamespace::load(&config.c_library, &config.symbols, heap.0, heap.1, key)?;
        let area = IoArea { base: io_base as *mut u8, input_cap: config.input_bytes, output_cap: config.output_bytes };
        let sizes = (config.stack_bytes, config.heap_bytes, config.input_bytes, config.output_bytes);
        Ok(Core { c_library_name: config.c_library.name(), sizes, key, memory, stack, heap, area, namespace })
    }

    /// Back to the state right after loading: the library's data from the snapshot, the
    /// heap and stack as zero pages.
    fn reset(&self) {
        self.namespace.restore();
        for (address, len) in [self.stack, self.heap] {
            // SAFETY: the domain's own private anonymous pages; nothing runs in it now.
            unsafe { libc::madvise(address as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        }
        let _ = &self.memory;
    }
}

impl Drop for MpkDomain {
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            if thread_rights(core.key).is_ok() {
                core.reset();
                POOL.lock().unwrap_or_else(|p| p.into_inner()).push(core);
            }
        }
    }
}

/// Gives this thread the rights the trusted side needs (the domain's key and the signal key
/// too) and prepares it (signals::prepare_thread); returns those rights. Writes PKRU only the first time a thread
/// meets a key.
fn thread_rights(key: u32) -> Result<u32, String> {
    signals::prepare_thread()?;
    Ok(grant(key))
}

/// Grants this thread the domain's key and the signal key, if it lacks them; returns its rights.
fn grant(key: u32) -> u32 {
    let current = crate::pku::read();
    let trusted = current & !crate::pku::bits(key) & !crate::pku::bits(signals::signal_key());
    if trusted != current {
        // SAFETY: only grants this thread access to the domain's key in addition to what it had.
        unsafe { crate::pku::write(trusted) };
    }
    trusted
}

fn thread_id() -> i32 {
    thread_local! {
        static ID: i32 = {
            // SAFETY: gettid takes no arguments.
            unsafe { libc::syscall(libc::SYS_gettid) as i32 }
        };
    }
    ID.with(|id| *id)
}

impl Executor for MpkDomain {
    /// The trusted side is about to touch the domain's memory, possibly from a thread that has
    /// never called it: grant that thread the key first.
    fn area(&self) -> IoArea {
        grant(self.core().key);
        self.core().area
    }

    fn execute(&mut self, entry: Entry) -> Result<(), ViolationKind> {
        let core = self.core();
        let trusted = thread_rights(core.key).map_err(|reason| ViolationKind::ThreadSetup { reason })?;
        let stack_top = (core.stack.0 + core.stack.1 - 64) & !15;
        // SAFETY: this thread's TLS block; no domain runs on this thread now.
        let state = unsafe { &mut *isolation_mpk_state() };
        state.trusted_pkru = trusted;
        state.stack_low = core.stack.0 as u64;
        state.stack_high = (core.stack.0 + core.stack.1) as u64;
        state.fault_signal = 0;
        let invocation = Invocation {
            frame: core.area.frame(),
            input: core.area.input(),
            output: core.area.output(),
            // SAFETY: the frame is domain memory the trusted side just wrote.
            function: unsafe { (*core.area.frame()).function },
            symbols: core.namespace.symbols.as_ptr(),
            binding: self.binding,
        };
        if let Some(w) = &self.watch {
            w.begin(thread_id());
        }
        // SAFETY: the stack, I/O area and library data are mapped under the domain's key, which
        // `self.rights` grants; the frame was prepared for `entry`'s types; the signal handler
        // is installed and this thread has an alternate stack.
        let rewound = unsafe { isolation_mpk_enter(&invocation, entry, stack_top, self.rights) };
        if let Some(w) = &self.watch {
            w.end();
        }
        if rewound == 0 {
            return Ok(());
        }
        // SAFETY: as above; the handler has finished writing it.
        let state = unsafe { &*isolation_mpk_state() };
        if state.fault_signal == signals::timeout_signal() {
            return Err(ViolationKind::Timeout { after: self.timeout.unwrap_or_default() });
        }
        Err(ViolationKind::Fault {
            signal: state.fault_signal,
            code: state.fault_code,
            address: state.fault_address as usize,
            pkey: (state.fault_pkey != u32::MAX).then_some(state.fault_pkey),
        })
    }

    fn discard(&mut self) {
        self.core().reset();
    }
}
