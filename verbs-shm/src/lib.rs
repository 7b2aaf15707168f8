//! Shared-memory verbs: the application/daemon contract and the application library
//! (not written yet).
