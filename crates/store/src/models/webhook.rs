use std::collections::HashMap;

use diesel::QueryResult;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_batch::{Batcher, keyed_read};
use hookline_domain::limits::MAX_WEBHOOKS;
use hookline_domain::{
    DeliveryAttempt, EventName, TargetPolicy, Timestamp, Webhook, WebhookDescription, WebhookId,
    WebhookSecret, WebhookSource, WebhookUrl, WorkspaceId, subscribed_events,
};

use crate::db::Db;
use crate::error::Stored as _;
use crate::models::delivery::DeliveryAttemptRow;
use crate::models::workspace::LockWorkspace as _;
use crate::models::{by_workspace, timestamp};
use crate::pool::{PgConn, SqliteConn, with_conn, write_conn, write_tx};
use crate::schema::{delivery_attempts, webhooks, workspaces};
use crate::text_in::text_in;
use crate::{Error, Result};
use hookline_domain::Refusal;

/// A webhook as read back: everything but the secret.
#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = webhooks)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
pub(crate) struct WebhookRow {
    id: String,
    workspace_id: String,
    url: String,
    events: String,
    enabled: bool,
    description: String,
    source: String,
    created_at: i64,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = webhooks)]
struct NewWebhookRow<'a> {
    id: &'a str,
    workspace_id: &'a str,
    url: &'a str,
    events: &'a str,
    enabled: bool,
    description: &'a str,
    source: &'a str,
    secret: &'a str,
    created_at: i64,
}

/// Separates stored event names; no event name contains it.
const EVENT_SEPARATOR: &str = ",";

impl WebhookRow {
    pub(crate) fn into_domain(self) -> Result<Webhook> {
        Ok(Webhook {
            id: self.id.parse().stored("webhook id")?,
            workspace_id: self.workspace_id.parse().stored("webhook workspace_id")?,
            // The target policy was applied when the webhook was made; delivery checks
            // the resolved addresses again. Reading back must not lose a webhook.
            url: WebhookUrl::parse(&self.url, TargetPolicy::AllowPrivate).stored("webhook url")?,
            events: subscribed_events(self.events.split(EVENT_SEPARATOR))
                .stored("webhook events")?,
            enabled: self.enabled,
            description: WebhookDescription::parse(&self.description)
                .stored("webhook description")?,
            source: self.source.parse().stored("webhook source")?,
            created_at: timestamp(self.created_at, "webhook created_at")?,
        })
    }
}

/// What it takes to make a webhook. Validation happened when these values were
/// parsed; the store adds the id, the time, and the per-workspace limit.
#[derive(Debug, Clone, Copy)]
pub struct NewWebhook<'a> {
    pub workspace_id: WorkspaceId,
    pub url: &'a WebhookUrl,
    pub events: &'a [EventName],
    pub description: &'a WebhookDescription,
    pub source: WebhookSource,
    pub secret: &'a WebhookSecret,
}

/// Disables the webhook of id `$id` and cancels its pending deliveries, retries
/// included, on `$conn` (inside the caller's transaction): what disabling a webhook
/// means wherever it happens (by hand, or a `410 Gone`).
macro_rules! disable_webhook {
    ($conn:expr, $id:expr) => {{
        use hookline_domain::DeliveryState;
        use $crate::schema::{deliveries, webhooks};
        diesel::update(webhooks::table.find($id))
            .set(webhooks::enabled.eq(false))
            .execute($conn)
            .await?;
        diesel::update(deliveries::table)
            .filter(deliveries::webhook_id.eq($id))
            .filter(deliveries::state.eq(DeliveryState::Pending.as_str()))
            .set(deliveries::state.eq(DeliveryState::Cancelled.as_str()))
            .execute($conn)
            .await?;
    }};
}
pub(crate) use disable_webhook;

/// The workspaces' webhooks and their attempt logs, for the use-case layer.
#[derive(Debug, Clone)]
pub struct Webhooks {
    pub(crate) db: Db,
}

