//! include/activerma.h must be what the source generates: regenerate it into a temp file and
//! compare, so a change to the C API that was not regenerated (or a hand edit) fails here.
//! (build.rs rewrites the header unless ACTIVERMA_HEADER_NO_WRITE is set, as CI should do.)

include!("../gen_header.rs");

#[test]
fn checked_in_header_matches_the_source() {
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = std::env::temp_dir().join(format!("activerma-header-{}.h", std::process::id()));
    std::fs::write(&tmp, generate_header(crate_dir)).unwrap();
    let fresh = std::fs::read_to_string(&tmp).unwrap();
    let _ = std::fs::remove_file(&tmp);
    let checked_in = std::fs::read_to_string(crate_dir.join("../../include/activerma.h")).expect("include/activerma.h is checked in");
    assert!(
        fresh == checked_in,
        "include/activerma.h is out of date with crates/capi/src: run `cargo build -p activerma-capi` (without ACTIVERMA_HEADER_NO_WRITE) and check in the result"
    );
}
