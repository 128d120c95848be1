#!/usr/bin/env bash
# The gate's sandbox probe, run before any proposed code (docs/governance.md, "The sandbox
# on the runner"). `cakegov doctor` runs bwrap with the worker's options. On a host where
# AppArmor refuses unprivileged user namespaces (Ubuntu 23.10+, GitHub's ubuntu-24.04
# runners) it installs the narrowest fix, an AppArmor profile that lets /usr/bin/bwrap
# (the bwrap on PATH) alone create them, and probes again. Any other refusal, or a profile
# that does not help, fails the job with one line naming the cause and the fix: never a
# fallback to uncontained plugin code.
#
# Environment (for tests; the action sets none): CAKEGOV (the command, default cakegov),
# SUDO (default sudo when not root), APPARMOR_DIR (default /etc/apparmor.d).
set -uo pipefail

cakegov_cmd=${CAKEGOV:-cakegov}
if [ -z "${SUDO+x}" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi
fi
profile_dir=${APPARMOR_DIR:-/etc/apparmor.d}

# shellcheck disable=SC2086  # the command may carry arguments (python -m cakegov)
if out=$($cakegov_cmd doctor 2>&1); then
  echo "$out"
  exit 0
fi
echo "$out"
cause=$(printf '%s\n' "$out" | head -n 1)
case "$out" in
  *AppArmor*)
    bwrap=$(command -v bwrap)
    profile="$profile_dir/cakegov-bwrap"
    echo "cakegov gate: installing the AppArmor profile $profile (user namespaces for $bwrap only)"
    printf 'abi <abi/4.0>,\ninclude <tunables/global>\n\nprofile cakegov-bwrap %s flags=(unconfined) {\n  userns,\n}\n' \
      "$bwrap" | $SUDO tee "$profile" > /dev/null || {
      echo "::error::cakegov gate: cannot write $profile: the plugin sandbox stays refused ($cause)"
      exit 1
    }
    if ! $SUDO apparmor_parser -r "$profile"; then
      echo "::error::cakegov gate: apparmor_parser could not load $profile: the plugin sandbox stays refused ($cause)"
      exit 1
    fi
    # shellcheck disable=SC2086
    if out=$($cakegov_cmd doctor 2>&1); then
      echo "$out"
      exit 0
    fi
    echo "$out"
    echo "::error::cakegov gate: the AppArmor profile for $bwrap did not lift the refusal: $(printf '%s\n' "$out" | head -n 1)"
    exit 1
    ;;
esac
echo "::error::cakegov gate: $cause (proposed plugin code never runs uncontained in the gate)"
exit 1
