"""Real Hermes gateways with the Herald plugin, and what each test gets of them.

Starting Hermes takes seconds, so most tests share one gateway (the ``rig`` fixture), one
herald child and one stub model. Sharing a process is all they share: every test gets
gadgets and phones no other test has used (so Hermes sessions of its own), sees only the
model requests made since it began, and finds the model's rules and Hermes's config.yaml
as the suite set them, whatever the test before it changed. A test that must stop or
restart a gateway gets a home and a gateway of its own (``station``). So the tests pass
alone and in any order; ``run.sh`` runs them in a random one.

The gadgets are allowlisted up front, a pool of keys per home, handed out one per name
and test; the phones' device ids carry a tag of the test. Pairing tests use devices
nobody allowed.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from devices import GadgetClient, PhoneClient, gadget_id, phone_user
from harness import Gateway, HarnessError, HermesHome, herald_binary, hermes_line, hermes_venv
from stub_model import Rule, StubServer

TESTS = Path(__file__).resolve().parent
LOCAL_STT = f"{sys.executable} {TESTS / 'stt_pocketsphinx.py'} {{input_path}} {{output_dir}}"
# Allowlisted gadget keys per home; a test takes one for each gadget name it uses.
GADGET_POOL = 160
# Hermes's command TTS, offline: espeak-ng writes a WAV of the reply.
ESPEAK_TTS = "espeak-ng -v en-us -f {input_path} -w {output_path}"
LED_ACTION = {
    "name": "led.set",
    "description": "Set the colour of the LED ring",
    "params": {"type": "object", "properties": {"color": {"type": "string"}}},
}
# The one line of Hermes's English catalogue the tests need that the 0.22 fork leaves out
# (it ships no locale files and says raw keys instead): its transcript echo. Hermes reads
# a home's own catalogue from $HERMES_HOME/locales/en.yaml over the bundled one; the text
# is the echo as Hermes's own code describes it (and as 0.19 writes it).
ENGLISH_OVERLAY = {"gateway": {"voice": {"transcript_echo_short": '🎙️ "{text}"'}}}


def stub_stt_command(log: Path) -> str:
    """The stub speech-to-text (stub_stt.py), noting each file it hears in ``log``."""
    return f"{sys.executable} {TESTS / 'stub_stt.py'} {{input_path}} {log}"


def noted_espeak_tts(log: Path) -> str:
    """ESPEAK_TTS that also notes each text Hermes has it speak in ``log``: a line each,
    when it began and ended (seconds of the wall clock, which every process shares)
    and the text on one line. A shell's few milliseconds, not a Python's start-up."""
    script = (
        'began=$(date +%s.%N); espeak-ng -v en-us -f "$1" -w "$2" && '
        f'echo "$began $(date +%s.%N) $(tr "\\n" " " < "$1")" >> {shlex.quote(str(log))}'
    )
    return f"sh -c {shlex.quote(script)} sh {{input_path}} {{output_path}}"


@dataclass(frozen=True)
class Synthesis:
    """One text Hermes's text-to-speech spoke (``noted_espeak_tts``)."""

    began: float
    ended: float
    text: str


def syntheses(log: Path) -> list[Synthesis]:
    if not log.exists():
        return []
    noted = [line.split(" ", 2) for line in log.read_text().splitlines() if line.strip()]
    return [Synthesis(float(began), float(ended), text.strip()) for began, ended, text in noted]


def speak_with(rig: "Rig", command: str) -> None:
    """Hermes's command text-to-speech runs ``command`` (config.yaml is put back after
    the test; Hermes reads it for each synthesis)."""
    provider = {"type": "command", "command": command, "format": "wav"}
    rig.home.update_config(lambda c: c["tts"].update(provider="espeak", providers={"espeak": provider}))


