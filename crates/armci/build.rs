//! Link settings of the shared library.
fn main() {
    // The name C programs record when they link with -larmci.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libarmci.so.0");
    // Calls inside the library bind to its own functions: a profiling library that defines
    // ARMCI_Put and calls PARMCI_Put (profiling.rs) reaches ours, not itself again.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
}
