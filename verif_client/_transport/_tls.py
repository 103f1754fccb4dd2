"""The pool's TLS context: whose certificates it trusts, and the client certificate it shows."""

from __future__ import annotations

import os
import ssl
from typing import TypeAlias

CertFile: TypeAlias = str | os.PathLike[str]
# httpx's shapes: one PEM file holding certificate and key, (certificate, key),
# or (certificate, key, key password).
CertTypes: TypeAlias = CertFile | tuple[CertFile, CertFile] | tuple[CertFile, CertFile, str]

# What OpenSSL says when a server wanted a client certificate and did not like
# ours (or got none): under TLS 1.3 that comes after the handshake, as the
# answer to the first request.
_WANTED_A_CERTIFICATE = (
    "CERTIFICATE_REQUIRED",
    "certificate required",
    "BAD_CERTIFICATE",
    "bad certificate",
    "UNKNOWN_CA",
    "unknown ca",
)
# What a TLS 1.2 server says for that, and for other refusals too (no common cipher).
_HANDSHAKE_REFUSED = ("SSLV3_ALERT_HANDSHAKE_FAILURE", "sslv3 alert handshake failure")


class ClientCert:
    """A checked ``cert=``: files that exist and load, a key that fits."""

    __slots__ = ("certfile", "keyfile", "password")

    def __init__(self, cert: CertTypes) -> None:
        parts = (cert,) if isinstance(cert, str | os.PathLike) else tuple(cert)
        if not 1 <= len(parts) <= 3 or not all(
            isinstance(part, str | os.PathLike) for part in parts[:2]
        ):
            raise ValueError(
                "cert: give a PEM file holding certificate and key, (cert_path, key_path) "
                "or (cert_path, key_path, password)"
            )
        self.certfile = os.fspath(parts[0])
        self.keyfile = os.fspath(parts[1]) if len(parts) > 1 else None
        password = parts[2] if len(parts) > 2 else None
        if password is not None and not isinstance(password, str):
            raise ValueError("cert: the key's password must be a str")
        self.password: str | None = password
        # Loaded once here, into a context thrown away (no CA bundle: cheap),
        # so a wrong path, password or key fails at construction, not on the
        # first call.
        self.load_into(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))

    def __repr__(self) -> str:
        return f"<ClientCert {self.certfile}>"

    def load_into(self, context: ssl.SSLContext) -> None:
        # Named one by one: OpenSSL's FileNotFoundError names no file, and
        # "no such file: cert.pem" for a missing key.pem sends one looking
        # at the wrong file.
        for path in (self.certfile, self.keyfile):
            if path is not None and not os.path.exists(path):
                raise ValueError(f"cert: no such file: {path}")
        try:
            # Without a password, OpenSSL asks for one on the terminal ("Enter
            # PEM pass phrase:") and waits there: a construction that never
            # ends, and a prompt nobody expects. A callable is asked instead.
            context.load_cert_chain(self.certfile, self.keyfile, self.password or _no_password)
        except _KeyLocked:
            raise ValueError(
                f"cert: {self._shown()}: the key is encrypted and no password was given "
                "(cert=(cert_path, key_path, password))"
            ) from None
        except FileNotFoundError as exc:
            raise ValueError(f"cert: no such file: {exc.filename or self.certfile}") from None
        except (ssl.SSLError, OSError) as exc:
            problem = "no key, or a key that does not fit the certificate or the password"
            raise ValueError(
                f"cert: {self._shown()}: cannot load ({problem}; {type(exc).__name__})"
            ) from None

    def _shown(self) -> str:
        return f"{self.certfile}" + (f", {self.keyfile}" if self.keyfile else "")


class _KeyLocked(Exception):
    """OpenSSL asked for the key's password, and none was given."""


def _no_password() -> str:
    raise _KeyLocked


def trusted_from_environment() -> tuple[str | None, str | None]:
    """``SSL_CERT_FILE`` or ``SSL_CERT_DIR``: the CAs to trust instead of
    certifi's, as httpx reads them (unless ``trust_env=False``)."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    return cafile, None if cafile else (os.environ.get("SSL_CERT_DIR") or None)


def tls_context(
    verify: bool | ssl.SSLContext,
    cert: ClientCert | None,
    trusted: tuple[str | None, str | None] = (None, None),
) -> ssl.SSLContext:
    """The context the pool's connections use.

    A context of yours (``verify=``) is used as it is; ``cert=`` is loaded
    into it (the certificate given as ``cert=`` wins over one loaded before).
    ``trusted`` is (cafile, capath) from the environment, else certifi's bundle.
    """
    if isinstance(verify, ssl.SSLContext):
        context = verify
    else:
        cafile, capath = trusted
        if cafile is None and capath is None:
            cafile = _ca_bundle()
        context = ssl.create_default_context(cafile=cafile, capath=capath)
        if not verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        context.set_alpn_protocols(["http/1.1"])
    if cert is not None:
        cert.load_into(context)
    return context


def certificate_refused(reason: str) -> bool | None:
    """Whether a TLS failure says the server wanted (another) client certificate:
    True when it says so, None when it may (a bare handshake failure), else False."""
    if any(mark in reason for mark in _WANTED_A_CERTIFICATE):
        return True
    return None if any(mark in reason for mark in _HANDSHAKE_REFUSED) else False


def _ca_bundle() -> str | None:
    # The same trust as httpx gave before this pool: certifi's bundle when it
    # is installed (it comes with httpx), the system's otherwise.
    try:
        import certifi
    except ImportError:  # pragma: no cover
        return None
    return str(certifi.where())
