#!/usr/bin/env bash
# The SVG pictures in docs/ as a browser shows them: each is rendered by headless Chromium
# (Debian's `chromium`) at its own size, and the screenshot must be that size and hold a
# picture: its PNG at least twice the size of a blank page's of the same size.
# tests/docs.rs checks what they say (the timeline is drawn from the grace-period table).
# Usage: tests/pictures.sh   (as root on Debian, or with chromium installed)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=packaging/host-tools.sh
. packaging/host-tools.sh

install_chromium() {
    if ! command -v chromium >/dev/null; then
        echo "pictures.sh: installing chromium"
        apt_install --no-install-recommends chromium fonts-dejavu-core >/dev/null
    fi
    echo "chromium: $(chromium --version 2>/dev/null | head -n 1)"
}

# Renders FILE (an SVG, or a page) at WIDTHxHEIGHT into OUT.png.
render() {
    local file="$1" size="$2" out="$3"
    timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --user-data-dir="$work/profile" --window-size="$size" --screenshot="$out" \
        "file://$file" >/dev/null 2>&1
    [ -s "$out" ] || { echo "pictures.sh: chromium wrote no screenshot of $file" >&2; return 1; }
}

# The PNG's width and height, from its IHDR chunk.
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{ print $1*16777216+$2*65536+$3*256+$4 "x" $5*16777216+$6*65536+$7*256+$8 }'; }

check_picture() {
    local svg="$1" size shot blank got
    size="$(sed -n 's/^<svg [^>]*width="\([0-9]*\)" height="\([0-9]*\)".*/\1,\2/p' "$svg" | head -n 1)"
    [ -n "$size" ] || { echo "pictures.sh: $svg has no width and height" >&2; return 1; }
    shot="$work/$(basename "$svg" .svg).png"
    blank="$work/blank-${size/,/x}.png"
    printf '<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s"><rect width="100%%" height="100%%" fill="#fff"/></svg>\n' \
        "${size%,*}" "${size#*,}" >"$work/blank.svg"
    render "$PWD/$svg" "$size" "$shot"
    render "$work/blank.svg" "$size" "$blank"
    got="$(png_size "$shot")"
    [ "$got" = "${size/,/x}" ] || { echo "pictures.sh: $svg rendered at $got, not ${size/,/x}" >&2; return 1; }
    [ "$(stat -c %s "$shot")" -ge $(( 2 * $(stat -c %s "$blank") )) ] ||
        { echo "pictures.sh: $svg renders (almost) blank: $(stat -c %s "$shot") bytes, a blank page $(stat -c %s "$blank")" >&2; return 1; }
    echo "ok $svg: ${got}, $(stat -c %s "$shot") bytes (a blank page: $(stat -c %s "$blank"))"
}

main() {
    install_chromium
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    local svg n=0
    for svg in docs/*.svg; do
        check_picture "$svg"
        n=$((n + 1))
    done
    [ "$n" -ge 2 ] || { echo "pictures.sh: only $n pictures in docs/" >&2; exit 1; }
}

main "$@"
