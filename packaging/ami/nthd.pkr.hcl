# Packer example: bake nthd into an EKS node AMI, built on the EKS-optimized
# Amazon Linux 2023 image (nodeadm, kubelet, containerd already inside).
#
#   packer init .
#   packer build -var nthd_package=dist/nthd-0.2.0-1.x86_64.rpm \
#                -var kubernetes_version=1.34 .
#   packer build -var nthd_package=dist/nthd-0.2.0-1.aarch64.rpm \
#                -var kubernetes_version=1.34 -var arch=arm64 .
#
# What the image gets:
#   - nthd, enabled but not started: it starts on the first boot of each node.
#   - /etc/eks/nodeadm.d/50-nthd-graceful-shutdown.yaml, a nodeadm NodeConfig
#     drop-in that turns on kubelet's Graceful Node Shutdown (GNS) with
#     shutdownGracePeriod 90s / shutdownGracePeriodCriticalPods 30s.
#
# How the drop-in reaches kubelet: on EKS AL2023 AMIs, nodeadm-run.service runs
#   nodeadm init --config-source imds://user-data
#                --config-source file:///etc/eks/nodeadm.d/
# and merges every *.yaml/*.yml/*.json NodeConfig in that directory over the
# one from user data; values from the drop-in win (amazon-eks-ami
# nodeadm/doc/examples.md, "Overriding configuration with drop-in files";
# AMI releases v20251023 and later). nodeadm writes spec.kubelet.config to
# /etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf and starts kubelet
# with --config-dir pointing there. The cluster part of the NodeConfig
# (name, endpoint, CA, CIDR) still has to come from user data: see
# nodeconfig-user-data.mime, which also carries the same kubelet values for
# nodes that run an image without this drop-in.
#
# The logind side: kubelet itself writes
# /etc/systemd/logind.conf.d/99-kubelet.conf with InhibitDelayMaxSec equal to
# shutdownGracePeriod and sends logind SIGHUP to reload it, because GNS needs
# InhibitDelayMaxSec >= shutdownGracePeriod (AL2023's logind default is 5 s).
# The image ships no logind drop-in of its own, and nthd ships none either.
#
# The grace period must fit into the notice. An EC2 Spot interruption notice
# comes 2 minutes before the instance is stopped or terminated; `nthd check`
# fails its drain-budget check on spot nodes when logind's
# InhibitDelayMaxSec is above 120 s and names at most 110 s (the notice minus
# 10 s; docs/clouds.md's grace-period table). EKS's own default
# on AL2023 for Kubernetes 1.34 and later is 2m30s / 30s, longer than the
# notice; the drop-in's 90s / 30s overrides it.
#
# nthd's package would normally start nthd at once; on the builder we only
# want it ENABLED: the rpm's scriptlets honour SYSTEMD_OFFLINE=1 (systemctl
# then acts as in a chroot).
#
# Amazon Linux 2 (systemd 219) is NOT supported: kubelet's GNS cannot work on
# systemd 219 (kubernetes#101553), so pods would not be drained.

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
  description = "Local path of the nthd .rpm to bake in; its architecture must match var.arch (x86_64, or aarch64 for arm64)."
}

variable "kubernetes_version" {
  type        = string
  description = "Kubernetes minor version of the EKS node image, e.g. 1.34. Must not be newer than the cluster's control plane."
  validation {
    # Written for Packer 1.6.6 too, which has neither can() nor regex().
    condition     = length(split(".", var.kubernetes_version)) == 2 && split(".", var.kubernetes_version)[0] == "1"
    error_message = "The kubernetes_version must be a minor version such as 1.34."
  }
}

variable "arch" {
  type        = string
  default     = "x86_64"
  description = "CPU architecture of the EKS node image: x86_64 or arm64 (Graviton)."
  validation {
    condition     = contains(["x86_64", "arm64"], var.arch)
    error_message = "The arch must be x86_64 or arm64."
  }
}

variable "instance_type" {
  type        = string
  default     = ""
  description = "Builder instance type; empty picks t3.small for x86_64 and t4g.small for arm64. Must match var.arch."
}

variable "source_ami" {
  type        = string
  default     = ""
  description = <<-EOT
    Pin the source AMI, e.g. to the one EKS recommends:
      aws ssm get-parameter --region REGION --query Parameter.Value --output text \
        --name /aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id
    Empty: the newest image named amazon-eks-node-al2023-ARCH-standard-VERSION-v* from var.ami_owner.
  EOT
}

