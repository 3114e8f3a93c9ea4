#!/bin/sh
# Install what evaldesk's SSH and SLURM tests stand up for real: OpenSSH's sshd and a
# single-node SLURM with accounting. Safe to run again: apt-get skips what is installed.
# Exits non-zero when a package is missing and cannot be installed here: CI must not go on
# as if the tests that need these could run.
set -eu
export DEBIAN_FRONTEND=noninteractive
need=""
for pkg in openssh-server slurm-wlm slurm-client munge slurmdbd mariadb-server; do
    if ! dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        need="$need $pkg"
    fi
done
if [ -n "$need" ]; then
    if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "ci_services: missing:$need; installing them needs root and apt-get (Debian)" >&2
        exit 1
    fi
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y --no-install-recommends $need
fi
PATH=$PATH:/usr/sbin
for bin in sshd munged mariadbd slurmdbd slurmctld slurmd sacct sbatch; do
    if ! command -v "$bin" >/dev/null 2>&1; then
        echo "ci_services: $bin not found after installing the packages" >&2
        exit 1
    fi
done
# sshd's privilege separation dir (a tmpfs: gone after a reboot)
if [ "$(id -u)" = "0" ]; then mkdir -p /run/sshd; fi
echo "ci_services: openssh-server and SLURM packages present; start SLURM with scripts/slurm_up.sh"
