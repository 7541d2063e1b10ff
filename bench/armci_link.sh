# Sourced by bench/armci_peers/run.sh and bench/armci_apps/run.sh: how a benchmark program
# links activerma's libraries. `armci_link_flags` sets the array `armci_link` to the compile
# flags of libarmci, `core_link_flags` sets `core_link` to those of the core's C API
# (libactiverma):
#   ACTIVERMA_PREFIX set: that installed prefix's armci.pc / activerma.pc (pkg-config), as a
#   user builds;
#   otherwise: the library next to the launcher ($bin, built if missing), through link names
#   in $work/lib (its SONAME, lib<name>.so.0, is a name target/release does not have).
# The caller defines `log`, `root`, `bin` and `work` first.
armci_link_flags() {
    local flags
    flags="$(link_flags armci libarmci.so activerma-armci "$root/crates/armci/include")" || return 1
    # shellcheck disable=SC2206 # a list of flags
    armci_link=($flags)
}

core_link_flags() {
    local flags
    flags="$(link_flags activerma libactiverma_capi.so activerma-capi "$root/include")" || return 1
    # shellcheck disable=SC2206 # a list of flags
    core_link=($flags)
}

# link_flags NAME BUILT PACKAGE INCLUDE: prints the flags that link lib<NAME>: pkg-config's
# for the prefix, else those of target/release's BUILT (cargo package PACKAGE) with INCLUDE.
link_flags() {
    local name="$1" built="$2" package="$3" include="$4" lib
    if [ -n "${ACTIVERMA_PREFIX:-}" ]; then
        PKG_CONFIG_PATH="$ACTIVERMA_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
            pkg-config --cflags --libs "$name"
        return
    fi
    lib="$(dirname "$bin")/$built"
    if [ ! -f "$lib" ]; then
        log "building $lib (cargo build --release -p $package)"
        (cd "$root" && . scripts/env.sh && cargo build --release -p "$package") >&2 ||
            { log "ERROR: building $built failed"; return 1; }
    fi
    mkdir -p "$work/lib"
    ln -sf "$lib" "$work/lib/lib$name.so"
    ln -sf "$lib" "$work/lib/lib$name.so.0"
    echo "-I$include -L$work/lib -Wl,-rpath,$work/lib -l$name"
}
