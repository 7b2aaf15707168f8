//! Multicast groups of UD ids, joined as the kernel's rdma_cm joins them on RoCE v2
//! (`rdma_join_multicast`, `cma_iboe_join_multicast`, `rdma_leave_multicast` in `cma.c`).
//!
//! RoCE has no subnet administrator, so a join sends no MAD: the group's MGID is its
//! IPv4-mapped address (`::ffff:a.b.c.d`, `cma_iboe_set_mgid` for RoCE v2 GIDs) and the id
//! hears `MULTICAST_JOIN` at once, carrying the address vector that sends to the group.
//! Receiving is the QP's business: librdmacm attaches the id's QP to the MGID when it
//! reads that event (`ibv_attach_mcast`, unless the join is send-only), and the host's
//! IGMP membership follows the QP's attachments.
//!
//! What Linux checks, in its order, and answers: the id has a device and is bound or
//! address-resolved (`EINVAL`); it is a UD id (`EINVAL`: Linux refuses other QP types
//! since "RDMA/cma: Allow UD qp_type to join multicast only", 2023); the group is not the
//! unspecified address (`EINVAL`); it is IPv4 (an IPv6 group answers `ENOTSUPP`, 524, on
//! RoCE v2). The event's address vector: destination the MGID, hop limit 64
//! (`IPV6_DEFAULT_HOPLIMIT`), traffic class, flow label, SL and rate 0 (Linux does not
//! take the id's TOS for a group); QP number 0xFFFFFF; the id's Q_Key, which becomes
//! `RDMA_UDP_QKEY` if it had none (`cma_set_default_qkey`). The engine fills in the index
//! of the id's source GID.
//!
//! An id keeps its joins until it leaves them or goes ([`RdmaCm::destroy_id`],
//! [`RdmaCm::owner_gone`]), as the kernel leaves every group of an id it destroys.

use std::net::{IpAddr, Ipv4Addr};

use xroce_transport::QpType;
use xroce_wire::Gid;

use super::error::Error;
use super::events::{AhAttr, Event, EventKind, EventParam, McEventParam, UdEventParam};
use super::id::{IdHandle, IdState};
use super::{RDMA_UDP_QKEY, RdmaCm};
use crate::address::is_any;

/// `IPV6_DEFAULT_HOPLIMIT`: the hop limit of a RoCE v2 group's address vector.
pub const MC_HOP_LIMIT: u8 = 64;

/// The QP number that sends to a multicast group (`0xFFFFFF`).
pub const MC_QPN: u32 = 0xFF_FFFF;

/// One join of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Membership {
    /// Its key: the caller's (the drop-in librdmacm's), unique among the id's joins.
    pub join: u32,
    /// The group.
    pub group: IpAddr,
    /// The group's MGID.
    pub mgid: Gid,
    /// Joined as a send-only full member (`RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`): the QP
    /// sends to the group and does not receive from it.
    pub send_only: bool,
}

/// The MGID of an IPv4 group on RoCE v2: its IPv4-mapped address; the wildcard or a
/// loopback address gives the zero GID (`cma_iboe_set_mgid` after `cma_any_addr`).
pub fn mgid_of(group: Ipv4Addr) -> Gid {
    if is_any(IpAddr::V4(group)) {
        Gid([0; 16])
    } else {
        Gid::from_ipv4(group)
    }
}

