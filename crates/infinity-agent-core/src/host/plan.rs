//! What a batch of inputs asks of the host before the engine runs, read from the thread's
//! record and the inputs alone ([`SlicePlan`]): which agent to make ready, whether the batch
//! creates a thread and starts a conversation, a move to another version of the agent, the
//! models to make ready, where a new child's view forks, and which root keeps what its
//! conversation shares. No IO: [`super::run_loaded_slice`] does what the plan says.

use crate::ids::ThreadId;
use crate::input::{Input, InputBody};
use crate::state::{ParentLink, ThreadRecord};

/// What the host prepares for one batch, before any of it is done.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SlicePlan<'a> {
    /// The agent the thread runs: its record's, or the one the input that creates it names.
    pub(super) agent: Option<&'a str>,
    /// The thread is being created by a delegated task: an agent that cannot run is then the
    /// engine's to refuse, so that the caller hears of it.
    pub(super) delegated: bool,
    /// A root thread being created starts a conversation, whose agent's tool servers are asked
    /// for their tools (a child shares its parent's).
    pub(super) starts_conversation: Option<&'a str>,
    /// The version a person moves the thread to (the batch's last `use_agent`).
    pub(super) move_to: Option<&'a str>,
    /// The models a person switched the thread to, or is switching it to now.
    pub(super) models: Vec<&'a str>,
    /// For a child being created: where its view forks from its parent's.
    pub(super) fork: Option<&'a ParentLink>,
    /// For a child: the root thread, whose record keeps what the conversation shares.
    pub(super) root: Option<&'a ThreadId>,
}

/// The agent a slice runs once the versions are ready ([`SlicePlan::settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Settled<'a> {
    /// The agent (the version moved to, when the move can be made).
    pub(super) agent: Option<&'a str>,
    /// The version moved to, when the move can be made.
    pub(super) moved_to: Option<&'a str>,
    /// The agent whose tool servers' tools the conversation takes now: a new root's, or the
    /// version a root moves to.
    pub(super) discovers: Option<&'a str>,
}

impl<'a> SlicePlan<'a> {
    /// The plan for `inputs` on the thread `record` (`None`: the thread has no record yet), with
    /// the host's agent for a first message that names none.
    pub(super) fn of(
        record: Option<&'a ThreadRecord>,
        inputs: &'a [Input],
        default_agent: Option<&'a str>,
    ) -> Self {
        let created_by = match record {
            Some(_) => None,
            None => creator(inputs, default_agent),
        };
        let agent = match record {
            Some(record) => Some(record.agent.as_str()),
            None => created_by.map(|(_, agent)| agent),
        };
        let move_to = match record {
            Some(_) => inputs.iter().rev().find_map(|i| match &i.body {
                InputBody::UseAgent { agent } => Some(agent.as_str()),
                _ => None,
            }),
            None => None,
        };
        let switched = record.and_then(|r| r.model.as_deref());
        let switching = inputs.iter().filter_map(|i| match &i.body {
            InputBody::UseModel { model } => model.as_deref(),
            _ => None,
        });
        let fork = match record {
            Some(_) => None,
            None => inputs.iter().find_map(|i| match &i.body {
                InputBody::ChildSeed { parent, .. } => Some(parent),
                _ => None,
            }),
        };
        let root = match record {
            Some(r) if !r.is_root() => r.lineage.first(),
            Some(_) => None,
            None => inputs.iter().find_map(|i| match &i.body {
                InputBody::ChildSeed { parent_lineage, .. } => parent_lineage.first(),
                _ => None,
            }),
        };
        Self {
            agent,
            delegated: matches!(created_by, Some((InputBody::DelegatedTask { .. }, _))),
            starts_conversation: created_by
                .filter(|(body, _)| !matches!(body, InputBody::ChildSeed { .. }))
                .map(|(_, agent)| agent),
            move_to,
            models: switched.into_iter().chain(switching).collect(),
            fork,
            root,
        }
    }

    /// The agent the slice runs once the host made the versions ready, `ready` telling which
    /// it has. A move is made only to a version of the thread's own agent that is ready (the
    /// engine refuses the others, with a notice on the thread); a root moved takes its new
    /// version's tool servers' tools.
    pub(super) fn settle(
        &self,
        record: Option<&ThreadRecord>,
        ready: impl Fn(&str) -> bool,
    ) -> Settled<'a> {
        let name = crate::catalog::AgentRef::name_in;
        let moved_to = self.move_to.filter(|target| {
            record.is_some_and(|r| name(&r.agent) == name(target)) && ready(target)
        });
        Settled {
            agent: moved_to.or(self.agent),
            moved_to,
            discovers: match record {
                Some(r) if r.is_root() && moved_to.is_some() => moved_to,
                _ => self.starts_conversation,
            },
        }
    }
}

/// The input that creates the thread when it has no record yet (a first user message, with the
/// host's default agent; a delegated task; a child seed), and the agent the new thread runs.
fn creator<'a>(
    inputs: &'a [Input],
    default_agent: Option<&'a str>,
) -> Option<(&'a InputBody, &'a str)> {
    inputs.iter().find_map(|i| match &i.body {
        InputBody::UserMessage { agent, .. } => agent
            .as_deref()
            .or(default_agent)
            .map(|agent| (&i.body, agent)),
        InputBody::DelegatedTask { agent, .. } | InputBody::ChildSeed { agent, .. } => {
            Some((&i.body, agent.as_str()))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests;
