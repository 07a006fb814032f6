//! Running Slurm's command-line tools and reading what they print. Tenantry drives Slurm 22.05
//! through `scontrol`, `sacctmgr`, `sacct`, `srun` and `scancel` (docs/design/0012-slurm-command-line-tools.md
//! says why not slurmrestd): each call is one child process that inherits Tenantry's environment
//! (`SLURM_CONF`, `PATH`), with times exchanged in UTC and a deadline, and its failure is sorted
//! into "Slurm is not answering" (transient: the caller retries with back-off) and "Slurm said
//! no" (permanent, with Slurm's own words).

use super::super::{DriverError, DriverResult};
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Where the tools are and how long one may take.
#[derive(Debug, Clone)]
pub struct SlurmCli {
    /// A directory holding the tools; `None` finds them on `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// A call that takes longer is killed and counts as "not answering".
    pub timeout: Duration,
}

impl Default for SlurmCli {
    fn default() -> Self {
        SlurmCli { bin_dir: None, timeout: Duration::from_secs(60) }
    }
}

/// What Slurm's tools print when the controller, the accounting daemon or munge does not answer.
const UNREACHABLE: &[&str] = &[
    "unable to contact slurm controller",
    "connection refused",
    "socket timed out",
    "slurmctld not responding",
    "communication connection failure",
    "zero bytes were transmitted",
    "slurmdbd",
    "unable to establish",
    "problem talking to the database",
    "error connecting",
    "could not establish a configuration source",
    // munged restarting (or gone): every call fails to authenticate until it is back.
    "munge encode failed",
    "authentication error",
];

/// Whether a failure message means Slurm was not reachable (worth retrying).
pub fn is_unreachable(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    UNREACHABLE.iter().any(|m| lower.contains(m))
}

impl SlurmCli {
    fn program(&self, name: &str) -> PathBuf {
        match &self.bin_dir {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        }
    }

    /// Runs `name args…` and returns its standard output, or why it failed.
    pub async fn run(&self, name: &str, args: &[String]) -> DriverResult<String> {
        self.run_as(None, name, args).await
    }

    /// Like [`SlurmCli::run`], as another Unix user when `user` is given (`runuser`; tests submit
    /// jobs as a team's user this way).
    pub async fn run_as(&self, user: Option<&str>, name: &str, args: &[String]) -> DriverResult<String> {
        let mut command = match user {
            Some(user) => {
                let mut c = tokio::process::Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(self.program(name));
                c
            }
            None => tokio::process::Command::new(self.program(name)),
        };
        command.args(args).stdin(std::process::Stdio::null());
        let output = self.output(name, command, None).await?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr.trim().lines().last().unwrap_or("").trim();
        let said = if said.is_empty() { stdout.trim() } else { said };
        let message = format!("`{name} {}` failed: {said}", args.first().map(String::as_str).unwrap_or(""));
        Err(if is_unreachable(&stderr) || is_unreachable(&stdout) {
            DriverError::waits(message)
        } else {
            DriverError::refused(message)
        })
    }

