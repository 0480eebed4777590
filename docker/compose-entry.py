"""Entrypoint of compose.yaml's services: `python -m bench ARGS`, never as root.

compose cannot compute the host user's uid the way `orchestrate.py` does (container_user
in host/engine.py), so the services start this as uid 0 with only CAP_CHOWN, CAP_SETUID
and CAP_SETGID, and it drops to an unprivileged user before anything else runs:

- the owner of /results (the host's ./results) when that is not root: rows belong to the
  user who owns the results dir, as with orchestrate.py;
- 10001:10001 (the image's own user) when /results belongs to root, after handing it
  this host's results dir /results/<host> (made here) and what the kit writes there (its
  lock, platforms.json, the studies' and summaries' trees); ./results itself stays root's.

Rows go to /results/<host>/ (KIT_RESULTS_DIR), as native runs write results/<host>/, so one
./results holds every host's runs side by side and never mixes them with results/reference/.

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


def host_results() -> str:
    """This host's results dir under the mount: /results/<host> (bench's host label)."""
    from bench.core.provenance import host_label

    return os.path.join(RESULTS, host_label())


def drop_root(out: str) -> tuple[int, int]:
    """Become the owner of RESULTS (root -> 10001, handing it OUT); returns (uid, gid). No-op
    unless uid 0."""
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    st = os.stat(RESULTS) if os.path.isdir(RESULTS) else None
    if st is not None and st.st_uid != 0:
        uid, gid = st.st_uid, st.st_gid
    else:
        uid, gid = RUN_UID, RUN_GID
        if st is not None:
            if not os.path.lexists(out):
                os.mkdir(out, 0o755)
            if not os.path.islink(out):
                _chown_kit_paths(out)
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
    host_name()
    out = host_results()
    try:
        drop_root(out)
    except OSError as err:
        print(
            f"error: cannot drop root to the owner of {RESULTS} or 10001 ({err}): "
            "the service needs cap_add CHOWN, SETUID, SETGID (compose.yaml), or set KIT_UID/KIT_GID",
            file=sys.stderr,
        )
        sys.exit(2)
    os.environ["KIT_RESULTS_DIR"] = out  # bench makes it (as this user) when it is not there yet
    os.execv(sys.executable, [sys.executable, "-m", "bench", *sys.argv[1:]])


if __name__ == "__main__":
    main()