@dataclass
class Station:
    """A Hermes home made for the tests, the Herald plugin installed and a pool of gadgets
    allowlisted, not yet running."""

    home: HermesHome
    model: StubServer
    herald: Path
    pool: list[bytes]
    app_token: str
    stranger_token: str

    def start(self, extra_env: dict[str, str] | None = None) -> "Rig":
        """``hermes gateway run`` in this home, once herald is ready."""
        gateway = Gateway(self.home, extra_env)
        try:
            gateway.wait_ready()
            gateway.wait_for_log("herald ready")
            info = admin_get(self.home.path / "herald", "/v1/info")
        except BaseException:
            gateway.stop()
            raise
        return Rig(
            home=self.home,
            gateway=gateway,
            model=self.model,
            herald=self.herald,
            gadget_url=str(info["gadget_url"]),
            mobile_url=str(info["mobile_url"]),
            app_token=self.app_token,
            stranger_token=self.stranger_token,
            pool=self.pool,
        )


@dataclass
class Rig:
    """A running gateway and what a test needs to reach it."""

    home: HermesHome
    gateway: Gateway
    model: StubServer
    herald: Path
    gadget_url: str
    mobile_url: str
    app_token: str
    stranger_token: str
    # Allowlisted gadget keys no test has used yet.
    pool: list[bytes]
    # What belongs to the test now running (see `begin_test`).
    tag: str = field(default_factory=lambda: os.urandom(3).hex())
    devices: dict[str, bytes] = field(default_factory=dict)
    # Unpaired gadgets the test made; forgotten after it (herald lets only a few wait).
    strangers: list[str] = field(default_factory=list)
    first_request: int = 0

    def gadget(
        self, name: str, actions: list[dict[str, Any]] | None = None, speaker_rate: int | None = None
    ) -> GadgetClient:
        """An allowlisted gadget: the same one for the same name within a test, one no other
        test has used."""
        key = self.devices.get(name)
        if key is None:
            if not self.pool:
                raise HarnessError(f"all {GADGET_POOL} allowlisted gadgets are used: raise GADGET_POOL")
            key = self.devices[name] = self.pool.pop()
        return GadgetClient(self.gadget_url, key, name.title(), actions, speaker_rate)

    def stranger_gadget(self, key: bytes | None = None, name: str = "Stranger") -> GadgetClient:
        key = key or os.urandom(32)
        self.strangers.append(gadget_id(key))
        return GadgetClient(self.gadget_url, key, name)

    def phone(self, name: str, token: str | None = None) -> PhoneClient:
        """A phone with the app token (or ``token``); its device id is ``name`` and the
        test's tag, so the same name in another test is another device."""
        return PhoneClient(self.mobile_url, token or self.app_token, f"{name}-{self.tag}")

    def add_rules(self, *rules: Rule) -> None:
        """Rules for this test, ahead of the suite's; gone after it."""
        self.model.script.set_rules([*rules, *self.model.script.rules()])

    def requests(self) -> list[dict[str, Any]]:
        """Every request the model got since this test began."""
        return self.model.script.requests()[self.first_request :]

    def user_turns(self) -> list[str]:
        """Every user message the model has been sent since this test began, newest last."""
        return [
            str(message.get("content"))
            for request in self.requests()
            for message in request.get("messages", [])
            if message.get("role") == "user"
        ]

    def begin_test(self) -> None:
        self.tag = os.urandom(3).hex()
        self.devices = {}
        self.strangers = []
        self.first_request = len(self.model.script.requests())

    def end_test(self) -> None:
        """Forget the unpaired gadgets the test made and clear Hermes's pending codes:
        herald keeps at most 4 unpaired gadgets waiting per address, Hermes 3 codes."""
        self.wait_idle()
        for device_id in self.strangers:
            self.home.hermes("gadget", "forget", device_id, check=False)
        if self.strangers:
            self.home.hermes("pairing", "clear-pending", check=False)
        self.strangers = []


    def wait_idle(self, timeout: float = 30) -> None:
        """Until no agent runs in the gateway (Hermes notes the count in its home's
        gateway_state.json as agents start and finish); a test must not leave one behind."""
        state = self.home.path / "gateway_state.json"
        deadline = time.monotonic() + timeout
        while True:
            try:
                active = json.loads(state.read_text()).get("active_agents")
            except (OSError, ValueError):
                active = None
            if active == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"an agent still runs in the gateway {timeout:.0f} s after the test: {active}")
            time.sleep(0.1)


