//! The questions (`user_choice`) calls are waiting on, and the answers the runtime POSTs to
//! their `response_url`.
//!
//! Each question gets a random token and the response URL `{public_url}/user_choice/{token}`:
//! only the runtime, which received the URL in the callback, can answer it. The question lives as
//! long as the call waits for it; once answered, withdrawn or given up, its URL answers 404.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::http::StatusCode;
use tokio::sync::oneshot;

use crate::wire::{parse, UserChoiceResponse};

/// Where the kit takes answers, relative to the server's public URL; a question's token follows.
pub(crate) const USER_CHOICE_PATH: &str = "/user_choice";

/// The open questions of a server's calls, by token.
#[derive(Debug)]
pub(crate) struct Questions {
    /// `{public_url}/user_choice/`: a token appended makes a response URL.
    response_prefix: String,
    waiting: Mutex<HashMap<String, OpenQuestion>>,
}

#[derive(Debug)]
struct OpenQuestion {
    /// The asking call's id, which the answer must repeat.
    tool_call_id: String,
    /// How many choices were offered.
    choices: usize,
    answer: oneshot::Sender<usize>,
}

/// Why an answer was refused; the status and text the runtime gets.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnswerRejection {
    #[error("no open question at this URL (answered already, withdrawn, or never asked)")]
    UnknownQuestion,
    #[error("not a user choice response: {0}")]
    Unreadable(String),
    #[error("the answer is for call `{answered}`, but the question was asked by call `{asked}`")]
    WrongCall { answered: String, asked: String },
    #[error(
        "`selected` is {selected}, but the question has choices 0 to {}",
        choices.saturating_sub(1)
    )]
    OutOfRange { selected: usize, choices: usize },
}

impl AnswerRejection {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            AnswerRejection::UnknownQuestion => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// A question waiting for its answer; dropping it withdraws the question.
#[derive(Debug)]
pub(crate) struct PendingAnswer {
    questions: Arc<Questions>,
    token: String,
    answer: oneshot::Receiver<usize>,
}

impl Questions {
    /// Questions answered under `public_url`, the server's base URL.
    pub(crate) fn new(public_url: &str) -> Self {
        Questions {
            response_prefix: format!("{}{USER_CHOICE_PATH}/", public_url.trim_end_matches('/')),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Opens a question of the call `tool_call_id` with `choices` options: its response URL,
    /// and the answer to wait for.
    pub(crate) fn ask(
        self: &Arc<Self>,
        tool_call_id: &str,
        choices: usize,
    ) -> (String, PendingAnswer) {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let (sender, answer) = oneshot::channel();
        let question = OpenQuestion {
            tool_call_id: tool_call_id.to_owned(),
            choices,
            answer: sender,
        };
        self.waiting().insert(token.clone(), question);
        let response_url = format!("{}{token}", self.response_prefix);
        let pending = PendingAnswer {
            questions: Arc::clone(self),
            token,
            answer,
        };
        (response_url, pending)
    }

    /// Takes the answer `body` to the question `token`: checked, then handed to the waiting
    /// call, which closes the question. A refused answer leaves the question open.
    pub(crate) fn answer(&self, token: &str, body: &[u8]) -> Result<(), AnswerRejection> {
        let response: UserChoiceResponse =
            parse(body).map_err(|error| AnswerRejection::Unreadable(error.to_string()))?;
        let mut waiting = self.waiting();
        let question = waiting.get(token).ok_or(AnswerRejection::UnknownQuestion)?;
        if response.id != question.tool_call_id {
            return Err(AnswerRejection::WrongCall {
                answered: response.id,
                asked: question.tool_call_id.clone(),
            });
        }
        if response.selected >= question.choices {
            return Err(AnswerRejection::OutOfRange {
                selected: response.selected,
                choices: question.choices,
            });
        }
        let question = waiting
            .remove(token)
            .ok_or(AnswerRejection::UnknownQuestion)?;
        // The receiver lives as long as the question is in the table: it cannot be gone here.
        let _ = question.answer.send(response.selected);
        Ok(())
    }

    fn waiting(&self) -> MutexGuard<'_, HashMap<String, OpenQuestion>> {
        // Every update is a single insert or remove: a panic cannot leave the table half changed.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PendingAnswer {
    /// The index the user picked (or the default, when they dismissed the question); `None`
    /// if the question was closed without an answer.
    pub(crate) async fn answer(&mut self) -> Option<usize> {
        (&mut self.answer).await.ok()
    }
}

impl Drop for PendingAnswer {
    fn drop(&mut self) {
        self.questions.waiting().remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_is_checked_before_it_closes_the_question() {
        let questions = Arc::new(Questions::new("http://tools.example.com/"));
        let (url, mut pending) = questions.ask("call_1", 3);
        let token = url
            .strip_prefix("http://tools.example.com/user_choice/")
            .unwrap();
        assert_eq!(token.len(), 32, "{url}");

        let refused = [
            br#"{"id": "call_1"}"#.as_slice(),
            br#"{"id": "call_2", "selected": 0}"#,
            br#"{"id": "call_1", "selected": 3}"#,
        ];
        for body in refused {
            let rejection = questions.answer(token, body).unwrap_err();
            assert_eq!(rejection.status(), StatusCode::BAD_REQUEST, "{rejection}");
        }
        let unknown = questions.answer("0123", br#"{"id": "call_1", "selected": 0}"#);
        assert_eq!(unknown.unwrap_err().status(), StatusCode::NOT_FOUND);

        questions
            .answer(token, br#"{"id": "call_1", "selected": 2}"#)
            .unwrap();
        assert_eq!(pending.answer().await, Some(2));
        let again = questions.answer(token, br#"{"id": "call_1", "selected": 1}"#);
        assert_eq!(again.unwrap_err().status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn a_question_given_up_is_withdrawn() {
        let questions = Arc::new(Questions::new("http://tools.example.com"));
        let (url, pending) = questions.ask("call_1", 2);
        drop(pending);
        let token = url.rsplit('/').next().unwrap();
        let answer = questions.answer(token, br#"{"id": "call_1", "selected": 0}"#);
        assert_eq!(answer.unwrap_err().status(), StatusCode::NOT_FOUND);
    }
}
