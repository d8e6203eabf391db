"""`air secrets ...` end to end: scopes and keys, values from stdin and from a hidden prompt,
file modes, tampering, concurrency, -o json.

What the CLI stored is checked with an independent reader of the documented store format
(docs/secrets.md): key derivation and HMAC in pure Python (hashlib/hmac), XSalsa20-Poly1305
through libsodium via ctypes. So a round trip is verified without any command that prints a
value (air has none, on purpose).
"""
import concurrent.futures
import ctypes
import ctypes.util
import hashlib
import hmac
import json
import os
import pty
import select
import stat
import struct
import subprocess
import time

import pytest


# --- an independent reader of AIR_HOME/secrets (docs/secrets.md) ---------------------------

def _libsodium():
    name = ctypes.util.find_library("sodium")
    if name is None:
        pytest.skip("libsodium shared library not found")
    lib = ctypes.CDLL(name)
    assert lib.sodium_init() >= 0
    return lib


def _subkey(master: bytes, subkey_id: int, size: int) -> bytes:
    # crypto_kdf_derive_from_key: BLAKE2b keyed by the master key, salt = id (u64 LE), personal
    # = the 8-byte context, both zero-padded to 16 bytes.
    return hashlib.blake2b(b"", digest_size=size, key=master,
                           salt=struct.pack("<Q", subkey_id) + bytes(8),
                           person=b"airsecr1" + bytes(8)).digest()


def read_store(home) -> dict:
    """{(scope, key): value bytes} decrypted from the files, checking every documented field."""
    key_file = (home / "secrets" / "key").read_bytes()
    assert len(key_file) == 56 and key_file[:4] == b"AIRK"
    assert struct.unpack("<I", key_file[4:8])[0] == 1
    assert hashlib.blake2b(key_file[:40], digest_size=16).digest() == key_file[40:]
    master = key_file[8:40]
    box_key, auth_key, key_id = _subkey(master, 1, 32), _subkey(master, 2, 32), _subkey(master, 3, 16)

    data = (home / "secrets" / "store").read_bytes()
    body, tag = data[:-32], data[-32:]
    assert hmac.new(auth_key, body, hashlib.sha512).digest()[:32] == tag
    assert body[:8] == b"AIRSECRS" and struct.unpack("<I", body[8:12])[0] == 1
    assert body[12:28] == key_id
    lib = _libsodium()
    pos = 28

    def take(n):
        nonlocal pos
        out = body[pos:pos + n]
        assert len(out) == n
        pos += n
        return out

    values = {}
    (scope_count,) = struct.unpack("<I", take(4))
    for _ in range(scope_count):
        scope = take(take(1)[0]).decode()
        struct.unpack("<q", take(8))
        (secret_count,) = struct.unpack("<I", take(4))
        for _ in range(secret_count):
            key = take(take(1)[0]).decode()
            struct.unpack("<q", take(8))
            nonce = take(24)
            (box_len,) = struct.unpack("<I", take(4))
            box = take(box_len)
            plain = ctypes.create_string_buffer(box_len - 16)
            rc = lib.crypto_secretbox_open_easy(plain, box, ctypes.c_ulonglong(box_len), nonce,
                                                box_key)
            assert rc == 0, f"{scope}/{key} does not decrypt"
            prefix = f"{scope}/{key}".encode() + b"\0"
            assert plain.raw.startswith(prefix)
            values[(scope, key)] = plain.raw[len(prefix):]
    assert pos == len(body)
    return values


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def put(air_bin, scope, key, value: bytes, *extra):
    """put-secret with `value` piped on stdin (bytes, not text)."""
    return subprocess.run([air_bin, "secrets", "put-secret", scope, key, *extra], input=value,
                          capture_output=True, timeout=60)


# --- tests --------------------------------------------------------------------------------

