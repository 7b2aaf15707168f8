//! Counters of the connection manager, one per way a MAD can fare, after the Linux CM's
//! `cm_rx_msgs`/`cm_tx_msgs`/`cm_rx_duplicates` groups and the transport's counters.
//!
//! Rule: every MAD handed to [`crate::IbCm::handle_mad`] increments exactly one
//! disposition counter ([`Counter::is_disposition`]): it was delivered to a connection,
//! or it was dropped or answered for a reason that has a name. Tests assert which.

xroce_transport::counter_set! {
    /// The connection manager's counters. Field names are the names users see.
    Counters;

    /// MADs handed to the CM (whatever became of them).
    rcvd_mads,
    /// MADs that moved a connection on: a state change, an event, or an answer the
    /// connection's state calls for.
    rcvd_delivered,
    /// Bytes that are not a MAD: shorter than 256 bytes, or a base version other than 1.
    rcvd_malformed,
    /// MADs of another management class or class version, or CM MADs with a method other
    /// than Send.
    rcvd_not_cm,
    /// CM MADs whose attribute is not served: ClassPortInfo, LAP and APR (which Linux
    /// refuses on RoCE too), and unknown attributes.
    rcvd_unsupported_attribute,
    /// Messages that name no connection of ours (unknown or mismatched comm IDs). A DREQ
    /// among them is still answered with a DREP, as Linux does.
    rcvd_unmatched,
    /// Messages for a known connection in a state where they mean nothing.
    rcvd_wrong_state,
    /// Copies of messages already handled (REQ, REP, RTU, DREQ, MRA, SIDR_REQ): answered
    /// with an MRA, RTU or DREP where the Linux CM answers, a SIDR_REQ answered lately with
    /// its SIDR_REP again, ignored otherwise.
    rcvd_duplicate,
    /// DREQs whose QPN is not the connection's (dropped).
    rcvd_dreq_wrong_qpn,
    /// REQs for a service ID nobody listens on (answered with REJ 8).
    req_no_listener,
    /// REQs from a (CA GUID, QPN) that still has a live connection here (answered with
    /// REJ 10; the old connection is sent a DREQ).
    req_stale,
    /// REQs whose primary path names a GID that is not ours (answered with REJ 12).
    req_invalid_gid,
    /// REPs from a (CA GUID, QPN) that still has another live connection here (answered
    /// with REJ 10; the old connection is sent a DREQ).
    rep_stale,
    /// SIDR_REQs for a service ID nobody listens on (answered with SIDR_REP status 1).
    sidr_req_no_listener,
    /// REQs and SIDR_REQs for a service ID nobody listened on yet, held for a listener
    /// (`IbCmConfig::listen_grace`); then counted once more, as taken or refused.
    req_held_for_listener,
    /// REJ 8 to a REQ of ours sent less than the listen grace ago: the REQ is sent again
    /// shortly (the peer may be about to listen).
    rej_no_listener_yet,
    /// SIDR_REP status 1 to a SIDR_REQ of ours sent less than the listen grace ago: sent
    /// again shortly.
    sidr_rep_no_listener_yet,
    /// Held REQs that a listener took in time.
    held_req_taken,
    /// Held REQs refused: no listener came in time (REJ 8), or the one that came refused.
    held_req_refused,
    /// MADs queued for sending, retransmissions included.
    sent_mads,
    /// MADs sent again because their answer did not come in time.
    retransmits,
    /// REQs whose retries ran out (the connection becomes unreachable).
    req_timeouts,
    /// REPs whose retries ran out.
    rep_timeouts,
    /// DREQs whose retries ran out (the connection is taken as disconnected).
    dreq_timeouts,
    /// SIDR_REQs whose retries ran out.
    sidr_req_timeouts,
    /// REJs sent.
    sent_rej,
    /// REJs received for a connection of ours.
    rcvd_rej,
    /// Connection requests (REQ, SIDR_REQ) that reached a listened service ID but matched
    /// no rdma_cm listener: bad IP CM header, an address that is not ours or not listened
    /// on, or the wrong QP type. Answered with REJ 28 or SIDR_REP status 2, as Linux does.
    /// (The MAD itself counts as delivered: the CM handed it to rdma_cm.)
    req_refused,
    /// Connection requests a listener had no room for: as many unanswered as its
    /// `rdma_listen` backlog allows. A REQ is dropped without an answer (its sender's
    /// retransmission may find room); a SIDR_REQ gets SIDR_REP status 2, as Linux does.
    /// (The MAD counts as delivered: the CM handed it to rdma_cm.)
    req_over_backlog,
}

impl Counter {
    /// Whether this counter says what became of a received MAD: every MAD handed to the CM
    /// increments exactly one of these.
    pub fn is_disposition(self) -> bool {
        matches!(
            self,
            Counter::rcvd_delivered
                | Counter::rcvd_malformed
                | Counter::rcvd_not_cm
                | Counter::rcvd_unsupported_attribute
                | Counter::rcvd_unmatched
                | Counter::rcvd_wrong_state
                | Counter::rcvd_duplicate
                | Counter::rcvd_dreq_wrong_qpn
                | Counter::req_no_listener
                | Counter::req_stale
                | Counter::req_invalid_gid
                | Counter::rep_stale
                | Counter::sidr_req_no_listener
                | Counter::req_held_for_listener
                | Counter::rej_no_listener_yet
                | Counter::sidr_rep_no_listener_yet
        )
    }
}

impl Counters {
    /// The sum of the disposition counters: equal to `rcvd_mads` at every moment.
    pub fn dispositions(&self) -> u64 {
        Counter::ALL
            .iter()
            .filter(|c| c.is_disposition())
            .map(|c| self.value(*c))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_values_and_descriptions_line_up() {
        let mut c = Counters::default();
        c.inc(Counter::rcvd_duplicate);
        c.inc(Counter::rcvd_duplicate);
        c.inc(Counter::sent_mads);
        assert_eq!(c.rcvd_duplicate, 2);
        assert_eq!(c.value(Counter::rcvd_duplicate), 2);
        assert_eq!(c.dispositions(), 2, "sent_mads is not a disposition");
        assert_eq!(Counter::rcvd_duplicate.name(), "rcvd_duplicate");
        assert!(Counter::ALL.iter().all(|c| !c.description().is_empty()));
        let mut sum = Counters::default();
        sum.add(&c);
        sum.add(&c);
        assert_eq!(
            sum.iter().find(|(n, _)| *n == "rcvd_duplicate"),
            Some(("rcvd_duplicate", 4))
        );
    }
}
