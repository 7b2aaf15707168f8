//! The InfiniBand transport as a deterministic, sans-IO state machine (not written yet).
