//! Conversions between `enum ibv_rate` codes, multiples of 2.5 Gbit/s and Mbit/s.

use std::ffi::c_int;

use verbs_abi::*;

/// Every rate code with its multiple of 2.5 Gbit/s (if it is one) and its rate in Mbit/s,
/// as rdma-core reports them (the FDR and EDR rates are their 64b/66b signalling rates, so
/// they have no multiple).
const RATES: [(ibv_rate, Option<c_int>, c_int); 23] = [
    (IBV_RATE_2_5_GBPS, Some(1), 2_500),
    (IBV_RATE_5_GBPS, Some(2), 5_000),
    (IBV_RATE_10_GBPS, Some(4), 10_000),
    (IBV_RATE_20_GBPS, Some(8), 20_000),
    (IBV_RATE_30_GBPS, Some(12), 30_000),
    (IBV_RATE_40_GBPS, Some(16), 40_000),
    (IBV_RATE_60_GBPS, Some(24), 60_000),
    (IBV_RATE_80_GBPS, Some(32), 80_000),
    (IBV_RATE_120_GBPS, Some(48), 120_000),
    (IBV_RATE_14_GBPS, None, 14_062),
    (IBV_RATE_56_GBPS, None, 56_250),
    (IBV_RATE_112_GBPS, None, 112_500),
    (IBV_RATE_168_GBPS, None, 168_750),
    (IBV_RATE_25_GBPS, None, 25_781),
    (IBV_RATE_100_GBPS, None, 103_125),
    (IBV_RATE_200_GBPS, None, 206_250),
    (IBV_RATE_300_GBPS, None, 309_375),
    (IBV_RATE_28_GBPS, Some(11), 28_125),
    (IBV_RATE_50_GBPS, Some(20), 53_125),
    (IBV_RATE_400_GBPS, Some(160), 425_000),
    (IBV_RATE_600_GBPS, Some(240), 637_500),
    (IBV_RATE_800_GBPS, Some(320), 850_000),
    (IBV_RATE_1200_GBPS, Some(480), 1_275_000),
];

/// `ibv_rate_to_mult`: -1 for codes that are not a multiple of 2.5 Gbit/s.
pub(crate) fn to_mult(rate: ibv_rate) -> c_int {
    RATES
        .iter()
        .find(|r| r.0 == rate)
        .and_then(|r| r.1)
        .unwrap_or(-1)
}

/// `mult_to_ibv_rate`: `IBV_RATE_MAX` for unknown multiples.
pub(crate) fn from_mult(mult: c_int) -> ibv_rate {
    RATES
        .iter()
        .find(|r| r.1 == Some(mult))
        .map_or(IBV_RATE_MAX, |r| r.0)
}

/// `ibv_rate_to_mbps`: -1 for unknown codes.
pub(crate) fn to_mbps(rate: ibv_rate) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

/// `mbps_to_ibv_rate`: exact matches only, `IBV_RATE_MAX` otherwise.
pub(crate) fn from_mbps(mbps: c_int) -> ibv_rate {
    RATES
        .iter()
        .find(|r| r.2 == mbps)
        .map_or(IBV_RATE_MAX, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip_and_reject_unknown_values() {
        assert_eq!(to_mult(IBV_RATE_10_GBPS), 4);
        assert_eq!(to_mult(IBV_RATE_25_GBPS), -1);
        assert_eq!(to_mult(IBV_RATE_MAX), -1);
        assert_eq!(from_mult(4), IBV_RATE_10_GBPS);
        assert_eq!(from_mult(3), IBV_RATE_MAX);
        assert_eq!(to_mbps(IBV_RATE_100_GBPS), 103_125);
        assert_eq!(to_mbps(99), -1);
        assert_eq!(from_mbps(103_125), IBV_RATE_100_GBPS);
        assert_eq!(from_mbps(100_000), IBV_RATE_MAX);
        for (rate, mult, mbps) in RATES {
            assert_eq!(from_mbps(to_mbps(rate)), rate);
            if let Some(mult) = mult {
                assert_eq!(from_mult(to_mult(rate)), rate);
                assert_eq!(to_mult(from_mult(mult)), mult);
            }
            assert!(mbps > 0);
        }
        // Every code from 2 (2.5 Gbit/s) to 24 (1200 Gbit/s) is in the table once.
        let mut codes: Vec<ibv_rate> = RATES.iter().map(|r| r.0).collect();
        codes.sort_unstable();
        assert_eq!(codes, (2..=24).collect::<Vec<_>>());
    }
}
