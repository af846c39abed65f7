//! Settings portal links and sessions: a link opens one workspace's portal until
//! it expires; its token, kept only as a hash, is then the session's cookie.

use hookline_domain::{ApiKey, KeyPrefix, Timestamp, Workspace, WorkspaceId, portal_ttl_seconds};

use crate::{App, Result};

/// A link's token just made: the only time it exists outside the link
/// ([`hookline_domain::PublicUrl::portal_link`] writes the link).
#[derive(Debug)]
pub struct PortalLink {
    /// The link's token: shown once, in the link, stored only as its hash.
    pub token: ApiKey,
    /// When the link, and the session it opens, end.
    pub expires_at: Timestamp,
}

/// An open portal session: its workspace (read with the link), until when, and
/// its forms' token.
#[derive(Debug, Clone)]
pub struct PortalSession {
    /// The workspace the session is held to.
    pub workspace: Workspace,
    /// When the session ends.
    pub expires_at: Timestamp,
    /// The token every form of this session carries (see
    /// [`hookline_auth::portal_csrf_token`]).
    pub csrf_token: String,
}

impl App {
    /// Makes a link to the workspace's portal, living `ttl_seconds` (an hour when
    /// `None`, at most a day).
    pub async fn create_portal_link(
        &self,
        workspace: WorkspaceId,
        ttl_seconds: Option<u64>,
    ) -> Result<PortalLink> {
        let ttl = portal_ttl_seconds(ttl_seconds)?;
        self.require_workspace(workspace).await?;
        let (token, hash) = hookline_auth::generate_portal_token()?;
        let expires_at = self.clock.now().plus(std::time::Duration::from_secs(ttl));
        self.portal_links
            .create(workspace, &hash, expires_at)
            .await?;
        Ok(PortalLink { token, expires_at })
    }

    /// The session `token` opens on `workspace`'s portal; `None` when it opens
    /// none: not a portal token, unknown, expired, or made for another workspace.
    /// (The portal shows all of these alike; the reason is logged here.)
    pub async fn portal_session(
        &self,
        workspace: WorkspaceId,
        token: &str,
    ) -> Result<Option<PortalSession>> {
        let Ok(token) = ApiKey::parse(&KeyPrefix::portal(), token) else {
            tracing::info!(%workspace, "portal refused: not a portal token");
            return Ok(None);
        };
        let hash = hookline_auth::hash_api_key(&token);
        let refused = match self.portal_links.find(&hash).await? {
            None => "unknown token",
            Some((owner, _)) if owner.id != workspace => "a token of another workspace",
            Some((_, expires_at)) if expires_at <= self.clock.now() => "expired",
            Some((owner, expires_at)) => {
                return Ok(Some(PortalSession {
                    workspace: owner,
                    expires_at,
                    csrf_token: hookline_auth::portal_csrf_token(&token),
                }));
            }
        };
        tracing::info!(%workspace, reason = refused, "portal refused");
        Ok(None)
    }

    /// Ends the portal's sessions of this token: its link opens nothing from now
    /// on (signing out). A token that opens nothing already is left as it is.
    pub async fn end_portal_session(&self, token: &str) -> Result<()> {
        if let Ok(token) = ApiKey::parse(&KeyPrefix::portal(), token) {
            self.portal_links
                .delete(&hookline_auth::hash_api_key(&token))
                .await?;
        }
        Ok(())
    }
}
