"""The test cluster leaves the machine's Slurm configuration as it found it: scripts/slurm-up.sh saves the /etc/slurm
files it overwrites (scripts/slurm-etc.sh save) and scripts/slurm-down.sh puts them back (restore), removing those
that did not exist. The save/restore pair runs here on a temporary configuration folder."""
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "slurm-etc.sh"
WRITTEN = ("slurm.conf", "slurmdbd.conf", "gres.conf")


def slurm_etc(action: str, conf_dir: Path, backup_dir: Path) -> None:
    env = {**os.environ, "CONF_DIR": str(conf_dir), "BACKUP_DIR": str(backup_dir)}
    subprocess.run(["bash", str(SCRIPT), action], env=env, check=True, capture_output=True, text=True, timeout=60)


def overwrite_like_slurm_up(conf_dir: Path) -> None:
    conf_dir.mkdir(exist_ok=True)
    for name in WRITTEN:
        (conf_dir / name).write_text("StateSaveLocation=/tmp/firstfault-test.gone/slurmctld\n")


def test_restore_puts_back_what_was_there_and_removes_what_was_not(tmp_path):
    conf_dir, backup = tmp_path / "etc-slurm", tmp_path / "state" / "etc-slurm"
    conf_dir.mkdir()
    (conf_dir / "slurm.conf").write_text("ClusterName=site\n")
    (conf_dir / "slurm.conf").chmod(0o640)
    (conf_dir / "plugstack.conf").write_text("include /etc/slurm/plugstack.conf.d/*\n")
    slurm_etc("save", conf_dir, backup)
    overwrite_like_slurm_up(conf_dir)
    (conf_dir / "slurm.conf").chmod(0o644)
    slurm_etc("restore", conf_dir, backup)
    assert sorted(p.name for p in conf_dir.iterdir()) == ["plugstack.conf", "slurm.conf"]
    assert (conf_dir / "slurm.conf").read_text() == "ClusterName=site\n"
    assert (conf_dir / "slurm.conf").stat().st_mode & 0o777 == 0o640
    assert not backup.exists()


def test_restore_removes_a_configuration_folder_that_did_not_exist(tmp_path):
    conf_dir, backup = tmp_path / "etc-slurm", tmp_path / "state" / "etc-slurm"
    slurm_etc("save", conf_dir, backup)
    overwrite_like_slurm_up(conf_dir)
    slurm_etc("restore", conf_dir, backup)
    assert not conf_dir.exists()


def test_a_second_save_keeps_the_first_state(tmp_path):
    # slurm-up.sh run again on the same state folder must not take the test cluster's files for the machine's
    conf_dir, backup = tmp_path / "etc-slurm", tmp_path / "state" / "etc-slurm"
    conf_dir.mkdir()
    slurm_etc("save", conf_dir, backup)
    overwrite_like_slurm_up(conf_dir)
    slurm_etc("save", conf_dir, backup)
    slurm_etc("restore", conf_dir, backup)
    assert list(conf_dir.iterdir()) == []


def test_restore_without_a_save_changes_nothing(tmp_path):
    conf_dir = tmp_path / "etc-slurm"
    overwrite_like_slurm_up(conf_dir)
    slurm_etc("restore", conf_dir, tmp_path / "state" / "etc-slurm")
    assert sorted(p.name for p in conf_dir.iterdir()) == sorted(WRITTEN)


def test_slurm_up_saves_before_its_first_write_and_slurm_down_restores_after_its_last_stop():
    up = (REPO / "scripts" / "slurm-up.sh").read_text()
    first_write = min(up.index(f'>"$CONF_DIR/{name}"') for name in WRITTEN)
    save = re.search(r'slurm-etc\.sh"? save', up)
    assert save and save.start() < up.index('mkdir -p "$CONF_DIR"') < first_write
    assert set(re.findall(r'>"\$CONF_DIR/([\w.]+)"', up)) == set(WRITTEN), "slurm-etc.sh saves exactly these"
    saved = re.search(r"FILES=\(([^)]*)\)", SCRIPT.read_text())
    assert saved and set(saved.group(1).split()) == set(WRITTEN)
    down = (REPO / "scripts" / "slurm-down.sh").read_text()
    restore = re.search(r'slurm-etc\.sh"? restore', down)
    assert restore and restore.start() > down.rindex("\nstop ")
