"""A board package (app/board_package.py) packed from a real rule set and zoo, installed, and refused whole when it is
damaged, hostile or names what it cannot carry: nothing of a refused package stays, nothing is written outside."""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from inspector.app.board_package import NoRoom, install_board, pack_board
from inspector.experts.zoo import MANIFEST

from .test_routing_rules import GOOD


def packed(demo, tmp_path: Path, text: str = GOOD) -> tuple[Path, bytes]:
    """(the rule file, its package's bytes) of the demo board served by the demo zoo."""
    _root, zoo = demo
    rules = tmp_path / "src" / "mini.yaml"
    rules.parent.mkdir(exist_ok=True)
    rules.write_text(text, encoding="utf-8")
    out = io.BytesIO()
    pack_board(rules, zoo.root, out)
    return rules, out.getvalue()


def install(data: bytes, boards: Path, **kw):  # noqa: ANN003, ANN201 - an Installed
    return install_board(io.BytesIO(data), len(data), boards, **kw)


def rewritten(data: bytes, extra: list[tuple[tarfile.TarInfo, bytes | None]], listed: bool = True) -> bytes:
    """The package with `extra` members added (each listed in its package.json with its hash where `listed`)."""
    src = tarfile.open(fileobj=io.BytesIO(data))
    members = [(m, src.extractfile(m).read()) for m in src.getmembers()]  # type: ignore[union-attr]
    doc = json.loads(members[0][1])
    for info, body in extra:
        if listed:
            doc["files"][info.name] = hashlib.sha256(body or b"").hexdigest()
    head = json.dumps(doc).encode()
    members[0][0].size = len(head)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.addfile(members[0][0], io.BytesIO(head))
        for m, body in members[1:]:
            tar.addfile(m, io.BytesIO(body))
        for info, body in extra:
            if body is not None:
                info.size = len(body)
            tar.addfile(info, io.BytesIO(body) if body is not None else None)
    return out.getvalue()


def test_a_package_installs_every_file_as_packed_and_says_what_it_is(demo, tmp_path: Path) -> None:
    _root, zoo = demo
    (zoo.root / "runtime").mkdir(exist_ok=True)  # compiled forms: made again where served, never carried
    compiled = zoo.root / "runtime" / "carried-not.onnx"
    compiled.write_bytes(b"compiled")
    try:
        rules, data = packed(demo, tmp_path)
    finally:
        compiled.unlink()
    done = install(data, tmp_path / "boards")
    assert (done.name, done.recipe, done.replaced) == ("mini", "mini", False)
    assert done.rules.read_text() == rules.read_text() and not (done.zoo / "runtime").exists()
    for path in zoo.root.rglob("*"):
        rel = path.relative_to(zoo.root)
        if path.is_file() and rel.parts[0] != "runtime" and not path.name.startswith("."):
            assert (done.zoo / rel).read_bytes() == path.read_bytes(), rel
    with pytest.raises(FileExistsError, match="installed already"):
        install(data, tmp_path / "boards")
    again = install(data, tmp_path / "boards", replace=True)
    assert again.replaced and sorted(p.name for p in (tmp_path / "boards").iterdir()) == ["mini"]
    with pytest.raises(FileExistsError, match="the one the line serves"):
        install(data, tmp_path / "boards", replace=True, serving=tmp_path / "boards" / "mini")
    free = shutil.disk_usage(tmp_path).free  # a floor the package would cross: refused before a byte is read
    with pytest.raises(NoRoom, match="the line keeps for its results"):
        install(data, tmp_path / "other", keep_free=free - len(data))
    assert list((tmp_path / "other").iterdir()) == []


@pytest.mark.parametrize("case", ["escape", "symlink", "unlisted", "short", "damaged", "not a tar"])
def test_a_hostile_or_damaged_package_is_refused_and_nothing_of_it_stays(demo, tmp_path: Path, case: str) -> None:
    _rules, data = packed(demo, tmp_path)
    boards = tmp_path / "boards"
    length = None
    if case == "escape":
        data, why = rewritten(data, [(tarfile.TarInfo("board/../../evil.txt"), b"x")]), "outside board/ and zoo/"
    elif case == "symlink":
        link = tarfile.TarInfo("board/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        data, why = rewritten(data, [(link, None)]), "not a file"
    elif case == "unlisted":
        data, why = rewritten(data, [(tarfile.TarInfo("zoo/extra.bin"), b"x")], listed=False), "not in its package"
    elif case == "short":
        length, why = len(data) + 1000, "ended after"
    elif case == "damaged":
        raw = bytearray(data)
        raw[len(raw) // 2] ^= 0xFF
        data, why = bytes(raw), "sha256 differs|damaged|not a board package|not of format"
    else:
        data, why = b"components: [a rule set, not a package]\n" * 20, "not a board package"
    with pytest.raises(ValueError, match=why):
        install_board(io.BytesIO(data), length or len(data), boards)
    assert list(boards.iterdir()) == [] and not (tmp_path / "evil.txt").exists()


def test_a_board_whose_zoo_was_changed_by_hand_or_names_a_file_outside_its_folder_is_not_packed(
        demo, tmp_path: Path) -> None:
    _root, zoo = demo
    copy = tmp_path / "zoo"
    shutil.copytree(zoo.root, copy, ignore=shutil.ignore_patterns("runtime", ".*"))
    manifest = json.loads((copy / MANIFEST).read_text())
    trained = next(e for e in manifest["experts"] if e.get("weights_sha256"))
    (copy / trained["file"]).write_bytes((copy / trained["file"]).read_bytes() + b"\0")  # weights edited by hand
    rules = tmp_path / "mini.yaml"
    rules.write_text(GOOD, encoding="utf-8")
    out = io.BytesIO()
    pack_board(rules, copy, out)
    with pytest.raises(ValueError, match="changed by hand"):
        install(out.getvalue(), tmp_path / "boards")
    assert list((tmp_path / "boards").iterdir()) == []
    elsewhere = tmp_path / "elsewhere.board.json"
    elsewhere.write_bytes(b"not beside the rule file")
    named = tmp_path / "sub" / "mini.yaml"
    named.parent.mkdir()
    named.write_text(GOOD + f"photo_registration: {{geometry: {elsewhere}}}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="outside its folder"):
        pack_board(named, zoo.root, io.BytesIO())
