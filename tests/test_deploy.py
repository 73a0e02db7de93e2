"""The deployment files in the repository, run as their tools would run them: the systemd unit
checked by systemd-analyze and its command run as the unit gives it, and the Dockerfile built
step by step into a folder (no Docker engine runs here) and its entry point run as PID 1 of a
PID namespace of its own, with a job enqueued as `docker exec` would."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

from helpers import clean_env, wait_until

ROOT = Path(__file__).resolve().parent.parent
QUEUECTL = Path(sys.executable).parent / "queuectl"


def _unit() -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for line in (ROOT / "deploy" / "queuectl-worker.service").read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            keys.setdefault(key, []).append(value)
    return keys


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    text = (ROOT / "deploy" / "queuectl-worker.service").read_text()
    assert "/opt/queuectl/bin/queuectl" in text
    unit = tmp_path / "queuectl-worker.service"
    unit.write_text(text.replace("/opt/queuectl/bin/queuectl", str(QUEUECTL)))
    checked = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr


@pytest.mark.slow
def test_the_units_pool_stops_gracefully_on_its_kill_signal(tmp_path: Path) -> None:
    unit = _unit()
    assert unit["KillMode"] == ["mixed"] and unit["KillSignal"] == ["SIGTERM"]
    [environment] = unit["Environment"]
    name, _, database = environment.partition("=")
    env = clean_env(**{name: str(tmp_path / Path(database).name)})
    [exec_start] = unit["ExecStart"]
    command = shlex.split(exec_start)
    command[0] = str(QUEUECTL)
    started, marker = tmp_path / "started", tmp_path / "ran"
    job = f"touch {started}; sleep 2; touch {marker}"
    subprocess.run([str(QUEUECTL), "enqueue", job], env=env, cwd=tmp_path, check=True)
    pool = subprocess.Popen(command, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(started.exists, timeout=60, what="the job to start")
        assert not marker.exists()
        pool.send_signal(signal.SIGTERM)  # as systemctl stop sends it, to the pool alone
        _, log = pool.communicate(timeout=60)
        assert pool.returncode == 0
    finally:
        if pool.poll() is None:
            pool.kill()
            pool.communicate()
    assert marker.exists()  # the running job was let finish
    assert log_lines_are_json(log)


def log_lines_are_json(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(isinstance(json.loads(line), dict) for line in lines)


# -- the Dockerfile -------------------------------------------------------------------------

# The image's own folders, made inside the test's folder when the steps run here.
IMAGE_PATH = re.compile(r"(?<![\w./-])/(?:src|opt/queuectl|var/lib/queuectl)\b[^\s:;&|'\"]*")


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", text)
    steps = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            steps.append((word.upper(), rest.strip()))
    return steps


def _context_has(name: str) -> bool:
    """Whether .dockerignore lets `name` (a top-level entry) into the build context."""
    included = True
    for pattern in (ROOT / ".dockerignore").read_text().split():
        negated = pattern.startswith("!")
        if fnmatch(name, pattern.removeprefix("!")):
            included = negated
    return included


def _env_pairs(text: str) -> list[tuple[str, str]]:
    return [tuple(part.split("=", 1)) for part in shlex.split(text)]  # type: ignore[misc]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root")
def test_the_dockerfile_builds_and_its_entry_point_runs_a_job_as_pid_1(tmp_path: Path) -> None:
    image = tmp_path / "image"

    def inside(text: str) -> str:
        return IMAGE_PATH.sub(lambda m: str(image) + m.group(0), text)

    env = clean_env()
    env.pop("VIRTUAL_ENV", None)
    workdir = image
    entrypoint: list[str] = []
    cmd: list[str] = []
    steps = _instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    for word, rest in steps[1:]:
        if word == "ENV":
            for name, value in _env_pairs(rest):
                env[name] = inside(value).replace("$PATH", env.get("PATH", ""))
        elif word == "WORKDIR":
            workdir = Path(inside(rest))
            workdir.mkdir(parents=True, exist_ok=True)
        elif word == "COPY":
            *sources, target = rest.split()
            for source in sources:
                assert _context_has(source), f"{source} is left out of the build context"
                destination = (
                    workdir / target if not target.startswith("/") else Path(inside(target))
                )
                origin = ROOT / source
                if origin.is_dir():
                    shutil.copytree(
                        origin, destination, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    shutil.copy(origin, destination)
        elif word == "RUN":
            if rest.startswith("useradd"):
                continue  # a user of the image; making one here would change this machine
            subprocess.run(["sh", "-ec", inside(rest)], cwd=workdir, env=env, check=True)
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
        else:
            assert word in ("USER", "VOLUME", "STOPSIGNAL"), word
    assert not (image / "src").exists()  # the build context is not left in the image
    database = Path(env["QUEUECTL_DB"])
    assert database.parent == workdir

    def docker_exec(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*entrypoint, *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=60
        )

    assert docker_exec("enqueue", "--id", "hello", "echo Hello").returncode == 0
    # The entry point as PID 1 of a PID namespace, as a container runs it.
    container = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", *entrypoint, *cmd],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def state() -> str:
            return json.loads(docker_exec("show", "hello", "--json").stdout)["state"]

        wait_until(lambda: state() == "completed", timeout=60, what="the job to complete")
        assert docker_exec("logs", "hello").stdout == "Hello\n"
        children = Path(f"/proc/{container.pid}/task/{container.pid}/children").read_text()
        [pid_1] = [int(pid) for pid in children.split()]
        os.kill(pid_1, signal.SIGTERM)  # docker stop
        log, _ = container.communicate(timeout=60)
        assert container.returncode == 0
    finally:
        if container.poll() is None:
            container.kill()
            container.communicate()
    assert log_lines_are_json(log), log
    assert any(json.loads(line).get("event") == "pool started" for line in log.splitlines())
