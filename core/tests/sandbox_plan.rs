//! The Linux plan as a pure function of the spec and the Landlock ABI: which network shape is
//! asked for and which degradations are reported, for every ABI from V1 to V9.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use turngate::protocol::{
    BackendRequirement, FsAccess, NetworkMode, SandboxBackendKind, SandboxMode,
    TurnNetworkPolicySnapshot,
};
use turngate::sandbox::landlock_plan::{NetPlan, plan, plan_with_proxy};
use turngate::sandbox::{DegradationArea, FsGrant, SandboxSpec, TmpSpec};

fn spec(mode: NetworkMode, ports: Vec<u16>) -> SandboxSpec {
    SandboxSpec {
        mode: SandboxMode::WorkspaceWrite,
        roots: vec![FsGrant {
            path: "/w".into(),
            access: FsAccess::Write,
        }],
        system_roots: true,
        tmp: TmpSpec::Isolated(None),
        network: TurnNetworkPolicySnapshot {
            mode,
            allowed_domains: vec![],
            denied_domains: vec![],
            allow_localhost: false,
            allow_unix_sockets: true,
            allowed_tcp_ports: ports,
        },
        requirement: BackendRequirement::Required,
        preference: SandboxBackendKind::Nono,
        home: None,
        masks: Vec::new(),
        masks_truncated: false,
        review: None,
    }
}

fn areas(d: &[turngate::sandbox::Degradation]) -> Vec<DegradationArea> {
    d.iter().map(|d| d.area).collect()
}

#[test]
fn disabled_network_blocks_everything_on_every_abi() {
    for abi in 1..=9 {
        let p = plan(&spec(NetworkMode::Disabled, vec![]), abi);
        assert_eq!(p.net, NetPlan::BlockAll, "ABI {abi}");
        assert!(
            !areas(&p.degradations).contains(&DegradationArea::Network),
            "ABI {abi}: {:?}",
            p.degradations
        );
    }
}

#[test]
fn tcp_ports_need_abi_4_and_otherwise_fail_closed() {
    for abi in 1..=3 {
        let p = plan(&spec(NetworkMode::Disabled, vec![443]), abi);
        assert_eq!(p.net, NetPlan::BlockAll, "ABI {abi}");
        assert!(p.narrowings.iter().any(|n| n.reason.contains("needs V4")));
    }
    for abi in 4..=9 {
        let p = plan(&spec(NetworkMode::Disabled, vec![443, 80, 443, 0]), abi);
        assert_eq!(p.net, NetPlan::TcpConnect(vec![80, 443]), "ABI {abi}");
        assert!(
            p.degradations
                .iter()
                .any(|d| d.reason.contains("port only"))
        );
    }
}

#[test]
fn abi_below_6_reports_signal_scoping_missing() {
    let p = plan(&spec(NetworkMode::Disabled, vec![]), 5);
    assert!(areas(&p.degradations).contains(&DegradationArea::Process));
    let p = plan(&spec(NetworkMode::Disabled, vec![]), 6);
    assert!(p.degradations.is_empty(), "{:?}", p.degradations);
    let p = plan(&spec(NetworkMode::Disabled, vec![]), 7);
    assert!(p.degradations.is_empty(), "{:?}", p.degradations);
}

#[test]
fn old_abis_report_filesystem_gaps() {
    let p = plan(&spec(NetworkMode::Disabled, vec![]), 2);
    let fs: Vec<_> = p
        .degradations
        .iter()
        .filter(|d| d.area == DegradationArea::Filesystem)
        .collect();
    assert_eq!(fs.len(), 2, "{fs:?}");
    let p = plan(&spec(NetworkMode::Disabled, vec![]), 4);
    assert_eq!(
        p.degradations
            .iter()
            .filter(|d| d.area == DegradationArea::Filesystem)
            .count(),
        1
    );
}

#[test]
fn restricted_without_ports_blocks_and_says_why() {
    let p = plan(&spec(NetworkMode::Restricted, vec![]), 7);
    assert_eq!(p.net, NetPlan::BlockAll);
    assert!(
        p.narrowings
            .iter()
            .any(|n| n.reason.contains("filtering proxy"))
    );
}

#[test]
fn restricted_with_the_proxy_opens_only_the_proxy_port() {
    let p = plan_with_proxy(&spec(NetworkMode::Restricted, vec![]), 7, Some(3128));
    assert_eq!(p.net, NetPlan::TcpConnect(vec![3128]));
    assert!(p.narrowings.is_empty(), "{:?}", p.narrowings);
    // The network namespace confines the ports: no "reachable on every host" degradation.
    assert!(
        !p.degradations
            .iter()
            .any(|d| d.area == DegradationArea::Network),
        "{:?}",
        p.degradations
    );
    // The snapshot's own ports reach only the namespace's loopback; they stay allowed.
    let p = plan_with_proxy(
        &spec(NetworkMode::Restricted, vec![443, 3128]),
        7,
        Some(3128),
    );
    assert_eq!(p.net, NetPlan::TcpConnect(vec![443, 3128]));
}

#[test]
fn the_proxy_is_only_for_restricted() {
    for mode in [NetworkMode::Disabled, NetworkMode::Enabled] {
        let with = plan_with_proxy(&spec(mode, vec![]), 7, Some(3128));
        let without = plan(&spec(mode, vec![]), 7);
        assert_eq!(with, without, "{mode:?}");
    }
}

#[test]
fn restricted_with_the_proxy_on_an_old_kernel_relies_on_the_namespace_and_says_so() {
    let p = plan_with_proxy(&spec(NetworkMode::Restricted, vec![]), 3, Some(3128));
    assert_eq!(p.net, NetPlan::AllowAll);
    assert!(
        p.degradations
            .iter()
            .any(|d| d.area == DegradationArea::Network && d.reason.contains("no TCP port rules")),
        "{:?}",
        p.degradations
    );
}

#[test]
fn enabled_network_is_not_confined_and_says_what_the_kernel_cannot_do() {
    let mut s = spec(NetworkMode::Enabled, vec![]);
    s.network.denied_domains = vec!["evil.example".into()];
    let p = plan(&s, 7);
    assert_eq!(p.net, NetPlan::AllowAll);
    assert!(
        p.degradations
            .iter()
            .any(|d| d.reason.contains("denied domains"))
    );
}

#[test]
fn denying_unix_sockets_is_enforced_by_the_socket_filter() {
    // The seccomp filter refuses socket(AF_UNIX) on x86_64 and aarch64 Linux, so there is no
    // degradation to report there; elsewhere the gap is named.
    let mut s = spec(NetworkMode::Disabled, vec![]);
    s.network.allow_unix_sockets = false;
    let p = plan(&s, 7);
    assert!(!p.allow_abstract_unix);
    let named = p
        .degradations
        .iter()
        .any(|d| d.reason.contains("Unix socket"));
    let filtered = cfg!(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ));
    assert_eq!(named, !filtered, "{:?}", p.degradations);
}
