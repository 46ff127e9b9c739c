#!/usr/bin/env bash
# Install firstfault into .venv in the repo: the README's set-up, shared by scripts/setup-and-test.sh and the
# Dockerfile so that the tests and the image install the same way.
#
#   bash scripts/install.sh          python3-venv when missing, .venv, pip install -e .
#   bash scripts/install.sh --test   also the Debian packages the tests use, and the [test] extra
#
# Missing Debian packages are installed with apt-get as root (their services are not started); without root it names
# them and exits 1. Exit status 0 when firstfault is installed.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
VENV=$REPO/.venv
PYTHON=${PYTHON:-python3}
EXTRAS=
DEBIAN_PACKAGES=()

say() { echo "install: $*" >&2; }

if [ "${1:-}" = --test ]; then
    EXTRAS='[test]'
    # each test fails without its package; none is skipped:
    #   chromium                      renders the HTML report (tests/test_report.py)
    #   prometheus                    prometheus + promtool; tests/test_prometheus.py backfills and starts its own server
    #   slurmctld slurmd slurm-client slurmdbd munge mariadb-server
    #                                 a one-node Slurm with accounting (scripts/slurm-up.sh) for tests/test_slurm_live.py
    #   iproute2                      `ip netns`: the separate Dask hosts of tests/test_dask_hosts.py
    DEBIAN_PACKAGES=(chromium prometheus slurmctld slurmd slurm-client slurmdbd munge mariadb-server iproute2)
elif [ -n "${1:-}" ]; then
    say "unknown argument $1 (--test or nothing)"
    exit 2
fi

# ---- Debian packages ---------------------------------------------------------------------------------------------------
missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
done
# Debian's python3 makes a venv only with python3-venv (ensurepip)
[ -x "$VENV/bin/python" ] || "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if ((${#missing[@]})); then
    if ((EUID != 0)); then
        say "missing Debian packages: ${missing[*]}"
        say "install them as root, then run this again: apt-get install -y --no-install-recommends ${missing[*]}"
        exit 1
    fi
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # the packages' own services (munged, mariadbd, slurm*) must not start: scripts/slurm-up.sh starts its own
    NO_START=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        NO_START=/usr/sbin/policy-rc.d
        trap '[ -z "$NO_START" ] || rm -f "$NO_START"' EXIT
        printf '#!/bin/sh\n# scripts/install.sh: no service starts while it installs packages\nexit 101\n' >"$NO_START"
        chmod 755 "$NO_START"
    fi
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    apt_rc=$?
    [ -z "$NO_START" ] || { rm -f "$NO_START"; NO_START=; }
    ((apt_rc == 0)) || { say "apt-get failed ($apt_rc)"; exit 1; }
fi

# ---- .venv -------------------------------------------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV" || exit 1
fi
"$VENV/bin/pip" install --quiet -e ".$EXTRAS" || { say "pip install -e '.$EXTRAS' failed"; exit 1; }
