//! Work per operation, counted rather than timed: the statements the database
//! executed (PostgreSQL's `pg_stat_statements` in the bench's private cluster)
//! and the CPU time of the hookline process and of the database's sessions on
//! its database. On SQLite the database works inside the hookline process, and
//! its statements are counted by the budget test
//! (`cargo test -p hookline-tests --test budget -- --nocapture`).

use std::collections::HashMap;

use hookline_testdb::TestDb;

use crate::process::{Measured, cpu_seconds_of};

/// The counters at one moment.
pub(crate) struct Work {
    statements: Option<u64>,
    hookline_cpu: f64,
    /// CPU seconds of each database session (by process id).
    sessions: HashMap<u32, f64>,
}

impl Work {
    pub(crate) async fn now(db: &TestDb, hookline: &Measured) -> Work {
        let sessions = db.session_pids().await;
        Work {
            statements: db.statements_executed().await,
            hookline_cpu: hookline.cpu_seconds(),
            sessions: sessions
                .into_iter()
                .map(|pid| (pid, cpu_seconds_of(pid)))
                .collect(),
        }
    }

    /// What was done since `before`, per operation of `operations`, as a line.
    pub(crate) fn per(&self, before: &Work, operations: u64, operation: &str) -> String {
        let mut spent = Spent::default();
        spent.add(before, self);
        spent.per(operations, operation)
    }
}

/// Work done over one stretch or several (the turns of one side).
#[derive(Debug, Default)]
pub(crate) struct Spent {
    statements: Option<u64>,
    hookline_cpu: f64,
    database_cpu: f64,
    /// Whether the database's sessions were counted (PostgreSQL).
    database_counted: bool,
}

impl Spent {
    /// Adds what was done between `before` and `after`.
    pub(crate) fn add(&mut self, before: &Work, after: &Work) {
        if let (Some(after), Some(before)) = (after.statements, before.statements) {
            *self.statements.get_or_insert(0) += after.saturating_sub(before);
        }
        self.hookline_cpu += after.hookline_cpu - before.hookline_cpu;
        // A session that began since counts whole; one that ended since is lost.
        self.database_cpu += after
            .sessions
            .iter()
            .map(|(pid, cpu)| cpu - before.sessions.get(pid).copied().unwrap_or(0.0))
            .sum::<f64>();
        self.database_counted |= !after.sessions.is_empty();
    }

    /// Per operation of `operations`, as a line.
    pub(crate) fn per(&self, operations: u64, operation: &str) -> String {
        let each = |total: f64| total / operations.max(1) as f64;
        let statements = self
            .statements
            .map(|count| format!("{:.2} statements, ", each(count as f64)))
            .unwrap_or_default();
        let database = if self.database_counted {
            format!(", database {:.0} µs", each(self.database_cpu) * 1e6)
        } else {
            String::new()
        };
        format!(
            "per {operation}: {statements}CPU hookline {:.0} µs{database} ({operations} counted)",
            each(self.hookline_cpu) * 1e6
        )
    }
}
