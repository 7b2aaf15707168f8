//! A drop-in `libibverbs.so.1` over verbs-shm (not written yet).
