#!/usr/bin/env python3
"""kafka-python conformance client: runs scenarios from ../../scenarios.json
and prints what kafka-python observes, as PROTOCOL.md prescribes.

Usage: client.py --bootstrap HOST:PORT --prefix P --scenarios a,b,c
"""
import contextlib
import os
import logging
import signal
import sys
import time

import kafka.errors as Errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.list_offsets import ListOffsetsRequest

BASE_TS = 1700000000000

# kafka-python's BrokerResponseError.message carries pre-KIP names for a few
# codes (MESSAGE_SIZE_TOO_LARGE, NOT_LEADER_FOR_PARTITION, ...), so we map the
# errno to the name the protocol uses today (Kafka's Errors enum).
# The error-name table is shared with the other Python clients.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from protocol import PROTOCOL_NAMES, SCENARIO_SECONDS, Scenario, log, main  # noqa: E402


class ScenarioTimeout(Exception):
    pass


def error_name(exc):
    """Protocol error name for an exception kafka-python raised or returned."""
    if isinstance(exc, CodeError):
        return code_name(exc.code)
    if isinstance(exc, Errors.BrokerResponseError) and exc.errno is not None:
        return PROTOCOL_NAMES.get(exc.errno, "ERROR_%d" % exc.errno)
    if isinstance(exc, (Errors.KafkaTimeoutError, ScenarioTimeout)):
        # A local timeout is not a broker answer: keep it visibly non-protocol.
        return "CLIENT_TIMEOUT"
    if isinstance(exc, AssertionError):
        # kafka-python validates arguments with assert (e.g. send() refuses a
        # null header value): the record never left the client.
        return "CLIENT_REFUSED"
    return "CLIENT_%s" % type(exc).__name__


def code_name(code):
    return None if code == 0 else PROTOCOL_NAMES.get(code, "ERROR_%d" % code)


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

    def security_config(self):
        """kafka-python settings for the runner's security flags (PROTOCOL.md
        "Security"); none for PLAINTEXT."""
        s = self.security
        if s.get("protocol") in (None, "PLAINTEXT"):
            return {}
        cfg = dict(security_protocol=s["protocol"], sasl_mechanism=s["mechanism"],
                   sasl_plain_username=s["username"], sasl_plain_password=s["password"])
        if s["protocol"] == "SASL_SSL":
            cfg["ssl_cafile"] = s["ca_file"]
        return cfg

    def left_ms(self, cap_ms):
        return max(100, min(cap_ms, int((self.deadline - time.monotonic()) * 1000)))

    def producer(self, **cfg):
        base = dict(bootstrap_servers=self.bootstrap, acks="all",
                    max_block_ms=10000, request_timeout_ms=10000,
                    # idempotence is kafka-python's default on new brokers;
                    # only the idempotent-producer scenario asks for it.
                    enable_idempotence=False)
        base.update(self.security_config())
        base.update(cfg)
        return KafkaProducer(**base)

    def consumer(self, **cfg):
        # group_id=None: explicit assignment only, no coordinator, no commits.
        base = dict(bootstrap_servers=self.bootstrap, group_id=None,
                    enable_auto_commit=False, auto_offset_reset="earliest",
                    allow_auto_create_topics=False, request_timeout_ms=10000,
                    fetch_max_wait_ms=200)
        base.update(self.security_config())
        base.update(cfg)
        return KafkaConsumer(**base)

    def admin(self):
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000,
                                **self.security_config())


def produce(ctx, records, topic=None, **cfg):
    """Send records (dicts of send() kwargs), flush, print each distinct error.
    Returns the list of RecordMetadata (None for failed sends)."""
    topic = topic or ctx.topic
    p = ctx.producer(**cfg)
    results, errors = [], []
    try:
        futures = []
        for r in records:
            try:
                futures.append(p.send(topic, **r))
            except Exception as e:  # refused locally before any request
                futures.append(e)
        p.flush(timeout=ctx.left_ms(15000) / 1000)
        for f in futures:
            try:
                if isinstance(f, Exception):
                    raise f
                results.append(f.get(timeout=ctx.left_ms(10000) / 1000))
            except Exception as e:
                results.append(None)
                name = error_name(e)
                if name not in errors:
                    errors.append(name)
    finally:
        p.close(timeout=5)
    for name in errors:
        ctx.emit({"op": "produce", "error": name})
    return results


