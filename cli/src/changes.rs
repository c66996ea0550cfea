//! `turngate changes list | show | apply | discard`: the change sets of `run --review`, kept
//! beside the audit store (`<state>/changes/`). Every apply and discard is recorded in the
//! audit store of the same state dir.

use turngate::changes::{
    ApplyOptions, ChangeError, ChangeKind, ChangeSet, ChangeStore, EntryType, applied_mode,
};

use crate::session::{open_existing_store, store_path};
use crate::{ChangesCommand, CliError};

fn store_for(store: Option<&std::path::PathBuf>) -> Result<ChangeStore, CliError> {
    Ok(ChangeStore::beside(&store_path(store)?))
}

/// A refusal: one line (or a JSON object with the code and the paths), exit 1.
fn refused(err: &ChangeError, json: bool) -> Result<u8, CliError> {
    if json {
        println!(
            "{}",
            serde_json::json!({"error": err.code(), "message": err.to_string(), "paths": err.paths()})
        );
        Ok(1)
    } else {
        Err(CliError(err.to_string()))
    }
}

fn line(set: &ChangeSet) -> String {
    format!(
        "{}  {:<9} turn={}  {}  `{}`",
        set.id,
        set.status.as_str(),
        set.turn_id,
        set.summary(),
        set.command
    )
}

fn show(set: &ChangeSet) {
    println!("{}", line(set));
    for root in &set.roots {
        println!("root {}", root.path.display());
    }
    for c in &set.changes {
        let suffix = if c.entry == EntryType::Dir { "/" } else { "" };
        let mut detail = Vec::new();
        match (c.old_mode, c.mode) {
            (Some(old), Some(new)) if old != new => detail.push(format!("mode {old:o} -> {new:o}")),
            (None, Some(new)) if c.kind == ChangeKind::Added => {
                detail.push(format!("mode {new:o}"));
            }
            _ => {}
        }
        if let Some(new) = c.mode
            && c.entry != EntryType::Symlink
            && c.kind != ChangeKind::Deleted
            && applied_mode(new) != new
        {
            detail.push(format!(
                "applied as {:o}: no setuid, setgid, sticky or world-write bits",
                applied_mode(new)
            ));
        }
        if c.kind == ChangeKind::Unsupported {
            detail.push("the whole set cannot be applied while it holds this; discard it".into());
        }
        if c.binary {
            match (c.old_size, c.size) {
                (Some(old), Some(new)) => detail.push(format!("binary, {old} -> {new} bytes")),
                (None, Some(new)) => detail.push(format!("binary, {new} bytes")),
                (Some(old), None) => detail.push(format!("binary, {old} bytes")),
                (None, None) => {}
            }
        }
        if let Some(target) = &c.link_target {
            detail.push(format!("-> {target}"));
        }
        if let Some(note) = &c.note {
            detail.push(note.clone());
        }
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!("  ({})", detail.join("; "))
        };
        println!("  {:<12} {}{suffix}{detail}", c.kind.as_str(), c.path);
    }
    for c in &set.changes {
        if let Some(diff) = &c.diff
            && c.kind != ChangeKind::Unsupported
        {
            print!("{diff}");
            if !diff.ends_with('\n') {
                println!();
            }
        }
    }
}

pub fn run(command: &ChangesCommand) -> Result<u8, CliError> {
    match command {
        ChangesCommand::List { store, json } => {
            let sets = store_for(store.store.as_ref())?.list()?;
            if *json {
                println!("{}", serde_json::to_string(&sets)?);
            } else if sets.is_empty() {
                println!("no change sets");
            } else {
                for set in &sets {
                    println!("{}", line(set));
                }
            }
            Ok(0)
        }
        ChangesCommand::Show { id, store, json } => {
            let set = match store_for(store.store.as_ref())?.get(id) {
                Ok(set) => set,
                Err(err) => return refused(&err, *json),
            };
            if *json {
                println!("{}", serde_json::to_string(&set)?);
            } else {
                show(&set);
            }
            Ok(0)
        }
        ChangesCommand::Apply {
            id,
            confirm_asks,
            by,
            store,
            json,
        } => {
            let changes = store_for(store.store.as_ref())?;
            let audit = open_existing_store(store.store.as_ref())?;
            let options = ApplyOptions {
                confirm_asks: *confirm_asks,
                by: by.as_ref().map(|b| format!("person:{b}")),
            };
            match changes.apply(id, &options, Some(audit.as_ref())) {
                Ok(set) => {
                    if *json {
                        println!("{}", serde_json::to_string(&set)?);
                    } else {
                        println!("{id}: applied ({})", set.summary());
                    }
                    Ok(0)
                }
                Err(err) => refused(&err, *json),
            }
        }
        ChangesCommand::Discard {
            id,
            by,
            store,
            json,
        } => {
            let changes = store_for(store.store.as_ref())?;
            let audit = open_existing_store(store.store.as_ref())?;
            let by = by.as_ref().map(|b| format!("person:{b}"));
            match changes.discard(id, by.as_deref(), Some(audit.as_ref())) {
                Ok(set) => {
                    if *json {
                        println!("{}", serde_json::to_string(&set)?);
                    } else {
                        println!("{id}: discarded ({})", set.summary());
                    }
                    Ok(0)
                }
                Err(err) => refused(&err, *json),
            }
        }
    }
}