def test_scope_and_secret_lifecycle_text_and_json(air, air_bin, air_home):
    proc = air("secrets", "list-scopes")
    assert proc.returncode == 0 and "No secret scopes" in proc.stdout
    assert not (air_home / "secrets").exists(), "a read must not create the store"

    assert air("secrets", "create-scope", "my_scope").stdout.strip() == \
        "Created secret scope my_scope"
    rc, env = air.json("secrets", "create-scope", "other")
    assert rc == 0 and env["data"] == {"scope": "other", "created": True}
    dup = air("secrets", "create-scope", "my_scope")
    assert dup.returncode == 1 and "secret scope 'my_scope' already exists" in dup.stderr

    assert put(air_bin, "my_scope", "hf_token", b"hf_value_123\n").returncode == 0
    rc, env = air.json("secrets", "put-secret", "my_scope", "hf_token", input="hf_value_456\n")
    assert rc == 0
    data = env["data"]
    assert data["replaced"] is True and data["bytes"] == 12 and data["warnings"] == []
    assert "hf_value" not in json.dumps(env)

    listed = air("secrets", "list-secrets", "my_scope")
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[0].split() == ["KEY", "UPDATED"]
    assert listed.stdout.splitlines()[1].startswith("hf_token  20")
    rc, env = air.json("secrets", "list-secrets", "my_scope")
    assert [s["key"] for s in env["data"]["secrets"]] == ["hf_token"]
    assert set(env["data"]["secrets"][0]) == {"key", "updated_at"}  # names and times only

    rc, env = air.json("secrets", "list-scopes")
    assert [(s["name"], s["secret_count"]) for s in env["data"]["scopes"]] == \
        [("my_scope", 1), ("other", 0)]
    assert read_store(air_home) == {("my_scope", "hf_token"): b"hf_value_456"}

    assert air("secrets", "delete-secret", "my_scope", "hf_token").returncode == 0
    gone = air("secrets", "delete-secret", "my_scope", "hf_token")
    assert gone.returncode == 1 and "secret my_scope/hf_token does not exist" in gone.stderr
    rc, env = air.json("secrets", "delete-scope", "my_scope")
    assert rc == 0 and env["data"]["deleted"] is True
    rc, env = air.json("secrets", "list-secrets", "my_scope")
    assert rc == 1 and env["error"]["code"] == "not_found"
    assert "create-scope my_scope" in env["error"]["message"]
    # -o json also works after the subcommand.
    proc = air("secrets", "list-scopes", "-o", "json")
    assert json.loads(proc.stdout)["data"]["scopes"][0]["name"] == "other"


def test_stdin_values_round_trip_byte_for_byte(air, air_bin, air_home):
    assert air("secrets", "create-scope", "s").returncode == 0
    every_byte_but_nul = bytes(range(1, 256))
    cases = {
        "echo_newline_stripped": (b"token\n", b"token"),
        "crlf_stripped": (b"token\r\n", b"token"),
        "only_one_newline_stripped": (b"token\n\n", b"token\n"),
        "no_newline": (b"token", b"token"),
        "multi_line": (b"-----BEGIN-----\nAAAA\n-----END-----\n", b"-----BEGIN-----\nAAAA\n-----END-----"),
        "binaryish": (every_byte_but_nul, every_byte_but_nul),
        "invalid_utf8": (b"\xff\xfe\x80abc", b"\xff\xfe\x80abc"),
        "max_size": (b"v" * 131072 + b"\n", b"v" * 131072),
    }
    for key, (given, _) in cases.items():
        proc = put(air_bin, "s", key, given)
        assert proc.returncode == 0, (key, proc.stderr)
    kept = put(air_bin, "s", "kept_newline", b"token\n", "--keep-trailing-newline")
    assert kept.returncode == 0
    stored = read_store(air_home)
    for key, (_, want) in cases.items():
        assert stored[("s", key)] == want, key
    assert stored[("s", "kept_newline")] == b"token\n"
    # At rest nothing is readable.
    raw = (air_home / "secrets" / "store").read_bytes()
    assert b"-----BEGIN-----" not in raw and b"vvvvvvvv" not in raw


