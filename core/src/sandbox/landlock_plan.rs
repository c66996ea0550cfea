//! The Linux plan: which network shape to ask nono for, and which degradations follow from a
//! Landlock ABI version.
//!
//! A pure function of the spec and the ABI number, so every ABI can be tested on any machine.
//! It never opens a path and never touches the kernel.

use crate::protocol::NetworkMode;

use super::report::{Degradation, DegradationArea};
use super::spec::SandboxSpec;

/// The highest Landlock ABI whose rights nono 0.81.0 enforces (`nono::MAX_ENFORCED_ABI`).
pub const NONO_MAX_ENFORCED_ABI: u32 = 6;

/// Whether this build refuses `socket(AF_UNIX)` with its own seccomp filter when the snapshot
/// does not allow Unix sockets (x86_64 and aarch64 Linux): then no Unix socket, pathname or
/// abstract, can be connected from the sandbox.
const UNIX_FILTER: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// The network shape the kernel is asked to enforce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetPlan {
    /// No network confinement.
    AllowAll,
    /// No TCP connect or bind (Landlock) and no non-Unix socket at all (seccomp): TCP and UDP
    /// egress both fail.
    BlockAll,
    /// TCP connect only to these ports (Landlock); UDP, raw and non-IP sockets denied (seccomp).
    TcpConnect(Vec<u16>),
}

/// The plan for one spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockPlan {
    /// The network shape.
    pub net: NetPlan,
    /// Whether abstract Unix sockets may leave the sandbox (nono `IpcMode::Full`).
    pub allow_abstract_unix: bool,
    /// Where enforcement is weaker than asked.
    pub degradations: Vec<Degradation>,
    /// Where enforcement is stricter than asked.
    pub narrowings: Vec<Degradation>,
}

/// Plan the Linux sandbox for `spec` on a kernel reporting Landlock ABI `abi`, without an
/// egress proxy (no network namespace to put it in).
pub fn plan(spec: &SandboxSpec, abi: u32) -> LandlockPlan {
    plan_with_proxy(spec, abi, None)
}

/// [`plan`], where a `network = restricted` command runs in a network namespace with loopback
/// only and reaches the outside through the egress proxy on `127.0.0.1:proxy` (DESIGN §13).
/// Then the TCP connect rule names the proxy's port (and the snapshot's ports, which reach
/// only the namespace's own loopback); UDP and raw sockets stay refused.
pub fn plan_with_proxy(spec: &SandboxSpec, abi: u32, proxy: Option<u16>) -> LandlockPlan {
    let enforced = abi.min(NONO_MAX_ENFORCED_ABI);
    let mut degradations = Vec::new();
    let mut narrowings = Vec::new();
    let net_policy = &spec.network;

    let mut ports: Vec<u16> = net_policy
        .allowed_tcp_ports
        .iter()
        .copied()
        .filter(|p| *p != 0)
        .collect();
    ports.sort_unstable();
    ports.dedup();

    let proxy = proxy.filter(|_| net_policy.mode == NetworkMode::Restricted);
    if let Some(port) = proxy {
        ports.push(port);
        ports.sort_unstable();
        ports.dedup();
    }
    let mut net = match (net_policy.mode, ports.is_empty()) {
        (NetworkMode::Enabled, true) => NetPlan::AllowAll,
        (NetworkMode::Restricted, true) => {
            narrowings.push(Degradation::new(
                DegradationArea::Network,
                "a domain allow-list needs turngate's filtering proxy, which needs a network namespace \
                 (unavailable here); all network egress is blocked (grant TCP ports to open some)",
            ));
            NetPlan::BlockAll
        }
        (NetworkMode::Disabled, true) => NetPlan::BlockAll,
        (_, false) => NetPlan::TcpConnect(ports),
    };

    if let (Some(_), NetPlan::TcpConnect(_)) = (proxy, &net) {
        if enforced < 4 {
            // The network namespace (loopback and the proxy only) is the boundary; Landlock
            // cannot add a port rule on this kernel.
            degradations.push(Degradation::new(
                DegradationArea::Network,
                format!(
                    "Landlock ABI V{abi} has no TCP port rules (needs V4): inside the network \
                     namespace UDP and other TCP ports on its own loopback are not refused"
                ),
            ));
            net = NetPlan::AllowAll;
        }
    } else if let NetPlan::TcpConnect(ports) = &net {
        if enforced < 4 {
            narrowings.push(Degradation::new(
                DegradationArea::Network,
                format!(
                    "Landlock ABI V{abi} has no TCP port rules (needs V4); all network egress \
                     is blocked instead of allowing TCP ports {ports:?}"
                ),
            ));
            net = NetPlan::BlockAll;
        } else {
            degradations.push(Degradation::new(
                DegradationArea::Network,
                "Landlock TCP rules match the port only: the allowed ports are reachable on \
                 every host, loopback included",
            ));
            if net_policy.mode == NetworkMode::Restricted {
                degradations.push(Degradation::new(
                    DegradationArea::Network,
                    "allowed domains are not enforced by the kernel (no filtering proxy); only \
                     the TCP port list is",
                ));
            }
        }
    }

    match &net {
        NetPlan::AllowAll if proxy.is_some() => {}
        NetPlan::AllowAll => {
            if !net_policy.denied_domains.is_empty() {
                degradations.push(Degradation::new(
                    DegradationArea::Network,
                    "denied domains are enforced by the network checker only; the kernel \
                     sandbox does not filter by host",
                ));
            }
            if !net_policy.allow_localhost {
                degradations.push(Degradation::new(
                    DegradationArea::Network,
                    "loopback cannot be blocked apart from other hosts while the network is \
                     enabled",
                ));
            }
        }
        NetPlan::BlockAll | NetPlan::TcpConnect(_) => {
            if net_policy.allow_localhost && proxy.is_none() && matches!(net, NetPlan::BlockAll) {
                narrowings.push(Degradation::new(
                    DegradationArea::Network,
                    "loopback is blocked with every other host: Landlock cannot allow an \
                     address, only a TCP port",
                ));
            }
        }
    }

    if !net_policy.allow_unix_sockets && !UNIX_FILTER {
        let abstract_note = if enforced >= 6 {
            "abstract sockets are scoped to the sandbox"
        } else {
            "abstract sockets are not scoped either (needs Landlock V6)"
        };
        degradations.push(Degradation::new(
            DegradationArea::Network,
            format!(
                "connecting to an existing pathname Unix socket is not blocked (needs Landlock \
                 V9, nono enforces up to V{NONO_MAX_ENFORCED_ABI}); {abstract_note}"
            ),
        ));
    }

    if enforced < 3 {
        degradations.push(Degradation::new(
            DegradationArea::Filesystem,
            format!("Landlock ABI V{abi} cannot restrict truncate(2) (needs V3)"),
        ));
    }
    if enforced < 5 {
        degradations.push(Degradation::new(
            DegradationArea::Filesystem,
            format!("Landlock ABI V{abi} cannot restrict ioctl on device files (needs V5)"),
        ));
    }
    if enforced < 6 {
        degradations.push(Degradation::new(
            DegradationArea::Process,
            format!(
                "Landlock ABI V{abi} cannot stop the sandboxed process from signalling \
                 processes outside the sandbox (needs V6)"
            ),
        ));
    }

    LandlockPlan {
        net,
        allow_abstract_unix: net_policy.allow_unix_sockets,
        degradations,
        narrowings,
    }
}