    /// Runs `name` with no arguments, reading `commands` (one a line) on its standard input, as
    /// `scontrol` does: one process for many commands, where each call is otherwise a process
    /// of its own (its start costs more of Slurm's CPU than a reservation does). Returns what it
    /// printed on standard output, whether or not each command succeeded: the caller tells which
    /// did from it. Fails only when the tool could not run or did not finish in time.
    pub async fn run_commands(&self, name: &str, commands: String) -> DriverResult<String> {
        let mut command = tokio::process::Command::new(self.program(name));
        command.stdin(std::process::Stdio::piped());
        let output = self.output(name, command, Some(commands)).await?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Runs `command` (in UTC, killed past the deadline) with `input` on its standard input
    /// when given, and collects what it printed.
    async fn output(
        &self,
        name: &str,
        mut command: tokio::process::Command,
        input: Option<String>,
    ) -> DriverResult<std::process::Output> {
        // Slurm reads and prints times in the local time zone; Tenantry speaks UTC.
        command.env("TZ", "UTC").kill_on_drop(true);
        command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let run = async {
            let mut child = command.spawn()?;
            // Written while the output is read: either may outgrow a pipe's buffer.
            let stdin = child.stdin.take();
            let feed = async move {
                if let (Some(mut stdin), Some(input)) = (stdin, input) {
                    use tokio::io::AsyncWriteExt;
                    // A tool that stops reading early says why in its output.
                    let _ = stdin.write_all(input.as_bytes()).await;
                }
            };
            let (output, ()) = tokio::join!(child.wait_with_output(), feed);
            output
        };
        match tokio::time::timeout(self.timeout, run).await {
            Err(_) => Err(DriverError::waits(format!("`{name}` did not answer within {} s", self.timeout.as_secs()))),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(DriverError::refused(format!(
                "`{name}` was not found: install Slurm's client tools or set TENANTRY_SLURM_BIN to their directory"
            ))),
            Ok(Err(e)) => Err(DriverError::transient(format!("cannot run `{name}`: {e}"))),
            Ok(Ok(output)) => Ok(output),
        }
    }
}

/// One record of `scontrol -o show …`: its `Key=Value` fields in order of appearance. A value
/// may hold spaces (a drain reason, the OS string): words without `=` continue the value before.
pub fn parse_record(line: &str) -> BTreeMap<String, String> {
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<String> = None;
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some((key, value))
                if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') =>
            {
                fields.insert(key.to_owned(), value.to_owned());
                last = Some(key.to_owned());
            }
            _ => {
                if let Some(value) = last.as_ref().and_then(|k| fields.get_mut(k)) {
                    value.push(' ');
                    value.push_str(word);
                }
            }
        }
    }
    fields
}

/// Every record of a `scontrol -o show …` answer (one per line).
pub fn parse_records(text: &str) -> Vec<BTreeMap<String, String>> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && l.contains('=')).map(parse_record).collect()
}

/// The most names one host list expands to: Slurm's own bound on a range (its `MAX_RANGE`), far
/// above any cluster's node count. A list that says more is not a list Slurm printed.
pub const MAX_HOSTS: usize = 1 << 16;

/// Expands a Slurm host list (`gpu[001-003,007],login1`) into names. What is not a well-formed
/// list (an unbalanced bracket, a range with a non-number) is taken word for word, never
/// panicked on; expansion stops at [`MAX_HOSTS`] names.
pub fn expand_hostlist(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Split on commas outside brackets.
    let mut depth = 0i32;
    let mut part = String::new();
    let mut parts = Vec::new();
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut part));
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    parts.push(part);
    for part in parts.into_iter().map(|p| p.trim().to_owned()).filter(|p| !p.is_empty() && p != "(null)") {
        let bracketed = part.find('[').zip(part.rfind(']')).filter(|(open, close)| open < close);
        let Some((open, close)) = bracketed else {
            out.push(part);
            continue;
        };
        let (prefix, ranges, suffix) = (&part[..open], &part[open + 1..close], &part[close + 1..]);
        for range in ranges.split(',') {
            let left = MAX_HOSTS.saturating_sub(out.len()) as u64;
            match range.split_once('-') {
                Some((lo, hi)) => {
                    let width = lo.len();
                    let (Ok(a), Ok(b)) = (lo.parse::<u64>(), hi.parse::<u64>()) else { continue };
                    for n in (a..=b).take(left as usize) {
                        out.push(format!("{prefix}{n:0width$}{suffix}"));
                    }
                }
                None if left > 0 => out.push(format!("{prefix}{range}{suffix}")),
                None => {}
            }
        }
    }
    out
}

/// A time as Slurm prints and reads it (`2026-12-01T06:01:00`, in UTC: see [`SlurmCli::run`]).
pub fn format_time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// Reads a time Slurm printed (UTC); `None` for `Unknown`, `None` or anything else.
pub fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%dT%H:%M:%S").ok().map(|t| Utc.from_utc_datetime(&t))
}