def sent(results):
    """How many records the broker acknowledged: what a consume may expect."""
    return sum(r is not None for r in results)


def consume(ctx, partitions, expected, topic=None, max_seconds=None, **cfg):
    """Read `partitions` of topic from the start until `expected` records
    arrived or time ran out; records sorted by (partition, offset)."""
    topic = topic or ctx.topic
    if expected == 0:
        # nothing was acknowledged: still look for 2 s, in case it landed anyway
        expected, max_seconds = float("inf"), 2
    c = ctx.consumer(**cfg)
    out = []
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = ctx.deadline if max_seconds is None else min(ctx.deadline, time.monotonic() + max_seconds)
        while len(out) < expected and time.monotonic() < end:
            batch = c.poll(timeout_ms=200)
            for recs in batch.values():
                out.extend(recs)
    except Exception as e:
        ctx.emit({"op": "fetch", "error": error_name(e)})
    finally:
        c.close(autocommit=False)
    out.sort(key=lambda r: (r.partition, r.offset))
    return out


# ---------------------------------------------------------------- scenarios

def s_metadata_topic(ctx):
    a = ctx.admin()
    try:
        (t,) = a.describe_topics([ctx.topic])
    finally:
        a.close()
    if t["error_code"]:
        ctx.emit({"op": "metadata", "error": code_name(t["error_code"])})
        return
    parts = sorted(t["partitions"], key=lambda p: p["partition"])
    for p in parts:
        ctx.emit({"partition": p["partition"], "leader": p["leader"],
                  "replicas": p["replicas"], "isr": p["isr"]})
    ctx.emit({"topic": t["topic"], "partitions": len(parts)})


def produce_consume(compression):
    def run(ctx):
        recs = [dict(key=b"k%d" % i, value=b"v%d" % i) for i in range(20)]
        res = produce(ctx, recs, compression_type=compression)
        for r in consume(ctx, range(3), sent(res)):
            ctx.emit({"partition": r.partition, "offset": r.offset,
                      "key": text(r.key), "value": text(r.value)})
    return run


def s_null_keys(ctx):
    res = produce(ctx, [dict(key=None, value=b"n%d" % i) for i in range(5)])
    for r in consume(ctx, [0], sent(res)):
        ctx.emit({"offset": r.offset, "key": text(r.key), "value": text(r.value)})


def s_headers(ctx):
    # kafka-python cannot send a null header value (send() asserts bytes), so
    # record 1 is refused locally: one CLIENT_REFUSED line, two records read.
    hs = [[("h1", b"a")], [("h2", None)], [("h1", b"x"), ("h1", b"y")]]
    res = produce(ctx, [dict(value=b"v%d" % i, headers=h) for i, h in enumerate(hs)])
    for r in consume(ctx, [0], sent(res)):
        ctx.emit({"offset": r.offset, "value": text(r.value),
                  "headers": [[k, text(v)] for k, v in r.headers]})


TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def s_timestamps(ctx):
    tss = [BASE_TS, BASE_TS + 500, BASE_TS + 1000]
    res = produce(ctx, [dict(value=b"t%d" % i, timestamp_ms=ts) for i, ts in enumerate(tss)])
    for r in consume(ctx, [0], sent(res)):
        ctx.emit({"offset": r.offset, "timestamp": r.timestamp,
                  "timestamp_type": TIMESTAMP_TYPES.get(r.timestamp_type, r.timestamp_type)})


def s_large_record(ctx):
    res = produce(ctx, [dict(value=b"x" * 1000000)], max_request_size=2000000)
    for r in consume(ctx, [0], sent(res)):
        ctx.emit({"offset": r.offset, "value_len": len(r.value)})


def s_too_large_record(ctx):
    # retries=0: the broker's verdict is final, don't let the client split or retry.
    res = produce(ctx, [dict(value=b"x" * 1100000)], max_request_size=2000000, retries=0)
    if res and res[0] is not None:
        ctx.emit({"op": "produce", "error": None, "offset": res[0].offset})


