//! Profiling driver (not a bench): `valgrind --tool=callgrind target/release/examples/prof_check`.
use std::hint::black_box;
use turngate::{Action, ActionKind, Policy};

fn main() {
    let mut p = Policy::default().layer("bench");
    for i in 0..100 {
        p = p.deny_write(format!("dir{i}/**/*.rs"));
    }
    let compiled = p.compile().unwrap_or_else(|e| panic!("{e}"));
    let miss = Action::new(ActionKind::FileWrite, "src/module/handler.rs");
    let mut n = 0u32;
    for _ in 0..200_000 {
        if compiled.check(black_box(&miss)) == turngate::Effect::Ask {
            n += 1;
        }
    }
    println!("{n}");
}