def test_names_sizes_and_values_are_validated(air, air_bin, air_home):
    assert air("secrets", "create-scope", "s").returncode == 0
    bad_scope = air("secrets", "create-scope", "my scope")
    assert bad_scope.returncode == 2
    assert "invalid scope name 'my scope': ' ' (space) at position 3 is not allowed" in bad_scope.stderr
    assert "letters, digits, '-', '_' and '.' (1 to 128 characters)" in bad_scope.stderr
    assert air("secrets", "create-scope", "a" * 128).returncode == 0
    too_long = air("secrets", "create-scope", "a" * 129)
    assert too_long.returncode == 2 and "129 characters long" in too_long.stderr
    slash = put(air_bin, "s", "hf/token", b"value")
    assert slash.returncode == 2 and b"'/' at position 3" in slash.stderr

    big = put(air_bin, "s", "big", b"v" * 131073)
    assert big.returncode == 2 and b"131073 bytes; at most 131072 bytes" in big.stderr
    huge = put(air_bin, "s", "huge", b"v" * 1_000_000)
    assert huge.returncode == 2 and b"longer than" in huge.stderr
    empty = put(air_bin, "s", "empty", b"")
    assert empty.returncode == 2 and b"the value for s/empty is empty" in empty.stderr
    nul = put(air_bin, "s", "nul", b"ab\0cd")
    assert nul.returncode == 2 and b"NUL byte at offset 2" in nul.stderr
    no_scope = put(air_bin, "nope", "k", b"value")
    assert no_scope.returncode == 1 and b"secret scope 'nope' does not exist" in no_scope.stderr
    short = put(air_bin, "s", "short", b"abc")
    assert short.returncode == 0 and b"not redacted from logs" in short.stderr
    rc, env = air.json("secrets", "put-secret", "s", "big", input="v" * 131073)
    assert rc == 2 and env["error"]["code"] == "invalid_argument"
    # Nothing invalid was stored.
    assert set(read_store(air_home)) == {("s", "short")}


def test_a_value_on_the_command_line_is_refused(air, air_home):
    assert air("secrets", "create-scope", "s").returncode == 0
    for flag in ("--value", "--string-value", "--bytes-value"):
        proc = air("secrets", "put-secret", "s", "k", flag, "hunter2-secret", input="")
        assert proc.returncode == 2, proc.stderr
        assert "never taken from the command line" in proc.stderr
        assert "hunter2" not in proc.stdout + proc.stderr
    # The value as a third word (as in `databricks secrets put-secret S K VALUE`): refused
    # without echoing it, in text and JSON; a stray byte that is not UTF-8 must not crash -o json.
    for words in (["hunter2-secret"], ["hunter2", "secret"], ["hunter2-\udcff"]):
        proc = air("secrets", "put-secret", "s", "k", *words, input="")
        assert proc.returncode == 2, proc.stderr
        assert "put-secret takes only SCOPE and KEY" in proc.stderr, proc.stderr
        assert "never taken from the command line" in proc.stderr
        rc, env = air.json("secrets", "put-secret", "s", "k", *words, input="")
        assert rc == 2 and env["error"]["code"] == "invalid_argument"
        assert "hunter2" not in proc.stdout + proc.stderr + json.dumps(env)
    assert read_store(air_home) == {}


def test_files_stay_0600_and_directory_0700_across_put_delete_cycles(air, air_bin, air_home):
    assert air("secrets", "create-scope", "s").returncode == 0
    files = [air_home / "secrets" / name for name in ("key", "store", "lock", ".gitignore")]
    for i in range(4):
        assert put(air_bin, "s", f"k{i}", f"value-{i}".encode()).returncode == 0
        assert put(air_bin, "s", "k0", f"again-{i}".encode()).returncode == 0
        assert air("secrets", "delete-secret", "s", f"k{i}").returncode == 0
        for f in files:
            assert mode(f) == 0o600, (f, oct(mode(f)), i)
        assert mode(air_home / "secrets") == 0o700
    assert air("secrets", "delete-scope", "s").returncode == 0
    assert all(mode(f) == 0o600 for f in files)
    assert sorted(os.listdir(air_home / "secrets")) == [".gitignore", "key", "lock", "store"]


