//! Records the git commit the binary was built from, for `capdeck version` and `-V`.
//! `CAPDECK_GIT_COMMIT` (set by a build without `.git`, e.g. an image build) wins; without
//! either the commit is `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CAPDECK_GIT_COMMIT");
    // Only paths that exist: Cargo treats a missing one as always stale, and a repository whose
    // refs were never packed has no `packed-refs` (the crate would rebuild on every build). Git
    // says where they are (in a worktree `.git` is a file and HEAD lives elsewhere).
    let git_path = |arg: &str| {
        let output = Command::new("git").args(["rev-parse", arg]).output().ok()?;
        let path = String::from_utf8(output.stdout).ok()?.trim().to_string();
        (output.status.success() && !path.is_empty()).then_some(path)
    };
    let git_dir = git_path("--git-dir").unwrap_or_else(|| ".git".into());
    let common_dir = git_path("--git-common-dir").unwrap_or_else(|| git_dir.clone());
    for path in [format!("{git_dir}/HEAD"), format!("{common_dir}/refs"), format!("{common_dir}/packed-refs")] {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("CAPDECK_GIT_COMMIT").ok().filter(|c| !c.trim().is_empty()).or_else(|| {
        let output = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
        let commit = String::from_utf8(output.stdout).ok()?.trim().to_string();
        (output.status.success() && !commit.is_empty()).then_some(commit)
    });
    println!("cargo:rustc-env=CAPDECK_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}
