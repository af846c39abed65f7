//! hookline processes under measurement: start, wait for readiness, read their
//! CPU time and peak memory from /proc, stop.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use tokio::process::{Child, Command};

/// The executable `name` beside this one (the same `target/<profile>`).
pub(crate) fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let path = me.with_file_name(name);
    if !path.exists() {
        return Err(anyhow!(
            "{} not found: build it first (cargo build --release -p {name})",
            path.display()
        ));
    }
    Ok(path)
}

pub(crate) struct Measured {
    child: Child,
    pid: u32,
    /// Where the process's stdout and stderr go: a file, as in production, so
    /// reading its log costs the benchmark nothing while it measures.
    log: PathBuf,
}

impl Measured {
    /// Starts `program args` with `env`; when `ready` is given, waits for a line of
    /// its output (stderr or stdout) holding it and answers that line.
    pub(crate) async fn start(
        program: &Path,
        args: &[&str],
        env: &[(&str, String)],
        ready: Option<&str>,
    ) -> anyhow::Result<(Measured, String)> {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let log = std::env::temp_dir().join(format!(
            "hookline-bench-{}-{}.log",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let file =
            std::fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start {}", program.display()))?;
        let pid = child.id().ok_or_else(|| anyhow!("no pid"))?;
        let mut measured = Measured { child, pid, log };
        let mut line = String::new();
        if let Some(ready) = ready {
            line = tokio::time::timeout(Duration::from_secs(60), measured.ready(ready))
                .await
                .map_err(|_| anyhow!("{} was not ready in time", program.display()))??;
        }
        Ok((measured, line))
    }

    /// Waits for a line of the log holding `ready`, and answers it.
    async fn ready(&mut self, ready: &str) -> anyhow::Result<String> {
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(line) = log.lines().find(|line| line.contains(ready)) {
                return Ok(line.to_owned());
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(anyhow!(
                    "exited ({status}) before it was ready; its output:\n{log}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// User plus system CPU seconds so far.
    pub(crate) fn cpu_seconds(&self) -> f64 {
        cpu_seconds_of(self.pid)
    }

    /// The first line of its output holding `needle`, if one does yet.
    pub(crate) fn log_line(&self, needle: &str) -> Option<String> {
        let log = std::fs::read_to_string(&self.log).ok()?;
        log.lines()
            .find(|line| line.contains(needle))
            .map(str::to_owned)
    }

    /// Peak resident memory in MiB (VmHWM).
    pub(crate) fn peak_rss_mib(&self) -> f64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find(|line| line.starts_with("VmHWM:"))
                    .and_then(|line| line.split_whitespace().nth(1))
                    .and_then(|kib| kib.parse::<f64>().ok())
            })
            .map_or(0.0, |kib| kib / 1024.0)
    }

    /// SIGSTOP: it stands still, costing the machine nothing, until
    /// [`Measured::resume`].
    pub(crate) async fn pause(&self) -> anyhow::Result<()> {
        self.signal("-STOP").await
    }

    /// SIGCONT, after [`Measured::pause`].
    pub(crate) async fn resume(&self) -> anyhow::Result<()> {
        self.signal("-CONT").await
    }

    async fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = Command::new("kill")
            .args([signal, &self.pid.to_string()])
            .status()
            .await?;
        anyhow::ensure!(status.success(), "kill {signal} {}: {status}", self.pid);
        Ok(())
    }

    /// SIGTERM, then wait.
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        self.signal("-TERM").await?;
        tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await??;
        let _ = std::fs::remove_file(&self.log);
        Ok(())
    }
}

/// User plus system CPU seconds of process `pid` so far (0 when it is gone).
pub(crate) fn cpu_seconds_of(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) closed by ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat; 11 and 12 after the name.
    (ticks(11) + ticks(12)) / clock_ticks_per_second()
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}
