//! include/activerma.h must be what the source generates: build.rs generated it from the
//! source into OUT_DIR (and rebuilds it whenever src/ or cbindgen.toml changes), so a change to
//! the C API that was not regenerated (or a hand edit) fails here. (build.rs also rewrites the
//! checked-in header unless ACTIVERMA_HEADER_NO_WRITE is set, as CI does.)

const FRESH: &str = include_str!(concat!(env!("OUT_DIR"), "/activerma.h"));

#[test]
fn checked_in_header_matches_the_source() {
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let checked_in = std::fs::read_to_string(crate_dir.join("../../include/activerma.h")).expect("include/activerma.h is checked in");
    assert!(
        FRESH == checked_in,
        "include/activerma.h is out of date with crates/capi/src: run `cargo build -p activerma-capi` (without ACTIVERMA_HEADER_NO_WRITE) and check in the result"
    );
}
