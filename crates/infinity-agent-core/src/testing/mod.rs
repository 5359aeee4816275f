//! Test utilities (feature `test-util`): inputs for fuzzing the parsers on the input path, and
//! a harness around the embedded runtime for behaviour tests ([`harness`]).
//!
//! [`mutated`] starts from valid samples and damages them the ways real input is damaged
//! (truncated, a byte flipped, a structural character inserted or lost, a piece repeated or
//! spliced from another sample), so a parser is exercised near its grammar rather than only on
//! noise; [`noise`] is arbitrary bytes.

pub mod harness;
#[cfg(feature = "test-otlp")]
pub mod otlp;

/// The process's resident set, in bytes (from /proc/self/statm; 0 where there is none), for
/// the bench targets' memory figures.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The runtime the bench targets run on: two workers, as on the machines they are measured on.
pub fn bench_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

use proptest::prelude::*;

/// One change to a sample.
#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, bits: u8 },
    Insert { at: usize, byte: u8 },
    Delete { at: usize, len: usize },
    Repeat { at: usize, len: usize },
    Truncate { at: usize },
    Splice { at: usize, from: usize, len: usize },
}

/// Bytes that matter to the grammars we parse (JSON, YAML, lines, ids).
const INTERESTING: &[u8] = b"\"{}[],:\\\n\r\t #-'|>&*!%@`\x00\xff\x7f";

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![any::<u8>(), proptest::sample::select(INTERESTING)];
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, bits)| Mutation::Flip { at, bits }),
        (any::<usize>(), byte).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        (any::<usize>(), 1usize..16).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 1usize..64).prop_map(|(at, len)| Mutation::Repeat { at, len }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<usize>(), 1usize..64).prop_map(|(at, from, len)| Mutation::Splice {
            at,
            from,
            len
        }),
    ]
}

fn apply(mut bytes: Vec<u8>, donor: &[u8], m: &Mutation) -> Vec<u8> {
    let n = bytes.len();
    let pos = |at: usize| if n == 0 { 0 } else { at % (n + 1) };
    match *m {
        Mutation::Flip { at, bits } if n > 0 => bytes[at % n] ^= bits,
        Mutation::Flip { .. } => {}
        Mutation::Insert { at, byte } => bytes.insert(pos(at), byte),
        Mutation::Delete { at, len } => {
            let start = pos(at);
            let end = (start + len).min(n);
            bytes.drain(start..end);
        }
        Mutation::Repeat { at, len } => {
            let start = pos(at);
            let end = (start + len).min(n);
            let piece = bytes[start..end].to_vec();
            bytes.splice(end..end, piece);
        }
        Mutation::Truncate { at } => bytes.truncate(pos(at)),
        Mutation::Splice { at, from, len } if !donor.is_empty() => {
            let start = from % donor.len();
            let end = (start + len).min(donor.len());
            let at = pos(at);
            bytes.splice(at..at, donor[start..end].iter().copied());
        }
        Mutation::Splice { .. } => {}
    }
    bytes
}

/// Valid `samples`, each damaged by up to eight mutations (none, sometimes: the samples must
/// parse too).
pub fn mutated(samples: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let count = samples.len().max(1);
    (
        0..count,
        0..count,
        proptest::collection::vec(mutation(), 0..8),
    )
        .prop_map(move |(which, donor, mutations)| {
            let sample = samples.get(which).map_or(&[][..], |s| s.as_bytes());
            let donor = samples.get(donor).map_or(&[][..], |s| s.as_bytes());
            mutations
                .iter()
                .fold(sample.to_vec(), |bytes, m| apply(bytes, donor, m))
        })
}

/// Arbitrary bytes, up to `max` of them.
pub fn noise(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// The test configuration: `default` cases, or `PROPTEST_CASES` when set (for longer runs).
pub fn cases(default: u32) -> ProptestConfig {
    ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// A tool run elsewhere, as a tool server's would be: a call dispatches (with no server named,
/// so a host's dispatcher decides where it goes) and its result arrives later as an input.
#[derive(Debug)]
pub struct DispatchedTool(pub &'static str);

impl crate::tools::Tool for DispatchedTool {
    fn spec(&self) -> crate::model::ToolSpec {
        crate::model::ToolSpec::new(
            self.0,
            "A tool that runs elsewhere.",
            serde_json::json!({
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "additionalProperties": false
            }),
        )
    }

    fn call(
        &self,
        args: &serde_json::Value,
        ctx: &mut crate::tools::ToolContext<'_>,
    ) -> crate::tools::ToolOutcome {
        let invocation = crate::effect::ToolInvocation {
            thread_id: ctx.record.id.clone(),
            lineage: ctx.record.lineage.clone(),
            call_id: ctx.call.id.clone(),
            tool: self.0.to_owned(),
            args: args.clone(),
            server: None,
            notify_key: None,
        };
        ctx.emit(crate::effect::Effect::Dispatch { invocation });
        crate::tools::ToolOutcome::Dispatched
    }
}

/// A host that died right after its commit: every effect fails, so all of them stay in the
/// outbox (to test what a restart does with them).
#[derive(Debug, Default)]
pub struct DeadHost;

fn died(input: &crate::input::Input) -> crate::host::SendError {
    crate::host::SendError {
        input_id: input.id.clone(),
        thread_id: input.thread_id.clone(),
        reason: "the host died".into(),
    }
}

#[async_trait::async_trait]
impl crate::host::EffectPerformer for DeadHost {
    async fn send(
        &self,
        input: &crate::input::Input,
        _: &crate::host::EffectRef,
    ) -> Result<crate::host::Handoff, crate::host::SendError> {
        Err(died(input))
    }

    async fn send_at(
        &self,
        input: &crate::input::Input,
        _: jiff::Timestamp,
        _: &crate::host::EffectRef,
    ) -> Result<crate::host::Handoff, crate::host::SendError> {
        Err(died(input))
    }

    async fn dispatch(
        &self,
        _: &crate::effect::ToolInvocation,
    ) -> Result<(), crate::host::DispatchError> {
        Err(crate::host::DispatchError::Refused("the host died".into()))
    }

    async fn output(
        &self,
        events: &[&crate::effect::OutputEvent],
    ) -> Result<(), crate::host::OutputError> {
        Err(crate::host::OutputError {
            count: events.len(),
            reason: "the host died".into(),
        })
    }
}

/// An input queue that keeps what it is sent, for tests of code that queues inputs (a callback
/// receiver, a forwarder).
#[derive(Debug, Default)]
pub struct RecordingQueue(std::sync::Mutex<Vec<crate::input::Input>>);

impl RecordingQueue {
    /// What was sent so far, in order.
    pub fn inputs(&self) -> Vec<crate::input::Input> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[async_trait::async_trait]
impl crate::host::InputSender for RecordingQueue {
    async fn send_to_input_queue(
        &self,
        message: &crate::input::Input,
    ) -> Result<(), crate::host::SendError> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(message.clone());
        Ok(())
    }
}
