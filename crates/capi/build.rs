//! Generates include/activerma.h from the doc-commented C API in src/ and keeps the checked-in
//! copy current. Set ACTIVERMA_HEADER_NO_WRITE=1 (e.g. in CI) to leave the source tree alone;
//! tests/header_is_current.rs then reports any drift. The header is also written to OUT_DIR,
//! which is what that test compares with: the test then needs no cbindgen of its own, whose
//! dependencies would change the features of the crates the library and launcher are built
//! with, so `cargo test` and `cargo build` (scripts/install.sh) would compile them twice.

fn main() {
    let crate_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    for p in ["src", "cbindgen.toml", "../../include/activerma.h"] {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-env-changed=ACTIVERMA_HEADER_NO_WRITE");
    // The installed name, so programs linked with -lactiverma record libactiverma.so.0. A build
    // with the mpi conduit is another library (libactiverma-openmpi.so.0, ...-mpich), so that
    // it can be installed beside the default one and a program finds the one it was built for.
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{}.so.0", library_name());
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

/// libactiverma, or libactiverma-MPI for a build with the mpi conduit: MPI from the MPICC the
/// build uses (mpicc.openmpi, mpicc.mpich; scripts/install.sh --mpi sets it), "mpi" otherwise.
fn library_name() -> String {
    if std::env::var_os("CARGO_FEATURE_MPI").is_none() {
        return "libactiverma".into();
    }
    let mpicc = std::env::var("MPICC").unwrap_or_default();
    let flavour = match mpicc.rsplit_once("mpicc.") {
        Some((_, f)) if !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric()) => f.to_string(),
        _ => "mpi".into(),
    };
    format!("libactiverma-{flavour}")
}

/// The text of include/activerma.h, generated from this crate's source and cbindgen.toml.
fn generate_header(crate_dir: &std::path::Path) -> String {
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("crates/capi/cbindgen.toml is readable and valid");
    // Parsing from src/lib.rs (following its `mod`s) needs no `cargo metadata` run.
    let bindings =
        cbindgen::Builder::new().with_config(config).with_src(crate_dir.join("src/lib.rs")).generate().expect("cbindgen parses the C API");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}
