//! The out-of-band exchange of the pingpong examples, against the exact bytes Linux rxe's
//! `ibv_rc_pingpong` and `ibv_ud_pingpong` sent in the reference captures: every 52-byte
//! address message parses to the values the programs printed, and formats back to the same
//! bytes.

use std::path::PathBuf;

use xroce_pingpong::oob::{DONE, Dest, MESSAGE_LEN};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dataplane/wire/tests/fixtures")
}

/// The TCP payloads to or from `port` in a classic pcap of Ethernet/IPv4 frames, in order,
/// with `true` for client-to-server.
fn tcp_payloads(pcap: &[u8], port: u16) -> Vec<(bool, Vec<u8>)> {
    let magic = u32::from_le_bytes(pcap[..4].try_into().expect("pcap header"));
    let le = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => panic!("not a classic pcap (magic {m:#x})"),
    };
    let u32_at = |b: &[u8], at: usize| {
        let w: [u8; 4] = b[at..at + 4].try_into().expect("four bytes");
        if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }
    };
    let be16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let len = u32_at(pcap, at + 8) as usize;
        let frame = &pcap[at + 16..at + 16 + len];
        at += 16 + len;
        if frame.len() < 14 + 20 || be16(frame, 12) != 0x0800 {
            continue;
        }
        let ip = &frame[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if ip[9] != 6 {
            continue;
        }
        let total = usize::from(be16(ip, 2));
        let tcp = &ip[ihl..total];
        let (sport, dport) = (be16(tcp, 0), be16(tcp, 2));
        let data_offset = usize::from(tcp[12] >> 4) * 4;
        let payload = &tcp[data_offset..];
        if payload.is_empty() || (sport != port && dport != port) {
            continue;
        }
        out.push((dport == port, payload.to_vec()));
    }
    out
}

/// The `LID …, QPN …, PSN …, GID …` values of the output line starting with `prefix`
/// (`  local address:` or `  remote address:`) under the `## server output` heading: the
/// server is `ibv_*_pingpong` in every capture.
fn printed(txt: &str, prefix: &str) -> (u16, u32, u32, String) {
    let server = txt
        .split("## server output")
        .nth(1)
        .expect("a server output section");
    let line = server
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line"));
    let hex = |key: &str| {
        let at = line.find(key).expect("field") + key.len();
        let end = line[at..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .map_or(line.len(), |e| at + e);
        u32::from_str_radix(&line[at..end], 16).expect("hex field")
    };
    let gid = line.rsplit("GID ").next().expect("GID").trim().to_owned();
    (hex("LID 0x") as u16, hex("QPN 0x"), hex("PSN 0x"), gid)
}

fn check_capture(name: &str) {
    let dir = fixtures();
    let pcap = std::fs::read(dir.join(format!("{name}.pcap"))).expect("reading the capture");
    let txt = std::fs::read_to_string(dir.join(format!("{name}.txt"))).expect("reading the decode");
    let payloads = tcp_payloads(&pcap, 18515);
    // client address, server address, done: nothing else.
    assert_eq!(
        payloads
            .iter()
            .map(|(c, p)| (*c, p.len()))
            .collect::<Vec<_>>(),
        vec![
            (true, MESSAGE_LEN),
            (false, MESSAGE_LEN),
            (true, DONE.len())
        ],
        "{name}"
    );
    assert_eq!(&payloads[2].1[..], DONE);

    let client = Dest::parse(&payloads[0].1).expect("the client's message parses");
    let server = Dest::parse(&payloads[1].1).expect("the server's message parses");
    for (dest, bytes) in [(client, &payloads[0].1), (server, &payloads[1].1)] {
        assert_eq!(&dest.to_message()[..], &bytes[..], "{name}: formats back");
    }
    // What the server program printed about both ends.
    for (dest, prefix) in [(server, "  local address:"), (client, "  remote address:")] {
        let (lid, qpn, psn, gid) = printed(&txt, prefix);
        assert_eq!(
            (dest.lid, dest.qpn, dest.psn, dest.gid_text()),
            (lid, qpn, psn, gid),
            "{name}: {prefix}"
        );
        assert!(dest.has_gid());
    }
}

#[test]
fn rc_pingpong_messages_are_byte_exact() {
    check_capture("rc_pingpong");
}

#[test]
fn ud_pingpong_messages_are_byte_exact() {
    check_capture("ud_pingpong");
}

#[test]
fn userspace_client_messages_are_byte_exact() {
    check_capture("netns_userspace_rc_pingpong");
}

#[test]
fn the_decoded_bytes_match_the_capture() {
    // The decode lists each message as a Python bytes literal: the first one is the
    // client's address, exactly as formatted here.
    let txt = std::fs::read_to_string(fixtures().join("rc_pingpong.txt")).expect("decode");
    let literal = txt
        .lines()
        .find_map(|l| l.trim().strip_prefix("bytes: b'"))
        .expect("a bytes line");
    let text = literal.trim_end_matches('\'').replace("\\x00", "\0");
    let dest = Dest::parse(text.as_bytes()).expect("parses");
    assert_eq!(dest.to_message().to_vec(), text.into_bytes());
    assert_eq!(
        (dest.qpn, dest.psn, dest.gid_text().as_str()),
        (0x11, 0x58f05a, "::ffff:10.77.0.3")
    );
}
