//! The platform's own address range for internal networks: a pool (default `10.213.0.0/16`)
//! cut into small subnets (default `/28`: 4096 of them, 13 addresses each besides the gateway),
//! handed out without collisions among this process's concurrent trials, and across processes
//! by skipping what the engine already has (a listing, and the engine's "pool overlaps" refusal).
//!
//! Docker's default address pools hold ~31 networks on a stock engine; explicit subnets from
//! this pool never touch them, so other users of the engine keep their pools.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;
use std::sync::Mutex;

use crate::SandboxError;

/// A range of IPv4 addresses cut into equal subnets for per-trial networks.
///
/// Written `A.B.C.D/N` (subnets of `/28`) or `A.B.C.D/N:M` (subnets of `/M`), e.g.
/// `10.213.0.0/16` or `172.30.0.0/20:29`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubnetPool {
    base: u32,
    prefix: u8,
    subnet_prefix: u8,
}

impl SubnetPool {
    /// The default subnet size: `/28` (14 usable addresses: the gateway and 13 containers).
    pub const DEFAULT_SUBNET_PREFIX: u8 = 28;

    /// A pool of `/subnet_prefix` subnets of `base/prefix`.
    pub fn new(base: Ipv4Addr, prefix: u8, subnet_prefix: u8) -> Result<Self, SandboxError> {
        let bad = |why: String| SandboxError::InvalidSpec(format!("subnet pool: {why}"));
        if !(8..=30).contains(&prefix) {
            return Err(bad(format!(
                "the pool's prefix /{prefix} must be between /8 and /30"
            )));
        }
        if !(prefix..=29).contains(&subnet_prefix) {
            return Err(bad(format!(
                "subnets of /{subnet_prefix} must be between the pool's /{prefix} and /29"
            )));
        }
        let base = u32::from(base);
        let mask = u32::MAX << (32 - prefix);
        if base & !mask != 0 {
            return Err(bad(format!(
                "{}/{prefix} is not a network address (host bits set)",
                Ipv4Addr::from(base)
            )));
        }
        Ok(Self {
            base,
            prefix,
            subnet_prefix,
        })
    }

    /// How many subnets the pool holds.
    pub fn len(&self) -> u32 {
        1u32 << (self.subnet_prefix - self.prefix)
    }

    /// Never: a pool holds at least one subnet.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `i`-th subnet as `(network address, gateway)`; the gateway is the first host.
    pub(crate) fn subnet(&self, i: u32) -> (Ipv4Addr, Ipv4Addr) {
        let size = 1u32 << (32 - self.subnet_prefix);
        let net = self.base + i * size;
        (Ipv4Addr::from(net), Ipv4Addr::from(net + 1))
    }

    /// The `i`-th subnet in CIDR notation.
    pub(crate) fn cidr(&self, i: u32) -> String {
        format!("{}/{}", self.subnet(i).0, self.subnet_prefix)
    }

    /// The indexes of the pool's subnets that overlap `net/prefix`.
    fn overlapping(&self, net: u32, prefix: u8) -> std::ops::Range<u32> {
        let lo = net & (u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0));
        let hi = lo | (u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0));
        let pool_hi = self.base | (u32::MAX.checked_shr(u32::from(self.prefix)).unwrap_or(0));
        if hi < self.base || lo > pool_hi {
            return 0..0;
        }
        let shift = 32 - u32::from(self.subnet_prefix);
        let first = (lo.max(self.base) - self.base) >> shift;
        let last = (hi.min(pool_hi) - self.base) >> shift;
        first..last + 1
    }
}

impl Default for SubnetPool {
    fn default() -> Self {
        Self {
            base: u32::from(Ipv4Addr::new(10, 213, 0, 0)),
            prefix: 16,
            subnet_prefix: Self::DEFAULT_SUBNET_PREFIX,
        }
    }
}

impl fmt::Display for SubnetPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}:{}",
            Ipv4Addr::from(self.base),
            self.prefix,
            self.subnet_prefix
        )
    }
}

/// Parses `A.B.C.D/N` into `(address, prefix)`.
fn parse_cidr(text: &str) -> Option<(Ipv4Addr, u8)> {
    let (addr, prefix) = text.trim().split_once('/')?;
    Some((
        addr.parse().ok()?,
        prefix.parse().ok().filter(|p| *p <= 32)?,
    ))
}

impl FromStr for SubnetPool {
    type Err = SandboxError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (cidr, sub) = match s.split_once(':') {
            Some((cidr, sub)) => (cidr, Some(sub.trim_start_matches('/'))),
            None => (s, None),
        };
        let Some((base, prefix)) = parse_cidr(cidr) else {
            return Err(SandboxError::InvalidSpec(format!(
                "subnet pool `{s}` is not `A.B.C.D/N` or `A.B.C.D/N:M` (e.g. `10.213.0.0/16`)"
            )));
        };
        let subnet_prefix = match sub {
            None => Self::DEFAULT_SUBNET_PREFIX,
            Some(m) => m.parse().map_err(|_| {
                SandboxError::InvalidSpec(format!(
                    "subnet pool `{s}`: the subnet size after `:` must be a prefix length like 28"
                ))
            })?,
        };
        Self::new(base, prefix, subnet_prefix)
    }
}

/// Hands out a pool's subnets to this process's networks.
#[derive(Debug)]
pub(crate) struct SubnetAllocator {
    pool: SubnetPool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Reserved for a network being created.
    pending: HashSet<u32>,
    /// Held by a network this process created: index → network id.
    bound: HashMap<u32, String>,
    /// Overlapping a network the engine already has (another process's, or anyone's).
    foreign: HashSet<u32>,
    /// Where the next scan starts.
    next: u32,
    /// The engine's networks have been listed at least once.
    listed: bool,
}

