//! [`RemoteDispatcher`]: a host's `remote_exec` calls go to its remotes' hub, every other call
//! to its tool servers.

use std::sync::Arc;

use async_trait::async_trait;

use crate::remote::{ExecCall, RemoteHub, REMOTE_EXEC};
use infinity_agent_core::effect::{Notification, ToolInvocation};
use infinity_agent_core::host::{DispatchError, ToolDispatcher};
use infinity_agent_core::input::Input;

/// Hands `remote_exec` calls to a [`RemoteHub`], everything else to the tool servers' client.
#[derive(Debug)]
pub struct RemoteDispatcher {
    /// The remotes.
    pub hub: Arc<dyn RemoteHub>,
    /// The tool servers' client, if the host has one.
    pub rest: Option<Arc<dyn ToolDispatcher>>,
}

#[async_trait]
impl ToolDispatcher for RemoteDispatcher {
    async fn dispatch(&self, invocation: &ToolInvocation) -> Result<(), DispatchError> {
        if invocation.tool == REMOTE_EXEC && invocation.server.is_none() {
            let call = ExecCall::of(invocation);
            // The hub's error says what is wrong (a gone remote, an unreachable store).
            return self
                .hub
                .dispatch(call)
                .await
                .map_err(|e| DispatchError::Refused(e.to_string()));
        }
        match &self.rest {
            Some(rest) => rest.dispatch(invocation).await,
            None => Err(DispatchError::NoServer(invocation.tool.clone())),
        }
    }

    async fn notify(&self, notification: &Notification) {
        if let Notification::CancelToolCall {
            thread_id,
            call_id,
            tool,
            ..
        } = notification
        {
            if tool == REMOTE_EXEC {
                self.hub.cancel(thread_id, call_id).await;
                return;
            }
        }
        if let Some(rest) = &self.rest {
            rest.notify(notification).await;
        }
    }

    async fn forward(&self, url: &str, input: &Input) -> Result<(), DispatchError> {
        match &self.rest {
            Some(rest) => rest.forward(url, input).await,
            None => Err(DispatchError::NoServer("forwarding".to_owned())),
        }
    }
}
