"""Other local users for tests of a shared machine (docs/tracking.md, "Threat model"): each is
created with useradd for the tests that ask and removed after, and runs code with its own uid
and gid, no supplementary groups and no inherited environment. The tests run as root; a machine
where a user cannot be created fails the test (never skips)."""
import contextlib
import os
import pwd
import subprocess
import textwrap
import uuid

import pytest

SYSTEM_PYTHON = "/usr/bin/python3"


@contextlib.contextmanager
def local_user(prefix="airprobe", home=False):
    """A new local user named `prefix` + 8 hex digits; `home`: with a home directory."""
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    args = ["useradd", "--shell", "/usr/sbin/nologin"]
    args += ["--create-home"] if home else ["--no-create-home"]
    proc = subprocess.run(args + [name], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"cannot create a local user with useradd (needs root): "
                    f"{proc.stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "--remove" if home else "--force", name],
                       capture_output=True)


def _as_user(user):
    assert os.path.exists(SYSTEM_PYTHON), "Debian's python3 is required"
    return dict(user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/",
                env={"PATH": "/usr/bin:/bin", "HOME": "/"}, text=True)


def run_as(user, code, timeout=120, **kw):
    """`code` in the system Python as `user` (no supplementary groups, no inherited env)."""
    return subprocess.run([SYSTEM_PYTHON, "-c", textwrap.dedent(code)], capture_output=True,
                          timeout=timeout, **_as_user(user), **kw)


def start_as(user, code, **kw):
    """`code` started in the background as `user` (as run_as): a Popen with pipes to its stdin
    and stdout, for a listener or a watcher that runs while the test acts."""
    return subprocess.Popen([SYSTEM_PYTHON, "-c", textwrap.dedent(code)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **_as_user(user), **kw)
