"""One real Hermes gateway with the Herald plugin for the whole suite.

Starting Hermes takes seconds, so every test shares one gateway, one herald child and
one stub model; each test uses its own devices (and so its own Hermes sessions). The
gadgets and the phone user the tests talk as are allowlisted up front; pairing tests
use devices nobody allowed.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from devices import GadgetClient, PhoneClient, gadget_id, phone_user
from harness import Gateway, HermesHome, herald_binary, hermes_line, hermes_venv
from stub_model import Rule, StubServer

TESTS = Path(__file__).resolve().parent
LOCAL_STT = f"{sys.executable} {TESTS / 'stt_pocketsphinx.py'} {{input_path}} {{output_dir}}"
GADGET_NAMES = ("kitchen", "hall", "desk", "porch", "radio", "attic", "studio")
# Hermes's command TTS, offline: espeak-ng writes a WAV of the reply.
ESPEAK_TTS = "espeak-ng -v en-us -f {input_path} -w {output_path}"
LED_ACTION = {
    "name": "led.set",
    "description": "Set the colour of the LED ring",
    "params": {"type": "object", "properties": {"color": {"type": "string"}}},
}


@dataclass
class Rig:
    """The running gateway and what the tests need to reach it."""

    home: HermesHome
    gateway: Gateway
    model: StubServer
    herald: Path
    gadget_url: str
    mobile_url: str
    app_token: str
    stranger_token: str
    stt_log: Path
    victims: Path
    gadget_keys: dict[str, bytes] = field(default_factory=dict)
    # Unpaired gadgets a test made; forgotten after it (herald lets only a few wait).
    strangers: list[str] = field(default_factory=list)

    def gadget(
        self, name: str, actions: list[dict[str, Any]] | None = None, speaker_rate: int | None = None
    ) -> GadgetClient:
        """An allowlisted gadget."""
        return GadgetClient(self.gadget_url, self.gadget_keys[name], name.title(), actions, speaker_rate)

    def stranger_gadget(self, key: bytes | None = None, name: str = "Stranger") -> GadgetClient:
        key = key or os.urandom(32)
        self.strangers.append(gadget_id(key))
        return GadgetClient(self.gadget_url, key, name)

    def phone(self, device_id: str, token: str | None = None) -> PhoneClient:
        return PhoneClient(self.mobile_url, token or self.app_token, device_id)

    def user_turns(self) -> list[str]:
        """Every user message the model has been sent, newest last."""
        return [
            str(message.get("content"))
            for request in self.model.script.requests()
            for message in request.get("messages", [])
            if message.get("role") == "user"
        ]


Question = tuple[str, list[str], bool]


def clarify_arguments(*questions: Question) -> dict[str, Any]:
    """The ``clarify`` tool's arguments in the line's own shape: from 0.22 a list of
    questions, before it one question (multi-select from 0.20)."""
    line = hermes_line().name
    if line not in ("0.19", "0.20"):
        return {"questions": [{"question": q, "choices": c, "multi_select": m} for q, c, m in questions]}
    question, choices, multi_select = questions[0]
    return {"question": question, "choices": choices, **({"multi_select": True} if multi_select else {})}


def model_rules(victims: Path) -> list[Rule]:
    return [
        # Written word by word over half a second, so every line streams it as edits.
        Rule(match="stream the weather", reply="It is sunny and warm today.", piece_delay_s=0.1),
        Rule(match="weather", reply="It is sunny and warm today."),
        Rule(
            match="clean the gadget scratch",
            reply="Cleaned: {result}",
            tool="terminal",
            arguments={"command": f"rm -rf {victims / 'gadget'}"},
        ),
        Rule(
            match="clean the phone scratch",
            reply="Cleaned: {result}",
            tool="terminal",
            arguments={"command": f"rm -rf {victims / 'phone'}"},
        ),
        # Another command of the same danger: allowed with the first "for this session".
        Rule(
            match="tidy the phone scratch",
            reply="Cleaned: {result}",
            tool="terminal",
            arguments={"command": f"rm -r -f {victims / 'phone'}"},
        ),
        # A turn that keeps the agent busy until a follow-up interrupts it.
        Rule(
            match="take your time",
            reply="Slept: {result}",
            tool="terminal",
            arguments={"command": "sleep 20; echo slept"},
        ),
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
        # The follow-up of every gadget_action call is the first such rule's reply.
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


@pytest.fixture(autouse=True)
def forget_strangers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, forget the unpaired gadgets it made and clear Hermes's pending
    codes: herald keeps at most 4 unpaired gadgets waiting per address, Hermes 3 codes."""
    yield
    if "rig" not in request.fixturenames:
        return
    rig: Rig = request.getfixturevalue("rig")
    for device_id in rig.strangers:
        rig.home.hermes("gadget", "forget", device_id, check=False)
    if rig.strangers:
        rig.home.hermes("pairing", "clear-pending", check=False)
    rig.strangers.clear()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that stop or restart the shared gateway run last, in their file order."""
    items.sort(key=lambda item: item.get_closest_marker("ends_gateway") is not None)


@pytest.fixture(scope="session")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    root = tmp_path_factory.mktemp("hermes")
    model = StubServer()
    model.start()
    home = HermesHome(root / "home", hermes_venv(), model.base_url)
    victims = root / "victims"
    stt_log = root / "stt.log"
    model.script.set_rules(model_rules(victims))
    home.update_config(
        lambda c: c.update(
            # A preview from the first word: short replies stream on every line (0.20
            # otherwise waits for more text than the stub's replies have).
            streaming={"enabled": True, "transport": "edit", "cursor": "", "buffer_threshold": 1},
            stt={
                "provider": "stub",
                "providers": {
                    "stub": {
                        "type": "command",
                        "command": f"{sys.executable} {TESTS / 'stub_stt.py'} {{input_path}} {stt_log}",
                    }
                },
            },
            tts={
                "provider": "espeak",
                "providers": {"espeak": {"type": "command", "command": ESPEAK_TTS, "format": "wav"}},
            },
            # As the README recommends: no tool-progress chatter on small screens.
            display={"platforms": {p: {"tool_progress": "off"} for p in ("gadget", "mobile")}},
        )
    )
    keys = {name: os.urandom(32) for name in GADGET_NAMES}
    app_token, stranger_token = os.urandom(32).hex(), os.urandom(32).hex()
    home.set_env(
        GADGET_ALLOWED_USERS=",".join(gadget_id(key) for key in keys.values()),
        MOBILE_TOKEN=app_token,
        MOBILE_EXTRA_TOKENS=f"stranger:{stranger_token}",
        MOBILE_ALLOWED_USERS=phone_user(app_token),
    )
    data = home.herald_on_free_ports()
    binary = herald_binary()
    home.install_herald(binary)
    # The offline engine test_voice.py switches Hermes's STT to (local_command).
    gateway = Gateway(home, {"HERMES_LOCAL_STT_COMMAND": LOCAL_STT})
    try:
        gateway.wait_ready()
        gateway.wait_for_log("herald ready")
        info = admin_get(data, "/v1/info")
        yield Rig(
            home=home,
            gateway=gateway,
            model=model,
            herald=binary,
            gadget_url=str(info["gadget_url"]),
            mobile_url=str(info["mobile_url"]),
            app_token=app_token,
            stranger_token=stranger_token,
            stt_log=stt_log,
            victims=victims,
            gadget_keys=keys,
        )
    finally:
        gateway.stop()
        model.stop()


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
