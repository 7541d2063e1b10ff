# Sourced by bench/armci_peers/run.sh and bench/armci_apps/run.sh: how a benchmark program
# links activerma's libarmci. Sets the array `armci_link` to the compile flags:
#   ACTIVERMA_PREFIX set: that installed prefix's armci.pc (pkg-config), as a user builds;
#   otherwise: the libarmci.so next to the launcher ($bin, built if missing), through link
#   names in $work/lib (its SONAME is libarmci.so.0, which target/release does not have).
# The caller defines `log`, `root`, `bin` and `work` first.
armci_link_flags() {
    if [ -n "${ACTIVERMA_PREFIX:-}" ]; then
        export PKG_CONFIG_PATH="$ACTIVERMA_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        # shellcheck disable=SC2207 # pkg-config output is a list of flags
        armci_link=($(pkg-config --cflags --libs armci))
        return
    fi
    local lib
    lib="$(dirname "$bin")/libarmci.so"
    if [ ! -f "$lib" ]; then
        log "building $lib (cargo build --release -p activerma-armci)"
        (cd "$root" && . scripts/env.sh && cargo build --release -p activerma-armci) >&2 ||
            { log "ERROR: building libarmci failed"; return 1; }
    fi
    mkdir -p "$work/lib"
    ln -sf "$lib" "$work/lib/libarmci.so"
    ln -sf "$lib" "$work/lib/libarmci.so.0"
    armci_link=(-I"$root/crates/armci/include" -L"$work/lib" -Wl,-rpath,"$work/lib" -larmci)
}
