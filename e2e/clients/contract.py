"""The command line of e2e/clients/CONTRACT.md, shared by the Python
drivers (python/, kcat/): each passes its handlers and gets the parsing,
the exit status and the one-line failure reason the contract asks for."""

import argparse
import sys


def security_protocol(args):
    """librdkafka's security.protocol for the connection flags."""
    sasl = "SASL_" if args.sasl_mechanism else ""
    return sasl + ("SSL" if args.tls_ca else "PLAINTEXT")


def tls_conf(args):
    """librdkafka's TLS settings (PEM files) for the connection flags; it
    verifies the broker's name, IP addresses included, by default."""
    if not args.tls_ca:
        return {}
    conf = {"ssl.ca.location": args.tls_ca}
    if args.tls_cert:
        conf.update({"ssl.certificate.location": args.tls_cert, "ssl.key.location": args.tls_key})
    return conf


class Failure(Exception):
    """A one-line reason to exit non-zero with."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parser(doc, handlers):
    """An argparse parser for the contract's commands; handlers maps each
    command name to the function that runs it."""
    p = argparse.ArgumentParser(description=doc)
    sub = p.add_subparsers(dest="command", required=True)

    def cmd(name, connects=True):
        s = sub.add_parser(name)
        s.set_defaults(fn=handlers[name])
        if connects:
            s.add_argument("--bootstrap", required=True)
            s.add_argument("--sasl-mechanism")
            s.add_argument("--sasl-user")
            s.add_argument("--sasl-password")
            s.add_argument("--tls-ca")
            s.add_argument("--tls-cert")
            s.add_argument("--tls-key")
        return s

    cmd("features", connects=False)
    s = cmd("produce")
    s.add_argument("--topic", required=True)
    s.add_argument("--input", required=True)
    s.add_argument("--acks", required=True)
    s.add_argument("--compression", required=True)
    s.add_argument("--idempotent", action="store_true")
    s.add_argument("--transactional-id")
    s.add_argument("--aborted")
    s.add_argument("--pace-ms", type=int, default=0)
    s.add_argument("--faults", action="store_true")
    s = cmd("consume")
    s.add_argument("--topic", required=True)
    s.add_argument("--group", required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--timeout-ms", type=int, required=True)
    s.add_argument("--protocol", required=True)
    s.add_argument("--read-committed", action="store_true")
    s.add_argument("--members", type=int, default=1)
    s.add_argument("--faults", action="store_true")
    s.add_argument("--output", required=True)
    s = cmd("admin")
    s.add_argument("--topic", required=True)
    s.add_argument("--partitions", type=int, required=True)
    s = cmd("create-topic")
    s.add_argument("--topic", required=True)
    s.add_argument("--partitions", type=int, required=True)
    s = cmd("delete-topic")
    s.add_argument("--topic", required=True)
    s = cmd("perf")
    s.add_argument("--topic")
    s.add_argument("--count")
    s.add_argument("--size")
    return p


def run(doc, handlers, errors=(Failure,)):
    """Parses the command line, runs its handler and returns the exit
    status: 1 with the reason on stderr for any of errors."""
    args = parser(doc, handlers).parse_args()
    try:
        return args.fn(args) or 0
    except errors as e:
        log(f"error: {e}")
        return 1
