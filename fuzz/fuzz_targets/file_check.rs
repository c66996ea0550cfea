//! The file checker never panics, and never allows a path that resolves outside the
//! workspace.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use turngate::check::FilePolicyChecker;
use turngate::protocol::{
    BackendRequirement, FilesystemEntry, FsAccess, FsProvenance, NetworkMode, SandboxBackendKind,
    SandboxMode, TmpPolicy, TurnFilesystemSnapshot, TurnNetworkPolicySnapshot,
    TurnSandboxSnapshot,
};
use turngate::{ActionKind, CompiledPolicy, Effect, Policy};

fn workspace() -> &'static PathBuf {
    static WS: OnceLock<PathBuf> = OnceLock::new();
    WS.get_or_init(|| {
        let dir = tempfile::tempdir().map(|d| d.keep()).unwrap_or_else(|_| "/tmp".into());
        let ws = std::fs::canonicalize(&dir).unwrap_or(dir).join("ws");
        let _ = std::fs::create_dir_all(ws.join("a/b"));
        let _ = std::os::unix::fs::symlink("/etc", ws.join("etc_link"));
        let _ = std::os::unix::fs::symlink("../..", ws.join("a/up"));
        ws
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else { return };
    let ws = workspace();
    let sandbox = TurnSandboxSnapshot {
        mode: SandboxMode::WorkspaceWrite,
        cwd: ws.join("a"),
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
            allowed_domains: vec![],
            denied_domains: vec![],
            allow_localhost: false,
            allow_unix_sockets: false,
            allowed_tcp_ports: vec![],
        },
        backend_requirement: BackendRequirement::Optional,
        backend_preference: SandboxBackendKind::None,
    };
    let Ok(policy) = CompiledPolicy::new(Policy::permissive()) else { return };
    let checker = FilePolicyChecker::new(&sandbox, &policy);
    for kind in [ActionKind::FileRead, ActionKind::FileWrite] {
        let c = checker.check(kind, path, None);
        if c.verdict.effect == Effect::Allow {
            let resolved = c.resolved.unwrap_or_default();
            assert!(resolved.starts_with(ws), "{path:?} allowed as {resolved:?}");
        }
    }
});
