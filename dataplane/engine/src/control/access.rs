//! Who may open the device: the daemon's access policy, and the credentials each
//! application's connection carries.
//!
//! A kernel RDMA device is a file, `/dev/infiniband/uverbs*`, and who may open it is that
//! file's owner, group and mode: rdma-core's udev rules make it 0666 (every user), and a
//! site that wants less makes it 0660 with a group, conventionally `rdma`. xroce's device
//! is the daemon's abstract socket, which has no owner or mode, so the daemon applies the
//! same decision itself: by default every user of its network namespace may open the
//! device; with users or groups named (`--allow-users`, `--allow-groups`), only those
//! users, the members of those groups, and root. The credentials are the kernel's own
//! record of the peer when it connected (`SO_PEERCRED`, `SO_PEERGROUPS`), taken as
//! opening a device file checks the opener's when it opens it. Who is refused learns it
//! on its hello: `EACCES`, what `open` of a device file answers, with a message naming the
//! user and whom the daemon allows.

use std::os::fd::AsFd;

use verbs_shm::sys;

use super::Refusal;

/// A user or group the policy names: its id, and the name it was given by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    /// The uid or gid.
    pub id: u32,
    /// The name (the number itself when it was given as a number).
    pub name: String,
}

impl Named {
    fn label(&self, id_kind: &str) -> String {
        if self.name == self.id.to_string() {
            format!("{id_kind} {}", self.id)
        } else {
            format!("{} ({id_kind} {})", self.name, self.id)
        }
    }
}

/// Why a policy cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AccessError {
    /// A user name that the system does not know.
    #[error("no user named {0:?} (give a name from the password database or a number)")]
    NoUser(String),
    /// A group name that the system does not know.
    #[error("no group named {0:?} (give a name from the group database or a number)")]
    NoGroup(String),
}

/// Who may open the device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessPolicy {
    /// Users allowed by uid.
    pub users: Vec<Named>,
    /// Groups whose members (primary or supplementary) are allowed.
    pub groups: Vec<Named>,
}

/// The credentials of an application's connection, as the kernel recorded them when it
/// connected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// Its process (in the daemon's pid namespace).
    pub pid: i32,
    /// Its effective user.
    pub uid: u32,
    /// Its effective group.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
    /// When its process started (`/proc/<pid>/stat`, clock ticks since boot), telling the
    /// process apart from a later one given the same pid; `None` when it was not readable.
    pub start_time: Option<u64>,
}

impl Peer {
    /// The peer of the connected socket `sock`. A peer the kernel cannot describe (it
    /// always can for a unix socket) is nobody: uid and gid `u32::MAX`, no groups.
    pub fn of(sock: &impl AsFd) -> Peer {
        let (pid, uid, gid) = sys::peer_credentials(sock).unwrap_or((0, u32::MAX, u32::MAX));
        let groups = sys::peer_groups(sock).unwrap_or_default();
        Peer {
            pid,
            uid,
            gid,
            groups,
            start_time: super::memlock::start_time(pid),
        }
    }
}

impl AccessPolicy {
    /// Every user of the network namespace (the default, like a 0666 device node).
    pub fn everybody() -> AccessPolicy {
        AccessPolicy::default()
    }

