"""The manual: it builds with mkdocs --strict (a broken link or a page left out of the nav fails), its generated
reference is what the code says (a flag without its line fails), and the README stays a front page."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_manual_builds_strict_with_every_link_whole(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "docs" / "mkdocs.yml"),
                        "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, NO_MKDOCS_2_WARNING="1"), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*.html")}
    pages = {p.relative_to(ROOT / "docs" / "pages").with_suffix(".html").as_posix()
             for p in (ROOT / "docs" / "pages").rglob("*.md")}
    assert pages <= built, sorted(pages - built)


def test_the_generated_reference_is_what_the_code_says() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "docs" / "generate.py"), "--check"], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    page = (ROOT / "docs" / "pages" / "reference" / "cli.md").read_text(encoding="utf-8")
    from inspector.cli import build_parser
    from inspector.cli.config import command_parsers

    for path, parser in command_parsers(build_parser()).items():  # every command and every flag has its line
        assert f"inspector {path}\n" in page, path
        for action in parser._actions:  # noqa: SLF001
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert f"`{flag}`" in page, (path, flag)
    # and says what it does: a plant's engineer reads the manual, not the source (46 options said nothing once)
    undocumented = [line for line in page.splitlines() if "(no help)" in line]
    assert not undocumented, undocumented


def test_the_readme_is_a_front_page_whose_links_lead_somewhere() -> None:
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        assert (ROOT / target).exists(), target


def rule_set_keys() -> dict[str, set[str]]:
    """Every key a rule set may hold, read from the parsers' own `unknown(...)` checks (inspector/routing/*.py):
    the literal sets and the module constants they name, per module."""
    import ast

    keys: dict[str, set[str]] = {}
    for path in sorted((ROOT / "inspector" / "routing").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {t.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "unknown" and node.args:
                arg = node.args[0]
                arg = constants.get(arg.id, arg) if isinstance(arg, ast.Name) else arg
                keys.setdefault(path.name, set()).update(ast.literal_eval(arg))
    return keys


def test_the_rule_set_page_names_every_key_the_parsers_take() -> None:
    """rule-sets.md is written by hand; a key a parser accepts and the page never names fails here."""
    page = (ROOT / "docs" / "pages" / "reference" / "rule-sets.md").read_text(encoding="utf-8")
    keys = rule_set_keys()
    assert len(keys) >= 6 and "recipe" in keys["rules.py"]  # the walk found the parsers
    missing = sorted(f"{module}: {key}" for module, names in keys.items() for key in names
                     if f"{key}:" not in page and f"`{key}`" not in page)
    assert not missing, missing
