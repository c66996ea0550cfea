//! `uniffi-bindgen`: generates the Swift sources of the `TurnGate` package from the compiled
//! turngate-ffi library (library mode). Run by `scripts/test-swift`.
//!
//! After generating, it replaces the two buffer-reader helpers of the generated Swift
//! (`readInt`, `readBytes`) with equivalents that read through `Data.withUnsafeBytes` instead of
//! `Data.copyBytes(to:from:)`, which costs about 200 ns per call on Linux: a `Verdict` lifted
//! field by field took 12 of them, 2.8–4.0 µs per `explain` (docs/performance.md, "Swift
//! `explain`: the generated reader"). Same checks, same errors, same results. If the generated
//! text is not exactly the pinned uniffi's (a new uniffi version), generation fails: the
//! replacement is never applied to code it was not written against.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The helpers as uniffi 0.32.2 generates them (templates/RustBufferTemplate.swift).
const READ_INT_GENERATED: &str = r#"fileprivate func readInt<T: FixedWidthInteger>(_ reader: inout (data: Data, offset: Data.Index)) throws -> T {
    let range = reader.offset..<reader.offset + MemoryLayout<T>.size
    guard reader.data.count >= range.upperBound else {
        throw UniffiInternalError.bufferOverflow
    }
    if T.self == UInt8.self {
        let value = reader.data[reader.offset]
        reader.offset += 1
        return value as! T
    }
    var value: T = 0
    let _ = withUnsafeMutableBytes(of: &value, { reader.data.copyBytes(to: $0, from: range)})
    reader.offset = range.upperBound
    return value.bigEndian
}
"#;

const READ_BYTES_GENERATED: &str = r#"fileprivate func readBytes(_ reader: inout (data: Data, offset: Data.Index), count: Int) throws -> Array<UInt8> {
    let range = reader.offset..<(reader.offset+count)
    guard reader.data.count >= range.upperBound else {
        throw UniffiInternalError.bufferOverflow
    }
    var value = [UInt8](repeating: 0, count: count)
    value.withUnsafeMutableBufferPointer({ buffer in
        reader.data.copyBytes(to: buffer, from: range)
    })
    reader.offset = range.upperBound
    return value
}
"#;

/// The replacements. The reader's `Data` is always made by `Data(rustBuffer:)`, so its indices
/// are byte offsets from 0, as the generated versions also assume.
const READ_INT_FAST: &str = r#"fileprivate func readInt<T: FixedWidthInteger>(_ reader: inout (data: Data, offset: Data.Index)) throws -> T {
    // turngate: through withUnsafeBytes, not Data.copyBytes (swift/uniffi-bindgen/src/main.rs).
    let start = reader.offset
    let size = MemoryLayout<T>.size
    guard start >= 0, reader.data.count >= start + size else {
        throw UniffiInternalError.bufferOverflow
    }
    let value: T = reader.data.withUnsafeBytes { raw in
        raw.loadUnaligned(fromByteOffset: start, as: T.self)
    }
    reader.offset = start + size
    return T(bigEndian: value)
}
"#;

const READ_BYTES_FAST: &str = r#"fileprivate func readBytes(_ reader: inout (data: Data, offset: Data.Index), count: Int) throws -> Array<UInt8> {
    // turngate: through withUnsafeBytes, not Data.copyBytes (swift/uniffi-bindgen/src/main.rs).
    let start = reader.offset
    guard start >= 0, count >= 0, reader.data.count >= start + count else {
        throw UniffiInternalError.bufferOverflow
    }
    let value = reader.data.withUnsafeBytes { raw in
        Array(UnsafeRawBufferPointer(rebasing: raw[start..<(start + count)]))
    }
    reader.offset = start + count
    return value
}
"#;

fn main() -> ExitCode {
    uniffi::uniffi_bindgen_main();
    let args: Vec<String> = std::env::args().collect();
    let swift = args.iter().any(|a| a == "generate")
        && args
            .windows(2)
            .any(|w| matches!(w[0].as_str(), "--language" | "-l") && w[1] == "swift");
    if !swift {
        return ExitCode::SUCCESS;
    }
    let Some(out_dir) = args
        .windows(2)
        .find(|w| matches!(w[0].as_str(), "--out-dir" | "-o"))
        .map(|w| PathBuf::from(&w[1]))
    else {
        eprintln!(
            "uniffi-bindgen: Swift generation needs --out-dir (the readers are patched there)"
        );
        return ExitCode::FAILURE;
    };
    match patch_readers(&out_dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uniffi-bindgen: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Replace the readers in every generated `.swift` file of `dir` that defines them.
fn patch_readers(dir: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut patched = 0;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().and_then(|x| x.to_str()) != Some("swift") {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if !text.contains("fileprivate func readInt<")
            && !text.contains("fileprivate func readBytes(")
        {
            continue;
        }
        let text = replace_once(&text, READ_INT_GENERATED, READ_INT_FAST, &path)?;
        let text = replace_once(&text, READ_BYTES_GENERATED, READ_BYTES_FAST, &path)?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        patched += 1;
    }
    if patched == 0 {
        return Err(format!(
            "no generated Swift file in {} defines the readers",
            dir.display()
        ));
    }
    Ok(())
}

/// `text` with its one occurrence of `from` replaced by `to`; an error if not exactly one.
fn replace_once(text: &str, from: &str, to: &str, path: &Path) -> Result<String, String> {
    match text.matches(from).count() {
        1 => Ok(text.replacen(from, to, 1)),
        n => Err(format!(
            "{}: the generated reader `{}` is not uniffi 0.32.2's ({n} exact matches): update \
             swift/uniffi-bindgen/src/main.rs for this uniffi version",
            path.display(),
            from.lines().next().unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_once_replaces_exactly_one_and_refuses_otherwise() {
        let p = Path::new("x.swift");
        let one = format!("a\n{READ_INT_GENERATED}b\n");
        let out = replace_once(&one, READ_INT_GENERATED, READ_INT_FAST, p).expect("one match");
        assert_eq!(out, format!("a\n{READ_INT_FAST}b\n"));
        assert!(!out.contains("copyBytes(to:"));
        let none = "fileprivate func readInt<T>() {}\n";
        let err = replace_once(none, READ_INT_GENERATED, READ_INT_FAST, p).expect_err("no match");
        assert!(err.contains("0 exact matches"), "{err}");
        let two = format!("{READ_BYTES_GENERATED}{READ_BYTES_GENERATED}");
        let err = replace_once(&two, READ_BYTES_GENERATED, READ_BYTES_FAST, p).expect_err("two");
        assert!(err.contains("2 exact matches"), "{err}");
    }

    #[test]
    fn a_directory_without_the_readers_fails_closed() {
        let dir = std::env::temp_dir().join(format!("tg-bindgen-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("other.swift"), "let x = 1\n").expect("write");
        let err = patch_readers(&dir).expect_err("nothing to patch");
        assert!(err.contains("defines the readers"), "{err}");
        std::fs::write(
            dir.join("gen.swift"),
            format!("{READ_INT_GENERATED}\n{READ_BYTES_GENERATED}"),
        )
        .expect("write");
        patch_readers(&dir).expect("patched");
        let text = std::fs::read_to_string(dir.join("gen.swift")).expect("read");
        assert_eq!(text, format!("{READ_INT_FAST}\n{READ_BYTES_FAST}"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
