"""Shared fixtures: a tiny real zoo (ResNet10 classifiers, a YOLOv8n detector) built once per session."""
from __future__ import annotations

import dataclasses
import locale
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("PYLON_CAMEMU", "2")  # pypylon's camera emulator: two GenICam cameras (read when pylon starts)
# Two workers (and the processes they start) share the box's cores; torch's OpenMP threads spinning after each parallel
# region took them from the other worker: test_labelled + test_gui on 2 cores, -n 2, ran 266 s spinning, 123 s passive.
# Set before torch loads (libgomp reads it once); what the product does on a line box is not changed by it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from inspector.coserve.evaluation.preparation import prepare  # noqa: E402
from inspector.coserve.online.workload import Workload, parse_workload  # noqa: E402
from inspector.experts.zoo import Zoo  # noqa: E402
from inspector.results.store import ResultStore, sqlite_url  # noqa: E402
from inspector.routing.rules import parse_rules  # noqa: E402
from inspector.training.demo_zoo import RECIPE, build_demo_zoo  # noqa: E402

from .services import Postgres  # noqa: E402
from .test_routing_rules import GOOD  # noqa: E402

NEEDS_GIB = 3  # the suite held at most 1.9 GiB under the temporary folder at once (both workers, sampled every 15 s),
# and a margin for what sampling missed

TINY = """\
name: tiny
seed: 3
classifier: {arch: resnet10, input_size: 32, classes: 2}
detectors:
  - {name: det-a, arch: yolov8n.yaml, input_size: 32, classes: 2, threshold: 0.0}
components:
  - {name: R, count: 4, detector: det-a, pass_rate: 0.8}
  - {name: C, count: 3, detector: det-a, pass_rate: 0.8}
  - {name: U, count: 1, pass_rate: 0.7}
  - {name: L, count: 1, detector: det-a, pass_rate: 0.8}
  - {name: Q, count: 1, pass_rate: 0.5}
  - {name: D, count: 2, detector: det-a, pass_rate: 0.8}
requests: 48
arrival_interval_ms: 0
memory: {expert_pool_mb: 45}
executors: {cpu: 2}
"""


def tiny_workload(**changes: object) -> Workload:
    import dataclasses

    return dataclasses.replace(parse_workload(TINY, "tiny.yaml"), **changes)


@pytest.fixture(scope="session")
def llm_corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twenty real standard-library modules: a corpus the tokenizer and the split can work on."""
    import sysconfig

    root = tmp_path_factory.mktemp("corpus")
    src = Path(sysconfig.get_paths()["stdlib"])
    for name in ["abc", "bisect", "colorsys", "copy", "csv", "fnmatch", "functools", "glob", "heapq", "keyword",
                 "linecache", "numbers", "operator", "queue", "random", "shlex", "string", "textwrap", "token",
                 "types"]:
        shutil.copy(src / f"{name}.py", root / f"{name}.py")
    return root


BUILT = ".built"  # written last into a shared build: it is whole


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """A folder `build` fills, built once for the whole run: the two xdist workers would otherwise each train the
    same model (a minute or two of the suite's time each). Whoever comes second waits for the first to finish;
    each worker then works on its own copy, so what a test writes beside the model stays on its worker."""
    import fcntl

    base = factory.getbasetemp()
    shared_root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = shared_root / f"built-{name}"
    with open(shared_root / f"built-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / BUILT).is_file():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            build(shared)
            (shared / BUILT).touch()
    own = factory.mktemp(name)
    shutil.copytree(shared, own, dirs_exist_ok=True, ignore=shutil.ignore_patterns(BUILT))
    return own


@pytest.fixture(scope="session")
def tiny_llm(llm_corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny demo MoE language model (Mixtral, 2 layers x 4 experts) trained here, with its tokenizer."""
    from inspector.moe.demo.build import build_demo
    from inspector.moe.demo.corpus import stdlib_corpus

    from .moe_models import TINY_DEMO

    def build(root: Path):  # noqa: ANN202 - the build record
        return build_demo(TINY_DEMO, root=root, corpus=stdlib_corpus(10, llm_corpus_dir), log=lambda line: None)

    return build(built_once(tmp_path_factory, "llm", build)).path  # the copy: found built, not trained again


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def box_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This worker's models folder for tests that run a line only to get at something else: each architecture's
    profile measured once, by the first test that needs it, as one box has one (with a fresh folder each, one full
    run measured 27 profiles, 546 s of test time). The profiler's own tests keep `models_dir`, whose profile holds
    the tiny zoo's architectures alone."""
    return tmp_path_factory.mktemp("box-models")


@pytest.fixture(scope="session")
def tiny(models_dir: Path):
    """(workload, zoo, profiles) for the tiny workload, with real weights and a real CPU profile."""
    workload = tiny_workload()
    zoo, profiles = prepare(workload, models_dir)
    return workload, zoo, profiles


# -- a tiny trained demo line (one rule set, two classifiers, one shared detector) ------------------
DEMO_RULES = parse_rules(GOOD, "mini.yaml")
TINY_RECIPE = {**RECIPE, "per_type": 300, "classifier_cap": 300, "classifier_epochs": 12, "detector_cap": 96,
               "detector_epochs": 2, "val_per_type": 20,
               "retrain_below": None}  # tiny experts fall short of any floor; training again has its own test


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory):
    """(root, zoo): the tiny demo zoo, trained once a run (built_once), this worker's copy under root/models/demo."""
    def build(models: Path) -> Zoo:
        return build_demo_zoo(models / "demo", [DEMO_RULES], recipe=TINY_RECIPE)

    root = tmp_path_factory.mktemp("line")
    models = built_once(tmp_path_factory, "models", build).rename(root / "models")
    return root, build(models)  # the copy: found up to date, not trained again


