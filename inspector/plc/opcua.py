"""The station as an OPC UA server (asyncua), shaped after OPC 40100 Machine Vision, with plain tags beside it.

Address space (namespace `http://opcfoundation.org/UA/MachineVision` for the companion-spec names, our own
`urn:inspector:station` for the tags):

    Objects/VisionSystem
        VisionStateMachine/CurrentState           Preoperational | Operational | Error | Halted
        VisionStateMachine/Halt() , Reset()       Halt: take no boards until Reset (from Halted or Error)
        VisionStateMachine/LastTransition         e.g. OperationalToHalted
        AutomaticModeStateMachine/CurrentState    Initialized | Ready | SingleExecution | ContinuousExecution
        RecipeManagement/SelectRecipe(ExternalId) -> (Status, Message)   switched at a board boundary
        RecipeManagement/SelectedRecipe
        ResultManagement/LastResult/{ResultId, ProductId, Verdict, Reject, Sequence, RejectBoards}
        ResultManagement/GetResultById(ResultId) -> (Status, ProductId, Verdict, Reject, Sequence, RejectBoards)
                                                  the last 50 results
        ResultManagement emits ResultReadyEventType (ResultId, ProductId, Verdict, Reject, Sequence, RejectBoards)
    Objects/<station>   BoardPresent (w), Trigger (w), LastSerial, LastVerdict, LastInspectionId, Reject,
                        RejectBoards (a panel's failed boards, bit k-1 for board k: plc/station.py), Sequence,
                        Acknowledge (w), Heartbeat, Health, Ready, Recipe (w), RecipeError

This is the companion specification's shape built with asyncua's own API, not its nodeset: the names, states
and methods a PLC or MES engineer looks for, not every optional node of OPC 40100. Security: Basic256Sha256
(Sign, SignAndEncrypt) with the server's certificate (made on first start under the data directory, or given)
and a user with a password; anonymous access and the unencrypted endpoint are off unless configured. A client's
certificate must be in the server's trust list (trust.py, `inspector tls trust`) unless `trust_any_client`.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from asyncua import Server, ua
from asyncua.common.callback import CallbackType
from asyncua.crypto.cert_gen import setup_self_signed_certificate
from asyncua.server.user_managers import User, UserManager, UserRole
from cryptography.x509.oid import ExtendedKeyUsageOID

from .serving import ServerThread
from .station import ERROR_HEALTH, Published, Station, Tags
from .trust import TrustList

MV_NAMESPACE = "http://opcfoundation.org/UA/MachineVision"
NAMESPACE = "urn:inspector:station"
APP_URI = "urn:inspector:aoi"
log = logging.getLogger(__name__)

# tag attribute -> (OPC UA browse name, variant type, writable by the PLC)
TAGS: dict[str, tuple[str, ua.VariantType, bool]] = {
    "board_present": ("BoardPresent", ua.VariantType.Boolean, True),
    "trigger": ("Trigger", ua.VariantType.Boolean, True),
    "last_serial": ("LastSerial", ua.VariantType.String, False),
    "last_verdict": ("LastVerdict", ua.VariantType.String, False),
    "last_inspection_id": ("LastInspectionId", ua.VariantType.String, False),
    "reject": ("Reject", ua.VariantType.Boolean, False),
    "reject_boards": ("RejectBoards", ua.VariantType.UInt32, False),
    "sequence": ("Sequence", ua.VariantType.UInt32, False),
    "acknowledge": ("Acknowledge", ua.VariantType.UInt32, True),
    "heartbeat": ("Heartbeat", ua.VariantType.UInt32, False),
    "health": ("Health", ua.VariantType.String, False),
    "ready": ("Ready", ua.VariantType.Boolean, False),
    "recipe": ("Recipe", ua.VariantType.String, True),
    "recipe_error": ("RecipeError", ua.VariantType.String, False),
}
RESULT_FIELDS = (("ResultId", ua.VariantType.String), ("ProductId", ua.VariantType.String),
                 ("Verdict", ua.VariantType.String), ("Reject", ua.VariantType.Boolean),
                 ("Sequence", ua.VariantType.UInt32),
                 ("RejectBoards", ua.VariantType.UInt32))  # new fields go last: a client reading by index keeps its


@dataclass(frozen=True)
class OpcUaConfig:
    endpoint: str = "opc.tcp://127.0.0.1:4840/inspector"
    station: str = "aoi-1"
    cert_dir: Path = Path("opcua")  # the server's certificate and key (made here on first start when missing)
    user: str | None = None
    password: str | None = None  # from the environment or a systemd credential, never the command line
    anonymous: bool = False  # let clients in without a user
    insecure: bool = False  # offer the unencrypted endpoint (NoSecurity) too
    trust_any_client: bool = False  # let any client certificate open a secure session (off: the trust list's only)

    def check(self) -> None:
        url = urlparse(self.endpoint)
        if url.scheme != "opc.tcp" or not url.port:
            raise ValueError(f"OPC UA endpoint {self.endpoint!r} must be opc.tcp://HOST:PORT[/PATH]")
        if not self.anonymous and not (self.user and self.password):
            raise ValueError("the OPC UA server needs a user and a password (--opcua-user and "
                             "$INSPECTOR_OPCUA_PASSWORD or the systemd credential opcua-password), or anonymous "
                             "access allowed on purpose (--opcua-anonymous)")


class _Users(UserManager):
    """One PLC user with a password; anonymous (no user name) only when allowed."""

    def __init__(self, config: OpcUaConfig) -> None:
        self.config = config

    def get_user(self, iserver: Any, username: str | None = None, password: str | None = None,
                 certificate: Any = None) -> User | None:
        if username is None:
            return User(role=UserRole.User) if self.config.anonymous else None
        ok = (self.config.user is not None and self.config.password is not None
              and hmac.compare_digest(username.encode(), self.config.user.encode())
              and hmac.compare_digest((password or "").encode(), self.config.password.encode()))
        return User(role=UserRole.User, name=username) if ok else None


class OpcUaServer(ServerThread):
    """The asyncua server on a thread and event loop of its own, mirroring a Station both ways."""

    what = "OPC UA server"

    def __init__(self, station: Station, config: OpcUaConfig) -> None:
        config.check()
        super().__init__(2, "opcua-server")  # triggers and recipe changes block briefly
        self.station, self.config = station, config
        self._stopped: asyncio.Event | None = None
        self._nodes: dict[str, Any] = {}  # tag attribute -> node
        self._writable: dict[Any, str] = {}  # node id -> tag attribute
        self._result_nodes: dict[str, Any] = {}
        self._states: dict[str, Any] = {}
        self._events: Any = None
        self._vision: str | None = None  # the vision state last shown (for LastTransition)
        self.server: Server | None = None

    def where(self) -> str:
        return self.config.endpoint

    async def _shutdown(self) -> None:
        if self._stopped is not None:
            self._stopped.set()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        self._mirroring = asyncio.Lock()
        server = Server(user_manager=_Users(self.config))
        await server.init()
        server.set_endpoint(self.config.endpoint)
        server.set_server_name(f"inspector {self.config.station}")
        await server.set_application_uri(APP_URI)
        await self._security(server)
        await self._build(server)
        server.subscribe_server_callback(CallbackType.PostWrite, self._post_write)
        async with server:
            self.server = server
            self.station.listen(self._station_changed)
            self._ready.set()
            await self._stopped.wait()

    async def _security(self, server: Server) -> None:
        policies = [ua.SecurityPolicyType.Basic256Sha256_SignAndEncrypt, ua.SecurityPolicyType.Basic256Sha256_Sign]
        if self.config.insecure:
            policies.append(ua.SecurityPolicyType.NoSecurity)
        server.set_security_policy(policies)
        tokens = [ua.UserNameIdentityToken] + ([ua.AnonymousIdentityToken] if self.config.anonymous else [])
        server.set_identity_tokens(tokens)
        if not self.config.trust_any_client:
            server.set_certificate_validator(TrustList(self.config.cert_dir))
        cert, key = await server_certificate(self.config.cert_dir)
        await server.load_certificate(str(cert))
        await server.load_private_key(str(key))

    # -- the address space -----------------------------------------------------------------------------------
    async def _build(self, server: Server) -> None:
        mv = await server.register_namespace(MV_NAMESPACE)
        ns = await server.register_namespace(NAMESPACE)
        objects = server.nodes.objects
        vision = await objects.add_object(mv, "VisionSystem")
        for machine, state in (("VisionStateMachine", "Preoperational"), ("AutomaticModeStateMachine", "Initialized")):
            obj = await vision.add_object(mv, machine)
            self._states[machine] = await obj.add_variable(mv, "CurrentState", ua.LocalizedText(state))
            if machine == "VisionStateMachine":
                self._states["LastTransition"] = await obj.add_variable(mv, "LastTransition", ua.LocalizedText(""))
                for name, call in (("Halt", self.station.halt), ("Reset", self.station.reset)):
                    await obj.add_method(mv, name, self._transition(call), [], [])
        recipes = await vision.add_object(mv, "RecipeManagement")
        self._result_nodes["SelectedRecipe"] = await recipes.add_variable(mv, "SelectedRecipe", "")
        await recipes.add_method(mv, "SelectRecipe", self._select_recipe_method, [ua.VariantType.String],
                                 [ua.VariantType.Int32, ua.VariantType.String])
        results = await vision.add_object(mv, "ResultManagement")
        await results.add_method(mv, "GetResultById", self._result_by_id, [ua.VariantType.String],
                                 [ua.VariantType.Int32] + [vtype for _name, vtype in RESULT_FIELDS[1:]])
        last = await results.add_object(mv, "LastResult")
        for name, vtype in RESULT_FIELDS:
            self._result_nodes[name] = await last.add_variable(mv, name, ua.Variant(_empty(vtype), vtype))
        etype = await server.create_custom_event_type(
            mv, "ResultReadyEventType", ua.ObjectIds.BaseEventType,
            [(name, vtype) for name, vtype in RESULT_FIELDS])
        self._events = await server.get_event_generator(etype, results)
        station = await objects.add_object(ns, self.config.station)
        for attr, (name, vtype, writable) in TAGS.items():
            node = await station.add_variable(ns, name, ua.Variant(_empty(vtype), vtype))
            if writable:
                await node.set_writable()
                self._writable[node.nodeid] = attr
            self._nodes[attr] = node

    # -- station -> server -----------------------------------------------------------------------------------
    def _station_changed(self, tags: Tags, published: Published | None) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._mirror(tags, published), loop)

    async def _mirror(self, tags: Tags, published: Published | None) -> None:
        async with self._mirroring:  # in the order the station changed: a newer snapshot never lands first
            await self._mirror_now(tags, published)

    async def _mirror_now(self, tags: Tags, published: Published | None) -> None:
        for attr, (_name, vtype, _w) in TAGS.items():
            await self._nodes[attr].write_value(ua.Variant(getattr(tags, attr), vtype))
        await self._result_nodes["SelectedRecipe"].write_value(tags.recipe)
        state = _vision_state(tags)
        if state != self._vision:
            if self._vision is not None:
                await self._states["LastTransition"].write_value(ua.LocalizedText(f"{self._vision}To{state}"))
            self._vision = state
        await self._states["VisionStateMachine"].write_value(ua.LocalizedText(state))
        await self._states["AutomaticModeStateMachine"].write_value(
            ua.LocalizedText("Ready" if tags.ready else "Initialized"))
        if published is not None:
            values = (published.inspection_id, published.serial, published.verdict, published.reject,
                      published.sequence, published.reject_boards)
            for (name, vtype), value in zip(RESULT_FIELDS, values):
                await self._result_nodes[name].write_value(ua.Variant(value, vtype))
                setattr(self._events.event, name, ua.Variant(value, vtype))
            self._events.event.Severity = 500 if published.reject else 100
            await self._events.trigger(message=f"result {published.sequence}: {published.verdict}")

    # -- the PLC's writes ------------------------------------------------------------------------------------
    async def _post_write(self, event: Any, _dispatcher: Any) -> None:
        if not event.is_external:
            return  # our own mirroring writes go through the server's internal session too
        params, results = event.request_params, event.response_params or []
        for write, status in zip(params.NodesToWrite, results):
            attr = self._writable.get(write.NodeId)
            if attr is None or not status.is_good() or write.AttributeId != ua.AttributeIds.Value:
                continue
            value = write.Value.Value.Value if write.Value and write.Value.Value else None
            asyncio.get_running_loop().run_in_executor(self._pool, self._apply, attr, value)

    def _apply(self, attr: str, value: Any) -> None:
        try:
            if attr == "trigger" and value:
                self.station.trigger()
            elif attr == "board_present":
                self.station.board_present(bool(value))
            elif attr == "acknowledge" and value is not None:
                self.station.acknowledge(int(value))
            elif attr == "recipe" and value:
                self.station.select_recipe(str(value))  # its change notice writes back the recipe in force
        except Exception:  # noqa: BLE001 - a PLC write must never take the server down
            log.exception("applying the PLC's write of %s = %r failed", attr, value)

    def _transition(self, call: Any) -> Any:
        """A state machine method: the station's transition, BadInvalidState with its reason when it does not
        apply."""
        async def method(_parent: Any) -> list[ua.Variant] | ua.StatusCode:
            reason = await asyncio.get_running_loop().run_in_executor(self._pool, call)
            if reason:
                log.info("%s refused: %s", getattr(call, "__name__", "transition"), reason)
                return ua.StatusCode(ua.StatusCodes.BadInvalidState)
            return []
        return method

    async def _result_by_id(self, _parent: Any, result_id: ua.Variant) -> list[ua.Variant]:
        """One of the station's recent results (the last 50 published) by its id; Status -1 when not among them."""
        wanted = result_id.Value if isinstance(result_id, ua.Variant) else result_id
        found = next((p for p in reversed(self.station.history) if p.inspection_id == wanted), None)
        values = ((found.serial, found.verdict, found.reject, found.sequence, found.reject_boards) if found
                  else ("", "", False, 0, 0))
        return [ua.Variant(0 if found else -1, ua.VariantType.Int32)] + [
            ua.Variant(value, vtype) for (_name, vtype), value in zip(RESULT_FIELDS[1:], values)]

    async def _select_recipe_method(self, _parent: Any, external_id: ua.Variant) -> list[ua.Variant]:
        name = external_id.Value if isinstance(external_id, ua.Variant) else external_id
        reason = await asyncio.get_running_loop().run_in_executor(self._pool, self.station.select_recipe, str(name))
        return [ua.Variant(0 if reason is None else -1, ua.VariantType.Int32),
                ua.Variant(reason or f"recipe {name} selected; it applies from the next board", ua.VariantType.String)]


def _empty(vtype: ua.VariantType) -> Any:
    return {ua.VariantType.Boolean: False, ua.VariantType.String: "", ua.VariantType.UInt32: 0}.get(vtype, 0)


def _vision_state(tags: Tags) -> str:
    if tags.halted:
        return "Halted"
    if tags.health in ERROR_HEALTH:
        return "Error"
    if tags.health in ("stopping", "stopped"):
        return "Halted"
    return "Operational" if tags.ready else "Preoperational"


async def server_certificate(folder: Path) -> tuple[Path, Path]:
    """(certificate, private key) of the server under `folder`: a self-signed pair made on first use (mode 0600
    for the key), or the plant's own pair put there under the same names."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "server-cert.der", folder / "server-key.pem"
    if not (cert.is_file() and key.is_file()):
        host = socket.gethostname()
        await setup_self_signed_certificate(key, cert, APP_URI, host, [ExtendedKeyUsageOID.SERVER_AUTH],
                                            {"commonName": f"inspector {host}", "organizationName": "inspector"})
        key.chmod(0o600)
    return cert, key
