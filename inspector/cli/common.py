"""What several commands share: where things are, the results database, the line's flags and its setup."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..logs import Say, say_for
from ..paths import data_dir, models_dir
from .exits import UsageError

log = logging.getLogger("inspector.cli")
say = say_for(log)


def backend_of(args: argparse.Namespace) -> str:
    """The `--backend` the command runs its experts on, `auto` resolved for this box (it imports torch to ask for a
    GPU: done here, once the command's options are checked, not when they are parsed)."""
    from ..experts.backends import resolve

    return resolve(args.backend)


def models_of(args: argparse.Namespace) -> Path:
    return models_dir(args.models)


def data_of(args: argparse.Namespace) -> Path:
    return data_dir(getattr(args, "data", None))


def db_url(args: argparse.Namespace) -> str:
    from ..results.credentials import database_url
    from ..results.store import sqlite_url

    return database_url(args.db, sqlite_url(data_of(args) / "results.sqlite"))


def default_rules() -> Path:
    from ..app.run import RULES_DIR

    return RULES_DIR / "board_a.yaml"


def load_zoo(path: str):  # noqa: ANN201 - a Zoo
    from ..experts.zoo import Zoo

    return Zoo.load(Path(path))


def zoo_of(args: argparse.Namespace, step: Say = say, rules=None):  # noqa: ANN001, ANN201 - rules: a RuleSet
    """--zoo, or the demo zoo, or (a rule set of the plant's own) its starter zoo: trained on first use."""
    from ..app.run import zoo_for

    return zoo_for(models_of(args), rules, step) if args.zoo is None else load_zoo(args.zoo)


def note_registration(rules, off: bool) -> None:  # noqa: ANN001 - a RuleSet
    """Say when boards will be cut at their nominal positions: right only on a fixture that places them exactly."""
    if off:
        say("note: registration is off (--no-register): boards are cut at their recipe's nominal positions")
    elif rules.photo is not None and rules.photo.using == "golden":
        say(f"note: rule set {rules.recipe} aligns each frame on its golden board's content (photo_registration)")
    elif rules.photo is not None:
        say(f"note: rule set {rules.recipe} registers each board photographed whole on its "
            f"{'picked points' if rules.photo.points else 'outline'} (photo_registration)"
            + (", then on its fiducials" if rules.fiducials is not None else ""))
    elif rules.fiducials is None:
        say(f"note: rule set {rules.recipe} declares no fiducials, so boards are cut at their nominal positions; "
            f"add fiducials (docs/pages/reference/rule-sets.md) unless a fixture places every board to the pixel")


def line_setup(args: argparse.Namespace, step: Say = say):  # noqa: ANN201 - shared by run, kiosk and the dashboard
    """(rules, zoo, store, source, service config, MQTT publisher or None, data dir) from the common flags;
    `step` hears the long parts (training the demo zoo on first use)."""
    from ..app.line import LineConfig
    from ..app.run import open_source
    from ..app.service import ServiceConfig
    from ..results.store import ResultStore, SchemaTooNew, StoreUnavailable
    from ..routing.rules import load_rules

    data = data_of(args)
    data.mkdir(parents=True, exist_ok=True)
    rules = load_rules(args.rules or default_rules())
    note_registration(rules, args.no_register)
    camera_settings = None
    if args.camera_settings:
        from ..yamlio import load_yaml

        camera_settings = load_yaml(Path(args.camera_settings).read_text(encoding="utf-8"), args.camera_settings) or {}
    source = open_source(args.source, rules, args.boards, args.seed, args.interval, args.defect_rate, args.camera,
                         int(args.max_pixels), args.glare, gate=args.gate, reconnects=args.reconnects,
                         serial_pattern=args.serial_pattern, camera_settings=camera_settings,
                         correction=args.correction)
    zoo = zoo_of(args, step, rules)
    store = ResultStore(db_url(args), connect=False)
    try:
        store.ready()
    except SchemaTooNew:
        raise
    except StoreUnavailable as exc:  # the line starts anyway and spools from its first board
        log.warning(f"warning: {exc}; results are spooled in {data} and stored when the database is back")
    line = LineConfig(line=args.line, station=args.station, policy=args.policy, device_mb=args.device_mb,
                      register=not args.no_register, backend=backend_of(args))
    overflow = args.overflow or ("drop-oldest" if args.source.startswith(("camera:", "genicam:")) else "wait")
    config = ServiceConfig(line, queue_capacity=args.queue, overflow=overflow, keep_crops=args.keep_crops,
                           min_free_mb=args.min_free_mb, db_retry_max_s=args.db_retry_max_s,
                           skip_late=not getattr(args, "inspect_late", False))
    publisher = None
    if args.mqtt:
        from ..results.credentials import MQTT_CREDENTIAL, MQTT_PASSWORD_ENV, credential
        from ..results.mqtt import MqttPublisher
        from ..results.outbox import Outbox

        outbox = Outbox(data / "mqtt-outbox.jsonl")  # what the broker has not acknowledged survives a restart
        if outbox.unacknowledged:
            say(f"mqtt: {outbox.unacknowledged} message(s) from before the last stop are sent first")
        publisher = MqttPublisher(args.mqtt, args.line, args.station, prefix=args.mqtt_prefix,
                                  username=args.mqtt_username, password=credential(MQTT_PASSWORD_ENV, MQTT_CREDENTIAL),
                                  tls=args.mqtt_tls, ca_file=args.mqtt_ca, outbox=outbox)
        publisher.start()
    return rules, zoo, store, source, config, publisher, data


def plc_of(args: argparse.Namespace, data: Path):  # noqa: ANN201 - a PlcLink or None
    """The line controller's link from the --opcua / --modbus flags (None when neither is given)."""
    from ..app.plc_link import PlcLink

    config = plc_config_of(args, data)
    return PlcLink(config, args.station) if config is not None else None


def plc_config_of(args: argparse.Namespace, data: Path):  # noqa: ANN201 - a PlcConfig or None
    if not (getattr(args, "opcua", None) or getattr(args, "modbus", None)):
        return None
    from ..app.plc_link import PlcConfig
    from ..plc.station import FailSafe
    from ..results.credentials import credential

    if args.deadline_ms <= 0:
        raise UsageError(f"--deadline-ms must be positive, got {args.deadline_ms:g}")
    config = PlcConfig(opcua=args.opcua, opcua_user=args.opcua_user,
                       opcua_password=credential("INSPECTOR_OPCUA_PASSWORD", "opcua-password"),
                       opcua_anonymous=args.opcua_anonymous, opcua_insecure=args.opcua_insecure, modbus=args.modbus,
                       opcua_trust_any=args.opcua_trust_any_client,
                       fail_safe=FailSafe(args.deadline_ms, not args.no_reject_on_error, args.reject_noread),
                       cert_dir=data / "opcua")
    from ..plc.opcua import OpcUaConfig

    if config.opcua:  # refused now, with what to do, rather than when the line starts
        OpcUaConfig(config.opcua, args.station, anonymous=config.opcua_anonymous, user=config.opcua_user,
                    password=config.opcua_password).check()
    return config


def plc_flags(p: argparse.ArgumentParser) -> None:
    """The line controller: OPC UA and Modbus TCP servers, the verdict's deadline and fail-safe rules."""
    p.add_argument("--opcua", metavar="URL", help="serve the station to the PLC/MES as an OPC UA server, e.g. "
                                                  "opc.tcp://0.0.0.0:4840/inspector (OPC 40100 Machine Vision's shape)")
    p.add_argument("--opcua-user", help="the OPC UA user; the password comes from $INSPECTOR_OPCUA_PASSWORD or the "
                                        "systemd credential opcua-password")
    p.add_argument("--opcua-anonymous", action="store_true", help="let OPC UA clients in without a user (off)")
    p.add_argument("--opcua-insecure", action="store_true",
                   help="also offer the unencrypted OPC UA endpoint (off: Basic256Sha256 only)")
    p.add_argument("--opcua-trust-any-client", action="store_true",
                   help="let any client certificate open a secure OPC UA session (off: only those in the trust list, "
                        "`inspector tls trust`; a refused one is kept to be trusted on purpose)")
    p.add_argument("--modbus", metavar="HOST:PORT", help="serve the station's register map over Modbus TCP "
                                                          "(the manual: A production line, the register map)")
    p.add_argument("--deadline-ms", type=float, default=2000.0,
                   help="a board with no verdict this long after its trigger (or frame) is rejected (default 2000)")
    p.add_argument("--no-reject-on-error", action="store_true",
                   help="an `error` verdict does not reject the board (default: it does)")
    p.add_argument("--reject-noread", action="store_true", help="a board whose code did not read is rejected")
    p.add_argument("--inspect-late", action="store_true",
                   help="inspect a board even when its deadline passed before the line could take it (default: it "
                        "is stored as rejected late, uninspected, and the line catches up)")


def hermes_flags(p: argparse.ArgumentParser) -> None:
    """The SMT line's board handover (IPC-HERMES-9852): the machine before the box and the machine after it."""
    p.add_argument("--hermes-upstream", metavar="HOST:PORT",
                   help="take boards from the machine before the box over Hermes (its downstream interface, by "
                        "convention port 50101 for lane 1): each board's BoardId and barcode become its identity")
    p.add_argument("--hermes-downstream", metavar="HOST:PORT",
                   help="hand boards on to the machine after the box over Hermes, listening here (e.g. "
                        "0.0.0.0:50101), with FailedBoard from the verdict")
    p.add_argument("--hermes-machine-id", default=None, help="this box's MachineId on its lanes (default: --station)")
    p.add_argument("--hermes-lane", type=int, default=1, help="the lane's LaneId (default 1)")
    p.add_argument("--hermes-buffer", type=int, default=2,
                   help="boards the box holds between taking and handing on (default 2)")
    p.add_argument("--hermes-inspect-failed", action="store_true",
                   help="inspect boards the machine before already marked failed (default: pass them on "
                        "uninspected, stored as such)")
    p.add_argument("--hermes-boards", type=int, default=0,
                   help="with --hermes-upstream: stop after this many boards (default 0: until stopped)")
    p.add_argument("--hermes-follow-product", action="store_true",
                   help="with --hermes-upstream: a board whose ProductTypeId names another recipe changes the line "
                        "over to it first (a rule set of the rule folder, or another board installed here, whole); "
                        "a board of a product no recipe serves is not inspected (an error, handed on failed)")


def hermes_of(args: argparse.Namespace):  # noqa: ANN201 - a HermesLink or None
    """The Hermes lanes from the --hermes-* flags (None when neither lane is given)."""
    if not (getattr(args, "hermes_upstream", None) or getattr(args, "hermes_downstream", None)):
        return None
    from ..app.hermes_link import HermesConfig, HermesLink

    if args.hermes_buffer < 1:
        raise UsageError(f"--hermes-buffer must be 1 or more, got {args.hermes_buffer}")
    if args.hermes_boards and not args.hermes_upstream:
        raise UsageError("--hermes-boards counts boards taken from upstream: give --hermes-upstream")
    follow = getattr(args, "hermes_follow_product", False)
    if follow and not args.hermes_upstream:
        raise UsageError("--hermes-follow-product follows the product of boards taken from upstream: give "
                         "--hermes-upstream")
    try:
        return HermesLink(HermesConfig(args.hermes_upstream, args.hermes_downstream,
                                       args.hermes_machine_id or args.station, args.hermes_lane, args.hermes_buffer,
                                       args.hermes_inspect_failed, args.hermes_boards, follow), say)
    except (ValueError, OSError) as exc:
        raise UsageError(f"Hermes: {exc}") from None


DEFAULT_LINE, DEFAULT_STATION = "line-1", "aoi-1"


def comma_list(text: str | None) -> list[str]:
    """A flag's comma-separated items (URLs, names), blanks dropped."""
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def photos_given(given: list[str]) -> list[Path]:
    """Photos as a command names them: files as they are, a folder as the photos in it by name (where `inspector
    camera photos` wrote them); UsageError for a folder with none."""
    from ..ingest.sources import IMAGE_SUFFIXES

    out: list[Path] = []
    for name in given:
        path = Path(name)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            if not found:
                raise UsageError(f"{path} is a folder with no photo in it ({', '.join(sorted(IMAGE_SUFFIXES))})")
            out += found
        else:
            out.append(path)
    return out


def photo_board_flags(p: argparse.ArgumentParser) -> None:
    """--board and --correction: which board of a photo, and the line camera's correction, where a command takes
    a board from a photo as the line registers it (board approve, board revise)."""
    p.add_argument("--board", type=int, default=0, help="with --photo: which board of the photo (#N as `board check` "
                                                        "numbers them; default 0)")
    p.add_argument("--correction", help="with --photo of the line's camera: its correction file (lens, light), "
                                        "applied first as the line applies it")


def station_flags(p: argparse.ArgumentParser) -> None:
    """--line and --station: which line and station this box is (its results are stored under them)."""
    p.add_argument("--line", default=DEFAULT_LINE, help=f"this box's line (default {DEFAULT_LINE})")
    p.add_argument("--station", default=DEFAULT_STATION, help=f"this box's station (default {DEFAULT_STATION})")


def scope_flags(p: argparse.ArgumentParser) -> None:
    """Which boards a read, export or prune is about: the box's own line and station, or the whole plant."""
    station_flags(p)
    p.add_argument("--all-lines", action="store_true",
                   help="every line and station in the database (a plant's shared database holds them all); "
                        "default: only --line/--station")


def scope_of_args(args: argparse.Namespace):  # noqa: ANN201 - a results.scope.Scope
    from ..results.scope import scope_of

    return scope_of(args.line, args.station, args.all_lines)


def database_flags(p: argparse.ArgumentParser, data: str = "data directory") -> None:
    """--db and --data, the same for every command that reads or writes results."""
    p.add_argument("--db", help="SQLAlchemy URL without a password (default: $INSPECTOR_DB_URL, the systemd credential "
                                "db-url, or SQLite in the data directory)")
    p.add_argument("--data", help=f"{data} (default: $INSPECTOR_DATA, systemd's state directory, or the user's data "
                                  f"directory; `inspector config paths` prints it)")

