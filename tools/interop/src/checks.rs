//! What the interop run checks, and how its results read: the checks (which programs,
//! which side serves), the figures taken from the programs' output, the result table.

/// How a check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    Pass,
    Fail,
    Skip,
}

/// One line of the result table.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) check: String,
    pub(super) server: &'static str,
    pub(super) client: &'static str,
    pub(super) outcome: Outcome,
    pub(super) secs: f64,
    pub(super) detail: String,
}

/// Which side runs what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The VM, with rxe and the Debian programs.
    Rxe,
    /// The xroce namespace.
    Xroce,
}

impl Side {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Side::Rxe => "rxe",
            Side::Xroce => "xroce",
        }
    }
}

/// The programs a check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Program {
    /// `xroce-pingpong` (xroce side) against `ibv_<service>_pingpong` (rxe side).
    Pingpong {
        service: &'static str,
        size: u32,
        iters: u32,
    },
    /// An unmodified Debian program on both sides, the xroce side on the drop-in library.
    DropIn {
        program: &'static str,
        size: u32,
        iters: u32,
    },
    /// An unmodified Debian program that connects through rdma_cm, on both sides (the
    /// xroce side on the drop-in `libibverbs.so.1` and `librdmacm.so.1`).
    RdmaCm(CmTool),
    /// UCX's `ucx_perftest` (Debian's `ucx-utils`) on both sides, the xroce side on the
    /// drop-in library: one UCP test over one verbs transport. UCX exchanges its worker
    /// addresses over its own TCP connection (port 13337) and wires RC up through UD.
    Ucx {
        /// The verbs transport every message must use: `rc_verbs` or `ud_verbs`.
        transport: &'static str,
        /// `-t`: `tag_bw`, `tag_lat`, `ucp_put_bw`, …
        test: &'static str,
        size: u32,
        iters: u32,
    },
}

/// The TCP port `ucx_perftest`'s server listens on.
pub(super) const UCX_PERFTEST_PORT: u16 = 13337;

/// The UCX checks: tag matching (eager and rendezvous) and RDMA puts over RC, tag
/// matching over UD.
pub(super) const UCX_TESTS: &[(&str, &str, u32, u32)] = &[
    ("rc_verbs", "tag_bw", 65536, 50),
    ("rc_verbs", "tag_lat", 8, 200),
    ("rc_verbs", "ucp_put_bw", 65536, 50),
    ("ud_verbs", "tag_bw", 4096, 50),
    ("ud_verbs", "tag_lat", 8, 200),
];

/// `UCX_TLS` for a test over `transport`: RC needs UD beside it to wire its connections up.
pub(super) fn ucx_tls(transport: &str) -> &'static str {
    if transport == "rc_verbs" {
        "rc_verbs,ud_verbs"
    } else {
        "ud_verbs"
    }
}

/// A program of [`Program::RdmaCm`]: its two command lines. `{addr}` is the server's
/// address (the server binds it, the client connects to it), `{self}` the side's own
/// address, `{dev}` the side's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CmTool {
    pub(super) name: &'static str,
    /// The server; empty for none (the client expects its connection rejected).
    pub(super) server: &'static str,
    pub(super) client: &'static str,
    /// The rdma_cm port the server listens on, for the client to wait for.
    pub(super) port: u16,
}

impl CmTool {
    /// The command line of one side.
    pub(super) fn line(template: &str, addr: &str, own: &str, dev: &str) -> String {
        template
            .replace("{addr}", addr)
            .replace("{self}", own)
            .replace("{dev}", dev)
    }
}

