//! Where a client resumes a stream, and how the server knows that what the client holds is what
//! the store keeps.
//!
//! A kept event's SSE id is its number, `N`: it was committed before it was sent, and its number
//! holds. An event shown before its slice committed (the embedded runtime streams a slice's
//! events as they happen) may still change: a process killed before the commit runs the slice
//! again, and its events may come out otherwise under the same numbers. Such an event's id is
//! `N.B.D`: `B` the last kept event before the slice's first one the client was shown, `D` a
//! digest of every event after `B` up to `N` as the client got them ([`Chain`]). A client that
//! resumes with it is checked: when the events after `B` up to `N` (kept now, or still shown by
//! the running slice) digest to `D`, it resumes after `N`; otherwise it is told to forget what
//! it has after `B` (`withdrawn`) and gets everything after `B` again. So a client ends with
//! exactly what the store keeps, whenever it was cut off and whatever ran meanwhile.

use axum::http::StatusCode;
use infinity_agent_core::effect::OutputEvent;

use crate::api::{error, ApiError};

/// The most events one `N.B.D` id may cover (a slice shows far fewer; a longer one is not ours).
const MAX_SHOWN: u64 = 10_000;

/// Where a client resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resume {
    /// After the kept event `N`.
    After(u64),
    /// After an event it was shown before its slice committed (see the module docs).
    Shown {
        /// The event's number.
        seq: u64,
        /// The last kept event before those the digest covers.
        base: u64,
        /// The events after `base` up to `seq`, as the client got them.
        digest: u64,
    },
}

impl Resume {
    /// The id as a client sends it back (`Last-Event-ID`, `?after=`), or a 400 naming `from`.
    pub(super) fn parse(raw: &str, from: &str) -> Result<Self, ApiError> {
        let bad = || {
            error(
                StatusCode::BAD_REQUEST,
                format!(
                    "{from} must be an event id as the stream sends them (a whole number, or \
                     N.B.D for an event shown before it was kept), not `{}`",
                    raw.chars().take(80).collect::<String>()
                ),
            )
        };
        let parts: Vec<&str> = raw.trim().split('.').collect();
        let number = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        match parts.as_slice() {
            [n] => number(n).map(Resume::After).ok_or_else(bad),
            [n, b, d] if d.len() == 16 => {
                let (Some(seq), Some(base)) = (number(n), number(b)) else {
                    return Err(bad());
                };
                let digest = u64::from_str_radix(d, 16).map_err(|_| bad())?;
                if base >= seq || seq - base > MAX_SHOWN {
                    return Err(bad());
                }
                Ok(Resume::Shown { seq, base, digest })
            }
            _ => Err(bad()),
        }
    }

    /// The number it resumes after, if its events are what the store keeps.
    pub(super) fn seq(self) -> u64 {
        match self {
            Resume::After(seq) | Resume::Shown { seq, .. } => seq,
        }
    }
}

/// The events a stream sent past the last kept one, as one running digest (64-bit FNV-1a over
/// each event's JSON as sent, with a separator): what an `N.B.D` id carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Chain {
    /// The last kept event before the first one it covers.
    pub(super) base: u64,
    /// The digest of the events it covers.
    pub(super) digest: u64,
}

impl Chain {
    /// A chain that covers nothing yet, after `base`.
    pub(super) fn after(base: u64) -> Self {
        Self {
            base,
            digest: 0xcbf2_9ce4_8422_2325,
        }
    }

    /// Adds an event, as `json` (the SSE `data` sent).
    pub(super) fn add(&mut self, json: &str) {
        for byte in json.bytes().chain(std::iter::once(0xff)) {
            self.digest ^= u64::from(byte);
            self.digest = self.digest.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The SSE id of event `seq`, the last one added.
    pub(super) fn id(&self, seq: u64) -> String {
        format!("{seq}.{}.{:016x}", self.base, self.digest)
    }

    /// The chain over `events` after `base`, when they are exactly the events `base + 1 ..=
    /// upto` (in order, none missing).
    pub(super) fn over(base: u64, upto: u64, events: &[OutputEvent]) -> Option<Self> {
        let mut chain = Self::after(base);
        let mut expected = base + 1;
        for event in events {
            if event.seq != Some(expected) {
                return None;
            }
            chain.add(&serde_json::to_string(event).ok()?);
            expected += 1;
        }
        (expected == upto + 1).then_some(chain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infinity_agent_core::effect::OutputKind;
    use infinity_agent_core::ids::ThreadId;

    fn event(seq: u64, text: &str) -> OutputEvent {
        OutputEvent {
            seq: Some(seq),
            ..OutputEvent::new(
                ThreadId::new("t").unwrap(),
                jiff::Timestamp::UNIX_EPOCH,
                OutputKind::AssistantText { text: text.into() },
            )
        }
    }

    #[test]
    fn ids_read_back_as_they_are_written() {
        let mut chain = Chain::after(4);
        chain.add(&serde_json::to_string(&event(5, "a")).unwrap());
        chain.add(&serde_json::to_string(&event(6, "b")).unwrap());
        let id = chain.id(6);
        assert_eq!(
            Resume::parse(&id, "x").unwrap(),
            Resume::Shown {
                seq: 6,
                base: 4,
                digest: chain.digest
            }
        );
        assert_eq!(Resume::parse("17", "x").unwrap(), Resume::After(17));
        assert_eq!(
            Chain::over(4, 6, &[event(5, "a"), event(6, "b")]),
            Some(chain)
        );
    }

    #[test]
    fn other_events_under_the_same_numbers_do_not_match() {
        let mine = Chain::over(4, 6, &[event(5, "a"), event(6, "b")]).unwrap();
        let kept = Chain::over(4, 6, &[event(5, "a"), event(6, "c")]).unwrap();
        assert_ne!(mine, kept);
        // Fewer, more or other numbers than the id covers: no chain at all.
        assert_eq!(Chain::over(4, 6, &[event(5, "a")]), None);
        assert_eq!(Chain::over(4, 6, &[event(5, "a"), event(7, "b")]), None);
    }

    #[test]
    fn a_malformed_id_is_refused_naming_it() {
        for raw in [
            "",
            "x",
            "-1",
            "5.4",
            "5.6.0011223344556677",
            "5.4.zz",
            "1.0.00",
            "99999.1.0011223344556677",
        ] {
            let Err(err) = Resume::parse(raw, "`Last-Event-ID`") else {
                panic!("{raw} was taken");
            };
            assert!(
                err.1.contains("`Last-Event-ID` must be an event id"),
                "{}",
                err.1
            );
        }
    }
}
