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
}
