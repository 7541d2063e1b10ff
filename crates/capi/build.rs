//! Generates include/activerma.h from the doc-commented C API in src/ and keeps the checked-in
//! copy current. Set ACTIVERMA_HEADER_NO_WRITE=1 (e.g. in CI) to leave the source tree alone;
//! tests/header_is_current.rs then reports any drift.

include!("gen_header.rs");

fn main() {
    let crate_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    for p in ["src", "cbindgen.toml", "gen_header.rs", "../../include/activerma.h"] {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-env-changed=ACTIVERMA_HEADER_NO_WRITE");
    // The installed name, so programs linked with -lactiverma record libactiverma.so.0.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libactiverma.so.0");
    let header = generate_header(&crate_dir);
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("activerma.h");
    std::fs::write(&out, &header).expect("write the header into OUT_DIR");
    if std::env::var_os("ACTIVERMA_HEADER_NO_WRITE").is_some() {
        return;
    }
    let checked_in = crate_dir.join("../../include/activerma.h");
    // Only write on change, so an unchanged header keeps its mtime (and make-style rebuilds).
    if std::fs::read_to_string(&checked_in).ok().as_deref() != Some(header.as_str()) {
        std::fs::create_dir_all(checked_in.parent().unwrap()).expect("create include/");
        std::fs::write(&checked_in, &header).expect("write include/activerma.h");
    }
}
