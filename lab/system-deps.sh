#!/usr/bin/env bash
# Install the Debian packages that tests and benchmarks run for real, if missing.
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The lab's registry asking for credentials (lab up --crossplane --registry-auth): Docker Distribution
# with htpasswd, the password hashed with bcrypt by Apache's htpasswd.  Debian's docker-registry starts
# no service here (no init system in a container); on a machine with systemd, it is stopped below.
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
command -v kubectl >/dev/null 2>&1 || { echo "kubectl is required as the reference client" >&2; exit 1; }
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing ${need[*]} (Debian packages)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  if [[ " ${need[*]} " == *" docker-registry "* ]] && [ -d /run/systemd/system ]; then
    # The lab runs its own registry on a port of its own; the package's service (:5000) is not ours to run.
    $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 || true
  fi
fi
