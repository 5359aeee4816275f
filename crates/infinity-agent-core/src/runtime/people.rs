//! What a person sends a thread from outside it (a UI, the HTTP API, the CLI): messages,
//! interruptions, closes, moves to another agent version or model, schedules. Each is checked
//! against the thread's record the same way on every host ([`Front`]) and refused with a reason
//! when the thread cannot take it; the embedded runtime ([`AgentSystem`]) routes what passes to
//! the thread's worker, a stack's front (`infinity_aws::front`) to its input queue.

use async_trait::async_trait;

use super::{AgentSystem, ClientCallRefusal, PostError};
use crate::catalog::AgentCatalog;
use crate::cost::Budget;
use crate::ids::{InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::library::{AllowedModels, Library};
use crate::state::{ThreadRecord, ThreadStatus, WhileBusy};
use crate::store::ThreadStore;

/// A host's front desk: where a person's inputs to threads are checked and posted. A host gives
/// the store, the checks only it can make (is this agent or model available here) and the
/// posting; the rules are written once, in the provided methods.
#[async_trait]
pub trait Front: Send + Sync {
    /// Where the threads' records are.
    fn threads(&self) -> &dyn ThreadStore;

    /// The host's output events from now on, every thread's, with what `thread_id`'s running
    /// slice showed before; `None` when it cannot follow them (then the HTTP API's `GET
    /// /threads/{id}/events` sends what the store kept and asks the client to reconnect soon,
    /// for what comes next).
    fn follow(&self, thread_id: &ThreadId) -> Option<super::Following> {
        let _ = thread_id;
        None
    }

    /// The host's library (the shelves of its categories: the pages agents publish, ...);
    /// `None` when it keeps none.
    fn library(&self) -> Option<&Library> {
        None
    }

    /// The stored agents, when the host keeps them (`NAME` then means the newest version).
    fn agent_catalog(&self) -> Option<&dyn AgentCatalog>;

    /// The agent of a conversation started without naming one.
    fn default_agent_name(&self) -> &str;

    /// Makes `agent` (`NAME` or `NAME@VERSION`) ready to run, or says why it cannot run here
    /// ([`PostError::NoAgent`]).
    async fn ready_agent(&self, agent: &str) -> Result<(), PostError>;

    /// Makes the model `spec` (`PROVIDER:MODEL`) ready for the thread's completions, or says why
    /// this host cannot make it ([`PostError::BadModel`]). Only asked for a spec
    /// [`Front::allowed_models`] lists.
    async fn ready_model(&self, spec: &str) -> Result<(), PostError>;

    /// The models people may switch this host's threads to, besides each thread's agent's own
    /// (empty: none).
    fn allowed_models(&self) -> AllowedModels;

    /// The model the thread's agent runs, as `PROVIDER:MODEL`, when this host can tell: naming it
    /// is allowed whatever the list says (it is the same as going back to the agent's model).
    async fn agent_model(&self, record: &ThreadRecord) -> Option<String> {
        let _ = record;
        None
    }

    /// The host's time (a recurring schedule's next occurrences count from it).
    fn now(&self) -> jiff::Timestamp;

    /// Hands a checked input to its thread.
    async fn post(&self, input: Input) -> Result<InputId, PostError>;

    /// Sends a person's message to `thread_id`, creating the thread (with the default agent)
    /// when it does not exist; refused when the thread is closed (a closed thread would drop
    /// it).
    async fn post_user_message(
        &self,
        thread_id: &ThreadId,
        text: String,
    ) -> Result<InputId, PostError> {
        self.post_message(thread_id, text, None).await
    }

    /// [`Front::post_user_message`], doing `while_busy` if the thread is busy instead of what
    /// its agent says. Refused at once ([`PostError::Busy`]) when the thread is busy and the
    /// policy is `reject`; a message that finds it busy only once its slice runs is refused
    /// there, by an `error` event.
    async fn post_message(
        &self,
        thread_id: &ThreadId,
        text: String,
        while_busy: Option<WhileBusy>,
    ) -> Result<InputId, PostError> {
        if crate::text::is_blank(&text) {
            return Err(PostError::EmptyMessage(thread_id.clone()));
        }
        if let Some(record) = self.threads().load_record(thread_id).await? {
            if record.status == ThreadStatus::Closed {
                return Err(PostError::Closed(thread_id.clone()));
            }
            if record.refuses_message(while_busy) {
                return Err(PostError::Busy(thread_id.clone()));
            }
        }
        let mut input = Input::user_message(thread_id.clone(), text);
        if let InputBody::UserMessage {
            while_busy: slot, ..
        } = &mut input.body
        {
            *slot = while_busy;
        }
        self.post(input).await
    }

    /// Starts the conversation `thread_id` (a thread that does not exist yet) with a person's
    /// message, run by `agent` (`NAME`, or `NAME@VERSION` of a stored one) instead of the
    /// default agent. Refused for a thread that exists ([`PostError::KeepsAgent`]) and an agent
    /// this host does not have ([`PostError::NoAgent`]).
    async fn start_conversation(
        &self,
        thread_id: &ThreadId,
        text: String,
        agent: &str,
    ) -> Result<InputId, PostError> {
        if crate::text::is_blank(&text) {
            return Err(PostError::EmptyMessage(thread_id.clone()));
        }
        if let Some(record) = self.threads().load_record(thread_id).await? {
            return Err(PostError::KeepsAgent(format!(
                "thread {thread_id} exists and keeps its agent ({}); send the message without an \
                 agent, or move it to another version of its agent",
                record.agent
            )));
        }
        self.ready_agent(agent).await?;
        self.post(Input::new(
            thread_id.clone(),
            InputBody::UserMessage {
                text,
                agent: Some(agent.to_owned()),
                while_busy: None,
            },
        ))
        .await
    }

    /// Interrupts `thread_id` (and with `tree`, every open thread below it): its calls in
    /// flight are cancelled (each gets an "interrupted" result, tool servers get
    /// `/cancel_tool_call`, later results are dropped) and the model is not asked to go on until
    /// the next message. Refused for an unknown or closed thread.
    async fn interrupt(&self, thread_id: &ThreadId, tree: bool) -> Result<InputId, PostError> {
        self.open_record(thread_id).await?;
        self.post(Input::new(thread_id.clone(), InputBody::Interrupt { tree }))
            .await
    }

    /// Closes `thread_id`, and with it every thread below it (a thread never outlives its
    /// parent): pending calls are cancelled, subscriptions cancelled at their servers, each
    /// parent gets its children's final reports. Unless `tree`, a thread with open children is
    /// refused ([`PostError::OpenChildren`]), so nobody closes a tree by accident.
    async fn close(&self, thread_id: &ThreadId, tree: bool) -> Result<InputId, PostError> {
        let record = self.open_record(thread_id).await?;
        let open: Vec<ThreadId> = record
            .children
            .iter()
            .filter(|c| !c.closed)
            .map(|c| c.thread_id.clone())
            .collect();
        if !tree && !open.is_empty() {
            return Err(PostError::OpenChildren {
                thread: thread_id.clone(),
                children: open,
            });
        }
        self.post(Input::new(thread_id.clone(), InputBody::Close {}))
            .await
    }

    /// Moves `thread_id` to another version of its agent: `agent` is `NAME` (the newest stored
    /// version) or `NAME@VERSION` (any stored one, older ones included). The thread runs it from
    /// its next slice on; a conversation's root takes the version's tool servers afresh, and
    /// its children and delegations started from then on run it too. Refused for an unknown or
    /// closed thread, what is not an agent's name ([`PostError::BadAgent`]), another agent's
    /// name ([`PostError::KeepsAgent`]) and a version this host does not have
    /// ([`PostError::NoAgent`]).
    async fn use_agent(&self, thread_id: &ThreadId, agent: &str) -> Result<InputId, PostError> {
        let record = self.open_record(thread_id).await?;
        let reference = crate::catalog::AgentRef::parse(agent).map_err(PostError::BadAgent)?;
        let current = crate::catalog::AgentRef::name_in(&record.agent);
        if reference.name != current {
            return Err(PostError::KeepsAgent(format!(
                "thread {thread_id} runs the agent `{current}` and can only move to another \
                 version of it, not to `{}`",
                reference.name
            )));
        }
        // `NAME` is the newest stored version, whichever version this host runs by default.
        let resolved = match (self.agent_catalog(), reference.version) {
            (Some(catalog), None) => catalog
                .get(&reference.name, None)
                .await
                .map_err(|e| PostError::NoAgent(format!("`{agent}` cannot be read: {e}")))?
                .map(|stored| stored.reference()),
            _ => None,
        };
        let agent = resolved.as_deref().unwrap_or(agent);
        self.ready_agent(agent).await?;
        self.post(Input::new(
            thread_id.clone(),
            InputBody::UseAgent {
                agent: agent.to_owned(),
            },
        ))
        .await
    }

    /// Switches the model `thread_id`'s completions use to `model` (`PROVIDER:MODEL`, as an agent
    /// file names one), from its next completion on; `None`, or the agent's own model named,
    /// goes back to its agent's model. Refused for an unknown or closed thread, a model the
    /// deployment does not list ([`Front::allowed_models`]: refused on the spec's text, nothing
    /// it names is read) and a model this host cannot make ([`PostError::BadModel`], saying
    /// why).
    async fn use_model(
        &self,
        thread_id: &ThreadId,
        model: Option<&str>,
    ) -> Result<InputId, PostError> {
        let record = self.open_record(thread_id).await?;
        let model = match model {
            Some(spec) if self.agent_model(&record).await.as_deref() == Some(spec) => None,
            Some(spec) => {
                self.allowed_models()
                    .check(spec)
                    .map_err(|why| PostError::BadModel {
                        spec: spec.to_owned(),
                        why,
                    })?;
                self.ready_model(spec).await?;
                Some(spec.to_owned())
            }
            None => None,
        };
        self.post(Input::new(thread_id.clone(), InputBody::UseModel { model }))
            .await
    }

    /// Sets the lifetime budget of the conversation `thread_id` is part of (its root thread
    /// keeps it): dollars, tokens or both; what `budget` leaves out stays as it was. Threads of
    /// the conversation stopped at the budget go on once it is no longer reached. Returns the
    /// input and the root it went to. Refused for an unknown or closed thread or root, and a
    /// budget that sets nothing or sets a zero ([`PostError::BadBudget`]).
    async fn set_budget(
        &self,
        thread_id: &ThreadId,
        budget: Budget,
    ) -> Result<(InputId, ThreadId), PostError> {
        budget.check().map_err(PostError::BadBudget)?;
        let record = self.open_record(thread_id).await?;
        let root = record.root().clone();
        if root != *thread_id {
            self.open_record(&root).await?;
        }
        let input = self
            .post(Input::new(
                root.clone(),
                InputBody::SetBudget {
                    usd: budget.usd,
                    tokens: budget.tokens,
                },
            ))
            .await?;
        Ok((input, root))
    }

    /// Creates a recurring schedule on the thread, as its `schedule_create` tool would from
    /// `args`. Returns the new schedule's id and its description (the next three occurrences);
    /// a bad rule, zone or time is refused ([`PostError::BadSchedule`]) naming the problem.
    async fn create_schedule(
        &self,
        thread_id: &ThreadId,
        args: &serde_json::Value,
    ) -> Result<(String, String), PostError> {
        let record = self.open_record(thread_id).await?;
        let (id, text) =
            check_schedule(&record, self.now(), args).map_err(PostError::BadSchedule)?;
        self.post(Input::new(
            thread_id.clone(),
            InputBody::ScheduleCreate {
                schedule_id: id.clone(),
                args: args.clone(),
            },
        ))
        .await?;
        Ok((id, text))
    }

    /// Deletes one of the thread's recurring schedules. Refused for an unknown or closed thread,
    /// or a schedule it does not have ([`PostError::NoSchedule`]).
    async fn delete_schedule(
        &self,
        thread_id: &ThreadId,
        schedule_id: &str,
    ) -> Result<InputId, PostError> {
        let record = self.open_record(thread_id).await?;
        if !record.schedules.iter().any(|s| s.id == schedule_id) {
            return Err(PostError::NoSchedule {
                thread: thread_id.clone(),
                schedule: schedule_id.to_owned(),
            });
        }
        self.post(Input::new(
            thread_id.clone(),
            InputBody::ScheduleDelete {
                schedule_id: schedule_id.to_owned(),
            },
        ))
        .await
    }

    /// Hands the result of a client tool's call (an agent file's `client_tools:`) to the
    /// thread that waits for it. Refused for an unknown or closed thread, for a call that was
    /// answered already ([`PostError::Answered`], naming the answer that stands: the first
    /// one), and for a call that does not wait for the application ([`PostError::NoClientCall`]:
    /// cancelled, past its deadline, not a client tool's, never was).
    async fn post_tool_result(
        &self,
        thread_id: &ThreadId,
        call_id: &crate::ids::CallId,
        text: String,
        is_error: bool,
    ) -> Result<InputId, PostError> {
        let record = self.open_record(thread_id).await?;
        let post = super::poster(self);
        let now = self.now();
        super::give_tool_result(self.threads(), &post, &record, call_id, text, is_error, now).await
    }

    /// The thread's record, refused when it is unknown or closed.
    async fn open_record(&self, thread_id: &ThreadId) -> Result<ThreadRecord, PostError> {
        match self.threads().load_record(thread_id).await? {
            None => Err(PostError::Unknown(thread_id.clone())),
            Some(record) if record.status == ThreadStatus::Closed => {
                Err(PostError::Closed(thread_id.clone()))
            }
            Some(record) => Ok(record),
        }
    }
}

/// The embedded runtime's front: inputs are made durable in the store's inbox, then go to the
/// thread's worker ([`AgentSystem::accept`]).
#[async_trait]
impl Front for AgentSystem {
    fn threads(&self) -> &dyn ThreadStore {
        self.inner.store.as_ref()
    }

    fn follow(&self, thread_id: &ThreadId) -> Option<super::Following> {
        Some(AgentSystem::follow(self, thread_id))
    }

    fn library(&self) -> Option<&Library> {
        self.inner.library.as_deref()
    }

    fn agent_catalog(&self) -> Option<&dyn AgentCatalog> {
        self.inner.catalog.as_deref()
    }

    fn default_agent_name(&self) -> &str {
        &self.inner.default_agent
    }

    async fn ready_agent(&self, agent: &str) -> Result<(), PostError> {
        let agents = &self.inner.agents;
        if let Err(why) = agents.prepare(agent).await {
            return Err(PostError::NoAgent(format!(
                "`{agent}` cannot run here: {why}"
            )));
        }
        if agents.agent(agent).is_none() {
            return Err(PostError::NoAgent(format!(
                "there is no agent `{agent}` here (`infinity agents list` shows the stored ones)"
            )));
        }
        Ok(())
    }

    async fn ready_model(&self, spec: &str) -> Result<(), PostError> {
        let refused = |why| PostError::BadModel {
            spec: spec.to_owned(),
            why,
        };
        let library = self
            .inner
            .library
            .as_ref()
            .ok_or_else(|| refused(crate::library::ModelSourceError::NoSource))?;
        library.prepare_model(spec).await.map_err(refused)
    }

    fn allowed_models(&self) -> AllowedModels {
        self.inner
            .library
            .as_ref()
            .and_then(|library| library.allowed_models())
            .cloned()
            .unwrap_or_default()
    }

    async fn agent_model(&self, record: &ThreadRecord) -> Option<String> {
        let agent = self.inner.agents.agent(&record.agent)?;
        Some(agent.model.name().to_owned())
    }

    fn now(&self) -> jiff::Timestamp {
        self.inner.clock.now()
    }

    async fn post(&self, input: Input) -> Result<InputId, PostError> {
        self.accept(input).await
    }
}

/// Checks a person's schedule against the thread as it is now: a fresh id, and the description
/// the thread will record (or what is wrong).
pub fn check_schedule(
    record: &ThreadRecord,
    now: jiff::Timestamp,
    args: &serde_json::Value,
) -> Result<(String, String), String> {
    use crate::ids::IdSource;
    // The arguments the tool takes, checked as a model's call to it would be: a field it does
    // not know, or one of the wrong type, is named.
    if let Some(spec) = crate::tools::builtin_tools()
        .iter()
        .map(|t| t.spec())
        .find(|s| s.name == "schedule_create")
    {
        if let Ok(validator) = jsonschema::validator_for(&spec.input_schema) {
            if let Some(why) = crate::tools::argument_problems(&validator, args, &spec.input_schema)
            {
                return Err(why);
            }
        }
    }
    let mut ids = crate::ids::RandomIds;
    let id = format!("sch-{:012x}", ids.next_bits() & 0xffff_ffff_ffff);
    let mut scratch = record.clone();
    let text = crate::tools::create_schedule(
        &mut scratch,
        now,
        &mut ids,
        &mut Vec::new(),
        args,
        Some(id.clone()),
    )?;
    Ok((id, text))
}

/// Whether `record`'s thread waits for the application's result of `call_id` (a client tool's
/// call without a result yet); [`PostError::NoClientCall`] says why not.
pub fn check_client_call(
    record: &ThreadRecord,
    call_id: &crate::ids::CallId,
) -> Result<(), PostError> {
    let thread_id = &record.id;
    match record.pending(call_id) {
        Some(pending) if pending.client.is_some() => Ok(()),
        Some(pending) if pending.approval.is_some() => Err(PostError::NoClientCall {
            reason: ClientCallRefusal::AwaitsApproval,
            text: format!(
                "call {call_id} of thread {thread_id} (`{}`) waits for a person's approval and \
                 has not run: a client tool's call is shown to its application \
                 (`client_tool_call`) once approved",
                pending.tool
            ),
        }),
        Some(pending) => Err(PostError::NoClientCall {
            reason: ClientCallRefusal::NotClientTool,
            text: format!(
                "call {call_id} of thread {thread_id} is a call of `{}`, not of a client tool: \
                 its result comes from whoever runs that tool",
                pending.tool
            ),
        }),
        None => {
            let waiting: Vec<&str> = record
                .pending_calls
                .iter()
                .filter(|p| p.client.is_some())
                .map(|p| p.call_id.as_str())
                .collect();
            Err(PostError::NoClientCall {
                reason: ClientCallRefusal::NotWaiting,
                text: format!(
                    "thread {thread_id} has no call {call_id} waiting for a result: it has its \
                     result already (answered, cancelled, or past its deadline), or never was; \
                     client calls waiting: {}",
                    if waiting.is_empty() {
                        "none".to_owned()
                    } else {
                        waiting.join(", ")
                    }
                ),
            })
        }
    }
}

/// The input that hands the application's result of a client tool's call to its thread. Its id
/// comes from the call, so answers sent twice are taken once (the first).
pub fn client_result(
    thread_id: &ThreadId,
    call_id: &crate::ids::CallId,
    text: String,
    is_error: bool,
) -> Input {
    Input {
        id: InputId::derived(call_id.as_str(), "client-result"),
        thread_id: thread_id.clone(),
        body: if is_error {
            InputBody::tool_error(call_id.clone(), text)
        } else {
            InputBody::tool_result(call_id.clone(), text)
        },
    }
}