Question = tuple[str, list[str], bool]


def clarify_arguments(*questions: Question) -> dict[str, Any]:
    """The ``clarify`` tool's arguments in the line's own shape: from 0.22 a list of
    questions, before it one question (multi-select from 0.20)."""
    line = hermes_line().name
    if line not in ("0.19", "0.20"):
        return {"questions": [{"question": q, "choices": c, "multi_select": m} for q, c, m in questions]}
    question, choices, multi_select = questions[0]
    return {"question": question, "choices": choices, **({"multi_select": True} if multi_select else {})}


def model_rules() -> list[Rule]:
    """What the model says to every test; a test adds its own with ``Rig.add_rules``."""
    return [
        # Written word by word over half a second, so every line streams it as edits.
        Rule(match="stream the weather", reply="It is sunny and warm today.", piece_delay_s=0.1),
        Rule(match="weather", reply="It is sunny and warm today."),
        Rule(
            match="which colour",
            reply="You chose {result}",
            tool="clarify",
            arguments=clarify_arguments(("Which colour?", ["red", "green"], False)),
        ),
        # Several choices at once (0.20), and a second question after it (0.22).
        Rule(
            match="which rooms",
            reply="You chose {result}",
            tool="clarify",
            arguments=clarify_arguments(
                ("Which rooms?", ["hall", "den", "attic"], True), ("Which colour?", ["red", "green"], False)
            ),
        ),
        Rule(
            match="put up a card",
            reply="Shown: {result}",
            tool="gadget_display",
            arguments={"text": "Tea is ready", "title": "Kitchen", "seconds": 30},
        ),
        Rule(
            match="which devices",
            reply="Devices: {result}",
            tool="gadget_devices",
        ),
        Rule(
            match="light on",
            reply="The gadget said {result}",
            tool="gadget_action",
            arguments={"name": "led.set", "args": {"color": "red"}},
        ),
        Rule(
            match="make it blue",
            reply="The gadget said {result}",
            tool="gadget_action",
            arguments={"action": "led.set", "args": {"color": "blue"}},
        ),
        Rule(
            match="act without a name",
            reply="The gadget said {result}",
            tool="gadget_action",
            arguments={"args": {"color": "blue"}},
        ),
    ]


def cleaning_rule(match: str, scratch: Path, flags: str = "-rf") -> Rule:
    """The model removes ``scratch`` with the terminal tool: a command Hermes asks about."""
    return Rule(match=match, reply="Cleaned: {result}", tool="terminal", arguments={"command": f"rm {flags} {scratch}"})


@pytest.fixture(scope="session")
def model() -> Iterator[StubServer]:
    server = StubServer()
    server.start()
    server.script.set_rules(model_rules())
    try:
        yield server
    finally:
        server.stop()


