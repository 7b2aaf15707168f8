//! Paths to destinations (for a QP's address vector and for address handles) and address
//! handles.

use verbs_shm::protocol::{AhAttr, Reply};
use xroce_transport::{Path, PdId};
use xroce_wire::Gid;

use super::registry::Object;
use super::{Control, Neighbour, Refusal};
use crate::poller::Command;

impl Control {
    /// The path to `ah`'s destination. When its next hop is not known yet, the request
    /// waits for it without holding up other applications: `parking` is set, the request
    /// is refused with `EINPROGRESS` (which the server does not send), and it is handled
    /// again once the resolution ended (its outcome then waits in the connection's
    /// `resolved`).
    pub(super) fn path(&mut self, id: u64, ah: &AhAttr) -> Result<Path, Refusal> {
        let dgid = Gid(ah.dgid);
        let port = self.host.port();
        let Some(sgid) = port.gids.get(usize::from(ah.sgid_index)).copied() else {
            return Err(Refusal::invalid(format!(
                "no GID at index {} (the port has {}; ibv_devinfo -v lists them)",
                ah.sgid_index,
                port.gids.len()
            )));
        };
        if dgid.0 == [0; 16] {
            return Err(Refusal::invalid(
                "the destination GID is :: (unset): RoCE needs the peer's GID in the address \
                 vector's GRH (is_global, dgid)",
            ));
        }
        // The kernel resolves a RoCE v2 path from the source GID's address to the
        // destination's, which fails across address families (`rdma_resolve_ip_route`);
        // rxe's modify and create then fail, so ours do too, saying why.
        if sgid.to_ipv4().is_some() != dgid.to_ipv4().is_some() {
            let family = |g: Gid| {
                if g.to_ipv4().is_some() {
                    "IPv4"
                } else {
                    "IPv6"
                }
            };
            return Err(Refusal::invalid(format!(
                "GID {} ({}) is {} and the destination {} is {}: use a source GID of the \
                 destination's family",
                ah.sgid_index,
                sgid.to_ip(),
                family(sgid),
                dgid.to_ip(),
                family(dgid)
            )));
        }
        let known = match self.registry.conn_mut(id).resolved.take() {
            Some((gid, outcome)) if gid == dgid => outcome,
            _ => match self.host.lookup(dgid) {
                Neighbour::Mac(mac) => Ok(mac),
                Neighbour::Unreachable(e) => Err(e),
                Neighbour::Pending => {
                    self.parking = Some(dgid);
                    return Err(Refusal::new(libc::EINPROGRESS, "resolving"));
                }
            },
        };
        let dmac = known.map_err(|e| {
            Refusal::new(
                libc::EHOSTUNREACH,
                format!("cannot reach {}: {e}", dgid.to_ip()),
            )
        })?;
        Ok(Path {
            dgid,
            sgid_index: ah.sgid_index,
            dmac,
            traffic_class: ah.traffic_class,
            flow_label: ah.flow_label,
            // The kernel's RDMA core replaces the hop limit of every RoCE unicast address
            // vector with the route's (`ib_resolve_unicast_gid_dmac`), so rxe sends the
            // route's hop limit (64 by default) even when `ibv_rc_pingpong` asks for 1; we
            // do too.
            hop_limit: self.host.hop_limit(dgid),
            udp_sport: 0,
            vlan: None,
        })
    }

    /// `ibv_create_ah`.
    pub(super) fn create_ah(&mut self, id: u64, pd: u32, attr: &AhAttr) -> Result<Reply, Refusal> {
        self.registry.room_for(id, Object::Ah)?;
        self.registry.conn(id).pd(pd)?;
        let path = self.path(id, attr)?;
        let handle = self.registry.handle();
        let poller = self.registry.conn(id).poller;
        self.ask(poller, |tx| Command::CreateAh(handle, PdId(pd), path, tx))?;
        self.registry.conn_mut(id).ahs.insert(handle, PdId(pd));
        Ok(Reply::Ah { ah: handle })
    }

    /// `ibv_destroy_ah`.
    pub(super) fn destroy_ah(&mut self, id: u64, ah: u32) -> Result<Reply, Refusal> {
        let c = self.registry.conn_mut(id);
        if c.ahs.remove(&ah).is_none() {
            return Err(Refusal::invalid("no such address handle"));
        }
        let poller = c.poller;
        self.pollers[poller].call(|tx| Command::DestroyAh(ah, tx));
        Ok(Reply::Done)
    }
}

