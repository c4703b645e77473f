//! Build facts for `nthd --version`: the target triple and the git commit.
//!
//! The commit comes from `NTHD_GIT_COMMIT` when set (builds from a tarball of the source, or
//! reproducible builds that pin it), else from `git` in this checkout, else "unknown".
//! No "-dirty" mark: cargo reruns this script only when HEAD moves, not when a source file
//! changes, so such a mark would be stale as often as right.

use std::path::Path;
use std::process::Command;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=NTHD_BUILD_TARGET={target}");
    println!("cargo:rerun-if-env-changed=NTHD_GIT_COMMIT");
    let commit = match std::env::var("NTHD_GIT_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => git_commit().unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=NTHD_GIT_COMMIT={commit}");
}

/// The short id of HEAD; None without git or outside a checkout.
fn git_commit() -> Option<String> {
    let git_dir = git(&["rev-parse", "--git-dir"])?;
    // Rebuild when HEAD moves: HEAD itself, the branch it points at, and packed refs.
    let git_dir = Path::new(&git_dir);
    println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    println!(
        "cargo:rerun-if-changed={}",
        git_dir.join("packed-refs").display()
    );
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        println!(
            "cargo:rerun-if-changed={}",
            git_dir.join(reference).display()
        );
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}
