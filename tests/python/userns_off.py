"""Runs a command as another local user on what is, for that user, a machine without mount and
user namespaces (as on login nodes where unprivileged user namespaces are off): a user namespace
that maps every id to itself (files, /proc and signals see the real uid) and whose kernel limits
user.max_user_namespaces and user.max_mnt_namespaces are 0, so the command's unshare() of
either kind is refused, as the hardened host refuses it. Then it drops to UID:GID (no
supplementary groups, no capabilities) and execs the command with this process's environment.

    python3 userns_off.py UID GID -- COMMAND [ARG...]     (run as root)

This process itself becomes the command (its exit status is the command's); a short-lived
child, still in the initial namespace, writes the new namespace's id maps, which only a
process with CAP_SETUID there may do for ids other than its own."""
import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000
FULL_RANGE = "0 0 4294967295\n"  # every id is itself


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: userns_off.py UID GID -- COMMAND [ARG...]")
    uid, gid, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4:]
    ready_r, ready_w = os.pipe()
    parent = os.getpid()
    helper = os.fork()
    if helper == 0:
        os.close(ready_w)
        os.read(ready_r, 1)
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{parent}/{name}", "w") as f:
                f.write(FULL_RANGE)
        os._exit(0)
    os.close(ready_r)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        sys.exit(f"unshare(CLONE_NEWUSER): {os.strerror(ctypes.get_errno())}")
    os.write(ready_w, b"x")
    os.close(ready_w)
    _, status = os.waitpid(helper, 0)
    if status != 0:
        sys.exit("could not write the user namespace's id maps")
    for limit in ("max_user_namespaces", "max_mnt_namespaces"):
        with open(f"/proc/sys/user/{limit}", "w") as f:
            f.write("0\n")
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
