"""What this host can run, and how: the platforms, the runtime (native or containers), a
request checked before any work, and a native run of its `python -m bench matrix ...`
(bench.core.request.RunRequest.matrix_argv, the command line both runtimes execute).

Never imports torch: capabilities come from nvidia-smi, the OS, and the Docker engine.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from bench.core.child import child_env
from bench.core.errors import KitError
from bench.core.machine import is_macos_arm64, nvidia_smi_gpus
from bench.core.request import MAX_REPEATS, RunRequest, check_until

NATIVE_NEEDS = ("numpy", "scipy", "sklearn", "psutil", "rich", "typer")  # bench's own imports, torch excepted


def native_platforms() -> dict[str, str | None]:
    """platform -> None if this host can run it natively, else why not."""
    return {
        "cpu": None,
        "cuda": None if nvidia_smi_gpus() else "no NVIDIA GPU on this host (nvidia-smi lists none)",
        "mps": None if is_macos_arm64() else "needs macOS on Apple silicon",
    }


def container_platforms() -> dict[str, str | None]:
    from host import engine

    return {
        "cpu": None,
        "cuda": engine.cuda_unavailable(),
        "mps": "Metal is not reachable from containers: on macOS arm64 run natively (docker/mps/run.sh)",
    }


def engine_reason() -> str | None:
    """None when containers can be used here, else why not (one line)."""
    if importlib.util.find_spec("docker") is None:
        return "the docker Python package is not installed (requirements/host.txt)"
    from host import engine

    return engine.engine_ok()


def native_missing() -> list[str]:
    """bench's runtime packages this Python lacks (native runs need requirements/dev.txt)."""
    return [m for m in NATIVE_NEEDS if importlib.util.find_spec(m) is None]


def validate(req: RunRequest, root: Path | None) -> None:
    """Every study, option and cell of REQ on its platforms, checked on the host before any work (KitError, one
    line), and the one data rule (bench.data): a dataset asked for by name (`--set
    dataset=mnist`) must be in the data dir ROOT; 'auto' takes it from there when it is, else the
    embedded default, natively and in an image alike. The data's identity (its checksum) is
    resolved later, where the data is (natively or in the image)."""
    from bench.data import FETCHERS, PLACED, fetch_hint
    from bench.run.matrix import resolve

    cells = resolve(req, resolve_data=False, allow_empty=True)
    until = req.until()
    if until is not None and cells:
        check_until(until, max(c.repeat for c in cells) + 1, MAX_REPEATS)
    for c in cells:
        name = str(c.params.get("dataset", ""))
        if name in FETCHERS or name in PLACED:
            if root is None or not (root / name).is_dir():
                where = f"data dir {root}" if root else "no data dir (pass --data-dir or set KIT_DATA_DIR)"
                how = fetch_hint(name, root or Path("data")) if name in FETCHERS else f"put it in <data dir>/{name}/ (README)"
                raise KitError(f"{c.study} asks for dataset {name}, but {where} holds no {name}/: {how}")


def run_native(req: RunRequest) -> int:
    """One `python -m bench matrix` for all of REQ's platforms (so an interleaved schedule spans them)."""
    missing = native_missing()
    if missing:
        from host.images import checkout

        how = (
            "bash scripts/setup.sh installs them into .venv, or run in containers"
            if checkout()
            else "pip install 'cnn-bench[cpu]' installs them (cnn-bench[cuda] on an NVIDIA host, cnn-bench[mps] on Apple silicon)"
        )
        raise KitError(f"native runs need bench's packages ({', '.join(missing)} missing here): {how}")
    argv = [sys.executable, "-m", "bench", *req.matrix_argv()]
    return _wait_matrix(subprocess.Popen(argv, env=child_env()))


def _wait_matrix(proc: subprocess.Popen) -> int:
    """PROC's exit code. Ctrl-C reaches the matrix through the terminal; SIGTERM or SIGHUP sent to
    this process alone is handed on to it (it settles its cells as on Ctrl-C); either way this waits
    for it to finish before re-raising, and kills it only if it outlives the grace period."""
    from host.containers import GRACE_S, Stopped, stop_signals

    with stop_signals():
        try:
            return proc.wait()
        except KeyboardInterrupt as err:
            if isinstance(err, Stopped):
                proc.send_signal(err.signum)
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise


def check_data_dir(data_dir: str | None) -> Path | None:
    """The data root to use: a named dir must exist (one line otherwise); None = nothing there
    (the studies use their embedded defaults)."""
    from bench.data import data_dir_named, resolve_data_dir

    root = resolve_data_dir(data_dir)
    named = data_dir_named(data_dir)
    if not root.is_dir():
        if named:
            raise KitError(
                f"data dir {root} does not exist; pass --data-dir, set KIT_DATA_DIR, "
                "or run `python orchestrate.py data fetch NAME`"
            )
        return None
    return root
