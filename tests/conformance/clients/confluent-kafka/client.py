#!/usr/bin/env python3
"""confluent-kafka (librdkafka) conformance client: runs scenarios from
../../scenarios.json and prints what confluent-kafka observes, as
PROTOCOL.md prescribes.

Usage: client.py --bootstrap HOST:PORT --prefix P --scenarios a,b,c
"""
import os
import sys
import time

from confluent_kafka import (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,
                             Consumer, KafkaError, KafkaException, OFFSET_BEGINNING,
                             Producer, TopicCollection, TopicPartition)
from confluent_kafka.admin import AdminClient, OffsetSpec

BASE_TS = 1700000000000

# librdkafka's positive error codes are the protocol's codes, but its names
# are its own (UNKNOWN_TOPIC_OR_PART, MSG_SIZE_TOO_LARGE, ...): map the code
# to the name the protocol uses (Kafka's Errors enum).
# The error-name table is shared with the other Python clients.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from protocol import PROTOCOL_NAMES, Scenario, log, main  # noqa: E402

# librdkafka's local (negative) codes that stand for a protocol error.
LOCAL_NAMES = {
    # refused locally: the partition/topic is not in the metadata (PROTOCOL.md:
    # "the client's local error mapped to UNKNOWN_TOPIC_OR_PARTITION")
    KafkaError._UNKNOWN_PARTITION: "UNKNOWN_TOPIC_OR_PARTITION",
    KafkaError._UNKNOWN_TOPIC: "UNKNOWN_TOPIC_OR_PARTITION",
    # with auto.offset.reset=error, the broker's OFFSET_OUT_OF_RANGE on a
    # fetch is reported as _AUTO_OFFSET_RESET
    KafkaError._AUTO_OFFSET_RESET: "OFFSET_OUT_OF_RANGE",
    # local timeouts are not broker answers: keep them visibly non-protocol
    KafkaError._MSG_TIMED_OUT: "CLIENT_TIMEOUT",
    KafkaError._TIMED_OUT: "CLIENT_TIMEOUT",
    # the broker refused the SASL login (SaslAuthenticate's error, which
    # librdkafka reports as "SASL authentication error: <broker's message>")
    KafkaError._AUTHENTICATION: "SASL_AUTHENTICATION_FAILED",
}


class OpError(Exception):
    """An operation's failure already named (a delivery report's error)."""

    def __init__(self, name):
        super().__init__(name)
        self.name = name


def error_name(err):
    """Protocol error name for a KafkaError, a KafkaException or another exception."""
    if isinstance(err, OpError):
        return err.name
    if isinstance(err, KafkaException):
        err = err.args[0] if err.args and isinstance(err.args[0], KafkaError) else err
    if isinstance(err, KafkaError):
        code = err.code()
        if code in LOCAL_NAMES:
            return LOCAL_NAMES[code]
        if code >= -1 and code != KafkaError.NO_ERROR:
            return PROTOCOL_NAMES.get(code, "ERROR_%d" % code)
        return "CLIENT_" + err.name().lstrip("_")
    return "CLIENT_%s" % type(err).__name__


def text(b):
    """Bytes as PROTOCOL.md wants them: UTF-8 text, else hex:..., None as null."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + b.hex()



class Ctx(Scenario):
    def __init__(self, *args):
        super().__init__(*args)
        self.security = {}
        self.client_errors = []  # error_cb's errors, in order

    def security_config(self):
        """librdkafka settings for the runner's security flags (PROTOCOL.md
        "Security"); none for PLAINTEXT."""
        s = self.security
        if s.get("protocol") in (None, "PLAINTEXT"):
            return {}
        cfg = {"security.protocol": s["protocol"], "sasl.mechanisms": s["mechanism"],
               "sasl.username": s["username"], "sasl.password": s["password"]}
        if s["protocol"] == "SASL_SSL":
            cfg["ssl.ca.location"] = s["ca_file"]
        return cfg

    def left(self, cap):
        """Seconds left in this scenario's budget, at most cap."""
        return max(0.1, min(cap, self.deadline - time.monotonic()))

    def producer(self, **cfg):
        base = {"bootstrap.servers": self.bootstrap, "acks": "all",
                "message.timeout.ms": 10000, "error_cb": self.on_error}
        base.update(self.security_config())
        base.update(cfg)
        return Producer(base)

    def consumer(self, **cfg):
        # librdkafka insists on a group.id even for assign(); we never commit
        # nor subscribe, so no group is joined and no offsets are stored.
        base = {"bootstrap.servers": self.bootstrap,
                "group.id": "conformance-%s" % self.prefix,
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200,
                "error_cb": self.on_error}
        base.update(self.security_config())
        base.update(cfg)
        return Consumer(base)

    def admin(self):
        return AdminClient({"bootstrap.servers": self.bootstrap, "error_cb": self.on_error,
                            **self.security_config()})

    def on_error(self, err):
        # client-level errors (connection trouble, ...): logged, observed
        # only where a scenario asks for them (a refused SASL login)
        log("%s: client error: %s" % (self.name, err))
        self.client_errors.append(err)


