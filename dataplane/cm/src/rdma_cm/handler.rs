//! CM events into rdma_cm events (`cma_ib_handler`, `cma_sidr_rep_handler`), and
//! incoming requests matched to listeners (`cma_ib_req_handler`, `cma_find_listener`,
//! `cma_match_private_data`).

use std::net::{IpAddr, SocketAddr};

use xroce_transport::{Instant, QpType};
use xroce_wire::cm::ip_cm::{self, IpCmPacket, IpCmRepr};
use xroce_wire::{CommId, IbMtu, PortSpace, ServiceId, SidrStatus, TransportServiceType};

use super::error::{EINVAL, ETIMEDOUT};
use super::events::{ConnEventParam, Event, EventKind, EventParam, UdEventParam, ah_for};
use super::id::{IdHandle, IdState, Owner, RdmaId, RouteInfo};
use super::{MRA_SERVICE_TIMEOUT, RdmaCm};
use crate::address::is_any;
use crate::counters::Counter;
use crate::ib_cm::MRA_FLAG_DELAY;
use crate::ib_cm::params::{CmEvent, CmEventKind, ReqReceived, SidrReqReceived};

/// What a request asks for, in rdma_cm terms.
struct Request {
    ps: PortSpace,
    port: u16,
    header: IpCmRepr,
    qp_type: QpType,
}

/// `cma_match_private_data`: does a listener bound to `bound` take a request for
/// `dst`? A wildcard listener (or one bound to a loopback address, which stands for the
/// wildcard) takes any (an IPv6 one IPv4 too, unless AFONLY); otherwise the versions and
/// addresses must match.
fn listener_takes(bound: SocketAddr, afonly: bool, dst: IpAddr) -> bool {
    if is_any(bound.ip()) && !afonly {
        return true;
    }
    if bound.is_ipv4() != dst.is_ipv4() {
        return false;
    }
    is_any(bound.ip()) || bound.ip() == dst
}

impl RdmaCm {
    pub(super) fn on_cm_event(&mut self, now: Instant, event: CmEvent) {
        let Some(&id) = self.by_cm.get(&event.id) else {
            match event.kind {
                CmEventKind::ReqReceived(req) => self.on_req(now, event.id, &req),
                CmEventKind::SidrReqReceived(req) => self.on_sidr_req(now, event.id, &req),
                // Events of connections whose id is gone are nobody's.
                _ => {}
            }
            return;
        };
        let Some(i) = self.ids.get(&id) else {
            return;
        };
        // `cma_ib_handler`: only a connecting id hears of its connection, and only a
        // disconnected one of the end of TimeWait.
        let wanted = match event.kind {
            CmEventKind::TimewaitExit => IdState::Disconnect,
            _ => IdState::Connect,
        };
        if i.state != wanted {
            return;
        }
        let out = match event.kind {
            CmEventKind::ReqError | CmEventKind::RepError | CmEventKind::SidrReqError => {
                Some((EventKind::Unreachable, -ETIMEDOUT, EventParam::None))
            }
            CmEventKind::RepReceived(rep) => {
                if i.qp_type != QpType::Ud {
                    // NOTE: cannot fail: the connection just entered REP_RCVD.
                    let _ =
                        self.ib
                            .send_mra(now, event.id, MRA_FLAG_DELAY | MRA_SERVICE_TIMEOUT, &[]);
                }
                let param = ConnEventParam {
                    private_data: rep.private_data,
                    responder_resources: rep.responder_resources,
                    initiator_depth: rep.initiator_depth,
                    flow_control: u8::from(rep.flow_control),
                    retry_count: 0,
                    rnr_retry_count: rep.rnr_retry_count,
                    srq: u8::from(rep.srq),
                    qp_num: rep.remote_qpn.value(),
                };
                Some((EventKind::ConnectResponse, 0, EventParam::Conn(param)))
            }
            CmEventKind::RtuReceived { .. } | CmEventKind::UserEstablished => {
                Some((EventKind::Established, 0, EventParam::None))
            }
            CmEventKind::DreqError => self.disconnected(id, -ETIMEDOUT),
            CmEventKind::DreqReceived { .. } | CmEventKind::DrepReceived { .. } => {
                self.disconnected(id, 0)
            }
            CmEventKind::TimewaitExit => Some((EventKind::TimewaitExit, 0, EventParam::None)),
            CmEventKind::MraReceived { .. } => None,
            CmEventKind::RejReceived {
                reason,
                private_data,
                ..
            } => {
                let param = ConnEventParam {
                    private_data,
                    ..ConnEventParam::default()
                };
                Some((
                    EventKind::Rejected,
                    i32::from(reason.0),
                    EventParam::Conn(param),
                ))
            }
            CmEventKind::SidrRepReceived(rep) => {
                if rep.status != SidrStatus::SUCCESS {
                    let param = UdEventParam {
                        private_data: rep.private_data,
                        ..UdEventParam::default()
                    };
                    Some((
                        EventKind::Unreachable,
                        i32::from(rep.status.0),
                        EventParam::Ud(param),
                    ))
                } else if i.qkey.is_some_and(|q| q != rep.qkey.0) {
                    // `cma_set_qkey`: the peer's Q_Key is not the one our QP has.
                    Some((EventKind::AddrError, -EINVAL, EventParam::None))
                } else {
                    let (dst, hop_limit) = (i.dst, i.route.map_or(64, |r| r.hop_limit));
                    let ah = match dst {
                        Some(d) => ah_for(d.ip(), 0, hop_limit, i.tos.unwrap_or(0)),
                        None => Default::default(),
                    };
                    let param = UdEventParam {
                        private_data: rep.private_data,
                        ah_attr: ah,
                        qp_num: rep.qpn.value(),
                        qkey: rep.qkey.0,
                    };
                    if let Some(i) = self.ids.get_mut(&id) {
                        i.qkey = Some(rep.qkey.0);
                    }
                    Some((EventKind::Established, 0, EventParam::Ud(param)))
                }
            }
            CmEventKind::ReqReceived(_) | CmEventKind::SidrReqReceived(_) => None,
        };
        let Some((kind, status, param)) = out else {
            return;
        };
        self.push_event(Event {
            id,
            listen_id: None,
            kind,
            status,
            param,
        });
    }