def s_list_offsets(ctx):
    produce(ctx, [dict(value=b"v%d" % i, timestamp_ms=BASE_TS + 1000 * i) for i in range(5)])
    tp = TopicPartition(ctx.topic, 0)
    c = ctx.consumer()
    try:
        ctx.emit({"query": "earliest", "offset": c.beginning_offsets([tp])[tp]})
        ctx.emit({"query": "latest", "offset": c.end_offsets([tp])[tp]})
        for ts in (BASE_TS + 2500, 1800000000000):
            hit = c.offsets_for_times({tp: ts})[tp]
            ctx.emit({"query": "timestamp:%d" % ts, "offset": -1 if hit is None else hit.offset})
    finally:
        c.close(autocommit=False)


def s_list_offsets_max_timestamp(ctx):
    # kafka-python 2.x speaks ListOffsets up to v5; MAX_TIMESTAMP needs v7.
    ctx.emit({"skip": "kafka-python has no ListOffsets v7 (MAX_TIMESTAMP)"})


def s_unknown_topic_metadata(ctx):
    # KafkaAdminClient asks with allow_auto_topic_creation=false.
    a = ctx.admin()
    try:
        (t,) = a.describe_topics([ctx.missing])
    finally:
        a.close()
    ctx.emit({"op": "metadata", "error": code_name(t["error_code"])})


def s_unknown_topic_list_offsets(ctx):
    # KafkaConsumer.end_offsets() retries an unknown topic until it times out
    # and never surfaces the broker's answer, so we send the ListOffsets
    # request through kafka-python's own client and codec instead.
    a = ctx.admin()
    try:
        version = a._client.api_version(ListOffsetsRequest, max_version=5)
        fields = dict(replica_id=-1)
        part = (0, -1, 1) if version == 0 else (0, -1)  # (partition, LATEST[, max_offsets])
        if version >= 4:
            part = (0, -1, -1)  # (partition, current_leader_epoch, LATEST)
        if version >= 2:
            fields["isolation_level"] = 0
        req = ListOffsetsRequest[version](topics=[(ctx.missing, [part])], **fields)
        resp = a.send_request(req)
    finally:
        a.close()
    for _topic, parts in resp.topics:
        for p in parts:
            ctx.emit({"op": "list_offsets", "error": code_name(p[1])})


def s_unknown_partition(ctx):
    # kafka-python refuses locally (AssertionError 'Unrecognized partition')
    # when the partition is not in the topic's metadata: PROTOCOL.md maps
    # that refusal to UNKNOWN_TOPIC_OR_PARTITION.
    p = ctx.producer()
    try:
        f = p.send(ctx.topic, value=b"v", partition=5)
        f.get(timeout=ctx.left_ms(10000) / 1000)
        ctx.emit({"op": "produce", "error": None})
    except AssertionError:
        ctx.emit({"op": "produce", "error": "UNKNOWN_TOPIC_OR_PARTITION"})
    except Exception as e:
        ctx.emit({"op": "produce", "error": error_name(e)})
    finally:
        p.close(timeout=5)


def s_idempotent_producer(ctx):
    res = produce(ctx, [dict(value=b"v%d" % i) for i in range(50)], enable_idempotence=True, acks="all")
    for r in consume(ctx, [0], sent(res)):
        ctx.emit({"offset": r.offset, "value": text(r.value)})


def s_auto_create(ctx):
    topic = "%s-auto-create-new" % ctx.prefix
    # The producer's metadata requests allow auto-creation (kafka-python default).
    res = produce(ctx, [dict(value=b"created")], topic=topic, allow_auto_create_topics=True)
    a = ctx.admin()
    try:
        (t,) = a.describe_topics([topic])
    finally:
        a.close()
    if t["error_code"]:
        ctx.emit({"op": "metadata", "error": code_name(t["error_code"])})
        return
    n = len(t["partitions"])
    ctx.emit({"topic_partitions": n})
    for r in consume(ctx, range(n), sent(res), topic=topic):
        ctx.emit({"offset": r.offset, "value": text(r.value)})


