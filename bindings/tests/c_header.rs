//! The checked-in C header (`bindings/include/turngate.h`) is exactly what cbindgen generates
//! from `src/c_api/` (`mod.rs` and the modules it declares). A stale header fails here;
//! `TURNGATE_BLESS=1` rewrites it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

#[test]
fn the_checked_in_header_is_fresh() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/c_api/mod.rs"))
        .generate()
        .expect("cbindgen could not read src/c_api/")
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let path = crate_dir.join("include/turngate.h");
    if std::env::var_os("TURNGATE_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale: run `TURNGATE_BLESS=1 cargo test -p turngate-ffi --test c_header` and \
         commit the result",
        path.display()
    );
}
