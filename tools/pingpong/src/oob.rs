//! The out-of-band exchange of rdma-core's pingpong examples (`ibv_rc_pingpong`,
//! `ibv_uc_pingpong`, `ibv_ud_pingpong`), byte for byte.
//!
//! Over one TCP connection (port 18515 by default) the client writes its address, the
//! server answers with its own, and the client confirms:
//!
//! ```text
//! client -> server  52 B  "0000:000011:58f05a:00000000000000000000ffff0a4d0003\0"
//! server -> client  52 B  "0000:000011:bbe063:00000000000000000000ffff0a4d0002\0"
//! client -> server   5 B  "done\0"
//! ```
//!
//! An address is `sprintf("%04x:%06x:%06x:%s", lid, qpn, psn, gid)`: the GID is the 16 raw
//! GID bytes as 32 lower-case hex digits, in wire order (`::ffff:10.77.0.3` is
//! `00000000000000000000ffff0a4d0003`), and all zeros when the program was given no GID
//! index. The server moves its QP to RTR and RTS before it answers, so the client may send
//! as soon as it has connected its own QP.

use std::io::{self, Read, Write};
use std::net::{Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Length of an address message, its terminating NUL included.
pub const MESSAGE_LEN: usize = 52;

/// The client's confirmation, its NUL included.
pub const DONE: &[u8; 5] = b"done\0";

/// The address of one side: what `struct pingpong_dest` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dest {
    /// The local identifier (0 on RoCE).
    pub lid: u16,
    /// The QP number (24 bits).
    pub qpn: u32,
    /// The first PSN the side sends with (24 bits).
    pub psn: u32,
    /// The GID, raw bytes (all zero without a GID index).
    pub gid: [u8; 16],
}

/// A message that is not an address, or an exchange that broke off.
#[derive(Debug, thiserror::Error)]
pub enum OobError {
    /// The bytes are not `%04x:%06x:%06x:<32 hex digits>\0`.
    #[error("malformed address message {text:?}: {reason}")]
    Malformed {
        /// The message as text (lossy).
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The peer closed the connection before the whole message arrived.
    #[error("the peer closed the connection after {got} of {want} bytes")]
    Short {
        /// Bytes received.
        got: usize,
        /// Bytes expected.
        want: usize,
    },
    /// The client confirmed with something other than `done\0`.
    #[error("the client confirmed with {0:?} instead of \"done\\0\"")]
    NotDone(String),
    /// The connection failed.
    #[error("out-of-band connection: {0}")]
    Io(#[from] io::Error),
}

impl Dest {
    /// Whether the GID's interface identifier (its last 8 bytes) is non-zero: the examples
    /// put a GRH in the address vector only then.
    pub fn has_gid(&self) -> bool {
        self.gid[8..].iter().any(|&b| b != 0)
    }

    /// The GID as `inet_ntop(AF_INET6)` prints it (`::ffff:10.77.0.3`, `::`).
    pub fn gid_text(&self) -> String {
        Ipv6Addr::from(self.gid).to_string()
    }

    /// The 52-byte message, NUL included.
    pub fn to_message(&self) -> [u8; MESSAGE_LEN] {
        let mut text = format!(
            "{:04x}:{:06x}:{:06x}:",
            self.lid,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff
        );
        for b in self.gid {
            text.push_str(&format!("{b:02x}"));
        }
        let mut msg = [0u8; MESSAGE_LEN];
        msg[..text.len()].copy_from_slice(text.as_bytes());
        msg
    }

    /// Parses a message (up to its first NUL; bytes after it are ignored, as `sscanf`
    /// ignores them).
    pub fn parse(msg: &[u8]) -> Result<Dest, OobError> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = String::from_utf8_lossy(&msg[..end]).into_owned();
        let bad = |reason| OobError::Malformed {
            text: text.clone(),
            reason,
        };
        let mut fields = text.split(':');
        let mut hex = |max: u32, reason| {
            let f = fields.next().ok_or_else(|| bad("too few fields"))?;
            if f.is_empty() || f.len() > 8 {
                return Err(bad(reason));
            }
            u32::from_str_radix(f, 16)
                .ok()
                .filter(|&v| v <= max)
                .ok_or_else(|| bad(reason))
        };
        let lid = hex(0xffff, "the LID is not a 16-bit hex number")? as u16;
        let qpn = hex(0xff_ffff, "the QPN is not a 24-bit hex number")?;
        let psn = hex(0xff_ffff, "the PSN is not a 24-bit hex number")?;
        let gid_text = fields.next().ok_or_else(|| bad("no GID"))?;
        if fields.next().is_some() {
            return Err(bad("too many fields"));
        }
        if gid_text.len() != 32 || !gid_text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("the GID is not 32 hex digits"));
        }
        let mut gid = [0u8; 16];
        for (i, byte) in gid.iter_mut().enumerate() {
            // Two ASCII hex digits, checked above.
            *byte = u8::from_str_radix(&gid_text[2 * i..2 * i + 2], 16)
                .map_err(|_| bad("the GID is not 32 hex digits"))?;
        }
        Ok(Dest { lid, qpn, psn, gid })
    }
}

/// Listens on TCP `port` of every address: dual-stack where the host allows it (IPv4
/// clients then arrive as `::ffff:a.b.c.d`), IPv4 alone otherwise.
pub fn listen(port: u16) -> io::Result<TcpListener> {
    let any6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
    let any4 = SocketAddr::from(([0, 0, 0, 0], port));
    TcpListener::bind(any6).or_else(|_| TcpListener::bind(any4))
}

