# Sourced by the scripts: puts a rustup toolchain (if any) on the PATH.
if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
