//! The `ibv_wr_*` work request builder of extended queue pairs (`ibv_qp_ex`, verbs.h
//! 1272–1447).
//!
//! Between `ibv_wr_start` and `ibv_wr_complete` each operation call (`ibv_wr_send`,
//! `ibv_wr_rdma_write`, …) begins a new request from the `wr_id` and `wr_flags` the
//! application stored in the `ibv_qp_ex`, and the setters that follow
//! (`ibv_wr_set_sge`, `ibv_wr_set_inline_data`, `ibv_wr_set_ud_addr`, …) complete it. The
//! requests are kept here, in their shared-memory form, and `ibv_wr_complete` posts them
//! all or none: a mistake in any of them (an operation the QP was not created for, too
//! many scatter/gather elements, too much inline data, a setter with no request to set)
//! makes `ibv_wr_complete` return its errno and post nothing, as rdma-core's rxe provider
//! does. `ibv_wr_abort` drops them.
//!
//! The application serialises `ibv_wr_start` … `ibv_wr_complete` on a QP (providers hold
//! the send queue's lock in between); the builder's own lock only keeps a violation of that
//! from corrupting it.

use std::ffi::c_void;

use verbs_abi::*;
use verbs_shm::contract::{MAX_INLINE, MAX_SGE, SendWqe, Sge};
use zerocopy::FromZeros;

use super::context::errno;
use super::objects::{Ah, Qp, lock, raw, trusted};
use crate::ffi::{Errno, Verb};

/// The requests of one `ibv_wr_start` … `ibv_wr_complete` sequence.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    /// Inside a sequence.
    open: bool,
    /// The requests built so far; the last one is the one setters complete.
    wqes: Vec<SendWqe>,
    /// Scatter/gather list or inline data already set on the last request.
    data_set: bool,
    /// The first mistake of the sequence.
    error: Option<Errno>,
}

impl Builder {
    fn fail(&mut self, e: Errno) {
        self.error.get_or_insert(e);
    }
}