/// The rdma_cm checks: every program of `rdmacm-utils` with a client and a server,
/// perftest's `-R` variants (SIDR for UD), and a connection to a port nobody listens on
/// (REJ, reason 8). Each runs both ways, so each side disconnects first once (the client
/// sends the DREQ).
pub(super) const CM_TOOLS: &[CmTool] = &[
    CmTool {
        name: "rping -C 100 -V",
        server: "rping -s -a {addr} -C 100 -S 64 -V",
        client: "rping -c -a {addr} -C 100 -S 64 -V",
        port: 7174,
    },
    CmTool {
        name: "ucmatose -c 4 -C 20",
        server: "ucmatose -b {addr} -c 4 -C 20 -S 4096",
        client: "ucmatose -s {addr} -c 4 -C 20 -S 4096",
        port: 7471,
    },
    CmTool {
        name: "udaddy -c 4 -C 20",
        server: "udaddy -b {addr} -c 4 -C 20",
        client: "udaddy -s {addr} -c 4 -C 20",
        port: 7174,
    },
    CmTool {
        name: "rdma_server/rdma_client",
        server: "rdma_server -s {addr}",
        client: "rdma_client -s {addr}",
        port: 7471,
    },
    CmTool {
        name: "ib_write_bw -R 64 KiB x20",
        server: "ib_write_bw -R -d {dev} -F -s 65536 -n 20",
        client: "ib_write_bw -R -d {dev} -F -s 65536 -n 20 {addr}",
        port: 18515,
    },
    CmTool {
        name: "ib_read_bw -R 64 KiB x20",
        server: "ib_read_bw -R -d {dev} -F -s 65536 -n 20",
        client: "ib_read_bw -R -d {dev} -F -s 65536 -n 20 {addr}",
        port: 18515,
    },
    CmTool {
        name: "ib_send_bw -R 64 KiB x20",
        server: "ib_send_bw -R -d {dev} -F -s 65536 -n 20",
        client: "ib_send_bw -R -d {dev} -F -s 65536 -n 20 {addr}",
        port: 18515,
    },
    CmTool {
        name: "ib_send_bw -R -c UD 512 B x20",
        server: "ib_send_bw -R -c UD -d {dev} -F -s 512 -n 20",
        client: "ib_send_bw -R -c UD -d {dev} -F -s 512 -n 20 {addr}",
        port: 18515,
    },
    CmTool {
        name: "ib_write_lat -R 64 B x100",
        server: "ib_write_lat -R -d {dev} -F -s 64 -n 100",
        client: "ib_write_lat -R -d {dev} -F -s 64 -n 100 {addr}",
        port: 18515,
    },
    CmTool {
        name: "ib_read_lat -R 64 B x100",
        server: "ib_read_lat -R -d {dev} -F -s 64 -n 100",
        client: "ib_read_lat -R -d {dev} -F -s 64 -n 100 {addr}",
        port: 18515,
    },
    CmTool {
        name: "ib_send_lat -R 64 B x100",
        server: "ib_send_lat -R -d {dev} -F -s 64 -n 100",
        client: "ib_send_lat -R -d {dev} -F -s 64 -n 100 {addr}",
        port: 18515,
    },
    CmTool {
        // Multicast: the server is the receiving member, the client joins the group, then
        // sends (after the receiver had time to join: nothing tells it when).
        name: "mckey -C 20 -S 512",
        server: "mckey -m 239.77.0.9 -b {addr} -C 20 -S 512",
        client: "sh -c 'sleep 3; mckey -m 239.77.0.9 -b {self} -s -C 20 -S 512'",
        port: 0,
    },
    CmTool {
        name: "reject: rping to a port nobody listens on",
        server: "",
        client: "out=$(rping -c -a {addr} -p 7999 -C 1 2>&1); echo \"$out\"; \
                 echo \"$out\" | grep -q 'RDMA_CM_EVENT_REJECTED, error 8'",
        port: 0,
    },
];

/// Which GIDs of the two ends a check's queue pairs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Net {
    /// The IPv4 addresses (IPv4-mapped GIDs).
    Ipv4,
    /// The global IPv6 addresses.
    Ipv6,
    /// The link-local IPv6 addresses.
    Ipv6LinkLocal,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Check {
    pub(super) program: Program,
    pub(super) server: Side,
    pub(super) net: Net,
}

impl Check {
    pub(super) fn client(&self) -> Side {
        match self.server {
            Side::Rxe => Side::Xroce,
            Side::Xroce => Side::Rxe,
        }
    }

    pub(super) fn name(&self) -> String {
        let name = self.program_name();
        match self.net {
            Net::Ipv4 => name,
            Net::Ipv6 => format!("{name} over IPv6"),
            Net::Ipv6LinkLocal => format!("{name} over IPv6 link-local"),
        }
    }

