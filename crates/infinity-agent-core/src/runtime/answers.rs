//! A call's answer from outside its thread, through any door (the HTTP API, `infinity chat`,
//! `infinity choose`, the CLI's `run`): a person's choice for a question or an approval, an
//! application's result for a client tool's call. The first answer stands; it is kept in the
//! store before it is queued, and every later one is refused naming it
//! ([`PostError::Answered`]). See [`Answer`] for why, and `host/answers.rs` for the host's side.

use futures_util::future::BoxFuture;

use super::PostError;
use crate::ids::{InputId, ThreadId};
use crate::input::Answer;
use crate::input::Input;
use crate::store::ThreadStore;

/// How a door queues an input for its thread (its [`Front::post`](super::Front::post)).
pub type PostInput<'a> =
    dyn Fn(Input) -> BoxFuture<'a, Result<InputId, PostError>> + Send + Sync + 'a;

/// `front`'s way of queueing inputs ([`Front::post`](super::Front::post)), as [`PostInput`].
pub fn poster<'a, F: super::Front + ?Sized>(
    front: &'a F,
) -> impl Fn(Input) -> BoxFuture<'a, Result<InputId, PostError>> + Send + Sync + 'a {
    move |input| Box::pin(front.post(input))
}

/// Gives `answer`, carried by `input`, to its call on `thread_id`, if it is the first:
///
/// - `waits` says whether the call waits for such an answer (from the thread's record). When it
///   does not and an answer stands, that one is named ([`PostError::Answered`]); otherwise
///   `waits`'s own error is returned.
/// - The answer is kept ([`ThreadStore::claim_answer`]). When another stands, it is named, after
///   queueing its input again: the door that kept it may have died before queueing it, and the
///   input's id makes a second copy count once.
/// - Kept, it is `deliver`ed first when it must reach someone before its thread (a tool server's
///   question goes to its `response_url`), then queued. When either fails, it is withdrawn, so
///   the call can be answered again.
///
/// Returns the queued input's id.
pub async fn give_answer(
    threads: &dyn ThreadStore,
    post: &PostInput<'_>,
    thread_id: &ThreadId,
    waits: Result<(), PostError>,
    answer: Answer,
    input: Input,
    deliver: Option<BoxFuture<'_, Result<(), PostError>>>,
) -> Result<InputId, PostError> {
    if let Err(why) = waits {
        return match threads
            .standing_answer(thread_id, &answer.call_id, answer.to)
            .await?
        {
            Some(standing) => Err(refusal(standing, &answer)),
            None => Err(why),
        };
    }
    if let Some(standing) = threads.claim_answer(thread_id, &answer).await? {
        if let Some(again) = standing.input_or(&answer, &input) {
            if let Err(err) = post(again.clone()).await {
                tracing::warn!(thread = %thread_id, call = %answer.call_id, %err, "the answer that stands could not be queued again");
            }
        }
        return Err(refusal(standing, &answer));
    }
    let withdraw = |err: PostError| async move {
        if let Err(lost) = threads.withdraw_answer(thread_id, &answer).await {
            // It stays: a later answer is refused naming it, and queues it again.
            tracing::warn!(thread = %thread_id, call = %answer.call_id, %lost, "an answer that was not queued could not be withdrawn");
        }
        err
    };
    if let Some(deliver) = deliver {
        if let Err(err) = deliver.await {
            return Err(withdraw(err).await);
        }
    }
    match post(input).await {
        Ok(id) => Ok(id),
        Err(err) => Err(withdraw(err).await),
    }
}

/// Gives the application's result of a client tool's call `call_id` (see
/// [`give_answer`]) to the thread of `record`, which waits for it or says why not
/// ([`check_client_call`](super::check_client_call)).
pub async fn give_tool_result(
    threads: &dyn ThreadStore,
    post: &PostInput<'_>,
    record: &crate::state::ThreadRecord,
    call_id: &crate::ids::CallId,
    text: String,
    is_error: bool,
    now: jiff::Timestamp,
) -> Result<InputId, PostError> {
    let waits = super::check_client_call(record, call_id);
    let bytes = text.len();
    let input = super::client_result(&record.id, call_id, text, is_error);
    let what = crate::input::Answered::Result { is_error, bytes };
    let answer = Answer::new(call_id.clone(), what, &input, now);
    give_answer(threads, post, &record.id, waits, answer, input, None).await
}

fn refusal(standing: Answer, ours: &Answer) -> PostError {
    PostError::Answered {
        same: standing.same_as(ours),
        standing: Box::new(standing),
    }
}