    /// DISCONNECTED, once: the id goes from connected to disconnected; a second DREQ or
    /// DREP says nothing more.
    fn disconnected(&mut self, id: IdHandle, status: i32) -> Option<(EventKind, i32, EventParam)> {
        let i = self
            .ids
            .get_mut(&id)
            .filter(|i| i.state == IdState::Connect)?;
        i.state = IdState::Disconnect;
        Some((EventKind::Disconnected, status, EventParam::None))
    }

    /// What a request's service ID and private data ask for; `None` if they are not an
    /// rdma_cm request (no port space, bad IP CM header).
    fn request_of(service_id: ServiceId, private_data: &[u8], qp_type: QpType) -> Option<Request> {
        let (ps, port) = service_id.to_rdma_cm()?;
        let header = IpCmRepr::parse(&IpCmPacket::new_checked(private_data).ok()?).ok()?;
        if header.src_addr.is_ipv4() != header.dst_addr.is_ipv4() {
            return None;
        }
        Some(Request {
            ps,
            port,
            header,
            qp_type,
        })
    }

    /// `cma_find_listener`: the id listening on the request's port that takes it.
    fn find_listener(&self, r: &Request) -> Option<IdHandle> {
        if !self.local_addrs.contains(&r.header.dst_addr) {
            return None;
        }
        let mut found: Vec<IdHandle> = self
            .ids
            .iter()
            .filter(|(_, i)| {
                i.state == IdState::Listen
                    && i.ps == r.ps
                    && i.bound.is_some_and(|b| {
                        b.port() == r.port && listener_takes(b, i.afonly, r.header.dst_addr)
                    })
                    && i.qp_type == r.qp_type
            })
            .map(|(h, _)| *h)
            .collect();
        // A listener on the address itself goes before a wildcard one, then the oldest.
        found.sort_by_key(|h| {
            let wildcard = self
                .ids
                .get(h)
                .and_then(|i| i.bound)
                .is_some_and(|b| is_any(b.ip()));
            (wildcard, *h)
        });
        found.first().copied()
    }

    /// Whether `listener` holds as many unanswered requests as its backlog allows.
    fn backlog_full(&self, listener: IdHandle) -> bool {
        let Some(l) = self.ids.get(&listener) else {
            return true;
        };
        let unanswered = self
            .ids
            .values()
            .filter(|i| i.unanswered && i.listener == Some(listener))
            .count();
        unanswered >= l.backlog as usize
    }