impl RdmaCm {
    /// Joins `group` (`rdma_join_multicast`) under the key `join`, as a full member or a
    /// send-only one; `MULTICAST_JOIN` follows at once ([`EventParam::Multicast`]). Returns
    /// the group's MGID. The refusals are Linux's (see the module's documentation).
    pub fn join_multicast(
        &mut self,
        id: IdHandle,
        join: u32,
        group: IpAddr,
        send_only: bool,
    ) -> Result<Gid, Error> {
        let op = "join a multicast group";
        let i = self.get(id)?;
        if i.state != IdState::AddrBound {
            return Err(Error::InvalidState { op, state: i.state });
        }
        if i.bound.is_none_or(|b| is_any(b.ip())) {
            return Err(Error::NoDevice { op });
        }
        if i.qp_type != QpType::Ud {
            return Err(Error::McQpType { qp_type: i.qp_type });
        }
        if group.is_unspecified() {
            return Err(Error::McZeroGroup(group));
        }
        let IpAddr::V4(v4) = group else {
            return Err(Error::McIpv6(group));
        };
        if i.multicast.iter().any(|m| m.join == join) {
            return Err(Error::McJoinInUse { id, join });
        }
        let mgid = mgid_of(v4);
        let i = self.get_mut(id)?;
        let qkey = *i.qkey.get_or_insert(RDMA_UDP_QKEY);
        i.multicast.push(Membership {
            join,
            group,
            mgid,
            send_only,
        });
        self.push_event(Event {
            id,
            listen_id: None,
            kind: EventKind::MulticastJoin,
            status: 0,
            param: EventParam::Multicast(McEventParam {
                join,
                ud: UdEventParam {
                    private_data: Vec::new(),
                    ah_attr: AhAttr {
                        dgid: mgid,
                        flow_label: 0,
                        hop_limit: MC_HOP_LIMIT,
                        traffic_class: 0,
                    },
                    qp_num: MC_QPN,
                    qkey,
                },
            }),
        });
        Ok(mgid)
    }

    /// Leaves the join `join` of an id (`rdma_leave_multicast`); its events not yet taken
    /// are dropped, as ucma drops them. `ENOENT` for a key the id does not hold, as ucma
    /// answers for an unknown join.
    pub fn leave_multicast(&mut self, id: IdHandle, join: u32) -> Result<Membership, Error> {
        let i = self.get_mut(id)?;
        let at = i
            .multicast
            .iter()
            .position(|m| m.join == join)
            .ok_or(Error::McNotJoined { id, join })?;
        let left = i.multicast.remove(at);
        self.events
            .retain(|e| e.id != id || e.multicast().is_none_or(|m| m.join != join));
        Ok(left)
    }

    /// The groups an id joined, oldest first (none for an unknown id).
    pub fn memberships(&self, id: IdHandle) -> Vec<Membership> {
        self.ids
            .get(&id)
            .map(|i| i.multicast.clone())
            .unwrap_or_default()
    }

    /// How many joins every id holds together.
    pub fn multicast_joins(&self) -> usize {
        self.ids.values().map(|i| i.multicast.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use xroce_wire::PortSpace;

    use super::*;
    use crate::random::SeededRandom;
    use crate::rdma_cm::Config;
    use crate::rdma_cm::id::Owner;
    use xroce_wire::Guid;

    fn cm() -> RdmaCm {
        let mut cm = RdmaCm::new(Config::new(Guid(1)), Box::new(SeededRandom::new(7)));
        cm.add_local_address("10.0.0.1".parse().unwrap());
        cm
    }

    #[test]
    fn an_ipv4_group_is_its_mapped_address_and_the_join_is_reported_at_once() {
        let mut cm = cm();
        let id = cm.create_id(Owner(1), PortSpace::Udp, QpType::Ud).unwrap();
        cm.bind(id, SocketAddr::new("10.0.0.1".parse().unwrap(), 0))
            .unwrap();
        let group: IpAddr = "230.1.2.3".parse().unwrap();
        let mgid = cm.join_multicast(id, 5, group, false).unwrap();
        assert_eq!(mgid.0[..12], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(mgid.0[12..], [230, 1, 2, 3]);
        let e = cm.poll_event().unwrap();
        assert_eq!((e.id, e.kind, e.status), (id, EventKind::MulticastJoin, 0));
        let m = e.multicast().unwrap();
        assert_eq!(m.join, 5);
        assert_eq!(m.ud.ah_attr.dgid, mgid);
        assert_eq!(m.ud.ah_attr.hop_limit, 64);
        assert_eq!((m.ud.qp_num, m.ud.qkey), (0xFF_FFFF, RDMA_UDP_QKEY));
        assert_eq!(cm.memberships(id)[0].group, group);
        assert_eq!(mgid_of(Ipv4Addr::LOCALHOST), Gid([0; 16]));

        // Left, its event not taken yet: the event goes too.
        cm.join_multicast(id, 6, group, true).unwrap();
        cm.leave_multicast(id, 6).unwrap();
        assert!(cm.poll_event().is_none());
        assert_eq!(cm.multicast_joins(), 1);
        cm.destroy_id(crate::Instant::from_nanos(0), id).unwrap();
        assert_eq!(cm.multicast_joins(), 0);
    }
}
