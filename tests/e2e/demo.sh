#!/usr/bin/env bash
# The README demo: a spot "terminate" notice on a real (containerised)
# Debian 12 node, narrated from notice to halt.
#
#   bash tests/e2e/demo.sh [--rebuild]      (as root)
#
# Builds whatever is missing first (the nthd .deb via packaging/build.sh, the
# mock IMDS and kubelet stand-in via cargo), debootstraps the container tree
# on first use (cached under target/e2e/), then runs
# `tests/e2e/run.sh --narrate`.  --rebuild rebuilds the .deb even if one
# exists (it is otherwise reused as is, even if the sources changed).
set -euo pipefail
cd "$(dirname "$0")/../.."

[[ $EUID -eq 0 ]] || { echo "demo.sh: run as root (it boots a systemd-nspawn container)" >&2; exit 1; }
rebuild=0
[[ "${1:-}" == "--rebuild" ]] && rebuild=1

if [[ -z "${E2E_NTHD_DEB:-}" ]]; then
  if ((rebuild)) || ! compgen -G 'target/debian/nthd_*.deb' >/dev/null; then
    echo "==> building the nthd .deb (packaging/build.sh)"
    bash packaging/build.sh
  fi
fi
export E2E_VERBOSE="${E2E_VERBOSE-1}"
exec bash tests/e2e/run.sh --narrate
