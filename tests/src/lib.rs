//! Shared helpers for xroce's end-to-end tests.

pub mod daemon;
pub mod sim;