impl Webhooks {
    /// Makes an enabled webhook. Refused when the workspace already has
    /// [`MAX_WEBHOOKS`] webhooks (enabled or not, from the API or Settings), however
    /// many callers race.
    pub async fn create(&self, new: NewWebhook<'_>) -> Result<Webhook> {
        let workspace = new.workspace_id.to_string();
        let id = WebhookId::generate();
        let id_text = id.to_string();
        let events = new
            .events
            .iter()
            .map(|event| event.as_str())
            .collect::<Vec<_>>()
            .join(EVENT_SEPARATOR);
        let created_at = Timestamp::now();
        let row = NewWebhookRow {
            id: &id_text,
            workspace_id: &workspace,
            url: new.url.as_str(),
            events: &events,
            enabled: true,
            description: new.description.as_str(),
            source: new.source.as_str(),
            secret: new.secret.expose(),
            created_at: created_at.unix_millis(),
        };
        write_tx!(self.db, |conn| {
            if !conn.lock_workspace(&workspace).await? {
                return Err(Error::not_found("workspace", &workspace));
            }
            let existing: i64 = webhooks::table
                .filter(webhooks::workspace_id.eq(&workspace))
                .count()
                .get_result(conn)
                .await?;
            if existing >= MAX_WEBHOOKS as i64 {
                return Err(Refusal::TooManyWebhooks {
                    workspace: new.workspace_id,
                    limit: MAX_WEBHOOKS,
                }
                .into());
            }
            diesel::insert_into(webhooks::table)
                .values(&row)
                .execute(conn)
                .await?;
            Ok(())
        })?;
        Ok(Webhook {
            id,
            workspace_id: new.workspace_id,
            url: new.url.clone(),
            events: new.events.to_vec(),
            enabled: true,
            description: new.description.clone(),
            source: new.source,
            created_at,
        })
    }

    /// Every webhook of the workspace, oldest first. Concurrent callers share one
    /// query (see `loader.rs`).
    pub async fn list(&self, workspace_id: WorkspaceId) -> Result<Vec<Webhook>> {
        Ok(self.coalesced().submit(workspace_id).await?)
    }

    fn coalesced(&self) -> &Batcher<WorkspaceId, Vec<Webhook>, Error> {
        self.db.webhooks_by_workspace.get_or_init(|| {
            let webhooks = Webhooks {
                db: self.db.detached(),
            };
            Batcher::spawn(keyed_read(move |ids| {
                let webhooks = webhooks.clone();
                Box::pin(async move { webhooks.list_of(ids).await })
            }))
        })
    }

    /// The webhooks of each workspace, oldest first, in one query.
    async fn list_of(
        &self,
        workspace_ids: Vec<WorkspaceId>,
    ) -> Result<HashMap<WorkspaceId, Vec<Webhook>>> {
        let ids: Vec<String> = workspace_ids.iter().map(ToString::to_string).collect();
        let rows: Vec<WebhookRow> = with_conn!(self.db, |conn| {
            webhooks::table
                .filter(text_in(webhooks::workspace_id, ids))
                .order((webhooks::created_at, webhooks::id))
                .select(WebhookRow::as_select())
                .load(conn)
                .await?
        });
        by_workspace(rows, WebhookRow::into_domain, |webhook| {
            webhook.workspace_id
        })
    }

    pub async fn get(&self, id: WebhookId) -> Result<Option<Webhook>> {
        let id = id.to_string();
        let row: Option<WebhookRow> = with_conn!(self.db, |conn| {
            webhooks::table
                .find(&id)
                .select(WebhookRow::as_select())
                .first(conn)
                .await
                .optional()?
        });
        row.map(WebhookRow::into_domain).transpose()
    }

    /// Enables or disables the webhook; `None` when there is no such webhook.
    /// Disabling cancels its pending deliveries, retries included, in the same
    /// transaction.
    pub async fn set_enabled(&self, id: WebhookId, enabled: bool) -> Result<Option<Webhook>> {
        let id = id.to_string();
        let row: Option<WebhookRow> = write_tx!(self.db, |conn| {
            if !enabled {
                disable_webhook!(conn, &id);
            } else {
                diesel::update(webhooks::table.find(&id))
                    .set(webhooks::enabled.eq(true))
                    .execute(conn)
                    .await?;
            }
            Ok(webhooks::table
                .find(&id)
                .select(WebhookRow::as_select())
                .first(conn)
                .await
                .optional()?)
        })?;
        row.map(WebhookRow::into_domain).transpose()
    }