/// Seconds in a Slurm duration (`[days-]hh:mm:ss`, `mm:ss`, `ss`); `None` when not one.
pub fn parse_elapsed(text: &str) -> Option<i64> {
    let (days, rest) = match text.split_once('-') {
        Some((d, r)) => (d.parse::<i64>().ok()?, r),
        None => (0, text),
    };
    let parts: Vec<i64> = rest.split(':').map(|p| p.parse::<i64>().ok()).collect::<Option<_>>()?;
    let secs = match parts.as_slice() {
        [h, m, s] => h * 3600 + m * 60 + s,
        [m, s] => m * 60 + s,
        [s] => *s,
        _ => return None,
    };
    Some(days * 86_400 + secs)
}

/// GPUs (whole, or MIG instances) as a TRES.
pub const GPU_TRES: &str = "gres/gpu";
/// Seats of time-sliced GPUs as a TRES (Slurm 22.05's GPU sharing).
pub const SHARD_TRES: &str = "gres/shard";

/// How many of `name` (`gres/gpu`) a TRES list such as `billing=1,cpu=1,gres/gpu=2,node=1`
/// holds (any GPU type counts: `gres/gpu:h100=2` is part of `gres/gpu=2`, so only the untyped
/// total is read).
pub fn tres_count(tres: &str, name: &str) -> Option<u32> {
    tres.split(',').find_map(|item| item.strip_prefix(name)?.strip_prefix('=')).and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_keep_values_with_spaces() {
        let r = parse_record(
            "NodeName=gpu001 State=IDLE+DRAIN Reason=tenantry: quarantined [root@2026-12-01T06:00:00] Port=1",
        );
        assert_eq!(r["NodeName"], "gpu001");
        assert_eq!(r["Reason"], "tenantry: quarantined [root@2026-12-01T06:00:00]");
        assert_eq!(r["Port"], "1");
    }

    #[test]
    fn host_lists_expand() {
        assert_eq!(expand_hostlist("gpu[001-003,007],login1"), ["gpu001", "gpu002", "gpu003", "gpu007", "login1"]);
        assert_eq!(expand_hostlist("gpu001"), ["gpu001"]);
        assert!(expand_hostlist("(null)").is_empty());
        assert_eq!(expand_hostlist("a[8-10]"), ["a8", "a9", "a10"]);
        // What Slurm never prints is read word for word, without a panic or a runaway.
        assert_eq!(expand_hostlist("a]b["), ["a]b["]);
        assert_eq!(expand_hostlist("gpu[1-2"), ["gpu[1-2"]);
        assert_eq!(expand_hostlist("gpu[x-3,4]"), ["gpu4"]);
        assert_eq!(expand_hostlist("gpu[0-99999999999]").len(), MAX_HOSTS);
        assert_eq!(expand_hostlist("gpu[0-99999999999],gpu[1-2]").len(), MAX_HOSTS);
    }

    #[test]
    fn times_and_durations_read() {
        let t = parse_time("2026-12-01T06:01:00").unwrap();
        assert_eq!(format_time(t), "2026-12-01T06:01:00");
        assert_eq!(parse_time("Unknown"), None);
        assert_eq!(parse_elapsed("1-02:03:04"), Some(93_784));
        assert_eq!(parse_elapsed("03:04"), Some(184));
        assert_eq!(parse_elapsed("x"), None);
        assert_eq!(tres_count("billing=1,cpu=1,gres/gpu=2,node=1", GPU_TRES), Some(2));
        assert_eq!(tres_count("billing=1,cpu=1,gres/shard=3,node=1", SHARD_TRES), Some(3));
        assert_eq!(tres_count("billing=1,cpu=1,gres/shard=3,node=1", GPU_TRES), None, "a seat is not a GPU");
        assert_eq!(tres_count("gres/gpu:h100=2,gres/gpu=2", GPU_TRES), Some(2));
        assert_eq!(tres_count("cpu=1", GPU_TRES), None);
    }

    #[test]
    fn unreachable_messages_are_transient() {
        assert!(is_unreachable("sbatch: error: Unable to contact slurm controller (connect failure)"));
        assert!(is_unreachable(
            "scontrol: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\": No such file or \
             directory (Did you start munged?)"
        ));
        assert!(!is_unreachable("Requested reservation overlaps with another reservation"));
    }
}
