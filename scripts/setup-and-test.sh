#!/usr/bin/env bash
# Set up and run the whole test suite on a fresh Debian 12 machine (the README's test command; .ci/run calls this).
# Run as root from anywhere; extra arguments go to pytest (scripts/setup-and-test.sh -x tests/test_report.py).
#
#   1. the Debian packages the tests use, when missing (apt-get; not root: says what to install and exits 1)
#   2. .venv in the repo, when missing, and `pip install -e '.[test]'` into it (1 and 2: scripts/install.sh --test)
#   3. the services the tests need: a one-node Slurm with accounting (scripts/slurm-up.sh), stopped at exit, when
#      the /etc/slurm files it replaced are put back (scripts/slurm-down.sh)
#   4. the rule test kit, then pytest with its 20 slowest tests listed (last: its summary line closes the run)
#
# Every temporary file (pip, pytest, Prefect, chromium, the Slurm/MariaDB state) goes to a private TMPDIR that is
# removed at exit, also on failure or interrupt: nothing is left in /tmp. Exit status: pytest's; 1 when pytest passed
# but the rule kit failed.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
VENV=$REPO/.venv

say() { echo "setup-and-test: $*" >&2; }

# ---- a private TMPDIR for everything below, removed at exit ----------------------------------------------------------
# Like /tmp (mode 1777): the daemons run as slurm, mysql and munge reach their state dir and their own temp files.
TMP_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/firstfault-test.XXXXXX") || exit 1
chmod 1777 "$TMP_ROOT"
export TMPDIR=$TMP_ROOT TEMP=$TMP_ROOT TMP=$TMP_ROOT
export STATE_DIR=$TMP_ROOT/slurm  # scripts/slurm-up.sh and slurm-down.sh

PYTEST_PID=
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
    # only a cluster slurm-up.sh started here (it makes $STATE_DIR/run); one that was already running is left alone
    [ -d "$STATE_DIR/run" ] && bash "$REPO/scripts/slurm-down.sh" >/dev/null 2>&1
    rm -rf "$TMP_ROOT"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- 1.-2. Debian packages, .venv, firstfault with its [test] extra: the README's set-up (the Dockerfile runs the same) --
bash "$REPO/scripts/install.sh" --test || exit 1

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
"$VENV/bin/python" -m pytest -q --durations=20 "$@" &
PYTEST_PID=$!
wait "$PYTEST_PID"
pytest_rc=$?
PYTEST_PID=
if ((pytest_rc == 0 && rule_kit_rc != 0)); then
    say "pytest passed, but the rule kit failed"
    exit 1
fi
exit "$pytest_rc"
