//! `check` on compiled policies of 10, 100 and 1,000 rules per rule shape, and compilation.
//! Budget (docs/performance.md): ≤ 1 µs median at 100 rules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use turngate::{Action, ActionKind, Policy};

/// Rule shapes: how globset classifies them decides how match cost grows with rule count.
const SHAPES: [(&str, fn(usize) -> String); 4] = [
    ("literal", |i| format!("file{i}.txt")),
    ("prefix", |i| format!("dir{i}/*")),
    ("extension", |i| format!("*.ext{i}")),
    ("dir_glob_ext", |i| format!("dir{i}/**/*.rs")),
];

fn policy(shape: fn(usize) -> String, n: usize) -> Policy {
    let mut p = Policy::default().layer("bench");
    for i in 0..n {
        p = match i % 3 {
            0 => p.deny_write(shape(i)),
            1 => p.ask_write(shape(i)),
            _ => p.allow_write(shape(i)),
        };
    }
    p
}

fn bench_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    // A typical path that matches no bench rule: the full miss path, then the default.
    let miss = Action::new(ActionKind::FileWrite, "src/module/handler.rs");
    // The floor: normalization and the default, with no rule to match.
    let empty = Policy::new().compile().expect("compile");
    group.bench_function(BenchmarkId::new("no_rules", 0), |b| {
        b.iter(|| empty.check(black_box(&miss)))
    });
    for (name, shape) in SHAPES {
        for n in [10usize, 100, 1000, 10_000] {
            let compiled = policy(shape, n).compile().expect("compile");
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| compiled.check(black_box(&miss)))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("explain_hit");
    for (name, shape) in SHAPES {
        let compiled = policy(shape, 100).compile().expect("compile");
        let target = match name {
            "literal" => "file50.txt".to_owned(),
            "prefix" => "dir50/a/b.txt".to_owned(),
            "extension" => "x/y.ext50".to_owned(),
            _ => "dir50/a/b/c.rs".to_owned(),
        };
        let hit = Action::new(ActionKind::FileWrite, target);
        group.bench_function(BenchmarkId::new(name, 100), |b| {
            b.iter(|| compiled.explain(black_box(&hit)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("check_kinds");
    let compiled = Policy::default()
        .layer("project")
        .allow_net("api.example.com")
        .compile()
        .expect("compile");
    for (name, action) in [
        (
            "file_read_secret",
            Action::new(ActionKind::FileRead, "config/.env"),
        ),
        (
            "network_url",
            Action::new(ActionKind::Network, "https://api.example.com/v1"),
        ),
        (
            "shell_plain",
            Action::new(ActionKind::ShellCommand, "rustc --version"),
        ),
    ] {
        group.bench_function(name, |b| b.iter(|| compiled.check(black_box(&action))));
    }
    group.finish();
}

fn bench_compile(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    group.sample_size(20);
    for n in [10usize, 100, 1000] {
        let p = policy(SHAPES[3].1, n);
        group.bench_with_input(BenchmarkId::new("dir_glob_ext", n), &n, |b, _| {
            b.iter(|| black_box(&p).compile().expect("compile"))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = bench_check, bench_compile
}
criterion_main!(benches);
