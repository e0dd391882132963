//! Running closures on EAL's worker lcores, scoped like `std::thread::scope`: a closure may
//! borrow what outlives the scope (its queues, the port), and the scope returns only after
//! every closure it launched has returned.

use crate::eal::Eal;
use crate::error::{check, Error};
use crate::sys;
use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

/// A worker lcore of the running EAL (not the main one), from [`Eal::workers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lcore(u32);

impl Lcore {
    pub fn id(self) -> u32 {
        self.0
    }
}

impl Eal {
    /// The worker lcores (`-l` less the main lcore), in order.
    pub fn workers(&self) -> Vec<Lcore> {
        let mut workers = Vec::new();
        let mut id = u32::MAX; // -1: start from the first
        loop {
            // SAFETY: reads EAL's lcore configuration (EAL is up: `self`); skip_main = 1, wrap = 0.
            id = unsafe { sys::rte_get_next_lcore(id, 1, 0) };
            if id >= sys::RTE_MAX_LCORE {
                return workers;
            }
            workers.push(Lcore(id));
        }
    }

    /// The main lcore's id: the thread that initialised EAL.
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: reads EAL's configuration (EAL is up: `self`).
        unsafe { sys::rte_get_main_lcore() }
    }

    /// Calls `f` with a [`Scope`] on which closures are launched on worker lcores, waits for all
    /// of them, and returns what `f` returned. If `f` or a closure panicked, panics after waiting.
    pub fn scope<'env, F, T>(&'env self, f: F) -> T
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
    {
        let scope = Scope { jobs: RefCell::new(Vec::new()), _scope: PhantomData, _env: PhantomData };
        let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        let mut lcore_panicked = false;
        for (lcore, job) in scope.jobs.take() {
            // SAFETY: the lcore was launched by this scope; waiting for it on the main lcore is
            // what the API asks for.
            unsafe { sys::rte_eal_wait_lcore(lcore) };
            // SAFETY: the lcore has returned, so the job is no longer used; it came from
            // Box::into_raw in `launch`.
            let job = unsafe { Box::from_raw(job) };
            lcore_panicked |= job.panic.is_some();
        }
        match result {
            Err(payload) => resume_unwind(payload),
            Ok(_) if lcore_panicked => panic!("a closure launched on an lcore panicked"),
            Ok(value) => value,
        }
    }
}

/// What one lcore runs, and whether it panicked.
struct Job<'scope> {
    run: Option<Box<dyn FnOnce() + Send + 'scope>>,
    panic: Option<Box<dyn std::any::Any + Send>>,
}

/// Launches closures on worker lcores ([`Eal::scope`]). It stays on the main lcore (not
/// `Sync`): EAL launches only from there.
pub struct Scope<'scope, 'env: 'scope> {
    jobs: RefCell<Vec<(u32, *mut Job<'scope>)>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'scope> Scope<'scope, '_> {
    /// Runs `f` on `lcore`; an error if that lcore is still running something.
    pub fn launch<F>(&'scope self, lcore: Lcore, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'scope,
    {
        let job = Box::into_raw(Box::new(Job { run: Some(Box::new(f)), panic: None }));
        // SAFETY: `run_job` takes the job pointer, which stays valid until the scope waited for
        // the lcore (the pointer is kept in `jobs`; freed only after rte_eal_wait_lcore); the
        // lcore is a worker of the running EAL.
        let ret = unsafe { sys::rte_eal_remote_launch(Some(run_job), job.cast::<c_void>(), lcore.0) };
        if let Err(e) = check("rte_eal_remote_launch", ret) {
            // SAFETY: not launched: nothing else has the pointer.
            drop(unsafe { Box::from_raw(job) });
            return Err(e);
        }
        self.jobs.borrow_mut().push((lcore.0, job));
        Ok(())
    }
}

/// The function EAL calls on the worker lcore.
unsafe extern "C" fn run_job(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Job that `launch` leaked for this lcore, alive until the scope has
    // waited for it; only this lcore touches it until then.
    let job = unsafe { &mut *arg.cast::<Job<'_>>() };
    let Some(run) = job.run.take() else { return 0 };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(()) => 0,
        Err(payload) => {
            job.panic = Some(payload);
            -1
        }
    }
}

/// Set by SIGINT or SIGTERM (once [`stop_on_signals`] ran) or by [`request_stop`].
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Makes SIGINT and SIGTERM set the flag [`stop_requested`] reads, as DPDK's examples do.
pub fn stop_on_signals() -> Result<(), Error> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is a plain C struct, valid zeroed (an empty mask, no flags).
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_stop_signal as extern "C" fn(c_int) as usize;
        // SAFETY: `action` is initialised; the handler only stores to an atomic, which is
        // async-signal-safe; NULL for the old action is allowed.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(Error::Call {
                call: "sigaction",
                errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            });
        }
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived since [`stop_on_signals`], or [`request_stop`] was called.
#[inline(always)]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Sets the flag [`stop_requested`] reads, as a signal would (a loop's own way to stop the rest).
pub fn request_stop() {
    STOP.store(true, Ordering::Relaxed);
}