    /// The id a request creates (`cma_ib_new_conn_id`, `cma_ib_new_udp_id`).
    fn new_conn_id(
        &mut self,
        listener: IdHandle,
        r: &Request,
        cm: CommId,
        route: Option<RouteInfo>,
    ) -> IdHandle {
        let handle = IdHandle(self.next_handle);
        self.next_handle += 1;
        let seq_num = xroce_wire::Psn::new(self.random.next_u32());
        let owner = self.ids.get(&listener).map_or(Owner(0), |l| l.owner);
        let mut id = RdmaId::new(owner, r.ps, r.qp_type, seq_num);
        id.state = IdState::Connect;
        id.src = Some(SocketAddr::new(r.header.dst_addr, r.port));
        id.dst = Some(SocketAddr::new(r.header.src_addr, r.header.src_port));
        id.route = route;
        id.cm = Some(cm);
        id.listener = Some(listener);
        id.unanswered = true;
        self.ids.insert(handle, id);
        self.by_cm.insert(cm, handle);
        handle
    }

    /// A REQ for a listened service ID (`cma_ib_req_handler`). Refused (REJ 28, as Linux
    /// does when no rdma_cm listener takes it) if it names no port space, its IP CM header
    /// is bad, its destination is not ours or no listener takes it; otherwise a new id
    /// gets CONNECT_REQUEST and the CM holds back an MRA for duplicates, unless the
    /// listener's backlog is full: then the REQ is forgotten unanswered.
    fn on_req(&mut self, now: Instant, cm: CommId, req: &ReqReceived) {
        let qp_type = if req.transport == TransportServiceType::UC {
            QpType::Uc
        } else {
            QpType::Rc
        };
        let request = Self::request_of(req.service_id, &req.private_data, qp_type);
        let listener = request.as_ref().and_then(|r| self.find_listener(r));
        let (Some(r), Some(listener)) = (request, listener) else {
            self.ib.counters_mut().inc(Counter::req_refused);
            self.ib.destroy(now, cm);
            return;
        };
        if self.backlog_full(listener) {
            self.ib.counters_mut().inc(Counter::req_over_backlog);
            self.ib.forget_request(now, cm);
            return;
        }
        let route = IbMtu::from_code(req.path_mtu).map(|path_mtu| RouteInfo {
            path_mtu,
            hop_limit: req.primary_path.hop_limit,
        });
        let id = self.new_conn_id(listener, &r, cm, route);
        let param = ConnEventParam {
            private_data: req.private_data[ip_cm::HEADER_LEN..].to_vec(),
            responder_resources: req.responder_resources,
            initiator_depth: req.initiator_depth,
            flow_control: u8::from(req.flow_control),
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            srq: u8::from(req.srq),
            qp_num: req.remote_qpn.value(),
        };
        self.push_event(Event {
            id,
            listen_id: Some(listener),
            kind: EventKind::ConnectRequest,
            status: 0,
            param: EventParam::Conn(param),
        });
        // NOTE: cannot fail: the connection is new, in REQ_RCVD.
        let _ = self
            .ib
            .send_mra(now, cm, MRA_FLAG_DELAY | MRA_SERVICE_TIMEOUT, &[]);
    }

    /// A SIDR_REQ for a listened service ID: as a REQ, for UD listeners; refused with
    /// SIDR_REP status 2.
    fn on_sidr_req(&mut self, now: Instant, cm: CommId, req: &SidrReqReceived) {
        let request = Self::request_of(req.service_id, &req.private_data, QpType::Ud);
        let listener = request.as_ref().and_then(|r| self.find_listener(r));
        let (Some(r), Some(listener)) = (request, listener) else {
            self.ib.counters_mut().inc(Counter::req_refused);
            self.ib.destroy(now, cm);
            return;
        };
        if self.backlog_full(listener) {
            self.ib.counters_mut().inc(Counter::req_over_backlog);
            self.ib.destroy(now, cm);
            return;
        }
        let id = self.new_conn_id(listener, &r, cm, None);
        let param = UdEventParam {
            private_data: req.private_data[ip_cm::HEADER_LEN..].to_vec(),
            ..UdEventParam::default()
        };
        self.push_event(Event {
            id,
            listen_id: Some(listener),
            kind: EventKind::ConnectRequest,
            status: 0,
            param: EventParam::Ud(param),
        });
    }
}
