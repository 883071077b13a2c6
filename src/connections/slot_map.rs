//! Which master serves which Redis Cluster slot, as `CLUSTER SLOTS` tells:
//! the subscriber threads listen on every node it names, and the watchdog
//! groups its renewals by master with it, so that a stalled master holds
//! back only its own. Routing stays with the `redis` crate's cluster
//! client; a stale map only groups renewals less well.

use redis::{ConnectionLike, Value};

use crate::error::Result;
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

/// The first two fields of a `CLUSTER SLOTS` entry, as a pair (a range's
/// first and last slot, a node's host and port).
fn first_two<T: redis::FromRedisValue>(fields: &[Value]) -> Option<T> {
    redis::from_redis_value(Value::Array(fields.get(..2)?.to_vec())).ok()
}
