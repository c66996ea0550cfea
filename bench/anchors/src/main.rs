//! The anchors of `bench/run`: turngate measured against other systems in the same run.
//!
//! ```text
//! turngate-bench-anchors check [--rounds N]                 # check vs Cedar vs globset
//! turngate-bench-anchors spawn [--rounds N] [--srt-rounds N] [--bwrap P] [--srt P] [--turngate P]
//! turngate-bench-anchors layers [--rounds N] [--only ROW]   # the spawn, namespace by namespace
//! turngate-bench-anchors emit                               # the policy and cases, for Python
//! ```
//!
//! Each prints one JSON object on stdout; `bench/run` turns it into table rows. A spawn
//! anchor given no path (or one that does not run) is reported under `skipped` with why.
//! This crate is a bench tool: the library never depends on it or on the anchors.

#![allow(clippy::expect_used)] // a bench: a failure should stop the run and say where

mod check;
#[cfg(target_os = "linux")]
mod layers;
mod policy;
mod spawn;
mod timing;

use std::path::PathBuf;

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn tool(args: &[String], name: &str, what: &str) -> Result<PathBuf, String> {
    flag(args, name)
        .map(PathBuf::from)
        .ok_or_else(|| format!("{what} not installed (bench/run passes {name} when it is)"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = |default: usize| {
        flag(&args, "--rounds").map_or(default, |r| r.parse().expect("--rounds N"))
    };
    let out = match args.first().map(String::as_str) {
        Some("check") => check::run(rounds(40)),
        Some("spawn") => {
            let tools = spawn::Tools {
                bwrap: tool(&args, "--bwrap", "bubblewrap"),
                srt: tool(&args, "--srt", "sandbox-runtime (srt)"),
                turngate: tool(&args, "--turngate", "the turngate CLI"),
            };
            let srt_rounds =
                flag(&args, "--srt-rounds").map_or(20, |r| r.parse().expect("--srt-rounds N"));
            spawn::run(rounds(150), srt_rounds, &tools)
        }
        #[cfg(target_os = "linux")]
        Some("layers") => layers::run(rounds(200), flag(&args, "--only").as_deref()),
        Some("emit") => policy::emit_json(),
        _ => {
            eprintln!("usage: turngate-bench-anchors check|spawn|layers|emit [--rounds N] ...");
            std::process::exit(2);
        }
    };
    println!("{out}");
}
