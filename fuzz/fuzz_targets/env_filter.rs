//! The environment filter never panics on arbitrary bytes and never keeps an injection
//! variable.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use turngate::check::{env::injection_reason, filter_env};
use turngate::protocol::EnvInheritance;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == b'=');
    let name = parts.next().unwrap_or_default().to_vec();
    let value = parts.next().unwrap_or_default().to_vec();
    let env = filter_env(
        [(OsString::from_vec(name), OsString::from_vec(value))],
        EnvInheritance::Filtered,
        Path::new("/w"),
        &[],
    );
    for (k, _) in &env.vars {
        if let Some(k) = k.to_str() {
            if k != "PATH" && k != "PWD" {
                assert!(injection_reason(k).is_none(), "{k:?} kept");
            }
        }
    }
});
