#!/usr/bin/env bash
# Install the Debian packages that tests and benchmarks run for real, if missing.
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v kubectl >/dev/null 2>&1 || { echo "kubectl is required as the reference client" >&2; exit 1; }
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing ${need[*]} (Debian packages)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