impl State {
    fn free(&self, i: u32) -> bool {
        !self.pending.contains(&i) && !self.bound.contains_key(&i) && !self.foreign.contains(&i)
    }
}

/// Counts for an exhaustion message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolUse {
    pub(crate) ours: usize,
    pub(crate) foreign: usize,
}

impl SubnetAllocator {
    pub(crate) fn new(pool: SubnetPool) -> Self {
        // Processes start their scans at different places, so concurrent runs rarely collide.
        let (pid, start) = crate::objects::owner_identity();
        let next = (pid.wrapping_mul(2_654_435_761) ^ start as u32) % pool.len();
        Self {
            pool,
            state: Mutex::new(State {
                next,
                ..State::default()
            }),
        }
    }

    pub(crate) fn pool(&self) -> SubnetPool {
        self.pool
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn needs_listing(&self) -> bool {
        !self.lock().listed
    }

    /// Replaces what is known about the engine's networks: `(id, subnets)` of each.
    pub(crate) fn learn(&self, networks: &[(String, Vec<String>)]) {
        let mut st = self.lock();
        let ours: HashSet<&String> = st.bound.values().collect();
        let mut foreign = HashSet::new();
        for (id, subnets) in networks {
            if ours.contains(id) {
                continue;
            }
            for s in subnets {
                if let Some((addr, prefix)) = parse_cidr(s) {
                    foreign.extend(self.pool.overlapping(u32::from(addr), prefix));
                }
            }
        }
        st.foreign = foreign;
        st.listed = true;
    }

    /// Reserves a free subnet; `None` when every subnet is taken.
    pub(crate) fn reserve(&self) -> Option<u32> {
        let mut st = self.lock();
        let n = self.pool.len();
        let found = (0..n).map(|k| (st.next + k) % n).find(|&i| st.free(i))?;
        st.pending.insert(found);
        st.next = (found + 1) % n;
        Some(found)
    }

    /// The engine refused subnet `i` as overlapping: someone else holds it.
    pub(crate) fn taken_elsewhere(&self, i: u32) {
        let mut st = self.lock();
        st.pending.remove(&i);
        st.foreign.insert(i);
    }

    /// Gives back a reservation that did not become a network.
    pub(crate) fn cancel(&self, i: u32) {
        self.lock().pending.remove(&i);
    }

    /// Subnet `i` now belongs to network `id`.
    pub(crate) fn bind(&self, i: u32, id: &str) {
        let mut st = self.lock();
        st.pending.remove(&i);
        st.bound.insert(i, id.to_string());
    }

    /// Network `id` is gone: its subnet is free again.
    pub(crate) fn release(&self, id: &str) {
        let mut st = self.lock();
        st.bound
            .retain(|_, v| v != id && !id.starts_with(v.as_str()));
    }

    pub(crate) fn usage(&self) -> PoolUse {
        let st = self.lock();
        PoolUse {
            ours: st.bound.len() + st.pending.len(),
            foreign: st.foreign.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_cuts_the_pool() {
        let p: SubnetPool = "10.213.0.0/16".parse().expect("pool");
        assert_eq!(p.len(), 4096);
        assert_eq!(p.cidr(0), "10.213.0.0/28");
        assert_eq!(p.subnet(1).1, Ipv4Addr::new(10, 213, 0, 17));
        assert_eq!(p.cidr(4095), "10.213.255.240/28");
        let q: SubnetPool = "172.30.0.0/20:29".parse().expect("pool");
        assert_eq!(q.len(), 512);
        assert_eq!(q.to_string(), "172.30.0.0/20:29");
        for bad in [
            "10.213.0.1/16",
            "10.0.0.0",
            "10.0.0.0/16:12",
            "x/16",
            "10.0.0.0/16:31",
        ] {
            assert!(bad.parse::<SubnetPool>().is_err(), "{bad}");
        }
    }

    #[test]
    fn overlaps_are_computed_both_ways() {
        let p: SubnetPool = "10.213.0.0/16".parse().expect("pool");
        assert_eq!(
            p.overlapping(u32::from(Ipv4Addr::new(10, 0, 0, 0)), 8),
            0..4096
        );
        assert_eq!(
            p.overlapping(u32::from(Ipv4Addr::new(10, 213, 0, 16)), 28),
            1..2
        );
        assert_eq!(
            p.overlapping(u32::from(Ipv4Addr::new(10, 213, 1, 0)), 24),
            16..32
        );
        assert_eq!(
            p.overlapping(u32::from(Ipv4Addr::new(172, 17, 0, 0)), 16),
            0..0
        );
    }

    #[test]
    fn reservations_never_collide_and_skip_foreign_networks() {
        let a = SubnetAllocator::new("10.9.0.0/24:28".parse().expect("pool"));
        a.learn(&[("other".into(), vec!["10.9.0.0/26".into()])]);
        let mut got = HashSet::new();
        while let Some(i) = a.reserve() {
            assert!(got.insert(i), "{i} handed out twice");
            a.bind(i, &format!("net{i}"));
        }
        assert_eq!(got, (4..16).collect());
        a.release("net7");
        assert_eq!(a.reserve(), Some(7));
        a.taken_elsewhere(7);
        assert_eq!(a.reserve(), None);
        assert_eq!(a.usage().foreign, 5);
    }
}
