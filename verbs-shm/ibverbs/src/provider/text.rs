//! The `ibv_*_str` functions: fixed English names for enumeration values.
//!
//! The strings are the ones rdma-core prints, because tools and scripts compare them (e.g.
//! "transport retry counter exceeded" in test logs). Out-of-range values are "unknown".

use std::ffi::CStr;

use verbs_abi::{ibv_event_type, ibv_node_type, ibv_port_state, ibv_wc_status};

/// Indexes `names` by an enumeration value, "unknown" outside it.
fn pick(names: &[&'static CStr], value: i64) -> &'static CStr {
    usize::try_from(value)
        .ok()
        .and_then(|i| names.get(i))
        .copied()
        .unwrap_or(c"unknown")
}

/// `ibv_wc_status_str`.
pub(crate) fn wc_status(status: ibv_wc_status) -> &'static CStr {
    const NAMES: [&CStr; 24] = [
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory management operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    pick(&NAMES, status.into())
}

/// `ibv_node_type_str`: names start at `IBV_NODE_CA` (1).
pub(crate) fn node_type(node_type: ibv_node_type) -> &'static CStr {
    const NAMES: [&CStr; 8] = [
        c"unknown",
        c"InfiniBand channel adapter",
        c"InfiniBand switch",
        c"InfiniBand router",
        c"iWARP NIC",
        c"usNIC",
        c"usNIC UDP",
        c"unspecified",
    ];
    pick(&NAMES, node_type.into())
}

/// `ibv_port_state_str`.
pub(crate) fn port_state(port_state: ibv_port_state) -> &'static CStr {
    const NAMES: [&CStr; 6] = [
        c"no state change (NOP)",
        c"down",
        c"init",
        c"armed",
        c"active",
        c"active defer",
    ];
    pick(&NAMES, port_state.into())
}

/// `ibv_event_type_str`.
pub(crate) fn event_type(event: ibv_event_type) -> &'static CStr {
    const NAMES: [&CStr; 20] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    pick(&NAMES, event.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs_abi::*;

    #[test]
    fn names_follow_the_enumerations_and_unknown_values_are_unknown() {
        assert_eq!(wc_status(IBV_WC_SUCCESS), c"success");
        assert_eq!(
            wc_status(IBV_WC_RETRY_EXC_ERR),
            c"transport retry counter exceeded"
        );
        assert_eq!(
            wc_status(IBV_WC_TM_RNDV_INCOMPLETE),
            c"TM software rendezvous"
        );
        assert_eq!(wc_status(IBV_WC_TM_RNDV_INCOMPLETE + 1), c"unknown");
        assert_eq!(node_type(IBV_NODE_CA), c"InfiniBand channel adapter");
        assert_eq!(node_type(IBV_NODE_UNSPECIFIED), c"unspecified");
        assert_eq!(node_type(IBV_NODE_UNKNOWN), c"unknown");
        assert_eq!(node_type(0), c"unknown");
        assert_eq!(node_type(8), c"unknown");
        assert_eq!(port_state(IBV_PORT_ACTIVE), c"active");
        assert_eq!(port_state(IBV_PORT_NOP), c"no state change (NOP)");
        assert_eq!(port_state(6), c"unknown");
        assert_eq!(event_type(IBV_EVENT_CQ_ERR), c"CQ error");
        assert_eq!(event_type(IBV_EVENT_WQ_FATAL), c"WQ fatal");
        assert_eq!(event_type(u32::MAX), c"unknown");
    }
}
