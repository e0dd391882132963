//! The C library a domain isolates: one installed on the system (found by the dynamic loader's
//! search), or one embedded in the program as ELF bytes (loaded from a memfd).
//!
//! Loading a library runs its code: its initialisers, and any thread they start. A library is
//! *trusted* when the project vetted it (its own C parts, built by `build.rs`, and the two
//! system libraries of the cases, installed from Debian like libc) or when the caller says so
//! with an `unsafe` constructor; only a trusted one is loaded into the calling process (the
//! MPK backend, the unisolated one, [`crate::Direct`]). Any other library is loaded only by a
//! helper process that was confined before (`crate::process`).
//!
//! # Soundness
//! The safe constructors make untrusted libraries, which nothing loads outside a confined
//! helper; the `unsafe` ones carry the caller's promise that the library may run in-process.

use crate::SetupError;
use std::ffi::{CStr, CString};
use std::os::fd::FromRawFd;

/// Most symbols a domain resolves; [`crate::Io::symbol`] takes their index.
pub const MAX_SYMBOLS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A shared object by name or path, e.g. `"libsnappy.so.1"`.
    System(&'static str),
    /// A shared object's bytes, compiled into the program.
    Embedded { name: &'static str, elf: &'static [u8] },
}

/// A library to isolate: where it comes from, and whether it may run in the calling process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Library {
    pub(crate) source: Source,
    pub(crate) trusted: bool,
}

impl Library {
    /// An installed shared object, by name or path: loaded only by a confined helper process.
    pub const fn system(name: &'static str) -> Library {
        Library { source: Source::System(name), trusted: false }
    }

    /// A shared object's bytes compiled into the program: loaded only by a confined helper.
    pub const fn embedded(name: &'static str, elf: &'static [u8]) -> Library {
        Library { source: Source::Embedded { name, elf }, trusted: false }
    }

    /// An installed shared object that may also be loaded into this process.
    ///
    /// # Safety
    /// Loading it into this process (the MPK and unisolated backends, [`crate::Direct`]) runs
    /// its initialisers, and the threads they start, with this process's rights and memory,
    /// outside any domain; with the unisolated backend and `Direct`, its functions run there
    /// too. The library must be sound to run so, like the libraries the program links.
    pub const unsafe fn trusted_system(name: &'static str) -> Library {
        Library { source: Source::System(name), trusted: true }
    }

    /// Embedded bytes that may also be loaded into this process.
    ///
    /// # Safety
    /// As for [`Library::trusted_system`].
    pub const unsafe fn trusted_embedded(name: &'static str, elf: &'static [u8]) -> Library {
        Library { source: Source::Embedded { name, elf }, trusted: true }
    }

    /// A library the project vetted: its own, or one the cases name.
    pub(crate) const fn vetted(source: Source) -> Library {
        Library { source, trusted: true }
    }

    /// The deliberately broken library the fault tests isolate (crates/isolation/csrc/broken.c).
    pub const fn broken() -> Library {
        Library::vetted(Source::Embedded {
            name: "safenic-broken",
            elf: include_bytes!(concat!(env!("OUT_DIR"), "/libsafenic_broken.so")),
        })
    }

    /// The packet filter `safenic fwd --filter` calls per burst (crates/isolation/csrc/filter.c).
    pub const fn filter() -> Library {
        Library::vetted(Source::Embedded {
            name: "safenic-filter",
            elf: include_bytes!(concat!(env!("OUT_DIR"), "/libsafenic_filter.so")),
        })
    }

    pub const fn name(&self) -> &'static str {
        match self.source {
            Source::System(name) | Source::Embedded { name, .. } => name,
        }
    }

    /// Whether it may be loaded into this process.
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }

    /// Refuses a library that is not trusted to be loaded into this process by `what`.
    pub(crate) fn expect_trusted(&self, what: &str) -> Result<(), SetupError> {
        if self.trusted {
            return Ok(());
        }
        Err(SetupError(format!(
            "{} is not trusted to run in this process ({what} would load it here, its initialisers outside any \
             domain): use the process backend, which loads it confined, or Library::trusted_system (unsafe) for a \
             library you trust",
            self.name()
        )))
    }
}

/// The allocator an MPK domain's library is linked against first (csrc/domain_heap.c).
pub(crate) const DOMAIN_HEAP: Library = Library::vetted(Source::Embedded {
    name: "safenic-domain-heap",
    elf: include_bytes!(concat!(env!("OUT_DIR"), "/libsafenic_domain_heap.so")),
});

/// A loaded shared object, by its `dlopen` handle. An embedded one keeps its memfd open: the
/// loader knows it by the path `/proc/self/fd/N`, which must not name another object later.
pub(crate) struct Loaded {
    pub handle: *mut libc::c_void,
    _memfd: Option<std::os::fd::OwnedFd>,
}

