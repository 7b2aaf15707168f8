//! The calls that make the CM speak: connect, accept, establish, reject, disconnect,
//! destroy (`rdma_connect` … `rdma_destroy_id` in the kernel's `cma.c`).

use std::net::SocketAddr;
use std::time::Duration;

use xroce_transport::{Instant, QpType};
use xroce_wire::cm::ip_cm::{self, IpCmPacket, IpCmRepr};
use xroce_wire::cm::{REJ_PRIVATE_DATA_LEN, REP_PRIVATE_DATA_LEN, SIDR_REP_PRIVATE_DATA_LEN};
use xroce_wire::source_port::rdma_cm_flow_label;
use xroce_wire::{Gid, Pkey, Qkey, RejectReason, ServiceId, SidrStatus, TransportServiceType};

use super::error::Error;
use super::id::{ConnParam, IdHandle, IdState, Owner};
use super::{
    CM_RESPONSE_TIMEOUT, MAX_CM_RETRIES, RDMA_UDP_QKEY, REQ_USER_DATA_LEN, RdmaCm,
    SIDR_REQ_USER_DATA_LEN,
};
use crate::address::MadAddress;
use crate::ib_cm::params::{PathRecord, RepParams, ReqParams, SidrRepParams, SidrReqParams};
use crate::ib_cm::timers::cm_convert_to_ms;

fn check_private(op: &'static str, data: &[u8], max: usize) -> Result<(), Error> {
    if data.len() > max {
        return Err(Error::PrivateDataTooLong {
            op,
            len: data.len(),
            max,
        });
    }
    Ok(())
}

/// The private data of a request: the IP CM header, then the application's bytes.
fn request_private_data(src: SocketAddr, dst: SocketAddr, user: &[u8]) -> Vec<u8> {
    let mut data = vec![0u8; ip_cm::HEADER_LEN + user.len()];
    let header = IpCmRepr {
        src_port: src.port(),
        src_addr: src.ip(),
        dst_addr: dst.ip(),
    };
    // NOTE(unwrap): 36 bytes are there, and `resolve_route` refused mixed IP versions.
    header
        .emit(&mut IpCmPacket::new_unchecked(
            &mut data[..ip_cm::HEADER_LEN],
        ))
        .expect("IP CM header of one IP version");
    data[ip_cm::HEADER_LEN..].copy_from_slice(user);
    data
}

impl RdmaCm {
    /// Connects a route-resolved id (`rdma_connect`): a REQ for RC and UC ids, carrying
    /// what Linux's rdma_cm puts in it (`cma_connect_ib`), or a SIDR_REQ for UD ids
    /// (`cma_resolve_ib_udp`). Events follow: CONNECT_RESPONSE, REJECTED or UNREACHABLE
    /// (ESTABLISHED or UNREACHABLE for UD).
    pub fn connect(&mut self, now: Instant, id: IdHandle, param: &ConnParam) -> Result<(), Error> {
        let cfg = self.config;
        let i = self.get(id)?;
        if i.state != IdState::RouteResolved || i.cm.is_some() {
            return Err(Error::InvalidState {
                op: "connect",
                state: i.state,
            });
        }
        let (Some(src), Some(dst), Some(route)) = (i.src, i.dst, i.route) else {
            return Err(Error::InvalidState {
                op: "connect",
                state: i.state,
            });
        };
        let to = MadAddress::new(src.ip(), dst.ip());
        let service_id = ServiceId::rdma_cm(i.ps, dst.port());
        let comm_id = if i.qp_type == QpType::Ud {
            check_private("connect", &param.private_data, SIDR_REQ_USER_DATA_LEN)?;
            let private_data = request_private_data(src, dst, &param.private_data);
            let req = SidrReqParams {
                to,
                service_id,
                pkey: Pkey::DEFAULT,
                timeout: cm_convert_to_ms(CM_RESPONSE_TIMEOUT),
                max_cm_retries: MAX_CM_RETRIES,
                private_data: &private_data,
            };
            self.ib.send_sidr_req(now, &req)?
        } else {
            check_private("connect", &param.private_data, REQ_USER_DATA_LEN)?;
            let private_data = request_private_data(src, dst, &param.private_data);
            // The path record rdma_cm synthesizes for RoCE (`cma_resolve_iboe_route`): the
            // flow label from the two ports, the traffic class from the TOS option, the
            // packet life time 18 (or one less than the ACK timeout option).
            let life = match i.ack_timeout {
                Some(t) => t.saturating_sub(1),
                None => cfg.packet_life_time,
            };
            let path = PathRecord {
                sgid: Gid::from_ip(src.ip()),
                dgid: Gid::from_ip(dst.ip()),
                flow_label: rdma_cm_flow_label(src.port(), dst.port()),
                hop_limit: route.hop_limit,
                traffic_class: i.tos.unwrap_or(0),
                sl: 0,
                pkey: Pkey::DEFAULT,
                mtu: route.path_mtu,
                rate: 0,
                packet_life_time: life,
            };
            let req = ReqParams {
                to,
                service_id,
                qp_num: param.qp_num,
                transport: if i.qp_type == QpType::Uc {
                    TransportServiceType::UC
                } else {
                    TransportServiceType::RC
                },
                starting_psn: i.seq_num,
                responder_resources: param.responder_resources,
                initiator_depth: param.initiator_depth,
                remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                max_cm_retries: MAX_CM_RETRIES,
                retry_count: param.retry_count.min(7),
                rnr_retry_count: param.rnr_retry_count.min(7),
                flow_control: param.flow_control,
                srq: param.srq,
                path,
                private_data: &private_data,
            };
            self.ib.send_req(now, &req)?
        };
        self.by_cm.insert(comm_id, id);
        let i = self.get_mut(id)?;
        i.cm = Some(comm_id);
        i.state = IdState::Connect;
        i.qp_num = param.qp_num;
        Ok(())
    }

