//! The library of an MPK domain, in its own link namespace (dlmopen) with the domain heap
//! loaded first, so that the library's `malloc` (and its libc's) is the domain's and the
//! process's allocator stays untouched. The namespace's writable data (the library's, its
//! libc's, the heap's state) is tagged with the domain's key and snapshotted: a discard writes
//! the snapshot back, so a fault cannot leave the library or its allocator half-updated.

use crate::library::{Library, Loaded, Namespace as Where, DOMAIN_HEAP, MAX_SYMBOLS};
use crate::SetupError;
use std::collections::HashSet;

/// A writable range of the namespace and its contents right after loading.
struct Segment {
    address: usize,
    snapshot: Vec<u8>,
}

pub(crate) struct LibraryNamespace {
    _heap: Loaded,
    loaded: Loaded,
    pub symbols: [usize; MAX_SYMBOLS],
    segments: Vec<Segment>,
}

/// The public head of glibc's `struct link_map` (link.h).
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const libc::c_char,
    l_ld: *const libc::c_void,
    l_next: *const LinkMap,
    l_prev: *const LinkMap,
}

impl LibraryNamespace {
    /// Loads `library` and its domain heap over `[heap, heap + heap_bytes)`, tags their
    /// writable data with `key` and takes the snapshot.
    pub fn load(
        library: &Library,
        symbols: &[&str],
        heap: usize,
        heap_bytes: usize,
        key: u32,
    ) -> Result<LibraryNamespace, SetupError> {
        let heap_object = Loaded::open(&DOMAIN_HEAP, Where::New, false)?;
        let namespace = heap_object.namespace()?;
        let loaded = Loaded::open(library, Where::Existing(namespace), false)?;
        let table = loaded.symbols(symbols)?;
        let install = heap_object.symbol("isolation_heap_install")?;
        // SAFETY: the domain heap's entry point, with a region the domain owns.
        let install: extern "C" fn(usize, usize) = unsafe { std::mem::transmute(install) };
        install(heap, heap_bytes);
        let ranges = writable_ranges(&heap_object)?;
        let mut segments = Vec::new();
        for (address, len) in ranges {
            crate::pku::protect(address, len, libc::PROT_READ | libc::PROT_WRITE, key)
                .map_err(|e| SetupError(format!("tagging {len} bytes of the library's data with key {key}: {e}")))?;
            // SAFETY: a writable range of a loaded object, readable by the trusted thread.
            let snapshot = unsafe { std::slice::from_raw_parts(address as *const u8, len) }.to_vec();
            segments.push(Segment { address, snapshot });
        }
        Ok(LibraryNamespace { _heap: heap_object, loaded, symbols: table, segments })
    }

    /// Writes the snapshot back. The caller's thread has the domain's key.
    pub fn restore(&self) {
        for s in &self.segments {
            // SAFETY: the same writable range as at load; no domain code runs now.
            unsafe { std::ptr::copy_nonoverlapping(s.snapshot.as_ptr(), s.address as *mut u8, s.snapshot.len()) };
        }
    }

    /// Resolves `symbols` in the library (a pooled namespace serves a new domain's list).
    pub fn resolve(&mut self, symbols: &[&str]) -> Result<(), SetupError> {
        self.symbols = self.loaded.symbols(symbols)?;
        Ok(())
    }
}

/// The writable, non-RELRO pages of every object of `object`'s namespace that is not also in
/// the main namespace (the dynamic loader itself is shared).
fn writable_ranges(object: &Loaded) -> Result<Vec<(usize, usize)>, SetupError> {
    let main_objects = main_namespace_bases()?;
    let mut bases = Vec::new();
    let mut map = link_map(object.handle)?;
    // SAFETY: the loader's list of a live namespace, walked while nothing loads or unloads in it.
    unsafe {
        while !(*map).l_prev.is_null() {
            map = (*map).l_prev;
        }
        while !map.is_null() {
            if !main_objects.contains(&(*map).l_addr) {
                bases.push((*map).l_addr);
            }
            map = (*map).l_next;
        }
    }
    let mut ranges = Vec::new();
    for base in bases {
        // SAFETY: a shared object's first loadable segment maps its ELF header at its base.
        let headers = unsafe { program_headers(base) }?;
        let relro = headers.iter().find(|h| h.p_type == libc::PT_GNU_RELRO).map(|h| {
            let start = (base + h.p_vaddr as usize) & !4095;
            (start, (base + (h.p_vaddr + h.p_memsz) as usize) & !4095)
        });
        for h in headers.iter().filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_W != 0) {
            let mut start = (base + h.p_vaddr as usize) & !4095;
            let end = (base + (h.p_vaddr + h.p_memsz) as usize + 4095) & !4095;
            if let Some((r0, r1)) = relro {
                if r0 <= start && r1 > start {
                    start = r1;
                }
            }
            if end > start {
                ranges.push((start, end - start));
            }
        }
    }
    Ok(ranges)
}

/// The program headers of the object loaded at `base` (dl_iterate_phdr would show only the
/// caller's namespace).
///
/// # Safety
/// `base` is the load address of a shared object of a live namespace.
unsafe fn program_headers(base: usize) -> Result<&'static [libc::Elf64_Phdr], SetupError> {
    // SAFETY: the caller's contract: the ELF header is mapped at `base`.
    let header = unsafe { &*(base as *const libc::Elf64_Ehdr) };
    if header.e_ident[..4] != *b"\x7fELF" || header.e_phentsize as usize != std::mem::size_of::<libc::Elf64_Phdr>() {
        return Err(SetupError(format!("no ELF header at {base:#x}")));
    }
    // SAFETY: the program headers lie in the first segment, mapped as long as the object is.
    Ok(unsafe {
        std::slice::from_raw_parts((base + header.e_phoff as usize) as *const libc::Elf64_Phdr, header.e_phnum as usize)
    })
}

fn link_map(handle: *mut libc::c_void) -> Result<*const LinkMap, SetupError> {
    let mut map: *const LinkMap = std::ptr::null();
    // SAFETY: a live handle; RTLD_DI_LINKMAP writes one pointer.
    let rc =
        unsafe { libc::dlinfo(handle, libc::RTLD_DI_LINKMAP, &mut map as *mut *const LinkMap as *mut libc::c_void) };
    if rc != 0 || map.is_null() {
        return Err(SetupError("dlinfo(RTLD_DI_LINKMAP) failed".into()));
    }
    Ok(map)
}

fn main_namespace_bases() -> Result<HashSet<usize>, SetupError> {
    // SAFETY: dlopen(NULL) returns the main program's handle.
    let main = unsafe { libc::dlopen(std::ptr::null(), libc::RTLD_NOW) };
    if main.is_null() {
        return Err(SetupError("dlopen(NULL) failed".into()));
    }
    let mut map = link_map(main)?;
    let mut bases = HashSet::new();
    // SAFETY: the main namespace's list, walked from its head.
    unsafe {
        while !(*map).l_prev.is_null() {
            map = (*map).l_prev;
        }
        while !map.is_null() {
            bases.insert((*map).l_addr);
            map = (*map).l_next;
        }
        libc::dlclose(main);
    }
    Ok(bases)
}
