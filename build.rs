//! Records the git commit the binary was built from, for `capdeck version` and `-V`.
//! `CAPDECK_GIT_COMMIT` (set by a build without `.git`, e.g. an image build) wins; without
//! either the commit is `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CAPDECK_GIT_COMMIT");
    // Only paths that exist: Cargo treats a missing one as always stale, and a repository whose
    // refs were never packed has no `.git/packed-refs` (the crate would rebuild on every build).
    for path in [".git/HEAD", ".git/refs", ".git/packed-refs"] {
        if std::path::Path::new(path).exists() {
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