// SAFETY: a dlopen handle may be used from any thread (the loader locks itself).
unsafe impl Send for Loaded {}

/// Where to load: the process's own namespace, a new one, or one made before.
#[derive(Clone, Copy)]
pub(crate) enum Namespace {
    Main,
    New,
    Existing(libc::Lmid_t),
}

impl Loaded {
    /// Loads `library` here: only a trusted one, unless `confined` (a helper process that was
    /// confined before, where whatever its code does stays).
    pub fn open(library: &Library, namespace: Namespace, confined: bool) -> Result<Loaded, SetupError> {
        if !confined {
            library.expect_trusted("this call")?;
        }
        Self::open_prepared(Prepared::new(library)?, namespace)
    }

    /// Loads what [`Prepared::new`] made ready: the library's code runs from here on.
    pub fn open_prepared(prepared: Prepared, namespace: Namespace) -> Result<Loaded, SetupError> {
        let Prepared { path, memfd, name } = prepared;
        let flags = libc::RTLD_NOW | libc::RTLD_LOCAL;
        // SAFETY: path is a C string; loading runs the library's constructors, which is what
        // using the library means.
        let handle = unsafe {
            match namespace {
                Namespace::Main => libc::dlopen(path.as_ptr(), flags),
                Namespace::New => libc::dlmopen(libc::LM_ID_NEWLM, path.as_ptr(), flags),
                Namespace::Existing(id) => libc::dlmopen(id, path.as_ptr(), flags),
            }
        };
        if handle.is_null() {
            return Err(SetupError(format!("loading {name}: {}", dl_error())));
        }
        Ok(Loaded { handle, _memfd: memfd })
    }

    /// The link-map namespace the object was loaded into.
    pub fn namespace(&self) -> Result<libc::Lmid_t, SetupError> {
        let mut id: libc::Lmid_t = 0;
        // SAFETY: a live handle; RTLD_DI_LMID writes one Lmid_t.
        let rc =
            unsafe { libc::dlinfo(self.handle, libc::RTLD_DI_LMID, &mut id as *mut libc::Lmid_t as *mut libc::c_void) };
        if rc != 0 {
            return Err(SetupError(format!("dlinfo: {}", dl_error())));
        }
        Ok(id)
    }

    pub fn symbol(&self, name: &str) -> Result<usize, SetupError> {
        let c = CString::new(name).map_err(|_| SetupError(format!("symbol {name:?}: a NUL in the name")))?;
        // SAFETY: a live handle and a C string.
        let address = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        if address.is_null() {
            return Err(SetupError(format!("symbol {name} not found: {}", dl_error())));
        }
        Ok(address as usize)
    }

    pub fn symbols(&self, names: &[&str]) -> Result<[usize; MAX_SYMBOLS], SetupError> {
        let mut table = [0usize; MAX_SYMBOLS];
        for (slot, name) in table.iter_mut().zip(names) {
            *slot = self.symbol(name)?;
        }
        Ok(table)
    }
}

/// A library ready to load, none of its code run yet: its path for the loader (an embedded
/// one in a memfd, which it keeps open).
pub(crate) struct Prepared {
    path: CString,
    memfd: Option<std::os::fd::OwnedFd>,
    name: &'static str,
}

impl Prepared {
    pub fn new(library: &Library) -> Result<Prepared, SetupError> {
        let name = library.name();
        let (path, memfd) = match library.source {
            Source::System(name) => {
                (CString::new(name).map_err(|_| SetupError(format!("{name:?}: a NUL in the name")))?, None)
            }
            Source::Embedded { name, elf } => {
                let fd = memfd_with(name, elf)?;
                // SAFETY: our own new descriptor, owned from here on.
                let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
                (CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL"), Some(owned))
            }
        };
        Ok(Prepared { path, memfd, name })
    }
}

/// A memfd holding `bytes`, for the loader to map.
pub(crate) fn memfd_with(name: &str, bytes: &[u8]) -> Result<i32, SetupError> {
    let c = CString::new(name).map_err(|_| SetupError(format!("{name:?}: a NUL in the name")))?;
    // SAFETY: a C string; the descriptor is ours.
    let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(SetupError::os("memfd_create"));
    }
    let mut written = 0;
    while written < bytes.len() {
        let rest = &bytes[written..];
        // SAFETY: writing from a live slice to our descriptor.
        let n = unsafe { libc::write(fd, rest.as_ptr() as *const libc::c_void, rest.len()) };
        if n <= 0 {
            let e = SetupError::os("writing a library into a memfd");
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        written += n as usize;
    }
    Ok(fd)
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a C string valid until the next dl call on this thread.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated, read before any other dl call.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}
