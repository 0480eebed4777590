"""docker/mps/run.sh, the native mps wrapper, on Linux with the Mac faked.

run.sh reads KIT_FAKE_UNAME_S / KIT_FAKE_UNAME_M / KIT_FAKE_MACOS in place of uname and
sw_vers. Every Python it may call is a shim on PATH (a small Python script) that records its
argv and environment and acts the part: prints its version, "creates" a venv (a copy of
itself), "installs" with pip, runs the registry query for real against this checkout's bench,
and stands in for `python -m bench matrix`. The script runs from a copy of the kit's layout
(run.sh + the real mps locks) in a temp dir, with a PATH holding only the shims and the few
tools it needs, so no real interpreter can be picked by mistake.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS = ("dirname", "cut", "cat", "rm", "sha256sum", "git")

FAKE_PY = r"""#!{python}
import json, os, sys
from pathlib import Path

me = Path(sys.argv[0])
args = sys.argv[1:]
cfg = me.parent.parent / "pyvenv.cfg"
if me.parent.name == "bin" and cfg.is_file():  # a venv's python: the version it was made with
    version = dict(l.split(" = ", 1) for l in cfg.read_text().splitlines() if " = " in l)["version"]
else:
    version = json.loads(os.environ["FAKE_VERSIONS"]).get(me.name, "")
env = {{k: v for k, v in os.environ.items() if k.startswith(("KIT_", "PYTORCH_"))}}
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"exe": str(me), "argv": args, "env": env, "cwd": os.getcwd()}}) + "\n")
if args[:1] == ["-c"] and "version_info" in args[1]:
    print(version)
elif args[:1] == ["-c"] and "registry" in args[1]:
    sys.path.insert(0, os.environ["FAKE_KIT"])  # the real registry of this checkout
    exec(args[1])
elif args[:2] == ["-m", "venv"]:
    venv = Path(args[2])
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {{me.parent}}\nversion = {{version}}\n")
    (venv / "bin" / "python").write_bytes(me.read_bytes())
    (venv / "bin" / "python").chmod(0o755)
elif args[:2] == ["-m", "pip"]:
    sys.exit(int(os.environ.get("FAKE_PIP_RC", "0")))
elif args[:2] == ["-m", "bench"]:
    sys.exit(0)
else:
    sys.exit(f"fake python: unexpected {{args}}")
