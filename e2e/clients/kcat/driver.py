#!/usr/bin/env python3
"""kcat driver for the kproxy e2e compatibility suite: one command per run,
as described in ../CONTRACT.md. It runs the kcat command-line tool (which
links librdkafka) and uses the Python standard library only.

stdout carries only the features JSON; kcat's stderr is passed through.
Its consumers run quiet (-q); its producer does not, as -q also hides
the "Delivery failed for message: <error>" line of a record the broker
(or kproxy) refused, the one place kcat says why.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import sys
import threading
import time

# The contract's command line is shared with the other Python driver.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import contract  # noqa: E402
from contract import Failure, log  # noqa: E402

KCAT = os.environ.get("KCAT", "kcat")
COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
# --faults (the network fails for seconds at a time): kcat exits on the
# first "all broker connections are down" that librdkafka reports, which
# one reset of the only broker's connection is, unless -E ("do not exit on
# non-fatal error"); librdkafka's own retries ride the fault out, an
# undelivered record still makes kcat -P exit non-zero, and a fatal error
# still ends it.
FAULTS_FLAG = "-E"


def versions():
    """(kcat version, librdkafka version) from `kcat -V`."""
    if shutil.which(KCAT) is None:
        raise Failure(f"{KCAT} is not on PATH: apt-get install -y kcat")
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, check=False)
    text = out.stdout + out.stderr
    m = re.search(r"Version (\S+) .*?librdkafka (\d+(?:\.\d+)+)", text)
    if not m:
        raise Failure(f"cannot read the versions from `{KCAT} -V`: {text.strip()!r}")
    return m.group(1), m.group(2)


def vtuple(v):
    return tuple(int(x) for x in v.split("."))


def unsupported(librdkafka):
    u = {
        "transactions": "kcat produces all its input in one transaction that it commits "
                        "(-X transactional.id); it aborts only when interrupted, so it cannot "
                        "abort a transaction on purpose and then commit another",
        "admin": "kcat cannot create or delete topics (it only lists metadata, -L)",
        "perf-tools": "ships no load tools",
    }
    if vtuple(librdkafka) < (2, 6, 1):
        u["sasl-scram512"] = (f"kcat's librdkafka {librdkafka} repeats the client nonce in its SCRAM "
                              "client-final-message (fixed in librdkafka 2.6.1, confluentinc/librdkafka#4895): "
                              "Kafka 4.x brokers reject it as invalid credentials (3.9 brokers still accept it)")
    if vtuple(librdkafka) < (2, 5):
        u["client-metrics"] = (f"kcat's librdkafka {librdkafka} predates client metrics push "
                               "(KIP-714, from librdkafka 2.5.0)")
    if vtuple(librdkafka) < (2, 10):
        u["kip848"] = (f"kcat's librdkafka {librdkafka} predates the KIP-848 consumer group "
                       "protocol (group.protocol=consumer, generally available from librdkafka 2.10)")
    return u


def conn_args(args):
    a = ["-b", args.bootstrap, "-X", f"security.protocol={contract.security_protocol(args)}"]
    for k, v in contract.tls_conf(args).items():
        a += ["-X", f"{k}={v}"]
    if args.sasl_mechanism:
        if args.sasl_mechanism not in ("PLAIN", "SCRAM-SHA-512"):
            raise Failure(f"SASL mechanism {args.sasl_mechanism} is not supported")
        a += ["-X", f"sasl.mechanisms={args.sasl_mechanism}",
              "-X", f"sasl.username={args.sasl_user}",
              "-X", f"sasl.password={args.sasl_password}"]
    return a


def count_lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip("\n"))


def produce(args):
    if args.acks not in ("all", "1", "0"):
        raise Failure(f"unknown acks {args.acks}")
    if args.compression not in COMPRESSION:
        raise Failure(f"unknown compression {args.compression}")
    if args.transactional_id:
        raise Failure("transactions: " + unsupported(versions()[1])["transactions"])
    if args.idempotent and args.acks != "all":
        raise Failure("an idempotent producer needs --acks all")
    want = count_lines(args.input)
    # -l reads FILE (stdin without it) split by -D (newline) into records,
    # each split at the first -K delimiter into key and value. kcat exits non-zero when a
    # record was not delivered (acks=all) or not written (acks=0).
    cmd = [KCAT, "-P", *conn_args(args), "-t", args.topic, "-K", "\\t",
           "-X", f"acks={args.acks}",
           "-X", f"compression.codec={args.compression}",
           "-X", f"enable.idempotence={'true' if args.idempotent else 'false'}",
           "-m", "30"]
    if args.faults:
        cmd.append(FAULTS_FLAG)
    if args.pace_ms > 0:
        returncode, stderr = produce_paced(cmd, args.input, args.pace_ms / 1000)
    else:
        p = subprocess.run(cmd + ["-l", args.input], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        returncode, stderr = p.returncode, p.stderr
    if stderr:
        sys.stderr.write(stderr)
    if returncode != 0:
        lines = stderr.strip().splitlines()
        failed = [line for line in lines if "Delivery failed" in line]
        why = (failed or lines[-1:] or ["no message"])[0]
        more = f" ({len(failed)} records)" if len(failed) > 1 else ""
        raise Failure(f"kcat -P exited {returncode} for {want} records: {why}{more}")


def produce_paced(cmd, path, pace):
    """Runs kcat -P reading its records from stdin (it produces each line
    as it reads it) and feeds it the lines of path one by one, pace seconds
    apart, so one kcat stays connected for the whole run. Returns kcat's
    exit status and stderr (kept in a file: a pipe left unread could fill
    and stall kcat)."""
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as err:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, text=True)
        try:
            with open(path, encoding="utf-8") as f:
                for i, line in enumerate(l for l in f if l.strip("\n")):
                    if i > 0:
                        time.sleep(pace)
                    p.stdin.write(line if line.endswith("\n") else line + "\n")
                    p.stdin.flush()
        except BrokenPipeError:
            pass  # kcat exited early; its status and stderr say why
        finally:
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass
        rc = p.wait()
        err.seek(0)
        return rc, err.read()


def consume(args):
    librdkafka = versions()[1]
    if args.protocol == "consumer" and "kip848" in unsupported(librdkafka):
        raise Failure("group protocol consumer: " + unsupported(librdkafka)["kip848"])
    if args.protocol not in ("classic", "consumer"):
        raise Failure(f"unknown group protocol {args.protocol}")
    # -G is the balanced consumer: it joins the group, starts from the
    # committed offsets (else auto.offset.reset) and auto-commits (on by
    # default) the offsets of what it printed, every second and when it
    # closes on SIGTERM. It runs until stopped: -e would stop it at the
    # first end of the partitions (before records produced later) and -c
    # counts only one member's records, so this wrapper counts the keys
    # of all members and stops them.
    cmd = [KCAT, "-q", "-u", *conn_args(args), "-G", args.group,
           "-X", "auto.offset.reset=earliest",
           "-X", "auto.commit.interval.ms=1000",
           "-X", "isolation.level=" + ("read_committed" if args.read_committed else "read_uncommitted"),
           "-f", "%p\\t%k\\t%h\\t%s\\n"]
    if args.protocol == "consumer":
        cmd += ["-X", "group.protocol=consumer"]
    if args.faults:
        cmd.append(FAULTS_FLAG)
    cmd.append(args.topic)
    lock = threading.Lock()
    seen = set()
    done = threading.Event()
    out = open(args.output, "a", encoding="utf-8")
    procs = []
    bad = []

    def read(m, p):
        for line in p.stdout:
            parts = line.rstrip("\n").split("\t", 3)
            if len(parts) != 4:
                with lock:
                    bad.append(f"member {m}: unexpected kcat output {line!r}")
                continue
            part, key, headers, value = parts
            # %h is the headers as key=value pairs joined by commas (a
            # traceparent has neither character).
            tp = next((h.split("=", 1)[1] for h in headers.split(",") if h.startswith("traceparent=")), "")
            with lock:
                out.write(f"{m}\t{part}\t{key}\t{value}\t{tp}\n")
                out.flush()
                seen.add(key)
                if len(seen) >= args.count:
                    done.set()

    readers = []
    for m in range(args.members):
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, stdin=subprocess.DEVNULL,
                             text=True, encoding="utf-8")
        procs.append(p)
        t = threading.Thread(target=read, args=(m, p), daemon=True)
        t.start()
        readers.append(t)

    deadline = time.monotonic() + args.timeout_ms / 1000
    early = None
    while not done.is_set() and time.monotonic() < deadline:
        for m, p in enumerate(procs):
            if p.poll() is not None:
                early = f"kcat member {m} exited {p.returncode} before {args.count} keys arrived"
                break
        if early:
            break
        done.wait(0.1)

    # SIGTERM makes kcat close its consumer: it commits and leaves the group.
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for t in readers:
        t.join(5)
    out.close()
    if bad:
        raise Failure("; ".join(bad[:3]))
    if len(seen) >= args.count:
        return 0
    if early:
        raise Failure(f"{early} ({len(seen)} arrived)")
    log(f"timeout: {len(seen)} of {args.count} keys after {args.timeout_ms}ms")
    return 3


def admin(_args):
    raise Failure("admin: " + unsupported(versions()[1])["admin"])


def create_topic(_args):
    raise Failure("create-topic: " + unsupported(versions()[1])["admin"])


def delete_topic(_args):
    raise Failure("delete-topic: " + unsupported(versions()[1])["admin"])


def perf(_args):
    raise Failure("perf: ships no load tools")


def features(_args):
    kcat, librdkafka = versions()
    print(json.dumps({"name": f"kcat {kcat} (librdkafka {librdkafka})", "unsupported": unsupported(librdkafka)}))


def main():
    return contract.run(__doc__, {"features": features, "produce": produce, "consume": consume, "admin": admin,
                                  "create-topic": create_topic, "delete-topic": delete_topic, "perf": perf})


if __name__ == "__main__":
    sys.exit(main())
