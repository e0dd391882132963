//! Regions dropped while a device may still use DMA memory stay mapped until none may.
//!
//! A descriptor ring names buffers of any region that was alive when they were written; once a
//! queue is enabled on it, the borrow checker no longer sees those names (they are bytes the
//! device reads). So a region dropped while any [`DeviceHold`] lives is not unmapped but kept
//! here, and what is kept is unmapped when the last hold goes. A hold that is leaked
//! (`mem::forget`, an `Rc` cycle) keeps every region dropped from then on mapped for ever: a
//! leak leaks memory, it never frees it under a device.
//!
//! # Soundness
//! A `DeviceHold` only delays an unmapping; making, leaking or dropping any number of them in
//! any order frees nothing a live hold could still need.

use crate::mem::MappedRegion;
use crate::vfio::IovaMapping;
use std::sync::{Mutex, MutexGuard};

/// A dropped region's mapping and, under VFIO, its IOVAs: fields drop in order, so the IOMMU
/// forgets the IOVAs before the memory is unmapped.
pub(super) struct Retained {
    pub(super) _iova: Option<IovaMapping>,
    pub(super) _mapping: MappedRegion,
}

struct Retention {
    /// Holds alive or leaked.
    holds: usize,
    /// Regions dropped while a hold lived, and whether the keeper holds each.
    kept: Vec<(Retained, bool)>,
    /// Regions alive or kept here whose file the keeper does not hold.
    not_with_keeper: usize,
}

static RETENTION: Mutex<Retention> = Mutex::new(Retention { holds: 0, kept: Vec::new(), not_with_keeper: 0 });

fn retention() -> MutexGuard<'static, Retention> {
    RETENTION.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device may use DMA memory while this lives: every region dropped meanwhile stays mapped
/// until no hold is left. Each enabled queue holds one until its device confirmed it stopped
/// (`crate::i82599`); a driver of a simulated device takes one per queue it gives the device.
#[derive(Debug)]
pub struct DeviceHold {
    _private: (),
}

impl DeviceHold {
    #[allow(clippy::new_without_default)]
    pub fn new() -> DeviceHold {
        retention().holds += 1;
        DeviceHold { _private: () }
    }
}

impl Drop for DeviceHold {
    fn drop(&mut self) {
        let released = {
            let mut r = retention();
            r.holds -= 1;
            if r.holds > 0 {
                return;
            }
            let released = std::mem::take(&mut r.kept);
            r.not_with_keeper -= released.iter().filter(|(_, kept)| !kept).count();
            released
        };
        drop(released);
    }
}

/// A region was made; `kept`: the keeper holds its file.
pub(super) fn made(kept: bool) {
    if !kept {
        retention().not_with_keeper += 1;
    }
}

/// A region was dropped: unmapped now, or kept until the last hold goes.
pub(super) fn dropped(mapping: Retained, kept: bool) {
    let mut r = retention();
    if r.holds > 0 {
        r.kept.push((mapping, kept));
        return;
    }
    if !kept {
        r.not_with_keeper -= 1;
    }
    drop(r);
    drop(mapping);
}

/// Whether the keeper holds the file of every region alive or kept here: a queue enabled
/// now can only name memory that outlives this process.
pub(crate) fn all_with_keeper() -> bool {
    retention().not_with_keeper == 0
}

/// Regions dropped and kept mapped, for tests.
pub fn kept_regions() -> usize {
    retention().kept.len()
}
