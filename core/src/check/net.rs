//! The network checker: may this turn connect to this URL or `host:port`?
//!
//! Only `http` and `https` URLs (or bare `host[:port]` targets) are accepted; userinfo,
//! backslashes, whitespace and extra slashes are rejected; every IP spelling is canonicalized
//! by the shared normalizer. The address is classified (loopback, unspecified, private,
//! link-local, reserved, cloud metadata), denied domains are checked before allowed ones (suffix
//! rules at label boundaries only), and the turn's network mode sets a floor under the policy's
//! verdict. [`NetworkPolicyChecker::resolve_and_check`] resolves a name through an injectable
//! [`Resolver`] and vets every answer, so callers connect to the addresses it returns and never
//! resolve the name again. This module opens no connection.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;

use crate::action::{ActionKind, Effect};
use crate::check::file::{FileCheck, FilePolicyChecker};
use crate::policy::{CompiledPolicy, NormalizedTarget, USERINFO, normalize_network_target};
use crate::protocol::{NetworkMode, TurnNetworkPolicySnapshot};
use crate::verdict::{Reason, Verdict};

/// The layer reported when the network boundary (not a policy rule) decided.
pub const NETWORK_LAYER: &str = "sandbox.network";

/// Longest URL accepted (longer ones are refused, not parsed).
const MAX_TARGET_LEN: usize = 8 * 1024;

/// A DNS name after IDNA: at most 253 bytes, labels of 1..=63 letters, digits, `-` or `_`.
/// WHATWG hosts may hold `(`, `!`, `$`, ... that no resolver would ever answer for.
fn is_dns_name(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// What kind of address a host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressClass {
    /// A routable public address, or a name that is not special.
    Public,
    /// Loopback (`127.0.0.0/8`, `::1`, `localhost`).
    Loopback,
    /// Unspecified (`0.0.0.0/8`, `::`): connects to the local host on most systems.
    Unspecified,
    /// Private (`10/8`, `172.16/12`, `192.168/16`, `100.64/10`, `fc00::/7`).
    Private,
    /// Link-local (`169.254/16`, `fe80::/10`).
    LinkLocal,
    /// Multicast, broadcast, documentation, benchmarking and other reserved ranges.
    Reserved,
    /// A cloud metadata endpoint.
    Metadata,
}

/// Classify an address (IPv4-mapped, 6to4, NAT64 and Teredo addresses by the IPv4 they carry).
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, d] = ip.octets();
    match (a, b, c, d) {
        (169, 254, 169, 254) | (169, 254, 170, 2) | (169, 254, 169, 253) | (169, 254, 169, 123) => {
            AddressClass::Metadata
        }
        (100, 100, 100, 200) | (192, 0, 0, 192) => AddressClass::Metadata,
        (0, ..) => AddressClass::Unspecified,
        (127, ..) => AddressClass::Loopback,
        (10, ..) | (192, 168, ..) => AddressClass::Private,
        (172, 16..=31, ..) | (100, 64..=127, ..) => AddressClass::Private,
        (169, 254, ..) => AddressClass::LinkLocal,
        (224..=255, ..) => AddressClass::Reserved,
        (192, 0, 0, _) | (192, 0, 2, _) | (198, 18..=19, ..) | (198, 51, 100, _) => {
            AddressClass::Reserved
        }
        (203, 0, 113, _) | (192, 88, 99, _) => AddressClass::Reserved,
        _ => AddressClass::Public,
    }
}

fn v4_from(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let s = ip.segments();
    if ip.is_unspecified() {
        return AddressClass::Unspecified;
    }
    if ip.is_loopback() {
        return AddressClass::Loopback;
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    if s[..6] == [0; 6] {
        // IPv4-compatible (deprecated): the embedded address decides.
        return classify_v4(v4_from(s[6], s[7])).max(AddressClass::Reserved);
    }
    if s == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254] {
        return AddressClass::Metadata;
    }
    match s[0] {
        // NAT64 well-known prefix: the embedded IPv4 is what is reached.
        0x64 if s[1] == 0xff9b && s[2..6] == [0; 4] => classify_v4(v4_from(s[6], s[7])),
        0x64 if s[1] == 0xff9b => AddressClass::Private,
        // 6to4: 2002:AABB:CCDD::/48 reaches AA.BB.CC.DD.
        0x2002 => classify_v4(v4_from(s[1], s[2])).max(AddressClass::Public),
        // Teredo: the client address is stored inverted.
        0x2001 if s[1] == 0 => classify_v4(v4_from(!s[6], !s[7])).max(AddressClass::Public),
        0x2001 if s[1] == 0x0db8 => AddressClass::Reserved,
        0xfc00..=0xfdff => AddressClass::Private,
        0xfe80..=0xfebf => AddressClass::LinkLocal,
        0xfec0..=0xfeff => AddressClass::Private,
        0xff00..=0xffff => AddressClass::Reserved,
        0x0100 if s[1..4] == [0; 3] => AddressClass::Reserved,
        _ => AddressClass::Public,
    }
}