def make_station(root: Path, model: StubServer) -> Station:
    """A home set up as the suite's gateways run: the stub model, command STT and TTS, no
    tool-progress chatter, the allowlisted gadget pool and phone tokens, every herald
    listener on a free port of 127.0.0.1, and the plugin installed the README's way."""
    home = HermesHome(root / "home", hermes_venv(), model.base_url)
    home.update_config(
        lambda c: c.update(
            # A preview from the first word: short replies stream on every line (0.20
            # otherwise waits for more text than the stub's replies have).
            streaming={"enabled": True, "transport": "edit", "cursor": "", "buffer_threshold": 1},
            stt={
                "provider": "stub",
                "providers": {"stub": {"type": "command", "command": stub_stt_command(root / "stt.log")}},
            },
            tts={
                "provider": "espeak",
                "providers": {"espeak": {"type": "command", "command": ESPEAK_TTS, "format": "wav"}},
            },
            # As the README recommends: no tool-progress chatter on small screens.
            display={"platforms": {p: {"tool_progress": "off"} for p in ("gadget", "mobile")}},
        )
    )
    (home.path / "locales").mkdir()
    # JSON is YAML.
    (home.path / "locales" / "en.yaml").write_text(json.dumps(ENGLISH_OVERLAY, ensure_ascii=False))
    pool = [os.urandom(32) for _ in range(GADGET_POOL)]
    app_token, stranger_token = os.urandom(32).hex(), os.urandom(32).hex()
    home.set_env(
        GADGET_ALLOWED_USERS=",".join(gadget_id(key) for key in pool),
        MOBILE_TOKEN=app_token,
        MOBILE_EXTRA_TOKENS=f"stranger:{stranger_token}",
        MOBILE_ALLOWED_USERS=phone_user(app_token),
    )
    home.herald_on_free_ports()
    binary = herald_binary()
    home.install_herald(binary)
    return Station(home, model, binary, pool, app_token, stranger_token)


@pytest.fixture(scope="session")
def rig(tmp_path_factory: pytest.TempPathFactory, model: StubServer) -> Iterator[Rig]:
    """The gateway most tests share. A test may restart its herald (the URLs are updated
    here) but leaves the gateway running and idle."""
    station = make_station(tmp_path_factory.mktemp("hermes"), model)
    # The offline engine test_voice.py switches Hermes's STT to (local_command).
    shared = station.start({"HERMES_LOCAL_STT_COMMAND": LOCAL_STT})
    try:
        yield shared
    finally:
        shared.gateway.stop()


@pytest.fixture
def station(tmp_path: Path, model: StubServer) -> Station:
    """A home of the test's own, for a test that starts (and stops) its own gateway."""
    return make_station(tmp_path, model)


@pytest.fixture(autouse=True)
def own_environment() -> Iterator[None]:
    """The tests' own environment is put back after each test: importing some of Hermes
    (0.22's ``gateway.run``) points TMPDIR into ``~/.hermes/cache/scratch``, where a later
    test's files are outside what that test's gateway may deliver."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def own_share(request: pytest.FixtureRequest) -> Iterator[None]:
    """What a test changed of what the tests share is put back after it: the model's rules,
    and for the shared gateway its config.yaml (Hermes rereads it when it changes) and the
    unpaired gadgets and codes the test left."""
    if "model" not in request.fixturenames:
        yield
        return
    model: StubServer = request.getfixturevalue("model")
    model.script.set_rules(model_rules())
    shared: Rig | None = request.getfixturevalue("rig") if "rig" in request.fixturenames else None
    config = shared.home.path / "config.yaml" if shared else None
    before = config.read_text() if config else ""
    if shared:
        shared.begin_test()
    try:
        yield
    finally:
        model.script.set_rules(model_rules())
        if shared and config:
            shared.end_test()
            if config.read_text() != before:
                config.write_text(before)


def admin_get(data_dir: Path, path: str) -> dict[str, Any]:
    """A GET on herald's admin API that answers an object."""
    answer = admin_request(data_dir, path)
    assert isinstance(answer, dict), answer
    return answer


def admin_request(data_dir: Path, path: str, body: Any = None) -> Any:
    """A GET (or, with a body, a JSON POST) on herald's admin API, found the way the CLI
    finds it; the console makes the same calls with its session."""
    endpoint = json.loads((data_dir / "admin.json").read_text())
    token = (data_dir / "admin.token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    request = urllib.request.Request(endpoint["url"] + path, data=data, headers=headers)
    # Loopback: no proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        return json.loads(response.read())
