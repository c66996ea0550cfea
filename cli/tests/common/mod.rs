//! Helpers shared by the CLI's end-to-end tests (each test file is its own crate and uses
//! what it needs of these).
#![allow(dead_code)]

use std::process::Command;

/// The unprivileged user the sandbox tests run as, besides root: root and a normal user hit
/// different kernel checks.
pub const USER: &str = "tgsbx";

/// The test user's uid and gid, the user created on first use (the tests run as root).
pub fn test_user() -> (u32, u32) {
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "these tests create an unprivileged user and need root"
    );
    let id = |flag: &str| {
        Command::new("id")
            .args([flag, USER])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<u32>()
                    .ok()
            })
    };
    if id("-u").is_none() {
        // Another test process may create it at the same time: "already exists" (9) is fine.
        let status = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status()
            .expect("useradd");
        assert!(
            status.success() || status.code() == Some(9),
            "useradd {USER}: {status}"
        );
    }
    (id("-u").expect("uid"), id("-g").expect("gid"))
}
