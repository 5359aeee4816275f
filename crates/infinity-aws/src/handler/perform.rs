//! The agent handler's effects.

use super::*;

/// Effects on AWS: inputs go to the FIFO queue, timers to the relay queue or Scheduler (both
/// durable, so an effect is done once accepted), output to the output queue.
#[async_trait]
impl EffectPerformer for AgentHandler {
    async fn send(&self, input: &Input, _from: &EffectRef) -> Result<Handoff, SendError> {
        self.sender.send_to_input_queue(input).await?;
        Ok(Handoff::Delivered)
    }

    async fn send_all(&self, inputs: &[(&Input, EffectRef)]) -> Vec<Result<Handoff, SendError>> {
        let inputs: Vec<&Input> = inputs.iter().map(|(input, _)| *input).collect();
        self.sender
            .send_all(&inputs)
            .await
            .into_iter()
            .map(|sent| sent.map(|()| Handoff::Delivered))
            .collect()
    }

    async fn send_at(
        &self,
        input: &Input,
        due: Timestamp,
        _from: &EffectRef,
    ) -> Result<Handoff, SendError> {
        self.timers.schedule(input.clone(), due).await?;
        Ok(Handoff::Delivered)
    }

    fn library(&self) -> Option<&Library> {
        Some(&self.library)
    }

    fn tool_dispatcher(&self) -> Option<&dyn ToolDispatcher> {
        Some(&self.dispatcher)
    }

    /// Events with no effect behind them get fresh ids (the handler's own go through
    /// [`EffectPerformer::output_effects`] with ids derived from what they are about).
    async fn output(&self, events: &[&OutputEvent]) -> Result<(), OutputError> {
        let ids: Vec<EffectId> = events.iter().map(|_| EffectId::generate()).collect();
        let events: Vec<(&EffectId, &OutputEvent)> =
            ids.iter().zip(events.iter().copied()).collect();
        self.output_effects(&events).await
    }

    /// Each event goes out with the id of its effect (see [`OutputQueue::publish`]).
    async fn output_effects(
        &self,
        events: &[(&EffectId, &OutputEvent)],
    ) -> Result<(), OutputError> {
        match &self.output {
            Some(queue) => queue.publish(events).await,
            None => Ok(()),
        }
    }
}
