"""compose.yaml as users run it: parsed by the compose this machine has (v2 `docker compose`
or v1 `docker-compose`), valid against the Compose Specification's JSON schema
(tests/data/compose-spec.json, vendored: see tests/data/README.md), and (with a Docker
engine and a built cpu image) `run --rm cpu-bench` from a fresh copy of the checkout,
whose rows must name the host, the git sha and the image.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "tests" / "data" / "compose-spec.json").read_text())  # draft-07
jsonschema.Draft7Validator.check_schema(SCHEMA)


def _compose_cmd() -> list[str] | None:
    """`docker compose` (v2) where the plugin exists, else `docker-compose` (v1), else None."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30).returncode == 0:
        return [docker, "compose"]
    v1 = shutil.which("docker-compose")
    return [v1] if v1 else None


def _compose_or_skip() -> list[str]:
    cmd = _compose_cmd()
    if cmd is None:
        pytest.skip("neither `docker compose` nor docker-compose is installed")
    return cmd


def _load(name: str) -> dict:
    return yaml.safe_load((REPO / name).read_text())


def test_compose_file_parses_with_the_installed_compose(tmp_path: Path) -> None:
    cmd = _compose_or_skip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIT_")}
    proc = subprocess.run([*cmd, "-f", str(REPO / "compose.yaml"), "config"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    cpu = cfg["services"]["cpu-bench"]
    # as compose resolves it on a fresh checkout: the repo's ./data and ./results, the default image
    mounts = {v["target"]: v for v in cpu["volumes"]}
    assert Path(mounts["/data"]["source"]) == REPO / "data" and (REPO / "data").is_dir()
    assert Path(mounts["/results"]["source"]) == REPO / "results"
    assert mounts["/run/kit/hostname"]["source"] == "/etc/hostname"
    assert cpu["image"] == "cnn-bench/cpu:latest"
    assert cpu["build"]["target"] == "cpu" and Path(cpu["build"]["context"]) == REPO
    # unset provenance variables arrive empty (the kit reads empty as unset), never as "unknown"
    assert cpu["environment"]["KIT_GIT_SHA"] in ("", None) and cpu["environment"]["KIT_IMAGE_ID"] in ("", None)
    assert cpu["user"] == "0:0" and cpu["entrypoint"] == ["python", "/opt/cnn-bench/compose-entry.py"]


def test_compose_build_override_parses_with_compose_v2() -> None:
    cmd = _compose_or_skip()
    files = ["-f", str(REPO / "compose.yaml"), "-f", str(REPO / "compose.build.yaml")]
    proc = subprocess.run([*cmd, *files, "config"], capture_output=True, text=True, timeout=60)
    if cmd[-1].endswith("docker-compose"):
        # v1 has no build secrets: it must refuse the override, which is why it is a separate file
        assert proc.returncode != 0 and "secrets" in proc.stderr, proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)["services"]["cpu-bench"]["build"]["secrets"]


@pytest.mark.parametrize("name", ["compose.yaml", "compose.build.yaml"])
def test_compose_files_validate_against_the_compose_spec(name: str) -> None:
    jsonschema.Draft7Validator(SCHEMA).validate(_load(name))


def test_the_schema_rejects_what_compose_would() -> None:
    """The validator is live: the same file with an unknown pull policy or a typo'd key fails."""
    for mutate in (
        lambda d: d["services"]["cpu-bench"].__setitem__("pull_policy", "sometimes"),
        lambda d: d["services"]["cpu-bench"].__setitem__("read_onyl", True),
    ):
        doc = _load("compose.yaml")
        mutate(doc)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft7Validator(SCHEMA).validate(doc)


def test_compose_never_pulls_and_never_runs_the_kit_as_root() -> None:
    doc = _load("compose.yaml")
    for name in ("cpu-bench", "cuda-bench"):
        svc = {**doc["x-bench"], **doc["services"][name]}
        assert svc["pull_policy"] == "never", "cnn-bench/* is in no registry: never a pull"
        assert svc["build"]["context"] == "." and svc["build"]["dockerfile"] == "docker/Dockerfile"
        assert svc["entrypoint"][-1] == "/opt/cnn-bench/compose-entry.py"
        assert svc["cap_drop"] == ["ALL"] and set(svc["cap_add"]) == {"CHOWN", "SETUID", "SETGID"}
    entry = (REPO / "docker" / "compose-entry.py").read_text()
    assert "os.setuid(uid)" in entry and "RUN_UID = RUN_GID = 10001" in entry


# ---- the real thing: docker-compose run from a fresh copy ------------------------------------


def _cpu_image_or_skip() -> dict:
    from host import engine

    reason = engine.engine_ok()
    if reason:
        pytest.skip(f"no Docker engine: {reason}")
    out = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{json .Config.Env}}", "cnn-bench/cpu:latest"], capture_output=True, text=True
    )
    if out.returncode != 0:
        pytest.skip("cnn-bench/cpu:latest not built: python orchestrate.py build cpu")
    env = dict(e.split("=", 1) for e in json.loads(out.stdout))
    if env.get("KIT_IMAGE_CONTENT_REF", "unknown") == "unknown":
        pytest.skip("cnn-bench/cpu:latest predates content tags: python orchestrate.py build cpu")
    return env


