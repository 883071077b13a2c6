//! Which master serves which Redis Cluster slot, as `CLUSTER SLOTS` tells:
//! the subscriber threads listen on every node it names, and the watchdog
//! groups its renewals by master with it, so that a stalled master holds
//! back only its own. Routing stays with the `redis` crate's cluster
//! client; a stale map only groups renewals less well.

use parking_lot::Mutex;
use redis::{ConnectionLike, Value};

use crate::connections::steady::Steady;
use crate::error::{Error, Result};
use crate::protocol::unexpected;

/// A node's address: host and port.
pub(crate) type Address = (String, u16);

/// The slot ranges of a cluster and the nodes that serve them.
#[derive(Debug, Default)]
pub(crate) struct SlotMap {
    /// Every node named (masters and replicas), each once.
    nodes: Vec<Address>,
    /// (first slot, last slot, index of the master in `nodes`).
    ranges: Vec<(u16, u16, usize)>,
}

impl SlotMap {
    /// Reads the map with `CLUSTER SLOTS` on `conn`.
    pub(crate) fn read(conn: &mut dyn ConnectionLike) -> Result<SlotMap> {
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(conn)
            .map_err(crate::Error::from_redis)?;
        SlotMap::parse(slots)
    }

    pub(crate) fn parse(slots: Value) -> Result<SlotMap> {
        let Value::Array(ranges) = slots else {
            return Err(unexpected(&slots));
        };
        let mut map = SlotMap::default();
        for fields in ranges.iter().filter_map(Value::as_sequence) {
            let bounds: Option<(u16, u16)> = first_two(fields);
            let mut master = None;
            for node in fields.iter().skip(2) {
                let address: Option<Address> = node.as_sequence().and_then(first_two);
                let Some(address) = address.filter(|(host, _)| !host.is_empty()) else {
                    continue;
                };
                let index = map.nodes.iter().position(|known| *known == address);
                let index = index.unwrap_or_else(|| {
                    map.nodes.push(address);
                    map.nodes.len() - 1
                });
                master.get_or_insert(index);
            }
            if let (Some((first, last)), Some(master)) = (bounds, master) {
                map.ranges.push((first, last, master));
            }
        }
        Ok(map)
    }

    /// Every node the map names.
    pub(crate) fn nodes(&self) -> &[Address] {
        &self.nodes
    }

    /// Each range of slots with its master.
    pub(crate) fn masters(&self) -> Vec<(u16, u16, &Address)> {
        let ranges = self.ranges.iter();
        ranges
            .map(|&(first, last, at)| (first, last, &self.nodes[at]))
            .collect()
    }

    /// The master serving `slot`, if the map knows it.
    pub(crate) fn master_of(&self, slot: u16) -> Option<&Address> {
        self.ranges
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|&(_, _, master)| &self.nodes[master])
    }
}

/// Reads the slot map off the pool, on a plain connection of its own to
/// one node, kept for the next read (one per node at most: a subscriber
/// asks its own). A read sent on a pooled cluster
/// connection goes to any node: to a stalled one, it held the pooled
/// connection for a command timeout, and the calls on the other masters
/// waited for one (a new one waits for every node). A connection that
/// fails a read is dropped and its node tried last; a read tries at most
/// two connections (the last one a seed's), so a stalled node costs the
/// reading thread (a subscriber, the watchdog) a command timeout, and the
/// calls nothing.
#[derive(Default)]
pub(crate) struct MapReader {
    /// The connections maps were read on, each with its node (`None`: a
    /// seed); taken out for a read, so that readers never wait for each
    /// other (one that finds none opens its own).
    kept: Mutex<Vec<(Option<Address>, Steady)>>,
    /// The nodes of the last map read, the one that answered first, those
    /// that failed a read last.
    nodes: Mutex<Vec<Address>>,
}

impl MapReader {
    /// The map, read on a kept connection (to `near`, when given),
    /// else on one that `open` makes to `near`, else to the first of the
    /// nodes, else to any seed (`None`).
    pub(crate) fn read(
        &self,
        near: Option<&Address>,
        open: impl Fn(Option<&Address>) -> Result<Steady>,
    ) -> Result<SlotMap> {
        let read = |at: Option<Address>, conn: Result<Steady>| match conn
            .and_then(|mut conn| SlotMap::read(&mut conn).map(|map| (map, conn)))
        {
            Ok((map, conn)) => Ok(self.keep(map, at, conn)),
            Err(err) => Err(self.failed(at, err)),
        };
        let kept = {
            let mut kept = self.kept.lock();
            let fits = kept
                .iter()
                .position(|(at, _)| near.is_none() || at.as_ref() == near);
            fits.map(|at| kept.swap_remove(at))
        };
        // Two tries at most: the kept connection or one to `near`, the
        // first node (read after a failure: that node went last), a seed.
        let mut tries = 2;
        let mut failed = None;
        let first_try = match (kept, near) {
            (Some((at, conn)), _) => Some((at, Ok(conn))),
            (None, Some(node)) => Some((Some(node.clone()), open(Some(node)))),
            (None, None) => None,
        };
        if let Some((at, conn)) = first_try {
            tries -= 1;
            match read(at, conn) {
                Ok(map) => return Ok(map),
                Err(err) => failed = Some(err),
            }
        }
        let first = self.nodes.lock().first().cloned();
        if let Some(node) = first {
            tries -= 1;
            match read(Some(node.clone()), open(Some(&node))) {
                Ok(map) => return Ok(map),
                Err(err) => failed = Some(err),
            }
        }
        match failed {
            Some(err) if tries == 0 => Err(err),
            _ => read(None, open(None)),
        }
    }

    /// Keeps `conn` (unless another reader kept one to `at` meanwhile, or
    /// the map names no node: a node out of the cluster), none to a node
    /// the map does not name, and the map's nodes in their order before,
    /// new ones next, `at` first.
    fn keep(&self, map: SlotMap, at: Option<Address>, conn: Steady) -> SlotMap {
        let mut nodes = self.nodes.lock();
        nodes.retain(|node| map.nodes.contains(node) && Some(node) != at.as_ref());
        let new: Vec<Address> = (map.nodes.iter())
            .filter(|node| !nodes.contains(node) && Some(*node) != at.as_ref())
            .cloned()
            .collect();
        nodes.extend(new);
        if let Some(at) = at.clone().filter(|at| map.nodes.contains(at)) {
            nodes.insert(0, at);
        }
        let mut kept = self.kept.lock();
        kept.retain(|(at, _)| at.as_ref().is_none_or(|at| map.nodes.contains(at)));
        if !map.nodes.is_empty() && kept.iter().all(|(kept, _)| *kept != at) {
            kept.push((at, conn));
        }
        map
    }

    /// `at`, which failed a read with `err`, goes last.
    fn failed(&self, at: Option<Address>, err: Error) -> Error {
        if let Some(at) = at {
            let mut nodes = self.nodes.lock();
            nodes.retain(|node| *node != at);
            nodes.push(at);
        }
        err
    }
}

/// The first two fields of a `CLUSTER SLOTS` entry, as a pair (a range's
/// first and last slot, a node's host and port).
fn first_two<T: redis::FromRedisValue>(fields: &[Value]) -> Option<T> {
    redis::from_redis_value(Value::Array(fields.get(..2)?.to_vec())).ok()
}
