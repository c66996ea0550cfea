//! Profiling driver (not a bench): `prof_check [policy|file]`, for
//! `valgrind --tool=callgrind target/release/examples/prof_check file`.

use std::hint::black_box;

use turngate::check::file::FilePolicyChecker;
use turngate::protocol::{
    BackendRequirement, FilesystemEntry, FsAccess, FsProvenance, NetworkMode, SandboxBackendKind,
    SandboxMode, TmpPolicy, TurnFilesystemSnapshot, TurnNetworkPolicySnapshot, TurnSandboxSnapshot,
};
use turngate::{Action, ActionKind, Policy};

fn main() {
    let mut p = Policy::default().layer("bench");
    for i in 0..100 {
        p = p.deny_write(format!("dir{i}/**/*.rs"));
    }
    let compiled = p.compile().unwrap_or_else(|e| panic!("{e}"));
    let mut n = 0u32;
    if std::env::args().nth(1).as_deref() == Some("file") {
        let ws = std::env::temp_dir().join(format!("tg-prof-{}", std::process::id()));
        let file = ws.join("src/check/file.rs");
        std::fs::create_dir_all(ws.join("src/check")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&file, "x").unwrap_or_else(|e| panic!("{e}"));
        let sandbox = TurnSandboxSnapshot {
            mode: SandboxMode::WorkspaceWrite,
            cwd: ws.clone(),
            filesystem: TurnFilesystemSnapshot {
                entries: vec![FilesystemEntry {
                    path: ws.clone(),
                    access: FsAccess::Write,
                    provenance: FsProvenance::Workspace,
                }],
            },
            tmp: TmpPolicy::Isolated,
            network: TurnNetworkPolicySnapshot {
                mode: NetworkMode::Disabled,
                allowed_domains: Vec::new(),
                denied_domains: Vec::new(),
                allow_localhost: false,
                allow_unix_sockets: false,
                allowed_tcp_ports: Vec::new(),
            },
            backend_requirement: BackendRequirement::Optional,
            backend_preference: SandboxBackendKind::None,
        };
        let checker = FilePolicyChecker::new(&sandbox, &compiled);
        for _ in 0..50_000 {
            if checker
                .check(ActionKind::FileRead, black_box(&file), None)
                .effect()
                == turngate::Effect::Allow
            {
                n += 1;
            }
        }
        let _ = std::fs::remove_dir_all(&ws);
    } else {
        let miss = Action::new(ActionKind::FileWrite, "src/module/handler.rs");
        for _ in 0..200_000 {
            if compiled.check(black_box(&miss)) == turngate::Effect::Ask {
                n += 1;
            }
        }
    }
    println!("{n}");
}