/// Connects to `server` (a name or an address) on TCP `port`, trying again every 50 ms
/// for `retry_for` while the server is not listening yet.
pub fn connect(server: &str, port: u16, retry_for: Option<Duration>) -> io::Result<TcpStream> {
    let deadline = Instant::now() + retry_for.unwrap_or_default();
    loop {
        let mut last = None;
        for a in (server, port).to_socket_addrs()? {
            match TcpStream::connect(a) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        let e = last.unwrap_or_else(|| io::Error::other("no address"));
        if Instant::now() >= deadline {
            return Err(e);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_full(stream: &mut impl Read, buf: &mut [u8]) -> Result<usize, OobError> {
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(got)
}

/// The client's side: sends `mine`, reads the server's address, confirms with `done\0`.
pub fn client_exchange(stream: &mut (impl Read + Write), mine: &Dest) -> Result<Dest, OobError> {
    stream.write_all(&mine.to_message())?;
    let mut msg = [0u8; MESSAGE_LEN];
    let got = read_full(stream, &mut msg)?;
    if got != MESSAGE_LEN {
        return Err(OobError::Short {
            got,
            want: MESSAGE_LEN,
        });
    }
    stream.write_all(DONE)?;
    Dest::parse(&msg)
}

/// The server's side: reads the client's address, calls `connect` with it (the examples
/// move their QP to RTS there), answers with `mine` and waits for `done\0`. An error of
/// `connect` ends the exchange before the answer, as in the examples.
pub fn server_exchange<E>(
    stream: &mut (impl Read + Write),
    mine: &Dest,
    connect: impl FnOnce(&Dest) -> Result<(), E>,
) -> Result<Result<Dest, E>, OobError> {
    let mut msg = [0u8; MESSAGE_LEN];
    let got = read_full(stream, &mut msg)?;
    if got != MESSAGE_LEN {
        return Err(OobError::Short {
            got,
            want: MESSAGE_LEN,
        });
    }
    let peer = Dest::parse(&msg)?;
    if let Err(e) = connect(&peer) {
        return Ok(Err(e));
    }
    stream.write_all(&mine.to_message())?;
    let mut done = [0u8; DONE.len()];
    let got = read_full(stream, &mut done)?;
    if &done[..got] != DONE {
        return Err(OobError::NotDone(
            String::from_utf8_lossy(&done[..got]).into_owned(),
        ));
    }
    Ok(Ok(peer))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: &[u8; 52] = b"0000:000011:58f05a:00000000000000000000ffff0a4d0003\0";

    fn client() -> Dest {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 10, 77, 0, 3]);
        Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0x58f05a,
            gid,
        }
    }

    #[test]
    fn formats_and_parses_the_rxe_message() {
        assert_eq!(&client().to_message(), CLIENT);
        assert_eq!(Dest::parse(CLIENT).unwrap(), client());
        assert_eq!(client().gid_text(), "::ffff:10.77.0.3");
        assert!(client().has_gid());
    }

    #[test]
    fn zero_gid_is_printed_as_double_colon() {
        let d = Dest {
            gid: [0; 16],
            ..client()
        };
        assert_eq!(d.gid_text(), "::");
        assert!(!d.has_gid());
        assert_eq!(
            &d.to_message(),
            b"0000:000011:58f05a:00000000000000000000000000000000\0"
        );
    }

    #[test]
    fn rejects_malformed_messages() {
        for bad in [
            &b"0000:000011:58f05a\0"[..],
            b"0000:000011:58f05a:00000000000000000000ffff0a4d000\0",
            b"0000:000011:58f05a:00000000000000000000ffff0a4d000g\0",
            b"10000:000011:58f05a:00000000000000000000ffff0a4d0003\0",
            b"0000:1000000:58f05a:00000000000000000000ffff0a4d0003\0",
            b"0000::58f05a:00000000000000000000ffff0a4d0003\0",
            b"0000:000011:58f05a:00000000000000000000ffff0a4d0003:1\0",
            b"",
        ] {
            assert!(
                Dest::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// An in-memory stream: reads from `input`, records writes.
    struct Pipe {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            // One byte at a time: the exchange must not depend on how TCP splits.
            let n = buf.len().min(1);
            self.input.read(&mut buf[..n])
        }
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn both_sides_of_the_exchange() {
        let server = Dest {
            qpn: 0x12,
            psn: 0xbbe063,
            ..client()
        };
        let mut to_client = Pipe {
            input: io::Cursor::new(server.to_message().to_vec()),
            output: Vec::new(),
        };
        assert_eq!(client_exchange(&mut to_client, &client()).unwrap(), server);
        let mut expected = CLIENT.to_vec();
        expected.extend_from_slice(DONE);
        assert_eq!(to_client.output, expected);

        let mut to_server = Pipe {
            input: io::Cursor::new(expected),
            output: Vec::new(),
        };
        let mut seen = None;
        let peer = server_exchange(&mut to_server, &server, |d| {
            seen = Some(*d);
            Ok::<(), ()>(())
        })
        .unwrap()
        .unwrap();
        assert_eq!((peer, seen), (client(), Some(client())));
        assert_eq!(to_server.output, server.to_message());
    }

    #[test]
    fn a_server_refuses_a_short_message_and_a_missing_done() {
        let mut short = Pipe {
            input: io::Cursor::new(CLIENT[..20].to_vec()),
            output: Vec::new(),
        };
        let r = server_exchange(&mut short, &client(), |_| Ok::<(), ()>(()));
        assert!(matches!(r, Err(OobError::Short { got: 20, want: 52 })));
        let mut no_done = Pipe {
            input: io::Cursor::new(CLIENT.to_vec()),
            output: Vec::new(),
        };
        let r = server_exchange(&mut no_done, &client(), |_| Ok::<(), ()>(()));
        assert!(matches!(r, Err(OobError::NotDone(_))));
    }
}
