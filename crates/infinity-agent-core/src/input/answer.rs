//! The answer that stands for a call someone outside the thread answers: a question (a tool
//! server's or an approval), or a client tool's call.
//!
//! Such a call may be answered from several places at once: two people pressing different
//! buttons, an application posting its result while the call's deadline fires, a person's answer
//! racing an interrupt. The first answer stands; every other one is refused, naming it. The store
//! keeps the answer that stands ([`crate::store::ThreadStore::claim_answer`], put only if none is
//! there yet), and every door takes its turn through it: the fronts before they queue an answer
//! (so the loser is told at once, with a 409), the host driver before a slice applies one (so an
//! answer that lost, however it reached the queue, never runs anything). A call's answer is
//! therefore decided once, durably, before anything acts on it.

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::Input;
use crate::ids::CallId;

/// The largest answering input (its JSON) an [`Answer`] keeps with it; a bigger one (a long
/// client tool's result) is compared by its fingerprint only.
pub const MAX_KEPT_INPUT_BYTES: usize = 64 * 1024;

/// The answer that stands for a call (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The call it answers.
    pub call_id: CallId,
    /// What of the call it answers.
    pub to: AnswerTo,
    /// What the answer was.
    pub what: Answered,
    /// When it was given.
    pub at: Timestamp,
    /// A digest of the answering input's body: two answers with the same one say the same.
    pub fingerprint: String,
    /// The input that carries the answer to the thread, when at most
    /// [`MAX_KEPT_INPUT_BYTES`]: with it, an answer whose input was lost (a crash between
    /// keeping the answer and queueing it) is queued again by whoever finds it standing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Input>,
}

/// What of a call an [`Answer`] answers: a call may wait twice (a client tool's call that needs
/// an approval waits for the person, then for the application), and each wait has its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerTo {
    /// Its question: a tool server's, or its approval.
    Question,
    /// Its result, from the application that runs a client tool.
    Result,
}

impl AnswerTo {
    /// The word stores key it by (`question`, `result`).
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerTo::Question => "question",
            AnswerTo::Result => "result",
        }
    }
}

/// What an [`Answer`] was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answered {
    /// A person chose one of a question's options (a dismissal chooses its default).
    Choice {
        /// The option's index.
        selected: usize,
        /// The option's text.
        choice: String,
    },
    /// The application posted a client tool's result.
    Result {
        /// Whether it is an error result.
        is_error: bool,
        /// How long the result's text is, in bytes.
        bytes: usize,
    },
    /// Nobody answered within the call's deadline (as its agent file gives it): an approval took
    /// its rule's default (`choice`), a client tool's call an error result.
    Deadline {
        /// The deadline.
        after: String,
        /// The option the deadline chose, for a question.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        choice: Option<String>,
    },
    /// The call was cancelled before anyone answered it (an interrupt, its thread closed).
    Cancelled {
        /// By what.
        by: String,
    },
}

impl Answer {
    /// The answer to `call_id` that `input` carries, given at `at`.
    pub fn new(call_id: CallId, what: Answered, input: &Input, at: Timestamp) -> Self {
        let body = serde_json::to_vec(&input.body).unwrap_or_default();
        let to = match &what {
            Answered::Choice { .. }
            | Answered::Deadline {
                choice: Some(_), ..
            } => AnswerTo::Question,
            _ => AnswerTo::Result,
        };
        Self {
            call_id,
            to,
            what,
            at,
            fingerprint: fingerprint(&body),
            input: (body.len() <= MAX_KEPT_INPUT_BYTES).then(|| input.clone()),
        }
    }

    /// A cancellation of what `call_id` waits for (`to`) by `by` (`"an interrupt"`): no input
    /// carries it to the thread (the cancelling one does).
    pub fn cancelled(call_id: CallId, to: AnswerTo, by: &str, at: Timestamp) -> Self {
        Self {
            fingerprint: fingerprint(format!("cancelled:{call_id}:{by}").as_bytes()),
            call_id,
            to,
            what: Answered::Cancelled { by: by.to_owned() },
            at,
            input: None,
        }
    }