def test_tampered_and_truncated_files_give_clear_errors(air, air_bin, air_home):
    assert air("secrets", "create-scope", "s").returncode == 0
    assert put(air_bin, "s", "hf_token", b"CANARY-tamper-value").returncode == 0
    store_path = air_home / "secrets" / "store"
    key_path = air_home / "secrets" / "key"
    good_store, good_key = store_path.read_bytes(), key_path.read_bytes()

    def expect_error(needle, path):
        proc = air("secrets", "list-scopes")
        assert proc.returncode == 1, proc.stdout
        assert str(path) in proc.stderr and needle in proc.stderr, proc.stderr
        assert "CANARY" not in proc.stderr + proc.stdout
        rc, env = air.json("secrets", "list-secrets", "s")
        assert rc == 1 and env["error"]["code"] in ("data_loss", "permission_denied",
                                                    "failed_precondition")

    flipped = bytearray(good_store)
    flipped[-40] ^= 1  # inside the last ciphertext
    store_path.write_bytes(bytes(flipped))
    expect_error("values that no longer decrypt: s/hf_token", store_path)

    header = bytearray(good_store)
    header[8] = 9
    store_path.write_bytes(bytes(header))
    expect_error("format version 9", store_path)

    store_path.write_bytes(good_store[:len(good_store) // 2])
    expect_error("truncated", store_path)
    store_path.write_bytes(good_store[:5])
    expect_error("truncated", store_path)

    store_path.write_bytes(good_store)
    bad_key = bytearray(good_key)
    bad_key[12] ^= 0x40
    key_path.write_bytes(bytes(bad_key))
    expect_error("fails its checksum", key_path)
    key_path.write_bytes(good_key[:20])
    expect_error("is 20 bytes", key_path)
    key_path.unlink()
    expect_error("is missing", key_path)
    key_path.write_bytes(good_key)
    os.chmod(key_path, 0o644)
    expect_error("chmod 600", key_path)
    os.chmod(key_path, 0o600)
    assert air("secrets", "list-scopes").returncode == 0
    assert read_store(air_home) == {("s", "hf_token"): b"CANARY-tamper-value"}


def test_concurrent_put_secret_processes_lose_no_update(air, air_bin, air_home):
    assert air("secrets", "create-scope", "s").returncode == 0

    def one(i):
        return put(air_bin, "s", f"key{i}", f"value-{i}".encode()).returncode

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(one, range(24))) == [0] * 24
    stored = read_store(air_home)
    assert stored == {("s", f"key{i}"): f"value-{i}".encode() for i in range(24)}


def _read_until(fd, needle: bytes, timeout=10.0) -> bytes:
    seen = b""
    deadline = time.time() + timeout
    while needle not in seen and time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return seen


def test_prompt_on_a_terminal_does_not_echo(air, air_bin, air_home):
    assert air("secrets", "create-scope", "s").returncode == 0
    master, slave = pty.openpty()
    proc = subprocess.Popen([air_bin, "secrets", "put-secret", "s", "typed"], stdin=slave,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = _read_until(master, b"(input hidden): ")
    assert b"Value for s/typed (input hidden): " in shown
    os.write(master, b"TYPED-secret-value-77\n")
    out, _ = proc.communicate(timeout=30)
    shown += _read_until(master, b"\n", timeout=1.0)
    os.close(master)
    assert proc.returncode == 0
    assert b"Stored secret s/typed (21 bytes)" in out
    assert b"TYPED-secret" not in shown, shown
    assert read_store(air_home) == {("s", "typed"): b"TYPED-secret-value-77"}