# -- results databases: a SQLite file and a real PostgreSQL server -------------------------------
@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster for the whole session."""
    server = Postgres()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path: Path):
    """A migrated results store on a SQLite file and on the session's PostgreSQL server."""
    if request.param == "sqlite":
        s = ResultStore(sqlite_url(tmp_path / "results.sqlite"))
    else:
        server = request.getfixturevalue("postgres")
        s = ResultStore(server.create_db("r" + uuid.uuid4().hex[:10]))
    yield s
    s.close()


_LOCALE = locale.setlocale(locale.LC_ALL)


@pytest.fixture(scope="session", autouse=True)
def _a_data_folder_of_the_runs_own(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default data folder (platformdirs: $XDG_DATA_HOME/inspector) is this run's, not the user's: a command
    a test starts without `--models` or `--data` would otherwise write the developer's ~/.local/share (one full run
    left a profile of a taught expert there) and leave later runs a state the tests did not make. Returns the
    default models folder as the product resolves it (inspector.paths)."""
    from inspector.paths import models_dir as default_models

    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    return default_models()


@pytest.fixture(autouse=True)
def _no_test_measures_into_the_default_models_folder(_a_data_folder_of_the_runs_own: Path) -> Iterator[None]:
    """A line a test runs profiles into a models folder of the test's (`box_models`, `models_dir`, tmp_path): one
    that measured into the default folder ran on whatever an earlier test on its worker had left there."""
    profiles = _a_data_folder_of_the_runs_own / "profiles"
    before = set(profiles.glob("*.json"))
    yield
    made = sorted(p.name for p in set(profiles.glob("*.json")) - before)
    assert not made, f"this test profiled into the default models folder ({', '.join(made)}): pass --models"


@pytest.fixture(autouse=True)
def _the_process_locale_stays() -> Iterator[None]:
    """A test that leaves the process in another locale must not change the tests after it, whichever worker runs
    them (once, on a worker, LC_CTYPE was left at "C" and Python's default text encoding turned ASCII; which test
    did it was not found)."""
    yield
    if locale.setlocale(locale.LC_ALL) != _LOCALE:
        locale.setlocale(locale.LC_ALL, _LOCALE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest test files first (tests/seconds.py says why); a file's tests keep their order (a stable sort)."""
    from .seconds import cost, read_table

    seconds = cost(read_table())
    items.sort(key=lambda item: seconds(item.nodeid), reverse=True)


def pytest_report_header(config: pytest.Config) -> str:
    """The free space where the tests write: a full disk shows as every later test failing to make its folder."""
    import tempfile

    where = tempfile.gettempdir()
    free = shutil.disk_usage(where).free / 2**30
    line = f"temporary files: {where}, {free:.1f} GiB free"
    if free < NEEDS_GIB:
        line += (f"; the suite needs about {NEEDS_GIB} GiB there at once, so tests may fail for want of room (free "
                 "some, or point TMPDIR at a larger disk)")
    return line


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist a worker's fault rows go to the controller, which prints the table."""
    from .faults import FAULT_TABLE

    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["fault_table"] = [dataclasses.asdict(r) for r in FAULT_TABLE]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # noqa: ANN001 - xdist's worker node and its error
    """The controller's side: one worker's fault rows, as it finished."""
    from .faults import FAULT_TABLE, FaultRow

    FAULT_TABLE.extend(FaultRow(**row) for row in getattr(node, "workeroutput", {}).get("fault_table", []))


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 - pytest's reporter
    """The fault table of the fault-injection suite (tests/test_faults.py), when it ran."""
    from .faults import FAULT_TABLE, format_table, save_table

    if FAULT_TABLE:
        terminalreporter.section("fault table")
        terminalreporter.write_line(format_table(FAULT_TABLE))
        save_table()


@pytest.fixture
def collect_in_the_gui_thread(qapp):  # noqa: ANN001, ANN201 - pytest-qt's QApplication
    """As the dashboard runs (ui/app.py): Python's cycle collector only in the GUI thread, so a worker or line thread
    never frees a Qt object (a segfault when one does: CI saw it in an OPC UA server thread, and in the new-board
    tab's import worker in a file that lacked this); automatic collection again after each test. Every GUI test
    file uses it: `pytestmark = pytest.mark.usefixtures("collect_in_the_gui_thread")`."""
    from ui.garbage import GuiThreadCollector

    collector = GuiThreadCollector(qapp).start()
    yield collector
    collector.stop()
