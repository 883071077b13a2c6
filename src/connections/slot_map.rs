//! Which master serves which Redis Cluster slot, as `CLUSTER SLOTS` tells:
//! the subscriber threads listen on every node it names, and the watchdog
//! groups its renewals by master with it, so that a stalled master holds
//! back only its own. Routing stays with the `redis` crate's cluster
//! client; a stale map only groups renewals less well.

use parking_lot::Mutex;
use redis::{ConnectionLike, Value};

use crate::connections::own_conns::OwnConns;
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
/// one node, kept for the next read ([`OwnConns`]: a subscriber asks its
/// own node). A read sent on a pooled cluster connection goes to any
/// node: to a stalled one, it held the pooled connection for a command
/// timeout, and the calls on the other masters waited for one (a new one
/// waits for every node). A node that fails a read is asked last; a read
/// tries at most two nodes (a seed when none is known), so a stalled node
/// costs the reading thread (a subscriber, the watchdog) a command
/// timeout, and the calls nothing.
#[derive(Default)]
pub(crate) struct MapReader {
    /// The connections maps were read on, by node (`None`: a seed).
    conns: OwnConns<Option<Address>, Steady>,
    /// The nodes of the last map read, the one that answered first, those
    /// that failed a read last.
    nodes: Mutex<Vec<Address>>,
}

impl MapReader {
    /// The map, read at `near` if given, else at the first of the nodes
    /// (a seed when none is known: `None`), on a kept connection or one
    /// that `open` makes; after a failure, at the next node.
    pub(crate) fn read(
        &self,
        near: Option<&Address>,
        open: impl Fn(Option<&Address>) -> Result<Steady>,
    ) -> Result<SlotMap> {
        let read_at = |at: Option<Address>| {
            let open = || open(at.as_ref());
            match (self.conns).with(at.clone(), open, |conn| SlotMap::read(conn)) {
                Ok(map) => Ok(self.keep(map, at)),
                Err(err) => Err(self.failed(at, err)),
            }
        };
        let first = near.cloned().or_else(|| self.nodes.lock().first().cloned());
        match read_at(first.clone()) {
            Err(_) if first.is_some() => {
                let next = self.nodes.lock().first().cloned();
                read_at(next.filter(|next| Some(next) != first.as_ref()))
            }
            read => read,
        }
    }

    /// Keeps the map's nodes in their order before, new ones next, `at`
    /// (which answered) first, and connections to those nodes only (none
    /// to a node out of the cluster).
    fn keep(&self, map: SlotMap, at: Option<Address>) -> SlotMap {
        let mut nodes = self.nodes.lock();
        let before = std::mem::take(&mut *nodes);
        for node in at.iter().chain(&before).chain(&map.nodes) {
            if map.nodes.contains(node) && !nodes.contains(node) {
                nodes.push(node.clone());
            }
        }
        (self.conns).retain(|node| node.as_ref().is_none_or(|node| map.nodes.contains(node)));
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
