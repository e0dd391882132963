//! Nothing the file system offers frees, moves or resizes DMA memory under a running queue:
//! written as the outside review's attack, a confined driver with a queue and its keeper,
//! whose safe code reaches the memory's file the strongest way it has (reopened through
//! `/proc/self/map_files` while still root, which also stands for a descriptor caught in
//! `/proc/self/fd`) and tries every way to give its pages back to the kernel. Before the memory
//! was sealed and hole punching refused, `set_len(0)` returned `Ok` and `HugePages_Free` rose by
//! one while the queue ran. The helper runs in a child (this binary again), against a pretend
//! 82599 on tmpfs.

use invariants::ConstIndex;
use platform::dma::{DmaLayout, DmaRegion};
use platform::fs::ScratchDir;
use platform::i82599::{Function, LegacyRing, BAR0_LEN};
use std::os::fd::AsRawFd;
use std::process::Command;

const ADDRESS: &str = "0000:00:00.0";

fn hugepages_free() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = meminfo.lines().find(|l| l.starts_with("HugePages_Free:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Run in a child by the test below.
#[test]
#[ignore = "helper: run by dma_memory_under_a_running_queue_cannot_be_given_back"]
fn helper_free_the_memory_of_a_running_queue() {
    platform::keeper::keep_every_queue();
    let root = std::path::PathBuf::from(std::env::var("DMA_TEST_ROOT").expect("run by its test"));
    let function = Function::open(&root, ADDRESS).unwrap();
    let mut layout = DmaLayout::new();
    let (ring, buffers) = (layout.descriptor_ring(8).unwrap(), layout.buffers(8).unwrap());
    let region = DmaRegion::allocate(&layout).unwrap();
    let all = region.buffers(buffers).unwrap();
    let ring = LegacyRing::<8>::new(&region, ring, |i| all[i.get()].addr).unwrap();
    all[0].data.write_bytes::<0, 8>(*b"the data");
    // The file, reached while the process is still root.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let range = maps.lines().find(|l| l.contains("safenic-dma")).and_then(|l| l.split_whitespace().next()).unwrap();
    let map_files = format!("/proc/self/map_files/{range}");
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&map_files).unwrap();
    let len = region.len() as u64;
    let free = hugepages_free();
    let queue = function.registers().enable_rx(ConstIndex::new(0), ring, true).unwrap();
    assert!(platform::confine::is_confined() && platform::confine::gave_up_root());

    let mut given_back = Vec::new();
    let mut try_it = |what: &str, result: std::io::Result<()>| match result {
        Ok(()) => given_back.push(what.to_string()),
        Err(e) => println!("{what}: {e}"),
    };
    try_it("set_len(0)", file.set_len(0));
    try_it("set_len(half)", file.set_len(len / 2));
    try_it("set_len(twice)", file.set_len(2 * len));
    let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
    try_it(
        "O_TRUNC through /proc/self/fd",
        std::fs::OpenOptions::new().write(true).truncate(true).open(&by_fd).map(drop),
    );
    try_it("reopening map_files as nobody", std::fs::OpenOptions::new().read(true).open(&map_files).map(drop));
    use rustix::fs::FallocateFlags;
    for (what, mode) in [
        ("punching a hole", FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE),
        ("zeroing a range", FallocateFlags::ZERO_RANGE),
        ("collapsing a range", FallocateFlags::COLLAPSE_RANGE),
    ] {
        try_it(what, rustix::fs::fallocate(&file, mode, 0, len).map_err(Into::into));
    }
    try_it("unsealing", rustix::fs::fcntl_add_seals(&file, rustix::fs::SealFlags::WRITE).map_err(Into::into));
    // A second name on a hugetlbfs mount, through which the pages could be truncated later.
    for mount in platform::fs::hugetlbfs_mounts() {
        let name = mount.join(format!("stolen-{}", std::process::id()));
        let linked = rustix::fs::linkat(
            rustix::fs::CWD,
            by_fd.as_str(),
            rustix::fs::CWD,
            &name,
            rustix::fs::AtFlags::SYMLINK_FOLLOW,
        );
        try_it("a second name on hugetlbfs", linked.map_err(Into::into));
        let _ = std::fs::remove_file(&name);
    }
    println!("given back: {given_back:?}");
    println!("pages freed: {}", hugepages_free() as i64 - free as i64);
    println!("size: {}", file.metadata().unwrap().len() == len);
    println!("data: {}", all[0].data.read_bytes::<0, 8>() == *b"the data");
    std::mem::forget(queue);
    println!("helper done");
    std::process::exit(0);
}

#[test]
fn dma_memory_under_a_running_queue_cannot_be_given_back() {
    let scratch = ScratchDir::new("platform-test", "dma-memory").unwrap();
    let dir = scratch.path().join(ADDRESS);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("vendor"), "0x8086\n").unwrap();
    std::fs::write(dir.join("device"), "0x10fb\n").unwrap();
    std::fs::write(dir.join("config"), vec![0u8; 256]).unwrap();
    std::fs::write(dir.join("resource0"), vec![0u8; BAR0_LEN]).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "helper_free_the_memory_of_a_running_queue", "--nocapture", "--test-threads=1"])
        .env("DMA_TEST_ROOT", scratch.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("helper done"), "{text}{}", String::from_utf8_lossy(&out.stderr));
    for expected in ["given back: []", "pages freed: 0", "size: true", "data: true"] {
        assert!(text.contains(expected), "expected `{expected}`:\n{text}");
    }
}
