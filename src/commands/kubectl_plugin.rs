//! capdeck as a kubectl plugin: `kubectl capdeck ...` runs the binary as `kubectl-capdeck` with
//! the arguments unchanged (`cli::invoked_as` names it `kubectl capdeck` in help and errors), and
//! kubectl (1.26 and later) completes `kubectl capdeck <TAB>` by running `kubectl_complete-capdeck`
//! from PATH with the plugin's words, the last one the word being completed (kubectl's
//! `pkg/cmd/plugin/plugin_completion.go`). It reads Cobra's answer: one candidate a line
//! (`value<TAB>description`), then `:<directive>`, the ShellCompDirective bits.
//!
//! Both names are symbolic links to this one binary (`capdeck kubectl-plugin install`): run as
//! `kubectl_complete-capdeck`, or as `capdeck __complete WORDS...` (Cobra's own spelling, for a
//! script shim and for trying it by hand), it prints the completions and nothing else. The
//! candidates come from clap_complete's engine over the same `Cli` definition the parser uses.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::CommandFactory as _;

use crate::cli::{Cli, KUBECTL_PLUGIN, KubectlPluginInstallArgs};

/// The executable kubectl runs to complete `kubectl capdeck ...` (without its `.exe`).
pub const KUBECTL_COMPLETER: &str = "kubectl_complete-capdeck";

/// Cobra's ShellCompDirective bits (the values are its wire format).
const DIRECTIVE_NO_SPACE: u32 = 1 << 1;
const DIRECTIVE_NO_FILE_COMP: u32 = 1 << 2;

/// The words to complete, when this process is a completion request: run as
/// `kubectl_complete-capdeck WORDS...`, or as `capdeck __complete WORDS...`.
pub fn completion_request(args: &[OsString]) -> Option<Vec<OsString>> {
    let argv0 = Path::new(args.first()?);
    let file = argv0.file_name().and_then(OsStr::to_str);
    if file.and_then(|file| file.strip_suffix(std::env::consts::EXE_SUFFIX)) == Some(KUBECTL_COMPLETER) {
        return Some(args[1..].to_vec());
    }
    (args.get(1).map(OsString::as_os_str) == Some(OsStr::new("__complete"))).then(|| args[2..].to_vec())
}

/// What to offer for the last word, and how the shell should treat it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completions {
    /// Each candidate with its one-line description, if it has one.
    pub candidates: Vec<(String, Option<String>)>,
    /// Cobra's ShellCompDirective.
    pub directive: u32,
}

/// Complete the last of `words` (the plugin's arguments, without the program name; none is one
/// empty word). Flags are offered once the word starts with `-`, as Cobra does; a path is
/// completed relative to `current_dir`.
pub fn complete(words: &[OsString], current_dir: Option<&Path>) -> Completions {
    let mut args = vec![OsString::from("capdeck")];
    args.extend(words.iter().cloned());
    if words.is_empty() {
        args.push(OsString::new());
    }
    let index = args.len() - 1;
    let wants_flags = args[index].to_string_lossy().starts_with('-');
    // An error means there is nothing to offer (the engine found no position to complete).
    let found = clap_complete::engine::complete(&mut Cli::command(), args, index, current_dir).unwrap_or_default();
    let candidates: Vec<(String, Option<String>)> = found
        .into_iter()
        .map(|candidate| {
            let value = candidate.get_value().to_string_lossy().into_owned();
            let help = candidate.get_help().map(|help| help.to_string()).and_then(|help| {
                let line = help.lines().next().unwrap_or_default().replace('\t', " ");
                (!line.trim().is_empty()).then(|| line.trim().to_string())
            });
            (value, help)
        })
        .filter(|(value, _)| wants_flags || !value.starts_with('-'))
        .collect();
    // A lone directory (`manifests/`) or `--flag=` goes on without a space.
    let goes_on =
        matches!(&candidates[..], [(value, _)] if value.ends_with(std::path::MAIN_SEPARATOR) || value.ends_with('='));
    let directive = DIRECTIVE_NO_FILE_COMP | if goes_on { DIRECTIVE_NO_SPACE } else { 0 };
    Completions { candidates, directive }
}

