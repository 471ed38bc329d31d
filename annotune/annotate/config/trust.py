"""Finding a config and trusting it: the nearest one above the source that mentions it, looked
for up to the repository's root or the user's home, and used only when the user owns it and no
one else may write it (it names the compile command run for every build)."""

from __future__ import annotations

import grp
import os
import pwd
from pathlib import Path
from typing import TYPE_CHECKING

from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.inputs import CONFIG, check_input, read_text
from annotune.core.toml import parse_toml

if TYPE_CHECKING:
    from annotune.annotate.config.records import FileConfig

CONFIG_NAMES = ("annotune.toml", "pyproject.toml")


def find_config(source: Path) -> Path | None:
    """The nearest annotune.toml, or pyproject.toml with [tool.annotune], above `source`.

    Looked for as git looks for a repository: from the source's directory up to the first
    that holds `.git` (the repository's root) or is the user's home, `/` at the latest, so
    that a config planted in /tmp or a shared parent does not reach the sources below it. The
    config found must be the user's own (`check_trusted`): it names the compile command run
    for every build.
    """
    found = nearest_config(Path(os.path.realpath(source)).parent)
    if found is not None:
        check_trusted(found)
    return found


def config_naming(source: Path, start: Path) -> FileConfig | None:
    """The `[[file]]` entry naming `source` of the nearest config in `start` or above it (as
    `find_config` looks), that config trusted as `find_config`'s; else None.

    For a vendored tree the user keeps their config outside of (it may be read-only): run
    from the directory whose annotune.toml says `path = "../vendor/x/main.cu"`. Only a
    config that names the source is used, or refused as untrusted, so a project's config never
    reaches a file it does not mention.
    """
    from annotune.annotate.config.entries import load_file_config

    found = nearest_config(start)
    entry = load_file_config(found, source) if found is not None else None
    if entry is not None:
        check_trusted(found)
    return entry


def nearest_config(start: Path) -> Path | None:
    """The nearest config in `start` or above it, as `find_config` looks, not yet trusted."""
    home = _home()
    for directory in [start, *start.parents]:
        for name in CONFIG_NAMES:
            candidate = directory / name
            if os.path.lexists(candidate) and (
                name == "annotune.toml" or _has_tool_table(candidate)
            ):
                return candidate
        if directory == home or os.path.lexists(directory / ".git"):
            return None
    return None


def _home() -> Path | None:
    home = os.path.expanduser("~")
    return Path(os.path.realpath(home)) if os.path.isabs(home) else None


def _has_tool_table(pyproject: Path) -> bool:
    """Whether a pyproject.toml on the way up holds [tool.annotune]. One that cannot be read
    is an error, not skipped: it is inside the user's repository or home, every other tool
    fails on it too, and skipping it would drop the table it may hold for a config above."""
    try:
        data = parse_toml(read_text(pyproject, CONFIG), pyproject)
    except AnnotuneError as error:
        raise AnnotuneError(
            error.message,
            error.location,
            hint="annotune reads every pyproject.toml above the source for [tool.annotune]; "
            "fix this one, or pass --config PATH",
        ) from None
    return isinstance(data.get("tool"), dict) and "annotune" in data["tool"]


def check_trusted(config: Path) -> None:
    """Refuse a config found above the source that another user could have written: one not
    owned by the user (nor by root, who could change anything anyway), or writable by others,
    or by a group other than the user's private one (Debian and Ubuntu give each user a group
    of their own and umask 002, so every new file is group-writable). Git refuses a repository
    of another owner for the same reason. A config named with --config is not checked."""
    status = check_input(config, CONFIG)
    mode = status.st_mode & 0o777
    if status.st_uid not in (os.geteuid(), 0):
        why = f"owned by {_user_name(status.st_uid)}, not by you"
    elif mode & 0o002:
        why = f"writable by every user (mode {mode:o})"
    elif mode & 0o020 and not _private_group(status.st_gid):
        why = f"writable by group {_group_name(status.st_gid)} (mode {mode:o})"
    else:
        return
    raise AnnotuneError(
        f"not using this config: it is {why}, and it names the commands annotune runs",
        Location(str(config), 1, 1),
        hint=f"pass --config {config} to use it anyway",
    )


def _private_group(gid: int) -> bool:
    """Whether group `gid` is the user's own: named as the user, their primary group, with
    no other member."""
    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(os.geteuid())
    except KeyError:
        return False
    return (
        group.gr_name == user.pw_name and user.pw_gid == gid and set(group.gr_mem) <= {user.pw_name}
    )


def _user_name(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    try:
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except KeyError:
        return f"gid {gid}"
