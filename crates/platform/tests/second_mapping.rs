//! Issue 40, item 9, as an attacker would try it: map memory that this process already maps a
//! second time, with safe calls only. Once the process refuses second mappings (as opening a
//! real device makes it), no file page, no DMA memory reached through
//! `/proc/self/map_files` and no anonymous shared memory can be mapped twice.
//!
//! One test, in its own process: the refusal is process-wide and lasts until the process ends.

use platform::fs::ScratchDir;
use platform::{DmaBacking, DmaMemory, MappedRegion, PlatformError};
use std::fs::{File, OpenOptions};

/// The file behind the mapping `region` through `/proc/self/map_files`, opened for writing.
fn reopen(region: &MappedRegion) -> File {
    let (start, end) = (region.virt_addr(), region.virt_addr() + region.len());
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/self/map_files/{start:x}-{end:x}"))
        .expect("root opens its own map_files links (make test runs as root)")
}

fn refused(attempt: std::io::Result<MappedRegion>, what: &str) {
    match attempt {
        Ok(_) => panic!("{what}: mapped a second time"),
        Err(e) => assert!(e.to_string().contains("already mapped in this process"), "{what}: {e}"),
    }
}

#[test]
fn a_process_that_refuses_second_mappings_maps_no_page_twice() {
    let scratch = ScratchDir::new("platform-test", "second-mapping").unwrap();
    let path = scratch.path().join("shared");
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
    file.set_len(2 * 4096).unwrap();

    // Before the refusal (nicsim in the driver's process needs this), two mappings are allowed,
    // and the refusal cannot start while they both live.
    let first = MappedRegion::map_file(&file, 0, 4096, false).unwrap();
    let second = MappedRegion::map_file(&file, 0, 4096, false).unwrap();
    second.write_u32(0, 7);
    assert_eq!(first.read_u32(0), 7, "the two mappings share their page");
    match platform::refuse_second_mappings() {
        Err(e @ PlatformError::MappedTwice { .. }) => {
            assert!(e.to_string().contains("drop one mapping"), "{e}");
        }
        other => panic!("refusal started over two live mappings of one page: {other:?}"),
    }
    drop(second);
    platform::refuse_second_mappings().expect("one mapping per page now");

    // The same pages again, through the same file, a new descriptor of it, or a range that
    // overlaps by one page; the next page of the file is still free to map.
    refused(MappedRegion::map_file(&file, 0, 4096, false), "the same file");
    refused(MappedRegion::map_file(&File::open(&path).unwrap(), 0, 4096, false), "a new descriptor");
    refused(MappedRegion::map_file(&file, 0, 2 * 4096, false), "an overlapping range");
    let next = MappedRegion::map_file(&file, 4096, 4096, false).expect("a page no mapping covers");
    refused(MappedRegion::map_file(&file, 4096, 4096, false), "the next page, now mapped");
    drop(next);
    MappedRegion::map_file(&file, 4096, 4096, false).expect("a page whose mapping was dropped");

    // DMA memory, on both backings, and anonymous shared memory, reached through map_files:
    // the way to rewrite a driver's descriptor rings behind its types.
    for backing in [DmaBacking::HugetlbfsFile(None), DmaBacking::AnonymousHugetlb] {
        let dma = DmaMemory::allocate(1, backing.clone()).expect("hugepages (scripts/setup reserves them)");
        let len = dma.len();
        refused(MappedRegion::map_file(&reopen(dma.region()), 0, len, false), &format!("{backing:?} DMA memory"));
    }
    // A driver's DMA region: its file is closed once mapped, so map_files is the way back.
    let mut layout = platform::dma::DmaLayout::new();
    layout.buffers(1).unwrap();
    let region = platform::dma::DmaRegion::allocate(&layout).unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let range = maps.lines().find(|l| l.contains("safenic-dma")).and_then(|l| l.split_whitespace().next()).unwrap();
    let file = OpenOptions::new().read(true).write(true).open(format!("/proc/self/map_files/{range}")).unwrap();
    refused(MappedRegion::map_file(&file, 0, region.len(), false), "a DMA region");
    let anonymous = MappedRegion::anonymous(4096).unwrap();
    refused(MappedRegion::map_file(&reopen(&anonymous), 0, 4096, false), "anonymous shared memory");

    // Two threads racing for the same free page: one wins.
    let free = scratch.path().join("raced");
    let raced = OpenOptions::new().read(true).write(true).create_new(true).open(&free).unwrap();
    raced.set_len(4096).unwrap();
    let mapped: Vec<std::io::Result<MappedRegion>> = std::thread::scope(|s| {
        let racers: Vec<_> = (0..2).map(|_| s.spawn(|| MappedRegion::map_file(&raced, 0, 4096, false))).collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(mapped.iter().filter(|m| m.is_ok()).count(), 1, "exactly one of two racing mappings");
}
