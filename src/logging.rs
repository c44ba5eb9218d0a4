//! Logging set-up shared by the daemon (JSON on stdout) and the console (a daily file): what may
//! never reach a log, and who may read the file.
//!
//! - No response body of any request reaches a log, at any level: kube's client writes a body it
//!   cannot decode at WARN (a Secret list holds every namespace's credentials), and its status
//!   bodies at TRACE and DEBUG. Its events are dropped by target ([`without_response_bodies`]).
//! - Credential-looking values are masked in every line written ([`mask_credentials`]): the second
//!   line of defence, for a value some code path puts into a message after all.
//! - The console's log file and its directory are the user's alone (0600 / 0700), whatever the
//!   umask ([`PrivateDailyFile`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use tracing_subscriber::filter::FilterFn;

/// The kube client's own module: its events carry response bodies (`"{text}, {error:?}"`,
/// `"Status from {text}"`, `"Unsuccessful data error parse: {text}"`).
const BODY_TARGETS: &[&str] = &["kube_client::client"];

/// A filter that drops every event of the targets that log response bodies or a receiver's host,
/// whatever `RUST_LOG` asks for.
pub fn without_response_bodies() -> FilterFn<fn(&tracing::Metadata<'_>) -> bool> {
    tracing_subscriber::filter::filter_fn(keeps as fn(&tracing::Metadata<'_>) -> bool)
}

/// hyper-util's HTTP client, under kube's and the notifier's: at TRACE it names the host it
/// connects to, and a webhook's host can hold its secret (`SECRET.m.pipedream.net`).
const HOST_TARGETS: &str = "hyper_util::client::legacy";

fn keeps(metadata: &tracing::Metadata<'_>) -> bool {
    !BODY_TARGETS.contains(&metadata.target()) && !metadata.target().starts_with(HOST_TARGETS)
}

/// The value after a key named like a credential (`"password": "…"`, `clientsecret=…`). Not
/// `secret` alone: capdeck's own log lines name Secrets under that key.
static CREDENTIAL_VALUE: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
    regex::Regex::new(
        r#"(?i)((?:password|passwd|passphrase|client_?secret|secret_?key|token|api_?key|private_?key|vcap_services)\\?"?\s*[:=]\s*)(\\?"[^"\\]*(?:\\.[^"\\]*)*\\?"|[^\s,}\]]+)"#,
    )
    .ok()
});
/// A long base64 run (a Secret's data, a VCAP payload).
static BASE64_RUN: LazyLock<Option<regex::Regex>> =
    LazyLock::new(|| regex::Regex::new(r"[A-Za-z0-9+/]{40,}={0,2}").ok());

/// `line` with credential-looking values masked as `•••`: a credential key's value, and a long
/// base64 run unless it is plain lowercase hex (a hash or a uid, which people need to read).
pub fn mask_credentials(line: &str) -> std::borrow::Cow<'_, str> {
    // A quoted value keeps its quotes (escaped or not), so a JSON line stays JSON.
    let keyed = match CREDENTIAL_VALUE.as_ref() {
        Some(pattern) => pattern.replace_all(line, |found: &regex::Captures<'_>| {
            let value = &found[2];
            let quote = if value.starts_with("\\\"") {
                "\\\""
            } else if value.starts_with('"') {
                "\""
            } else {
                ""
            };
            format!("{}{quote}•••{quote}", &found[1])
        }),
        None => std::borrow::Cow::Borrowed(line),
    };
    let Some(base64) = BASE64_RUN.as_ref().filter(|pattern| pattern.is_match(&keyed)) else { return keyed };
    let masked = base64.replace_all(&keyed, |found: &regex::Captures<'_>| {
        let run = &found[0];
        let hex = run.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if hex { run.to_string() } else { "•••".to_string() }
    });
    std::borrow::Cow::Owned(masked.into_owned())
}

/// A writer that masks credential-looking values in what passes through it (one event per write,
/// as tracing's formatters write them).
pub struct Masking<W>(pub W);

impl<W: Write> Write for Masking<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(mask_credentials(text).as_bytes()).map(|()| buf.len()),
            Err(_) => self.0.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// A log file per day (`capdeck.YYYY-MM-DD.log`, UTC), created 0600 in a 0700 directory whatever
/// the umask; the newest `keep` files are kept.
pub struct PrivateDailyFile {
    dir: PathBuf,
    keep: usize,
    open: Option<(String, File)>,
}

