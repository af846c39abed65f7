use hookline_domain::Clock;

use crate::{Error, Result};

/// How to reach the database. Filled by the binary from `--database-url` /
/// `DATABASE_URL`; checked by [`StoreConfig::backend`] before anything connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// `postgres://…` or `postgresql://…` for PostgreSQL; anything else is a SQLite
    /// file: a path, `sqlite://path` or `file:path`.
    pub database_url: String,
    /// Connections in the pool that reads; SQLite opens one more, which all
    /// of the process's writes share (see `Pools`).
    pub max_connections: usize,
    /// Where the store reads the time (the system clock but in tests, which move
    /// an adjustable one forward instead of waiting).
    pub clock: Clock,
}

impl StoreConfig {
    /// The embedded default: a SQLite file in the working directory.
    pub const DEFAULT_DATABASE_URL: &'static str = "hookline.db";

    /// The configuration of the database at `database_url` (a SQLite path or a postgres:// URL).
    pub fn new(database_url: impl Into<String>) -> Self {
        StoreConfig {
            database_url: database_url.into(),
            max_connections: 16,
            clock: Clock::system(),
        }
    }

    /// Which backend the URL names, or why it names none.
    pub fn backend(&self) -> Result<Backend> {
        Backend::from_url(&self.database_url)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
/// The database kinds hookline runs on.
pub enum Backend {
    /// An embedded SQLite file (the default; one writer at a time).
    Sqlite,
    /// PostgreSQL (production; several instances on one database).
    Postgres,
}

impl Backend {
    /// The backend a database URL names: `postgres://` or `postgresql://`, else a SQLite path.
    pub fn from_url(url: &str) -> Result<Backend> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Backend::Postgres);
        }
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("file:"))
            .unwrap_or(url);
        if path.is_empty() {
            return Err(Error::InvalidUrl("the SQLite file path is empty".into()));
        }
        if path == ":memory:" || url.contains("mode=memory") {
            // Each pooled connection would get its own empty database.
            return Err(Error::InvalidUrl(
                "in-memory SQLite cannot be shared by a connection pool; name a file".into(),
            ));
        }
        if url.contains("://") && !url.starts_with("sqlite://") {
            let scheme = url.split("://").next().unwrap_or_default();
            return Err(Error::InvalidUrl(format!(
                "unsupported scheme `{scheme}://`: use postgres:// or a SQLite file path"
            )));
        }
        Ok(Backend::Sqlite)
    }

    /// `sqlite` or `postgres`, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_backend_from_the_url() {
        for url in [
            "postgres://u@h/db",
            "postgresql://h:5433/db?sslmode=disable",
        ] {
            assert_eq!(Backend::from_url(url).unwrap(), Backend::Postgres, "{url}");
        }
        for url in [
            "hookline.db",
            "/var/lib/hookline.db",
            "sqlite://data.db",
            "file:data.db",
        ] {
            assert_eq!(Backend::from_url(url).unwrap(), Backend::Sqlite, "{url}");
        }
        for url in [
            "",
            "sqlite://",
            ":memory:",
            "file::memory:?mode=memory",
            "mysql://h/db",
        ] {
            assert!(Backend::from_url(url).is_err(), "{url}");
        }
    }
}
