//! Interop-shaped tests: the transport replays real Linux rxe traffic.
//!
//! Each test takes one capture of two rxe hosts (`../wire/tests/fixtures/NAME.pcap`, decoded
//! in `NAME.txt` beside it; the server is always 10.77.0.2) and builds an [`Endpoint`] that
//! plays one side exactly as the captured host was set up: the same MAC and IP address
//! (GID), QP number and start PSNs (from the out-of-band exchange decoded in the `.txt`),
//! memory regions at the same virtual addresses with the same keys, and the work requests
//! the application posted, in the order it posted them. The other side's frames are fed to
//! it from the capture, in order; after each one the endpoint's completions go to a model of
//! the application (which may post more work) and every frame the endpoint wants to send is
//! collected. What it sent must be what the captured host sent, frame for frame.
//!
//! Playing the server proves the responder (ACKs, READ responses, atomic acknowledgements,
//! and the server's own SENDs in the ping-pongs); playing the client proves the requester
//! (opcodes, PSNs, RETHs, AckReq positions, pad, payload bytes, and the UDP source port that
//! Linux derives from the QP numbers) and the completer (it consumes rxe's responses).
//!
//! Each pair of frames is compared field by field first, so that a mismatch names the field,
//! then as whole bytes. What legitimately differs:
//!
//! - The IPv4 identification. Linux draws it per destination from a hashed counter with a
//!   random start (`__ip_select_ident`); the transport counts from its own start. It is
//!   covered by the IPv4 header checksum and by the ICRC, so those differ with it. The
//!   whole-frame comparison copies the captured identification into our frame, recomputes
//!   the header checksum and the ICRC, and then requires every byte to be equal.
//! - Nothing else. The application model polls the endpoint after every received frame, as
//!   rxe's responder runs once per packet; fed a burst before being polled, the transport
//!   coalesces positive ACKs (which the specification allows and rxe does not do), as
//!   `a_burst_of_writes_is_acknowledged_once` shows.
//!
//! Payload bytes are whatever the applications' buffers held (perftest fills them with
//! random bytes), so the tests take them from the capture: the bytes a client WRITEs or
//! SENDs are put in the client's buffer before it posts, the bytes a server's READ responses
//! carried and the original values its atomic acknowledgements returned are put in the
//! server's region before the requests arrive.
//!
//! [`capture`] reads the captures; [`player`] plays one captured host and compares what it
//! sends; [`perftest`] and [`pingpong`] set up each captured program's hosts and
//! applications.

mod capture;
mod perftest;
mod pingpong;
mod player;

use xroce_transport::Instant;

const NOW: Instant = Instant::ZERO;
