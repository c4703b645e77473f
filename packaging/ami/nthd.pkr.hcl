# Packer snippet: bake nthd into an EKS/Kubernetes node AMI.
#
#   packer init . && packer build -var nthd_package=dist/nthd-0.1.0-1.x86_64.rpm .
#
# amazon-ebs builds on a live instance (not a chroot), where systemd runs.
# The package would normally start nthd at once; on the builder we only
# want it ENABLED, so that it starts on the first boot of every node:
#   - both package formats honour SYSTEMD_OFFLINE=1 (our maintainer
#     scripts check it, and systemctl treats it like a chroot);
#   - the .deb additionally honours policy-rc.d (exit 101), the Debian way.
#
# Amazon Linux 2023 (systemd 252, polkit 0.120+ with JS rules): supported.
# Amazon Linux 2 (systemd 219): NOT supported. nthd itself would run, but
# kubelet's graceful node shutdown cannot work on systemd 219
# (kubernetes#101553), so pods would not be drained before the power-off.
# Build from AL2023 or Ubuntu 22.04+ instead.

packer {
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.2.0"
    }
  }
}

variable "nthd_package" {
  type        = string
  description = "Local path of the nthd .rpm (AL2023) or .deb (Ubuntu) to bake in."
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

source "amazon-ebs" "al2023" {
  region        = var.region
  instance_type = "t3.small"
  ssh_username  = "ec2-user"
  ami_name      = "k8s-node-al2023-nthd-{{timestamp}}"

  source_ami_filter {
    owners      = ["amazon"]
    most_recent = true
    filters = {
      name                = "al2023-ami-2023.*-x86_64"
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
  }

  # IMDSv2 only, hop limit 1: nthd is a host daemon (one hop).
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }
}

build {
  sources = ["source.amazon-ebs.al2023"]

  provisioner "file" {
    source      = var.nthd_package
    destination = "/tmp/${basename(var.nthd_package)}"
  }

  provisioner "shell" {
    environment_vars = ["PKG=/tmp/${basename(var.nthd_package)}"]
    inline = [
      "set -eu",
      # Install without starting: enabled for the next boot only.
      "if [ \"$${PKG##*.}\" = deb ]; then",
      "  printf '#!/bin/sh\\nexit 101\\n' | sudo tee /usr/sbin/policy-rc.d >/dev/null",
      "  sudo chmod 755 /usr/sbin/policy-rc.d",
      "  sudo SYSTEMD_OFFLINE=1 DEBIAN_FRONTEND=noninteractive apt-get install -y \"$PKG\"",
      "  sudo rm -f /usr/sbin/policy-rc.d",
      "else",
      "  sudo SYSTEMD_OFFLINE=1 dnf install -y \"$PKG\"",
      "fi",
      "rm -f \"$PKG\"",
      "sudo systemctl daemon-reload",
      "systemctl is-enabled nthd.service",
      # Must not be running on the builder; fail the build if it is.
      "if systemctl is-active --quiet nthd.service; then echo 'nthd runs on the builder' >&2; exit 1; fi",
      # No state from the builder may reach the image.
      "sudo rm -rf /var/lib/nthd",
      "getent passwd nthd",
    ]
  }
}
