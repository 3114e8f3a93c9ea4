#!/bin/sh
# Install what evaldesk's SSH and SLURM tests stand up for real: OpenSSH's sshd and a
# single-node SLURM with accounting. Safe to run again: apt-get skips what is installed.
set -eu
export DEBIAN_FRONTEND=noninteractive
need=""
for pkg in openssh-server slurm-wlm slurm-client munge slurmdbd mariadb-server; do
    if ! dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        need="$need $pkg"
    fi
done
if [ -n "$need" ]; then
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y --no-install-recommends $need
fi
mkdir -p /run/sshd
echo "ci_services: openssh-server and SLURM packages present; start SLURM with scripts/slurm_up.sh"
