//! Compile-time proof that every mirror has rdma-core v44's x86_64 layout.
//!
//! `build.rs` turns each line of `layout.txt` and `layout-extra.txt` into a
//! `const _: () = assert!(…)` on `size_of`, `align_of`, `offset_of!` or
//! [`field_size!`](crate::field_size). A mismatch is a build error naming the file and line.
//!
//! Both files were measured on x86_64 by C programs that include rdma-core v44's verbs.h
//! (Debian 12's `libibverbs-dev` 44.0-2, byte-identical to the v44.0 tag) and print
//! `sizeof`, `_Alignof` and `offsetof`; `layout.txt` also records where each
//! `verbs_context` op sits relative to the `ibv_context` pointer, `__VERBS_ABI_IS_EXTENDED`
//! and a few enumerators. `tests/system_header.rs` re-measures them all.

include!(concat!(env!("OUT_DIR"), "/layout_asserts.rs"));

/// Layout facts that the measurement files cannot express.
const _: () = {
    use core::mem::{offset_of, size_of};
    // The exported ibv_query_port@IBVERBS_1.1 fills this prefix of ibv_port_attr only.
    assert!(size_of::<crate::_compat_ibv_port_attr>() == 48);
    assert!(offset_of!(crate::ibv_port_attr, port_cap_flags2) == 48);
    // ibv_cq_ex_to_cq is a cast: the extended CQ starts with the whole ibv_cq.
    assert!(offset_of!(crate::ibv_cq_ex, comp_mask) == size_of::<crate::ibv_cq>());
    // ibv_create_qp_ex/ibv_create_srq_ex pass the _ex attributes as the plain ones.
    assert!(offset_of!(crate::ibv_qp_init_attr_ex, comp_mask) == 60);
    assert!(
        offset_of!(crate::ibv_srq_init_attr_ex, attr) == offset_of!(crate::ibv_srq_init_attr, attr)
    );
    // verbs_get_ctx: the base context is the last field, right after `sz`.
    assert!(
        offset_of!(crate::verbs_context, context) + size_of::<crate::ibv_context>()
            == size_of::<crate::verbs_context>()
    );
    assert!(offset_of!(crate::verbs_context, sz) + 8 == offset_of!(crate::verbs_context, context));
};