    /// Deletes the webhook with its deliveries and attempt log; answers whether there
    /// was one. With `in_workspace`, a webhook of another workspace is left alone.
    pub async fn delete(&self, id: WebhookId, in_workspace: Option<WorkspaceId>) -> Result<bool> {
        let id = id.to_string();
        let workspace = in_workspace.map(|ws| ws.to_string());
        let deleted = write_conn!(self.db, |conn| {
            // Deliveries and attempts go with it (ON DELETE CASCADE), in this statement.
            let mut delete = diesel::delete(webhooks::table.find(&id)).into_boxed();
            if let Some(workspace) = &workspace {
                delete = delete.filter(webhooks::workspace_id.eq(workspace));
            }
            delete.execute(conn).await?
        });
        Ok(deleted > 0)
    }

    /// The signing secret of a webhook; `None` when there is no such webhook. Read
    /// only to sign: it is never part of a [`Webhook`].
    pub async fn secret(&self, id: WebhookId) -> Result<Option<WebhookSecret>> {
        let id = id.to_string();
        let secret: Option<String> = with_conn!(self.db, |conn| {
            webhooks::table
                .find(&id)
                .select(webhooks::secret)
                .first(conn)
                .await
                .optional()?
        });
        secret
            .map(|text| WebhookSecret::parse(&text).stored("webhook secret"))
            .transpose()
    }

    /// The attempt log of a webhook, newest first, at most `limit` entries.
    pub async fn attempts(
        &self,
        webhook_id: WebhookId,
        limit: u32,
    ) -> Result<Vec<DeliveryAttempt>> {
        let webhook_id = webhook_id.to_string();
        let rows: Vec<DeliveryAttemptRow> = with_conn!(self.db, |conn| {
            delivery_attempts::table
                .filter(delivery_attempts::webhook_id.eq(&webhook_id))
                .order((
                    delivery_attempts::attempted_at.desc(),
                    delivery_attempts::event_id.desc(),
                    delivery_attempts::attempt.desc(),
                ))
                .limit(i64::from(limit))
                .select(DeliveryAttemptRow::as_select())
                .load(conn)
                .await?
        });
        rows.into_iter()
            .map(DeliveryAttemptRow::into_domain)
            .collect()
    }
}

/// The webhooks an event is about to fan out to, written per dialect.
pub(crate) trait FanoutWebhooks {
    /// The enabled webhooks of a workspace, or `None` when there is no such
    /// workspace. PostgreSQL holds them `FOR SHARE` until the transaction ends, so a
    /// concurrent delete or disable waits, then sees (and removes or cancels) the
    /// new deliveries; SQLite writers are serial anyway.
    async fn enabled_webhooks_for_fanout(
        &mut self,
        workspace_id: &str,
    ) -> QueryResult<Option<Vec<WebhookRow>>>;
}

/// [`FanoutWebhooks::enabled_webhooks_for_fanout`], with PostgreSQL's lock clause
/// when given.
macro_rules! enabled_webhooks_for_fanout {
    ($($lock:ident)?) => {
        async fn enabled_webhooks_for_fanout(
            &mut self,
            workspace_id: &str,
        ) -> QueryResult<Option<Vec<WebhookRow>>> {
            let exists = workspaces::table
                .find(workspace_id)
                .select(workspaces::id)
                .first::<String>(self)
                .await
                .optional()?
                .is_some();
            if !exists {
                return Ok(None);
            }
            webhooks::table
                .filter(webhooks::workspace_id.eq(workspace_id))
                .filter(webhooks::enabled.eq(true))
                .select(WebhookRow::as_select())
                $(.$lock())?
                .load(self)
                .await
                .map(Some)
        }
    };
}

impl FanoutWebhooks for SqliteConn {
    enabled_webhooks_for_fanout!();
}

impl FanoutWebhooks for PgConn {
    enabled_webhooks_for_fanout!(for_share);
}
