//! Probes the running machine's sandbox capabilities into a [`PlatformCapabilities`] value.
//!
//! It only asks the kernel what it offers (Landlock ABI, seccomp, user namespaces, Seatbelt);
//! it never installs a sandbox, never changes the process, and never guesses: a probe that
//! fails reports the capability as absent.

pub use crate::protocol::{OsFamily, PlatformCapabilities};

/// Probe this machine. Cheap (a few syscalls and `/proc` reads); call it once per process.
pub fn probe_platform() -> PlatformCapabilities {
    imp::probe()
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{OsFamily, PlatformCapabilities};

    /// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

    pub(super) fn probe() -> PlatformCapabilities {
        PlatformCapabilities {
            os: OsFamily::Linux,
            landlock_abi: landlock_abi(),
            seccomp: seccomp_filter_available(),
            user_namespaces: unprivileged_user_namespaces(),
            seatbelt: false,
            restricted_token: false,
        }
    }

    /// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)` returns the ABI
    /// version, or -1 (ENOSYS: not built in; EOPNOTSUPP: disabled at boot).
    fn landlock_abi() -> Option<u32> {
        // SAFETY: with a NULL attr, size 0 and the VERSION flag the kernel reads no memory
        // and creates no file descriptor; it only returns the ABI version or an error.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        if ret >= 1 {
            u32::try_from(ret).ok()
        } else {
            None
        }
    }

    /// Seccomp filter mode is available when `prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL)`
    /// fails with EFAULT (the kernel got as far as reading the NULL program) or EACCES (filters
    /// exist but need no_new_privs). EINVAL means the kernel has no filter mode. Nothing is
    /// installed either way. A process already under a filter (`PR_GET_SECCOMP` = 2) can
    /// stack more filters, so that also counts.
    fn seccomp_filter_available() -> bool {
        // SAFETY: PR_GET_SECCOMP takes no pointer and changes nothing.
        let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
        if mode == 2 {
            return true;
        }
        if mode < 0 {
            return false;
        }
        // SAFETY: a NULL filter program is rejected before anything is installed.
        let ret = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        if ret == 0 {
            // Cannot happen with a NULL program; refuse to claim anything.
            return false;
        }
        let errno = std::io::Error::last_os_error().raw_os_error();
        matches!(errno, Some(libc::EFAULT) | Some(libc::EACCES))
    }

    /// Unprivileged user namespaces: off when Debian's `unprivileged_userns_clone` or
    /// `max_user_namespaces` says 0, or when the kernel has no user namespaces at all.
    fn unprivileged_user_namespaces() -> bool {
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
        if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
            return false;
        }
        match read("/proc/sys/user/max_user_namespaces") {
            Some(n) => n != "0" && std::path::Path::new("/proc/self/ns/user").exists(),
            None => false,
        }
    }
}

#[cfg(target_os = "macos")]
mod imp {
    use super::{OsFamily, PlatformCapabilities};

    pub(super) fn probe() -> PlatformCapabilities {
        let mut caps = PlatformCapabilities::none(OsFamily::Macos);
        caps.seatbelt = std::path::Path::new("/usr/bin/sandbox-exec").exists();
        caps
    }
}

#[cfg(target_os = "windows")]
mod imp {
    use super::{OsFamily, PlatformCapabilities};

    /// No restricted-token backend is built yet, so the probe never claims one.
    pub(super) fn probe() -> PlatformCapabilities {
        PlatformCapabilities::none(OsFamily::Windows)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos", target_os = "windows")))]
mod imp {
    use super::{OsFamily, PlatformCapabilities};

    pub(super) fn probe() -> PlatformCapabilities {
        PlatformCapabilities::none(OsFamily::Other)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    #[cfg(target_os = "linux")]
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn probe_reports_linux_and_is_stable() {
        // SAFETY: PR_GET_SECCOMP takes no pointer.
        let before = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
        let a = probe_platform();
        assert_eq!(a.os, OsFamily::Linux);
        assert!(!a.seatbelt && !a.restricted_token);
        assert_eq!(a, probe_platform(), "probing twice gives the same answer");
        // The probe must not have changed the test process's seccomp mode.
        // SAFETY: PR_GET_SECCOMP takes no pointer.
        let after = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
        assert_eq!(before, after);
        if let Some(abi) = a.landlock_abi {
            assert!(abi >= 1);
        }
    }
}