impl Completions {
    /// Cobra's `__complete` answer: one candidate a line, then `:<directive>`.
    pub fn render(&self) -> String {
        let mut text = String::new();
        for (value, help) in &self.candidates {
            text.push_str(value);
            if let Some(help) = help {
                text.push('\t');
                text.push_str(help);
            }
            text.push('\n');
        }
        text.push_str(&format!(":{}\n", self.directive));
        text
    }
}

/// Answer a completion request on stdout (nothing else is printed: kubectl reads it all).
pub fn print_completions(words: &[OsString]) -> ExitCode {
    use std::io::Write as _;
    let current_dir = std::env::current_dir().ok();
    let text = complete(words, current_dir.as_deref()).render();
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// `capdeck kubectl-plugin install`: the two links, each said as created, kept or replaced.
pub fn install(args: &KubectlPluginInstallArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find this capdeck binary's path to link to; run it by its path")?;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => exe.parent().map(Path::to_path_buf).context("this binary's path has no directory; give --dir")?,
    };
    let mut text = String::new();
    for line in install_into(&dir, &exe, args.force)? {
        text.push_str(&line);
        text.push('\n');
    }
    if !on_path(&dir) {
        text.push_str(&format!(
            "note: {} is not on PATH, where kubectl looks for plugins: add it (export PATH=\"{}:$PATH\")\n",
            dir.display(),
            dir.display()
        ));
    }
    text.push_str(
        "Try `kubectl capdeck version`. Completion (kubectl 1.26 and later) comes with kubectl's own: \
         source <(kubectl completion bash), or zsh, fish.\n",
    );
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Link `kubectl-capdeck` and `kubectl_complete-capdeck` in `dir` to `exe`; one line each.
pub fn install_into(dir: &Path, exe: &Path, force: bool) -> anyhow::Result<Vec<String>> {
    if !dir.is_dir() {
        anyhow::bail!(
            "{} is not a directory: create it (mkdir -p {}) or choose another --dir on PATH",
            dir.display(),
            dir.display()
        );
    }
    let mut said = Vec::new();
    for name in [KUBECTL_PLUGIN, KUBECTL_COMPLETER] {
        let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
        let at = dir.join(&file);
        let exists = at.symlink_metadata().is_ok();
        let ours = exists && std::fs::canonicalize(&at).is_ok_and(|target| target == exe);
        let verdict = if ours {
            "already in place"
        } else if exists && !force {
            anyhow::bail!(
                "{} exists and is not a link to this capdeck ({}): remove it, or pass --force to replace it",
                at.display(),
                exe.display()
            );
        } else {
            // Beside it first, then renamed over it: a plugin that exists is never half-written.
            let fresh = dir.join(format!(".{file}.new-{}", std::process::id()));
            let _ = std::fs::remove_file(&fresh);
            link(exe, &fresh).with_context(|| {
                format!("cannot create {}: choose a --dir you may write to, on PATH", fresh.display())
            })?;
            if let Err(error) = std::fs::rename(&fresh, &at) {
                let _ = std::fs::remove_file(&fresh);
                return Err(
                    anyhow::Error::new(error).context(format!("cannot replace {} (is it a directory?)", at.display()))
                );
            }
            if exists { "replaced" } else { "created" }
        };
        said.push(format!("{} -> {} ({verdict})", at.display(), exe.display()));
    }
    Ok(said)
}

#[cfg(unix)]
fn link(exe: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(exe, at)
}

/// Without symbolic links to rely on: a copy (run `install` again after an upgrade).
#[cfg(not(unix))]
fn link(exe: &Path, at: &Path) -> std::io::Result<()> {
    std::fs::copy(exe, at).map(drop)
}

fn on_path(dir: &Path) -> bool {
    let wanted = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .any(|entry| std::fs::canonicalize(&entry).unwrap_or_else(|_| PathBuf::from(&entry)) == wanted)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    fn values(completions: &Completions) -> Vec<&str> {
        completions.candidates.iter().map(|(value, _)| value.as_str()).collect()
    }

    #[test]
    fn a_completion_request_is_the_completer_name_or_dunder_complete() {
        let as_completer = words(&["/home/u/.local/bin/kubectl_complete-capdeck", "batches", "--"]);
        assert_eq!(completion_request(&as_completer), Some(words(&["batches", "--"])));
        assert_eq!(completion_request(&words(&["capdeck", "__complete", "bat"])), Some(words(&["bat"])));
        assert_eq!(completion_request(&words(&["/x/kubectl-capdeck", "__complete", ""])), Some(words(&[""])));
        assert_eq!(completion_request(&words(&["kubectl_complete-capdeck"])), Some(vec![]));
        assert_eq!(completion_request(&words(&["capdeck", "batches", "__complete"])), None);
        assert_eq!(completion_request(&words(&["kubectl-capdeck", "batches"])), None);
        assert_eq!(completion_request(&words(&["kubectl_complete-capdeckx", "batches"])), None);
    }

    #[test]
    fn the_first_word_offers_the_subcommands_and_no_flags() {
        for line in [&[""][..], &[]] {
            let completions = complete(&words(line), None);
            let offered = values(&completions);
            for subcommand in ["batches", "approve", "doctor", "freeze", "kubectl-plugin", "version"] {
                assert!(offered.contains(&subcommand), "{subcommand} in {offered:?}");
            }
            assert!(!offered.iter().any(|value| value.starts_with('-') || value.starts_with("__")), "{offered:?}");
            assert_eq!(completions.directive, DIRECTIVE_NO_FILE_COMP);
            let batches = completions.candidates.iter().find(|(value, _)| value == "batches").map(|(_, help)| help);
            assert_eq!(
                batches,
                Some(&Some("List RotationBatches: phase, window, approvals, rollout progress".to_string()))
            );
        }
    }

    #[test]
    fn a_prefix_narrows_to_what_it_starts() {
        assert_eq!(values(&complete(&words(&["bat"]), None)), ["batches"]);
        assert_eq!(values(&complete(&words(&["fr"]), None)), ["freeze", "freezes"]);
        assert!(values(&complete(&words(&["zzz"]), None)).is_empty());
        // Flags before the subcommand are skipped with their values, as kubectl passes them.
        assert_eq!(values(&complete(&words(&["-n", "shop", "--context", "prod", "bat"]), None)), ["batches"]);
    }

    #[test]
    fn a_dash_offers_the_subcommands_flags_with_the_global_ones() {
        let completions = complete(&words(&["batches", "--"]), None);
        let offered = values(&completions);
        for flag in ["--watch", "--output", "--namespace", "--all-namespaces", "--context", "--help"] {
            assert!(offered.contains(&flag), "{flag} in {offered:?}");
        }
        assert!(offered.iter().all(|value| value.starts_with("--")), "{offered:?}");
        // Another subcommand's flags and the console's are not offered.
        assert!(!offered.contains(&"--reason") && !offered.contains(&"--theme"), "{offered:?}");
        assert_eq!(values(&complete(&words(&["approve", "ns/b", "--rea"]), None)), ["--reason"]);
        // One dash: each flag once, by its short name where it has one.
        let dash = complete(&words(&["batches", "-"]), None);
        assert_eq!(
            values(&dash),
            ["-o", "--no-headers", "-w", "--kubeconfig", "--context", "-n", "-A", "--request-timeout", "-h"]
        );
    }

    #[test]
    fn a_value_enum_offers_its_values() {
        let offered = complete(&words(&["batches", "-o", ""]), None);
        assert_eq!(values(&offered), ["table", "wide", "json", "yaml", "name"]);
        assert_eq!(values(&complete(&words(&["batches", "--output", "j"]), None)), ["json"]);
        assert_eq!(values(&complete(&words(&["batches", "--output=y"]), None)), ["--output=yaml"]);
        assert_eq!(values(&complete(&words(&["--approval", ""]), None)), ["auto", "manual"]);
        assert_eq!(values(&complete(&words(&["completion", "z"]), None)), ["zsh"]);
        // A free-text value has nothing to offer, and no file names either.
        let reason = complete(&words(&["approve", "ns/b", "--reason", ""]), None);
        assert!(reason.candidates.is_empty(), "{reason:?}");
        assert_eq!(reason.directive, DIRECTIVE_NO_FILE_COMP);
    }

    #[test]
    fn a_path_value_offers_files_and_a_lone_directory_goes_on_without_a_space() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("kubeconfig.yaml"), "").expect("file");
        std::fs::create_dir(dir.path().join("manifests")).expect("dir");
        let file = complete(&words(&["--kubeconfig", "kube"]), Some(dir.path()));
        assert_eq!(values(&file), ["kubeconfig.yaml"]);
        assert_eq!(file.directive, DIRECTIVE_NO_FILE_COMP);
        let directory = complete(&words(&["plan", "-f", "man"]), Some(dir.path()));
        assert_eq!(values(&directory), [format!("manifests{}", std::path::MAIN_SEPARATOR).as_str()]);
        assert_eq!(directory.directive, DIRECTIVE_NO_FILE_COMP | DIRECTIVE_NO_SPACE);
        let absolute = format!("{}{}kube", dir.path().display(), std::path::MAIN_SEPARATOR);
        let offered = complete(&words(&["--kubeconfig", &absolute]), None);
        assert_eq!(values(&offered), [dir.path().join("kubeconfig.yaml").display().to_string().as_str()]);
    }

    #[test]
    fn the_answer_is_one_candidate_a_line_then_the_directive() {
        let completions = Completions {
            candidates: vec![("batches".into(), Some("List batches".into())), ("bench".into(), None)],
            directive: DIRECTIVE_NO_FILE_COMP,
        };
        assert_eq!(completions.render(), "batches\tList batches\nbench\n:4\n");
        let nothing = Completions { candidates: vec![], directive: DIRECTIVE_NO_FILE_COMP | DIRECTIVE_NO_SPACE };
        assert_eq!(nothing.render(), ":6\n");
        // Every real answer: no empty line, at most one tab a line, the directive last.
        let text = complete(&words(&["batches", "--"]), None).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.last(), Some(&":4"));
        assert!(lines.iter().all(|line| !line.is_empty() && line.matches('\t').count() <= 1), "{text}");
    }

    #[cfg(unix)]
    #[test]
    fn install_links_both_names_keeps_them_and_replaces_a_stranger_only_when_forced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let exe = std::fs::canonicalize(std::env::current_exe().expect("exe")).expect("canonical");
        let said = install_into(dir.path(), &exe, false).expect("installs");
        assert_eq!(said.len(), 2);
        assert!(said.iter().all(|line| line.ends_with("(created)")), "{said:?}");
        for name in [KUBECTL_PLUGIN, KUBECTL_COMPLETER] {
            assert_eq!(std::fs::read_link(dir.path().join(name)).expect("a link"), exe, "{name}");
        }
        let again = install_into(dir.path(), &exe, false).expect("again");
        assert!(again.iter().all(|line| line.ends_with("(already in place)")), "{again:?}");

        std::fs::remove_file(dir.path().join(KUBECTL_COMPLETER)).expect("rm");
        std::fs::write(dir.path().join(KUBECTL_COMPLETER), "#!/bin/sh\n").expect("a stranger");
        let error = install_into(dir.path(), &exe, false).expect_err("refused").to_string();
        assert!(error.contains("kubectl_complete-capdeck exists") && error.contains("--force"), "{error}");
        assert_eq!(std::fs::read_to_string(dir.path().join(KUBECTL_COMPLETER)).expect("kept"), "#!/bin/sh\n");
        let forced = install_into(dir.path(), &exe, true).expect("forced");
        assert!(forced[1].ends_with("(replaced)"), "{forced:?}");
        assert_eq!(std::fs::read_link(dir.path().join(KUBECTL_COMPLETER)).expect("a link"), exe);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .filter_map(Result::ok)
            .map(|entry| entry.file_name())
            .filter(|name| name.to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");

        let missing = dir.path().join("nope");
        let error = install_into(&missing, &exe, false).expect_err("no dir").to_string();
        assert!(error.contains("is not a directory") && error.contains("mkdir -p"), "{error}");
    }
}
