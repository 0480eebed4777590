"""Entrypoint of compose.yaml's services: `python -m bench ARGS`, never as root.

compose cannot compute the host user's uid the way `orchestrate.py` does (container_user
in host/engine.py), so the services start this as uid 0 with only CAP_CHOWN, CAP_SETUID
and CAP_SETGID, and it drops to an unprivileged user before anything else runs:

- the owner of /results (the host's ./results) when that is not root: rows belong to the
  user who owns the results dir, as with orchestrate.py;
- 10001:10001 (the image's own user) when /results belongs to root, after handing it
  what the kit writes there (the dir, its lock, platforms.json, the studies' and
  summaries' trees), exactly what orchestrate.py does for a root host user.

setuid() to a non-root uid clears every capability; with no-new-privileges nothing can
regain one. Started as any other uid (KIT_UID set), it only execs. The host's name comes
from /run/kit/hostname (compose mounts the host's /etc/hostname there) when KIT_HOST_NAME
is unset, so rows name the host, not the container.
"""

from __future__ import annotations

import os
import sys

RUN_UID = RUN_GID = 10001
RESULTS = os.environ.get("KIT_RESULTS_DIR", "/results")
HOSTNAME_FILE = "/run/kit/hostname"


def _chown_kit_paths(results: str) -> None:
    from bench.core.lock import LOCK_NAME
    from bench.core.registry import studies

    os.lchown(results, RUN_UID, RUN_GID)
    for name in [LOCK_NAME, "platforms.json"]:
        if os.path.lexists(os.path.join(results, name)):
            os.lchown(os.path.join(results, name), RUN_UID, RUN_GID)
    for sub in [*studies(), "summaries"]:
        top = os.path.join(results, sub)
        if os.path.islink(top) or not os.path.isdir(top):
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            for name in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
                os.lchown(name, RUN_UID, RUN_GID)


def drop_root() -> tuple[int, int]:
    """Become the owner of RESULTS (root -> 10001); returns (uid, gid). No-op unless uid 0."""
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    st = os.stat(RESULTS) if os.path.isdir(RESULTS) else None
    if st is not None and st.st_uid != 0:
        uid, gid = st.st_uid, st.st_gid
    else:
        uid, gid = RUN_UID, RUN_GID
        if st is not None:
            _chown_kit_paths(RESULTS)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() == 0 or os.geteuid() == 0:  # never run the kit as root
        raise PermissionError("still uid 0 after setuid")
    return uid, gid


def host_name() -> None:
    if os.environ.get("KIT_HOST_NAME"):
        return
    try:
        with open(HOSTNAME_FILE, encoding="utf-8") as f:
            name = f.read().strip()
    except OSError:  # not mounted (or a dir: Docker made one for a missing source)
        return
    if name:
        os.environ["KIT_HOST_NAME"] = name


def main() -> None:
    try:
        drop_root()
    except OSError as err:
        print(
            f"error: cannot drop root to the owner of {RESULTS} or 10001 ({err}): "
            "the service needs cap_add CHOWN, SETUID, SETGID (compose.yaml), or set KIT_UID/KIT_GID",
            file=sys.stderr,
        )
        sys.exit(2)
    host_name()
    os.execv(sys.executable, [sys.executable, "-m", "bench", *sys.argv[1:]])


if __name__ == "__main__":
    main()