variable "ami_owner" {
  type        = string
  default     = "602401143452"
  description = "Account that publishes the EKS-optimized AMIs in var.region (602401143452 in most commercial regions; opt-in, China and GovCloud regions use others)."
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

locals {
  instance_type = var.instance_type != "" ? var.instance_type : (var.arch == "arm64" ? "t4g.small" : "t3.small")
}

source "amazon-ebs" "eks_al2023" {
  region        = var.region
  instance_type = local.instance_type
  ssh_username  = "ec2-user"
  ami_name      = "eks-node-al2023-${var.arch}-${var.kubernetes_version}-nthd-{{timestamp}}"

  # Either the pinned AMI or the newest matching EKS-optimized AL2023 image.
  source_ami = var.source_ami
  dynamic "source_ami_filter" {
    for_each = var.source_ami == "" ? [1] : []
    content {
      owners      = [var.ami_owner]
      most_recent = true
      filters = {
        name                = "amazon-eks-node-al2023-${var.arch}-standard-${var.kubernetes_version}-v*"
        architecture        = var.arch
        virtualization-type = "hvm"
        root-device-type    = "ebs"
      }
    }
  }

  # IMDSv2 on the BUILDER instance only (as upstream's EKS AMI build does; it
  # also satisfies accounts that require IMDSv2 at launch). This does not
  # reach the nodes: set their metadata options in the launch template.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }
}

build {
  sources = ["source.amazon-ebs.eks_al2023"]

  provisioner "file" {
    source      = var.nthd_package
    destination = "/tmp/${basename(var.nthd_package)}"
  }

  provisioner "file" {
    source      = "${path.root}/nodeadm.d/50-nthd-graceful-shutdown.yaml"
    destination = "/tmp/50-nthd-graceful-shutdown.yaml"
  }

  # The kubelet settings, as a nodeadm drop-in.
  provisioner "shell" {
    inline = [
      "set -eu",
      # Refuse an image whose nodeadm would silently ignore the drop-in.
      "if ! systemctl cat nodeadm-run.service | grep -q 'file:///etc/eks/nodeadm.d'; then",
      "  echo 'this EKS AMI predates nodeadm drop-ins (/etc/eks/nodeadm.d, AMI v20251023+): use a newer one, or put the kubelet settings in user data (nodeconfig-user-data.mime)' >&2",
      "  exit 1",
      "fi",
      "sudo install -D -o root -g root -m 0644 /tmp/50-nthd-graceful-shutdown.yaml /etc/eks/nodeadm.d/50-nthd-graceful-shutdown.yaml",
      "rm -f /tmp/50-nthd-graceful-shutdown.yaml",
      # Let nodeadm itself parse and merge it, with placeholder cluster details
      # standing in for the user data (nodeadm requires them; nothing is contacted).
      "printf '%s\\n' 'apiVersion: node.eks.aws/v1alpha1' 'kind: NodeConfig' 'spec:' '  cluster:' '    name: build-check' '    apiServerEndpoint: https://build-check.invalid' '    certificateAuthority: Y2VydGlmaWNhdGVBdXRob3JpdHk=' '    cidr: 10.100.0.0/16' >/tmp/nodeconfig-cluster-stub.yaml",
      "sudo nodeadm config check --config-source file:///tmp/nodeconfig-cluster-stub.yaml --config-source file:///etc/eks/nodeadm.d/",
      "rm -f /tmp/nodeconfig-cluster-stub.yaml",
    ]
  }

  provisioner "shell" {
    environment_vars = ["PKG=/tmp/${basename(var.nthd_package)}"]
    inline = [
      "set -eu",
      # Install without starting: enabled for the next boot only.
      "sudo SYSTEMD_OFFLINE=1 dnf install -y \"$PKG\"",
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

  # The builder booted the image once: drop what identifies that instance, as
  # amazon-eks-ami's own cleanup.sh does, so every node gets its own.
  provisioner "shell" {
    inline = [
      "set -eu",
      "sudo dnf clean all",
      "sudo rm -rf /var/lib/cloud/data /var/lib/cloud/instance /var/lib/cloud/instances /var/lib/cloud/sem /etc/ssh/ssh_host_*",
      "sudo rm -f /etc/machine-id && sudo touch /etc/machine-id",
    ]
  }
}