/// The send operations an extended QP of type `qp_type` can be created with.
pub(crate) fn supported_send_ops(qp_type: u32) -> u64 {
    let send = u64::from(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
    let write = u64::from(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
    match qp_type {
        IBV_QPT_RC => {
            send | write
                | u64::from(
                    IBV_QP_EX_WITH_RDMA_READ
                        | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
                        | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
                        | IBV_QP_EX_WITH_SEND_WITH_INV,
                )
        }
        IBV_QPT_UC => send | write,
        IBV_QPT_UD => send,
        _ => 0,
    }
}

/// The `IBV_QP_EX_WITH_*` flag that allows work request opcode `opcode`.
fn send_op_flag(opcode: u32) -> u64 {
    u64::from(match opcode {
        IBV_WR_RDMA_WRITE => IBV_QP_EX_WITH_RDMA_WRITE,
        IBV_WR_RDMA_WRITE_WITH_IMM => IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        IBV_WR_SEND => IBV_QP_EX_WITH_SEND,
        IBV_WR_SEND_WITH_IMM => IBV_QP_EX_WITH_SEND_WITH_IMM,
        IBV_WR_RDMA_READ => IBV_QP_EX_WITH_RDMA_READ,
        IBV_WR_ATOMIC_CMP_AND_SWP => IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
        IBV_WR_ATOMIC_FETCH_AND_ADD => IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        IBV_WR_SEND_WITH_INV => IBV_QP_EX_WITH_SEND_WITH_INV,
        _ => 0,
    })
}

/// The send flags a `wr_flags` may carry (inline data is asked for with
/// `ibv_wr_set_inline_data`, not with `IBV_SEND_INLINE`, which is ignored here).
const WR_FLAGS: u32 = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;

/// The extended QP behind `qp`.
///
/// # Safety
///
/// `qp` is an `ibv_qp_ex` this library handed out (the C contract of the inline `ibv_wr_*`
/// functions).
unsafe fn extended<'a>(qp: *mut ibv_qp_ex) -> Verb<&'a Qp> {
    // Safety: forwarded from the caller; `qp_base` is the first field of `ibv_qp_ex`.
    let qp = unsafe { trusted::<Qp>(qp.cast()) }?;
    if qp.send_ops == 0 {
        return Err(Errno::EINVAL);
    }
    Ok(qp)
}

/// `ibv_wr_start`.
///
/// # Safety
///
/// As [`extended`].
pub(crate) unsafe fn start(qp: *mut ibv_qp_ex) -> Verb<()> {
    // Safety: forwarded from the caller.
    let qp = unsafe { extended(qp) }?;
    let mut b = lock(&qp.builder);
    b.open = true;
    b.wqes.clear();
    b.data_set = false;
    b.error = None;
    Ok(())
}

/// `ibv_wr_complete`: posts the sequence's requests, all or none.
///
/// # Safety
///
/// As [`extended`].
pub(crate) unsafe fn complete(qp: *mut ibv_qp_ex) -> Verb<()> {
    // Safety: forwarded from the caller.
    let qp = unsafe { extended(qp) }?;
    let mut b = lock(&qp.builder);
    if !b.open {
        return Err(Errno::EINVAL);
    }
    b.open = false;
    let wqes = std::mem::take(&mut b.wqes);
    if let Some(e) = b.error.take() {
        return Err(e);
    }
    qp.may_send()?;
    if qp.qp_type == IBV_QPT_UD && wqes.iter().any(|w| w.ah == 0) {
        // A datagram without `ibv_wr_set_ud_addr` has nowhere to go.
        return Err(Errno::EINVAL);
    }
    qp.client.post_send_all(&wqes).map_err(|e| errno(&e))?;
    // Keep the allocation for the next sequence.
    b.wqes = wqes;
    b.wqes.clear();
    Ok(())
}

/// `ibv_wr_abort`: drops the sequence's requests.
///
/// # Safety
///
/// As [`extended`].
pub(crate) unsafe fn abort(qp: *mut ibv_qp_ex) -> Verb<()> {
    // Safety: forwarded from the caller.
    let qp = unsafe { extended(qp) }?;
    let mut b = lock(&qp.builder);
    b.open = false;
    b.wqes.clear();
    b.error = None;
    Ok(())
}

/// Begins a request with `opcode`, filled further by `fill`.
///
/// # Safety
///
/// As [`extended`].
pub(crate) unsafe fn begin(
    qp: *mut ibv_qp_ex,
    opcode: u32,
    fill: impl FnOnce(&mut SendWqe),
) -> Verb<()> {
    // Safety: forwarded from the caller.
    let qp = unsafe { extended(qp) }?;
    // Safety: the QP is live; the application wrote these two fields before the call.
    let ibv = unsafe { &*raw(&qp.ibv) };
    let (wr_id, wr_flags) = (ibv.wr_id, ibv.wr_flags);
    let mut b = lock(&qp.builder);
    if !b.open {
        b.fail(Errno::EINVAL);
        return Ok(());
    }
    let flag = send_op_flag(opcode);
    if flag == 0 || qp.send_ops & flag == 0 {
        // An operation the QP was not created for.
        b.fail(Errno::EINVAL);
        return Ok(());
    }
    if wr_flags & !WR_FLAGS != 0 {
        b.fail(Errno::EINVAL);
        return Ok(());
    }
    let mut w = SendWqe::new_zeroed();
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.send_flags = wr_flags & !IBV_SEND_INLINE;
    fill(&mut w);
    b.wqes.push(w);
    b.data_set = false;
    Ok(())
}

/// Applies `set` to the request being built (a setter with no request is a mistake).
///
/// # Safety
///
/// As [`extended`].
unsafe fn with_current(
    qp: *mut ibv_qp_ex,
    set: impl FnOnce(&Qp, &mut SendWqe) -> Verb<()>,
) -> Verb<()> {
    // Safety: forwarded from the caller.
    let qp = unsafe { extended(qp) }?;
    let mut b = lock(&qp.builder);
    let b = &mut *b;
    if !b.open {
        b.fail(Errno::EINVAL);
        return Ok(());
    }
    let Some(w) = b.wqes.last_mut() else {
        b.fail(Errno::EINVAL);
        return Ok(());
    };
    if let Err(e) = set(qp, w) {
        b.fail(e);
    }
    Ok(())
}

/// Sets the data of the request being built, once.
///
/// # Safety
///
/// As [`extended`].
unsafe fn with_data(
    qp: *mut ibv_qp_ex,
    set: impl FnOnce(&Qp, &mut SendWqe) -> Verb<()>,
) -> Verb<()> {
    // Safety: forwarded from the caller.
    let q = unsafe { extended(qp) }?;
    {
        let mut b = lock(&q.builder);
        if b.data_set {
            b.fail(Errno::EINVAL);
            return Ok(());
        }
    }
    // Safety: forwarded from the caller.
    unsafe { with_current(qp, set) }?;
    lock(&q.builder).data_set = true;
    Ok(())
}

fn is_read_or_atomic(opcode: u32) -> bool {
    matches!(
        opcode,
        IBV_WR_RDMA_READ | IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD
    )
}

/// `ibv_wr_set_sge_list` (and `ibv_wr_set_sge` with one element).
///
/// # Safety
///
/// As [`extended`]; `list` is readable for `n` elements.
pub(crate) unsafe fn set_sge_list(qp: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) -> Verb<()> {
    let elements: Verb<Vec<Sge>> = if n == 0 {
        Ok(Vec::new())
    } else if list.is_null() || n > MAX_SGE {
        Err(Errno::EINVAL)
    } else {
        // Safety: readable for `n` elements (caller); `ibv_sge` is plain integers.
        let given = unsafe { std::slice::from_raw_parts(list, n) };
        Ok(given
            .iter()
            .map(|s| Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            })
            .collect())
    };
    // Safety: forwarded from the caller.
    unsafe {
        with_data(qp, |q, w| {
            let elements = elements?;
            if elements.len() > q.client.caps().max_send_sge as usize {
                return Err(Errno::EINVAL);
            }
            w.num_sge = elements.len() as u32;
            for (i, s) in elements.into_iter().enumerate() {
                w.set_sge(i, s);
            }
            Ok(())
        })
    }
}

/// `ibv_wr_set_inline_data_list` (and `ibv_wr_set_inline_data` with one buffer): the
/// bytes are copied now, as verbs lets the application reuse them when the call returns.
///
/// # Safety
///
/// As [`extended`]; `list` is readable for `n` buffers, each readable for its length.
pub(crate) unsafe fn set_inline_data_list(
    qp: *mut ibv_qp_ex,
    n: usize,
    list: *const ibv_data_buf,
) -> Verb<()> {
    let mut bytes = Vec::new();
    let mut gathered: Verb<()> = Ok(());
    if n > 0 {
        if list.is_null() {
            gathered = Err(Errno::EINVAL);
        } else {
            // Safety: readable for `n` buffers (caller).
            let bufs = unsafe { std::slice::from_raw_parts(list, n) };
            for b in bufs {
                if bytes.len().saturating_add(b.length) > MAX_INLINE {
                    gathered = Err(Errno::EINVAL);
                    break;
                }
                if b.length > 0 {
                    if b.addr.is_null() {
                        gathered = Err(Errno::EINVAL);
                        break;
                    }
                    // Safety: each buffer is readable for its length (caller).
                    bytes.extend_from_slice(unsafe {
                        std::slice::from_raw_parts(b.addr.cast::<u8>(), b.length)
                    });
                }
            }
        }
    }
    // Safety: forwarded from the caller.
    unsafe {
        with_data(qp, |q, w| {
            gathered?;
            if is_read_or_atomic(w.opcode) || bytes.len() > q.client.caps().max_inline_data as usize
            {
                return Err(Errno::EINVAL);
            }
            w.data[..bytes.len()].copy_from_slice(&bytes);
            w.num_sge = bytes.len() as u32;
            w.send_flags |= IBV_SEND_INLINE;
            Ok(())
        })
    }
}

/// `ibv_wr_set_inline_data`.
///
/// # Safety
///
/// As [`extended`]; `addr` is readable for `length` bytes.
pub(crate) unsafe fn set_inline_data(
    qp: *mut ibv_qp_ex,
    addr: *mut c_void,
    length: usize,
) -> Verb<()> {
    let one = ibv_data_buf { addr, length };
    // Safety: one buffer, readable per the caller.
    unsafe { set_inline_data_list(qp, 1, &one) }
}

/// `ibv_wr_set_ud_addr`.
///
/// # Safety
///
/// As [`extended`]; `ah` is an address handle of this library.
pub(crate) unsafe fn set_ud_addr(
    qp: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) -> Verb<()> {
    // Safety: the caller guarantees `ah` is an address handle of this library.
    let ah = unsafe { trusted::<Ah>(ah) }.map(|a| a.client.handle());
    // Safety: forwarded from the caller.
    unsafe {
        with_current(qp, |q, w| {
            if q.qp_type != IBV_QPT_UD {
                return Err(Errno::EINVAL);
            }
            w.ah = ah?;
            w.remote_qpn = remote_qpn;
            w.remote_qkey = remote_qkey;
            Ok(())
        })
    }
}

/// A setter for something this library does not offer (XRC's remote SRQ number).
///
/// # Safety
///
/// As [`extended`].
pub(crate) unsafe fn unsupported_setter(qp: *mut ibv_qp_ex) -> Verb<()> {
    // Safety: forwarded from the caller.
    unsafe { with_current(qp, |_, _| Err(Errno::EOPNOTSUPP)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_qp_type_offers_the_operations_of_its_transport() {
        let rc = supported_send_ops(IBV_QPT_RC);
        let uc = supported_send_ops(IBV_QPT_UC);
        let ud = supported_send_ops(IBV_QPT_UD);
        for op in [IBV_WR_SEND, IBV_WR_SEND_WITH_IMM] {
            let f = send_op_flag(op);
            assert!(rc & f != 0 && uc & f != 0 && ud & f != 0, "{op}");
        }
        for op in [IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM] {
            let f = send_op_flag(op);
            assert!(rc & f != 0 && uc & f != 0 && ud & f == 0, "{op}");
        }
        for op in [
            IBV_WR_RDMA_READ,
            IBV_WR_ATOMIC_CMP_AND_SWP,
            IBV_WR_ATOMIC_FETCH_AND_ADD,
            IBV_WR_SEND_WITH_INV,
        ] {
            let f = send_op_flag(op);
            assert!(rc & f != 0 && uc & f == 0 && ud & f == 0, "{op}");
        }
        // Memory windows, local invalidation, TSO and atomic write are not offered.
        let none = u64::from(
            IBV_QP_EX_WITH_BIND_MW
                | IBV_QP_EX_WITH_LOCAL_INV
                | IBV_QP_EX_WITH_TSO
                | IBV_QP_EX_WITH_ATOMIC_WRITE,
        );
        assert_eq!(rc & none, 0);
        assert_eq!(supported_send_ops(IBV_QPT_XRC_SEND), 0);
    }
}
