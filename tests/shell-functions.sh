#!/usr/bin/env bash
# No shell function over MAX lines (default 60), as for Rust: prints every function longer
# than that, with its file, line and length, and exits 1 if there is one.
#
#   tests/shell-functions.sh [--max N] [FILE...]   (default: every shell script git knows)
#
# A function is `name() {` (optionally `function name`) at the start of a line, up to the
# `}` alone at the same indentation. Here-documents and nested braces are counted as lines of
# the function, which is what a reader has to read.
set -euo pipefail
cd "$(dirname "$0")/.."
max=60
if [ "${1:-}" = --max ]; then max=$2; shift 2; fi
files=("$@")
if [ ${#files[@]} = 0 ]; then
    mapfile -t files < <(git ls-files '*.sh' .ci/run packaging/debian/postinst \
        packaging/debian/postrm packaging/debian/prerm)
fi
awk -v max="$max" '
    FNR == 1 { name = "" }
    name == "" && match($0, /^[ \t]*(function[ \t]+)?[A-Za-z_][A-Za-z0-9_:-]*[ \t]*\(\)[ \t]*\{?[ \t]*$/) {
        line = $0; sub(/^[ \t]*(function[ \t]+)?/, "", line); sub(/[ \t]*\(.*/, "", line)
        name = line; start = FNR; match($0, /^[ \t]*/); indent = RLENGTH; next
    }
    name != "" && match($0, /^[ \t]*\}[ \t]*(#.*)?$/) {
        match($0, /^[ \t]*/)
        if (RLENGTH == indent) {
            n = FNR - start + 1
            if (n > max) { printf "%s:%d: %s() is %d lines (max %d)\n", FILENAME, start, name, n, max; bad++ }
            name = ""
        }
    }
    END { exit bad > 0 }
' "${files[@]}"