def produce(ctx, records, topic=None, **cfg):
    """Produce records (dicts of produce() kwargs), flush, print each distinct
    error. Returns the number of records the broker acknowledged."""
    topic = topic or ctx.topic
    p = ctx.producer(**cfg)
    errors, acked = [], [0]

    def note(name):
        if name not in errors:
            errors.append(name)

    def on_delivery(err, msg):
        if err is None:
            acked[0] += 1
        else:
            note(error_name(err))

    for r in records:
        try:
            p.produce(topic, on_delivery=on_delivery, **r)
        except (KafkaException, BufferError) as e:  # refused before any request
            note(error_name(e))
    if p.flush(ctx.left(15)) > 0:
        note("CLIENT_TIMEOUT")
    for name in errors:
        ctx.emit({"op": "produce", "error": name})
    return acked[0]


def consume(ctx, partitions, expected, topic=None, max_seconds=None, **cfg):
    """Read `partitions` of topic from the start until `expected` records
    arrived or time ran out; records sorted by (partition, offset)."""
    topic = topic or ctx.topic
    if expected == 0:
        # nothing was acknowledged: still look for 2 s, in case it landed anyway
        expected, max_seconds = float("inf"), 2
    c = ctx.consumer(**cfg)
    out, errors = [], []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        end = ctx.deadline if max_seconds is None else min(ctx.deadline, time.monotonic() + max_seconds)
        while len(out) < expected and time.monotonic() < end:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                name = error_name(m.error())
                if name not in errors:
                    errors.append(name)
                continue
            out.append(m)
    finally:
        c.close()
    for name in errors:
        ctx.emit({"op": "fetch", "error": name})
    out.sort(key=lambda m: (m.partition(), m.offset()))
    return out


def list_offsets(ctx, topic, partition, spec):
    """One ListOffsets query through the admin API: (ListOffsetsResultInfo, error name)."""
    a = ctx.admin()
    tp = TopicPartition(topic, partition)
    try:
        f = a.list_offsets({tp: spec}, request_timeout=ctx.left(10))[tp]
        return f.result(), None
    except Exception as e:
        return None, error_name(e)


def describe(ctx, topic):
    """TopicDescription via the admin API (never auto-creates): (desc, error name)."""
    a = ctx.admin()
    try:
        f = a.describe_topics(TopicCollection([topic]), request_timeout=ctx.left(10))[topic]
        return f.result(), None
    except Exception as e:
        return None, error_name(e)


# ---------------------------------------------------------------- scenarios

def s_metadata_topic(ctx):
    d, err = describe(ctx, ctx.topic)
    if err:
        ctx.emit({"op": "metadata", "error": err})
        return
    parts = sorted(d.partitions, key=lambda p: p.id)
    for p in parts:
        ctx.emit({"partition": p.id, "leader": p.leader.id if p.leader else -1,
                  "replicas": [n.id for n in p.replicas], "isr": [n.id for n in p.isr]})
    ctx.emit({"topic": d.name, "partitions": len(parts)})


def produce_consume(compression):
    def run(ctx):
        recs = [dict(key=b"k%d" % i, value=b"v%d" % i) for i in range(20)]
        n = produce(ctx, recs, **{"compression.type": compression})
        for m in consume(ctx, range(3), n):
            ctx.emit({"partition": m.partition(), "offset": m.offset(),
                      "key": text(m.key()), "value": text(m.value())})
    return run


def s_null_keys(ctx):
    n = produce(ctx, [dict(key=None, value=b"n%d" % i) for i in range(5)])
    for m in consume(ctx, [0], n):
        ctx.emit({"offset": m.offset(), "key": text(m.key()), "value": text(m.value())})