    /// A policy allowing `users` and the members of `groups` (names or numbers), with the
    /// names looked up in the system's user and group databases.
    pub fn resolve(users: &[String], groups: &[String]) -> Result<AccessPolicy, AccessError> {
        let users = users
            .iter()
            .map(|u| {
                let id = match u.parse::<u32>() {
                    Ok(id) => id,
                    Err(_) => nix::unistd::User::from_name(u)
                        .ok()
                        .flatten()
                        .ok_or_else(|| AccessError::NoUser(u.clone()))?
                        .uid
                        .as_raw(),
                };
                Ok(Named {
                    id,
                    name: u.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let groups = groups
            .iter()
            .map(|g| {
                let id = match g.parse::<u32>() {
                    Ok(id) => id,
                    Err(_) => nix::unistd::Group::from_name(g)
                        .ok()
                        .flatten()
                        .ok_or_else(|| AccessError::NoGroup(g.clone()))?
                        .gid
                        .as_raw(),
                };
                Ok(Named {
                    id,
                    name: g.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AccessPolicy { users, groups })
    }

    /// Whether it lets every user in.
    pub fn is_open(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    /// Whether `peer` may open the device: everybody under an open policy; otherwise root
    /// (who may open any device file), the named users and the members of the named
    /// groups.
    pub fn admits(&self, peer: &Peer) -> bool {
        self.is_open()
            || peer.uid == 0
            || self.users.iter().any(|u| u.id == peer.uid)
            || self
                .groups
                .iter()
                .any(|g| g.id == peer.gid || peer.groups.contains(&g.id))
    }

    /// Whom it allows, for people: "every user", or "root, the user alice (uid 1001) and
    /// the group rdma (gid 110)".
    pub fn allowed(&self) -> String {
        if self.is_open() {
            return "every user".into();
        }
        let mut parts = vec!["root".to_owned()];
        let list = |one: &str, many: &str, named: &[Named], kind: &str| {
            let labels: Vec<String> = named.iter().map(|n| n.label(kind)).collect();
            let noun = if labels.len() == 1 { one } else { many };
            format!("the {noun} {}", join(&labels))
        };
        if !self.users.is_empty() {
            parts.push(list("user", "users", &self.users, "uid"));
        }
        if !self.groups.is_empty() {
            parts.push(list("group", "groups", &self.groups, "gid"));
        }
        join(&parts)
    }

    /// Checks `peer` against the policy: `EACCES`, as opening a device file the user may
    /// not open fails, naming the user and whom the daemon allows.
    pub fn check(&self, device: &str, peer: &Peer) -> Result<(), Refusal> {
        if self.admits(peer) {
            return Ok(());
        }
        Err(Refusal::new(
            libc::EACCES,
            format!(
                "access to {device} denied for uid {} (the daemon allows {}; xroced's --allow-users and --allow-groups say whom)",
                peer.uid,
                self.allowed()
            ),
        ))
    }
}

/// "a", "a and b", "a, b and c".
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> Peer {
        Peer {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
            start_time: None,
        }
    }

    fn named(id: u32, name: &str) -> Named {
        Named {
            id,
            name: name.into(),
        }
    }

    #[test]
    fn by_default_every_user_may_open_the_device() {
        let p = AccessPolicy::everybody();
        assert!(p.is_open());
        assert!(p.admits(&peer(65534, 65534, &[])));
        assert_eq!(p.check("xroce0", &peer(1000, 1000, &[])), Ok(()));
        assert_eq!(p.allowed(), "every user");
    }

    #[test]
    fn named_users_groups_and_root_may_others_may_not() {
        let p = AccessPolicy {
            users: vec![named(1001, "alice")],
            groups: vec![named(110, "rdma")],
        };
        assert!(p.admits(&peer(1001, 1001, &[])), "a named user");
        assert!(p.admits(&peer(1002, 110, &[])), "the group as primary");
        assert!(
            p.admits(&peer(1003, 1003, &[27, 110])),
            "a supplementary group"
        );
        assert!(p.admits(&peer(0, 0, &[])), "root");
        assert!(!p.admits(&peer(65534, 65534, &[])));
        assert!(!p.admits(&peer(1004, 1004, &[27])));
        let e = p.check("xroce0", &peer(65534, 65534, &[])).unwrap_err();
        assert_eq!(e.errno, libc::EACCES);
        assert_eq!(
            e.message,
            "access to xroce0 denied for uid 65534 (the daemon allows root, the user alice (uid 1001) and the group rdma (gid 110); xroced's --allow-users and --allow-groups say whom)"
        );
    }

    #[test]
    fn whom_it_allows_reads_as_a_sentence() {
        let p = AccessPolicy {
            users: vec![named(1001, "alice"), named(1002, "1002")],
            groups: vec![named(110, "rdma"), named(111, "hpc"), named(112, "db")],
        };
        assert_eq!(
            p.allowed(),
            "root, the users alice (uid 1001) and uid 1002 and the groups rdma (gid 110), hpc (gid 111) and db (gid 112)"
        );
    }

    #[test]
    fn names_and_numbers_resolve_and_unknown_names_are_refused() {
        let p = AccessPolicy::resolve(&["root".into(), "4242".into()], &["0".into()]).unwrap();
        assert_eq!(p.users, vec![named(0, "root"), named(4242, "4242")]);
        assert_eq!(p.groups, vec![named(0, "0")]);
        assert_eq!(
            AccessPolicy::resolve(&["no-such-user-xroce".into()], &[]),
            Err(AccessError::NoUser("no-such-user-xroce".into()))
        );
        assert_eq!(
            AccessPolicy::resolve(&[], &["no-such-group-xroce".into()]),
            Err(AccessError::NoGroup("no-such-group-xroce".into()))
        );
    }
}