    fn program_name(&self) -> String {
        let size = |s: u32| {
            if s >= 1 << 20 && s.is_multiple_of(1 << 20) {
                format!("{} MiB", s >> 20)
            } else {
                format!("{s} B")
            }
        };
        match self.program {
            Program::Pingpong {
                service,
                size: s,
                iters,
            } => format!("{service}_pingpong {} x{iters}", size(s)),
            Program::DropIn {
                program,
                size: s,
                iters,
            } => format!("drop-in {program} {} x{iters}", size(s)),
            Program::RdmaCm(tool) => format!("rdma_cm {}", tool.name),
            Program::Ucx {
                transport,
                test,
                size: s,
                iters,
            } => format!("ucx_perftest {transport} {test} {} x{iters}", size(s)),
        }
    }
}

pub(super) fn checks() -> Vec<Check> {
    let mut all = Vec::new();
    let pingpongs = [
        ("rc", 64, 1000),
        ("rc", 4096, 1000),
        ("rc", 1 << 20, 5),
        ("uc", 4096, 20),
        ("ud", 512, 50),
    ];
    for (service, size, iters) in pingpongs {
        for server in [Side::Rxe, Side::Xroce] {
            all.push(Check {
                program: Program::Pingpong {
                    service,
                    size,
                    iters,
                },
                server,
                net: Net::Ipv4,
            });
        }
    }
    let drop_in = [
        ("ibv_rc_pingpong", 4096, 50),
        ("ib_send_bw", 65536, 20),
        ("ib_write_bw", 65536, 20),
        ("ib_read_bw", 65536, 20),
        ("ib_atomic_bw", 8, 20),
        ("ib_send_lat", 64, 100),
        ("ib_write_lat", 64, 100),
        ("ib_read_lat", 64, 100),
    ];
    for (program, size, iters) in drop_in {
        for server in [Side::Rxe, Side::Xroce] {
            all.push(Check {
                program: Program::DropIn {
                    program,
                    size,
                    iters,
                },
                server,
                net: Net::Ipv4,
            });
        }
    }
    for tool in CM_TOOLS {
        for server in [Side::Rxe, Side::Xroce] {
            all.push(Check {
                program: Program::RdmaCm(*tool),
                server,
                net: Net::Ipv4,
            });
        }
    }
    for &(transport, test, size, iters) in UCX_TESTS {
        for server in [Side::Rxe, Side::Xroce] {
            all.push(Check {
                program: Program::Ucx {
                    transport,
                    test,
                    size,
                    iters,
                },
                server,
                net: Net::Ipv4,
            });
        }
    }
    // RoCEv2 over IPv6: the pingpongs of each service, and the drop-in programs users run
    // first (`ibv_rc_pingpong -g`, `ibv_ud_pingpong -g`, `ib_write_bw -x`, `ib_read_lat -x`).
    let over_ipv6 = [
        Program::Pingpong {
            service: "rc",
            size: 4096,
            iters: 100,
        },
        Program::Pingpong {
            service: "uc",
            size: 4096,
            iters: 20,
        },
        Program::Pingpong {
            service: "ud",
            size: 512,
            iters: 50,
        },
        Program::DropIn {
            program: "ibv_rc_pingpong",
            size: 4096,
            iters: 50,
        },
        Program::DropIn {
            program: "ibv_ud_pingpong",
            size: 512,
            iters: 50,
        },
        Program::DropIn {
            program: "ib_write_bw",
            size: 65536,
            iters: 20,
        },
        Program::DropIn {
            program: "ib_read_lat",
            size: 64,
            iters: 100,
        },
    ];
    // And between the link-local addresses (`ibv_rc_pingpong -g` with their GIDs).
    let over_link_local = [Program::DropIn {
        program: "ibv_rc_pingpong",
        size: 4096,
        iters: 50,
    }];
    for (net, programs) in [
        (Net::Ipv6, &over_ipv6[..]),
        (Net::Ipv6LinkLocal, &over_link_local[..]),
    ] {
        for &program in programs {
            for server in [Side::Rxe, Side::Xroce] {
                all.push(Check {
                    program,
                    server,
                    net,
                });
            }
        }
    }
    all
}

