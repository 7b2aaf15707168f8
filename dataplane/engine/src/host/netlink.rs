//! A synchronous rtnetlink socket: requests answered by one message and an
//! acknowledgement, dumps, and the parsing of received datagrams.
//!
//! Messages are built and parsed by `netlink-packet-route`; sockets come from `netlink-sys`.
//! Nothing here knows about interfaces, addresses or neighbours: the callers do.

use std::io;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, NetlinkBuffer, NetlinkHeader,
    NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{Socket, protocols::NETLINK_ROUTE};

/// Bytes of one receive: more than the kernel puts in one dump datagram (it sizes them to
/// the reader's buffer, up to 32 KiB) and far more than one notification.
const RECEIVE_BUFFER: usize = 64 * 1024;

/// How often a dump interrupted by a concurrent change (`NLM_F_DUMP_INTR`) is retried.
const DUMP_ATTEMPTS: usize = 5;

/// A netlink header is 16 bytes; messages are 4-byte aligned.
const HEADER_LEN: usize = 16;

/// One rtnetlink socket for requests (no multicast groups), in the network namespace of the
/// thread that opened it.
#[derive(Debug)]
pub(crate) struct RequestSocket {
    socket: Socket,
    port: u32,
    sequence: u32,
    buffer: Vec<u8>,
}

impl RequestSocket {
    /// Opens and binds a socket. Strict checking (`NETLINK_GET_STRICT_CHK`) is on, so the
    /// kernel filters dumps by interface and refuses malformed requests instead of guessing.
    pub(crate) fn open() -> io::Result<RequestSocket> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        let address = socket.bind_auto()?;
        socket.set_netlink_get_strict_chk(true)?;
        Ok(RequestSocket {
            socket,
            port: address.port_number(),
            sequence: 0,
            buffer: Vec::with_capacity(RECEIVE_BUFFER),
        })
    }

    /// Sends `message` with `NLM_F_REQUEST | NLM_F_ACK | flags` and collects the messages
    /// that answer it until the acknowledgement. A kernel error becomes an `io::Error`
    /// carrying its errno.
    pub(crate) fn request(
        &mut self,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        let sequence = self.send(message, NLM_F_REQUEST | NLM_F_ACK | flags)?;
        let mut replies = Vec::new();
        loop {
            let done = self.receive_reply(sequence, &mut replies)?;
            if done {
                return Ok(replies);
            }
        }
    }

    /// Sends `message` as a dump request and collects every message up to `NLMSG_DONE`.
    /// A dump the kernel marks inconsistent (the table changed under it) is retried.
    pub(crate) fn dump(
        &mut self,
        message: &RouteNetlinkMessage,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        for _ in 0..DUMP_ATTEMPTS {
            let sequence = self.send(message.clone(), NLM_F_REQUEST | NLM_F_DUMP)?;
            let mut replies = Vec::new();
            let mut interrupted = false;
            loop {
                let (done, intr) = self.receive_dump(sequence, &mut replies)?;
                interrupted |= intr;
                if done {
                    break;
                }
            }
            if !interrupted {
                return Ok(replies);
            }
            tracing::debug!("rtnetlink dump interrupted by a concurrent change; dumping again");
        }
        Err(io::Error::new(
            io::ErrorKind::Interrupted,
            "the kernel table kept changing during every dump attempt",
        ))
    }

    fn send(&mut self, message: RouteNetlinkMessage, flags: u16) -> io::Result<u32> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.sequence;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        packet.finalize();
        let mut bytes = vec![0; packet.buffer_len()];
        packet.serialize(&mut bytes);
        let sent = self.socket.send(&bytes, 0)?;
        if sent != bytes.len() {
            return Err(io::Error::other(format!(
                "netlink send: {sent} of {} bytes sent",
                bytes.len()
            )));
        }
        Ok(self.sequence)
    }

    /// Receives one datagram of replies to `sequence`; `true` once the acknowledgement (or
    /// an error) arrived.
    fn receive_reply(
        &mut self,
        sequence: u32,
        replies: &mut Vec<RouteNetlinkMessage>,
    ) -> io::Result<bool> {
        receive(&self.socket, &mut self.buffer, 0)?;
        let mut done = false;
        for message in parse_datagram(&self.buffer) {
            let Some(message) = self.ours(message, sequence) else {
                continue;
            };
            match message.payload {
                NetlinkPayload::Error(e) => {
                    if e.code.is_some() {
                        return Err(e.to_io());
                    }
                    done = true;
                }
                NetlinkPayload::InnerMessage(inner) => replies.push(inner),
                NetlinkPayload::Done(_) => done = true,
                _ => {}
            }
        }
        Ok(done)
    }

    /// Receives one datagram of a dump; (`NLMSG_DONE` seen, `NLM_F_DUMP_INTR` seen).
    fn receive_dump(
        &mut self,
        sequence: u32,
        replies: &mut Vec<RouteNetlinkMessage>,
    ) -> io::Result<(bool, bool)> {
        receive(&self.socket, &mut self.buffer, 0)?;
        let (mut done, mut interrupted) = (false, false);
        for message in parse_datagram(&self.buffer) {
            let Some(message) = self.ours(message, sequence) else {
                continue;
            };
            interrupted |= message.header.flags & NLM_F_DUMP_INTR != 0;
            match message.payload {
                NetlinkPayload::Error(e) => {
                    if e.code.is_some() {
                        return Err(e.to_io());
                    }
                    done = true;
                }
                NetlinkPayload::Done(d) => {
                    if d.code != 0 {
                        return Err(io::Error::from_raw_os_error(d.code.saturating_abs()));
                    }
                    done = true;
                }
                NetlinkPayload::InnerMessage(inner) => replies.push(inner),
                _ => {}
            }
        }
        Ok((done, interrupted))
    }

    /// The message, if it answers our request `sequence` (others are stale answers to
    /// requests given up on, and are dropped). Unparsable messages are dropped too, but a
    /// kernel error or end of dump is always recognised from the header alone.
    fn ours(&self, message: Received, sequence: u32) -> Option<Parsed> {
        if message.header.sequence_number != sequence || message.header.port_number != self.port {
            return None;
        }
        match message.parsed {
            Ok(parsed) => Some(parsed),
            Err(why) => {
                tracing::warn!(
                    "rtnetlink: dropping a reply of type {} that does not parse: {why}",
                    message.header.message_type
                );
                None
            }
        }
    }
}

