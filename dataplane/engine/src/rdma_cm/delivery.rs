//! Events to applications: the CM's events become [`CmEventRecord`]s on the event
//! channel of the id's owner, written without blocking; a channel without room keeps its
//! events, in order, until it drains. A multicast event names its join
//! ([`CmEventRecord::join`]) and the index of the id's GID in the port's table.

use std::os::fd::OwnedFd;

use tracing::debug;
use verbs_shm::cm::{CmEventRecord, CmSockAddr, MAX_PRIVATE_DATA};
use xroce_cm::{Event, EventParam, IdHandle, UdEventParam};

use super::{CmService, IdPlace};

impl CmService {
    pub(super) fn on_event(&mut self, e: Event) {
        if let Some(listener) = e.listen_id
            && let Some(&place) = self.ids.get(&listener)
        {
            // A connect request makes a new id, owned and heard where the listener is.
            self.ids.entry(e.id).or_insert(place);
        }
        let Some(&place) = self.ids.get(&e.id) else {
            self.counters.cm_events_lost += 1;
            return;
        };
        let mut r = CmEventRecord {
            id: e.id.0,
            listen_id: e.listen_id.map_or(0, |l| l.0),
            event: e.kind as u32,
            status: e.status,
            ..CmEventRecord::default()
        };
        if let Some(i) = self.cm.id(e.id) {
            r.local = i.local.map(CmSockAddr::from).unwrap_or(CmSockAddr::NONE);
            r.remote = i.remote.map(CmSockAddr::from).unwrap_or(CmSockAddr::NONE);
            r.sgid_index = i.local.map_or(0, |a| self.gid_index(a.ip()));
        }
        match &e.param {
            EventParam::None => {}
            EventParam::Conn(c) => {
                r.responder_resources = c.responder_resources;
                r.initiator_depth = c.initiator_depth;
                r.flow_control = c.flow_control;
                r.retry_count = c.retry_count;
                r.rnr_retry_count = c.rnr_retry_count;
                r.srq = c.srq;
                r.qp_num = c.qp_num;
                r.private_data_len = copy_private(&mut r.private_data, &c.private_data);
            }
            EventParam::Ud(u) => copy_ud(&mut r, u),
            EventParam::Multicast(m) => {
                copy_ud(&mut r, &m.ud);
                r.join = m.join;
                // The group's address vector sends from the id's GID: gone from the port
                // since the id was bound, there is none (the kernel's
                // `ib_init_ah_from_mcmember` fails, and the join is a MULTICAST_ERROR).
                let local = self.cm.id(e.id).and_then(|i| i.local);
                match local.and_then(|a| self.gid_position(a.ip())) {
                    Some(index) => r.sgid_index = index,
                    None => {
                        debug!(
                            "rdma_cm: id {} joined a group from {local:?}, no address of this port now",
                            e.id
                        );
                        r.event = verbs_shm::cm::event::MULTICAST_ERROR;
                        r.status = -libc::EADDRNOTAVAIL;
                    }
                }
            }
        }
        self.deliver(place, r);
    }

    pub(super) fn emit_simple(&mut self, id: IdHandle, event: u32, status: i32) {
        let Some(&place) = self.ids.get(&id) else {
            return;
        };
        let mut r = CmEventRecord {
            id: id.0,
            event,
            status,
            ..CmEventRecord::default()
        };
        let info = self.info(id);
        r.local = info.local;
        r.remote = info.remote;
        r.sgid_index = info.sgid_index;
        self.deliver(place, r);
    }

    fn deliver(&mut self, place: IdPlace, r: CmEventRecord) {
        let Some(ch) = self.channels.get_mut(&(place.conn, place.channel)) else {
            self.counters.cm_events_lost += 1;
            return;
        };
        self.counters.cm_events += 1;
        if !ch.backlog.is_empty() {
            self.counters.cm_events_delayed += 1;
            ch.backlog.push_back(r);
            return;
        }
        match send_record(&ch.sock, &r) {
            Sent::Done => {}
            Sent::Full => {
                self.counters.cm_events_delayed += 1;
                ch.backlog.push_back(r);
            }
            Sent::Gone => self.counters.cm_events_lost += 1,
        }
    }

    pub(super) fn drain_backlogs(&mut self) {
        for ch in self.channels.values_mut() {
            while let Some(r) = ch.backlog.front() {
                match send_record(&ch.sock, r) {
                    Sent::Done => {
                        ch.backlog.pop_front();
                    }
                    Sent::Full => break,
                    Sent::Gone => {
                        self.counters.cm_events_lost += ch.backlog.len() as u64;
                        ch.backlog.clear();
                    }
                }
            }
        }
    }
}

enum Sent {
    Done,
    Full,
    Gone,
}

fn send_record(sock: &OwnedFd, r: &CmEventRecord) -> Sent {
    use nix::sys::socket::{MsgFlags, send};
    use std::os::fd::AsRawFd;
    let bytes = zerocopy::IntoBytes::as_bytes(r);
    loop {
        match send(
            sock.as_raw_fd(),
            bytes,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        ) {
            Ok(_) => return Sent::Done,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN) => return Sent::Full,
            Err(_) => return Sent::Gone,
        }
    }
}

/// `param.ud`: the peer's (or the group's) address vector, QPN, Q_Key, private data.
fn copy_ud(r: &mut CmEventRecord, u: &UdEventParam) {
    r.ud = 1;
    r.qp_num = u.qp_num;
    r.qkey = u.qkey;
    r.dgid = u.ah_attr.dgid.0;
    r.flow_label = u.ah_attr.flow_label;
    r.hop_limit = u.ah_attr.hop_limit;
    r.traffic_class = u.ah_attr.traffic_class;
    r.private_data_len = copy_private(&mut r.private_data, &u.private_data);
}

fn copy_private(to: &mut [u8; MAX_PRIVATE_DATA], from: &[u8]) -> u16 {
    let n = from.len().min(MAX_PRIVATE_DATA);
    to[..n].copy_from_slice(&from[..n]);
    n as u16
}
