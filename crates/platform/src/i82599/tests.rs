use super::*;
use crate::dma::{DmaLayout, DmaRegion};
use crate::fs::ScratchDir;

const ADDRESS: &str = "0000:01:00.0";

/// A pretend 82599 (ids, configuration space, a BAR0 file whose registers hold what is
/// written) and the test's own view of its BAR.
fn pretend(test: &str) -> (ScratchDir, Function, MappedRegion) {
    let scratch = ScratchDir::new("platform-unit", test).unwrap();
    let dir = scratch.path().join(ADDRESS);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("vendor"), "0x8086\n").unwrap();
    std::fs::write(dir.join("device"), "0x10fb\n").unwrap();
    std::fs::write(dir.join("config"), [0u8; 256]).unwrap();
    std::fs::write(dir.join("resource0"), vec![0u8; BAR0_LEN]).unwrap();
    let function = Function::open(scratch.path(), ADDRESS).unwrap();
    let file = std::fs::OpenOptions::new().read(true).write(true).open(dir.join("resource0")).unwrap();
    let view = MappedRegion::map_file(&file, 0, BAR0_LEN, false).unwrap();
    (scratch, function, view)
}

/// The registers that make an 82599 reach memory, or take its position in a ring: every
/// queue's base addresses, lengths, heads, tails, buffer sizes and formats, and head
/// write-back addresses [DS 8.2.3.8, 8.2.3.9], the receive queues 64-127 of the VT modes, the
/// FCoE DMA context [DS 8.2.3.19] and receive coalescing (RSCCTL).
fn memory_registers() -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    for q in 0..64 {
        for (offset, name) in [(0x01000, "RDBAL"), (0x01004, "RDBAH"), (0x01008, "RDLEN"), (0x01010, "RDH")] {
            out.push((offset + 0x40 * q, name));
        }
        for (offset, name) in [(0x01014, "SRRCTL"), (0x01018, "RDT"), (0x0102C, "RSCCTL")] {
            out.push((offset + 0x40 * q, name));
        }
        for (offset, name) in [(0x0D000, "RDBAL"), (0x0D004, "RDBAH"), (0x0D008, "RDLEN"), (0x0D014, "SRRCTL")] {
            out.push((offset + 0x40 * q, name));
        }
    }
    for q in 0..128 {
        for (offset, name) in [(0x06000, "TDBAL"), (0x06004, "TDBAH"), (0x06008, "TDLEN"), (0x06010, "TDH")] {
            out.push((offset + 0x40 * q, name));
        }
        for (offset, name) in [(0x06018, "TDT"), (0x06038, "TDWBAL"), (0x0603C, "TDWBAH")] {
            out.push((offset + 0x40 * q, name));
        }
    }
    for (offset, name) in [(0x02410, "FCPTRL"), (0x02414, "FCPTRH"), (0x02418, "FCBUFF"), (0x02420, "FCDMARW")] {
        out.push((offset, name));
    }
    for q in 0..64 {
        out.push((0x0EA00 + 4 * q, "PSRTYPE")); // which headers a split puts apart [DS 8.2.3.7.4]
    }
    out
}

#[test]
fn no_register_that_reaches_memory_can_be_written() {
    let (_scratch, function, view) = pretend("i82599-refused");
    let r = function.registers();
    for (offset, name) in memory_registers() {
        let e = r.write(reg(offset), 0x1000).expect_err(name).to_string();
        assert!(e.contains("enable_rx"), "{name} at {offset:#x}: {e}");
        assert_eq!(view.read_u32(offset), 0, "{name} at {offset:#x} was written");
    }
}

#[test]
fn queues_are_enabled_only_with_memory_and_disabled_by_anyone() {
    let (_scratch, function, view) = pretend("i82599-enable");
    let r = function.registers();
    for (rxdctl, what) in [(0x01028, "RXDCTL"), (0x06028, "TXDCTL"), (0x06028 + 0x40 * 127, "TXDCTL(127)")] {
        let e = r.write(reg(rxdctl), writable::QUEUE_ENABLE).expect_err(what).to_string();
        assert!(e.contains("queue-enable bit"), "{what}: {e}");
        r.write(reg(rxdctl), 0x0404).expect("thresholds, the enable bit clear");
        assert_eq!(view.read_u32(rxdctl), 0x0404);
    }
}

