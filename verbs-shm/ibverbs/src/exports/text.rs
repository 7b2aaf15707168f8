//! Enumeration names and static rate conversions.

use std::ffi::{c_char, c_int};

use verbs_abi::{ibv_event_type, ibv_node_type, ibv_port_state, ibv_rate, ibv_wc_status};

use crate::ffi;
use crate::provider::{rate, text};

/// `const char *ibv_wc_status_str(enum ibv_wc_status status)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_wc_status_str(status: ibv_wc_status) -> *const c_char {
    ffi::const_null_on_error(|| Ok(text::wc_status(status).as_ptr()))
}

/// `const char *ibv_node_type_str(enum ibv_node_type node_type)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_node_type_str(node_type: ibv_node_type) -> *const c_char {
    ffi::const_null_on_error(|| Ok(text::node_type(node_type).as_ptr()))
}

/// `const char *ibv_port_state_str(enum ibv_port_state port_state)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_port_state_str(port_state: ibv_port_state) -> *const c_char {
    ffi::const_null_on_error(|| Ok(text::port_state(port_state).as_ptr()))
}

/// `const char *ibv_event_type_str(enum ibv_event_type event)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_event_type_str(event: ibv_event_type) -> *const c_char {
    ffi::const_null_on_error(|| Ok(text::event_type(event).as_ptr()))
}

/// `int ibv_rate_to_mult(enum ibv_rate rate)`: -1 if `rate` is not a multiple of 2.5
/// Gbit/s.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_rate_to_mult(rate: ibv_rate) -> c_int {
    ffi::or_fallback(-1, || Ok(rate::to_mult(rate)))
}

/// `enum ibv_rate mult_to_ibv_rate(int mult)`: `IBV_RATE_MAX` if unknown.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mult_to_ibv_rate(mult: c_int) -> ibv_rate {
    ffi::or_fallback(verbs_abi::IBV_RATE_MAX, || Ok(rate::from_mult(mult)))
}

/// `int ibv_rate_to_mbps(enum ibv_rate rate)`: -1 if unknown.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_rate_to_mbps(rate: ibv_rate) -> c_int {
    ffi::or_fallback(-1, || Ok(rate::to_mbps(rate)))
}

/// `enum ibv_rate mbps_to_ibv_rate(int mbps)`: `IBV_RATE_MAX` if unknown.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> ibv_rate {
    ffi::or_fallback(verbs_abi::IBV_RATE_MAX, || Ok(rate::from_mbps(mbps)))
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_text.rs"));

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    #[test]
    fn the_entry_points_return_static_c_strings_and_rates() {
        // Safety: the entry points return pointers to static NUL-terminated strings.
        let text = |p: *const c_char| unsafe { CStr::from_ptr(p) };
        assert_eq!(
            text(ibv_wc_status_str(verbs_abi::IBV_WC_WR_FLUSH_ERR)),
            c"Work Request Flushed Error"
        );
        assert_eq!(
            text(ibv_node_type_str(verbs_abi::IBV_NODE_CA)),
            c"InfiniBand channel adapter"
        );
        assert_eq!(text(ibv_port_state_str(verbs_abi::IBV_PORT_DOWN)), c"down");
        assert_eq!(
            text(ibv_event_type_str(verbs_abi::IBV_EVENT_PORT_ERR)),
            c"port error"
        );
        assert_eq!(ibv_rate_to_mult(verbs_abi::IBV_RATE_40_GBPS), 16);
        assert_eq!(mult_to_ibv_rate(16), verbs_abi::IBV_RATE_40_GBPS);
        assert_eq!(ibv_rate_to_mbps(verbs_abi::IBV_RATE_25_GBPS), 25_781);
        assert_eq!(mbps_to_ibv_rate(25_781), verbs_abi::IBV_RATE_25_GBPS);
    }
}
