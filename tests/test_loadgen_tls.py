"""The load generator over TLS on loopback: a real handshake, the stream read, the cert checked."""

import asyncio
import datetime
import ipaddress
import ssl

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from test_loadgen_keepalive import RESPONSE, Req, read_request

from gates.core.verdicts import RequestOutcome
from gates.loadgen import Endpoint, LoadSettings, run_phase


def self_signed(folder):
    """A certificate for 127.0.0.1 and its key, as PEM files in folder."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kvgate test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return folder / "cert.pem", folder / "key.pem"


def run_over_tls(cert, key, count=4):
    async def handle(reader, writer):
        while await read_request(reader) is not None:
            writer.write(RESPONSE)
            await writer.drain()
        writer.close()

    async def main():
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server:
            return await run_phase([Req(f"r{i}", [i]) for i in range(count)],
                                   [Endpoint(url=url, model="m")],
                                   LoadSettings(concurrency=2, stall_timeout=10))

    return asyncio.run(main())


def test_a_tls_server_the_client_trusts_streams_like_plain_http(tmp_path, monkeypatch):
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # OpenSSL's default trust store, for this run
    result = run_over_tls(cert, key)
    assert [r.outcome for r in result.records] == [RequestOutcome.OK] * 4
    assert all(r.output_tokens == 1 and r.ttft is not None for r in result.records)


def test_a_certificate_the_client_does_not_trust_is_refused_saying_so(tmp_path, monkeypatch):
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "none.pem"))
    records = run_over_tls(cert, key, count=1).records
    assert records[0].outcome is RequestOutcome.HTTP_ERROR
    assert "cannot connect: " in records[0].error and "certificate verify failed" in \
        records[0].error