    /// Accepts a connection request on the id it created (`rdma_accept`): a REP
    /// (`cma_accept_ib`: our QP, our starting PSN, the given resources, RNR retry at most
    /// 7), or a SIDR_REP with status success and the Q_Key (`RDMA_UDP_QKEY` unless given)
    /// for UD. ESTABLISHED follows the RTU (or the first packet: [`RdmaCm::notify_established`]).
    pub fn accept(&mut self, now: Instant, id: IdHandle, param: &ConnParam) -> Result<(), Error> {
        let i = self.get(id)?;
        let Some(cm) = i.cm.filter(|_| i.state == IdState::Connect) else {
            return Err(Error::InvalidState {
                op: "accept",
                state: i.state,
            });
        };
        if i.qp_type == QpType::Ud {
            check_private("accept", &param.private_data, SIDR_REP_PRIVATE_DATA_LEN)?;
            let qkey = match (i.qkey, param.qkey) {
                (_, q) if q != 0 => q,
                (Some(q), 0) => q,
                _ => RDMA_UDP_QKEY,
            };
            let rep = SidrRepParams {
                status: SidrStatus::SUCCESS,
                qp_num: param.qp_num,
                qkey: Qkey(qkey),
                info: &[],
                private_data: &param.private_data,
            };
            self.ib.send_sidr_rep(now, cm, &rep)?;
            let i = self.get_mut(id)?;
            i.qkey = Some(qkey);
            i.qp_num = param.qp_num;
            i.unanswered = false;
            return Ok(());
        }
        check_private("accept", &param.private_data, REP_PRIVATE_DATA_LEN)?;
        let rep = RepParams {
            qp_num: param.qp_num,
            starting_psn: i.seq_num,
            responder_resources: param.responder_resources,
            initiator_depth: param.initiator_depth,
            failover_accepted: 0,
            flow_control: param.flow_control,
            rnr_retry_count: param.rnr_retry_count.min(7),
            srq: param.srq,
            private_data: &param.private_data,
        };
        self.ib.send_rep(now, cm, &rep)?;
        let i = self.get_mut(id)?;
        i.qp_num = param.qp_num;
        i.unanswered = false;
        Ok(())
    }

    /// Completes a connection on the active side after CONNECT_RESPONSE, once the QP is
    /// in RTS (`rdma_establish`, librdmacm's accept without parameters, `cma_rep_recv`):
    /// the RTU goes out. If it cannot, the connection is refused with REJ 28, as Linux does.
    pub fn establish(&mut self, now: Instant, id: IdHandle) -> Result<(), Error> {
        let i = self.get(id)?;
        let Some(cm) =
            i.cm.filter(|_| i.state == IdState::Connect && i.qp_type != QpType::Ud)
        else {
            return Err(Error::InvalidState {
                op: "establish",
                state: i.state,
            });
        };
        if let Err(e) = self.ib.send_rtu(now, cm, &[]) {
            let _ = self
                .ib
                .send_rej(now, cm, RejectReason::CONSUMER_DEFINED, &[], &[]);
            return Err(e.into());
        }
        Ok(())
    }