"""


class Mac:
    """A temp copy of the kit's layout, a shim dir, and a way to run run.sh in it."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "kit"
        (self.root / "docker" / "mps").mkdir(parents=True)
        shutil.copy2(REPO / "docker" / "mps" / "run.sh", self.root / "docker" / "mps" / "run.sh")
        (self.root / "requirements").mkdir()
        for lock in (REPO / "requirements").glob("mps*.txt"):
            shutil.copy2(lock, self.root / "requirements" / lock.name)
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for tool in TOOLS:
            found = shutil.which(tool)
            if found:
                (self.bin / tool).symlink_to(found)
        self.fake = tmp / "fakepy"
        self.fake.write_text(FAKE_PY.format(python=sys.executable))
        self.fake.chmod(0o755)
        self.log = tmp / "calls.jsonl"
        self.versions: dict[str, str] = {}

    def python(self, name: str, version: str) -> None:
        (self.bin / name).symlink_to(self.fake)
        self.versions[name] = version

    def run(self, *args: str, env: dict[str, str] | None = None, mac: bool = True) -> subprocess.CompletedProcess[str]:
        base = {
            "PATH": str(self.bin),
            "HOME": str(self.root),
            "FAKE_LOG": str(self.log),
            "FAKE_VERSIONS": json.dumps(self.versions),
            "FAKE_KIT": str(REPO),
        }
        if mac:
            base |= {"KIT_FAKE_UNAME_S": "Darwin", "KIT_FAKE_UNAME_M": "arm64", "KIT_FAKE_MACOS": "14.5"}
        return subprocess.run(
            ["/bin/bash", str(self.root / "docker" / "mps" / "run.sh"), *args],
            env=base | (env or {}),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def calls(self) -> list[dict]:
        if not self.log.is_file():
            return []
        out = [json.loads(line) for line in self.log.read_text().splitlines()]
        self.log.unlink()
        return out

    @staticmethod
    def bench(calls: list[dict]) -> dict:
        (call,) = [c for c in calls if c["argv"][:2] == ["-m", "bench"]]
        return call


@pytest.fixture
def mac(tmp_path: Path) -> Mac:
    return Mac(tmp_path)


def mps_studies() -> list[str]:
    from bench.core.registry import studies

    return [n for n, s in studies().items() if any(b.platform == "mps" for b in s.backends.values())]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- the platform checks --------------------------------------------------------------


def test_refuses_linux(mac: Mac) -> None:
    mac.python("python3", "3.12")
    p = mac.run(mac=False, env={"KIT_FAKE_UNAME_S": "Linux", "KIT_FAKE_UNAME_M": "x86_64"})
    assert p.returncode == 2 and "needs macOS on Apple silicon (this is Linux/x86_64)" in p.stderr
    assert mac.calls() == []


def test_refuses_intel_or_rosetta(mac: Mac) -> None:
    mac.python("python3", "3.12")
    p = mac.run(env={"KIT_FAKE_UNAME_M": "x86_64"})
    assert p.returncode == 2 and "Rosetta" in p.stderr and "arch -arm64" in p.stderr
    assert mac.calls() == []


@pytest.mark.parametrize("version", ["13.6", "unknown"])
def test_refuses_old_or_unknown_macos(mac: Mac, version: str) -> None:
    mac.python("python3", "3.12")
    p = mac.run(env={"KIT_FAKE_MACOS": version})
    assert p.returncode == 2 and "macOS 14 or newer" in p.stderr
    assert mac.calls() == []


# ---- any supported Python -------------------------------------------------------------


def lock_of(version: str) -> str:
    return "requirements/mps.txt" if version == "3.11" else f"requirements/mps-py{version}.txt"


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13", "3.14"])
def test_every_supported_python_has_a_lock_and_is_used(mac: Mac, version: str) -> None:
    mac.python("python3", version)
    p = mac.run(env={"KIT_MPS_VENV": "v"})
    assert p.returncode == 0, p.stderr
    calls = mac.calls()
    venv = [c for c in calls if c["argv"][:2] == ["-m", "venv"]]
    assert [Path(c["exe"]).name for c in venv] == ["python3"] and venv[0]["argv"][2] == "v"
    (pip,) = [c for c in calls if c["argv"][:2] == ["-m", "pip"]]
    assert pip["exe"].endswith("v/bin/python")
    assert pip["argv"][2:] == ["install", "--quiet", "--disable-pip-version-check", "--require-hashes", "--no-deps"] + [
        "--only-binary",
        ":all:",
        "-r",
        lock_of(version),
    ]
    bench = mac.bench(calls)
    assert bench["env"]["KIT_LOCK_HASH"] == sha256(mac.root / lock_of(version))
    assert bench["env"]["KIT_IMAGE_REF"] == f"native:{lock_of(version)}"


def test_prefers_python3_then_the_newest_with_a_lock(mac: Mac) -> None:
    mac.python("python3", "3.10")  # below the floor: no lock
    mac.python("python3.13", "3.13t")  # free-threaded: no lock
    mac.python("python3.12", "3.12")
    mac.python("python3.11", "3.11")
    p = mac.run()
    assert p.returncode == 0, p.stderr
    venv = [c for c in mac.calls() if c["argv"][:2] == ["-m", "venv"]]
    assert [Path(c["exe"]).name for c in venv] == ["python3.12"]


def test_no_supported_python_says_which_exist(mac: Mac) -> None:
    mac.python("python3", "3.10")
    p = mac.run(env={"PYTHON": "python3"})
    assert p.returncode == 2
    assert "python3 (3.10)" in p.stderr and "locks for: 3.11 3.12 3.13 3.14" in p.stderr, p.stderr
    assert not any(c["argv"][:2] == ["-m", "venv"] for c in mac.calls())


def test_venv_is_reused_and_rebuilt_when_python_or_lock_changes(mac: Mac) -> None:
    mac.python("python3", "3.12")
    assert mac.run().returncode == 0
    assert any(c["argv"][:2] == ["-m", "venv"] for c in mac.calls())
    assert mac.run().returncode == 0
    assert not any(c["argv"][:2] in (["-m", "venv"], ["-m", "pip"]) for c in mac.calls())  # reused
    with (mac.root / "requirements" / "mps-py3.12.txt").open("a") as f:
        f.write("# changed\n")
    assert mac.run().returncode == 0
    assert any(c["argv"][:2] == ["-m", "pip"] for c in mac.calls())  # the lock changed
    mac.versions["python3"] = "3.13"
    assert mac.run().returncode == 0
    calls = mac.calls()
    assert any(c["argv"][:2] == ["-m", "venv"] for c in calls)
    assert mac.bench(calls)["env"]["KIT_IMAGE_REF"] == "native:requirements/mps-py3.13.txt"


def test_never_removes_a_dir_that_is_not_a_venv(mac: Mac) -> None:
    mac.python("python3", "3.12")
    keep = mac.root / "precious"
    keep.mkdir()
    (keep / "file").write_text("x")
    p = mac.run(env={"KIT_MPS_VENV": "precious"})
    assert p.returncode == 2 and "not a venv" in p.stderr
    assert (keep / "file").read_text() == "x"


def test_failed_install_stops_and_is_retried(mac: Mac) -> None:
    mac.python("python3", "3.12")
    assert mac.run(env={"FAKE_PIP_RC": "1"}).returncode != 0
    assert not any(c["argv"][:2] == ["-m", "bench"] for c in mac.calls())
    assert mac.run().returncode == 0
    assert any(c["argv"][:2] == ["-m", "pip"] for c in mac.calls())  # no stamp was written: installed again


# ---- what it runs ---------------------------------------------------------------------


def test_runs_every_mps_study_on_the_default_data(mac: Mac) -> None:
    mac.python("python3", "3.12")
    p = mac.run()
    assert p.returncode == 0, p.stderr
    want = mps_studies()
    assert want, "no study has an mps backend"
    assert f"studies with an mps backend: {' '.join(want)}" in p.stdout
    bench = mac.bench(mac.calls())
    assert bench["argv"] == ["-m", "bench", "matrix", *want, "--platform", "mps"]  # no --data-dir: embedded default fallback
    assert bench["cwd"] == str(mac.root)
    env = bench["env"]
    assert env["KIT_RUNTIME"] == "native" and env["KIT_PLATFORM"] == "mps" and env["PYTORCH_ENABLE_MPS_FALLBACK"] == "0"
    assert "KIT_DATA_DIR" not in env


def test_data_and_out_only_when_given(mac: Mac) -> None:
    mac.python("python3", "3.12")
    assert mac.run("--data-dir", "/d", "--out", "/o").returncode == 0
    assert mac.bench(mac.calls())["argv"][-4:] == ["--data-dir", "/d", "--out", "/o"]
    assert mac.run("--data-dir=/e").returncode == 0
    assert mac.bench(mac.calls())["argv"][-2:] == ["--data-dir", "/e"]
    assert mac.run(env={"KIT_DATA_DIR": "/k"}).returncode == 0
    assert mac.bench(mac.calls())["argv"][-2:] == ["--data-dir", "/k"]


def test_passes_matrix_options_and_named_studies(mac: Mac) -> None:
    mac.python("python3", "3.12")
    p = mac.run("--smoke", "--set", "epochs=1", "--only", "pipeline=resident", "--rerun", "mnist-cnn")
    assert p.returncode == 0, p.stderr
    calls = mac.calls()
    assert not any(c["argv"][:1] == ["-c"] and "registry" in c["argv"][1] for c in calls)  # named: no discovery
    assert mac.bench(calls)["argv"] == [
        "-m",
        "bench",
        "matrix",
        "mnist-cnn",
        "--platform",
        "mps",
        "--profile",
        "smoke",
        "--set",
        "epochs=1",
        "--only",
        "pipeline=resident",
        "--rerun",
    ]


def test_wrapper_is_executable_and_parses() -> None:
    script = REPO / "docker" / "mps" / "run.sh"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
