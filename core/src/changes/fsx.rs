//! Descriptor-based file operations for apply: every path is resolved beneath a root
//! descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, so
//! a symlink anywhere on the way (planted in the workspace or in an upper directory) fails
//! with `ELOOP` instead of leading outside the root.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

pub(crate) fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

fn openat2(dirfd: RawFd, path: &Path, flags: i32, mode: u32, resolve: u64) -> io::Result<OwnedFd> {
    let path = cstr(path)?;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: u64::from(mode),
        resolve,
    };
    // SAFETY: a NUL-terminated path and a live, correctly sized `open_how`.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor this process owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Open an absolute `path` (a root) as a directory, following no symlink on the way.
pub(crate) fn open_root(path: &Path) -> io::Result<OwnedFd> {
    openat2(
        libc::AT_FDCWD,
        path,
        libc::O_PATH | libc::O_DIRECTORY,
        0,
        RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    )
}

/// Open `rel` beneath `root` (`""` is the root itself) with `flags`, following no symlink.
pub(crate) fn open_beneath(
    root: &OwnedFd,
    rel: &Path,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    openat2(
        root.as_raw_fd(),
        rel,
        flags | libc::O_NOFOLLOW,
        mode,
        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    )
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub(crate) fn stat_at(dir: &OwnedFd, name: &Path) -> io::Result<libc::stat> {
    let name = cstr(name)?;
    // SAFETY: a zeroed stat buffer; a NUL-terminated name.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `fstat(fd)`.
pub(crate) fn stat_fd(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat buffer and an open descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `renameat2(from_dir/from, to_dir/to, flags)`.
pub(crate) fn rename_at(
    from_dir: &OwnedFd,
    from: &Path,
    to_dir: &OwnedFd,
    to: &Path,
    flags: u32,
) -> io::Result<()> {
    let (from, to) = (cstr(from)?, cstr(to)?);
    // SAFETY: two open directories and NUL-terminated names.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            from_dir.as_raw_fd(),
            from.as_ptr(),
            to_dir.as_raw_fd(),
            to.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `unlinkat(dir, name, flags)`.
pub(crate) fn unlink_at(dir: &OwnedFd, name: &Path, flags: i32) -> io::Result<()> {
    let name = cstr(name)?;
    // SAFETY: an open directory and a NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `mkdirat(dir, name, mode)`.
pub(crate) fn mkdir_at(dir: &OwnedFd, name: &Path, mode: u32) -> io::Result<()> {
    let name = cstr(name)?;
    // SAFETY: an open directory and a NUL-terminated name.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `symlinkat(target, dir, name)`.
pub(crate) fn symlink_at(target: &Path, dir: &OwnedFd, name: &Path) -> io::Result<()> {
    let (target, name) = (cstr(target)?, cstr(name)?);
    // SAFETY: NUL-terminated strings and an open directory.
    if unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `readlinkat(dir, name)`.
pub(crate) fn readlink_at(dir: &OwnedFd, name: &Path) -> io::Result<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let name = cstr(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: an open directory, a NUL-terminated name and a live buffer of its length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(std::ffi::OsString::from_vec(buf))
}

/// Set the permission bits of the inode `fd` (an `O_PATH` descriptor is fine) refers to.
pub(crate) fn chmod_fd(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    let link = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "fd link"))?;
    // SAFETY: a NUL-terminated path naming this process's own descriptor.
    if unsafe { libc::chmod(link.as_ptr(), mode as libc::mode_t) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Remove a tree this process owns, without following symlinks, making unreadable
/// directories (the overlay's `work/work` is mode 0) readable on the way.
pub(crate) fn remove_tree(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return std::fs::remove_file(path);
    }
    if meta.permissions().mode() & 0o700 != 0o700 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    }
    for entry in std::fs::read_dir(path)? {
        remove_tree(&entry?.path())?;
    }
    std::fs::remove_dir(path)
}
