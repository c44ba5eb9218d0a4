//! End to end: the real binary, `capdeck --demo`, driven in tmux like a person would: wait for
//! the applications view, open help, filter, open the batches view, approve the batch that waits
//! for an approval with a reason, see its phase change, quit with exit code 0.
//!
//! Skips (with the reason printed) when tmux is not installed; `.ci/run` installs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

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
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(200));
        }
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
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn demo_in_tmux_approve_a_batch_and_quit() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("SKIPPED: tmux is not installed (`.ci/run` installs it; apt-get install tmux)");
        return;
    }
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
    let tmux = Tmux { socket: format!("capdeck-e2e-{}", std::process::id()), target: "demo".into() };
    tmux.run(&["new-session", "-d", "-s", "demo", "-x", "200", "-y", "50", &script]);

    // The applications view.
    tmux.until("the applications view", Duration::from_secs(60), |s| {
        s.contains("Applications [4/4]") && s.contains("hr-portal") && s.contains("engine Leader")
    });
    // Help, generated from the key map; it names the demo's kubeconfig.
    tmux.keys(&["?"]);
    // Wait for the whole pane: a capture can land while the frame is still being written.
    let help = tmux.until("the help with the demo's kubeconfig", Duration::from_secs(10), |s| {
        s.contains("Commands") && s.contains("KUBECONFIG=")
    });
    assert!(help.contains("approve the selected batch"), "{help}");
    tmux.keys(&["Escape"]);
    tmux.until("help closed", Duration::from_secs(10), |s| !s.contains("Commands"));
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
