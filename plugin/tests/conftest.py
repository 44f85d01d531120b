"""Fixtures that give each test a real Hermes gateway pointed at the stub model."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from harness import HermesHome, hermes_venv
from stub_model import StubServer


@pytest.fixture(scope="session")
def venv() -> Path:
    return hermes_venv()


@pytest.fixture
def model() -> Iterator[StubServer]:
    server = StubServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def home(tmp_path: Path, venv: Path, model: StubServer) -> HermesHome:
    return HermesHome(tmp_path / "hermes-home", venv, model.base_url)