def s_offset_out_of_range(ctx):
    produce(ctx, [dict(value=b"v%d" % i) for i in range(5)])
    # auto_offset_reset='none': poll() raises OffsetOutOfRangeError instead
    # of silently resetting.
    c = ctx.consumer(auto_offset_reset="none")
    tp = TopicPartition(ctx.topic, 0)
    got = 0
    try:
        c.assign([tp])
        c.seek(tp, 100)
        end = min(ctx.deadline, time.monotonic() + 10)
        while time.monotonic() < end:
            got += sum(len(v) for v in c.poll(timeout_ms=200).values())
        ctx.emit({"op": "fetch", "error": None, "records": got})
    except Exception as e:
        ctx.emit({"op": "fetch", "error": error_name(e)})
    finally:
        c.close(autocommit=False)


def s_empty_topic(ctx):
    ctx.emit({"records": len(consume(ctx, [0], 1, max_seconds=2))})
    tp = TopicPartition(ctx.topic, 0)
    c = ctx.consumer()
    try:
        ctx.emit({"query": "latest", "offset": c.end_offsets([tp])[tp]})
    finally:
        c.close(autocommit=False)


def s_api_versions(ctx):
    # KafkaClient learns the broker's ranges from ApiVersions when it connects.
    from kafka import KafkaClient
    client = KafkaClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=10000,
                         **ctx.security_config())
    try:
        client.check_version(timeout=10)
        versions = client.get_api_versions()
        for key in sorted(versions):
            lo, hi = versions[key]
            ctx.emit({"api_key": key, "min": lo, "max": hi})
    finally:
        client.close()


