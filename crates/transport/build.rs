//! The MPI build only: compiles src/mpi/ops.c, the MPI handles the mpi-sys bindings do not
//! export, with the MPI found as mpi-sys finds it (MPICC's wrapper, else pkg-config's paths).

fn main() {
    #[cfg(feature = "mpi")]
    mpi_ops();
}

#[cfg(feature = "mpi")]
fn mpi_ops() {
    println!("cargo:rerun-if-changed=src/mpi/ops.c");
    let lib = build_probe_mpi::probe().unwrap_or_else(|errs| panic!("no MPI library found for src/mpi/ops.c: {errs:?}"));
    let mut build = cc::Build::new();
    build.file("src/mpi/ops.c");
    match lib.mpicc {
        Some(mpicc) => {
            build.compiler(mpicc);
        }
        None => {
            for dir in &lib.include_paths {
                build.include(dir);
            }
        }
    }
    build.compile("activerma_mpi_ops");
}
