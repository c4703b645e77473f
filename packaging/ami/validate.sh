#!/usr/bin/env bash
# Check the Packer example with the Packer this machine can get (Debian 12: 1.6.6).
#
#   packaging/ami/validate.sh
#
# nthd.pkr.hcl needs Packer >= 1.7 (`packer { required_plugins }`) and the amazon plugin
# >= 1.2.0 (`metadata_options`), which `packer init` fetches from GitHub. Neither can be
# reached from this project's CI. So this validates everything else: the template with those
# two blocks cut out, under Packer 1.6.6's built-in amazon-ebs builder. It fails when the
# rest of the template is wrong, or when the two blocks are no longer where it cuts.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v packer >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "validate.sh: install packer (apt-get install packer)" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq packer >/dev/null
fi
packer version
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Cut a top-level `packer {` block and the `metadata_options {` block, by brace depth.
awk '
    cut == 0 && ($1 == "packer" || $1 == "metadata_options") && $2 == "{" { cut = 1; depth = 0; found[$1] = 1 }
    cut { n = gsub(/{/, "{"); m = gsub(/}/, "}"); depth += n - m; if (depth <= 0) cut = 0; next }
    { print }
    END { if (!found["packer"] || !found["metadata_options"]) exit 3 }
' nthd.pkr.hcl >"$tmp/nthd.pkr.hcl" || {
    echo "validate.sh: nthd.pkr.hcl no longer has the packer and metadata_options blocks this cuts" >&2
    exit 1
}
touch "$tmp/nthd.rpm"
(cd "$tmp" && packer validate -var nthd_package="$tmp/nthd.rpm" nthd.pkr.hcl)
echo "packer validate: ok (without required_plugins and metadata_options, $(packer version | head -n1))"
