//! What the table keeps aside: inputs too big for a message (`I#<id>`, until [`STASH_TTL`]),
//! effects set aside after failing (`F#...`), which operators list, retry and drop, and
//! input-queue messages no slice can use (`U#<message id>`, until [`STASH_TTL`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use infinity_agent_core::ids::{EffectId, ThreadId};
use infinity_agent_core::input::Input;
use infinity_agent_core::store::StoreError;
use serde::Serialize;

use super::{
    blob::Blob, corrupt, now_epoch, pk, sdk_error, DynamoThreadStore, FailedEffect, UnusableInput,
    INLINE_LIMIT, STASH_TTL, UNUSABLE_BODY_BYTES,
};
use crate::wire::StoredInput;

impl DynamoThreadStore {
    /// Stores an input too big for a message, for [`STASH_TTL`]; the message carries the
    /// returned reference. Storing the same input again is harmless.
    pub async fn stash_input(&self, input: &Input) -> Result<StoredInput, StoreError> {
        let expires = now_epoch() + STASH_TTL.as_secs() as i64;
        self.put_value(
            &pk(&input.thread_id),
            &format!("I#{}", input.id),
            input,
            "storing a big input",
            Some(expires),
        )
        .await?;
        Ok(StoredInput {
            thread_id: input.thread_id.clone(),
            id: input.id.clone(),
        })
    }

