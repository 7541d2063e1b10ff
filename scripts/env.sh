# Sourced by the scripts: puts a rustup toolchain (if any) on the PATH.
if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
# What every cargo command of the scripts selects (tests and examples narrow the targets with
# --test / --examples instead). Cargo unifies features over the selected packages, build
# scripts' dependencies included (capi's cbindgen and mpi-sys's bindgen share syn and serde),
# so a command that selected fewer would compile every shared crate, ours above them, again
# into the same target folder. `--workspace` selects the same crates' features.
ARMA_PACKAGES="-p activerma -p activerma-capi -p activerma-armci -p activerma-cli"
