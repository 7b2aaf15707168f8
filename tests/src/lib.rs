//! Harnesses shared by xroce's end-to-end tests, the demo and the bench: the deterministic
//! simulation of the transport, and labs of network namespaces with running daemons.

pub mod daemon;
pub mod sim;