    /// The transport received the first packet on the QP of a passive connection that has
    /// not seen its RTU ("communication established", `rdma_notify(IB_EVENT_COMM_EST)`):
    /// ESTABLISHED now; the late RTU is then a duplicate.
    pub fn notify_established(&mut self, now: Instant, id: IdHandle) -> Result<(), Error> {
        let i = self.get(id)?;
        let Some(cm) = i.cm else {
            return Err(Error::InvalidState {
                op: "notify established",
                state: i.state,
            });
        };
        self.ib.establish(now, cm)?;
        self.pump(now);
        Ok(())
    }

    /// Refuses a connection request (`rdma_reject`): REJ 28 with the private data, or a
    /// SIDR_REP with status 2 for UD.
    pub fn reject(&mut self, now: Instant, id: IdHandle, private_data: &[u8]) -> Result<(), Error> {
        let i = self.get(id)?;
        let Some(cm) = i.cm else {
            return Err(Error::InvalidState {
                op: "reject",
                state: i.state,
            });
        };
        if i.qp_type == QpType::Ud {
            check_private("reject", private_data, SIDR_REP_PRIVATE_DATA_LEN)?;
            let rep = SidrRepParams {
                status: SidrStatus::REJECT,
                qp_num: xroce_wire::Qpn::new(0),
                qkey: Qkey(0),
                info: &[],
                private_data,
            };
            self.ib.send_sidr_rep(now, cm, &rep)?;
        } else {
            check_private("reject", private_data, REJ_PRIVATE_DATA_LEN)?;
            self.ib
                .send_rej(now, cm, RejectReason::CONSUMER_DEFINED, &[], private_data)?;
        }
        self.get_mut(id)?.unanswered = false;
        Ok(())
    }

    /// Disconnects (`rdma_disconnect`): a DREQ if established, else a DREP if the peer's
    /// DREQ came, else nothing (Linux reports success in every case). DISCONNECTED follows
    /// the peer's DREP, or the DREQ's last retry.
    pub fn disconnect(&mut self, now: Instant, id: IdHandle) -> Result<(), Error> {
        let i = self.get(id)?;
        let Some(cm) = i.cm else {
            return Err(Error::InvalidState {
                op: "disconnect",
                state: i.state,
            });
        };
        if self.ib.send_dreq(now, cm, &[]).is_err() {
            let _ = self.ib.send_drep(now, cm, &[]);
        }
        Ok(())
    }

    /// Destroys an id (`rdma_destroy_id`): its connection says goodbye as the Linux CM
    /// does (see [`crate::IbCm::destroy`]), its port is freed, its events are dropped,
    /// and connection requests that came through it as a listener and were not yet taken
    /// are refused (their ids destroyed), as the kernel does when it cleans up undelivered
    /// events.
    pub fn destroy_id(&mut self, now: Instant, id: IdHandle) -> Result<(), Error> {
        let i = self.ids.remove(&id).ok_or(Error::UnknownId(id))?;
        if i.listening
            && let Some(bound) = i.bound
        {
            self.ib.stop_listen(ServiceId::rdma_cm(i.ps, bound.port()));
        }
        if let Some(cm) = i.cm {
            self.by_cm.remove(&cm);
            self.ib.destroy(now, cm);
        }
        if let Some(bound) = i.bound {
            self.ports.release(id, i.ps, bound.port());
        }
        self.events.retain(|e| e.id != id);
        let pending: Vec<IdHandle> = self
            .events
            .iter()
            .filter(|e| e.listen_id == Some(id))
            .map(|e| e.id)
            .collect();
        for child in pending {
            let _ = self.destroy_id(now, child);
        }
        self.pump(now);
        Ok(())
    }

    /// The owner of ids went away (the application died or closed its connection to the
    /// daemon): all its ids are destroyed, as the kernel destroys the ids of a closed
    /// rdma_cm file. Connected ids send their DREQ, connection requests not yet answered
    /// are refused with REJ 28, unanswered REQs are withdrawn with REJ 4, so peers learn
    /// at once instead of after their retries.
    pub fn owner_gone(&mut self, now: Instant, owner: Owner) {
        for id in self.ids_of(owner) {
            let _ = self.destroy_id(now, id);
        }
    }

    /// How long a connect waits, at most, before UNREACHABLE (16 REQs, 6144 ms apart, for
    /// Linux's settings): for callers that want to show it.
    pub fn connect_timeout(&self) -> Duration {
        let life = self.config.packet_life_time;
        let each = cm_convert_to_ms(life) * 2 + cm_convert_to_ms(CM_RESPONSE_TIMEOUT);
        each * (u32::from(MAX_CM_RETRIES) + 1)
    }
}
