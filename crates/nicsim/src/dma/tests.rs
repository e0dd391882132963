//! The DMA space's unit tests.

use super::*;

#[test]
fn accesses_split_across_extents_or_fault_whole() {
    let mut space = FlatDmaSpace { region: MappedRegion::anonymous(8192).unwrap(), base: 0x10_0000 };
    assert!(write(&mut space, 0x10_0000 + 8188, &[1, 2, 3, 4]));
    assert!(!write(&mut space, 0x10_0000 + 8190, &[1, 2, 3, 4]), "runs past the end");
    let mut b = [0u8; 4];
    assert!(read(&mut space, 0x10_0000 + 8188, &mut b));
    assert_eq!(b, [1, 2, 3, 4]);
    assert!(read_u64(&mut space, 0x0F_FFFF).is_none(), "below the base");
    assert!(!write_u64(&mut space, u64::MAX - 2, 1), "address overflow");
}

/// A flat space whose regions can be "dropped", as `maintain` does.
struct Churning {
    flat: FlatDmaSpace,
    generation: u64,
}

impl DmaSpace for Churning {
    fn locate(&self, phys: u64) -> Option<Location> {
        self.flat.locate(phys)
    }
    fn region(&self, index: usize) -> &MappedRegion {
        self.flat.region(index)
    }
    fn generation(&self) -> u64 {
        self.generation
    }
}

#[test]
fn rings_resolve_as_one_piece_and_expire_with_the_generation() {
    let base = 0x40_0000;
    let mut space =
        Churning { flat: FlatDmaSpace { region: MappedRegion::anonymous(4096).unwrap(), base }, generation: 0 };
    assert_eq!(Ring::resolve(&mut space, base + 4096 - 16 * 4, 5), None, "a ring running past the memory");
    assert_eq!(Ring::resolve(&mut space, base - 16, 2), None, "a ring below the memory");
    let ring = Ring::resolve(&mut space, base + 256, 4).expect("a ring inside the memory");
    ring.in_space(&space).write(3, 0x1111, 0x2222_0000_0000);
    assert_eq!(read_descriptor(&mut space, base + 256 + 48), Some((0x1111, 0x2222_0000_0000)));
    assert_eq!(ring.in_space(&space).read(3), (0x1111, 0x2222_0000_0000));
    ring.in_space(&space).write_qword1(2, 7);
    ring.in_space(&space).write_dword3(2, 9);
    assert_eq!(ring.in_space(&space).read(2), (0, 7 | 9 << 32));
    assert_eq!(ring.in_space(&space).read_qword0(3), 0x1111);
    assert!(ring.valid_in(&space));
    space.generation += 1;
    assert!(!ring.valid_in(&space), "regions may have moved");
}

#[test]
fn unknown_addresses_are_looked_for_before_they_fault() {
    /// Memory the driver maps only after `appears` looks.
    struct Late {
        flat: FlatDmaSpace,
        appears: u32,
        looked: u32,
    }
    impl DmaSpace for Late {
        fn locate(&self, phys: u64) -> Option<Location> {
            self.flat.locate(phys).filter(|_| self.looked >= self.appears)
        }
        fn region(&self, index: usize) -> &MappedRegion {
            self.flat.region(index)
        }
        fn discover(&mut self, _phys: u64) -> bool {
            self.looked += 1;
            self.looked >= self.appears
        }
    }
    let flat = || FlatDmaSpace { region: MappedRegion::anonymous(4096).unwrap(), base: 0 };
    let mut space = Late { flat: flat(), appears: 1, looked: 0 };
    assert!(write_u32(&mut space, 8, 5), "found by looking");
    assert_eq!(read_u64(&mut space, 8), Some(5));
    assert_eq!(space.looked, 1, "known memory needs no further look");
    let mut never = Late { flat: flat(), appears: u32::MAX, looked: 0 };
    assert!(!write_u32(&mut never, 8, 5), "a fault");
    assert!(read_u64(&mut never, 8).is_none(), "a fault");
    assert!(never.looked > 0);
}

/// Six physically separate pieces of 4 KiB, piece `i` at physical `(i + 1) << 20` in
/// region 0 at offset `i * 4096`; counts the lookups `Windows` makes.
struct Pieces {
    region: MappedRegion,
    lookups: std::cell::Cell<u32>,
}

impl DmaSpace for Pieces {
    fn locate(&self, phys: u64) -> Option<Location> {
        self.window(phys).map(|w| Location { region: 0, offset: w.offset, avail: w.len as usize })
    }
    fn window(&self, phys: u64) -> Option<Window> {
        self.lookups.set(self.lookups.get() + 1);
        let piece = (phys >> 20).checked_sub(1).filter(|&p| p < 6 && phys & 0xF_FFFF < 4096)?;
        Some(Window { phys: (piece + 1) << 20, len: 4096, region: 0, offset: piece as usize * 4096 })
    }
    fn region(&self, _index: usize) -> &MappedRegion {
        &self.region
    }
}

#[test]
fn windows_keep_the_last_four_pieces_and_resolve_each_address_exactly() {
    let space = Pieces { region: MappedRegion::anonymous(6 * 4096).unwrap(), lookups: Default::default() };
    let addr = |piece: u64, at: u64| ((piece + 1) << 20) + at;
    let mut w = Windows::EMPTY;
    assert_eq!(w.offset_of(addr(0, 0), 1), None, "empty");
    // Buffers from four pieces in any order: one lookup per piece, then none.
    for round in 0..3 {
        for (piece, at) in [(2, 100), (0, 4000), (3, 0), (2, 2048), (1, 64), (0, 0)] {
            assert_eq!(w.find(&space, addr(piece, at), 64), Some((0, piece as usize * 4096 + at as usize)));
        }
        assert_eq!(space.lookups.get(), 4, "round {round}: four pieces, four lookups");
    }
    assert_eq!(w.find(&space, addr(1, 4090), 64), None, "runs past the end of its piece");
    assert_eq!(w.find(&space, addr(0, 5000), 1), None, "outside every piece");
    // A fifth piece replaces the oldest (piece 2); the other three still hit.
    let before = space.lookups.get();
    assert_eq!(w.find(&space, addr(4, 8), 64), Some((0, 4 * 4096 + 8)));
    for piece in [0, 3, 1, 4] {
        assert!(w.offset_of(addr(piece, 8), 64).is_some(), "piece {piece} kept");
    }
    assert_eq!(w.offset_of(addr(2, 8), 64), None, "piece 2 replaced");
    assert_eq!(space.lookups.get(), before + 1);
}

#[test]
fn kept_windows_serve_only_the_generation_they_were_found_in() {
    let base = 0x40_0000;
    let mut space =
        Churning { flat: FlatDmaSpace { region: MappedRegion::anonymous(4096).unwrap(), base }, generation: 7 };
    let mut kept = KeptWindows::EMPTY;
    assert_eq!(kept.get(&space).offset_of(base, 1), None, "nothing kept yet");
    let mut w = kept.get(&space);
    assert_eq!(w.find(&space, base + 100, 64), Some((0, 100)));
    kept.keep(w, &space);
    assert_eq!(kept.get(&space).offset_of(base + 200, 64), Some((0, 200)), "same generation: kept");
    space.generation += 1;
    assert_eq!(kept.get(&space).offset_of(base + 200, 64), None, "the memory may have gone: forgotten");
}
