//! What a backend does for a [`crate::Domain`]: one implementation per backend.

use crate::frame::Entry;
use crate::region::IoArea;
use crate::violation::ViolationKind;

/// What every backend does for a [`crate::Domain`].
pub(crate) trait Executor: Send {
    /// The I/O area as the trusted side addresses it.
    fn area(&self) -> IoArea;
    /// Runs the call prepared in the frame through `entry`.
    fn execute(&mut self, entry: Entry) -> Result<(), ViolationKind>;
    /// Throws the domain's state away after a violation; the next call finds a fresh domain.
    fn discard(&mut self);
    /// How the caller has waited for answers; nothing for a backend that runs in its thread.
    fn waits(&self) -> Waits {
        Waits::default()
    }
}

/// How the caller waited for the process backend's answers, call by call: found while it
/// polled, after polling its whole spin and sleeping, or asleep at once because the helper
/// had last run on the caller's CPU (polling there would only keep the helper from running).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    pub polling: u64,
    pub slept_after_spin: u64,
    pub gave_way: u64,
}