/// A parsed netlink message.
pub(crate) type Parsed = NetlinkMessage<RouteNetlinkMessage>;

/// One message of a datagram: its header always, its content when it parsed.
#[derive(Debug)]
pub(crate) struct Received {
    pub(crate) header: NetlinkHeader,
    pub(crate) parsed: Result<Parsed, String>,
}

/// Receives one datagram into `buffer` (replacing its contents). `MSG_TRUNC` makes the
/// kernel report the datagram's real size, so that truncation is an error, not garbage.
pub(crate) fn receive(socket: &Socket, buffer: &mut Vec<u8>, flags: libc::c_int) -> io::Result<()> {
    buffer.clear();
    let capacity = buffer.capacity();
    let (length, _) = loop {
        match socket.recv_from(buffer, flags | libc::MSG_TRUNC) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => break other?,
        }
    };
    if length > capacity {
        return Err(io::Error::other(format!(
            "a netlink datagram of {length} bytes did not fit in {capacity}"
        )));
    }
    Ok(())
}

/// A buffer for [`receive`].
pub(crate) fn receive_buffer() -> Vec<u8> {
    Vec::with_capacity(RECEIVE_BUFFER)
}

/// Splits a datagram into its messages. A message whose header is inconsistent ends the
/// datagram (what follows cannot be framed); one whose body does not parse is kept with
/// the reason, so that its header still counts.
pub(crate) fn parse_datagram(bytes: &[u8]) -> Vec<Received> {
    let mut messages = Vec::new();
    let mut offset = 0;
    while bytes.len().saturating_sub(offset) >= HEADER_LEN {
        let rest = &bytes[offset..];
        let Ok(buffer) = NetlinkBuffer::new_checked(rest) else {
            tracing::warn!(
                "rtnetlink: a malformed message header; dropping the rest of the datagram"
            );
            break;
        };
        let length = buffer.length() as usize;
        let mut header = NetlinkHeader::default();
        header.length = buffer.length();
        header.message_type = buffer.message_type();
        header.flags = buffer.flags();
        header.sequence_number = buffer.sequence_number();
        header.port_number = buffer.port_number();
        let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rest[..length])
            .map_err(|e| e.to_string());
        messages.push(Received { header, parsed });
        // Messages are padded to 4 bytes (NLMSG_ALIGN).
        offset += (length + 3) & !3;
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::link::{LinkAttribute, LinkMessage};

    fn emit(message: RouteNetlinkMessage, sequence: u32) -> Vec<u8> {
        let mut header = NetlinkHeader::default();
        header.sequence_number = sequence;
        header.port_number = 7;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        packet.finalize();
        let mut bytes = vec![0; packet.buffer_len()];
        packet.serialize(&mut bytes);
        bytes
    }

    #[test]
    fn a_datagram_of_several_messages_splits_on_aligned_lengths() {
        let mut link = LinkMessage::default();
        link.header.index = 3;
        // A 3-byte name makes the message length not a multiple of 4.
        link.attributes.push(LinkAttribute::IfName("ab".into()));
        let one = emit(RouteNetlinkMessage::NewLink(link.clone()), 1);
        let mut datagram = one.clone();
        datagram.resize(datagram.len().next_multiple_of(4), 0);
        datagram.extend_from_slice(&emit(RouteNetlinkMessage::NewLink(link.clone()), 2));
        let messages = parse_datagram(&datagram);
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].header.sequence_number, 1);
        assert_eq!(messages[1].header.sequence_number, 2);
        for m in messages {
            let parsed = m.parsed.expect("parses");
            assert_eq!(
                parsed.payload,
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link.clone()))
            );
        }
    }

    #[test]
    fn garbage_never_panics_and_a_bad_length_ends_the_datagram() {
        let mut link = LinkMessage::default();
        link.header.index = 9;
        let mut datagram = emit(RouteNetlinkMessage::NewLink(link), 5);
        // A second header claiming more bytes than there are.
        datagram.extend_from_slice(&[0xff, 0xff, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0]);
        let messages = parse_datagram(&datagram);
        assert_eq!(messages.len(), 1);
        for len in 0..datagram.len() {
            let _ = parse_datagram(&datagram[..len]);
        }
        let mut noise = datagram.clone();
        for (i, b) in noise.iter_mut().enumerate().skip(16) {
            *b = (i as u8).wrapping_mul(37);
        }
        let _ = parse_datagram(&noise);
    }
}