def _fresh_copy(tmp_path: Path) -> Path:
    """What a fresh clone holds that compose uses: compose.yaml, data/ (its README only), results/."""
    root = tmp_path / "checkout"
    (root / "data").mkdir(parents=True)
    (root / "results").mkdir()
    shutil.copy2(REPO / "compose.yaml", root / "compose.yaml")
    shutil.copy2(REPO / "data" / "README.md", root / "data" / "README.md")
    return root


def _run(root: Path, args: list[str], env_extra: dict | None = None) -> subprocess.CompletedProcess:
    cmd = _compose_or_skip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIT_")}
    env.update(env_extra or {})
    return subprocess.run(
        [*cmd, "run", "--rm", "cpu-bench", *args], cwd=root, capture_output=True, text=True, env=env, timeout=900
    )


@pytest.mark.docker
def test_compose_run_cpu_bench_records_host_git_sha_and_image(tmp_path: Path) -> None:
    image_env = _cpu_image_or_skip()
    root = _fresh_copy(tmp_path)
    proc = _run(root, ["matrix", "mnist-cnn", "--platform", "cpu", "--profile", "smoke"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows_files = sorted((root / "results").rglob("rows.jsonl"))
    assert rows_files, proc.stdout[-2000:]
    host = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").is_file() else socket.gethostname()
    for f in rows_files:
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        assert rows, f
        for row in rows:
            assert row["image_id"] == image_env["KIT_IMAGE_CONTENT_REF"], row["image_id"]
            assert row["lock_hash"] == image_env["KIT_LOCK_HASH"]
            assert row["host"] == host.split(".")[0], "the host's name, not the container id"
            assert row["dataset_real"] is False, "a fresh checkout has no MNIST: the embedded default"
        system = json.loads((f.parent / "system.json").read_text())
        assert system["kit_git_sha"] not in (None, "", "unknown")
        assert system["kit_git_sha"] == image_env["KIT_IMAGE_GIT_SHA"]
        assert system["image_ref"] == image_env["KIT_IMAGE_CONTENT_REF"]
    # rows under ./results/<host>/, as native runs write them, never beside results/reference/
    assert {f.relative_to(root / "results").parts[0] for f in rows_files} == {host.split(".")[0]}
    # root's ./results: this host's dir went to the image's user, never to root; ./results stays root's
    if os.getuid() == 0:
        assert {f.stat().st_uid for f in rows_files} == {10001}
        assert (root / "results").stat().st_uid == 0


@pytest.mark.docker
def test_compose_runs_as_the_owner_of_results(tmp_path: Path) -> None:
    _cpu_image_or_skip()
    if os.getuid() != 0:
        pytest.skip("needs root to give ./results to another uid")
    root = _fresh_copy(tmp_path)
    os.chown(root / "results", 4321, 4322)
    proc = _run(root, ["selfcheck", "--sandbox"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("KIT SANDBOX "))
    facts = json.loads(line[len("KIT SANDBOX ") :])
    assert facts["uid"] == 4321 and facts["results_writable"] is True
    assert int(facts["cap_eff"], 16) == 0, "setuid to a non-root uid leaves no capability"
    assert facts["no_new_privs"] == "1" and facts["interfaces"] == ["lo"]
