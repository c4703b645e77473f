#!/usr/bin/env bash
# Check the Packer example, offline.
#
#   packaging/ami/validate.sh
#
# The only Packer this project's machines can install is Debian 12's 1.6.6: the PyPI and npm
# package lists show no package shipping a Packer binary, and HashiCorp's release site and
# GitHub (Packer, and the amazon plugin for `packer init`) are out of reach.
# nthd.pkr.hcl is written for Packer >= 1.7 with the amazon plugin >= 1.2.0. So:
#
# CHECKED
#   1. `packer fmt -check` on the whole, unmodified nthd.pkr.hcl: HCL2 syntax of every block,
#      the two below included, and canonical formatting.
#   2. `packer validate` (1.6.6, its built-in amazon-ebs builder) on nthd.pkr.hcl minus two
#      blocks 1.6.6 does not know: `packer { required_plugins }` and `metadata_options`. This
#      checks the variables and their validation rules, locals, the dynamic source_ami_filter,
#      every other builder argument, the provisioners' arguments and that their local files
#      exist; once for arch=x86_64 and once for arch=arm64. A bad arch must be rejected.
#   3. shellcheck -s sh on each shell provisioner's inline script, its lines joined as Packer does.
#
# NOT CHECKED
#   - the two cut blocks against the amazon plugin's schema (syntax only, by step 1), and
#     whether `packer init` resolves the plugin;
#   - anything that needs AWS: that the source AMI filter or owner finds an image, that the
#     build runs, what the provisioners' commands do on the builder (where the template makes
#     nodeadm check the drop-in and refuses images without drop-in support), and nodeadm's or
#     kubelet's own parsing of the NodeConfig files here.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v packer >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "validate.sh: install packer (apt-get install packer)" >&2; exit 1; }
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq packer >/dev/null
fi
packer version

# 1. The whole template: syntax and format.
packer fmt -check -diff nthd.pkr.hcl || {
    echo "validate.sh: nthd.pkr.hcl does not parse, or is not formatted (packer fmt nthd.pkr.hcl)" >&2
    exit 1
}

# 2. Validate what Packer 1.6.6 knows.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Blank out a top-level `packer {` block and the `metadata_options {` block, by brace depth;
# blank lines keep Packer's error line numbers those of nthd.pkr.hcl.
awk '
    cut == 0 && ($1 == "packer" || $1 == "metadata_options") && $2 == "{" { cut = 1; depth = 0; found[$1] = 1 }
    cut { n = gsub(/{/, "{"); m = gsub(/}/, "}"); depth += n - m; if (depth <= 0) cut = 0; print ""; next }
    { print }
    END { if (!found["packer"] || !found["metadata_options"]) exit 3 }
' nthd.pkr.hcl >"$tmp/nthd.pkr.hcl" || {
    echo "validate.sh: nthd.pkr.hcl no longer has the packer and metadata_options blocks this cuts" >&2
    exit 1
}
cp -R nodeadm.d "$tmp/"
touch "$tmp/nthd.rpm"
for arch in x86_64 arm64; do
    (cd "$tmp" && packer validate -var nthd_package="$tmp/nthd.rpm" -var kubernetes_version=1.34 \
        -var arch="$arch" nthd.pkr.hcl)
done
if (cd "$tmp" && packer validate -var nthd_package="$tmp/nthd.rpm" -var kubernetes_version=1.34 \
    -var arch=amd64 nthd.pkr.hcl) >/dev/null 2>&1; then
    echo "validate.sh: nthd.pkr.hcl accepted arch=amd64; its validation rule is gone" >&2
    exit 1
fi

# A python3, for step 3 (PyYAML for the NodeConfig checks to come).
py=python3
if ! "$py" -c 'import yaml' 2>/dev/null; then
    py=/usr/bin/python3
    if ! "$py" -c 'import yaml' 2>/dev/null; then
        [ "$(id -u)" = 0 ] || { echo "validate.sh: install PyYAML (apt-get install python3-yaml)" >&2; exit 1; }
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-yaml >/dev/null
    fi
fi

# 3. The provisioners' inline scripts, as Packer's shell provisioner runs them (/bin/sh -e).
"$py" - nthd.pkr.hcl "$tmp" <<'EOF'
import json, sys
n, script = 0, None
for line in open(sys.argv[1], encoding="utf-8"):
    item = line.strip()
    if item.startswith("inline = ["):
        n, script = n + 1, []
    elif script is not None and item == "]":
        with open(f"{sys.argv[2]}/inline-{n}.sh", "w", encoding="utf-8") as out:
            out.write("\n".join(script) + "\n")
        script = None
    elif script is not None and item.startswith('"'):
        # An HCL quoted string: JSON's escapes, plus $${ for a literal ${.
        script.append(json.loads(item.rstrip(",")).replace("$${", "${").replace("%%{", "%{"))
if n == 0 or script is not None:
    sys.exit("validate.sh: found no complete `inline = [ ... ]` list in nthd.pkr.hcl")
EOF
shellcheck -s sh "$tmp"/inline-*.sh

echo "validate.sh: ok: packer fmt on the whole template; packer validate (x86_64, arm64) without" \
    "required_plugins and metadata_options, $(packer version | head -n1); shellcheck of the inline scripts"
