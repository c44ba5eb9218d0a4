//! End to end: the real binary, `capdeck --demo`, driven in tmux like a person would: wait for
//! the applications view, open help, filter, open the batches view, approve the batch that waits
//! for an approval with a reason, see its phase change, quit with exit code 0.
//!
//! Without tmux the trial is *ignored* (the reason is printed); `.ci/run` installs tmux and
//! requires it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

struct Tmux {
    socket: String,
    target: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("tmux runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", &self.target])
    }

    fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.run(&["send-keys", "-t", &self.target, key]);
        }
    }

    fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", &self.target, "-l", text]);
    }

    /// The screen once `check` holds for it, polling every 200 ms until `limit`.
    fn until(&self, what: &str, limit: Duration, check: impl Fn(&str) -> bool) -> String {
        let mut screen = String::new();
        crate::common::eventually_blocking(what, limit, || {
            screen = self.screen();
            if check(&screen) { Ok(()) } else { Err(format!("screen:\n{screen}")) }
        });
        screen
    }

    fn shows(&self, needle: &str, limit: Duration) -> String {
        self.until(needle, limit, |screen| screen.contains(needle))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

fn wait_for_file(path: &Path, limit: Duration) -> String {
    let mut text = String::new();
    crate::common::eventually_blocking(&format!("{}", path.display()), limit, || {
        text = std::fs::read_to_string(path).unwrap_or_default();
        text.ends_with('\n')
    });
    text
}

/// Whether tmux runs here, or why not.
pub fn available() -> Result<(), String> {
    match Command::new("tmux").arg("-V").output() {
        Ok(output) if output.status.success() => Ok(()),
        _ => Err("tmux is not installed (`.ci/run` installs it; apt-get install tmux)".into()),
    }
}

/// `capdeck --demo` in a detached tmux session of `width`×`height`; the shell writes the exit
/// code to the returned file when capdeck ends.
fn start_demo(socket: &str, width: u16, height: u16) -> (Tmux, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary: PathBuf = assert_cmd::cargo::cargo_bin("capdeck");
    let exit_file = dir.path().join("exit-code");
    let script = format!(
        "env TERM=xterm-256color XDG_CONFIG_HOME='{config}' XDG_STATE_HOME='{state}' '{binary}' --demo --demo-rotation off; \
         echo $? > '{exit}'; sleep 60",
        config = dir.path().join("config").display(),
        state = dir.path().join("state").display(),
        binary = binary.display(),
        exit = exit_file.display(),
    );
    let tmux = Tmux { socket: format!("{socket}-{}", std::process::id()), target: "demo".into() };
    let (width, height) = (width.to_string(), height.to_string());
    tmux.run(&["new-session", "-d", "-s", "demo", "-x", &width, "-y", &height, &script]);
    (tmux, dir, exit_file)
}

pub fn demo_in_tmux_approve_a_batch_and_quit() {
    let (tmux, _dir, exit_file) = start_demo("capdeck-e2e", 200, 50);

    // The applications view.
    tmux.until("the applications view", Duration::from_secs(60), |s| {
        s.contains("Applications [4/4]") && s.contains("hr-portal") && s.contains("engine Leader")
    });
    // Help, generated from the key map; it names the demo's kubeconfig.
    tmux.keys(&["?"]);
    // Wait for the whole pane: a capture can land while the frame is still being written.
    let help = tmux
        .until("the help", Duration::from_secs(10), |s| s.contains("Keys") && s.contains("approve the selected batch"));
    assert!(help.contains("sort by the next column"), "{help}");
    // G scrolls the help to its end, where the demo's kubeconfig is named.
    tmux.keys(&["G"]);
    tmux.until("the end of the help with the demo's kubeconfig", Duration::from_secs(10), |s| {
        s.contains("Demo") && s.contains("KUBECONFIG=")
    });
    tmux.keys(&["Escape"]);
    tmux.until("help closed", Duration::from_secs(10), |s| !s.contains("KUBECONFIG="));
    // Filter.
    tmux.keys(&["/"]);
    tmux.text("travel");
    let filtered = tmux.shows("Applications [1/4]", Duration::from_secs(10));
    assert!(!filtered.contains("bookshop"), "{filtered}");
    tmux.keys(&["Escape"]);
    tmux.shows("Applications [4/4]", Duration::from_secs(10));
    // The batches view; hr-portal needs an approval once its 30 s window ends.
    tmux.keys(&[":"]);
    tmux.text("batches");
    tmux.keys(&["Enter", "/"]);
    tmux.text("hr-portal");
    tmux.keys(&["Enter"]);
    tmux.until("hr-portal awaiting approval", Duration::from_secs(120), |s| {
        s.lines().any(|line| line.contains("hr-portal") && line.contains("AwaitingApproval"))
    });
    tmux.keys(&["a"]);
    tmux.shows("Approve batch", Duration::from_secs(30));
    tmux.text("e2e: CHG-7 approved");
    tmux.keys(&["Enter"]);
    let approved = tmux.until("the phase change", Duration::from_secs(60), |s| {
        s.lines().any(|line| {
            line.contains("hr-portal")
                && line.contains("approved by demo-sre")
                && (line.contains("RollingOut") || line.contains("Succeeded"))
        })
    });
    assert!(!approved.contains("AwaitingApproval"), "{approved}");
    // Keys typed on in the burst that closed the dialog are swallowed (they were meant as more
    // reason, not as hotkeys): like a person, pause before the next command.
    std::thread::sleep(Duration::from_millis(600));
    // The audit trail.
    tmux.keys(&[":"]);
    tmux.text("events");
    tmux.keys(&["Enter"]);
    tmux.shows("approved by demo-sre: e2e: CHG-7 approved", Duration::from_secs(30));
    // Quit: exit code 0, terminal restored.
    tmux.keys(&["q"]);
    let code = wait_for_file(&exit_file, Duration::from_secs(30));
    assert_eq!(code.trim(), "0");
    let after = tmux.screen();
    assert!(!after.contains("capdeck │"), "the alternate screen is gone after exit:\n{after}");
}

/// The real binary on an 80×24 terminal, through every view: the header keeps the context, the
/// engine's role and the connection state; `q quit` stays in the footer; batch names stay whole.
pub fn demo_at_80x24_every_view() {
    let (tmux, _dir, exit_file) = start_demo("capdeck-e2e-80", 80, 24);
    // Synced first: under load the applications can show while other stores still list
    // ("● syncing"); the header is checked below in its steady state.
    tmux.until("the applications view, synced", Duration::from_secs(60), |s| {
        s.contains("Applications [4/4]") && s.contains("engine Leader") && s.contains("connected")
    });
    for (command, title) in [
        ("apps", "Applications ["),
        ("versions", "Versions ["),
        ("tenants", "Tenants ["),
        ("ops", "Tenant operations ["),
        ("batches", "Batches ["),
        ("rollouts", "Rollouts ["),
        ("events", "Events ["),
        ("credentials", "Credentials ["),
    ] {
        tmux.keys(&[":"]);
        tmux.text(command);
        tmux.keys(&["Enter"]);
        // The whole frame: a capture can land while a frame is still being written.
        let screen = tmux.until(&format!("the {command} view"), Duration::from_secs(30), |s| {
            s.contains(title)
                && s.lines().rev().find(|line| !line.trim().is_empty()).is_some_and(|l| l.contains("quit"))
        });
        let lines: Vec<&str> = screen.lines().collect();
        let header = lines.first().copied().unwrap_or_default();
        assert!(
            header.contains("ctx ") && header.contains("engine Leader") && header.contains("connected"),
            "{command}: the header keeps context, role and connection:\n{screen}"
        );
        assert!(
            lines.iter().rev().find(|line| !line.trim().is_empty()).is_some_and(|footer| footer.contains("q quit")),
            "{command}: `q quit` stays visible:\n{screen}"
        );
        if command == "batches" {
            // The demo's first rotations open hr-portal's batch within seconds of the start; on a
            // loaded machine the view can come first: wait for the row, then check it.
            let screen = tmux.until("hr-portal's batch", Duration::from_secs(60), |s| s.contains("hr-portal-"));
            // Demo batch names are the application plus a 5-character suffix: whole, never cut.
            let whole = screen.split_whitespace().any(|word| {
                word.strip_prefix("hr-portal-")
                    .is_some_and(|suffix| suffix.len() == 5 && suffix.chars().all(|c| c.is_ascii_alphanumeric()))
            });
            assert!(whole, "a whole batch name (hr-portal-xxxxx):\n{screen}");
            assert!(!screen.contains("hr-portal-…"), "{screen}");
        }
    }
    tmux.keys(&["q"]);
    let code = wait_for_file(&exit_file, Duration::from_secs(30));
    assert_eq!(code.trim(), "0");
}