def s_headers(ctx):
    hs = [[("h1", b"a")], [("h2", None)], [("h1", b"x"), ("h1", b"y")]]
    n = produce(ctx, [dict(value=b"v%d" % i, headers=h) for i, h in enumerate(hs)])
    for m in consume(ctx, [0], n):
        ctx.emit({"offset": m.offset(), "value": text(m.value()),
                  "headers": [[k, text(v)] for k, v in (m.headers() or [])]})


TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def s_timestamps(ctx):
    tss = [BASE_TS, BASE_TS + 500, BASE_TS + 1000]
    n = produce(ctx, [dict(value=b"t%d" % i, timestamp=ts) for i, ts in enumerate(tss)])
    for m in consume(ctx, [0], n):
        ttype, ts = m.timestamp()
        ctx.emit({"offset": m.offset(), "timestamp": ts,
                  "timestamp_type": TIMESTAMP_TYPES.get(ttype, ttype)})


def s_large_record(ctx):
    n = produce(ctx, [dict(value=b"x" * 1000000)], **{"message.max.bytes": 2000000})
    for m in consume(ctx, [0], n):
        ctx.emit({"offset": m.offset(), "value_len": len(m.value())})


def s_too_large_record(ctx):
    # message.max.bytes 2,000,000 so that librdkafka sends it and the broker
    # decides; retries=0 since the verdict is final.
    n = produce(ctx, [dict(value=b"x" * 1100000)],
                **{"message.max.bytes": 2000000, "retries": 0})
    if n:
        ctx.emit({"op": "produce", "error": None})


def s_list_offsets(ctx):
    produce(ctx, [dict(value=b"v%d" % i, timestamp=BASE_TS + 1000 * i) for i in range(5)])
    for query, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
                        ("timestamp:%d" % (BASE_TS + 2500), OffsetSpec.for_timestamp(BASE_TS + 2500)),
                        ("timestamp:1800000000000", OffsetSpec.for_timestamp(1800000000000))):
        info, err = list_offsets(ctx, ctx.topic, 0, spec)
        if err:
            ctx.emit({"query": query, "error": err})
        else:
            ctx.emit({"query": query, "offset": info.offset})


def s_list_offsets_max_timestamp(ctx):
    produce(ctx, [dict(value=b"v%d" % i, timestamp=BASE_TS + d)
                  for i, d in enumerate((5000, 9000, 7000))])
    info, err = list_offsets(ctx, ctx.topic, 0, OffsetSpec.max_timestamp())
    if err:
        ctx.emit({"query": "max", "error": err})
    else:
        ctx.emit({"query": "max", "offset": info.offset, "timestamp": info.timestamp})


def s_unknown_topic_metadata(ctx):
    # describe_topics sends Metadata with allow_auto_topic_creation=false
    _, err = describe(ctx, ctx.missing)
    ctx.emit({"op": "metadata", "error": err})


def s_unknown_topic_list_offsets(ctx):
    _, err = list_offsets(ctx, ctx.missing, 0, OffsetSpec.latest())
    if err == "CLIENT_NOENT":
        # librdkafka looks the leader up first and refuses locally ("Failed
        # to query partition leaders: No leaders found") when the metadata
        # says the topic does not exist; what the metadata said is checked
        # by unknown-topic-metadata.
        err = "UNKNOWN_TOPIC_OR_PARTITION"
    ctx.emit({"op": "list_offsets", "error": err})


def s_unknown_partition(ctx):
    # librdkafka refuses partition 5 locally (_UNKNOWN_PARTITION), either in
    # produce() or in the delivery report once it has the metadata.
    n = produce(ctx, [dict(value=b"v", partition=5)])
    if n:
        ctx.emit({"op": "produce", "error": None})


def s_idempotent_producer(ctx):
    n = produce(ctx, [dict(value=b"v%d" % i) for i in range(50)],
                **{"enable.idempotence": True, "acks": "all"})
    for m in consume(ctx, [0], n):
        ctx.emit({"offset": m.offset(), "value": text(m.value())})


def s_auto_create(ctx):
    topic = "%s-auto-create-new" % ctx.prefix
    # allow.auto.create.topics is on by default for librdkafka producers.
    n = produce(ctx, [dict(value=b"created")], topic=topic,
                **{"allow.auto.create.topics": True})
    d, err = describe(ctx, topic)
    if err:
        ctx.emit({"op": "metadata", "error": err})
        return
    ctx.emit({"topic_partitions": len(d.partitions)})
    for m in consume(ctx, range(len(d.partitions)), n, topic=topic):
        ctx.emit({"offset": m.offset(), "value": text(m.value())})


