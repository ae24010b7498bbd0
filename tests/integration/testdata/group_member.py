#!/usr/bin/env python3
"""A consumer-group member for the integration tests (groups_clients_test.go,
churn_test.go): joins GROUP on TOPIC with kafka-python or confluent-kafka,
and for every batch it polls prints one line
"rec <partition> <offset>" per record, flushes, then commits synchronously
(at least once). Prints "assigned <n>" when its assignment changes. On
SIGTERM it stops polling and closes (leaving the group).

PROTOCOL is confluent-kafka's group.protocol: classic (the default) or
consumer (KIP-848: ConsumerGroupHeartbeat, the broker assigns; the
session and heartbeat settings are the broker's then, so they are not set).
kafka-python speaks the classic protocol only.

Usage: group_member.py kafka-python|confluent-kafka BOOTSTRAP GROUP TOPIC [PROTOCOL]
"""
import signal
import sys

lib, bootstrap, group, topic = sys.argv[1:5]
protocol = sys.argv[5] if len(sys.argv) > 5 else "classic"
running = [True]
signal.signal(signal.SIGTERM, lambda *a: running.__setitem__(0, False))


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if lib == "kafka-python":
    if protocol != "classic":
        sys.exit("kafka-python has no group.protocol=%s" % protocol)
    from kafka import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=6000,
                      heartbeat_interval_ms=500, request_timeout_ms=15000, fetch_max_wait_ms=200)
    c.subscribe([topic])
    last = None
    while running[0]:
        batch = c.poll(timeout_ms=200)
        n = len(c.assignment())
        if n != last:
            out("assigned %d" % n)
            last = n
        if not batch:
            continue
        for tp, recs in batch.items():
            for r in recs:
                out("rec %d %d" % (r.partition, r.offset))
        try:
            c.commit()
        except Exception as e:  # a rebalance: the next owner reads these again
            print("commit failed: %r" % e, file=sys.stderr, flush=True)
    c.close(autocommit=False)
else:
    from confluent_kafka import Consumer
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 200}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c = Consumer(conf)
    c.subscribe([topic])
    last = None
    while running[0]:
        msgs = c.consume(num_messages=500, timeout=0.2)
        n = len(c.assignment())
        if n != last:
            out("assigned %d" % n)
            last = n
        got = [m for m in msgs if not m.error()]
        if not got:
            continue
        for m in got:
            out("rec %d %d" % (m.partition(), m.offset()))
        try:
            c.commit(asynchronous=False)
        except Exception as e:
            print("commit failed: %r" % e, file=sys.stderr, flush=True)
    c.close()
