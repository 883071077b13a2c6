//! The messages the scripts publish on a client's wake channel
//! (`<prefix>:wake:<client id>`), and the one a client sends itself.

/// One wake message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeMessage {
    /// `G <wait id> <token> <ttl ms>`: the lock was handed to that call.
    Granted {
        wait_id: u64,
        token: u64,
        ttl_ms: u64,
    },
    /// `H <wait id> <pttl ms>`: that call heads the queue; the lock's lease
    /// runs out in `pttl_ms` (negative: no lease to wait for).
    Head { wait_id: u64, pttl_ms: i64 },
    /// `S`: the client is stopping (sent by the client to its subscriber).
    Stop,
}

impl WakeMessage {
    /// The stop message's payload.
    pub const STOP: &'static str = "S";

    /// Parses a payload; `None` for anything else.
    pub fn parse(payload: &[u8]) -> Option<WakeMessage> {
        let text = std::str::from_utf8(payload).ok()?;
        let mut fields = text.split(' ');
        let kind = fields.next()?;
        let numbers: Vec<i64> = fields.map(str::parse).collect::<Result<_, _>>().ok()?;
        match (kind, numbers.as_slice()) {
            ("G", &[wait_id, token, ttl_ms]) => Some(WakeMessage::Granted {
                wait_id: u64::try_from(wait_id).ok()?,
                token: u64::try_from(token).ok()?,
                ttl_ms: u64::try_from(ttl_ms).unwrap_or(0),
            }),
            ("H", &[wait_id, pttl_ms]) => Some(WakeMessage::Head {
                wait_id: u64::try_from(wait_id).ok()?,
                pttl_ms,
            }),
            ("S", []) => Some(WakeMessage::Stop),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_the_scripts_send_parses() {
        assert_eq!(
            WakeMessage::parse(b"G 7 1795377959667025 600"),
            Some(WakeMessage::Granted {
                wait_id: 7,
                token: 1_795_377_959_667_025,
                ttl_ms: 600
            })
        );
        assert_eq!(
            WakeMessage::parse(b"H 7 -1"),
            Some(WakeMessage::Head {
                wait_id: 7,
                pttl_ms: -1
            })
        );
        assert_eq!(
            WakeMessage::parse(WakeMessage::STOP.as_bytes()),
            Some(WakeMessage::Stop)
        );
    }

    #[test]
    fn anything_else_is_ignored() {
        for junk in [&b""[..], b"G 1 2", b"G a b c", b"X 1", b"H -3 5", b"\xff"] {
            assert_eq!(WakeMessage::parse(junk), None, "{junk:?}");
        }
    }
}
