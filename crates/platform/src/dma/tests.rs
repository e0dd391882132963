use super::*;

#[test]
fn areas_are_aligned_apart_and_within_a_hugepage() {
    let mut l = DmaLayout::new();
    let ring = l.descriptor_ring(4096).unwrap();
    let head = l.head_slot().unwrap();
    let plain = l.plain(HUGEPAGE - 100, 4096).unwrap();
    let buffers = l.buffers(3).unwrap();
    let at = |i: usize| (l.areas[i].offset, l.areas[i].len);
    assert_eq!(at(ring.0), (0, 4096 * 16));
    assert_eq!(at(head.0), (4096 * 16, 64));
    assert_eq!(at(plain.0), (HUGEPAGE, HUGEPAGE - 100), "moved to the next page rather than straddle one");
    assert_eq!(at(buffers.0), (2 * HUGEPAGE, 3 * BUFFER_SIZE), "buffers aligned to their size");
    assert_eq!(l.size(), 2 * HUGEPAGE + 3 * BUFFER_SIZE);
}

#[test]
fn a_layout_the_device_could_not_use_is_refused() {
    let mut l = DmaLayout::new();
    for entries in [0, 4, 100, 8192] {
        let e = l.descriptor_ring(entries).expect_err("a ring the 82599 cannot take").to_string();
        assert!(e.contains("power of two from 8 to 4096"), "{entries}: {e}");
    }
    assert!(l.plain(HUGEPAGE + 1, 64).is_err(), "plain memory larger than a page is not contiguous");
    assert!(l.plain(64, 3).is_err(), "alignment not a power of two");
    assert!(l.buffers(0).is_err());
    assert!(l.buffers(usize::MAX).is_err(), "overflow");
}

#[test]
fn a_region_hands_out_each_area_as_the_kind_it_was_laid_out() {
    // Needs root and hugepages (make test provides them).
    let mut l = DmaLayout::new();
    let (ring, buffers, head) = (l.descriptor_ring(8).unwrap(), l.buffers(2000).unwrap(), l.head_slot().unwrap());
    let plain = l.plain(100, 8).unwrap();
    let region = DmaRegion::allocate(&l).unwrap();
    let all = region.buffers(buffers).unwrap();
    assert_eq!(all.len(), 2000);
    for pair in all.windows(2) {
        // Buffers more than a hugepage apart: a later page need not follow physically.
        let (a, b) = (pair[0].addr.get(), pair[1].addr.get());
        assert!(b == a + BUFFER_SIZE as u64 || b % HUGEPAGE as u64 == 0, "{a:#x} then {b:#x}");
        assert_eq!(a / HUGEPAGE as u64, (a + BUFFER_SIZE as u64 - 1) / HUGEPAGE as u64, "within one page");
    }
    assert_eq!(region.buffer(buffers, 1999).unwrap().addr, all[1999].addr);
    assert!(region.buffer(buffers, 2000).is_err());
    // A handle of another kind, or of an area this layout does not have, is refused.
    assert!(region.buffers(BuffersArea(ring.0)).is_err());
    assert!(region.plain(PlainArea(head.0)).is_err());
    assert!(region.head_slot(HeadArea(99)).is_err());
    assert!(region.descriptors::<16>(ring).is_err(), "a ring of another size than laid out");
    let p = region.plain(plain).unwrap();
    assert_eq!(p.memory().len(), 100);
    assert!(p.device_address(0, 100).is_some());
    assert!(p.device_address(1, 100).is_none() && p.device_address(0, 0).is_none());
    all[0].data.write_bytes::<0, 4>([1, 2, 3, 4]);
    assert_eq!(region.buffer_bytes(buffers).unwrap().ptr::<u32>(0).unwrap().read(), 0x0403_0201);
}

#[test]
fn dma_memory_can_be_neither_shrunk_nor_grown_nor_unsealed() {
    // Needs root (to reopen the file through map_files) and hugepages.
    let mut l = DmaLayout::new();
    l.buffers(1).unwrap();
    let region = DmaRegion::allocate(&l).unwrap();
    let start = region.mapping().virt_addr();
    let link = format!("/proc/self/map_files/{start:x}-{:x}", start + region.len());
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&link).unwrap();
    let len = region.len() as u64;
    for (what, tried) in [("shrunk", file.set_len(0)), ("grown", file.set_len(2 * len))] {
        let e = tried.expect_err(what);
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{what}: {e}");
    }
    let truncated = std::fs::OpenOptions::new().write(true).truncate(true).open(&link);
    assert_eq!(truncated.err().and_then(|e| e.raw_os_error()), Some(libc::EPERM), "O_TRUNC");
    let unsealed = rustix::fs::fcntl_add_seals(&file, rustix::fs::SealFlags::WRITE);
    assert_eq!(unsealed, Err(rustix::io::Errno::PERM), "the seals are sealed");
    assert_eq!(file.metadata().unwrap().len(), len);
}

#[test]
fn a_frame_area_puts_each_buffer_in_the_second_half_of_its_frame() {
    let mut l = DmaLayout::new();
    let plain = l.buffers(3).unwrap();
    let frames = l.frames(5).unwrap();
    assert_eq!(
        (l.areas[frames.0].offset, l.areas[frames.0].len),
        (FRAME_SIZE * 2, 5 * FRAME_SIZE),
        "frames aligned to their size"
    );
    assert!(l.frames(0).is_err() && l.frames(usize::MAX).is_err());
    // Needs root and hugepages (make test provides them).
    let region = DmaRegion::allocate(&l).unwrap();
    assert!(!region.only_frames(), "a plain buffer area is no UMEM");
    let all = region.buffers(frames).unwrap();
    assert_eq!(all.len(), 5);
    let base = region.whole().virt_addr();
    for (i, b) in all.iter().enumerate() {
        assert_eq!(b.data.address() - base, 2 * FRAME_SIZE + i * FRAME_SIZE + FRAME_HEADROOM);
    }
    assert!(region.buffer_bytes(frames).is_err(), "frames are not one block of buffers");
    assert!(region.buffer_bytes(plain).is_ok());
    let mut only = DmaLayout::new();
    only.frames(2).unwrap();
    only.frames(1).unwrap();
    assert!(DmaRegion::allocate(&only).unwrap().only_frames());
}
