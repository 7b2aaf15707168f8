//! RoCEv2 wire format: Ethernet, IPv4/IPv6, UDP and the InfiniBand transport headers as
//! typed views over byte slices, the opcode table, the ICRC and PSN arithmetic.
//!
//! This crate never performs I/O, never allocates on the packet path and contains no
//! `unsafe` code.
#![forbid(unsafe_code)]
