//! The network checker never panics, and never allows a loopback, private or metadata
//! address while localhost is off and no rule allows it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use turngate::check::{AddressClass, NetworkPolicyChecker};
use turngate::protocol::{NetworkMode, TurnNetworkPolicySnapshot};
use turngate::{CompiledPolicy, Effect, Policy};

fuzz_target!(|data: &[u8]| {
    let Ok(target) = std::str::from_utf8(data) else { return };
    let net = TurnNetworkPolicySnapshot {
        mode: NetworkMode::Enabled,
        allowed_domains: vec![],
        denied_domains: vec!["evil.com".into()],
        allow_localhost: false,
        allow_unix_sockets: false,
        allowed_tcp_ports: vec![],
    };
    let Ok(policy) = CompiledPolicy::new(Policy::permissive()) else { return };
    let c = NetworkPolicyChecker::new(&net, &policy).check(target, None);
    if c.verdict.effect == Effect::Allow {
        let class = c.class.unwrap_or(AddressClass::Metadata);
        assert_eq!(class, AddressClass::Public, "{target:?} allowed as {class:?}");
        let host = c.target.map(|t| t.host).unwrap_or_default();
        assert!(host != "evil.com" && !host.ends_with(".evil.com"), "{target:?}");
    }
});
