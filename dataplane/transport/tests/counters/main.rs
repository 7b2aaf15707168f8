//! Counter coverage: every way the transport drops a packet, and every NAK it sends or
//! receives, moves exactly one counter (the transport's `counters.rs`).
//!
//! Each test triggers one path with hand-delivered frames (taken from the peer, sometimes
//! rewritten, sometimes built from scratch with the wire crate) and asserts, for each host,
//! which drop/NAK counters ([`Counter::is_drop_or_nak`]) moved and by how much — every other
//! one must not have moved.
//!
//! One module per place a packet can be dropped or NAKed: [`frames`] (the frame layer),
//! [`addresses`] (the connection's addresses and the keys), [`state`] (the QP's state and
//! type), [`responder`], [`completer`], [`selective`] (selective repeat), [`uc`], [`ud`],
//! [`multicast`] (UD multicast groups);
//! [`helpers`] holds what they share.

mod addresses;
mod completer;
mod frames;
mod helpers;
mod multicast;
mod responder;
mod selective;
mod state;
mod uc;
mod ud;

use xroce_transport::Counter;

#[test]
fn every_drop_or_nak_counter_is_exercised_here() {
    // The tests above between them move every drop/NAK counter but one that no packet
    // can reach: `rcvd_wrong_transport` for a duplicate of a response kind (responses go
    // to the completer before the duplicate check). Listed so that a new counter is
    // noticed: add a test for it, then add it here.
    let covered = [
        "rcvd_icrc_err",
        "rcvd_malformed",
        "rcvd_wrong_dgid",
        "rcvd_unsupported_opcode",
        "rcvd_unknown_qpn",
        "rcvd_mcast_unjoined",
        "rcvd_qp_not_ready",
        "rcvd_wrong_transport",
        "rcvd_wrong_addr",
        "bad_pkey_cntr",
        "qkey_viol_cntr",
        "duplicate_request",
        "out_of_seq_request",
        "out_of_seq_dropped",
        "duplicate_request_no_resource",
        "rcvd_rnr_err",
        "send_rnr_err",
        "rcvd_seq_err",
        "sent_nak_invalid_request",
        "sent_nak_remote_access",
        "sent_nak_remote_op",
        "rcvd_nak_invalid_request",
        "rcvd_nak_remote_access",
        "rcvd_nak_remote_op",
        "duplicate_response",
        "unexpected_response",
        "response_out_of_seq",
        "bad_response",
        "uc_dropped",
        "rcvd_no_recv_wqe",
        "rcvd_length_err",
        "rcvd_rkey_violation",
        "response_queue_full",
        "rcvd_qp_error",
        "sr_held_dropped_full",
        "sr_duplicates_dropped",
        "sr_naks_sent",
        "sr_naks_received",
        "sr_sack_malformed",
    ];
    let all: Vec<&str> = Counter::ALL
        .iter()
        .filter(|c| c.is_drop_or_nak())
        .map(|c| c.name())
        .collect();
    assert_eq!(all, covered);
}
