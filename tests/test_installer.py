"""installer/: the script stages a working install; the unit passes systemd's checks; the desktop entry parses."""
from __future__ import annotations

import configparser
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
INSTALLER = REPO / "installer"
# --system-site-packages stands for the box's image (its torch build preinstalled); the image here is the environment
# that runs the tests (a fresh virtualenv with the product's dependencies, or an interpreter with them): the installer
# borrows its packages through a chain file when it is a venv, so nothing depends on what the base interpreter holds
INSTALL_FLAGS = ("--no-apt", "--system-site-packages", "--python", sys.executable)


def install(*flags: str, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(INSTALLER / "install.sh"), *flags, "--dest", str(dest)],
                          capture_output=True, encoding="utf-8", timeout=900)


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("stage")
    r = install(*INSTALL_FLAGS, dest=dest)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "provides" in r.stdout and "missing:" not in r.stdout, r.stdout  # the tests' environment lacks nothing
    return dest


def image_site_packages() -> list[str]:
    dirs = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    return list(dict.fromkeys([*site.getsitepackages(), *dirs]))


def make_image(root: Path, shadows: dict[str, str]) -> Path:
    """An image kept in a venv of its own: the tests' packages, with `shadows` (name -> version) installed in front of
    them as metadata only, so the image holds that version of the package and not the one the product needs."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site_dir = next(root.glob("lib/python*/site-packages"))
    for name, version in shadows.items():
        info = site_dir / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (site_dir / "zz_image.pth").write_text("import site; " + "; ".join(
        f"site.addsitedir({d!r})" for d in image_site_packages()) + "\n")
    return root / "bin/python"


def test_install_script_stages_program_config_unit_and_desktop_entry(staged: Path, tmp_path: Path) -> None:
    unit = (staged / "etc/systemd/system/inspector-kiosk.service").read_text()
    env = (staged / "etc/inspector/kiosk.env").read_text()
    desktop = (staged / "usr/share/applications/inspector-dashboard.desktop").read_text()
    for text in (unit, env, desktop):
        left = [p for p in ("@PREFIX@", "@DATA@", "@CONF@", "@USER@") if p in text]
        assert not left, f"template placeholders left: {left}"
    assert "ExecStart=/opt/inspector/venv/bin/inspector kiosk $INSPECTOR_ARGS" in unit
    config = (staged / "etc/inspector/inspector.yaml").read_text()
    assert "rules: /var/lib/inspector/routing_rules/board_a.yaml" in config and "@" not in config.split("#")[0]
    assert "source: watch:/var/lib/inspector/inbox" in config
    assert (staged / "var/lib/inspector/routing_rules/board_a.yaml").is_file()
    assert "INSPECTOR_TOKEN_FILE=/etc/inspector/api-token" in unit
    assert "INSPECTOR_CONFIG=/etc/inspector/inspector.yaml" in unit and "ExecReload=/bin/kill -HUP $MAINPID" in unit
    assert (staged / "opt/inspector/share/grafana-inspector.json").is_file()
    assert (staged / "opt/inspector/share/postgres-roles.sql").is_file()
    assert (staged / "opt/inspector/share/prometheus-alerts.yml").is_file()
    token = staged / "etc/inspector/api-token"
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text().strip()) >= 32
    # a self-signed TLS pair for the APIs, the key the owner's only; kiosk.env points the kiosk at it
    cert, key = staged / "etc/inspector/tls/cert.pem", staged / "etc/inspector/tls/key.pem"
    assert cert.read_text().startswith("-----BEGIN CERTIFICATE") and key.stat().st_mode & 0o777 == 0o600
    assert "INSPECTOR_TLS_CERT=/etc/inspector/tls/cert.pem" in env and "INSPECTOR_TLS_KEY=" in env
    secrets = [ln for ln in env.splitlines() if "SECRET" in ln and not ln.startswith("#")]
    assert not secrets and "INSPECTOR_RETAIN_DAYS=90" in env
    prune = (staged / "etc/systemd/system/inspector-prune.service").read_text()
    assert "db prune --retain-days ${INSPECTOR_RETAIN_DAYS}" in prune and "archive: /var/lib/inspector/inbox" in config
    assert "CPUWeight=10" in prune  # Nice= alone orders processes within its own cgroup only
    assert "OnCalendar=daily" in (staged / "etc/systemd/system/inspector-prune.timer").read_text()
    backup = (staged / "etc/systemd/system/inspector-backup.service").read_text()
    assert "db backup --local-only --to /var/backups/inspector --keep ${INSPECTOR_BACKUP_KEEP}" in backup
    assert "CPUWeight=10" in backup
    assert (staged / "etc/systemd/system/inspector-backup.timer").is_file() and "INSPECTOR_BACKUP_KEEP=14" in env
    assert (staged / "var/backups/inspector").is_dir()
    llm = (staged / "etc/systemd/system/inspector-llm.service").read_text()
    assert "llm serve --ledger http://127.0.0.1:9107 --ledger-token-file /etc/inspector/api-token" in llm
    assert "Environment=OMP_WAIT_POLICY=PASSIVE" in llm  # its OpenMP threads do not spin on the line's cores
    # Nice= orders processes within a cgroup only: against the kiosk's service the CPU weight yields to the line
    assert "CPUWeight=10" in llm
    assert "INSPECTOR_PLAIN_LISTEN=127.0.0.1:9107" in env  # the kiosk's loopback listener the lease talks to
    assert not [p for p in ("@PREFIX@", "@DATA@", "@CONF@", "@USER@") if p in llm]
    assert (staged / "etc/inspector/llm.env").is_file()
    assert (staged / "var/lib/inspector/inbox").is_dir()
    # the installed program runs outside the checkout and finds its shipped rule sets
    py = staged / "opt/inspector/venv/bin/python"
    r = subprocess.run([str(py), "-c", "from inspector.app.run import RULES_DIR; print(RULES_DIR)"],
                       capture_output=True, encoding="utf-8", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rules_dir = Path(r.stdout.strip())
    assert REPO not in rules_dir.parents and (rules_dir / "board_a.yaml").is_file()
    r = subprocess.run([str(staged / "opt/inspector/venv/bin/inspector"), "kiosk", "--help"],
                       capture_output=True, encoding="utf-8", cwd=tmp_path)
    assert r.returncode == 0 and "--listen" in r.stdout
    # the rendered config file is valid for the installed program (paths rewritten into the staging tree)
    staged_config = tmp_path / "inspector.yaml"
    staged_config.write_text(config.replace("/var/lib/inspector", str(staged / "var/lib/inspector")))
    r = subprocess.run([str(staged / "opt/inspector/venv/bin/inspector"), "--config", str(staged_config), "config",
                        "check"], capture_output=True, encoding="utf-8", cwd=tmp_path)
    assert r.returncode == 0 and ": ok (kiosk, gui, db prune)" in r.stdout, r.stdout + r.stderr


def test_reinstalling_keeps_the_plants_edits(staged: Path) -> None:
    env = staged / "etc/inspector/kiosk.env"
    rules = staged / "var/lib/inspector/routing_rules/board_a.yaml"
    config = staged / "etc/inspector/inspector.yaml"
    config.write_text(config.read_text() + "# line 3\n")
    env.write_text("INSPECTOR_ARGS=--source camera:0\n")
    rules.write_text(rules.read_text(encoding="utf-8") + "\n# tuned on line 3\n", encoding="utf-8")  # it has a §
    token = (staged / "etc/inspector/api-token").read_text()
    cert = (staged / "etc/inspector/tls/cert.pem").read_text()
    r = install(*INSTALL_FLAGS, dest=staged)
    assert r.returncode == 0, r.stderr
    assert (staged / "etc/inspector/tls/cert.pem").read_text() == cert  # pinned clients keep trusting it
    assert "fingerprint SHA256:" in r.stdout + r.stderr
    assert env.read_text() == "INSPECTOR_ARGS=--source camera:0\n"
    assert rules.read_text(encoding="utf-8").endswith("# tuned on line 3\n")
    assert config.read_text().endswith("# line 3\n")
    assert (staged / "etc/inspector/api-token").read_text() == token  # attached dashboards keep working


@pytest.mark.parametrize(("shadows", "flags", "named"), [
    ({"platformdirs": "0.1"}, ("--image-only",),
     ("platformdirs>=4.0", "0.1 installed", "pip install 'platformdirs>=4.0'", "without --image-only")),
    ({"torch": "0.1"}, (), ("torch>=2.4", "0.1 installed", "never replaces", "without --system-site-packages")),
])
def test_an_image_that_falls_short_is_named_before_anything_is_touched(
        tmp_path: Path, shadows: dict[str, str], flags: tuple[str, ...], named: tuple[str, ...]) -> None:
    image = make_image(tmp_path / "image", shadows)
    dest = tmp_path / "stage"
    r = install("--no-apt", "--system-site-packages", *flags, "--python", str(image), dest=dest)
    assert r.returncode == 1, r.stdout + r.stderr
    said = r.stdout + r.stderr
    assert all(n in said for n in named), said
    assert "Nothing was installed" in r.stderr and "Traceback" not in said
    assert not dest.exists() or not any(dest.iterdir()), sorted(dest.rglob("*"))


def test_what_the_image_lacks_is_added_to_the_venv_and_its_torch_kept(tmp_path: Path) -> None:
    """The plant's path on an image without platformdirs: the installer adds it to the venv, leaves torch alone."""
    image = make_image(tmp_path / "image", {"platformdirs": "0.1"})
    dest = tmp_path / "stage"
    r = install("--no-apt", "--system-site-packages", "--headless", "--python", str(image), dest=dest)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "adding to the venv what the image lacks: platformdirs>=4.0" in r.stdout, r.stdout
    venv_site = next((dest / "opt/inspector/venv/lib").glob("python*/site-packages"))
    assert list(venv_site.glob("platformdirs-*.dist-info")) and not list(venv_site.glob("torch*"))
    py = dest / "opt/inspector/venv/bin/python"
    r = subprocess.run([str(py), "-c", "import platformdirs, torch, importlib.metadata as m; "
                        "print(m.version('platformdirs'), torch.__file__)"],
                       capture_output=True, encoding="utf-8", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    version, torch_file = r.stdout.split()
    assert int(version.split(".")[0]) >= 4 and not Path(torch_file).is_relative_to(dest)
    assert (dest / "etc/inspector/tls/cert.pem").is_file()  # `inspector tls make` ran in the finished venv


def test_kiosk_unit_passes_systemd_verification(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    exe = Path(sys.executable).with_name("inspector")
    prefix = tmp_path / "opt"
    (prefix / "venv/bin").mkdir(parents=True)
    (prefix / "venv/bin/inspector").symlink_to(exe if exe.exists() else sys.executable)
    units = {}
    for name in ("inspector-kiosk.service", "inspector-prune.service", "inspector-prune.timer",
                 "inspector-backup.service", "inspector-backup.timer", "inspector-llm.service"):
        text = (INSTALLER / name).read_text()
        for key, value in {"@PREFIX@": str(prefix), "@DATA@": str(tmp_path), "@CONF@": str(tmp_path),
                           "@USER@": "root"}.items():
            text = text.replace(key, value)
        units[name] = tmp_path / name
        units[name].write_text(text)
    (tmp_path / "kiosk.env").write_text("INSPECTOR_RETAIN_DAYS=30\nINSPECTOR_BACKUP_KEEP=7\n")
    (tmp_path / "llm.env").write_text("INSPECTOR_LLM_ARGS=--threads 1\n")
    r = subprocess.run([analyze, "verify", *map(str, units.values())], capture_output=True, encoding="utf-8")
    complaints = [ln for ln in (r.stdout + r.stderr).splitlines() if any(u in ln for u in units)]
    assert r.returncode == 0 and not complaints, complaints
    text = units["inspector-kiosk.service"].read_text()
    service = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    assert service["Type"] == "notify" and service["Restart"] == "on-failure"
    assert service["WatchdogSec"] == "60" and service["KillSignal"] == "SIGTERM"


@pytest.mark.parametrize("name", ["inspector-kiosk.service", "inspector-prune.service", "inspector-backup.service",
                                  "inspector-llm.service"])
def test_units_are_hardened(name: str, tmp_path: Path) -> None:
    """systemd's own exposure score (0 safest, 10 exposed): the bar is 3.0 for every unit we ship."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    text = (INSTALLER / name).read_text()
    for key, value in {"@PREFIX@": "/opt/inspector", "@DATA@": "/var/lib/inspector", "@CONF@": "/etc/inspector",
                       "@USER@": "inspector"}.items():
        text = text.replace(key, value)
    (tmp_path / name).write_text(text)
    r = subprocess.run([analyze, "security", "--offline=true", "--threshold=30", str(tmp_path / name)],
                       capture_output=True, encoding="utf-8")
    if "--offline" in r.stderr and "unrecognized" in r.stderr:
        pytest.skip("this systemd-analyze cannot score a unit file offline (systemd < 252)")
    score = float(r.stdout.rsplit("exposure level for", 1)[1].split(":")[1].split()[0])
    assert score <= 3.0, r.stdout[-3000:]


def test_desktop_entry_has_what_a_launcher_needs() -> None:
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(INSTALLER / "inspector-dashboard.desktop")
    d = entry["Desktop Entry"]
    assert d["Type"] == "Application" and d["Name"] and d["Categories"].endswith(";")
    assert d["Exec"].startswith("@PREFIX@/venv/bin/inspector gui")
