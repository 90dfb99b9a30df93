"""Ed25519 signatures of records and reports: the performer's key and detached <file>.sig files.

A signature lives beside what it signs (`g3.json.sig`, `summary.json.sig`), never inside it: it
covers a *statement* naming the JSON's canonical digest and the sealed report's own SHA-256,
and both exist only once the two files are written. So the record, its schema and its hash
stay exactly what they were, a record can be countersigned later without being touched, and a
bundle's manifest lists the signature like any other file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..core.configuration import ConfigError
from ..store import write_new

ALGORITHM = "ed25519"
KIND = "kvgate signature"
KEY_ENV, KEY_DIR_ENV = "KVGATE_SIGNING_KEY", "KVGATE_KEY_DIR"
PRIVATE_NAME, PUBLIC_NAME = "kvgate-ed25519.pem", "kvgate-ed25519.pub"
TRUSTED_DIR = "trusted"  # public keys (*.pub) of other performers this machine trusts
SIG_SUFFIX = ".sig"
CONFIGURED = "configured"  # write_reports / write_summary: sign with the configured key, if any
RULE_KEY = "decision_rule_sha256"  # a gate record's statement: the SHA-256 of its rule's text


class SignatureProblem(Exception):
    """A .sig file that cannot be read or does not verify; the message says why."""


def key_dir() -> Path:
    """Where `kvgate key new` puts the performer's key: $KVGATE_KEY_DIR or ~/.config/kvgate."""
    if os.environ.get(KEY_DIR_ENV):
        return Path(os.environ[KEY_DIR_ENV]).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "kvgate"


def grouped(fingerprint: str) -> str:
    """A fingerprint as people compare it: 64 hex digits in groups of four."""
    return " ".join(fingerprint[i:i + 4] for i in range(0, len(fingerprint), 4))


@dataclass(frozen=True)
class PublicKey:
    """An ed25519 public key (32 raw bytes) and the fingerprint kvgate names it by."""

    raw: bytes

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the raw public key, 64 hex digits."""
        return hashlib.sha256(self.raw).hexdigest()

    @property
    def text(self) -> str:
        """The raw key in base64, as reports and .sig files print it."""
        return base64.b64encode(self.raw).decode()

    def pem(self) -> str:
        """The key as a PEM SubjectPublicKeyInfo (the .pub file)."""
        key = Ed25519PublicKey.from_public_bytes(self.raw)
        return key.public_bytes(serialization.Encoding.PEM,
                                serialization.PublicFormat.SubjectPublicKeyInfo).decode()

    def verify(self, signature: bytes, data: bytes) -> bool:
        """Whether signature is this key's ed25519 signature of data."""
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
        except InvalidSignature:
            return False
        return True


class Signer:
    """The performer's private key: signs statements and names its public key."""

    def __init__(self, key: Ed25519PrivateKey, path: Path | None = None):
        self._key, self.path = key, path
        self.public = PublicKey(key.public_key().public_bytes(serialization.Encoding.Raw,
                                                              serialization.PublicFormat.Raw))

    def sign(self, statement: dict) -> dict:
        """The .sig body for a statement: the statement, the signature and the public key."""
        signature = self._key.sign(statement_bytes(statement))
        return {"kind": KIND, "algorithm": ALGORITHM, "statement": statement,
                "public_key": self.public.text, "fingerprint": self.public.fingerprint,
                "signature": base64.b64encode(signature).decode()}


class DuplicateKey(ValueError):
    """A JSON object that names one key twice: readers disagree on which value it holds."""


def _refuse_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            # A first-wins reader and Python's last-wins parser would see two different files.
            raise DuplicateKey(f"the key {key!r} appears twice in one object (readers differ on "
                               "which value counts)")
        seen[key] = value
    return seen


def strict_json(text: str):
    """JSON as every reader sees it alike: an object naming one key twice is refused, by key."""
    return json.loads(text, object_pairs_hook=_refuse_duplicates)


def digest_text(text: str) -> str:
    """SHA-256 of a text's UTF-8 bytes (the decision rule a signature covers)."""
    return hashlib.sha256(text.encode()).hexdigest()


def statement_bytes(statement: dict) -> bytes:
    """The exact bytes a signature covers: the statement as compact JSON with sorted keys."""
    return json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()


def statement(file: str, sha256: str, report: str, report_sha256: str,
              decision_rule: str | None = None) -> dict:
    """What a signature vouches for: a JSON's canonical digest and its report's own SHA-256.

    A gate record's decision rule is written beside the record (its hash leaves it out), so
    the statement names the rule's SHA-256 too: the rule a verdict was reached by is signed.
    """
    signed = {"kind": KIND, "file": file, "sha256": sha256, "report": report,
              "report_sha256": report_sha256}
    return signed | ({RULE_KEY: digest_text(decision_rule)} if decision_rule is not None else {})


def sig_path(path: Path) -> Path:
    """The detached signature of a file: <file>.sig beside it."""
    return path.with_name(path.name + SIG_SUFFIX)


def write_signature(path: Path, signer: Signer, signed: dict) -> Path:
    """Write <file>.sig for a statement about path; never overwrites."""
    return write_new(sig_path(path), json.dumps(signer.sign(signed), indent=2) + "\n")