    /// A stored input, if the table still has it.
    pub async fn stashed_input(&self, stored: &StoredInput) -> Result<Option<Input>, StoreError> {
        let pk = pk(&stored.thread_id);
        let out = self
            .client
            .get_item()
            .table_name(&*self.table)
            .key("pk", AttributeValue::S(pk.clone()))
            .key("sk", AttributeValue::S(format!("I#{}", stored.id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("reading a stored input", e))?;
        let Some(item) = out.item() else {
            return Ok(None);
        };
        let input: Input = self.read_body(&pk, item, "stored input").await?;
        if input.id != stored.id || input.thread_id != stored.thread_id {
            return Err(corrupt(
                "stored input",
                format!(
                    "I#{} of thread {} holds input {} of thread {}",
                    stored.id, stored.thread_id, input.id, input.thread_id
                ),
            ));
        }
        Ok(Some(input))
    }

    /// Moves everything left in a thread's outbox to its failed effects (`F#<time>#<n>`, in
    /// the order they were in), after `attempts` failed attempts, the last for `reason`; returns
    /// what was set aside. The thread then goes on without them; an operator retries or drops
    /// them.
    pub async fn set_aside_outbox(
        &self,
        thread_id: &ThreadId,
        reason: &str,
        attempts: u32,
    ) -> Result<Vec<FailedEffect>, StoreError> {
        let pk = pk(thread_id);
        let now = jiff::Timestamp::now();
        let mut set_aside = Vec::new();
        for item in self.outbox_items(thread_id).await? {
            for effect in item.effects {
                let failed = FailedEffect {
                    effect,
                    reason: reason.to_owned(),
                    attempts,
                    failed_at: now,
                };
                let sk = format!(
                    "F#{:020}#{:05}",
                    now.as_microsecond().max(0),
                    set_aside.len()
                );
                self.put_value(&pk, &sk, &failed, "setting an effect aside", None)
                    .await?;
                set_aside.push(failed);
            }
            // Kept as a failed effect first: a crash here leaves it in both places, and
            // receivers deduplicate what is performed twice.
            self.delete_with_parts(&pk, &item.sk, "setting the outbox aside")
                .await?;
        }
        Ok(set_aside)
    }

    /// Keeps an input-queue message no slice can use under its thread (`U#<message id>`, for
    /// [`STASH_TTL`], as long as the dead-letter queue would have kept it): the message is then
    /// acknowledged, and the rest of its group goes on. Its body is kept up to
    /// [`UNUSABLE_BODY_BYTES`]. Keeping the same message again replaces what was kept.
    pub async fn keep_unusable_input(
        &self,
        thread_id: &ThreadId,
        message_id: &str,
        body: &str,
        reason: &str,
    ) -> Result<UnusableInput, StoreError> {
        let mut end = body.len().min(UNUSABLE_BODY_BYTES);
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        let kept = UnusableInput {
            message_id: message_id.to_owned(),
            body: body[..end].to_owned(),
            body_bytes: body.len(),
            reason: reason.to_owned(),
            kept_at: jiff::Timestamp::now(),
        };
        let expires = now_epoch() + STASH_TTL.as_secs() as i64;
        self.put_value(
            &pk(thread_id),
            &format!("U#{message_id}"),
            &kept,
            "keeping an unusable input aside",
            Some(expires),
        )
        .await?;
        Ok(kept)
    }

    /// The unusable input-queue messages kept under a thread, oldest first.
    pub async fn unusable_inputs(
        &self,
        thread_id: &ThreadId,
    ) -> Result<Vec<UnusableInput>, StoreError> {
        let pk = pk(thread_id);
        let mut kept: Vec<UnusableInput> = Vec::new();
        for item in self.query_all(&pk, "U#", "U#~").await? {
            kept.push(self.read_body(&pk, &item, "unusable input").await?);
        }
        kept.sort_by_key(|k| k.kept_at);
        Ok(kept)
    }

    /// Puts one value under `sk`, split into parts when it is big. With `expires` (epoch
    /// seconds) the item and its parts carry it as their `ttl`; without, they are kept for good.
    async fn put_value<T: Serialize>(
        &self,
        pk: &str,
        sk: &str,
        value: &T,
        what: &str,
        expires: Option<i64>,
    ) -> Result<(), StoreError> {
        let mut blob = Blob::new(value, what)?;
        if blob.json.len() > INLINE_LIMIT {
            self.write_parts(pk, &mut [&mut blob], expires).await?;
        }
        let mut item = HashMap::from([
            ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
            ("sk".to_owned(), AttributeValue::S(sk.to_owned())),
        ]);
        if let Some(expires) = expires {
            item.insert("ttl".to_owned(), AttributeValue::N(expires.to_string()));
        }
        blob.attributes(&mut item);
        self.client
            .put_item()
            .table_name(&*self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| sdk_error(what, e))?;
        Ok(())
    }

    /// A thread's failed effects with their sort keys, in the order they were set aside.
    async fn failed_items(
        &self,
        thread_id: &ThreadId,
    ) -> Result<Vec<(String, FailedEffect)>, StoreError> {
        let pk = pk(thread_id);
        let mut out = Vec::new();
        for item in self.query_all(&pk, "F#", "F#~").await? {
            let Some(AttributeValue::S(sk)) = item.get("sk") else {
                continue;
            };
            out.push((
                sk.clone(),
                self.read_body(&pk, &item, "failed effect").await?,
            ));
        }
        Ok(out)
    }

    /// A thread's failed effects, in the order they were set aside.
    pub async fn failed_effects(
        &self,
        thread_id: &ThreadId,
    ) -> Result<Vec<FailedEffect>, StoreError> {
        Ok(self
            .failed_items(thread_id)
            .await?
            .into_iter()
            .map(|(_, failed)| failed)
            .collect())
    }

    /// Puts failed effects back into the thread's outbox (`O#retry#...`, in their order), to be
    /// performed before the thread's next slice. Returns how many it found.
    pub async fn retry_failed(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<usize, StoreError> {
        let pk = pk(thread_id);
        let mut moved = 0;
        for (sk, failed) in self.failed_items(thread_id).await? {
            if !effect_ids.contains(&failed.effect.id) {
                continue;
            }
            let retry_sk = format!("O#retry#{}", sk.trim_start_matches("F#"));
            self.put_value(
                &pk,
                &retry_sk,
                &vec![failed.effect],
                "putting an effect back",
                None,
            )
            .await?;
            self.delete_with_parts(&pk, &sk, "putting an effect back")
                .await?;
            moved += 1;
        }
        Ok(moved)
    }

    /// Deletes failed effects for good. Returns how many it found.
    pub async fn drop_failed(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<usize, StoreError> {
        let pk = pk(thread_id);
        let mut dropped = 0;
        for (sk, failed) in self.failed_items(thread_id).await? {
            if effect_ids.contains(&failed.effect.id) {
                self.delete_with_parts(&pk, &sk, "dropping an effect")
                    .await?;
                dropped += 1;
            }
        }
        Ok(dropped)
    }
}
