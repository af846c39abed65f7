use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{EventId, EventName, EventPayload, WebhookId, WorkspaceId};

use crate::models::delivery::NewDeliveryRow;
use crate::pool::{Dialect as _, with_conn, write_tx};
use crate::schema::{deliveries, events};
use crate::{DeliveryState, Error, Result, Store};

#[derive(Debug, Insertable)]
#[diesel(table_name = events)]
struct NewEventRow<'a> {
    id: &'a str,
    workspace_id: &'a str,
    event: &'a str,
    payload: &'a str,
    occurred_at: i64,
}

impl Store {
    /// The outbox write: stores the event with one pending delivery for each enabled
    /// webhook of its workspace that subscribes to it, in one transaction, so that a
    /// crash leaves either both or neither. Answers the webhooks the event will reach.
    ///
    /// A webhook being deleted or disabled at the same moment either gets the
    /// delivery and then loses it with the webhook, or does not get it: never a
    /// delivery to a webhook that is gone.
    pub async fn record_event(&self, payload: &EventPayload) -> Result<Vec<WebhookId>> {
        let workspace = payload.workspace_id.to_string();
        let event_id = payload.id.to_string();
        let json = payload.to_json();
        let occurred_at = payload.occurred_at.unix_millis();
        write_tx!(self, |conn| {
            let Some(candidates) = conn.enabled_webhooks_for_fanout(&workspace).await? else {
                return Err(Error::not_found("workspace", &workspace));
            };
            let mut reached = Vec::new();
            for row in candidates {
                let webhook = row.into_domain()?;
                if webhook.subscribes_to(payload.event) {
                    reached.push(webhook.id);
                }
            }
            diesel::insert_into(events::table)
                .values(NewEventRow {
                    id: &event_id,
                    workspace_id: &workspace,
                    event: payload.event.as_str(),
                    payload: &json,
                    occurred_at,
                })
                .execute(conn)
                .await?;
            if !reached.is_empty() {
                conn.notify_workers().await?;
            }
            // One statement per delivery: diesel's SQLite batch insert is not available
            // through the async wrapper, and a workspace has at most 10 webhooks.
            for webhook_id in &reached {
                diesel::insert_into(deliveries::table)
                    .values(NewDeliveryRow {
                        event_id: &event_id,
                        webhook_id: &webhook_id.to_string(),
                        state: DeliveryState::Pending.as_str(),
                        attempts: 0,
                        next_attempt_at: occurred_at,
                        created_at: occurred_at,
                    })
                    .execute(conn)
                    .await?;
            }
            Ok(reached)
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