SCENARIOS = {
    "api-versions": s_api_versions,
    "metadata-topic": s_metadata_topic,
    "produce-consume-none": produce_consume(None),
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
    base = dict(bootstrap_servers=ctx.bootstrap, group_id=group_id(ctx),
                enable_auto_commit=False, auto_offset_reset="earliest",
                request_timeout_ms=15000, fetch_max_wait_ms=200,
                session_timeout_ms=10000, heartbeat_interval_ms=1000)
    base.update(ctx.security_config())
    base.update(cfg)
    c = KafkaConsumer(**base)
    c.subscribe([ctx.topic])
    return c


def wait_assigned(ctx, c):
    while not c.assignment():
        if time.monotonic() > ctx.deadline:
            raise ScenarioTimeout()
        c.poll(timeout_ms=200)


def s_group_consume_commit(ctx):
    produce(ctx, [dict(key=b"k%d" % i, value=b"v%d" % i, partition=i % 3) for i in range(6)])
    c = group_member(ctx)
    n = 0
    try:
        end = min(ctx.deadline, time.monotonic() + 15)
        while n < 6 and time.monotonic() < end:
            for recs in c.poll(timeout_ms=200).values():
                n += len(recs)
        c.commit()
    finally:
        c.close(autocommit=False)
    ctx.emit({"consumed": n})
    a = ctx.admin()
    try:
        offs = a.list_consumer_group_offsets(group_id(ctx))
    finally:
        a.close()
    for p in range(3):
        om = offs.get(TopicPartition(ctx.topic, p))
        ctx.emit({"partition": p, "committed": om.offset if om is not None else -1})
    c = group_member(ctx)
    after = 0
    try:
        end = time.monotonic() + 3
        while time.monotonic() < end:
            for recs in c.poll(timeout_ms=200).values():
                after += len(recs)
    finally:
        c.close(autocommit=False)
    ctx.emit({"records_after_restart": after})


def assigned_partitions(ctx, member):
    """Partitions of our topic in a described member's assignment, sorted."""
    ma = member.member_assignment
    out = []
    for entry in getattr(ma, "assignment", None) or []:
        topic, parts = entry[0], entry[1]
        if topic == ctx.topic:
            out.extend(parts)
    return sorted(out)


def s_group_describe(ctx):
    c = group_member(ctx)
    try:
        wait_assigned(ctx, c)
        a = ctx.admin()
        try:
            (g,) = a.describe_consumer_groups([group_id(ctx)])
        finally:
            a.close()
        ctx.emit({"state": g.state, "protocol_type": g.protocol_type, "protocol": g.protocol,
                  "members": len(g.members)})
        for i, ps in enumerate(sorted(assigned_partitions(ctx, m) for m in g.members)):
            ctx.emit({"member": i, "assigned": ps})
    finally:
        c.close(autocommit=False)


def s_group_list(ctx):
    c = group_member(ctx)
    try:
        wait_assigned(ctx, c)
        from kafka.structs import OffsetAndMetadata
        try:
            om = OffsetAndMetadata(0, "", -1)
        except TypeError:  # older structs without leader epoch
            om = OffsetAndMetadata(0, "")
        c.commit({TopicPartition(ctx.topic, 0): om})
    finally:
        c.close(autocommit=False)
    a = ctx.admin()
    try:
        groups = a.list_consumer_groups()
    finally:
        a.close()
    obs = {"present": False}
    for g in groups:
        if g[0] == group_id(ctx):
            obs = {"present": True, "protocol_type": g[1]}
    ctx.emit(obs)


def s_group_errors(ctx):
    ctx.emit({"skip": "kafka-python exposes group errors only inside its coordinator"})


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

class CodeError(Exception):
    """A broker's error code found in a response kafka-python returns
    without raising."""

    def __init__(self, code):
        super().__init__(code_name(code))
        self.code = code


def check_code(code):
    if code:
        raise CodeError(code)


def fetch_first(ctx, cap_ms=8000):
    """Partition 0 of topic 0 from offset 0 without a group, until a record
    (returned) or an error (raised)."""
    c = ctx.consumer()
    tp = TopicPartition(ctx.topic, 0)
    try:
        c.assign([tp])
        c.seek(tp, 0)
        end = time.monotonic() + ctx.left_ms(cap_ms) / 1000
        while time.monotonic() < end:
            for recs in c.poll(timeout_ms=200).values():
                if recs:
                    return recs[0]
        raise ScenarioTimeout()
    finally:
        c.close(autocommit=False)


def s_sasl_ok(ctx):
    p = ctx.producer()
    try:
        md = p.send(ctx.topic, key=b"k", value=b"v", partition=0).get(timeout=ctx.left_ms(10000) / 1000)
    except Exception as e:
        ctx.emit({"op": "produce", "error": error_name(e)})
        return
    finally:
        p.close(timeout=5)
    ctx.emit({"op": "produce", "error": None, "offset": md.offset})
    try:
        r = fetch_first(ctx, cap_ms=15000)
    except Exception as e:
        ctx.emit({"op": "consume", "error": error_name(e)})
        return
    ctx.emit({"op": "consume", "offset": r.offset, "key": text(r.key), "value": text(r.value)})


class BrokerErrorLog(logging.Handler):
    """Collects the broker errors kafka-python's connections close with:
    a refused SASL login (SaslAuthenticate's error code) reaches the
    application only through kafka.conn's log ("Closing connection. <error>"),
    while the call that needed the connection ends in a local error."""

    def __init__(self):
        super().__init__()
        self.errors = []

    def emit(self, record):
        for arg in record.args if isinstance(record.args, tuple) else ():
            if isinstance(arg, Errors.BrokerResponseError):
                self.errors.append(arg)


def s_sasl_refused(ctx):
    """List topics (Metadata) with credentials the broker must refuse."""
    seen = BrokerErrorLog()
    conn_log = logging.getLogger("kafka.conn")
    conn_log.addHandler(seen)
    try:
        a = ctx.admin()
        try:
            a.list_topics()
        finally:
            a.close()
        ctx.emit({"op": "connect", "error": None})
    except Exception as e:
        log("%s: %r" % (ctx.name, e))
        ctx.emit({"op": "connect", "error": error_name(seen.errors[0] if seen.errors else e)})
    finally:
        conn_log.removeHandler(seen)


def s_acl_ops(ctx):
    """The eight operations of acl-denied and acl-allowed in PROTOCOL.md's
    order, one {op, error} each."""
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    from kafka.structs import OffsetAndMetadata

    def op(name, fn):
        try:
            fn()
            ctx.emit({"op": name, "error": None})
        except Exception as e:
            log("%s: %s: %r" % (ctx.name, name, e))
            ctx.emit({"op": name, "error": error_name(e)})

    def produce_op():
        # kafka-python's default producer: idempotent on brokers that can
        p = ctx.producer(enable_idempotence=True, max_block_ms=6000, request_timeout_ms=6000)
        try:
            p.send(ctx.topic, key=b"k", value=b"v", partition=0).get(timeout=ctx.left_ms(8000) / 1000)
        finally:
            p.close(timeout=5)

    def metadata_op():
        # Metadata v7 through kafka-python's own client and codec:
        # describe_topics asks (v8) for the authorized operations too and
        # then fails parsing the "not authorized" sentinel (INT32_MIN) that
        # comes with a denied topic
        from kafka.protocol.metadata import MetadataRequest
        a = ctx.admin()
        try:
            version = a._client.api_version(MetadataRequest, max_version=7)
            resp = a.send_request(MetadataRequest[version](topics=[ctx.topic], allow_auto_topic_creation=False))
        finally:
            a.close()
        (t,) = resp.to_object()["topics"]
        check_code(t["error_code"])

    def group_join_op():
        c = group_member(ctx)
        try:
            end = time.monotonic() + ctx.left_ms(8000) / 1000
            while not c.assignment():
                if time.monotonic() > end:
                    raise ScenarioTimeout()
                c.poll(timeout_ms=200)
        finally:
            c.close(autocommit=False)

    def offset_commit_op():
        # the consumer's commit of an explicit offset, as the Java client's
        # commitSync: the group by name, never joined
        c = ctx.consumer(group_id=group_id(ctx), request_timeout_ms=15000)
        tp = TopicPartition(ctx.topic, 0)
        try:
            c.assign([tp])
            try:
                om = OffsetAndMetadata(0, "", -1)
            except TypeError:  # older structs without leader epoch
                om = OffsetAndMetadata(0, "")
            c.commit({tp: om})
        finally:
            c.close(autocommit=False)

    def describe_configs_op():
        a = ctx.admin()
        try:
            resps = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, ctx.topic)])
        finally:
            a.close()
        for resp in resps:
            for res in resp.resources:
                check_code(res[0])

    def create_topic_op():
        a = ctx.admin()
        try:
            resp = a.create_topics([NewTopic("%s-%s-new" % (ctx.prefix, ctx.name), 1, 1)])
        finally:
            a.close()
        for t in resp.topic_errors:
            check_code(t[1])

    def delete_topic_op():
        a = ctx.admin()
        try:
            resp = a.delete_topics([ctx.topic])
        finally:
            a.close()
        for t in resp.topic_error_codes:
            check_code(t[1])

    op("produce", produce_op)
    op("fetch", lambda: fetch_first(ctx))
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
# PROTOCOL.md / scenarios.json txn-*: kafka-python's transactional producer
# (init_transactions, begin/commit/abort_transaction,
# send_offsets_to_transaction) and read_committed consumers. kafka-python
# has no DescribeProducers and its OffsetFetch stops at v5 (require_stable
# is v7), so those observations are left out.