def s_offset_out_of_range(ctx):
    produce(ctx, [dict(value=b"v%d" % i) for i in range(5)])
    # auto.offset.reset=error: the broker's OFFSET_OUT_OF_RANGE surfaces as a
    # consumer error instead of a silent reset.
    c = ctx.consumer(**{"auto.offset.reset": "error"})
    got, err = 0, None
    try:
        c.assign([TopicPartition(ctx.topic, 0, 100)])
        end = min(ctx.deadline, time.monotonic() + 10)
        while err is None and time.monotonic() < end:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                err = error_name(m.error())
            else:
                got += 1
    finally:
        c.close()
    if err:
        ctx.emit({"op": "fetch", "error": err})
    else:
        ctx.emit({"op": "fetch", "error": None, "records": got})


def s_empty_topic(ctx):
    ctx.emit({"records": len(consume(ctx, [0], 1, max_seconds=2))})
    info, err = list_offsets(ctx, ctx.topic, 0, OffsetSpec.latest())
    if err:
        ctx.emit({"query": "latest", "error": err})
    else:
        ctx.emit({"query": "latest", "offset": info.offset})


SCENARIOS = {
    "metadata-topic": s_metadata_topic,
    "produce-consume-none": produce_consume("none"),
    "produce-consume-gzip": produce_consume("gzip"),
    "produce-consume-snappy": produce_consume("snappy"),
    "produce-consume-lz4": produce_consume("lz4"),
    "produce-consume-zstd": produce_consume("zstd"),
    "null-keys": s_null_keys,
    "headers": s_headers,
    "timestamps": s_timestamps,
    "large-record": s_large_record,
    "too-large-record": s_too_large_record,
    "list-offsets": s_list_offsets,
    "list-offsets-max-timestamp": s_list_offsets_max_timestamp,
    "unknown-topic-metadata": s_unknown_topic_metadata,
    "unknown-topic-list-offsets": s_unknown_topic_list_offsets,
    "unknown-partition": s_unknown_partition,
    "idempotent-producer": s_idempotent_producer,
    "auto-create": s_auto_create,
    "offset-out-of-range": s_offset_out_of_range,
    "empty-topic": s_empty_topic,
}


# ---------------------------------------------------------------- groups

def group_id(ctx):
    return "%s-%s-g" % (ctx.prefix, ctx.name)


