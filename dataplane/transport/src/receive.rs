//! The checks a packet passes between its frame and a queue pair's roles (rxe's
//! `rxe_recv.c`, `hdr_check`).
//!
//! By the time a packet gets here the frame layer has parsed it, verified its ICRC and
//! found its destination address among the port's GIDs ([`frame`](crate::frame)), and the
//! endpoint has found the queue pair its BTH names. The queue pair then checks, in rxe's
//! order: that the opcode is of its service and its state takes the packet
//! (`check_type_state`), that the packet comes from its peer to the address it uses
//! (`check_addr`, RC and UC), and the keys (`check_keys`: the P_Key, and for UD the Q_Key).
//! A packet that fails one is dropped without a word — no NAK, no change of state — and
//! counted once, in the counter the check names.

use xroce_wire::Gid;

use crate::attributes::{QpState, QpType};
use crate::counters::Counter;
use crate::packet::Packet;
use crate::qp::QueuePair;

impl QueuePair {
    /// Every check of rxe's `hdr_check` that concerns the queue pair, in its order. The
    /// error is the counter the drop lands in.
    #[inline]
    pub(crate) fn check_header(&self, pkt: &Packet<'_>, gids: &[Gid]) -> Result<(), Counter> {
        self.check_type_state(pkt)?;
        self.check_addr(pkt, gids)?;
        self.check_keys(pkt)
    }

    /// The opcode must be of the queue pair's service; a request needs a receiving state
    /// (RTR and later), a response a sending one (RTS or SQD: the completer has work).
    fn check_type_state(&self, pkt: &Packet<'_>) -> Result<(), Counter> {
        if pkt.h.transport != self.config.qp_type {
            return Err(Counter::rcvd_wrong_transport);
        }
        let takes = if pkt.h.kind.is_response() {
            matches!(self.state, QpState::Rts | QpState::Sqd)
        } else {
            matches!(
                self.state,
                QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
            )
        };
        match self.state {
            _ if takes => Ok(()),
            QpState::Err => Err(Counter::rcvd_qp_error),
            _ => Err(Counter::rcvd_qp_not_ready),
        }
    }

    /// RC and UC: the packet's source must be the path's destination GID and its
    /// destination the local GID the path names (`sgid_index`), over the path's address
    /// family. The address pair is part of the connection: a packet from any other
    /// address — another address of the peer's host, another host, the peer's IPv6
    /// address when the path is IPv4 — is not from the peer. rxe compares the IP addresses
    /// of the frame with those of the queue pair's address vector; comparing GIDs is the
    /// same for both families, and the family is compared besides, so that an IPv6 frame
    /// with IPv4-mapped addresses does not pass for an IPv4 one.
    fn check_addr(&self, pkt: &Packet<'_>, gids: &[Gid]) -> Result<(), Counter> {
        if self.config.qp_type == QpType::Ud {
            return Ok(());
        }
        let path = &self.attr.path;
        let local = gids.get(usize::from(path.sgid_index));
        let from_peer = pkt.net.sgid == path.dgid;
        let to_us = local == Some(&pkt.net.dgid);
        let family = pkt.net.ipv6 != path.dgid.is_ipv4();
        if from_peer && to_us && family {
            Ok(())
        } else {
            Err(Counter::rcvd_wrong_addr)
        }
    }

    /// The P_Key must match the queue pair's (IBTA 10.9.3: the low 15 bits agree and one
    /// of the two is a full member; the one P_Key of the port is the full default 0xffff,
    /// so any P_Key whose low bits are 0x7fff matches, as in rxe's `pkey_match`). A UD
    /// packet's Q_Key must be the queue pair's (IBTA 10.2.5; the requester substitutes the
    /// queue pair's own Q_Key for a work request's controlled one, so a matching Q_Key is
    /// the only way in).
    fn check_keys(&self, pkt: &Packet<'_>) -> Result<(), Counter> {
        if pkt.h.pkey.0 & 0x7fff != 0x7fff {
            return Err(Counter::bad_pkey_cntr);
        }
        if self.config.qp_type == QpType::Ud
            && let Some(deth) = pkt.h.deth
            && deth.qkey.0 != self.attr.qkey
        {
            return Err(Counter::qkey_viol_cntr);
        }
        Ok(())
    }
}