def read_signature(sig: Path) -> tuple[dict, PublicKey]:
    """(statement, signer) of a .sig file whose signature verifies; SignatureProblem if not."""
    try:
        body = strict_json(sig.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SignatureProblem(f"unreadable ({exc.__class__.__name__}: {exc})") from None
    return check_signature(body)


def check_signature(body: object) -> tuple[dict, PublicKey]:
    """(statement, signer) of a signature body (a .sig file's, a waiver's) that verifies."""
    try:
        signed, key = body["statement"], PublicKey(base64.b64decode(body["public_key"],
                                                                    validate=True))
        signature = base64.b64decode(body["signature"], validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise SignatureProblem(f"unreadable ({exc.__class__.__name__}: {exc})") from None
    if body.get("algorithm") != ALGORITHM or len(key.raw) != 32 or not isinstance(signed, dict):
        raise SignatureProblem(f"not an {ALGORITHM} signature of a kvgate statement")
    if body.get("fingerprint") != key.fingerprint:
        raise SignatureProblem("names a fingerprint that is not its public key's")
    if not key.verify(signature, statement_bytes(signed)):
        raise SignatureProblem("signature invalid: it does not verify with the public key it "
                               f"names ({grouped(key.fingerprint)})")
    return signed, key


# ---- keys on disk ---------------------------------------------------------------------------

def new_key(folder: Path) -> tuple[Path, Path, PublicKey]:
    """Create a key pair in folder (private key mode 0600); an existing key is never replaced."""
    folder = Path(folder).expanduser()
    private, public = folder / PRIVATE_NAME, folder / PUBLIC_NAME
    for path in (private, public):
        if path.exists():
            raise FileExistsError(f"{path} already exists; kvgate never overwrites a key "
                                  "(choose another folder with --out)")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    handle = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(handle, "wb") as out:
        out.write(pem)
    signer = Signer(key, private)
    write_new(public, signer.public.pem())
    return private, public, signer.public


KEY_FILE_MAX = 64 * 1024  # a PEM key is a few hundred bytes


def key_bytes(path: Path) -> tuple[bytes, int]:
    """A key file's bytes and mode; ValueError unless it is a regular file of key size.

    Checked before reading: a FIFO would block the run forever, /dev/zero never ends.
    """
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("is not a regular file (a FIFO, device or directory): give the path "
                         "of the key file itself")
    if info.st_size > KEY_FILE_MAX:
        raise ValueError(f"is {info.st_size:,} bytes, not a key (at most {KEY_FILE_MAX:,})")
    return path.read_bytes(), info.st_mode


def load_signer(path: Path) -> Signer:
    """The private key in a file (PEM PKCS#8, or 32 raw bytes); ConfigError naming the file."""
    path = Path(path).expanduser()
    try:
        data, mode = key_bytes(path)
    except OSError as exc:
        raise ConfigError(path, [f"signing key unreadable: {exc.strerror or exc}"]) from None
    except ValueError as exc:
        raise ConfigError(path, [f"signing key {exc}"]) from None
    if mode & 0o077:
        raise ConfigError(path, [f"signing key is readable by others (mode {mode & 0o777:o}): "
                                 f"chmod 600 {path}"])
    try:
        key = (Ed25519PrivateKey.from_private_bytes(data) if len(data) == 32
               else serialization.load_pem_private_key(data, password=None))
    except (ValueError, TypeError) as exc:
        raise ConfigError(path, [f"not an unencrypted ed25519 private key ({exc})"]) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(path, ["not an ed25519 private key"])
    return Signer(key, path)


def configured_signer() -> Signer | None:
    """$KVGATE_SIGNING_KEY's key, else the key in key_dir(), else None (records unsigned)."""
    if os.environ.get(KEY_ENV):
        return load_signer(Path(os.environ[KEY_ENV]))
    default = key_dir() / PRIVATE_NAME
    return load_signer(default) if default.exists() else None


def load_public(path: Path) -> PublicKey:
    """A public key file: PEM (the .pub kvgate writes), base64 of the raw key, or 32 raw bytes."""
    try:
        data = key_bytes(Path(path).expanduser())[0]
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    try:
        if b"-----BEGIN" not in data:
            raw = data if len(data) == 32 else base64.b64decode(data.strip(), validate=True)
        elif isinstance(key := serialization.load_pem_public_key(data), Ed25519PublicKey):
            raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        else:
            raw = b""
    except (ValueError, TypeError, UnsupportedAlgorithm, binascii.Error) as exc:
        raise ValueError(f"{path}: not a readable public key ({exc})") from None
    if len(raw) != 32:
        raise ValueError(f"{path}: not an ed25519 public key (expected 32 bytes)")
    return PublicKey(raw)


def own_public() -> PublicKey | None:
    """This machine's performer key (the configured key's public half), or None."""
    signer = configured_signer()
    if signer is not None:
        return signer.public
    public = key_dir() / PUBLIC_NAME
    return load_public(public) if public.is_file() else None


def trusted_fingerprint(given: str) -> str:
    """The fingerprint a --key argument names: a public key file or the fingerprint itself."""
    path = Path(given).expanduser()
    if path.is_file():
        return load_public(path).fingerprint
    digits = re.sub(r"[\s:]", "", given).lower()
    if re.fullmatch(r"[0-9a-f]{64}", digits):
        return digits
    raise ValueError(f"--key {given}: neither a public key file nor a 64-digit fingerprint")


def trusted_here() -> set[str]:
    """Fingerprints trusted without --key: the own key and <key dir>/trusted/*.pub."""
    own = own_public()
    folder = key_dir() / TRUSTED_DIR
    others = sorted(folder.glob("*.pub")) if folder.is_dir() else []
    return {k.fingerprint for k in [own, *map(load_public, others)] if k is not None}
