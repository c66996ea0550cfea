//! turngate's own seccomp filter (Linux), under nono's: it refuses the kernel keyrings and
//! io_uring always, and `socket(AF_UNIX, ...)` when the snapshot denies Unix sockets. Without
//! the last, a sandboxed
//! command can connect to any pathname Unix socket it can name (Docker's among them), which
//! Landlock (up to the ABI nono enforces) cannot stop. `socketpair` stays allowed: it reaches
//! nothing outside the process.
//!
//! The program is built once in the parent and installed in the child with one raw `seccomp`
//! call (after `PR_SET_NO_NEW_PRIVS`). A syscall of another architecture (x32, i386's
//! `socketcall`) is refused too, so the filter cannot be sidestepped through a compat ABI.

/// One BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
struct Fprog {
    len: u16,
    filter: *const Insn,
}

/// `BPF_LD | BPF_W | BPF_ABS`.
const BPF_LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const BPF_JEQ_K: u16 = 0x15;
/// `BPF_JMP | BPF_JSET | BPF_K`.
const BPF_JSET_K: u16 = 0x45;
/// `BPF_RET | BPF_K`.
const BPF_RET_K: u16 = 0x06;

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;

/// `offsetof(struct seccomp_data, ...)`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG0_LO: u32 = 16;

#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xc000_00b7;

const X32_BIT: u32 = 0x4000_0000;

const fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

/// Never a syscall number: the comparison it sits in is always false.
const NO_SYSCALL: u32 = u32::MAX;

/// The program. A foreign arch or an x32 syscall, the kernel keyrings (`add_key`,
/// `request_key`, `keyctl`: the host's session keyring is shared otherwise) and io_uring (whose
/// `IORING_OP_SOCKET` and file operations bypass seccomp's view of syscalls) -> EPERM;
/// `socket(AF_UNIX, ..)` -> EACCES when `socket_nr` is `SYS_socket`; else allow (the other
/// filters and Landlock still apply).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const fn program(socket_nr: u32) -> [Insn; 16] {
    const EPERM: u32 = SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const EACCES: u32 = SECCOMP_RET_ERRNO | libc::EACCES as u32;
    [
        /* 0 */ insn(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
        /* 1 */ insn(BPF_JEQ_K, 0, 13, NATIVE_ARCH), // else -> 15
        /* 2 */ insn(BPF_LD_W_ABS, 0, 0, OFF_NR),
        /* 3 */ insn(BPF_JSET_K, 11, 0, X32_BIT), // -> 15
        /* 4 */ insn(BPF_JEQ_K, 10, 0, libc::SYS_add_key as u32),
        /* 5 */ insn(BPF_JEQ_K, 9, 0, libc::SYS_request_key as u32),
        /* 6 */ insn(BPF_JEQ_K, 8, 0, libc::SYS_keyctl as u32),
        /* 7 */ insn(BPF_JEQ_K, 7, 0, libc::SYS_io_uring_setup as u32),
        /* 8 */ insn(BPF_JEQ_K, 6, 0, libc::SYS_io_uring_enter as u32),
        /* 9 */ insn(BPF_JEQ_K, 5, 0, libc::SYS_io_uring_register as u32),
        /* 10 */ insn(BPF_JEQ_K, 0, 2, socket_nr), // else -> 13
        /* 11 */ insn(BPF_LD_W_ABS, 0, 0, OFF_ARG0_LO),
        /* 12 */ insn(BPF_JEQ_K, 1, 0, libc::AF_UNIX as u32), // AF_UNIX -> 14
        /* 13 */ insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        /* 14 */ insn(BPF_RET_K, 0, 0, EACCES),
        /* 15 */ insn(BPF_RET_K, 0, 0, EPERM),
    ]
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
static WITH_UNIX: [Insn; 16] = program(libc::SYS_socket as u32);
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
static WITHOUT_UNIX: [Insn; 16] = program(NO_SYSCALL);

/// Whether this build can install the filter.
pub(crate) const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// Install the filter in the calling process (the child, before exec); `deny_unix` adds the
/// `socket(AF_UNIX)` refusal. Sets `PR_SET_NO_NEW_PRIVS` first. Returns the errno on failure.
///
/// # Safety
/// Raw syscalls only; call between fork and exec.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) unsafe fn install(deny_unix: bool) -> Result<(), i32> {
    let program: &[Insn; 16] = if deny_unix { &WITH_UNIX } else { &WITHOUT_UNIX };
    let prog = Fprog {
        len: program.len() as u16,
        filter: program.as_ptr(),
    };
    // SAFETY: scalar prctl; `prog` points at a static program for the duration of the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(*libc::__errno_location());
        }
        if libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &prog as *const Fprog,
        ) != 0
        {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}

/// Unsupported architecture: never installs (the backend reports the degradation).
///
/// # Safety
/// Trivially safe; kept `unsafe` for the same signature.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) unsafe fn install(_deny_unix: bool) -> Result<(), i32> {
    Err(libc::ENOSYS)
}
