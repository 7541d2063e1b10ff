// Shared by build.rs (writes include/activerma.h) and tests/header_is_current.rs (checks that the
// checked-in header matches the source), so both produce the header the same way.

/// The text of include/activerma.h, generated from this crate's source and cbindgen.toml.
pub fn generate_header(crate_dir: &std::path::Path) -> String {
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("crates/capi/cbindgen.toml is readable and valid");
    // Parsing from src/lib.rs (following its `mod`s) needs no `cargo metadata` run.
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses the C API");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}
