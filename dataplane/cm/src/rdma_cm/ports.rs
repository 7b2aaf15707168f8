//! rdma_cm's ports: per port space, which ids are bound to which port, with Linux's
//! rules (`cma_use_port`, `cma_check_port`, `cma_alloc_any_port`, `cma_bind_listen`).
//!
//! Port spaces are separate from the kernel's TCP and UDP ports and from each other: TCP
//! port 7174 of rdma_cm is not TCP port 7174 of the host.

use std::collections::HashMap;
use std::net::SocketAddr;

use xroce_wire::PortSpace;

use super::error::Error;
use super::id::{IdHandle, RdmaId};
use crate::address::is_any;
use crate::random::Random;

/// The ephemeral range Linux uses by default (`net.ipv4.ip_local_port_range`).
pub const EPHEMERAL_PORTS: (u16, u16) = (32768, 60999);

/// The ids bound to each port of each port space.
#[derive(Debug)]
pub(crate) struct Ports {
    owners: HashMap<(PortSpace, u16), Vec<IdHandle>>,
    low: u16,
    high: u16,
}

impl Ports {
    pub(crate) fn new(range: (u16, u16)) -> Ports {
        let (low, high) = if range.0 <= range.1 {
            range
        } else {
            (range.1, range.0)
        };
        // Port 0 means "any"; a range without a port above it still has one port.
        let low = low.max(1);
        Ports {
            owners: HashMap::new(),
            low,
            high: high.max(low),
        }
    }

    /// `cma_check_port`: may `me`, at `addr`, share its port with the ids bound to it?
    fn check(
        &self,
        ids: &HashMap<IdHandle, RdmaId>,
        ps: PortSpace,
        me: IdHandle,
        addr: SocketAddr,
        reuseaddr: bool,
    ) -> Result<(), Error> {
        let Some(owners) = self.owners.get(&(ps, addr.port())) else {
            return Ok(());
        };
        let afonly = ids.get(&me).is_some_and(|i| i.afonly);
        for cur in owners.iter().filter(|&&h| h != me) {
            let Some(c) = ids.get(cur) else {
                continue;
            };
            if reuseaddr && c.reuseaddr {
                continue;
            }
            let Some(cur_addr) = c.bound else {
                continue;
            };
            if afonly && c.afonly && addr.is_ipv4() != cur_addr.is_ipv4() {
                continue;
            }
            if is_any(addr.ip()) || is_any(cur_addr.ip()) {
                return Err(Error::WildcardConflict { addr, ps });
            }
            if addr.ip() == cur_addr.ip() {
                return Err(Error::AddrInUse { addr, ps });
            }
        }
        Ok(())
    }

    /// Binds `me` to `addr` (`cma_get_port`); port 0 picks a free ephemeral port, starting
    /// at a random one as Linux does. Returns the address bound.
    ///
    /// Linux may also hand an active id an ephemeral port other ids hold when the
    /// connections' address-port 4-tuples differ (`cma_port_is_unique`); this table only
    /// picks ports no id holds, which Linux would pick as well.
    pub(crate) fn bind(
        &mut self,
        ids: &HashMap<IdHandle, RdmaId>,
        me: IdHandle,
        ps: PortSpace,
        addr: SocketAddr,
        reuseaddr: bool,
        random: &mut dyn Random,
    ) -> Result<SocketAddr, Error> {
        if addr.port() != 0 {
            self.check(ids, ps, me, addr, reuseaddr)?;
            self.owners.entry((ps, addr.port())).or_default().push(me);
            return Ok(addr);
        }
        let span = u32::from(self.high - self.low) + 1;
        let mut port = u32::from(self.low) + random.next_u32() % span;
        for _ in 0..span {
            // NOTE: `port` stays within low..=high, which are u16.
            let p = port as u16;
            if let std::collections::hash_map::Entry::Vacant(slot) = self.owners.entry((ps, p)) {
                slot.insert(vec![me]);
                let mut bound = addr;
                bound.set_port(p);
                return Ok(bound);
            }
            port = if port >= u32::from(self.high) {
                u32::from(self.low)
            } else {
                port + 1
            };
        }
        Err(Error::NoFreePort {
            ps,
            low: self.low,
            high: self.high,
        })
    }

    /// `cma_bind_listen`: a listener shares its port with no one at its address, whatever
    /// REUSEADDR says.
    pub(crate) fn check_listen(
        &self,
        ids: &HashMap<IdHandle, RdmaId>,
        me: IdHandle,
        ps: PortSpace,
        addr: SocketAddr,
    ) -> Result<(), Error> {
        self.check(ids, ps, me, addr, false)
    }

    /// Frees `me`'s hold on its port.
    pub(crate) fn release(&mut self, me: IdHandle, ps: PortSpace, port: u16) {
        if let Some(owners) = self.owners.get_mut(&(ps, port)) {
            owners.retain(|&h| h != me);
            if owners.is_empty() {
                self.owners.remove(&(ps, port));
            }
        }
    }

    /// How many ids hold a port.
    pub(crate) fn holders(&self, ps: PortSpace, port: u16) -> usize {
        self.owners.get(&(ps, port)).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SeededRandom;
    use crate::rdma_cm::id::Owner;
    use std::net::{IpAddr, Ipv4Addr};
    use xroce_transport::QpType;
    use xroce_wire::Psn;

    #[test]
    fn degenerate_ranges_still_give_a_port() {
        let mut ids = HashMap::new();
        let me = IdHandle(1);
        ids.insert(
            me,
            RdmaId::new(Owner(1), PortSpace::Tcp, QpType::Rc, Psn::ZERO),
        );
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        for range in [(0, 0), (5, 5), (9, 3)] {
            let mut ports = Ports::new(range);
            let bound = ports
                .bind(
                    &ids,
                    me,
                    PortSpace::Tcp,
                    addr,
                    false,
                    &mut SeededRandom::new(1),
                )
                .unwrap();
            assert!(bound.port() >= 1, "{range:?}: {bound}");
            assert_eq!(ports.holders(PortSpace::Tcp, bound.port()), 1);
            ports.release(me, PortSpace::Tcp, bound.port());
            assert_eq!(ports.holders(PortSpace::Tcp, bound.port()), 0);
        }
    }
}
