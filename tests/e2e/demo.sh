#!/usr/bin/env bash
# The README demo: a spot "terminate" notice on a real (containerised)
# Debian 12 node, narrated from notice to halt.
#
#   bash tests/e2e/demo.sh [--rebuild|--dry-run]      (as root)
#
# In its first second it checks the prerequisites you install yourself
# (Rust >= 1.85 through rustup, gcc, python3) and installs the host tools it
# needs with apt-get (systemd-container, debootstrap, dpkg-dev).  Then it
# builds the nthd .deb into target/dist/ (packaging/build.sh --deb-only) when there is none or
# when src/, Cargo.toml, Cargo.lock, systemd/, polkit/ or packaging/ changed
# since it was built; --rebuild rebuilds it regardless.  tests/e2e/run.sh
# --narrate then builds the mock IMDS and kubelet stand-in (cargo),
# debootstraps the container tree on first use (cached under target/e2e/)
# and runs the scenario.  E2E_NTHD_DEB=FILE uses that .deb and builds none.
# --dry-run: the checks and installs, then say whether the .deb would be
# (re)built, and stop.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=packaging/host-tools.sh
. packaging/host-tools.sh

rebuild=0 dry_run=0
host_tools=(systemd-nspawn:systemd-container debootstrap:debootstrap
            dpkg-parsechangelog:dpkg-dev nsenter:util-linux flock:util-linux
            journalctl:systemd systemd-analyze:systemd)

parse_args() {
  local arg
  for arg in "$@"; do
    case "$arg" in
      --rebuild) rebuild=1 ;;
      --dry-run) dry_run=1 ;;
      -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "demo.sh: unknown argument '$arg' (usage: tests/e2e/demo.sh [--rebuild|--dry-run])" >&2; exit 2 ;;
    esac
  done
}

# --- prerequisites you install yourself (README "Prerequisites") ------------
check_prerequisites() {
  local missing=() rust_version rust_major rust_minor
  missing=()
  if ! command -v cargo >/dev/null || ! command -v rustc >/dev/null; then
    if [[ -x "$HOME/.cargo/bin/cargo" ]]; then
      missing+=("cargo is not on PATH; add rustup's: . \"\$HOME/.cargo/env\"")
    else
      missing+=("Rust >= 1.85 (cargo, rustc) through rustup: curl --proto '=https' -sSf https://sh.rustup.rs | sh -s -- -y && . \"\$HOME/.cargo/env\"")
    fi
  else
    rust_version="$(rustc --version | awk '{print $2}')"
    IFS=. read -r rust_major rust_minor _ <<<"$rust_version"
    if ((rust_major < 1 || (rust_major == 1 && rust_minor < 85))); then
      missing+=("Rust >= 1.85; $(command -v rustc) is $rust_version (Debian 12's own is 1.63): install rustup (https://rustup.rs) or run: rustup update stable")
    fi
  fi
  command -v gcc >/dev/null || missing+=("gcc (the linker cargo uses): apt-get install gcc")
  command -v python3 >/dev/null || missing+=("python3 (packaging/build.sh): apt-get install python3")
  if ((${#missing[@]})); then
    echo "demo.sh: missing prerequisites:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 1
  fi
}

# Prints the Debian packages of the host tools not on PATH, one a line.
missing_packages() {
  local pair
  for pair in "${host_tools[@]}"; do
    command -v "${pair%%:*}" >/dev/null || echo "${pair#*:}"
  done | sort -u
}
# --- host tools: installed here, before any build ---------------------------
install_host_tools() {
  local need
  mapfile -t need < <(missing_packages)
  if ((${#need[@]})); then
    echo "==> installing ${need[*]} (apt-get)"
    if ! command -v apt-get >/dev/null ||
       ! apt_install "${need[@]}" >/dev/null; then
      echo "demo.sh: could not install the Debian package(s) ${need[*]}; install them and rerun:" >&2
      echo "  apt-get install ${need[*]}" >&2
      exit 1
    fi
    mapfile -t need < <(missing_packages)
    if ((${#need[@]})); then
      echo "demo.sh: installed, but their tools are still not on PATH ($PATH): ${need[*]}" >&2
      exit 1
    fi
  fi
}

# --- the .deb: rebuilt when missing or older than its sources ---------------
# Prints why the .deb must be (re)built; fails when the newest one is current.  The one
# that counts is what run.sh takes: the newest target/dist/nthd_*_<host arch>.deb, which
# packaging/build.sh --deb-only writes (static musl build).
deb_stale() {
  local deb newer arch
  arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
  # shellcheck disable=SC2012  # cargo-deb names have no odd characters
  deb="$(ls -t target/dist/nthd_*_"$arch".deb 2>/dev/null | head -n1)"
  [[ -n "$deb" ]] || { echo "no nthd_*_$arch.deb in target/dist/"; return 0; }
  newer="$(find src Cargo.toml Cargo.lock systemd polkit packaging -newer "$deb" \
             -type f -print -quit 2>/dev/null)"
  [[ -n "$newer" ]] || return 1
  echo "$newer is newer than $deb"
}
# Sets t_build, the seconds it took.
build_deb() {
  local why
  t_build=$SECONDS
  if [[ -z "${E2E_NTHD_DEB:-}" ]]; then
    if ((rebuild)); then
      why="--rebuild"
    elif ! why="$(deb_stale)"; then
      why=""
    fi
    if [[ -n "$why" ]] && ((dry_run)); then
      echo "==> would build the nthd .deb ($why)"
    elif [[ -n "$why" ]]; then
      echo "==> building the nthd .deb ($why): packaging/build.sh --deb-only"
      bash packaging/build.sh --deb-only
    else
      echo "==> the nthd .deb is up to date with its sources; reusing it (--rebuild to rebuild)"
    fi
  fi
  t_build=$((SECONDS - t_build))
}

main() {
  parse_args "$@"
  [[ $EUID -eq 0 ]] || { echo "demo.sh: run as root (it boots a systemd-nspawn container)" >&2; exit 1; }
  t_start=$SECONDS
  check_prerequisites
  install_host_tools
  build_deb
  ((dry_run == 0)) || exit 0
  export E2E_VERBOSE="${E2E_VERBOSE-1}"
  rc=0
  bash tests/e2e/run.sh --narrate || rc=$?
  echo "demo.sh: $((SECONDS - t_start)) s in all, of which $t_build s building the .deb"
  exit "$rc"
}

main "$@"
