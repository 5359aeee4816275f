//! The answers that stand, kept in memory ([`AnswerBook`]): the memory store's, and any store
//! that keeps them beside state of its own.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::ids::{CallId, ThreadId};
use crate::input::{Answer, AnswerTo};

/// The answer that stands for each answered call, by thread and call (see
/// [`ThreadStore::claim_answer`](super::ThreadStore::claim_answer)).
#[derive(Debug, Default)]
pub struct AnswerBook {
    answers: Mutex<HashMap<(ThreadId, CallId, AnswerTo), Answer>>,
}

impl AnswerBook {
    fn lock(&self) -> MutexGuard<'_, HashMap<(ThreadId, CallId, AnswerTo), Answer>> {
        // Every change is one insert or remove: a poisoned map is still whole.
        self.answers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `answer` unless its call has one: then that one (see
    /// [`ThreadStore::claim_answer`](super::ThreadStore::claim_answer)).
    pub fn claim(&self, thread_id: &ThreadId, answer: &Answer) -> Option<Answer> {
        let mut answers = self.lock();
        let key = (thread_id.clone(), answer.call_id.clone(), answer.to);
        match answers.get(&key) {
            Some(standing) => Some(standing.clone()),
            None => {
                answers.insert(key, answer.clone());
                None
            }
        }
    }

    /// The answer that stands for what `call_id` waits for (`to`), if any.
    pub fn standing(&self, thread_id: &ThreadId, call_id: &CallId, to: AnswerTo) -> Option<Answer> {
        self.lock()
            .get(&(thread_id.clone(), call_id.clone(), to))
            .cloned()
    }

    /// Forgets `answer` if it still stands.
    pub fn withdraw(&self, thread_id: &ThreadId, answer: &Answer) {
        let mut answers = self.lock();
        let key = (thread_id.clone(), answer.call_id.clone(), answer.to);
        if answers.get(&key) == Some(answer) {
            answers.remove(&key);
        }
    }
}
