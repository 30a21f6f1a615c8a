#!/usr/bin/env python3
"""confluent-kafka (Python, librdkafka) driver for the kproxy e2e
compatibility suite: one command per run, as described in ../CONTRACT.md.

stdout carries only the features JSON; librdkafka logs to stderr.
"""

import json
import os
import sys
import threading
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

# The contract's command line is shared with the other Python driver.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import contract  # noqa: E402
from contract import Failure, log  # noqa: E402

UNSUPPORTED = {"perf-tools": "ships no load tools"}


def base_conf(args, client_id):
    conf = {
        "bootstrap.servers": args.bootstrap,
        "client.id": client_id,
        "log_level": 4,  # warnings and errors
        "security.protocol": contract.security_protocol(args),
    }
    conf.update(contract.tls_conf(args))
    if args.sasl_mechanism:
        if args.sasl_mechanism not in ("PLAIN", "SCRAM-SHA-512"):
            raise Failure(f"SASL mechanism {args.sasl_mechanism} is not supported")
        conf.update({
            "sasl.mechanism": args.sasl_mechanism,
            "sasl.username": args.sasl_user,
            "sasl.password": args.sasl_password,
        })
    return conf


def read_records(path):
    recs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            key, sep, value = line.partition("\t")
            if not sep:
                raise Failure(f"{path} line {n}: no tab")
            recs.append((key, value))
    return recs


def produce(args):
    if args.acks not in ("all", "1", "0"):
        raise Failure(f"unknown acks {args.acks}")
    if (args.idempotent or args.transactional_id) and args.acks != "all":
        raise Failure("an idempotent or transactional producer needs --acks all")
    if args.compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise Failure(f"unknown compression {args.compression}")
    conf = base_conf(args, "kproxy-e2e-confluent-producer")
    conf.update({
        "acks": args.acks,
        "compression.type": args.compression,
        "linger.ms": 5,
        "enable.idempotence": bool(args.idempotent or args.transactional_id),
    })
    if args.transactional_id:
        conf["transactional.id"] = args.transactional_id
    recs = read_records(args.input)
    errors = []

    def delivered(err, _msg):
        if err is not None:
            errors.append(err)

    p = Producer(conf)

    def send(batch, pace=0.0):
        for i, (key, value) in enumerate(batch):
            if pace and i > 0:
                # Waits pace, serving delivery reports meanwhile (poll
                # returns early once it served one).
                until = time.monotonic() + pace
                while (left := until - time.monotonic()) > 0:
                    p.poll(left)
            while True:
                try:
                    p.produce(args.topic, key=key.encode(), value=value.encode(), on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
        left = p.flush(60)
        if left:
            raise Failure(f"{left} records still unacknowledged after 60s")
        if errors:
            raise Failure(f"{len(errors)} records failed, first: {errors[0]}")

    if args.transactional_id:
        if not args.aborted:
            raise Failure("--transactional-id needs --aborted")
        aborted = read_records(args.aborted)
        p.init_transactions(60)
        p.begin_transaction()
        send(aborted)  # flushed, so the aborted records are in the log
        p.abort_transaction(60)
        p.begin_transaction()
        send(recs)
        p.commit_transaction(60)
    else:
        send(recs, args.pace_ms / 1000)


def consume(args):
    if args.protocol not in ("classic", "consumer"):
        raise Failure(f"unknown group protocol {args.protocol}")
    out = open(args.output, "a", encoding="utf-8")
    lock = threading.Lock()
    seen = set()
    stop = threading.Event()
    failures = []

    def member(m):
        conf = base_conf(args, f"kproxy-e2e-confluent-consumer-{m}")
        conf.update({
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # librdkafka's default is read_committed: say which one.
            "isolation.level": "read_committed" if args.read_committed else "read_uncommitted",
        })
        # With the consumer protocol (KIP-848) the broker assigns partitions
        # and owns the session timeout: the classic-only settings
        # (partition.assignment.strategy, session.timeout.ms,
        # heartbeat.interval.ms) are rejected, so none is set here.
        conf["group.protocol"] = args.protocol
        c = Consumer(conf)
        try:
            c.subscribe([args.topic])
            while not stop.is_set():
                msgs = c.consume(500, 0.2)
                got = False
                for msg in msgs:
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        if err.fatal():
                            raise KafkaException(err)
                        log(f"member {m}: {err}")
                        continue
                    got = True
                    key = (msg.key() or b"").decode()
                    value = (msg.value() or b"").decode()
                    tp = next((v.decode() for k, v in (msg.headers() or []) if k == "traceparent" and v is not None), "")
                    with lock:
                        out.write(f"{m}\t{msg.partition()}\t{key}\t{value}\t{tp}\n")
                        seen.add(key)
                if got:
                    with lock:
                        out.flush()
                        if len(seen) >= args.count:
                            stop.set()
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException as e:
                        # A rebalance may revoke the partitions first.
                        log(f"member {m}: commit: {e}")
        except Exception as e:  # reported by the main thread
            with lock:
                failures.append(f"member {m}: {e}")
            stop.set()
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(m,), daemon=True) for m in range(args.members)]
    for t in threads:
        t.start()
    stop.wait(args.timeout_ms / 1000)
    stop.set()
    for t in threads:
        t.join(30)
    out.close()
    if failures:
        raise Failure("; ".join(failures))
    if len(seen) < args.count:
        log(f"timeout: {len(seen)} of {args.count} keys after {args.timeout_ms}ms")
        return 3
    return 0


