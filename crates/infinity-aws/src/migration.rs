//! An AWS stack's side of moving a live conversation to or from another host (see
//! [`infinity_rap_runtime::migration`]): the table holds the conversation, and what a step commits
//! (forwarded inputs, timers armed again) is performed by the stack itself, before the thread's
//! next slice, which a nudge on the input queue starts.

use async_trait::async_trait;
use infinity_agent_core::effect::PendingEffect;
use infinity_agent_core::host::InputSender;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::input::{Input, InputBody};
use infinity_rap::signing::CallbackSigner;
use infinity_rap_runtime::client::RapClient;
use infinity_rap_runtime::migration::{Host, Performer};

use crate::queue::SqsInputSender;
use crate::store::DynamoThreadStore;

/// Has the stack perform a thread's outbox: a nudge on its input queue.
#[derive(Debug, Clone)]
pub struct Nudges(pub SqsInputSender);

#[async_trait]
impl Performer for Nudges {
    async fn perform(&self, thread_id: &ThreadId, _: &[PendingEffect], _: Option<u64>) {
        let nudge = Input::new(thread_id.clone(), InputBody::Nudge {});
        if let Err(err) = self.0.send_to_input_queue(&nudge).await {
            tracing::warn!(%err, "no nudge: the thread performs its outbox at its next input");
        }
    }
}

/// Which agents a stack runs, when known.
type Agents = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// What a move needs of a stack: its table, its input queue, its callback function's signer
/// (for the forwarding URLs of conversations moved in), a client for the conversation's tool
/// servers, and the agents it runs if known.
pub struct StackSide {
    store: DynamoThreadStore,
    nudges: Nudges,
    signer: CallbackSigner,
    client: RapClient,
    agents: Agents,
}

impl std::fmt::Debug for StackSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackSide")
            .field("store", &self.store)
            .field("receiver", &self.signer.base_url())
            .finish_non_exhaustive()
    }
}

impl StackSide {
    /// A stack's side from its parts; `signer` is the callback function's (its URL and secret).
    /// Conversations of any agent are taken in unless [`StackSide::with_agents`] says which the
    /// stack runs.
    pub fn new(store: DynamoThreadStore, queue: SqsInputSender, signer: CallbackSigner) -> Self {
        Self {
            store,
            nudges: Nudges(queue),
            client: RapClient::new(signer.clone()),
            signer,
            agents: Box::new(|_| true),
        }
    }

    /// The same side, taking in only conversations of these agents.
    pub fn with_agents(mut self, names: Vec<String>) -> Self {
        self.agents = Box::new(move |name| names.iter().any(|n| n == name));
        self
    }

    /// The stack as one side of a move.
    pub fn host(&self) -> Host<'_> {
        Host {
            store: &self.store,
            performer: &self.nudges,
            signer: &self.signer,
            client: &self.client,
            runs_agent: &*self.agents,
        }
    }
}
