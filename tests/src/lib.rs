//! Harnesses shared by xroce's end-to-end tests, the demo and the bench: the deterministic
//! simulation of the transport, labs of network namespaces with running daemons, and the
//! impairment router that loses, duplicates and reorders their frames.

pub mod daemon;
pub mod impair;
pub mod sim;