def txn_id(ctx):
    return "%s-%s-tx" % (ctx.prefix, ctx.name)


def txn_producer(ctx, **cfg):
    return ctx.producer(transactional_id=txn_id(ctx), enable_idempotence=True, **cfg)


def txn_step(ctx, obs, fn):
    """Runs one transactional step, prints obs with its error (None for
    none) and returns whether it succeeded."""
    try:
        fn()
        obs["error"] = None
    except Exception as e:  # noqa: BLE001 - every failure is an observation
        log("%s: %r" % (ctx.name, e))
        obs["error"] = error_name(e)
    ctx.emit(obs)
    return obs["error"] is None


def init_txn(ctx, p):
    p.init_transactions()


def end_txn(ctx, p, commit, cap_ms=15000):
    """commit_transaction() / abort_transaction() with a time bound: both
    wait for the coordinator without one. Records still in flight are
    sent first (abort included, so that the aborted records are in the
    log as with the other clients)."""
    p.flush(timeout=ctx.left_ms(cap_ms) / 1000)
    tm = p._transaction_manager
    result = tm.begin_commit() if commit else tm.begin_abort()
    p._sender.wakeup()
    if not result.wait(timeout_ms=ctx.left_ms(cap_ms)):
        raise Errors.KafkaTimeoutError("EndTxn did not complete")


def send_sync(ctx, p, topic, partition, value, key=None):
    """One record, waiting for its acknowledgement (a failed delivery raises)."""
    p.send(topic, value=value, key=key, partition=partition).get(timeout=ctx.left_ms(15000) / 1000)


