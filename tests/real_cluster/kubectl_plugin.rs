//! capdeck as a kubectl plugin, checked with the built kubectl: installed the way the README says
//! (`capdeck kubectl-plugin install --dir DIR`) into a directory that is the whole PATH, kubectl
//! lists it, runs it as `kubectl capdeck ...` (help and errors say so) and completes its
//! arguments through `kubectl_complete-capdeck` (kubectl's `__complete`, as its shell scripts call
//! it). Needs no cluster: KUBECONFIG points at a file that does not exist.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use libtest_mimic::Failed;

/// A directory holding the two links, made by capdeck itself; kubectl runs with it as PATH.
struct Installed {
    dir: tempfile::TempDir,
    kubectl: PathBuf,
}

impl Installed {
    fn new(kubectl: &Path) -> Result<Self, Failed> {
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let output = Command::new(env!("CARGO_BIN_EXE_capdeck"))
            .args(["kubectl-plugin", "install", "--dir"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("capdeck kubectl-plugin install: {e}"))?;
        let said = String::from_utf8_lossy(&output.stdout).to_string();
        if !output.status.success() {
            return Err(format!("install failed: {said}{}", String::from_utf8_lossy(&output.stderr)).into());
        }
        for name in ["kubectl-capdeck", "kubectl_complete-capdeck"] {
            if !said.contains(&format!("{name} -> ")) || !dir.path().join(name).is_file() {
                return Err(format!("install did not make {name}: {said}").into());
            }
        }
        Ok(Self { dir, kubectl: kubectl.to_path_buf() })
    }

    fn kubectl(&self, args: &[&str]) -> Result<Output, Failed> {
        Command::new(&self.kubectl)
            .args(args)
            .env("PATH", self.dir.path())
            .env("KUBECONFIG", self.dir.path().join("no-such-kubeconfig"))
            .output()
            .map_err(|e| format!("{} {args:?}: {e}", self.kubectl.display()).into())
    }

    /// `kubectl ARGS` that must succeed: its stdout.
    fn kubectl_ok(&self, args: &[&str]) -> Result<String, Failed> {
        let output = self.kubectl(args)?;
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        if !output.status.success() {
            return Err(format!(
                "kubectl {args:?} exited {}: {stdout}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        Ok(stdout)
    }

    /// `kubectl __complete capdeck WORDS...`: the candidates (values only) and the directive.
    fn complete(&self, words: &[&str]) -> Result<(Vec<String>, u32), Failed> {
        let mut args = vec!["__complete", "capdeck"];
        args.extend_from_slice(words);
        let stdout = self.kubectl_ok(&args)?;
        let mut lines: Vec<&str> = stdout.lines().collect();
        let last = lines.pop().ok_or_else(|| format!("{args:?}: no output"))?;
        let directive = last
            .strip_prefix(':')
            .and_then(|number| number.parse::<u32>().ok())
            .ok_or_else(|| format!("{args:?}: the last line is not a directive: {stdout}"))?;
        let values = lines.iter().map(|line| line.split('\t').next().unwrap_or_default().to_string()).collect();
        Ok((values, directive))
    }
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if ok { Ok(()) } else { Err(what().into()) }
}

/// `kubectl plugin list` names it; `kubectl capdeck` runs it with its arguments unchanged, and
/// its help and its usage errors say `kubectl capdeck`.
pub fn runs_as_kubectl_capdeck(kubectl: &Path) -> Result<(), Failed> {
    let installed = Installed::new(kubectl)?;
    let listed = installed.kubectl_ok(&["plugin", "list"])?;
    let plugin = installed.dir.path().join("kubectl-capdeck");
    check(listed.lines().any(|line| line.trim() == plugin.display().to_string()), || {
        format!("kubectl plugin list does not name {}: {listed}", plugin.display())
    })?;

    let version = installed.kubectl_ok(&["capdeck", "--version"])?;
    check(version.starts_with(&format!("capdeck {} (commit ", env!("CARGO_PKG_VERSION"))), || {
        format!("kubectl capdeck --version: {version}")
    })?;
    let help = installed.kubectl_ok(&["capdeck", "--help"])?;
    check(help.contains("Usage: kubectl capdeck [OPTIONS] [COMMAND]") && help.contains("batches"), || {
        format!("kubectl capdeck --help: {help}")
    })?;
    let sub_help = installed.kubectl_ok(&["capdeck", "batches", "--help"])?;
    check(sub_help.contains("Usage: kubectl capdeck batches [OPTIONS]"), || format!("batches --help: {sub_help}"))?;

    // -n after the plugin's name reaches capdeck as given: the manifests install into it.
    let manifests = installed.kubectl_ok(&["capdeck", "manifests", "-n", "x"])?;
    check(
        manifests.contains("kind: Namespace")
            && manifests.contains("name: x\n")
            && manifests.contains("kind: Deployment"),
        || format!("kubectl capdeck manifests -n x: {manifests}"),
    )?;
    let before = installed.kubectl_ok(&["capdeck", "-n", "x", "manifests"])?;
    check(before == manifests, || "-n before the subcommand gave other manifests".to_string())?;

    for (args, expected) in [
        (&["capdeck", "nope"][..], "Usage: kubectl capdeck [OPTIONS] [COMMAND]"),
        (&["capdeck", "batches", "--theme", "dark"], "`batches` opens no console"),
        (&["capdeck", "--readonly", "batches", "--reason", "x"], "unexpected argument '--reason'"),
        (&["capdeck", "hold", "ns/b", "--reason", "x", "--readonly"], "`kubectl capdeck --readonly hold ...`"),
    ] {
        let output = installed.kubectl(args)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        check(output.status.code() == Some(2), || format!("kubectl {args:?} exited {}: {stderr}", output.status))?;
        check(stderr.contains(expected) && stderr.contains("kubectl capdeck"), || {
            format!("kubectl {args:?}: expected {expected:?} naming `kubectl capdeck`: {stderr}")
        })?;
    }
    Ok(())
}

/// kubectl's own completion reaches capdeck's: subcommands, a prefix, flags, a flag's values.
pub fn kubectl_completes_its_arguments(kubectl: &Path) -> Result<(), Failed> {
    const NO_FILE_COMP: u32 = 4;
    let installed = Installed::new(kubectl)?;
    // kubectl completes the plugin's name itself, from PATH.
    let names = installed.kubectl_ok(&["__complete", "capd"])?;
    check(names.lines().any(|line| line.split('\t').next() == Some("capdeck")), || {
        format!("kubectl __complete capd: {names}")
    })?;

    let (first, directive) = installed.complete(&[""])?;
    for subcommand in ["batches", "approve", "doctor", "freeze", "manifests", "kubectl-plugin"] {
        check(first.iter().any(|value| value == subcommand), || format!("{subcommand} not offered: {first:?}"))?;
    }
    check(first.iter().all(|value| !value.starts_with('-')), || format!("flags offered for an empty word: {first:?}"))?;
    check(directive == NO_FILE_COMP, || format!("directive {directive} for the first word"))?;

    let (bat, directive) = installed.complete(&["bat"])?;
    check(bat == ["batches"] && directive == NO_FILE_COMP, || format!("bat: {bat:?} :{directive}"))?;
    let (after_flags, _) = installed.complete(&["-n", "shop", "--context", "prod", "appr"])?;
    check(after_flags == ["approve"], || format!("-n shop --context prod appr: {after_flags:?}"))?;

    let (flags, directive) = installed.complete(&["batches", "--"])?;
    for flag in ["--watch", "--output", "--namespace", "--all-namespaces", "--context"] {
        check(flags.iter().any(|value| value == flag), || format!("{flag} not offered after batches: {flags:?}"))?;
    }
    check(flags.iter().all(|value| value.starts_with("--")) && !flags.iter().any(|value| value == "--reason"), || {
        format!("batches --: {flags:?}")
    })?;
    check(directive == NO_FILE_COMP, || format!("directive {directive} for batches --"))?;

    let (formats, _) = installed.complete(&["batches", "-o", ""])?;
    check(formats == ["table", "wide", "json", "yaml", "name"], || format!("batches -o: {formats:?}"))?;
    let (reason, directive) = installed.complete(&["approve", "ns/b", "--reason", ""])?;
    check(reason.is_empty() && directive == NO_FILE_COMP, || format!("--reason: {reason:?} :{directive}"))?;
    Ok(())
}
