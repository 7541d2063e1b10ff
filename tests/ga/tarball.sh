# Sourced by tests/ga/*.sh: sets `tarball` to Global Arrays' source archive, GA_TARBALL or the
# snapshot beside the repository (../shared/ext/ga-*.tar.gz, as its README describes); without
# one, says SKIP (naming $1, what would have run) and exits 0. The caller sets `root`.
tarball=${GA_TARBALL:-}
if [ -z "$tarball" ]; then
    for t in "$root"/../shared/ext/ga-*.tar.gz; do [ -f "$t" ] && tarball=$t; done
fi
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
    echo "SKIP $1: no source archive (set GA_TARBALL; looked for ../shared/ext/ga-*.tar.gz)"
    exit 0
fi
