#!/usr/bin/env bash
# Keep the machine's own Slurm configuration: `save` copies the files scripts/slurm-up.sh overwrites (slurm.conf,
# slurmdbd.conf, gres.conf in CONF_DIR) into BACKUP_DIR and notes which did not exist; `restore` (run by
# scripts/slurm-down.sh once the daemons are stopped) puts the copies back with their owner and mode and removes the
# files, and CONF_DIR itself, that were not there before. Without a saved state `restore` changes nothing.
#
#   CONF_DIR    default /etc/slurm (`restore` uses the one `save` noted)   BACKUP_DIR  default $STATE_DIR/etc-slurm
set -euo pipefail

CONF_DIR=${CONF_DIR:-/etc/slurm}
BACKUP_DIR=${BACKUP_DIR:-${STATE_DIR:-/tmp/firstfault-slurm}/etc-slurm}
FILES=(slurm.conf slurmdbd.conf gres.conf)

save() {
    if [ -e "$BACKUP_DIR/saved" ]; then
        return 0  # a second save would take the test cluster's files for the machine's
    fi
    mkdir -p "$BACKUP_DIR"
    chmod 0700 "$BACKUP_DIR"  # slurmdbd.conf holds a database password
    [ -d "$CONF_DIR" ] || touch "$BACKUP_DIR/no-conf-dir"
    local name
    for name in "${FILES[@]}"; do
        if [ -e "$CONF_DIR/$name" ]; then
            cp -a "$CONF_DIR/$name" "$BACKUP_DIR/$name"
        fi
    done
    printf '%s\n' "$CONF_DIR" >"$BACKUP_DIR/saved"
}

restore() {
    [ -e "$BACKUP_DIR/saved" ] || return 0
    local name
    CONF_DIR=$(cat "$BACKUP_DIR/saved")
    for name in "${FILES[@]}"; do
        if [ -e "$BACKUP_DIR/$name" ]; then
            cp -a "$BACKUP_DIR/$name" "$CONF_DIR/$name"
        else
            rm -f "$CONF_DIR/$name"
        fi
    done
    if [ -e "$BACKUP_DIR/no-conf-dir" ]; then
        rmdir "$CONF_DIR" 2>/dev/null || true  # only when nothing else was put there meanwhile
    fi
    rm -rf "$BACKUP_DIR"
}

case "${1:-}" in
    save) save ;;
    restore) restore ;;
    *) echo "usage: slurm-etc.sh save|restore" >&2; exit 2 ;;
esac