/// The figures of an output, for the table: the pingpong lines or perftest's result row.
pub(super) fn figures(output: &str) -> String {
    // ucx_perftest's last row: `Final: iterations latency(50%, average, overall) [usec]
    // bandwidth(average, overall) [MB/s] message rate(average, overall) [msg/s]`.
    if let Some(l) = output
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("Final:"))
    {
        let f: Vec<&str> = l.split_whitespace().skip(1).collect();
        if f.len() >= 8 {
            return format!(
                "{} usec average, {} MB/s, {} msg/s ({} iterations)",
                f[2], f[5], f[7], f[0]
            );
        }
    }
    let mbit = output
        .lines()
        .find(|l| l.contains(" Mbit/sec"))
        .and_then(|l| l.split(" = ").nth(1));
    let usec = output
        .lines()
        .find(|l| l.contains(" usec/iter"))
        .and_then(|l| l.split(" = ").nth(1));
    if let (Some(m), Some(u)) = (mbit, usec) {
        return format!("{m}, {u}");
    }
    // perftest's result row: bandwidth tests print
    //   #bytes #iterations BW_peak[MB/sec] BW_average[MB/sec] MsgRate[Mpps]
    // and latency tests
    //   #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%   [usec]
    if let Some(l) = output.lines().rev().find(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 4 && f.iter().all(|x| x.parse::<f64>().is_ok())
    }) {
        let f: Vec<&str> = l.split_whitespace().collect();
        return if f.len() >= 9 {
            format!(
                "{} usec typical, {} avg ({} B x {})",
                f[4], f[5], f[0], f[1]
            )
        } else {
            format!("{} MB/s avg ({} B x {})", f[3], f[0], f[1])
        };
    }
    String::new()
}

pub(super) fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// Whether a counter counts something going wrong: one of its words (`_`-separated)
/// starts with one of these (so `completer_retry_err` and `out_of_seq_request` are, and
/// `ack_deferred` is not).
pub(super) fn is_anomaly(name: &str) -> bool {
    name.split('_').any(|word| {
        [
            "err", "drop", "dup", "retr", "retry", "nak", "seq", "timeout", "bad", "invalid",
            "rnr", "discard", "fail",
        ]
        .iter()
        .any(|w| word.starts_with(w))
    })
}

pub(super) fn print_table(rows: &[Row]) {
    let w = rows.iter().map(|r| r.check.len()).max().unwrap_or(5).max(5);
    println!(
        "{:<w$}  {:<6} {:<6} {:<6} {:>6}  detail",
        "check", "server", "client", "result", "secs"
    );
    for r in rows {
        let outcome = match r.outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Skip => "skip",
        };
        println!(
            "{:<w$}  {:<6} {:<6} {:<6} {:>6.1}  {}",
            r.check, r.server, r.client, outcome, r.secs, r.detail
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ipv6_check_runs_both_ways_and_says_so_in_its_name() {
        let all = checks();
        let ipv6: Vec<&Check> = all.iter().filter(|c| c.net == Net::Ipv6).collect();
        assert_eq!(ipv6.len(), 14);
        assert!(ipv6.iter().all(|c| c.name().ends_with(" over IPv6")));
        let link_local: Vec<&Check> = all.iter().filter(|c| c.net == Net::Ipv6LinkLocal).collect();
        assert_eq!(link_local.len(), 2);
        assert!(
            link_local
                .iter()
                .all(|c| c.name() == "drop-in ibv_rc_pingpong 4096 B x50 over IPv6 link-local")
        );
        assert_ne!(link_local[0].server, link_local[1].server);
        assert!(
            all.iter()
                .filter(|c| c.net == Net::Ipv4)
                .all(|c| !c.name().contains("IPv6"))
        );
        for name in [
            "rc_pingpong",
            "ud_pingpong",
            "drop-in ibv_ud_pingpong",
            "drop-in ib_write_bw",
            "drop-in ib_read_lat",
        ] {
            let servers: Vec<Side> = ipv6
                .iter()
                .filter(|c| c.name().contains(name))
                .map(|c| c.server)
                .collect();
            assert!(
                servers.contains(&Side::Rxe) && servers.contains(&Side::Xroce),
                "{name}: {servers:?}"
            );
        }
    }

    #[test]
    fn anomalies_are_whole_words() {
        for bad in [
            "completer_retry_err",
            "duplicate_request",
            "out_of_seq_request",
            "rcvd_rnr_err",
            "local_ack_timeout_err",
            "rx_dropped",
        ] {
            assert!(is_anomaly(bad), "{bad}");
        }
        for fine in [
            "ack_deferred",
            "sent_pkts",
            "rcvd_pkts",
            "idle_sleeps",
            "rdma_sends",
        ] {
            assert!(!is_anomaly(fine), "{fine}");
        }
    }
}
