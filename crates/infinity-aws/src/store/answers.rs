//! The answers that stand (`A#<call id>#<question or result>` items): put only if the call has none
//! (`attribute_not_exists`), so of two answers at once exactly one is kept; read strongly
//! consistent; deleted only while they are still the one kept (a condition on their body).
//! They have no `ttl`: a call may wait for its answer for as long as its thread lives.

use aws_sdk_dynamodb::types::AttributeValue;
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::input::{Answer, AnswerTo};
use infinity_agent_core::store::StoreError;

use super::{corrupt, pk, sdk_error, DynamoThreadStore};
use crate::item::is_condition_failure;

fn sk(call_id: &CallId, to: AnswerTo) -> String {
    format!("A#{call_id}#{}", to.as_str())
}

impl DynamoThreadStore {
    pub(super) async fn claim(
        &self,
        thread_id: &ThreadId,
        answer: &Answer,
    ) -> Result<Option<Answer>, StoreError> {
        let body = serde_json::to_string(answer).map_err(|e| corrupt("an answer", e))?;
        let put = self
            .client
            .put_item()
            .table_name(&*self.table)
            .item("pk", AttributeValue::S(pk(thread_id)))
            .item("sk", AttributeValue::S(sk(&answer.call_id, answer.to)))
            .item("body", AttributeValue::S(body))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match put {
            Ok(_) => Ok(None),
            Err(err) if is_condition_failure(&err) => {
                match self.standing(thread_id, &answer.call_id, answer.to).await? {
                    Some(standing) => Ok(Some(standing)),
                    // Withdrawn between the two requests: the call is open again.
                    None => Box::pin(self.claim(thread_id, answer)).await,
                }
            }
            Err(err) => Err(sdk_error("keeping an answer", err)),
        }
    }

    pub(super) async fn standing(
        &self,
        thread_id: &ThreadId,
        call_id: &CallId,
        to: AnswerTo,
    ) -> Result<Option<Answer>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&*self.table)
            .key("pk", AttributeValue::S(pk(thread_id)))
            .key("sk", AttributeValue::S(sk(call_id, to)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("reading an answer", e))?;
        match out.item().and_then(|item| item.get("body")) {
            Some(AttributeValue::S(body)) => serde_json::from_str(body)
                .map(Some)
                .map_err(|e| corrupt("an answer", e)),
            Some(_) => Err(corrupt("an answer", "its body is not a string")),
            None => Ok(None),
        }
    }

    pub(super) async fn withdraw(
        &self,
        thread_id: &ThreadId,
        answer: &Answer,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_string(answer).map_err(|e| corrupt("an answer", e))?;
        let deleted = self
            .client
            .delete_item()
            .table_name(&*self.table)
            .key("pk", AttributeValue::S(pk(thread_id)))
            .key("sk", AttributeValue::S(sk(&answer.call_id, answer.to)))
            .condition_expression("body = :body")
            .expression_attribute_values(":body", AttributeValue::S(body))
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            // Another answer stands (or none): nothing to forget.
            Err(err) if is_condition_failure(&err) => Ok(()),
            Err(err) => Err(sdk_error("withdrawing an answer", err)),
        }
    }
}