def in_txn(ctx, p, commit, records):
    p.begin_transaction()
    for topic, partition, key, value in records:
        p.send(topic, value=value, key=key, partition=partition)
    end_txn(ctx, p, commit)


def txn_isolation(committed):
    return "read_committed" if committed else "read_uncommitted"


def consume_isolated(ctx, topic, partitions, committed, want, seconds):
    """Records read with the isolation level until want+1 arrived (one
    more than expected, so that an unwanted record shows) or seconds
    passed."""
    return consume(ctx, partitions, want + 1, topic=topic, max_seconds=seconds,
                   isolation_level=txn_isolation(committed))


def print_isolated(ctx, committed, want):
    for r in consume_isolated(ctx, ctx.topic, [0], committed, want, 3 + 0.5 * want):
        ctx.emit({"isolation": txn_isolation(committed), "offset": r.offset, "value": text(r.value)})


def latest(ctx, topic, partition, committed):
    """ListOffsets(latest) with the isolation level: the high watermark or
    the last stable offset."""
    tp = TopicPartition(topic, partition)
    c = ctx.consumer(isolation_level=txn_isolation(committed))
    try:
        return c.end_offsets([tp])[tp]
    finally:
        c.close(autocommit=False)


def closing(p):
    """Closes producer p without waiting long for what it still holds."""
    with contextlib.suppress(Exception):
        p.close(timeout=5)


def s_txn_commit(ctx):
    p = txn_producer(ctx)
    try:
        if not txn_step(ctx, {"op": "init"}, lambda: init_txn(ctx, p)):
            return
        t = ctx.topic
        recs = [(t, 0, b"k0", b"v0"), (t, 1, b"k1", b"v1"), (t, 0, b"k2", b"v2")]
        if not txn_step(ctx, {"op": "commit", "transaction": 1}, lambda: in_txn(ctx, p, True, recs)):
            return
        txn_step(ctx, {"op": "commit", "transaction": 2}, lambda: in_txn(ctx, p, True, [(t, 1, b"k3", b"v3")]))
    finally:
        closing(p)
    for r in consume_isolated(ctx, t, [0, 1], True, 4, 5):
        ctx.emit({"partition": r.partition, "offset": r.offset, "key": text(r.key), "value": text(r.value)})
    for part in (0, 1):
        ctx.emit({"partition": part, "query": "latest", "offset": latest(ctx, t, part, False)})


def s_txn_abort(ctx):
    p = txn_producer(ctx)
    t = ctx.topic
    try:
        if not txn_step(ctx, {"op": "init"}, lambda: init_txn(ctx, p)):
            return
        txn_step(ctx, {"op": "abort"}, lambda: in_txn(ctx, p, False, [(t, 0, None, b"a0"), (t, 0, None, b"a1")]))
        txn_step(ctx, {"op": "commit"}, lambda: in_txn(ctx, p, True, [(t, 0, None, b"c0")]))
    finally:
        closing(p)
    print_isolated(ctx, True, 1)
    print_isolated(ctx, False, 3)
    for committed in (True, False):
        ctx.emit({"query": "latest", "isolation": txn_isolation(committed), "offset": latest(ctx, t, 0, committed)})


def s_txn_fencing(ctx):
    t = ctx.topic
    first = txn_producer(ctx)
    second = None
    try:
        if not txn_step(ctx, {"producer": "first", "op": "init"}, lambda: init_txn(ctx, first)):
            return

        def first_send():
            first.begin_transaction()
            send_sync(ctx, first, t, 0, b"f0")
        if not txn_step(ctx, {"producer": "first", "op": "send"}, first_send):
            return
        second = txn_producer(ctx)
        if not txn_step(ctx, {"producer": "second", "op": "init"}, lambda: init_txn(ctx, second)):
            return
        txn_step(ctx, {"producer": "first", "op": "send"}, lambda: send_sync(ctx, first, t, 0, b"f1"))
        txn_step(ctx, {"producer": "first", "op": "commit"}, lambda: end_txn(ctx, first, True, 10000))
        txn_step(ctx, {"producer": "second", "op": "commit"}, lambda: in_txn(ctx, second, True, [(t, 0, None, b"s0")]))
    finally:
        closing(first)
        if second is not None:
            closing(second)
    for r in consume_isolated(ctx, t, [0], True, 1, 4):
        ctx.emit({"offset": r.offset, "value": text(r.value)})


