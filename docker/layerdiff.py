"""Extract what a `pip install` added to a venv, as a tree that COPY can lay on top.

Used by docker/Dockerfile so the cuda image = the cpu image's venv layer + one layer
holding only the CUDA-only packages (cpu.txt is a subset of cuda.txt, same versions),
instead of a second multi-GB copy of torch and its nvidia libraries.

    python3 layerdiff.py snapshot /opt/venv /tmp/venv.manifest
    pip install ...                                    # adds packages to /opt/venv
    python3 layerdiff.py extract /opt/venv /tmp/venv.manifest /opt/layer

A file counts as changed when its size, mtime or mode differ (pip writes every file
it installs anew). A path that disappeared means pip replaced a shared package: the
locks disagree, so this fails instead of building an image that is not the lock.
"""
import json
import os
import shutil
import stat
import sys


def scan(root: str) -> dict[str, list]:
    """Map relative path -> [kind, size, mtime_ns, mode or link target]."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ["link", 0, 0, os.readlink(path)]
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ["dir", 0, 0, st.st_mode]
            else:
                out[rel] = ["file", st.st_size, st.st_mtime_ns, st.st_mode]
    return out


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "snapshot":
        with open(argv[2], "w") as f:
            json.dump(scan(argv[1]), f)
        return 0
    if len(argv) != 4 or argv[0] != "extract":
        print(__doc__, file=sys.stderr)
        return 2
    root, manifest, dest = argv[1:]
    with open(manifest) as f:
        before = json.load(f)
    after = scan(root)
    gone = sorted(set(before) - set(after))
    if gone:
        print(f"layerdiff: install removed {len(gone)} paths, e.g. {gone[:5]}: "
              "cuda.txt and cpu.txt pin different versions; rerun requirements/lock.sh",
              file=sys.stderr)
        return 1
    changed = [p for p, meta in after.items() if before.get(p) != meta and meta[0] != "dir"]
    os.makedirs(dest, exist_ok=True)
    size = 0
    for rel in sorted(changed):
        src, dst = os.path.join(root, rel), os.path.join(dest, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if after[rel][0] == "link":
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
            size += after[rel][1]
    print(f"layerdiff: {len(changed)} files, {size / 2**20:.0f} MiB added on top of the base venv")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
