//! Killing a whole process tree: the child's process group, plus every descendant found through
//! `/proc` (which catches one that moved to its own group or session while its parent lived).
//!
//! It decides nothing about policy; it only delivers SIGKILL.

use std::collections::HashMap;

/// The parent pid of every process visible in `/proc`.
fn parent_map() -> HashMap<i32, Vec<i32>> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return children;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ..."; comm may contain spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let _state = fields.next();
        if let Some(ppid) = fields.next().and_then(|s| s.parse::<i32>().ok()) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    children
}

/// Every live descendant of `root` (not `root` itself).
pub(crate) fn descendants(root: i32) -> Vec<i32> {
    let children = parent_map();
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Some(kids) = children.get(&pid) {
            for &kid in kids {
                if !out.contains(&kid) {
                    out.push(kid);
                    stack.push(kid);
                }
            }
        }
    }
    out
}

/// SIGKILL the process group `pgid`.
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: killpg takes scalar arguments; a stale group only yields ESRCH.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// SIGKILL the tree rooted at `root`, whose process group is `pgid`: descendants are collected
/// first (before killing reparents them), then the group, then each descendant.
pub(crate) fn kill_tree(root: i32, pgid: i32) {
    let found = descendants(root);
    kill_group(pgid);
    for pid in found {
        if pid > 1 {
            // SAFETY: kill takes scalar arguments; a process already gone yields ESRCH.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
    if root > 1 {
        // SAFETY: as above.
        unsafe {
            libc::kill(root, libc::SIGKILL);
        }
    }
}