def s_txn_timeout_abort(ctx):
    t = ctx.topic
    p = txn_producer(ctx, transaction_timeout_ms=2000)
    try:
        if not txn_step(ctx, {"op": "init"}, lambda: init_txn(ctx, p)):
            return

        def send():
            p.begin_transaction()
            send_sync(ctx, p, t, 0, b"t0")
        if not txn_step(ctx, {"op": "send"}, send):
            return
        time.sleep(5)
        txn_step(ctx, {"op": "commit"}, lambda: end_txn(ctx, p, True, 10000))
    finally:
        closing(p)
    print_isolated(ctx, True, 0)
    print_isolated(ctx, False, 1)
    ctx.emit({"query": "latest", "offset": latest(ctx, t, 0, False)})


def s_txn_offsets(ctx):
    from kafka.structs import OffsetAndMetadata
    t_in, t_out = ctx.topic, "%s-%s-1" % (ctx.prefix, ctx.name)
    group = group_id(ctx)
    if sent(produce(ctx, [dict(value=b"i%d" % i, partition=0) for i in range(3)], topic=t_in)) != 3:
        return
    p = txn_producer(ctx)
    try:
        if not txn_step(ctx, {"op": "init"}, lambda: init_txn(ctx, p)):
            return

        def send_offsets():
            p.begin_transaction()
            for i in range(3):
                p.send(t_out, value=b"I%d" % i, partition=0)
            p.flush(timeout=ctx.left_ms(15000) / 1000)
            try:
                om = OffsetAndMetadata(3, "", -1)
            except TypeError:  # older structs without leader epoch
                om = OffsetAndMetadata(3, "")
            p.send_offsets_to_transaction({TopicPartition(t_in, 0): om}, group)
        if not txn_step(ctx, {"op": "send_offsets"}, send_offsets):
            return

        def committed(when, settle=False):
            # settle: ask again while the offset is not visible yet, as the
            # transaction's markers reach the group after EndTxn's answer
            # (kafka-python cannot ask with require_stable and wait for
            # UNSTABLE_OFFSET_COMMIT to end, as the other clients do)
            end = time.monotonic() + 10
            while True:
                obs = {"when": when, "require_stable": False}
                a = ctx.admin()
                try:
                    offs = a.list_consumer_group_offsets(group, partitions=[TopicPartition(t_in, 0)])
                    om = offs.get(TopicPartition(t_in, 0))
                    obs["offset"] = om.offset if om is not None and om.offset >= 0 else None
                except Exception as e:  # noqa: BLE001
                    obs["error"] = error_name(e)
                finally:
                    a.close()
                if not settle or obs.get("offset") is not None or time.monotonic() > end:
                    break
                time.sleep(0.1)
            ctx.emit(obs)
        committed("before_commit")
        if not txn_step(ctx, {"op": "commit"}, lambda: end_txn(ctx, p, True)):
            return
        committed("after_commit", settle=True)
    finally:
        closing(p)
    for r in consume_isolated(ctx, t_out, [0], True, 3, 5):
        ctx.emit({"offset": r.offset, "value": text(r.value)})


SCENARIOS.update({
    "txn-commit": s_txn_commit,
    "txn-abort": s_txn_abort,
    "txn-fencing": s_txn_fencing,
    "txn-timeout-abort": s_txn_timeout_abort,
    "txn-offsets": s_txn_offsets,
    "transactions-tool": lambda ctx: ctx.emit({"skip": "a kafka-transactions.sh scenario (java-tools)"}),
    "compaction": lambda ctx: ctx.emit({"skip": "the brokers' log cleaners are compared, not clients: franz and java run it"}),
})


def on_alarm(signum, frame):
    raise ScenarioTimeout()


@contextlib.contextmanager
def alarm_guard():
    signal.alarm(SCENARIO_SECONDS - 1)
    try:
        yield
    finally:
        signal.alarm(0)


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    # Last line of defence against a call that ignores its timeout.
    signal.signal(signal.SIGALRM, on_alarm)
    main(SCENARIOS, Ctx, error_name, guard=alarm_guard)
