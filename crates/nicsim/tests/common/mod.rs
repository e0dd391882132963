//! Helpers shared by the in-process device tests.

use platform::MappedRegion;
use std::fs::OpenOptions;

/// Two mappings of one new `len`-byte file: the device's and the driver's view of it (a BAR,
/// a config space). The file is unlinked at once; the mappings keep it.
pub fn twice(len: usize, name: &str) -> (MappedRegion, MappedRegion) {
    let path = std::env::temp_dir().join(format!(
        "nicsim-test-{}-{name}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    f.set_len(len as u64).unwrap();
    let a = MappedRegion::map_file(&f, 0, len, true).unwrap();
    let b = MappedRegion::map_file(&f, 0, len, true).unwrap();
    std::fs::remove_file(path).unwrap();
    (a, b)
}
pub mod rig;
pub mod serve;
pub mod virtio_peer;
