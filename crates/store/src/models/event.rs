use std::collections::HashMap;
use std::collections::hash_map::Entry;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{EventId, EventName, EventPayload, Webhook, WebhookId, WorkspaceId};

use crate::models::webhook::WebhookRow;
use crate::pool::{Dialect as _, with_conn, write_tx};
use crate::schema::events;
use crate::{Error, Result, Store};

/// An event as the outbox insert takes it.
pub(crate) struct NewEvent {
    pub(crate) id: String,
    pub(crate) workspace_id: String,
    pub(crate) event: &'static str,
    pub(crate) payload: String,
    pub(crate) occurred_at: i64,
}

/// A pending delivery as the outbox insert takes it: no attempt yet, due at once.
pub(crate) struct NewDelivery {
    pub(crate) event_id: String,
    pub(crate) webhook_id: String,
    pub(crate) due_at: i64,
}

impl Store {
    /// The outbox write: stores the event with one pending delivery for each enabled
    /// webhook of its workspace that subscribes to it, in one transaction, so that a
    /// crash leaves either both or neither. Answers the webhooks the event will reach.
    ///
    /// A webhook being deleted or disabled at the same moment either gets the
    /// delivery and then loses it with the webhook, or does not get it: never a
    /// delivery to a webhook that is gone.
    ///
    /// Concurrent calls share one transaction (see `loader.rs`): each returns once
    /// the transaction holding its event committed. An event of an unknown workspace
    /// fails alone; a failing transaction fails every event in it, none stored.
    pub async fn record_event(&self, payload: &EventPayload) -> Result<Vec<WebhookId>> {
        self.loaders().events.submit(payload.clone()).await?
    }

    /// The outbox write of a batch of events, in one transaction; answers each
    /// event's webhooks, or why it was not stored.
    pub(crate) async fn record_events(
        &self,
        payloads: Vec<EventPayload>,
    ) -> Result<Vec<Result<Vec<WebhookId>>>> {
        write_tx!(self, |conn| {
            // The webhooks an event of each workspace reaches, read once per batch.
            let mut fanout: HashMap<WorkspaceId, Option<Vec<Webhook>>> = HashMap::new();
            let mut answers = Vec::with_capacity(payloads.len());
            let mut new_events = Vec::with_capacity(payloads.len());
            let mut new_deliveries = Vec::new();
            for payload in &payloads {
                let workspace = payload.workspace_id.to_string();
                if let Entry::Vacant(slot) = fanout.entry(payload.workspace_id) {
                    let candidates = match conn.enabled_webhooks_for_fanout(&workspace).await? {
                        Some(rows) => Some(
                            rows.into_iter()
                                .map(WebhookRow::into_domain)
                                .collect::<Result<Vec<_>>>()?,
                        ),
                        None => None,
                    };
                    slot.insert(candidates);
                }
                let Some(Some(candidates)) = fanout.get(&payload.workspace_id) else {
                    answers.push(Err(Error::not_found("workspace", &workspace)));
                    continue;
                };
                let reached: Vec<WebhookId> = candidates
                    .iter()
                    .filter(|webhook| webhook.subscribes_to(payload.event))
                    .map(|webhook| webhook.id)
                    .collect();
                let event_id = payload.id.to_string();
                let occurred_at = payload.occurred_at.unix_millis();
                new_deliveries.extend(reached.iter().map(|webhook_id| NewDelivery {
                    event_id: event_id.clone(),
                    webhook_id: webhook_id.to_string(),
                    due_at: occurred_at,
                }));
                new_events.push(NewEvent {
                    id: event_id,
                    workspace_id: workspace,
                    event: payload.event.as_str(),
                    payload: payload.to_json(),
                    occurred_at,
                });
                answers.push(Ok(reached));
            }
            // The whole batch in one or two statements, whatever its size.
            if !new_events.is_empty() {
                conn.insert_outbox(&new_events, &new_deliveries).await?;
            }
            if !new_deliveries.is_empty() {
                conn.notify_workers().await?;
            }
            Ok(answers)
        })
    }

    /// The stored payload of an event, byte for byte as it is delivered and signed;
    /// `None` when there is no such event.
    pub async fn event_payload(&self, id: EventId) -> Result<Option<String>> {
        let id = id.to_string();
        let payload: Option<String> = with_conn!(self, |conn| {
            events::table
                .find(&id)
                .select(events::payload)
                .first(conn)
                .await
                .optional()?
        });
        Ok(payload)
    }

    /// The payloads of the last `limit` events of this name in the workspace, newest
    /// first, byte for byte as delivered: what the API's sample endpoint returns.
    pub async fn recent_event_payloads(
        &self,
        workspace_id: WorkspaceId,
        event: EventName,
        limit: u32,
    ) -> Result<Vec<String>> {
        let workspace = workspace_id.to_string();
        let payloads: Vec<String> = with_conn!(self, |conn| {
            events::table
                .filter(events::workspace_id.eq(&workspace))
                .filter(events::event.eq(event.as_str()))
                .order((events::occurred_at.desc(), events::id.desc()))
                .limit(i64::from(limit))
                .select(events::payload)
                .load(conn)
                .await?
        });
        Ok(payloads)
    }
}
