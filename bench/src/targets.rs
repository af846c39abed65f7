//! The targets the figures are held to, per backend, in one place: issue 22's
//! table (the API, ingest and delivery ratios, ingest's half-rate p99, peak
//! RSS), and the first wave's delivery p99 that still stands. Each report line
//! says `met` or `MISSED` against these.

use std::time::Duration;

use hookline_testdb::Backend;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Targets {
    /// GET /api/v1/me, as a ratio to bare hyper.
    pub(crate) me: f64,
    /// GET /api/v1/hooks, as a ratio to bare hyper.
    pub(crate) hooks: f64,
    /// Ingest (admin API emits) as a ratio to bare hyper.
    pub(crate) ingest: f64,
    /// Ingest's p99 at half the measured rate, at most.
    pub(crate) ingest_half_rate_p99: Duration,
    /// The worker's sustained rate as a ratio to the straight client.
    pub(crate) delivery: f64,
    /// Emit-to-receipt p99 at half the sustained rate, under.
    pub(crate) delivery_p99: Duration,
    /// Peak RSS of every hookline process, at most.
    pub(crate) peak_rss_mib: f64,
}

impl Targets {
    pub(crate) fn of(backend: Backend) -> Targets {
        let sqlite = backend == Backend::Sqlite;
        Targets {
            me: if sqlite { 0.50 } else { 0.35 },
            hooks: if sqlite { 0.45 } else { 0.33 },
            ingest: if sqlite { 0.08 } else { 0.06 },
            ingest_half_rate_p99: Duration::from_millis(15),
            delivery: if sqlite { 0.95 } else { 0.85 },
            delivery_p99: Duration::from_millis(100),
            peak_rss_mib: 32.0,
        }
    }

    /// A process's peak RSS as the report prints it, judged.
    pub(crate) fn peak_rss(&self, mib: f64) -> String {
        format!(
            "peak RSS {mib:.1} MiB (<= {:.0} MiB {})",
            self.peak_rss_mib,
            verdict(mib <= self.peak_rss_mib)
        )
    }
}

/// How a report line ends.
pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}