def admin(args):
    a = AdminClient(base_conf(args, "kproxy-e2e-confluent-admin"))
    topic = args.topic
    fs = a.create_topics([NewTopic(topic, num_partitions=args.partitions, replication_factor=1)],
                         operation_timeout=30, request_timeout=60)
    try:
        fs[topic].result(90)
    except KafkaException as e:
        raise Failure(f"create {topic}: {e}")
    deadline = time.monotonic() + 30
    while True:
        try:
            desc = a.describe_topics(TopicCollection([topic]), request_timeout=30)[topic].result(60)
            break
        except KafkaException as e:
            # The metadata may trail the creation for a moment.
            if time.monotonic() > deadline:
                raise Failure(f"describe {topic}: {e}")
            time.sleep(0.2)
    if len(desc.partitions) != args.partitions:
        raise Failure(f"describe {topic}: {len(desc.partitions)} partitions, want {args.partitions}")
    try:
        a.delete_topics([topic], operation_timeout=30, request_timeout=60)[topic].result(90)
    except KafkaException as e:
        raise Failure(f"delete {topic}: {e}")
    deadline = time.monotonic() + 30
    while topic in a.list_topics(timeout=30).topics:
        if time.monotonic() > deadline:
            raise Failure(f"{topic} still listed 30s after its deletion")
        time.sleep(0.2)


def create_topic(args):
    """One create_topics call; its KafkaException (the code's name and
    librdkafka's string for the topic's result) reaches contract.run."""
    a = AdminClient(base_conf(args, "kproxy-e2e-confluent-admin"))
    fs = a.create_topics([NewTopic(args.topic, num_partitions=args.partitions, replication_factor=1)],
                         operation_timeout=30, request_timeout=60)
    fs[args.topic].result(90)


def delete_topic(args):
    a = AdminClient(base_conf(args, "kproxy-e2e-confluent-admin"))
    a.delete_topics([args.topic], operation_timeout=30, request_timeout=60)[args.topic].result(90)


def features(_args):
    name = f"confluent-kafka-python {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
    print(json.dumps({"name": name, "unsupported": UNSUPPORTED}))


def perf(_args):
    raise Failure("perf: ships no load tools")


def main():
    return contract.run(__doc__, {"features": features, "produce": produce, "consume": consume, "admin": admin,
                                  "create-topic": create_topic, "delete-topic": delete_topic, "perf": perf}, errors=(Failure, KafkaException))


if __name__ == "__main__":
    sys.exit(main())
