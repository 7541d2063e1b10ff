//! Gives the shared library the name C programs will record when they link with -larmci.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libarmci.so.0");
}
