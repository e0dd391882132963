//! The trusted kernel of safenic's drivers.
//!
//! Every `unsafe` line about memory that a driver needs lives here, each with a `// SAFETY:`
//! comment naming the invariant it relies on. The types below carry proofs, so the code that
//! uses them (in `#![forbid(unsafe_code)]` crates) needs no run-time check on its hot path:
//!
//! - [`DeviceMemory`], [`VolatilePtr`], [`VolatileArray`]: non-owning, lifetime-bound references
//!   into memory the device also reads and writes (DMA memory, BAR0), accessed only with
//!   volatile loads and stores (the paper's `LPtr`). Bounds and alignment are checked once,
//!   when a reference is made; every later access is a plain load or store.
//! - [`RingIndex`]: an index into a ring of `N` entries, `N` a power of two; it wraps on
//!   increment and indexes [`VolatileArray`] and [`RingArray`] without a check.
//! - [`branded`]: arrays whose length is known only at run time, with indices that can only
//!   be made for that length (a unique lifetime brand), so indexing needs no check and no
//!   padding to 256.
//! - [`ArrayStack`], [`RingQueue`]: a batch and a TX ring's buffers in slots of a fixed
//!   capacity, uninitialised while free, so a move in or out tests no tag and grows nothing.
//! - [`Bounded`]: integers with a compile-time maximum (a packet length no larger than its
//!   buffer), converted once from untrusted values.
//!
//! Values handed out of device memory must be valid for every bit pattern the device may
//! write: every volatile type requires zerocopy's [`FromBytes`] and [`IntoBytes`]. No
//! reference (`&T`) into device memory is ever handed out.
//!
//! # Soundness
//! Each module argues for its own items. [`DeviceValue`] is implemented for exactly the types
//! zerocopy proves valid for every bit pattern and free of padding (its traits are `unsafe` to
//! implement by hand; its derives check), which the volatile types read and write.

#![no_std]

extern crate alloc;

pub mod bounded;
pub mod branded;
pub mod ring;
pub mod slots;
pub mod volatile;

pub use bounded::Bounded;
pub use branded::{with_len, BrandedIndex, BrandedLen, BrandedVec};
pub use ring::{ConstArray, ConstIndex, RingArray, RingIndex};
pub use slots::{take_top, ArrayStack, RingQueue};
pub use volatile::{DeviceMemory, VolatileArray, VolatilePtr};
pub use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A plain-data type that may live in device memory: every bit pattern is a valid value
/// (the device may write anything) and it has no padding.
pub trait DeviceValue: FromBytes + IntoBytes + Immutable + Copy {}
impl<T: FromBytes + IntoBytes + Immutable + Copy> DeviceValue for T {}
