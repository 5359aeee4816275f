//! Answering the questions people are asked on a thread: a tool server's `user_choice`, or an
//! approval the runtime asked itself. The first answer stands (see
//! [`give_answer`](infinity_agent_core::runtime::give_answer)); a tool server's goes to its
//! `response_url` once, after it is kept and before it is queued.

use std::time::Duration;

use infinity_rap::wire;

/// Why a user's choice could not be answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChoiceError {
    /// No thread has this id.
    #[error("no thread {0}")]
    NoThread(infinity_agent_core::ids::ThreadId),
    /// The thread has no such open question.
    #[error("thread {thread} has no open question{}{}", call.as_deref().map(|c| format!(" for call {c}")).unwrap_or_default(), if open.is_empty() { String::new() } else { format!(" (open: {})", open.join(", ")) })]
    NoQuestion {
        /// The thread.
        thread: String,
        /// The call asked for, if any.
        call: Option<String>,
        /// The calls with open questions.
        open: Vec<String>,
    },
    /// The index is not one of the choices.
    #[error("choice {selected} is out of range: the question has choices 0 to {}", count.saturating_sub(1))]
    OutOfRange {
        /// The index given.
        selected: usize,
        /// How many choices there are.
        count: usize,
    },
    /// The tool server did not take the answer (it was not kept: the question may be answered
    /// again).
    #[error("the tool server did not take the answer: {0}")]
    Delivery(String),
    /// The answer was not taken: the question was answered already
    /// ([`PostError::Answered`](infinity_agent_core::runtime::PostError::Answered), naming the
    /// answer that stands), the thread is closed, or the answer could not be kept or queued.
    #[error(transparent)]
    Refused(infinity_agent_core::runtime::PostError),
}

/// The open question of `record` for `call`, or its newest one when `call` is `None`.
pub fn find_choice<'a>(
    record: &'a infinity_agent_core::state::ThreadRecord,
    call: Option<&str>,
) -> Result<&'a infinity_agent_core::state::OpenChoice, ChoiceError> {
    let found = match call {
        Some(call) => record
            .open_choices
            .iter()
            .find(|c| c.call_id.as_str() == call),
        None => record.open_choices.last(),
    };
    found.ok_or_else(|| ChoiceError::NoQuestion {
        thread: record.id.to_string(),
        call: call.map(str::to_owned),
        open: record
            .open_choices
            .iter()
            .map(|c| c.call_id.to_string())
            .collect(),
    })
}

/// How a question is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// This option (its index).
    Option(usize),
    /// Dismissed: the question's default.
    Dismiss,
    /// Nobody can answer (`infinity run` runs without people): the default is taken, and a
    /// declined approval tells the model that nobody could be asked.
    Unattended,
}

impl From<Option<usize>> for Pick {
    /// An index, or `None` to dismiss.
    fn from(selected: Option<usize>) -> Self {
        selected.map_or(Pick::Dismiss, Pick::Option)
    }
}

/// A question answered.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// The question.
    pub question: infinity_agent_core::state::OpenChoice,
    /// The option chosen.
    pub selected: usize,
    /// The input that closes the question on the thread (`user_choice_answered`).
    pub input_id: infinity_agent_core::ids::InputId,
}

impl Chosen {
    /// The chosen option's text.
    pub fn choice(&self) -> &str {
        self.question
            .choices
            .get(self.selected)
            .map_or("", String::as_str)
    }
}

/// Answers a question of `thread` (the one of `call`, or its newest when `None`): a tool
/// server's `user_choice`, or an approval the runtime asked. `selected: None` dismisses it (its
/// default is chosen). The first answer stands (see
/// [`give_answer`](infinity_agent_core::runtime::give_answer)): it is kept in `threads`, sent
/// to the tool server's `response_url` once (the spec forbids retrying or replaying answers; a
/// question the runtime asked itself has none), and queued with `post`; any later answer is
/// refused naming it. The index is checked before anything is kept or sent.
pub async fn answer_question(
    threads: &dyn infinity_agent_core::store::ThreadStore,
    post: &infinity_agent_core::runtime::PostInput<'_>,
    thread: &infinity_agent_core::ids::ThreadId,
    call: Option<&str>,
    pick: Pick,
    now: jiff::Timestamp,
) -> Result<Chosen, ChoiceError> {
    use infinity_agent_core::input::{Answer, Answered};
    use infinity_agent_core::runtime::PostError;
    use infinity_agent_core::state::ThreadStatus;
    let refused = |e: PostError| ChoiceError::Refused(e);
    let record = threads
        .load_record(thread)
        .await
        .map_err(|e| refused(e.into()))?
        .ok_or_else(|| ChoiceError::NoThread(thread.clone()))?;
    if record.status == ThreadStatus::Closed {
        return Err(refused(PostError::Closed(thread.clone())));
    }
    let question = match find_choice(&record, call) {
        Ok(question) => question.clone(),
        Err(none) => {
            // Answered already (or cancelled): say by what.
            let call = call.and_then(|c| infinity_agent_core::ids::CallId::new(c).ok());
            let standing = match &call {
                Some(call) => threads
                    .standing_answer(thread, call, infinity_agent_core::input::AnswerTo::Question)
                    .await
                    .map_err(|e| refused(e.into()))?,
                None => None,
            };
            return Err(match standing {
                Some(standing) => {
                    let same = matches!((&standing.what, pick), (Answered::Choice { selected: s, .. }, Pick::Option(given)) if *s == given);
                    refused(PostError::Answered {
                        standing: Box::new(standing),
                        same,
                    })
                }
                None => none,
            });
        }
    };
    let selected = match pick {
        Pick::Option(selected) => selected,
        Pick::Dismiss | Pick::Unattended => question.default,
    };
    let Some(choice) = question.choices.get(selected).cloned() else {
        return Err(ChoiceError::OutOfRange {
            selected,
            count: question.choices.len(),
        });
    };
    let call_id = question.call_id.clone();
    let input = infinity_agent_core::input::Input {
        id: infinity_agent_core::ids::InputId::derived(call_id.as_str(), "answered"),
        thread_id: thread.clone(),
        body: infinity_agent_core::input::InputBody::UserChoiceAnswered {
            call_id: call_id.clone(),
            selected,
            unattended: pick == Pick::Unattended,
        },
    };
    let answer = Answer::new(call_id, Answered::Choice { selected, choice }, &input, now);
    let deliver = (!question.response_url.is_empty()).then(|| {
        let url = question.response_url.clone();
        let body = wire::UserChoiceResponse {
            id: question.call_id.to_string(),
            selected,
        };
        Box::pin(async move {
            deliver_choice(&url, &body)
                .await
                .map_err(PostError::Undelivered)
        }) as futures_util::future::BoxFuture<'_, _>
    });
    let input_id = infinity_agent_core::runtime::give_answer(
        threads,
        post,
        thread,
        Ok(()),
        answer,
        input,
        deliver,
    )
    .await
    .map_err(|e| match e {
        PostError::Undelivered(why) => ChoiceError::Delivery(why),
        other => refused(other),
    })?;
    Ok(Chosen {
        question,
        selected,
        input_id,
    })
}

/// POSTs a person's answer to a tool server's question, once.
async fn deliver_choice(url: &str, body: &wire::UserChoiceResponse) -> Result<(), String> {
    let response = reqwest::Client::new()
        .post(url)
        .json(body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| e.without_url().to_string())?;
    if !response.status().is_success() {
        return Err(format!("{url} answered HTTP {}", response.status()));
    }
    Ok(())
}
