#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh Debian 12 machine (the README's test command; .ci/run calls this).
# Run as root from anywhere; extra arguments go to pytest (scripts/setup-and-test.sh -x tests/test_report.py).
#
#   1. the Debian packages the tests use, when missing (apt-get; not root: says what to install and exits 1)
#   2. .venv in the repo, when missing, and `pip install -e '.[test]'` into it
#   3. the services the tests need: a one-node Slurm with accounting (scripts/slurm-up.sh), stopped at exit
#   4. the rule test kit, then pytest (last: its summary line closes the run)
#
# Every temporary file (pip, pytest, Prefect, chromium, the Slurm/MariaDB state) goes to a private TMPDIR that is
# removed at exit, also on failure or interrupt: nothing is left in /tmp. Exit status: pytest's; 1 when pytest passed
# but the rule kit failed.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
VENV=$REPO/.venv
PYTHON=${PYTHON:-python3}

say() { echo "setup-and-test: $*" >&2; }

# Debian packages the tests use (each test fails without its package; none is skipped):
#   chromium                      renders the HTML report (tests/test_report.py)
#   prometheus                    prometheus + promtool; tests/test_prometheus.py backfills and starts its own server
#   slurmctld slurmd slurm-client slurmdbd munge mariadb-server
#                                 a one-node Slurm with accounting (scripts/slurm-up.sh) for tests/test_slurm_live.py
DEBIAN_PACKAGES=(chromium prometheus slurmctld slurmd slurm-client slurmdbd munge mariadb-server)

# ---- a private TMPDIR for everything below, removed at exit ----------------------------------------------------------
# Like /tmp (mode 1777): the daemons run as slurm, mysql and munge reach their state dir and their own temp files.
TMP_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/firstfault-test.XXXXXX") || exit 1
chmod 1777 "$TMP_ROOT"
export TMPDIR=$TMP_ROOT TEMP=$TMP_ROOT TMP=$TMP_ROOT
export STATE_DIR=$TMP_ROOT/slurm  # scripts/slurm-up.sh and slurm-down.sh

PYTEST_PID= NO_START=
alive() { [ -n "$1" ] && [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
stop_pytest() {
    alive "$PYTEST_PID" || return 0
    local _
    for _ in $(seq 1 25); do alive "$PYTEST_PID" || return 0; sleep 0.2; done  # a Ctrl-C reached it too
    kill -INT "$PYTEST_PID" 2>/dev/null  # pytest tears its fixtures (servers, browsers) down on SIGINT
    for _ in $(seq 1 300); do alive "$PYTEST_PID" || return 0; sleep 0.2; done
    kill -KILL "$PYTEST_PID" 2>/dev/null
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    stop_pytest
    [ -z "$NO_START" ] || rm -f "$NO_START"
    # only a cluster slurm-up.sh started here (it makes $STATE_DIR/run); one that was already running is left alone
    [ -d "$STATE_DIR/run" ] && bash "$REPO/scripts/slurm-down.sh" >/dev/null 2>&1
    rm -rf "$TMP_ROOT"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- 1. Debian packages ----------------------------------------------------------------------------------------------
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
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        NO_START=/usr/sbin/policy-rc.d  # removed again below or at exit
        printf '#!/bin/sh\n# setup-and-test.sh: no service starts while it installs packages\nexit 101\n' >"$NO_START"
        chmod 755 "$NO_START"
    fi
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    apt_rc=$?
    [ -z "$NO_START" ] || { rm -f "$NO_START"; NO_START=; }
    ((apt_rc == 0)) || { say "apt-get failed ($apt_rc)"; exit 1; }
fi

# ---- 2. .venv ----------------------------------------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV" || exit 1
fi
"$VENV/bin/pip" install --quiet -e '.[test]' || { say "pip install -e '.[test]' failed"; exit 1; }

# ---- 3. services -------------------------------------------------------------------------------------------------------
# Slurm + slurmdbd + MariaDB (~5 s). A failed start fails tests/test_slurm_live.py (which says why), not the run.
if ! bash "$REPO/scripts/slurm-up.sh"; then
    say "scripts/slurm-up.sh failed; the ends of its logs:"
    tail -n 20 "$STATE_DIR"/log/* >&2 2>/dev/null
fi

# ---- 4. the rule test kit over the built-in rules and the fixtures shipped beside them (docs/rules.md) ------------------
rule_kit() {
    local rc=0
    "$VENV/bin/firstfault" rules lint || rc=1
    "$VENV/bin/firstfault" rules test || rc=1
    return "$rc"
}
rule_kit_rc=0
rule_kit || { rule_kit_rc=$?; say "the rule kit FAILED (above); running pytest anyway"; }

# ---- the README's test command, last (in the background only so that a signal reaches the traps at once) --------------
"$VENV/bin/python" -m pytest -q "$@" &
PYTEST_PID=$!
wait "$PYTEST_PID"
pytest_rc=$?
PYTEST_PID=
if ((pytest_rc == 0 && rule_kit_rc != 0)); then
    say "pytest passed, but the rule kit failed"
    exit 1
fi
exit "$pytest_rc"