#[cfg(test)]
mod tests {
    use verbs_shm::protocol::Request;

    use super::*;
    use crate::control::AppLimits;
    use crate::control::fake::{FakeHost, Fixture, GID, refused};

    fn create_ah(pd: u32) -> Request {
        Request::CreateAh {
            pd,
            attr: AhAttr {
                dgid: GID.0,
                is_global: true,
                ..AhAttr::default()
            },
        }
    }

    #[test]
    fn an_address_handle_carries_its_path_to_the_poller() {
        let limits = AppLimits {
            max_ahs: 1,
            ..AppLimits::default()
        };
        let mut fx = Fixture::with(limits, FakeHost::default());
        let pd = fx.pd();
        refused(
            fx.ask(create_ah(pd + 1)),
            libc::EINVAL,
            "no such protection domain",
        );
        let Ok(Reply::Ah { ah }) = fx.ask(create_ah(pd)) else {
            panic!("no AH");
        };
        {
            let state = fx.poller.state();
            let Some(Command::CreateAh(handle, in_pd, path, _)) = state.commands.last() else {
                panic!("no CreateAh");
            };
            assert_eq!((*handle, *in_pd), (ah, PdId(pd)));
            assert_eq!((path.dgid, path.dmac), (GID, [2, 0, 0, 0, 0, 2]));
        }
        refused(
            fx.ask(create_ah(pd)),
            libc::ENOMEM,
            "already has 1 address handle,",
        );
        assert_eq!(fx.ask(Request::DestroyAh { ah }), Ok(Reply::Done));
        refused(
            fx.ask(Request::DestroyAh { ah }),
            libc::EINVAL,
            "no such address handle",
        );
    }

    #[test]
    fn a_path_goes_from_a_gid_of_the_destinations_family() {
        let v6 = Gid::from_ip("fd00:77::1".parse().expect("ip"));
        let link_local = Gid::from_ip("fe80::1".parse().expect("ip"));
        let mut host = FakeHost::default();
        host.port.gids = vec![GID, v6, link_local];
        // The route's hop limit, whatever the address vector says.
        host.hop_limit = 33;
        let mut fx = Fixture::with(AppLimits::default(), host);
        let pd = fx.pd();
        let ah = |dgid: Gid, sgid_index: u8| Request::CreateAh {
            pd,
            attr: AhAttr {
                dgid: dgid.0,
                sgid_index,
                is_global: true,
                ..AhAttr::default()
            },
        };
        let peer_v6 = Gid::from_ip("fd00:77::2".parse().expect("ip"));
        let peer_link_local = Gid::from_ip("fe80::2".parse().expect("ip"));
        for (dgid, index) in [(peer_v6, 1), (peer_link_local, 2), (peer_v6, 2)] {
            assert!(
                matches!(fx.ask(ah(dgid, index)), Ok(Reply::Ah { .. })),
                "{dgid} from GID {index}"
            );
            let state = fx.poller.state();
            let Some(Command::CreateAh(_, _, path, _)) = state.commands.last() else {
                panic!("no CreateAh");
            };
            assert_eq!((path.dgid, path.sgid_index), (dgid, index));
            assert_eq!(path.hop_limit, 33);
        }
        refused(
            fx.ask(ah(peer_v6, 0)),
            libc::EINVAL,
            "GID 0 (192.0.2.1) is IPv4 and the destination fd00:77::2 is IPv6",
        );
        refused(
            fx.ask(ah(Gid::from_ipv4("192.0.2.9".parse().expect("ip")), 1)),
            libc::EINVAL,
            "GID 1 (fd00:77::1) is IPv6 and the destination 192.0.2.9 is IPv4",
        );
        refused(
            fx.ask(ah(Gid([0; 16]), 1)),
            libc::EINVAL,
            "the destination GID is :: (unset)",
        );
        refused(
            fx.ask(ah(peer_v6, 3)),
            libc::EINVAL,
            "no GID at index 3 (the port has 3",
        );
    }

    #[test]
    fn an_address_handle_to_nowhere_is_refused() {
        let host = FakeHost {
            neighbour: Neighbour::Unreachable("network is unreachable".into()),
            ..FakeHost::default()
        };
        let mut fx = Fixture::with(AppLimits::default(), host);
        let pd = fx.pd();
        refused(
            fx.ask(create_ah(pd)),
            libc::EHOSTUNREACH,
            "network is unreachable",
        );
        assert!(fx.control.registry.conn(fx.id).ahs.is_empty());
    }
}
