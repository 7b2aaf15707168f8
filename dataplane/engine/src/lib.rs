//! The xroce dataplane daemon `xroced` (not written yet).
