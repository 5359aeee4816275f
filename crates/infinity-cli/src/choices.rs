//! Answering tool servers' questions (RAP `user_choice`): pick an option or dismiss (the
//! default), POST it to the tool server, and tell the thread the question is closed.

use anyhow::{anyhow, bail, Result};
use infinity_agent_core::ids::{CallId, InputId};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::thread::{OpenChoice, ThreadRecord};

/// The open question of `record` for `call` (or its only / newest one when `call` is `None`).
pub fn find<'a>(record: &'a ThreadRecord, call: Option<&str>) -> Result<&'a OpenChoice> {
    match call {
        Some(call) => record
            .open_choices
            .iter()
            .find(|c| c.call_id.as_str() == call)
            .ok_or_else(|| {
                anyhow!(
                    "thread {} has no open question for call {call}{}",
                    record.id,
                    listing(record)
                )
            }),
        None => record
            .open_choices
            .last()
            .ok_or_else(|| anyhow!("thread {} has no open question", record.id)),
    }
}

fn listing(record: &ThreadRecord) -> String {
    if record.open_choices.is_empty() {
        return String::new();
    }
    let calls: Vec<&str> = record
        .open_choices
        .iter()
        .map(|c| c.call_id.as_str())
        .collect();
    format!(" (open: {})", calls.join(", "))
}

/// Sends the answer (`selected`, or the default when `None`: a dismissal) to the tool server,
/// and returns the input that closes the question on the thread.
pub async fn answer(
    record: &ThreadRecord,
    choice: &OpenChoice,
    selected: Option<usize>,
) -> Result<(usize, Input)> {
    let selected = selected.unwrap_or(choice.default);
    if selected >= choice.choices.len() {
        bail!(
            "choice {selected} is out of range: {} has choices 0 to {}",
            choice.call_id,
            choice.choices.len().saturating_sub(1)
        );
    }
    infinity_rap::client::send_user_choice(choice, selected).await?;
    let input = Input {
        id: InputId::derived(choice.call_id.as_str(), "answered"),
        thread_id: record.id.clone(),
        body: InputBody::UserChoiceAnswered {
            call_id: CallId::clone(&choice.call_id),
            selected,
        },
    };
    Ok((selected, input))
}
