import subprocess
import sys

import pytest

from server.settings import SettingsError, load_settings


def test_defaults_run_embedded():
    s = load_settings()
    assert s.database_url.startswith("sqlite+aiosqlite://") and s.bus_url == "memory://" and s.host == "127.0.0.1"


@pytest.mark.parametrize(
    "var,value",
    [
        ("CHATSYNC_PORT", "seventy"),
        ("CHATSYNC_PORT", "70000"),
        ("CHATSYNC_DATABASE_URL", "mysql://x"),
        ("CHATSYNC_BUS_URL", "kafka://x"),
        ("CHATSYNC_MAX_QUEUE_LENGTH", "0"),
    ],
)
def test_bad_value_names_the_variable(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert var in str(err.value)


def test_origins_list_from_env(monkeypatch):
    monkeypatch.setenv("CHATSYNC_ALLOWED_ORIGINS", "https://a.example, https://b.example/")
    assert load_settings().allowed_origins == ["https://a.example", "https://b.example"]


def test_serve_refuses_to_start_with_bad_value():
    out = subprocess.run(
        [sys.executable, "-m", "server.cli", "serve"],
        capture_output=True,
        text=True,
        env={"CHATSYNC_PORT": "nope", "PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert out.returncode == 2 and "CHATSYNC_PORT" in out.stderr