/// Classify a (normalized) host name: `localhost` names and metadata names are special.
pub fn classify_name(host: &str) -> AddressClass {
    const LOOPBACK: &[&str] = &[
        "localhost",
        "localhost.localdomain",
        "ip6-localhost",
        "ip6-loopback",
    ];
    const METADATA: &[&str] = &[
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
        "metadata.tencentyun.com",
    ];
    if LOOPBACK.contains(&host) || host.ends_with(".localhost") {
        AddressClass::Loopback
    } else if METADATA.contains(&host) {
        AddressClass::Metadata
    } else {
        AddressClass::Public
    }
}

/// Resolves names to addresses. Inject a fake in tests; the default is the system resolver.
pub trait Resolver {
    /// The addresses `host` resolves to.
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The system resolver (`getaddrinfo`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
    }
}

/// A network verdict and the canonical target it judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkCheck {
    /// The verdict.
    pub verdict: Verdict,
    /// The canonical target (`None` when the input could not be normalized).
    pub target: Option<NormalizedTarget>,
    /// The address class of the host (by literal or by name).
    pub class: Option<AddressClass>,
}

/// A checked and resolved target: connect to `addrs` and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkResolution {
    /// The check, downgraded to deny when a DNS answer falls in a forbidden range.
    pub check: NetworkCheck,
    /// The vetted addresses (empty when the verdict is deny). With an *ask* verdict these
    /// are the addresses to use once approved.
    pub addrs: Vec<SocketAddr>,
}

/// A download: the destination's file check and the URL's network check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadCheck {
    /// The strictest of the two.
    pub verdict: Verdict,
    /// The destination, checked as a `file_write` first.
    pub file: FileCheck,
    /// The URL's check (`None` when the destination was already denied).
    pub network: Option<NetworkCheck>,
}

#[derive(Debug)]
struct DomainRule {
    host: String,
    port: Option<u16>,
    is_ip: bool,
}

impl DomainRule {
    fn parse(entry: &str) -> Option<DomainRule> {
        let entry = entry.trim();
        let entry = entry
            .strip_prefix("*.")
            .or_else(|| entry.strip_prefix('.'))
            .unwrap_or(entry);
        let t = normalize_network_target(entry).ok()?;
        Some(DomainRule {
            host: t.host,
            port: t.port,
            is_ip: t.ip.is_some(),
        })
    }

    /// Whether this entry names `t` exactly enough to reach a local address: the same IP
    /// literal (any port, or the same one), or a loopback name with the same port
    /// (`localhost:8080`). A domain never does, so a name that resolves to loopback stays out.
    fn names_local(&self, t: &NormalizedTarget) -> bool {
        names_local(&self.host, self.port, self.is_ip, t)
    }

    /// Exact, or a subdomain at a label boundary; IP entries match exactly.
    fn matches(&self, t: &NormalizedTarget, exact_only: bool) -> bool {
        let port_ok = self.port.is_none() || self.port == t.port;
        let host_ok = if self.is_ip || t.ip.is_some() || exact_only {
            self.host == t.host
        } else {
            t.host == self.host
                || t.host
                    .strip_suffix(self.host.as_str())
                    .is_some_and(|prefix| prefix.ends_with('.'))
        };
        port_ok && host_ok
    }
}

fn names_local(host: &str, port: Option<u16>, is_ip: bool, t: &NormalizedTarget) -> bool {
    if host != t.host {
        return false;
    }
    if is_ip {
        port.is_none() || port == t.port
    } else {
        classify_name(host) == AddressClass::Loopback && port.is_some() && port == t.port
    }
}

/// Whether a policy rule's pattern names `t` the way [`DomainRule::names_local`] does: no
/// glob, and the same IP literal or loopback name and port.
fn pattern_names_local(pattern: &str, t: &NormalizedTarget) -> bool {
    if pattern.contains(['*', '?', '[', '{']) {
        return false;
    }
    match normalize_network_target(pattern) {
        Ok(p) => names_local(&p.host, p.port, p.ip.is_some(), t),
        Err(_) => false,
    }
}

