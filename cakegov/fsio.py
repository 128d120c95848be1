"""Writing output files: atomically, with the permissions the user's umask asks for.

Standard library only: every command that writes a file imports this, the fast ones too."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def current_umask() -> int:
    """The process umask, read without changing it where the platform allows."""
    try:  # Linux: reading /proc leaves the umask alone (no window for other threads)
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename: never half-written.

    A new file gets `0o666 & ~umask`, as `open()` would give it (mkstemp's 0o600 is for
    the temporary name only); a file that already exists keeps its permission bits. A
    symbolic link is written through (its target is replaced, the link stays), and a path
    that names a device or a FIFO (`-o /dev/null`) is written to directly: renaming over
    it would replace the device node with a plain file."""
    path = Path(os.path.realpath(path))
    try:
        info = path.stat()
    except OSError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        with open(path, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        return
    mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~current_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
