"""`inspector llm serve` as a real process on a tiny trained demo model, spoken to by the real `openai` client
and by plain HTTP: exact greedy output, streaming, chat, sampling, stops, concurrency, errors, the token."""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest
import torch
from transformers import AutoModelForCausalLM

from inspector.cli import main
from inspector.moe.session import ChatSession
from inspector.moe.text import encode_prompt, load_tokenizer

from .services import free_port

PROMPTS = ["def add(a, b):\n", "import os\nimport sys\n", "class Queue:\n    def", "for i in range("]


def token_file(path: Path) -> str:
    token = secrets.token_hex(16)
    path.write_text(token)
    path.chmod(0o600)
    return token


class Server:
    def __init__(self, model: Path, root: Path, *extra: str, policy: str = "daop") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token_file = root / f"llm-token-{self.port}"
        self.token = token_file(self.token_file)
        self.log = root / f"serve-{self.port}.log"
        cmd = [sys.executable, "-m", "inspector.cli", "--models", str(root / "models"), "llm", "serve", "--model",
               str(model), "--policy", policy, "--cache-ratio", "0.5", "--listen", f"127.0.0.1:{self.port}",
               "--token-file", str(self.token_file), "--threads", "1", *extra]
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"the server did not come up:\n{self.log.read_text()}")

    def post(self, path: str, body: bytes | dict, token: str | None = "") -> tuple[int, dict]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        if token is not None:
            req.add_header("Authorization", f"Bearer {token or self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self) -> int:
        os.killpg(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture(scope="module")
def server(tiny_llm: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("serve")
    s = Server(tiny_llm, root)
    yield s
    assert s.stop() == 0, s.log.read_text()


@pytest.fixture(scope="module")
def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=server.token, max_retries=0, timeout=60)


def transformers_greedy(model: Path, ids: list[int], n: int) -> list[int]:
    """Plain transformers, greedy, stopping at the model's end-of-text as the server does."""
    ref = AutoModelForCausalLM.from_pretrained(model).eval()
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = ref.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n,
                           pad_token_id=ref.config.eos_token_id)
    return out[0, len(ids):].tolist()


def test_greedy_completion_equals_transformers_and_llm_chat(server: Server, client: openai.OpenAI,
                                                            tiny_llm: Path, tmp_path: Path) -> None:
    name = client.models.list().data[0].id
    assert name == tiny_llm.name
    tok = load_tokenizer(tiny_llm)
    got = client.completions.create(model=name, prompt=PROMPTS[0], max_tokens=12, temperature=0)
    want_ids = transformers_greedy(tiny_llm, encode_prompt(tok, PROMPTS[0]), 12)
    eos = tok.eos_token_id
    if eos in want_ids:
        want_ids = want_ids[:want_ids.index(eos) + 1]
    # bytes that never completed a character at the end are not sent (as `inspector llm chat` prints them)
    assert got.choices[0].text == tok.decode(want_ids, skip_special_tokens=True).rstrip("\ufffd")
    assert got.usage.prompt_tokens == len(encode_prompt(tok, PROMPTS[0]))
    assert got.usage.completion_tokens == len(want_ids)
    session = ChatSession(tiny_llm, "daop", 0.5, tmp_path / "cal")
    try:
        chat_text = "".join(piece for piece, _ in session.complete(PROMPTS[0], 12))
    finally:
        session.close()
    assert got.choices[0].text == chat_text
    ext = got.model_extra["inspector"]
    assert ext["policy"] == "daop" and 0.0 <= ext["hit_rate"] <= 1.0 and ext["residency"]


def test_streamed_equals_unstreamed_for_completions_and_chat(client: openai.OpenAI, tiny_llm: Path) -> None:
    name = tiny_llm.name
    whole = client.completions.create(model=name, prompt=PROMPTS[1], max_tokens=10, temperature=0)
    pieces = [c.choices[0].text for c in client.completions.create(model=name, prompt=PROMPTS[1], max_tokens=10,
                                                                   temperature=0, stream=True)]
    assert "".join(pieces) == whole.choices[0].text

    messages = [{"role": "system", "content": "You write Python."}, {"role": "user", "content": "a loop"}]
    chat = client.chat.completions.create(model=name, messages=messages, max_tokens=10, temperature=0)
    assert chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens >= 1
    text, usage, finish = [], None, None
    for chunk in client.chat.completions.create(model=name, messages=messages, max_tokens=10, temperature=0,
                                                stream=True, stream_options={"include_usage": True}):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(text) == chat.choices[0].message.content
    assert usage is not None and usage.total_tokens == chat.usage.total_tokens
    assert finish in ("stop", "length")


def test_sampling_is_seeded_and_stop_strings_end_the_text(client: openai.OpenAI, tiny_llm: Path) -> None:
    name = tiny_llm.name
    a, b = (client.completions.create(model=name, prompt=PROMPTS[2], max_tokens=16, temperature=1.2, top_p=0.9,
                                      seed=7, extra_body={"top_k": 20}) for _ in range(2))
    assert a.choices[0].text == b.choices[0].text
    greedy = client.completions.create(model=name, prompt=PROMPTS[3], max_tokens=16, temperature=0).choices[0].text
    if len(greedy) > 2:
        stop = greedy[1:3]
        cut = client.completions.create(model=name, prompt=PROMPTS[3], max_tokens=16, temperature=0, stop=[stop])
        assert cut.choices[0].text == greedy[:greedy.index(stop)]
        assert cut.choices[0].finish_reason == "stop"


def test_concurrent_requests_batch_and_give_each_its_own_answer(client: openai.OpenAI, tiny_llm: Path,
                                                                server: Server) -> None:
    name = tiny_llm.name
    alone = [client.completions.create(model=name, prompt=p, max_tokens=10, temperature=0).choices[0].text
             for p in PROMPTS]
    together: list[str | None] = [None] * len(PROMPTS)

    def ask(i: int) -> None:
        together[i] = client.completions.create(model=name, prompt=PROMPTS[i], max_tokens=10,
                                                temperature=0).choices[0].text

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone
    with urllib.request.urlopen(server.url + "/metrics", timeout=5) as r:
        metrics = r.read().decode()
    assert "inspector_llm_requests_total" in metrics and "inspector_llm_expert_hits_total" in metrics
    with urllib.request.urlopen(server.url + "/health", timeout=5) as r:
        threads = json.loads(r.read())["threads"]
    assert threads["given"] == 1 and threads["remeasure_s"] == 600 and threads["remeasuring"] == []


def test_errors_are_clear_4xx_and_the_server_stays_up(server: Server, tiny_llm: Path) -> None:
    name = tiny_llm.name
    code, body = server.post("/v1/completions", b"{not json")
    assert code == 400 and "JSON" in body["error"]["message"]
    code, body = server.post("/v1/completions", {"model": "gpt-4", "prompt": "x"})
    assert code == 404 and body["error"]["code"] == "model_not_found" and name in body["error"]["message"]
    code, body = server.post("/v1/completions", {"model": name, "prompt": "x " * 400, "max_tokens": 8})
    assert code == 400 and body["error"]["code"] == "context_length_exceeded"
    code, body = server.post("/v1/completions", {"model": name, "prompt": "x", "temperature": 3})
    assert code == 400 and "temperature" in body["error"]["message"]
    code, body = server.post("/v1/chat/completions", {"model": name, "messages": [{"role": "robot", "content": "x"}]})
    assert code == 400 and "role" in body["error"]["message"]
    code, body = server.post("/v1/completions", {"model": name, "prompt": "x"}, token=None)
    assert code == 401 and body["error"]["type"] == "authentication_error"
    code, body = server.post("/v1/completions", {"model": name, "prompt": "x"}, token="wrong" * 4)
    assert code == 401
    code, body = server.post("/v1/completions", {"model": name, "prompt": "def f():", "max_tokens": 3,
                                                 "temperature": 0})
    assert code == 200 and body["usage"]["completion_tokens"] >= 1
    with urllib.request.urlopen(server.url + "/openapi.json", timeout=30) as r:  # the schema, open, as documented
        schema = json.loads(r.read())
    assert {"/v1/completions", "/v1/chat/completions", "/health"} <= set(schema["paths"])
    assert set(schema["paths"]["/v1/completions"]["post"]["responses"]) == {"200", "400"}  # 400 is what it answers


def test_listening_beyond_the_box_needs_tls_and_a_gate(tiny_llm: Path, tmp_path: Path, capsys) -> None:
    from inspector.access.tls import make_self_signed

    rc = main(["--models", str(tmp_path), "llm", "serve", "--model", str(tiny_llm), "--listen", "0.0.0.0:1"])
    assert rc != 0 and "plain HTTP is served on loopback only" in capsys.readouterr().err
    cert, key, _ = make_self_signed(tmp_path / "tls", ["box"])
    rc = main(["--models", str(tmp_path), "llm", "serve", "--model", str(tiny_llm), "--listen", "0.0.0.0:1",
               "--tls-cert", str(cert), "--tls-key", str(key)])
    err = capsys.readouterr().err
    assert rc != 0 and "give --db" in err and "--token-file" in err
    rc = main(["--models", str(tmp_path), "llm", "serve", "--model", str(tiny_llm), "--remeasure-threads", "-5"])
    assert rc != 0 and "--remeasure-threads wants seconds" in capsys.readouterr().err


def test_beside_line_prints_the_line_and_the_model_alone_and_together(demo, tiny_llm: Path, tmp_path: Path,
                                                                    capsys) -> None:
    from .test_routing_rules import GOOD

    root, zoo = demo
    rules = tmp_path / "mini.yaml"
    rules.write_text(GOOD, encoding="utf-8")
    prompts = tmp_path / "prompts.txt"  # short: the tiny model's context is 64 tokens
    prompts.write_text("def f(x):\n---\nimport os\n")
    rc = main(["--models", str(root / "models"), "llm", "beside-line", "--seconds", "1.5", "--rules", str(rules),
               "--zoo", str(zoo.root), "--device-mb", "40", "--model", str(tiny_llm), "--cache-ratio", "0.5",
               "--prompts", str(prompts), "--max-tokens", "8"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rows = {line.split("  ")[0]: line.split() for line in out.splitlines() if line.startswith(("line (", "model ("))}
    assert set(rows) == {"line (parts/s)", "model (tokens/s)"}
    for cells in rows.values():
        alone, beside = float(cells[2]), float(cells[3])
        assert alone > 0 and beside > 0
    assert "OMP_WAIT_POLICY=PASSIVE" in out  # the model's process waits as the installed service's does


def test_a_model_yielding_the_cpu_with_spinning_threads_is_told_to_wait_passively() -> None:
    """Only a model below the line's priority with more than one thread (or a count left to the server) and
    OpenMP's default spinning is told; the note names the variable to set."""
    from inspector.moe.service.server import spinning_beside

    assert "OMP_WAIT_POLICY=PASSIVE" in (spinning_beside(10, 2, None) or "")
    assert spinning_beside(10, None, "active") is not None  # the server may choose several threads itself
    assert spinning_beside(10, 1, None) is None  # one thread: no workers to spin
    assert spinning_beside(0, 4, None) is None  # not yielding: spinning is its own business
    assert spinning_beside(10, 4, "passive") is None


def test_a_model_yielding_by_niceness_alone_is_told_it_does_not_reach_a_line_in_another_session() -> None:
    """Niceness orders processes within one autogroup (a session) or one cgroup: a model started by hand at nice 10
    is told so where the kernel groups sessions; the installed service (systemd sets INVOCATION_ID) yields by its
    CPU weight and is not."""
    from inspector.moe.service.server import niceness_alone

    assert "CPUWeight=10" in (niceness_alone(10, True, False) or "")
    assert niceness_alone(10, True, True) is None  # a service: its unit's CPU weight does it
    assert niceness_alone(10, False, False) is None  # no autogroups: niceness reaches every process
    assert niceness_alone(0, True, False) is None


def test_the_kiosk_lends_the_model_its_memory_on_a_lease(demo, tiny_llm: Path, tmp_path: Path, capsys) -> None:
    """The kiosk owns the box's ledger (--llm-mb); the model's process borrows its bytes, a second model is
    refused with what is free, and a model killed with -9 loses its grant when the lease runs out."""
    from inspector.endpoint import read_token
    from inspector.moe.checkpoint import MoECheckpoint
    from inspector.moe.engine import pool_plan
    from inspector.moe.loans import from_kiosk
    from inspector.moe.policies import get_policy
    from inspector.moe.session import ChatSession

    from .faults import KioskProcess, http
    from .test_routing_rules import GOOD

    root, zoo = demo
    ckpt = MoECheckpoint.open(tiny_llm)
    need = pool_plan(ckpt, get_policy("lru"), 0.5)[1] + ckpt.non_expert_bytes
    rules, inbox, data = tmp_path / "mini.yaml", tmp_path / "inbox", tmp_path / "data"
    rules.write_text(GOOD, encoding="utf-8")
    inbox.mkdir()
    data.mkdir()
    kiosk_token = tmp_path / "kiosk-token"
    token_file(kiosk_token)
    kiosk = KioskProcess(root, zoo.root, rules, inbox, data, "--token-file", str(kiosk_token), "--llm-mb",
                         f"{1.5 * need / 2**20:.6f}", "--grant-lease-s", "2")
    kiosk.start()
    try:
        server = Server(tiny_llm, tmp_path, "--ledger", kiosk.url, "--ledger-token-file", str(kiosk_token),
                        policy="lru")
        ledger = kiosk.status()["ledger"]
        assert [g["bytes"] for g in ledger["grants"]] == [need] and ledger["lent_bytes"] == need
        assert "inspector llm serve" in ledger["grants"][0]["holder"]
        code, body = server.post("/v1/completions", {"model": tiny_llm.name, "prompt": "def f():", "max_tokens": 3})
        assert code == 200, body
        rc = main(["--models", str(tmp_path), "llm", "serve", "--model", str(tiny_llm), "--policy", "lru",
                   "--cache-ratio", "0.5", "--ledger", kiosk.url, "--ledger-token-file", str(kiosk_token)])
        assert rc == 1 and "MiB set aside are free" in capsys.readouterr().err  # a second model does not fit
        code, body = http(kiosk.url + "/ledger/grant", json.dumps({"holder": "x", "bytes": 1}).encode())  # no token
        assert code == 401
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(10)
        deadline = time.monotonic() + 15
        while kiosk.status()["ledger"]["grants"] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert kiosk.status()["ledger"]["grants"] == []  # the lease ran out: the memory is the kiosk's again
        # the attached dashboard's in-process model borrows the same way, and gives the bytes back when closed
        session = ChatSession(tiny_llm, "lru", 0.5, tmp_path / "cal",
                              borrow=from_kiosk(kiosk.url, read_token(str(kiosk_token))))
        ledger = kiosk.status()["ledger"]
        assert [g["bytes"] for g in ledger["grants"]] == [need] and "dashboard" in ledger["grants"][0]["holder"]
        assert "lent by the kiosk" in session.describe()
        session.close()
        assert kiosk.status()["ledger"]["grants"] == []
        assert kiosk.stop() == 0, kiosk.tail()
    finally:
        kiosk.close()