/// Judges outbound connections against a turn's network policy and the compiled policy.
#[derive(Debug)]
pub struct NetworkPolicyChecker<'a, R = SystemResolver> {
    net: &'a TurnNetworkPolicySnapshot,
    policy: &'a CompiledPolicy,
    resolver: R,
    allowed: Vec<DomainRule>,
    denied: Vec<DomainRule>,
    layer: Arc<str>,
}

impl<'a> NetworkPolicyChecker<'a, SystemResolver> {
    /// A checker using the system resolver.
    pub fn new(net: &'a TurnNetworkPolicySnapshot, policy: &'a CompiledPolicy) -> Self {
        NetworkPolicyChecker {
            net,
            policy,
            resolver: SystemResolver,
            allowed: net
                .allowed_domains
                .iter()
                .filter_map(|d| DomainRule::parse(d))
                .collect(),
            denied: net
                .denied_domains
                .iter()
                .filter_map(|d| DomainRule::parse(d))
                .collect(),
            layer: Arc::from(NETWORK_LAYER),
        }
    }
}

impl<'a, R: Resolver> NetworkPolicyChecker<'a, R> {
    /// The same checker with another resolver (tests inject a fake one).
    pub fn with_resolver<R2: Resolver>(self, resolver: R2) -> NetworkPolicyChecker<'a, R2> {
        NetworkPolicyChecker {
            net: self.net,
            policy: self.policy,
            resolver,
            allowed: self.allowed,
            denied: self.denied,
            layer: self.layer,
        }
    }

    fn verdict(&self, effect: Effect, reason: Reason) -> Verdict {
        Verdict::without_rule(effect, self.layer.clone(), reason)
    }

    fn deny(
        &self,
        reason: Reason,
        target: Option<NormalizedTarget>,
        class: Option<AddressClass>,
    ) -> NetworkCheck {
        NetworkCheck {
            verdict: self.verdict(Effect::Deny, reason),
            target,
            class,
        }
    }

    /// Judge a connection to `target` (a URL or `host[:port]`), called from `tool`.
    pub fn check(&self, target: &str, tool: Option<&str>) -> NetworkCheck {
        if target.len() > MAX_TARGET_LEN {
            return self.deny(Reason::InvalidTarget, None, None);
        }
        if target
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
        {
            return self.deny(Reason::InvalidTarget, None, None);
        }
        if let Some(i) = target.find("://") {
            let scheme = target[..i].to_ascii_lowercase();
            if scheme != "http" && scheme != "https" {
                return self.deny(Reason::UnsupportedScheme, None, None);
            }
            let after = &target[i + 3..];
            let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
            if after.starts_with('/') {
                return self.deny(Reason::InvalidTarget, None, None);
            }
            if after[..authority_end].contains('@') {
                return self.deny(Reason::Userinfo, None, None);
            }
        } else if target.contains('@') {
            return self.deny(Reason::Userinfo, None, None);
        }
        let t = match normalize_network_target(target) {
            Ok(t) => t,
            Err(e) if e.0 == USERINFO => return self.deny(Reason::Userinfo, None, None),
            Err(_) => return self.deny(Reason::InvalidTarget, None, None),
        };
        if t.port == Some(0) || (t.ip.is_none() && !is_dns_name(&t.host)) {
            return self.deny(Reason::InvalidTarget, None, None);
        }
        if t.scheme
            .as_deref()
            .is_some_and(|s| s != "http" && s != "https")
        {
            return self.deny(Reason::UnsupportedScheme, Some(t), None);
        }
        let class = match t.ip {
            Some(ip) => classify(ip),
            None => classify_name(&t.host),
        };
        if class == AddressClass::Metadata {
            return self.deny(Reason::MetadataAddress, Some(t), Some(class));
        }
        if self.denied.iter().any(|d| d.matches(&t, false)) {
            return self.deny(Reason::DeniedDomain, Some(t), Some(class));
        }
        let local = matches!(class, AddressClass::Loopback | AddressClass::Unspecified);
        if local && !self.net.allow_localhost && !self.names_local(&t, tool) {
            return self.deny(Reason::LocalhostBlocked, Some(t), Some(class));
        }
        if let Some(port) = t.port
            && !self.net.allowed_tcp_ports.is_empty()
            && !self.net.allowed_tcp_ports.contains(&port)
        {
            return self.deny(Reason::PortNotAllowed, Some(t), Some(class));
        }
        let key = t.host_port().unwrap_or_else(|| t.host.clone());
        let policy = self.policy.explain_parts(ActionKind::Network, &key, tool);
        let private = matches!(
            class,
            AddressClass::Private | AddressClass::LinkLocal | AddressClass::Reserved
        );
        if private
            && policy.reason != Reason::AllowRule
            && !self.allowed.iter().any(|d| d.matches(&t, true))
        {
            return self.deny(Reason::PrivateAddress, Some(t), Some(class));
        }
        let allowlisted = local || self.allowed.iter().any(|d| d.matches(&t, false));
        let floor = match self.net.mode {
            NetworkMode::Enabled => None,
            NetworkMode::Restricted if !allowlisted => Some(Reason::NotAllowlisted),
            NetworkMode::Disabled if !allowlisted => Some(Reason::NetworkDisabled),
            _ => None,
        };
        let verdict = match floor {
            Some(_) if policy.effect == Effect::Deny => policy,
            Some(reason) => self.verdict(Effect::Ask, reason),
            None => policy,
        };
        NetworkCheck {
            verdict,
            target: Some(t),
            class: Some(class),
        }
    }

    /// Whether an allowed domain or a policy allow rule names `t` exactly (its IP literal, or
    /// `localhost:PORT`): the only way to a loopback address when the snapshot keeps
    /// localhost out (DESIGN §13).
    fn names_local(&self, t: &NormalizedTarget, tool: Option<&str>) -> bool {
        if self.allowed.iter().any(|d| d.names_local(t)) {
            return true;
        }
        let key = t.host_port().unwrap_or_else(|| t.host.clone());
        let v = self.policy.explain_parts(ActionKind::Network, &key, tool);
        v.effect == Effect::Allow
            && v.reason == Reason::AllowRule
            && v.rule
                .as_ref()
                .is_some_and(|r| pattern_names_local(&r.pattern, t))
    }

    /// Check `target`, resolve it, and vet every answer: one answer in a forbidden range
    /// (a rebinding name like `127.0.0.1.nip.io`) refuses them all.
    pub fn resolve_and_check(&self, target: &str, tool: Option<&str>) -> NetworkResolution {
        let check = self.check(target, tool);
        let refuse = |check: NetworkCheck, reason| NetworkResolution {
            check: NetworkCheck {
                verdict: self.verdict(Effect::Deny, reason),
                ..check
            },
            addrs: Vec::new(),
        };
        if check.verdict.effect == Effect::Deny {
            return NetworkResolution {
                check,
                addrs: Vec::new(),
            };
        }
        let Some(t) = check.target.clone() else {
            return refuse(check, Reason::InvalidTarget);
        };
        let Some(port) = t.port else {
            return refuse(check, Reason::InvalidTarget);
        };
        let ips = match t.ip {
            Some(ip) => vec![ip],
            None => match self.resolver.resolve(&t.host, port) {
                Ok(ips) if !ips.is_empty() => ips,
                _ => return refuse(check, Reason::DnsRefused),
            },
        };
        let explicit = check.verdict.reason == Reason::AllowRule
            || self.allowed.iter().any(|d| d.matches(&t, true));
        let explicit_local = self.names_local(&t, tool);
        let mut addrs = Vec::with_capacity(ips.len());
        for ip in ips {
            let ip = match ip {
                IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
                v4 => v4,
            };
            let forbidden = match classify(ip) {
                AddressClass::Public => false,
                AddressClass::Loopback | AddressClass::Unspecified => {
                    !self.net.allow_localhost && !explicit_local
                }
                AddressClass::Metadata => true,
                AddressClass::Private | AddressClass::LinkLocal | AddressClass::Reserved => {
                    !explicit
                }
            };
            if forbidden {
                return refuse(check, Reason::DnsRefused);
            }
            addrs.push(SocketAddr::new(ip, port));
        }
        NetworkResolution { check, addrs }
    }

    /// Check a download of `url` to `dest`: the destination first (as a `file_write`), then
    /// the URL. The verdict is the stricter of the two.
    pub fn download_url(
        &self,
        url: &str,
        dest: &Path,
        files: &FilePolicyChecker<'_>,
        tool: Option<&str>,
    ) -> DownloadCheck {
        let file = files.check(ActionKind::FileWrite, dest, tool);
        if file.verdict.effect == Effect::Deny {
            return DownloadCheck {
                verdict: file.verdict.clone(),
                file,
                network: None,
            };
        }
        let network = self.check(url, tool);
        DownloadCheck {
            verdict: file.verdict.clone().stricter(network.verdict.clone()),
            file,
            network: Some(network),
        }
    }
}
