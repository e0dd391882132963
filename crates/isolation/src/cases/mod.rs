//! The libraries the project isolates, each with typed calls that work in any backend.

pub mod broken;
pub mod filter;
pub mod png;
pub mod snappy;