impl PrivateDailyFile {
    /// The directory is created (0700) or made 0700 if it exists.
    pub fn new(dir: &Path, keep: usize) -> std::io::Result<Self> {
        private_dir(dir)?;
        Ok(Self { dir: dir.to_path_buf(), keep: keep.max(1), open: None })
    }

    fn file(&mut self) -> std::io::Result<&mut File> {
        let today = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
        if self.open.as_ref().is_none_or(|(day, _)| *day != today) {
            let file = private_file(&self.dir.join(format!("capdeck.{today}.log")))?;
            self.open = Some((today, file));
            self.prune();
        }
        match self.open.as_mut() {
            Some((_, file)) => Ok(file),
            None => Err(std::io::Error::other("no log file")),
        }
    }

    /// Remove all but the newest `keep` day files (their names sort by date).
    fn prune(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut days: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("capdeck.") && name.ends_with(".log"))
            })
            .collect();
        days.sort();
        let excess = days.len().saturating_sub(self.keep);
        for old in days.into_iter().take(excess) {
            let _ = std::fs::remove_file(old);
        }
    }
}

impl Write for PrivateDailyFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file()?.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.open.as_mut() {
            Some((_, file)) => file.flush(),
            None => Ok(()),
        }
    }
}

/// Create `dir` (and its parents) and make it 0700.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Open `path` for appending, created 0600, and made 0600 if it existed with more.
fn private_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_values_and_long_base64_are_masked_hashes_are_not() {
        let cases = [
            (r#"{"password":"hunter2","user":"bob"}"#, r#"{"password":"•••","user":"bob"}"#),
            (r#"clientsecret=abc123 url=https://uaa"#, "clientsecret=••• url=https://uaa"),
            (
                r#"\"VCAP_SERVICES\":\"eyJ4c3VhYSI6W3siY3JlZGVudGlhbHMiOnsicGFzcyI6InB3In19XX0=\""#,
                r#"\"VCAP_SERVICES\":\"•••\""#,
            ),
            ("data eyJ4c3VhYSI6W3siY3JlZGVudGlhbHMiOnsicGFzcyI6InB3In19XX0= end", "data ••• end"),
            (
                "hash 3f786850e387550fdab836ed7e6dc881de23001b0000000000000000000000aa ok",
                "hash 3f786850e387550fdab836ed7e6dc881de23001b0000000000000000000000aa ok",
            ),
            (
                "binding secret rotated namespace=shop secret=shop-uaa",
                "binding secret rotated namespace=shop secret=shop-uaa",
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(mask_credentials(line), expected, "{line}");
        }
    }

    /// A `Write` into a buffer the test reads afterwards.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Even at TRACE: no kube response body, and no host hyper-util connects to (a webhook's
    /// host can hold its secret); capdeck's own events pass.
    #[test]
    fn events_that_show_a_body_or_a_host_never_reach_the_log() {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        let captured = Captured::default();
        let writer = captured.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_filter(tracing_subscriber::filter::LevelFilter::TRACE)
            .with_filter(without_response_bodies());
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            tracing::trace!(target: "hyper_util::client::legacy::connect::http", host = "SECRETSUB.m.example.net", "Http::connect");
            tracing::warn!(target: "kube_client::client", "BODY-OF-A-SECRET-LIST");
            tracing::info!(target: "capdeck::engine", "capdeck's own line");
        });
        let text = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
        assert!(text.contains("capdeck's own line"), "{text}");
        assert!(!text.contains("SECRETSUB") && !text.contains("BODY-OF"), "{text}");
    }

    #[test]
    fn the_log_file_and_its_directory_are_private_whatever_existed() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().expect("dir");
        let dir = root.path().join("state").join("capdeck");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let today = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
        let existing = dir.join(format!("capdeck.{today}.log"));
        std::fs::write(&existing, "old\n").expect("write");
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        for day in ["2000-01-01", "2000-01-02", "2000-01-03"] {
            std::fs::write(dir.join(format!("capdeck.{day}.log")), "").expect("write");
        }
        let mut file = PrivateDailyFile::new(&dir, 2).expect("file");
        file.write_all(b"line\n").expect("write");
        let mode = |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&existing), 0o600);
        assert_eq!(std::fs::read_to_string(&existing).expect("read"), "old\nline\n");
        let left: Vec<String> = std::fs::read_dir(&dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left.len(), 2, "the newest two are kept: {left:?}");
    }
}