def group_member(ctx, **cfg):
    """A classic-protocol member of the scenario's group on its topic."""
    c = ctx.consumer(**{"group.id": group_id(ctx), "enable.auto.offset.store": True,
                        "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, **cfg})
    c.subscribe([ctx.topic])
    return c


def wait_assigned(ctx, c):
    while not c.assignment():
        if time.monotonic() > ctx.deadline:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        c.poll(0.2)


def group_state(g):
    return str(getattr(g.state, "name", g.state))


def s_group_consume_commit(ctx):
    from confluent_kafka import ConsumerGroupTopicPartitions
    produce(ctx, [dict(key=b"k%d" % i, value=b"v%d" % i, partition=i % 3) for i in range(6)])
    c = group_member(ctx)
    n = 0
    try:
        end = min(ctx.deadline, time.monotonic() + 15)
        while n < 6 and time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                n += 1
        c.commit(asynchronous=False)
    finally:
        c.close()
    ctx.emit({"consumed": n})
    a = ctx.admin()
    req = ConsumerGroupTopicPartitions(group_id(ctx), [TopicPartition(ctx.topic, p) for p in range(3)])
    res = a.list_consumer_group_offsets([req])[group_id(ctx)].result(ctx.left(10))
    got = {tp.partition: tp.offset for tp in res.topic_partitions}
    for p in range(3):
        ctx.emit({"partition": p, "committed": got.get(p, -1)})
    c = group_member(ctx)
    after = 0
    try:
        end = time.monotonic() + 3
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                after += 1
    finally:
        c.close()
    ctx.emit({"records_after_restart": after})


def s_group_describe(ctx):
    c = group_member(ctx)
    try:
        wait_assigned(ctx, c)
        a = ctx.admin()
        g = a.describe_consumer_groups([group_id(ctx)])[group_id(ctx)].result(ctx.left(10))
        ctx.emit({"state": group_state(g), "protocol_type": "consumer" if not g.is_simple_consumer_group else "",
                  "protocol": g.partition_assignor, "members": len(g.members)})
        parts = sorted(sorted(tp.partition for tp in m.assignment.topic_partitions if tp.topic == ctx.topic)
                       for m in g.members)
        for i, ps in enumerate(parts):
            ctx.emit({"member": i, "assigned": ps})
    finally:
        c.close()


def s_group_list(ctx):
    c = group_member(ctx)
    try:
        wait_assigned(ctx, c)
        c.commit(offsets=[TopicPartition(ctx.topic, 0, 0)], asynchronous=False)
    finally:
        c.close()
    a = ctx.admin()
    res = a.list_consumer_groups().result(ctx.left(10))
    obs = {"present": False}
    for g in res.valid:
        if g.group_id == group_id(ctx):
            obs = {"present": True, "state": group_state(g), "simple": g.is_simple_consumer_group}
    ctx.emit(obs)


def s_group_errors(ctx):
    """What the admin API shows: describe and delete of unknown and live groups."""
    c = group_member(ctx)
    try:
        wait_assigned(ctx, c)
        a = ctx.admin()
        unknown = group_id(ctx) + "-unknown"
        try:
            g = a.describe_consumer_groups([unknown])[unknown].result(ctx.left(10))
            ctx.emit({"op": "describe_unknown_group", "error": "NONE", "state": group_state(g)})
        except KafkaException as e:
            ctx.emit({"op": "describe_unknown_group", "error": error_name(e)})
        for op, gid in (("delete_non_empty_group", group_id(ctx)), ("delete_unknown_group", unknown)):
            try:
                a.delete_consumer_groups([gid])[gid].result(ctx.left(10))
                ctx.emit({"op": op, "error": "NONE"})
            except KafkaException as e:
                ctx.emit({"op": op, "error": error_name(e)})
    finally:
        c.close()


SCENARIOS.update({
    "group-consume-commit": s_group_consume_commit,
    "group-describe": s_group_describe,
    "group-list": s_group_list,
    "group-errors": s_group_errors,
})


# ---------------------------------------------------------------- security
# PROTOCOL.md "Security": SASL logins that succeed or fail, and the eight
# operations of acl-denied and acl-allowed; how to connect comes from the
# runner's flags (Ctx.security_config).

def produce_one(ctx, cap=10, **cfg):
    """One record key k value v to partition 0 with librdkafka's default
    producer: (offset, error name)."""
    p = ctx.producer(**{"message.timeout.ms": int(cap * 1000), **cfg})
    res = {}

    def on_delivery(err, msg):
        res["err"], res["offset"] = err, msg.offset()

    try:
        p.produce(ctx.topic, key=b"k", value=b"v", partition=0, on_delivery=on_delivery)
    except (KafkaException, BufferError) as e:  # refused before any request
        return None, error_name(e)
    if p.flush(ctx.left(cap + 2)) > 0 or not res:
        return None, "CLIENT_TIMEOUT"
    if res["err"] is not None:
        return None, error_name(res["err"])
    return res["offset"], None


def fetch_first(ctx, cap=8):
    """Partition 0 of topic 0 from offset 0 without joining a group, until
    a record or an error: (message, error name)."""
    c = ctx.consumer()
    try:
        c.assign([TopicPartition(ctx.topic, 0, OFFSET_BEGINNING)])
        end = min(ctx.deadline, time.monotonic() + cap)
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() and m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED and m.topic() is None:
                # the coordinator lookup of the group.id librdkafka insists
                # on (Ctx.consumer): not part of a group-less fetch
                log("%s: fetch: ignoring the unused group's %s" % (ctx.name, m.error()))
                continue
            if m.error():
                return None, error_name(m.error())
            return m, None
        return None, "CLIENT_TIMEOUT"
    finally:
        c.close()


def s_sasl_ok(ctx):
    off, err = produce_one(ctx)
    if err:
        ctx.emit({"op": "produce", "error": err})
        return
    ctx.emit({"op": "produce", "error": None, "offset": off})
    m, err = fetch_first(ctx, cap=15)
    if err:
        ctx.emit({"op": "consume", "error": err})
        return
    ctx.emit({"op": "consume", "offset": m.offset(), "key": text(m.key()), "value": text(m.value())})


def s_sasl_refused(ctx):
    """List topics (Metadata) with credentials the broker must refuse.
    librdkafka retries the login and reports each refusal to error_cb; the
    call itself ends in a local failure (_TRANSPORT), so the observation is
    what error_cb saw first."""
    a = ctx.admin()
    try:
        a.list_topics(timeout=ctx.left(10))
        ctx.emit({"op": "connect", "error": None})
    except KafkaException as e:
        a.poll(0)  # error_cb runs only from poll()
        first = ctx.client_errors[0] if ctx.client_errors else e
        ctx.emit({"op": "connect", "error": error_name(first)})


def s_acl_ops(ctx):
    """The eight operations of acl-denied and acl-allowed in PROTOCOL.md's
    order, one {op, error} each."""
    def op(name, fn):
        try:
            fn()
            ctx.emit({"op": name, "error": None})
        except Exception as e:
            log("%s: %s: %r" % (ctx.name, name, e))
            ctx.emit({"op": name, "error": error_name(e)})

    def check(err):
        if err:
            raise OpError(err)

    def produce_op():
        check(produce_one(ctx, cap=6)[1])

    def fetch_op():
        check(fetch_first(ctx)[1])

    a = ctx.admin()

    def metadata_op():
        a.describe_topics(TopicCollection([ctx.topic]), request_timeout=ctx.left(8))[ctx.topic].result()

    def group_join_op():
        c = group_member(ctx)
        try:
            end = min(ctx.deadline, time.monotonic() + 8)
            while not c.assignment():
                if time.monotonic() > end:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
                m = c.poll(0.2)
                if m is not None and m.error():
                    raise KafkaException(m.error())
        finally:
            c.close()

    def offset_commit_op():
        # the admin API's commit (OffsetCommit as a group-less member, as
        # franz's): the consumer's commit only says "waiting for
        # coordinator" when the group's FindCoordinator is denied
        from confluent_kafka import ConsumerGroupTopicPartitions
        req = ConsumerGroupTopicPartitions(group_id(ctx), [TopicPartition(ctx.topic, 0, 0)])
        res = a.alter_consumer_group_offsets([req], request_timeout=ctx.left(8))[group_id(ctx)].result()
        for tp in res.topic_partitions:
            if tp.error:
                raise KafkaException(tp.error)

    def describe_configs_op():
        from confluent_kafka.admin import ConfigResource, ResourceType
        res = ConfigResource(ResourceType.TOPIC, ctx.topic)
        for f in a.describe_configs([res], request_timeout=ctx.left(8)).values():
            f.result()

    def create_topic_op():
        from confluent_kafka.admin import NewTopic
        name = "%s-%s-new" % (ctx.prefix, ctx.name)
        for f in a.create_topics([NewTopic(name, 1, 1)], request_timeout=ctx.left(8)).values():
            f.result()

    def delete_topic_op():
        for f in a.delete_topics([ctx.topic], request_timeout=ctx.left(8)).values():
            f.result()

    op("produce", produce_op)
    op("fetch", fetch_op)
    op("metadata", metadata_op)
    op("group-join", group_join_op)
    op("offset-commit", offset_commit_op)
    op("describe-configs", describe_configs_op)
    op("create-topic", create_topic_op)
    op("delete-topic", delete_topic_op)


SCENARIOS.update({
    "sasl-scram-ok": s_sasl_ok,
    "sasl-ssl-scram-ok": s_sasl_ok,
    "sasl-ssl-plain-ok": s_sasl_ok,
    "sasl-bad-password": s_sasl_refused,
    "sasl-unknown-user": s_sasl_refused,
    "acl-denied": s_acl_ops,
    "acl-allowed": s_acl_ops,
    "kafka-acls": lambda ctx: ctx.emit({"skip": "a kafka-acls.sh scenario (java-tools)"}),
})


# ------------------------------------------------------------ transactions


def txn_id(ctx):
    return "%s-%s-tx" % (ctx.prefix, ctx.name)


def txn_producer(ctx, **cfg):
    return ctx.producer(**{"transactional.id": txn_id(ctx), **cfg})


def step(ctx, obs, fn):
    """Runs one transactional step, prints obs with its error (None for
    none) and returns whether it succeeded."""
    try:
        fn()
        obs["error"] = None
    except Exception as e:  # noqa: BLE001 - every failure is an observation
        log("%s: %s" % (ctx.name, e))
        obs["error"] = error_name(e)
    ctx.emit(obs)
    return obs["error"] is None


def send_sync(ctx, p, topic, partition, value, key=None):
    """produce() and flush(); a failed delivery raises OpError."""
    errors = []
    p.produce(topic, value=value, key=key, partition=partition,
              on_delivery=lambda err, msg: err is not None and errors.append(error_name(err)))
    if p.flush(ctx.left(15)) > 0:
        raise OpError("CLIENT_TIMEOUT")
    if errors:
        raise OpError(errors[0])


def in_txn(ctx, p, commit, records):
    p.begin_transaction()
    for topic, partition, key, value in records:
        p.produce(topic, value=value, key=key, partition=partition)
    if commit:
        p.commit_transaction(ctx.left(15))
    else:
        # abort_transaction() purges what is still queued: send it first,
        # so that the aborted records are in the log as in the other clients
        if p.flush(ctx.left(15)) > 0:
            raise OpError("CLIENT_TIMEOUT")
        p.abort_transaction(ctx.left(15))


def isolation_name(committed):
    return "read_committed" if committed else "read_uncommitted"


def consume_isolated(ctx, topic, partitions, committed, want, seconds):
    """Records of topic read with the isolation level until want+1 arrived
    (one more than expected, so that an unwanted record shows) or seconds
    passed."""
    return consume(ctx, partitions, want + 1, topic=topic, max_seconds=seconds,
                   **{"isolation.level": isolation_name(committed)})


def print_isolated(ctx, committed, want):
    for m in consume_isolated(ctx, ctx.topic, [0], committed, want, 3 + 0.5 * want):
        ctx.emit({"isolation": isolation_name(committed), "offset": m.offset(), "value": text(m.value())})


def latest(ctx, topic, partition, committed):
    from confluent_kafka import IsolationLevel
    a = ctx.admin()
    tp = TopicPartition(topic, partition)
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    return a.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level, request_timeout=ctx.left(10))[tp].result().offset


def s_txn_commit(ctx):
    p = txn_producer(ctx)
    if not step(ctx, {"op": "init"}, lambda: p.init_transactions(ctx.left(15))):
        return
    t = ctx.topic
    recs = [(t, 0, b"k0", b"v0"), (t, 1, b"k1", b"v1"), (t, 0, b"k2", b"v2")]
    if not step(ctx, {"op": "commit", "transaction": 1}, lambda: in_txn(ctx, p, True, recs)):
        return
    step(ctx, {"op": "commit", "transaction": 2}, lambda: in_txn(ctx, p, True, [(t, 1, b"k3", b"v3")]))
    for m in consume_isolated(ctx, t, [0, 1], True, 4, 5):
        ctx.emit({"partition": m.partition(), "offset": m.offset(), "key": text(m.key()), "value": text(m.value())})
    for part in (0, 1):
        ctx.emit({"partition": part, "query": "latest", "offset": latest(ctx, t, part, False)})


def s_txn_abort(ctx):
    p = txn_producer(ctx)
    if not step(ctx, {"op": "init"}, lambda: p.init_transactions(ctx.left(15))):
        return
    t = ctx.topic
    step(ctx, {"op": "abort"}, lambda: in_txn(ctx, p, False, [(t, 0, None, b"a0"), (t, 0, None, b"a1")]))
    step(ctx, {"op": "commit"}, lambda: in_txn(ctx, p, True, [(t, 0, None, b"c0")]))
    print_isolated(ctx, True, 1)
    print_isolated(ctx, False, 3)
    for committed in (True, False):
        ctx.emit({"query": "latest", "isolation": isolation_name(committed), "offset": latest(ctx, t, 0, committed)})


def s_txn_fencing(ctx):
    t = ctx.topic
    first = txn_producer(ctx)
    if not step(ctx, {"producer": "first", "op": "init"}, lambda: first.init_transactions(ctx.left(15))):
        return

    def first_send():
        first.begin_transaction()
        send_sync(ctx, first, t, 0, b"f0")
    if not step(ctx, {"producer": "first", "op": "send"}, first_send):
        return
    second = txn_producer(ctx)
    if not step(ctx, {"producer": "second", "op": "init"}, lambda: second.init_transactions(ctx.left(15))):
        return
    step(ctx, {"producer": "first", "op": "send"}, lambda: send_sync(ctx, first, t, 0, b"f1"))
    step(ctx, {"producer": "first", "op": "commit"}, lambda: first.commit_transaction(ctx.left(10)))
    step(ctx, {"producer": "second", "op": "commit"}, lambda: in_txn(ctx, second, True, [(t, 0, None, b"s0")]))
    for m in consume_isolated(ctx, t, [0], True, 1, 4):
        ctx.emit({"offset": m.offset(), "value": text(m.value())})


def s_txn_timeout_abort(ctx):
    t = ctx.topic
    # librdkafka wants message.timeout.ms <= transaction.timeout.ms
    p = txn_producer(ctx, **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
    if not step(ctx, {"op": "init"}, lambda: p.init_transactions(ctx.left(15))):
        return

    def send():
        p.begin_transaction()
        send_sync(ctx, p, t, 0, b"t0")
    if not step(ctx, {"op": "send"}, send):
        return
    time.sleep(5)
    step(ctx, {"op": "commit"}, lambda: p.commit_transaction(ctx.left(10)))
    print_isolated(ctx, True, 0)
    print_isolated(ctx, False, 1)
    ctx.emit({"query": "latest", "offset": latest(ctx, t, 0, False)})


def s_txn_offsets(ctx):
    from confluent_kafka import ConsumerGroupTopicPartitions
    t_in, t_out = ctx.topic, "%s-%s-1" % (ctx.prefix, ctx.name)
    group = "%s-%s-g" % (ctx.prefix, ctx.name)
    if produce(ctx, [{"value": b"i%d" % i, "partition": 0} for i in range(3)], topic=t_in) != 3:
        return
    p = txn_producer(ctx)
    if not step(ctx, {"op": "init"}, lambda: p.init_transactions(ctx.left(15))):
        return
    member = ctx.consumer(**{"group.id": group})

    def send_offsets():
        p.begin_transaction()
        for i in range(3):
            p.produce(t_out, value=b"I%d" % i, partition=0)
        p.send_offsets_to_transaction([TopicPartition(t_in, 0, 3)], member.consumer_group_metadata(), ctx.left(15))
        if p.flush(ctx.left(15)) > 0:
            raise OpError("CLIENT_TIMEOUT")
    try:
        if not step(ctx, {"op": "send_offsets"}, send_offsets):
            return
        a = ctx.admin()

        def committed(when, stable, settle=False):
            # settle: ask again while the offsets are unstable, as the
            # transaction's markers reach the group after EndTxn's answer
            end = time.monotonic() + 10
            while True:
                obs = {"when": when, "require_stable": stable}
                try:
                    req = [ConsumerGroupTopicPartitions(group, [TopicPartition(t_in, 0)])]
                    res = a.list_consumer_group_offsets(req, require_stable=stable, request_timeout=ctx.left(5))[group].result()
                    tp = res.topic_partitions[0]
                    if tp.error is not None:
                        obs["error"] = error_name(tp.error)
                    else:
                        obs["offset"] = tp.offset if tp.offset >= 0 else None
                except Exception as e:  # noqa: BLE001
                    obs["error"] = error_name(e)
                if not settle or obs.get("error") != "UNSTABLE_OFFSET_COMMIT" or time.monotonic() > end:
                    break
                time.sleep(0.1)
            ctx.emit(obs)
        committed("before_commit", False)
        committed("before_commit", True)
        if not step(ctx, {"op": "commit"}, lambda: p.commit_transaction(ctx.left(15))):
            return
        committed("after_commit", True, settle=True)
        committed("after_commit", False)
    finally:
        member.close()
    for m in consume_isolated(ctx, t_out, [0], True, 3, 5):
        ctx.emit({"offset": m.offset(), "value": text(m.value())})


SCENARIOS.update({
    "txn-commit": s_txn_commit,
    "txn-abort": s_txn_abort,
    "txn-fencing": s_txn_fencing,
    "txn-timeout-abort": s_txn_timeout_abort,
    "txn-offsets": s_txn_offsets,
    "transactions-tool": lambda ctx: ctx.emit({"skip": "a kafka-transactions.sh scenario (java-tools)"}),
    "compaction": lambda ctx: ctx.emit({"skip": "the brokers' log cleaners are compared, not clients: franz and java run it"}),
})


if __name__ == "__main__":
    main(SCENARIOS, Ctx, error_name)
