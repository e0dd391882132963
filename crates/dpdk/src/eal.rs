//! DPDK's Environment Abstraction Layer: initialised once per process, cleaned up on drop
//! unless something that needs it was leaked.

use crate::error::{rte_errno, Error};
use crate::sys;
use std::ffi::{c_char, c_int, CString};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `rte_eal_init` was called in this process (DPDK cannot run it twice, even after cleanup).
static INITIALISED: AtomicBool = AtomicBool::new(false);

/// Pools and ports alive. EAL's cleanup unmaps their memory, so it runs only when none is: a
/// pool or port leaked with `mem::forget` keeps EAL up until the process exits.
pub(crate) static USERS: AtomicUsize = AtomicUsize::new(0);

/// EAL's argv and its strings, which EAL may point into after `rte_eal_init` returns.
struct KeptArgv {
    _strings: Vec<CString>,
    argv: Vec<*mut c_char>,
}

// SAFETY: the pointers are only read, under the mutex, after `rte_eal_init` returned.
unsafe impl Send for KeptArgv {}

static KEPT_ARGV: std::sync::Mutex<Option<KeptArgv>> = std::sync::Mutex::new(None);

/// The initialised EAL. Everything else borrows it; it stays on the thread that initialised it
/// (the main lcore), so it is neither `Send` nor `Sync`.
#[derive(Debug)]
pub struct Eal {
    _main_lcore: PhantomData<*const ()>,
}

impl Eal {
    /// Initialises EAL with `args` as on a command line (the first is the program's name) and
    /// returns the arguments EAL did not take (those after `--`, with the program's name first).
    /// Only the options of [`crate::ALLOWED_EAL_OPTIONS`] are passed on. A second call in the
    /// same process is an error.
    pub fn init<I, S>(args: I) -> Result<(Eal, Vec<String>), Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let args: Vec<String> = args.into_iter().map(|a| a.as_ref().to_string()).collect();
        let owned = args
            .iter()
            .map(|a| CString::new(a.as_str()).map_err(|_| Error::NulInArgument(a.clone())))
            .collect::<Result<Vec<CString>, Error>>()?;
        crate::eal_args::vet(&args)?;
        // A simulated device's DMA reaches any hugepage of its owner: mbufs hold pointers.
        platform::pci::refuse_simulated_devices().map_err(|e| Error::Config(e.to_string()))?;
        if INITIALISED.swap(true, Ordering::SeqCst) {
            return Err(Error::AlreadyInitialised);
        }
        // EAL permutes argv and may keep pointers into it: the strings and the array are kept
        // for the process's life (reachable, so a leak checker does not report them).
        let mut kept = KEPT_ARGV.lock().unwrap_or_else(|e| e.into_inner());
        let mut argv: Vec<*mut c_char> = owned.iter().map(|c| c.as_ptr().cast_mut()).collect();
        argv.push(std::ptr::null_mut());
        let argc = (argv.len() - 1) as c_int;
        // SAFETY: argv holds argc NUL-terminated strings and a final NULL; EAL reorders the
        // array and reads the strings, never writes them; both stay alive in KEPT_ARGV;
        // INITIALISED makes this the only call in the process.
        let taken = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        let argv = kept.insert(KeptArgv { _strings: owned, argv }).argv.clone();
        if taken < 0 {
            return Err(Error::Init { errno: rte_errno() });
        }
        let mut rest = vec![args.first().cloned().unwrap_or_default()];
        for &p in &argv[taken as usize + 1..argv.len() - 1] {
            // SAFETY: every entry before the NULL is one of the strings kept above (EAL only
            // reorders them).
            rest.push(unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned());
        }
        Ok((Eal { _main_lcore: PhantomData }, rest))
    }

    /// Arguments as a builder: `Eal::builder("prog").lcores("0-1").vdev("net_ring0").init()`.
    pub fn builder(program: &str) -> EalBuilder {
        EalBuilder { args: vec![program.to_string()] }
    }

    /// The ports DPDK probed, in order.
    pub fn ports(&self) -> Vec<u16> {
        (0..sys::RTE_MAX_ETHPORTS as u16)
            // SAFETY: only reads DPDK's port table, which EAL (initialised: `self`) has set up.
            .filter(|&p| unsafe { sys::rte_eth_dev_is_valid_port(p) } == 1)
            .collect()
    }

    /// How many lcores EAL runs (`-l`), the main one included.
    pub fn lcore_count(&self) -> u32 {
        // SAFETY: reads EAL's configuration, set up by the initialisation `self` proves.
        unsafe { sys::rte_lcore_count() }
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        if USERS.load(Ordering::SeqCst) == 0 {
            // SAFETY: nothing that uses EAL's memory is alive (USERS counts every pool and
            // port, and mbufs borrow their pool); called once, from the thread that initialised it.
            unsafe { sys::rte_eal_cleanup() };
        }
    }
}

/// EAL's command line, one option at a time: a typed method per option, and no way to pass
/// another, such as `-d` (which would load a shared object as code):
///
/// ```compile_fail,E0599
/// let _ = dpdk::Eal::builder("p").arg("-d");
/// ```
pub struct EalBuilder {
    args: Vec<String>,
}

impl EalBuilder {
    fn flag(mut self, option: &str) -> Self {
        self.args.push(option.to_string());
        self
    }
    fn with(mut self, option: &str, value: &str) -> Self {
        self.args.extend([option.to_string(), value.to_string()]);
        self
    }
    /// The lcores to run on (`-l`, e.g. `0-1`).
    pub fn lcores(self, list: &str) -> Self {
        self.with("-l", list)
    }
    /// A virtual device (`--vdev`, e.g. `net_ring0` or `net_null0`).
    pub fn vdev(self, spec: &str) -> Self {
        self.with("--vdev", spec)
    }
    /// A PCI device DPDK may probe (`-a`); without any, it probes every bound one.
    pub fn allow(self, address: &str) -> Self {
        self.with("-a", address)
    }
    /// Probe no PCI device (`--no-pci`).
    pub fn no_pci(self) -> Self {
        self.flag("--no-pci")
    }
    /// Ordinary memory instead of hugepages (`--no-huge`), with `mb` MiB (`-m`).
    pub fn no_huge(self, mb: u32) -> Self {
        self.flag("--no-huge").with("-m", &mb.to_string())
    }
    /// No files in /var/run or /dev/hugepages left behind (`--in-memory`).
    pub fn in_memory(self) -> Self {
        self.flag("--in-memory")
    }
    /// No shared configuration files (`--no-shconf`).
    pub fn no_shconf(self) -> Self {
        self.flag("--no-shconf")
    }
    /// Log levels (`--log-level`, e.g. `lib.eal:error`).
    pub fn log_level(self, spec: &str) -> Self {
        self.with("--log-level", spec)
    }
    /// Initialises EAL ([`Eal::init`]).
    pub fn init(self) -> Result<Eal, Error> {
        Eal::init(&self.args).map(|(eal, _)| eal)
    }
}