#[test]
fn the_writable_table_counts_what_it_lists_once() {
    let listed: usize = writable::WRITABLE.iter().map(|w| w.count).sum();
    let writable = (0..BAR0_DWORDS).filter(|&i| writable::entry(4 * i).is_some()).count();
    assert_eq!(writable, listed, "no two entries overlap, and every entry is a register of BAR0");
    for w in writable::WRITABLE {
        assert!(w.first + w.stride * (w.count - 1) + 4 <= BAR0_LEN, "{}", w.name);
    }
}

/// Runs `body` in a child, this test binary again with only `test`: a queue's enable confines
/// its process ([`crate::confine`]), which must not confine the other tests, nor refuse
/// LeakSanitizer the `ptrace` it checks with at exit (`make sanitize`; the child's leaks go
/// unchecked).
fn in_child(test: &str, body: impl FnOnce()) {
    const CHILD: &str = "PLATFORM_UNIT_TEST_CHILD";
    if std::env::var_os(CHILD).is_some() {
        return body();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--test-threads=1"])
        .env(CHILD, "1")
        .env("ASAN_OPTIONS", "detect_leaks=0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("1 passed"), "{test} in a child: {text}");
}

#[test]
fn an_enable_programs_the_ring_the_slot_and_the_legacy_format_itself() {
    in_child("i82599::tests::an_enable_programs_the_ring_the_slot_and_the_legacy_format_itself", enable_programs);
}

fn enable_programs() {
    let (_scratch, function, view) = pretend("i82599-program");
    let mut layout = DmaLayout::new();
    let (ring, head, buffers) =
        (layout.descriptor_ring(64).unwrap(), layout.head_slot().unwrap(), layout.buffers(64).unwrap());
    let region = DmaRegion::allocate(&layout).unwrap();
    let all = region.buffers(buffers).unwrap();
    let rx = LegacyRing::<64>::new(&region, ring, |i| all[i.get()].addr).unwrap();
    let r = function.registers();
    let queue = r.enable_rx(ConstIndex::new(3), rx, true).unwrap();
    let base = u64::from(view.read_u32(0x01000 + 0xC0)) | u64::from(view.read_u32(0x01004 + 0xC0)) << 32;
    assert_eq!(base, rx.phys());
    assert_eq!(view.read_u32(0x01008 + 0xC0), 64 * 16, "RDLEN");
    assert_eq!(view.read_u32(0x01014 + 0xC0), 2 | 1 << 28, "SRRCTL: 2 KiB buffers, legacy, drop when full");
    assert_ne!(view.read_u32(0x01028 + 0xC0) & writable::QUEUE_ENABLE, 0);
    let e = r.enable_rx(ConstIndex::new(3), rx, true).err().expect("an enabled queue is not enabled again").to_string();
    assert!(e.contains("enabled already"), "{e}");
    queue.doorbell().ring(invariants::RingIndex::wrapping(63));
    assert_eq!(view.read_u32(0x01018 + 0xC0), 63, "RDT");
    // Every slot names a buffer of the region, and the transmit side's too.
    for i in 0..64 {
        assert_eq!(rx.status(invariants::RingIndex::wrapping(i)), 0);
    }
    let slot = region.head_slot(head).unwrap();
    let tx = r.enable_tx(ConstIndex::new(0), rx, slot).unwrap();
    assert_eq!(u64::from(view.read_u32(0x06038)), slot.phys() & 0xFFFF_FFFF | 1, "TDWBAL, write-back on");
    assert_eq!(u64::from(view.read_u32(0x0603C)), slot.phys() >> 32, "TDWBAH");
    drop((queue, tx));
    assert_eq!(view.read_u32(0x01028 + 0xC0) & writable::QUEUE_ENABLE, 0, "disabled on drop");
    assert_eq!(view.read_u32(0x06028) & writable::QUEUE_ENABLE, 0, "disabled on drop");
}
