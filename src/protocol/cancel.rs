//! `cancel.lua`: a waiting call gives up and leaves the queue.

use std::time::Duration;

use redis::Value;

use crate::error::Result;
use crate::protocol::operation::{int_list, ms, unexpected, Operation, Script};

/// Call `wait_id` of `owner` leaves the queue; if the lock was handed to
/// it meanwhile, it keeps it (with `lease`, extended unless `fixed`).
pub struct Cancel<'a> {
    pub owner: &'a str,
    pub lease: Duration,
    pub fixed: bool,
    pub wait_id: u64,
}

/// What leaving the queue came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReply {
    /// The lock had been handed to this call: it holds it.
    Kept { token: u64, pttl_ms: i64 },
    /// The call left the queue (or was not in it).
    Left,
}

impl Operation for Cancel<'_> {
    type Reply = CancelReply;
    const SCRIPT: Script = Script::Cancel;

    fn args(&self) -> Vec<String> {
        vec![
            self.owner.to_owned(),
            ms(self.lease),
            if self.fixed { "1" } else { "0" }.to_owned(),
            self.wait_id.to_string(),
        ]
    }

    fn parse(&self, reply: Value) -> Result<CancelReply> {
        let items = int_list(reply)?;
        match items.as_slice() {
            [1, token, pttl] => Ok(CancelReply::Kept {
                token: *token as u64,
                pttl_ms: *pttl,
            }),
            [0] => Ok(CancelReply::Left),
            _ => Err(unexpected(&items)),
        }
    }
}