    /// Whether `other` says the same as this answer (whoever gave it).
    pub fn same_as(&self, other: &Answer) -> bool {
        self.call_id == other.call_id
            && self.to == other.to
            && self.fingerprint == other.fingerprint
    }

    /// The input to queue (again) so that this answer reaches its thread: its own, or `ours`
    /// when that says the same (a big result the answer did not keep).
    pub fn input_or<'a>(&'a self, ours: &'a Answer, our_input: &'a Input) -> Option<&'a Input> {
        self.input
            .as_ref()
            .or_else(|| self.same_as(ours).then_some(our_input))
    }
}

/// A stable digest of `bytes` (64-bit FNV-1a, as hex): the same on every host and release.
fn fingerprint(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (call, at) = (&self.call_id, self.at);
        match &self.what {
            Answered::Choice { selected, choice } => write!(
                f,
                "call {call} was answered at {at}: \"{choice}\" (option {selected})"
            ),
            Answered::Result { is_error, bytes } => write!(
                f,
                "call {call} has its result already, posted at {at}: {} of {bytes} bytes",
                if *is_error { "an error" } else { "a result" }
            ),
            Answered::Deadline {
                after,
                choice: Some(choice),
            } => write!(
                f,
                "call {call} was answered by its deadline ({after}) at {at}: \"{choice}\""
            ),
            Answered::Deadline {
                after,
                choice: None,
            } => write!(
                f,
                "call {call} got an error result at {at}: no result came within its deadline \
                 ({after})"
            ),
            Answered::Cancelled { by } => {
                write!(f, "call {call} was cancelled by {by} at {at}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ThreadId;
    use crate::input::InputBody;

    fn answered(call: &str, selected: usize) -> Input {
        Input {
            id: crate::ids::InputId::derived(call, "answered"),
            thread_id: ThreadId::new("t").unwrap(),
            body: InputBody::UserChoiceAnswered {
                call_id: CallId::new(call).unwrap(),
                selected,
                unattended: false,
            },
        }
    }

    fn choice(selected: usize) -> Answered {
        Answered::Choice {
            selected,
            choice: format!("option {selected}"),
        }
    }

    #[test]
    fn answers_that_say_the_same_are_the_same_whoever_gave_them() {
        let at = Timestamp::UNIX_EPOCH;
        let c1 = || CallId::new("c1").unwrap();
        let later = at + jiff::SignedDuration::from_secs(5);
        let run = Answer::new(c1(), choice(0), &answered("c1", 0), at);
        let again = Answer::new(c1(), choice(0), &answered("c1", 0), later);
        let other = Answer::new(c1(), choice(1), &answered("c1", 1), at);
        assert!(run.same_as(&again));
        assert!(!run.same_as(&other));
        assert_eq!(run.input.as_ref(), Some(&answered("c1", 0)));
    }

    #[test]
    fn a_big_result_is_kept_by_its_fingerprint_only() {
        let call = CallId::new("c2").unwrap();
        let big = Input {
            id: crate::ids::InputId::derived("c2", "client-result"),
            thread_id: ThreadId::new("t").unwrap(),
            body: InputBody::tool_result(call.clone(), "x".repeat(MAX_KEPT_INPUT_BYTES + 1)),
        };
        let what = Answered::Result {
            is_error: false,
            bytes: MAX_KEPT_INPUT_BYTES + 1,
        };
        let answer = Answer::new(call, what, &big, Timestamp::UNIX_EPOCH);
        assert!(answer.input.is_none());
        // Whoever posts the same result again has the input in hand.
        assert_eq!(answer.input_or(&answer, &big), Some(&big));
    }

    #[test]
    fn the_fingerprint_does_not_change_between_releases() {
        // FNV-1a's published test vectors: kept answers must compare across upgrades.
        assert_eq!(fingerprint(b""), "cbf29ce484222325");
        assert_eq!(fingerprint(b"a"), "af63dc4c8601ec8c");
    }
}
