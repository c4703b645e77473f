#!/usr/bin/env bash
# Check the Packer example and its nodeadm NodeConfig files, offline.
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
#   4. python3 + PyYAML: nodeadm.d/50-nthd-graceful-shutdown.yaml and every
#      application/node.eks.aws part of nodeconfig-user-data.mime parse as NodeConfig
#      (node.eks.aws/v1alpha1); the user data has the four cluster fields nodeadm requires;
#      both set the same spec.kubelet.config, which sets shutdownGracePeriod and
#      shutdownGracePeriodCriticalPods (or only the ByPodPriority form), critical < total, and
#      a total of at most 110 s (the 2-minute EC2 Spot notice minus nthd check's 10 s margin).
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
# shellcheck source=packaging/host-tools.sh
. ../host-tools.sh

# Packer, installed if missing (as root).
ensure_packer() {
    if ! command -v packer >/dev/null; then
        [ "$(id -u)" = 0 ] || { echo "validate.sh: install packer (apt-get install packer)" >&2; exit 1; }
        apt_install packer >/dev/null
    fi
    packer version
}

# 1. The whole template: syntax and format.
check_format() {
    packer fmt -check -diff nthd.pkr.hcl || {
        echo "validate.sh: nthd.pkr.hcl does not parse, or is not formatted (packer fmt nthd.pkr.hcl)" >&2
        exit 1
    }
}

# 2. Validate what Packer 1.6.6 knows, on the template in $tmp minus the blocks it does not.
validate_template() {
    local arch
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
}

# A python3 with PyYAML, for steps 3 and 4: sets py.
find_python() {
    py=python3
    if ! "$py" -c 'import yaml' 2>/dev/null; then
        py=/usr/bin/python3
        if ! "$py" -c 'import yaml' 2>/dev/null; then
            [ "$(id -u)" = 0 ] || { echo "validate.sh: install PyYAML (apt-get install python3-yaml)" >&2; exit 1; }
            apt_install python3-yaml >/dev/null
        fi
    fi
}

# 3. The provisioners' inline scripts, as Packer's shell provisioner runs them (/bin/sh -e).
check_inline_scripts() {
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
}

# 4. The NodeConfig files, by a Python program in two parts: its helpers, then the checks.
nodeconfig_helpers() {
    cat <<'EOF'
import email, re, sys
import yaml

SPOT_BUDGET = 110  # seconds: the 2-minute Spot notice minus nthd check's 10 s margin
errors = []

def seconds(value, where):
    """A Go time.Duration string (what kubelet accepts), in seconds."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", str(value))
    if not parts or "".join(n + u for n, u in parts) != str(value):
        errors.append(f"{where}: {value!r} is not a duration such as 90s")
        return 0.0
    return sum(float(n) * units[u] for n, u in parts)

def node_config(text, where):
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        errors.append(f"{where}: not YAML: {e}")
        return {}
    if not isinstance(doc, dict) or doc.get("apiVersion") != "node.eks.aws/v1alpha1" \
            or doc.get("kind") != "NodeConfig":
        errors.append(f"{where}: not a node.eks.aws/v1alpha1 NodeConfig")
        return {}
    return doc.get("spec") or {}

def check_kubelet(kc, where):
    total = None
    by_prio = kc.get("shutdownGracePeriodByPodPriority")
    plain = [k for k in ("shutdownGracePeriod", "shutdownGracePeriodCriticalPods") if k in kc]
    if by_prio is not None:
        if plain:
            errors.append(f"{where}: shutdownGracePeriodByPodPriority excludes {', '.join(plain)}")
        total = sum(int(p["shutdownGracePeriodSeconds"]) for p in by_prio)
    elif len(plain) == 2:
        total = seconds(kc["shutdownGracePeriod"], where)
        critical = seconds(kc["shutdownGracePeriodCriticalPods"], where)
        if not 0 < critical < total:
            errors.append(f"{where}: shutdownGracePeriodCriticalPods must be above 0 and below shutdownGracePeriod")
    else:
        errors.append(f"{where}: spec.kubelet.config needs shutdownGracePeriod and shutdownGracePeriodCriticalPods")
    if total is not None and not 0 < total <= SPOT_BUDGET:
        errors.append(f"{where}: a {total:g} s grace period does not fit the 2-minute Spot notice (at most {SPOT_BUDGET} s)")

EOF
}
nodeconfig_checks() {
    cat <<'EOF'
dropin_path, mime_path = sys.argv[1], sys.argv[2]

dropin = node_config(open(dropin_path, encoding="utf-8").read(), dropin_path)
dropin_kc = (dropin.get("kubelet") or {}).get("config") or {}
check_kubelet(dropin_kc, dropin_path)
if set(dropin) != {"kubelet"}:
    errors.append(f"{dropin_path}: the image's drop-in should set spec.kubelet only, not {sorted(set(dropin) - {'kubelet'})}")

msg = email.message_from_string(open(mime_path, encoding="utf-8").read())
if not msg.is_multipart() or msg.defects:
    errors.append(f"{mime_path}: not a well-formed MIME multipart document ({msg.defects})")
merged = {}
parts = [p for p in msg.walk() if p.get_content_type() == "application/node.eks.aws"]
if not parts:
    errors.append(f"{mime_path}: no application/node.eks.aws part")
for i, part in enumerate(parts, 1):
    spec = node_config(part.get_payload(), f"{mime_path} part {i}")
    for key, value in spec.items():  # later parts win, as in nodeadm (shallow is enough here)
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
cluster = merged.get("cluster") or {}
missing = [k for k in ("name", "apiServerEndpoint", "certificateAuthority", "cidr") if not cluster.get(k)]
if missing:
    errors.append(f"{mime_path}: spec.cluster lacks {', '.join(missing)}")
user_kc = (merged.get("kubelet") or {}).get("config") or {}
check_kubelet(user_kc, mime_path)
if user_kc != dropin_kc:
    errors.append(f"{mime_path}: spec.kubelet.config {user_kc} differs from {dropin_path}'s {dropin_kc}")

for e in errors:
    print(f"validate.sh: {e}", file=sys.stderr)
sys.exit(1 if errors else 0)
EOF
}
check_node_configs() {
    "$py" - nodeadm.d/50-nthd-graceful-shutdown.yaml nodeconfig-user-data.mime \
        < <(nodeconfig_helpers; nodeconfig_checks)
}

main() {
    ensure_packer
    check_format
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    validate_template
    find_python
    check_inline_scripts
    check_node_configs
    echo "validate.sh: ok: packer fmt on the whole template; packer validate (x86_64, arm64) without" \
        "required_plugins and metadata_options, $(packer version | head -n1); shellcheck of the inline" \
        "scripts; NodeConfig drop-in and user data"
}

main "$@"
