#!/usr/bin/env bash
# Structure of the shell scripts, as for Rust: no function over MAX lines (default 60) and no
# more than MAX_TOP lines of top-level code in a file (default 20). Prints every function longer
# than that, with its file, line and length, and every file with too much top-level code, and
# exits 1 if there is one.
#
#   tests/shell-functions.sh [--max N] [--max-top N] [FILE...]   (default: every shell script git knows)
#   tests/shell-functions.sh --self-test   plants a long function and a long top level, and
#                                          fails unless both are found
#
# A function is `name() {` (optionally `function name`, optionally a comment after the `{`) at
# the start of a line, up to the `}` alone at the same indentation. Here-documents and nested braces are counted as lines of
# the function, which is what a reader has to read.
#
# Top-level code is every line outside a function that is not blank, not a comment (the
# shebang is one) and not a one-line function (`name() { ...; }`). So the few lines a script
# may keep there are `set -euo pipefail`, `cd`, sourcing, constants and defaults, and the last
# `main "$@"`; everything else goes into named steps that main calls.
set -euo pipefail
cd "$(dirname "$0")/.."

check() {
    local max=$1 max_top=$2; shift 2
    awk -v max="$max" -v max_top="$max_top" '
        function top_report() {
            if (file == "") return
            if (top > max_top) { printf "%s: %d lines of top-level code (max %d)\n", file, top, max_top; bad++ }
        }
        FNR == 1 { top_report(); file = FILENAME; top = 0; name = "" }
        name == "" && /^[ \t]*(function[ \t]+)?[A-Za-z_][A-Za-z0-9_:-]*[ \t]*\(\)[ \t]*\{.*\}[ \t]*;?[ \t]*(#.*)?$/ { next }
        name == "" && match($0, /^[ \t]*(function[ \t]+)?[A-Za-z_][A-Za-z0-9_:-]*[ \t]*\(\)[ \t]*\{?[ \t]*(#.*)?$/) {
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
            next
        }
        name == "" && $0 !~ /^[ \t]*(#.*)?$/ { top++ }
        END { top_report(); exit bad > 0 }
    ' "$@"
}

# A script with a 61-line function and 21 lines of top-level code must fail with both named;
# one at the limits must pass.
self_test() {
    local dir out i
    dir="$(mktemp -d)"
    # shellcheck disable=SC2064  # expanded now: dir is local
    trap "rm -rf '$dir'" EXIT
    { echo '#!/bin/sh'; echo 'long() { # planted'; for i in $(seq 59); do echo "  echo $i"; done; echo '}'
      for i in $(seq 21); do echo "x$i=1"; done; } >"$dir/planted.sh"
    { echo '#!/bin/sh'; echo 'ok() {'; for i in $(seq 58); do echo "  echo $i"; done; echo '}'
      echo 'one() { echo; }'; echo '# a comment'; echo
      for i in $(seq 20); do echo "x$i=1"; done; } >"$dir/fine.sh"
    if out="$(check 60 20 "$dir/planted.sh")"; then
        echo "self-test: the planted script passed"; return 1
    fi
    grep -q 'planted.sh:2: long() is 61 lines (max 60)' <<<"$out" \
        || { echo "self-test: the long function was not found: $out"; return 1; }
    grep -q 'planted.sh: 21 lines of top-level code (max 20)' <<<"$out" \
        || { echo "self-test: the long top level was not found: $out"; return 1; }
    out="$(check 60 20 "$dir/fine.sh")" || { echo "self-test: a script at the limits failed: $out"; return 1; }
    echo "self-test: ok"
}

main() {
    local max=60 max_top=20 files=()
    if [ "${1:-}" = --self-test ]; then self_test; return; fi
    if [ "${1:-}" = --max ]; then max=$2; shift 2; fi
    if [ "${1:-}" = --max-top ]; then max_top=$2; shift 2; fi
    files=("$@")
    if [ ${#files[@]} = 0 ]; then
        mapfile -t files < <(git ls-files '*.sh' .ci/run packaging/debian/postinst \
            packaging/debian/postrm packaging/debian/prerm)
    fi
    check "$max" "$max_top" "${files[@]}"
}

main "$@"
