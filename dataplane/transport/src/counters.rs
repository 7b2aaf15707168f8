//! Counters named after rxe's hardware counters (`rxe_hw_counters.h`), plus one for every
//! other way a packet can be dropped or answered with a NAK.
//!
//! Rule: every packet the transport drops, and every NAK it sends or receives, increments
//! exactly one counter. Tests assert which.

/// Defines a set of counters: a `Counters` struct with one `u64` field per counter, and a
/// `Counter` enum that names them, with each counter's name, its description (its doc
/// comment), `value`, `inc`, `add` and `iter`. The transport's counters are one set, the
/// connection manager's (`xroce-cm`) another. The doc comment before `Counters;` documents
/// the struct.
#[macro_export]
macro_rules! counter_set {
    (
        $(#[doc = $set_doc:literal])*
        Counters;
        $( $(#[doc = $doc:literal])* $name:ident ),* $(,)?
    ) => {
        $(#[doc = $set_doc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct Counters {
            $( $(#[doc = $doc])* pub $name: u64, )*
        }

        /// One counter, by name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types)]
        pub enum Counter {
            $( $(#[doc = $doc])* $name, )*
        }

        impl Counter {
            /// Every counter, in declaration order.
            pub const ALL: &'static [Counter] = &[$(Counter::$name),*];

            /// The counter's name.
            pub fn name(self) -> &'static str {
                match self { $(Counter::$name => stringify!($name),)* }
            }

            /// What the counter counts.
            pub fn description(self) -> &'static str {
                match self { $(Counter::$name => concat!($($doc),*).trim_ascii(),)* }
            }
        }

        impl Counters {
            /// The value of one counter.
            pub fn value(&self, counter: Counter) -> u64 {
                match counter { $(Counter::$name => self.$name,)* }
            }

            /// Increments one counter.
            pub fn inc(&mut self, counter: Counter) {
                match counter { $(Counter::$name => self.$name += 1,)* }
            }

            /// Adds every counter of `other` to `self`.
            pub fn add(&mut self, other: &Counters) {
                $( self.$name += other.$name; )*
            }

            /// `(name, value)` for every counter.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
                Counter::ALL.iter().map(move |c| (c.name(), self.value(*c)))
            }
        }
    };
}

counter_set! {
    /// The transport's counters. Field names are the names users see (`xroce stats`).
    Counters;

    /// Packets the transport emitted.
    sent_pkts,
    /// Packets the transport accepted for a queue pair (parsed, ICRC good, QP found).
    rcvd_pkts,
    /// Frames dropped because their ICRC did not verify.
    rcvd_icrc_err,
    /// Frames dropped because they did not parse as RoCEv2 (the error names why in logs).
    rcvd_malformed,
    /// Frames dropped because their destination address is not one of this endpoint's GIDs.
    rcvd_wrong_dgid,
    /// Packets dropped because the transport does not implement their opcode (RD, CNP,
    /// XRC, FLUSH, ATOMIC WRITE).
    rcvd_unsupported_opcode,
    /// Packets dropped because no queue pair has their destination QP number.
    rcvd_unknown_qpn,
    /// Multicast packets (destination QP 0xFFFFFF) dropped because no queue pair is
    /// attached to the group their destination GID names (with several pollers, each takes
    /// a copy and none counts this).
    rcvd_mcast_unjoined,
    /// Packets dropped because the queue pair's state does not accept packets (RESET, INIT).
    rcvd_qp_not_ready,
    /// Packets dropped because their opcode is not of the queue pair's transport type.
    rcvd_wrong_transport,
    /// RC and UC packets dropped because their source and destination addresses are not
    /// the queue pair's path: the peer's GID and the local GID the path names (rxe's
    /// `check_addr`, which drops them without a counter). Whoever can send to the host must
    /// not be able to join a connection.
    rcvd_wrong_addr,
    /// Packets dropped because their P_Key does not match the queue pair's (IBTA 10.9.3;
    /// rxe's port attribute of the same name).
    bad_pkey_cntr,
    /// UD packets dropped because their Q_Key does not match the queue pair's (IBTA
    /// 10.2.5; rxe's port attribute of the same name).
    qkey_viol_cntr,
    /// Requests that were duplicates of already executed ones (re-ACKed or replayed).
    duplicate_request,
    /// Requests ahead of the expected PSN that caused a PSN sequence error NAK.
    out_of_seq_request,
    /// Requests ahead of the expected PSN dropped after the NAK for their gap was sent.
    out_of_seq_dropped,
    /// Duplicate READ or atomic requests for which no responder resource was left (dropped).
    duplicate_request_no_resource,
    /// RNR NAKs received.
    rcvd_rnr_err,
    /// RNR NAKs sent.
    send_rnr_err,
    /// PSN sequence error NAKs received.
    rcvd_seq_err,
    /// Invalid request NAKs sent.
    sent_nak_invalid_request,
    /// Remote access error NAKs sent.
    sent_nak_remote_access,
    /// Remote operational error NAKs sent.
    sent_nak_remote_op,
    /// Invalid request NAKs received.
    rcvd_nak_invalid_request,
    /// Remote access error NAKs received.
    rcvd_nak_remote_access,
    /// Remote operational error NAKs received (and NAKs with reserved codes).
    rcvd_nak_remote_op,
    /// Retransmissions started (timeouts and sequence errors).
    completer_retry_err,
    /// Expirations of the QP's own retransmit timeout (`timeout`) without progress: each
    /// spends one of the retry count.
    retransmit_timeouts,
    /// Work requests failed because the transport retry counter was exhausted.
    retry_exceeded_err,
    /// Work requests failed because the RNR retry counter was exhausted.
    retry_rnr_exceeded_err,
    /// Responses dropped because they were duplicates or stale (PSN already completed).
    duplicate_response,
    /// Responses dropped because no work request was waiting for them.
    unexpected_response,
    /// READ responses dropped because an earlier response is missing (they are retried).
    response_out_of_seq,
    /// Responses that violated the protocol (wrong opcode for the request, wrong sequence).
    bad_response,
    /// UC packets dropped because the message they belong to was already broken.
    uc_dropped,
    /// UC or UD messages dropped because no receive work request was posted.
    rcvd_no_recv_wqe,
    /// UC or UD messages dropped because they were too long for the receive buffer or path.
    rcvd_length_err,
    /// UC WRITEs dropped because of an rkey violation.
    rcvd_rkey_violation,
    /// Responses (ACKs) not sent because the response queue was full.
    response_queue_full,
    /// Send work requests that completed with an error status (not flushes).
    send_err,
    /// SEND messages completed by the requester.
    rdma_sends,
    /// SEND messages received and completed by the responder.
    rdma_recvs,
    /// Packets dropped because their queue pair is in the error state.
    rcvd_qp_error,
    /// Times a queue pair had a request packet ready but the endpoint's budget of
    /// unacknowledged request packets was spent (it waits for acknowledgements instead of
    /// overrunning the peer's receive ring).
    req_held_by_budget,
    /// Times a queue pair without a retransmit timer (`timeout` 0) went a stall period
    /// without an answer from its peer: it stops holding the budget and sending until the
    /// peer answers.
    req_stalled,
    /// Times a queue pair had a request packet ready but its window of packets in flight,
    /// bounded by what its measured round trip and delivery rate say the path needs, was
    /// full.
    req_held_by_window,
    /// Times a queue pair resending after a loss held a packet back so that the resend
    /// leaves no faster than the path delivered.
    req_held_by_pacing,
    /// Request packets sent again (a retransmission of any kind).
    retransmitted_pkts,
    /// Retransmissions started at once, without waiting for a timer: on a PSN sequence
    /// error NAK, or on a response showing that an earlier one was lost.
    prompt_retries,
    /// Round trips measured (one packet timed at a time, never a retransmitted one).
    rtt_samples,
    /// Expiries of the retransmit timer derived from measured round trips, before the
    /// QP's own timeout: resent without spending the retry count.
    adaptive_timeouts,
    /// Those of `adaptive_timeouts` that resent a gap a NAK had already made the requester
    /// resend: the resend was lost too and the gap persisted.
    gap_retries,
    /// Those of `adaptive_timeouts` found needless: what was sent before was answered
    /// sooner after the expiry than the path carries a resend and its answer (a peer
    /// answering late). The measured timer's floor rises to the time that answer took.
    spurious_timeouts,
    /// Go-back-N: expiries of the retransmit timer after which the oldest unacknowledged
    /// packet was resent alone, to learn whether it was lost before going back N (RFC
    /// 5682's test). After two tests in a row that found it lost, only one expiry in
    /// eight runs the test until one finds an expiry needless.
    frto_probes,
    /// Expiries of the retransmit timer while no packet in flight asked for an answer (a
    /// rate limiter held the QP after a burst none of whose packets asked): no answer was
    /// late, so nothing is resent and the timer runs again, restarted when the next packet
    /// that asks leaves. The QP's own timeout still resends.
    unasked_timeouts,
    /// Selective repeat: request packets ahead of the expected PSN kept until the gap
    /// before them is filled.
    sr_packets_held,
    /// Selective repeat: request packets ahead of the expected PSN dropped because the
    /// store of held packets was full (they are resent as gaps).
    sr_held_dropped_full,
    /// Selective repeat: request packets dropped because a copy of them was held already.
    sr_duplicates_dropped,
    /// Selective repeat: PSN sequence error NAKs sent with a selective acknowledgement.
    sr_naks_sent,
    /// Selective repeat: PSN sequence error NAKs received with a selective acknowledgement.
    sr_naks_received,
    /// Selective repeat: request packets resent because the responder did not hold them
    /// (holes only; going back N counts in `retransmitted_pkts` alone).
    sr_packets_resent,
    /// Selective repeat: acknowledgements dropped because the bytes after their AETH were
    /// no selective acknowledgement, came with anything but a PSN sequence error NAK, or
    /// said a PSN never sent was held.
    sr_sack_malformed,
    /// Selective repeat: NAKs with a selective acknowledgement received by a QP without
    /// selective repeat (its peer has it on), taken for the PSN sequence error NAK they
    /// are (counted in `rcvd_seq_err` too), their ranges ignored.
    sr_naks_taken_as_standard,
    /// Selective repeat: times a queue pair had a request packet ready but the PSNs from
    /// the oldest unacknowledged one already filled what the responder's store holds
    /// ahead of a gap.
    sr_held_by_store,
    /// Duplicates of SENDs and WRITEs a destroyed queue pair answered while it lingered
    /// (`Endpoint::close_qp`): its peer had not seen the acknowledgement of what it sent
    /// last. Each is counted in `duplicate_request` too.
    closed_qp_answers,
}

impl Counter {
    /// Whether this counter counts a dropped packet, a response not sent, or a NAK sent or
    /// received: the counters the rule of this module is about. Every such event lands in
    /// exactly one of them. The others count traffic (`sent_pkts`, `rcvd_pkts`), messages
    /// (`rdma_sends`, `rdma_recvs`) and what the requester did about a problem already
    /// counted (`completer_retry_err`, `retransmit_timeouts`, `retry_exceeded_err`,
    /// `retry_rnr_exceeded_err`, `send_err`).
    pub fn is_drop_or_nak(self) -> bool {
        !matches!(
            self,
            Counter::sent_pkts
                | Counter::rcvd_pkts
                | Counter::rdma_sends
                | Counter::rdma_recvs
                | Counter::completer_retry_err
                | Counter::retransmit_timeouts
                | Counter::retry_exceeded_err
                | Counter::retry_rnr_exceeded_err
                | Counter::send_err
                | Counter::req_held_by_budget
                | Counter::req_stalled
                | Counter::req_held_by_window
                | Counter::req_held_by_pacing
                | Counter::retransmitted_pkts
                | Counter::prompt_retries
                | Counter::rtt_samples
                | Counter::adaptive_timeouts
                | Counter::gap_retries
                | Counter::spurious_timeouts
                | Counter::frto_probes
                | Counter::unasked_timeouts
                | Counter::sr_packets_held
                | Counter::sr_packets_resent
                | Counter::sr_naks_taken_as_standard
                | Counter::sr_held_by_store
                | Counter::closed_qp_answers
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_values_and_descriptions_line_up() {
        let mut c = Counters::default();
        c.inc(Counter::duplicate_request);
        c.inc(Counter::duplicate_request);
        assert_eq!(c.duplicate_request, 2);
        assert_eq!(c.value(Counter::duplicate_request), 2);
        assert_eq!(Counter::duplicate_request.name(), "duplicate_request");
        assert!(Counter::ALL.iter().all(|c| !c.description().is_empty()));
        let mut sum = Counters::default();
        sum.add(&c);
        sum.add(&c);
        assert_eq!(
            sum.iter().find(|(n, _)| *n == "duplicate_request"),
            Some(("duplicate_request", 4))
        );
    }
}
