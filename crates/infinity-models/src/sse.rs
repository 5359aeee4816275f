//! A Server-Sent Events reader: bytes in (split anywhere), events out.

/// One event: its `event:` name (if any) and its `data:` lines joined by newlines.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The event name.
    pub event: Option<String>,
    /// The data.
    pub data: String,
}

/// Accumulates chunks and yields complete events.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    event: Option<String>,
    data: Vec<String>,
}

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if line.is_empty() {
                if !self.data.is_empty() || self.event.is_some() {
                    events.push(SseEvent {
                        event: self.event.take(),
                        data: std::mem::take(&mut self.data).join("\n"),
                    });
                }
                continue;
            }
            if line.starts_with(':') {
                continue; // a comment
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            match field {
                "event" => self.event = Some(value.to_owned()),
                "data" => self.data.push(value.to_owned()),
                _ => {}
            }
        }
        events
    }

    /// Ends the stream: an event not followed by a blank line still counts.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut tail = self.push(b"\n\n");
        tail.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_at_awkward_places() {
        let text = b"event: message_start\r\ndata: {\"a\":\n\n: ping\ndata: 1\ndata: 2\n\nevent: x\ndata: tail";
        for cut in 0..text.len() {
            let mut p = SseParser::new();
            let mut events = p.push(&text[..cut]);
            events.extend(p.push(&text[cut..]));
            events.extend(p.finish());
            assert_eq!(
                events,
                vec![
                    SseEvent {
                        event: Some("message_start".into()),
                        data: "{\"a\":".into()
                    },
                    SseEvent {
                        event: None,
                        data: "1\n2".into()
                    },
                    SseEvent {
                        event: Some("x".into()),
                        data: "tail".into()
                    },
                ],
                "cut at {cut}"
            );
        }
    }
}

#[cfg(test)]
mod fuzz {
    //! Streams cut anywhere and damaged: the parser never panics, and the same bytes give the
    //! same events however they are split into chunks.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use infinity_agent_core::testing::{cases, mutated, noise};
    use proptest::prelude::*;

    const STREAMS: &[&str] = &[
        "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: content_block_delta\ndata: {\"delta\":{\"text\":\"hi\"}}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n: keep-alive\r\ndata: [DONE]\r\n\r\n",
    ];

    fn events(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(parser.push(chunk));
        }
        out.extend(parser.finish());
        out
    }

    proptest! {
        #![proptest_config(cases(2000))]

        #[test]
        fn streams(bytes in prop_oneof![mutated(STREAMS), noise(400)], cut in any::<usize>()) {
            let cut = cut % (bytes.len() + 1);
            let whole = events(&[&bytes]);
            let split = events(&[&bytes[..cut], &bytes[cut..]]);
            prop_assert_eq!(whole, split);
        }
    }
}
