#!/usr/bin/env python3
"""kcat conformance client: runs scenarios from ../../scenarios.json by
driving the kcat command line tool (librdkafka) and prints what kcat
observes, as PROTOCOL.md prescribes.  Standard library only.

Usage: client.py --bootstrap HOST:PORT --prefix P --scenarios a,b,c

kcat reports errors only as librdkafka's error strings on stderr ("Broker:
Message size too large", "Local: Unknown partition"); we turn them back
into codes with librdkafka's own rd_kafka_err2str() table and then into the
protocol's names.
"""
import ctypes
import ctypes.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

KCAT = os.environ.get("KCAT", "kcat")

# Protocol names (Kafka's Errors enum) of the broker codes; librdkafka's
# positive codes are the protocol's.
# The error-name table is shared with the other Python clients.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from protocol import PROTOCOL_NAMES, Scenario, log, main  # noqa: E402

# librdkafka's local codes that stand for a protocol error.
LOCAL_NAMES = {
    # refused locally, the partition/topic is not in the metadata (PROTOCOL.md:
    # "the client's local error mapped to UNKNOWN_TOPIC_OR_PARTITION")
    "_UNKNOWN_PARTITION": "UNKNOWN_TOPIC_OR_PARTITION",
    "_UNKNOWN_TOPIC": "UNKNOWN_TOPIC_OR_PARTITION",
    # local timeouts are not broker answers: keep them visibly non-protocol
    "_MSG_TIMED_OUT": "CLIENT_TIMEOUT",
    "_TIMED_OUT": "CLIENT_TIMEOUT",
}


def load_error_strings():
    """[(err2str text, protocol name)], longest text first, from the
    librdkafka kcat links against."""
    lib = ctypes.CDLL(ctypes.util.find_library("rdkafka") or "librdkafka.so.1")
    lib.rd_kafka_err2str.restype = ctypes.c_char_p
    lib.rd_kafka_err2name.restype = ctypes.c_char_p
    table = []
    for code in range(-200, 200):
        s = lib.rd_kafka_err2str(code).decode()
        rdname = lib.rd_kafka_err2name(code).decode()
        if code == 0 or s.startswith("Err-") or "Unknown error" in s:
            continue  # unassigned code
        if rdname in LOCAL_NAMES:
            name = LOCAL_NAMES[rdname]
        elif code >= -1:
            name = PROTOCOL_NAMES.get(code, "ERROR_%d" % code)
        else:
            name = "CLIENT_" + rdname.lstrip("_")
        table.append((s, name))
    # Where librdkafka passes the broker's error message through instead of
    # its own text ("FindCoordinator response error: <message>"), the
    # message is Kafka's Errors.message() of the code.
    for code, s in BROKER_MESSAGES.items():
        table.append((s, PROTOCOL_NAMES[code]))
    table.sort(key=lambda t: -len(t[0]))
    return table


# Kafka's Errors.message() of the codes the secure scenarios meet.
BROKER_MESSAGES = {
    29: "Topic authorization failed.",
    30: "Group authorization failed.",
    31: "Cluster authorization failed.",
}


ERROR_STRINGS = load_error_strings()


def error_from_text(text):
    """Protocol name of the librdkafka error string found in kcat's message."""
    for s, name in ERROR_STRINGS:
        if s in text:
            return name
    return "CLIENT_ERROR"



class Ctx(Scenario):
    def __init__(self, *args):
        super().__init__(*args)
        self.security = {}

    def security_args(self):
        """kcat -X settings for the runner's security flags (PROTOCOL.md
        "Security"); none for PLAINTEXT."""
        s = self.security
        if s.get("protocol") in (None, "PLAINTEXT"):
            return []
        cfg = {"security.protocol": s["protocol"], "sasl.mechanisms": s["mechanism"],
               "sasl.username": s["username"], "sasl.password": s["password"]}
        if s["protocol"] == "SASL_SSL":
            cfg["ssl.ca.location"] = s["ca_file"]
        return [a for k, v in cfg.items() for a in ("-X", "%s=%s" % (k, v))]

    def kcat(self, args, stdin=b"", cap=15):
        """Run kcat; returns (rc, stdout, stderr lines). Bounded by the
        scenario's time budget (rc None when it had to be killed)."""
        cmd = [KCAT, "-b", self.bootstrap] + self.security_args() + args
        left = max(1, min(cap, self.deadline - time.monotonic()))
        try:
            p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=left)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = None, e.stdout or b"", e.stderr or b""
        err = err.decode("utf-8", "replace")
        if err.strip():
            log("%s: %s: %s" % (self.name, " ".join([KCAT] + args[:6]), err.strip()))
        return rc, out, err.splitlines()

    def errors(self, lines):
        """Distinct protocol names of kcat's error lines, in order."""
        names = []
        for line in lines:
            if "SASL authentication error" in line:
                # librdkafka's report of SaslAuthenticate's error (the
                # broker's message follows), its _AUTHENTICATION code
                if "SASL_AUTHENTICATION_FAILED" not in names:
                    names.append("SASL_AUTHENTICATION_FAILED")
            elif "ERROR" in line or "failed" in line:
                name = error_from_text(line)
                if name not in names:
                    names.append(name)
        return names


def produce(ctx, lines=None, files=None, topic=None, key_delim=None, extra=()):
    """Produce newline-separated `lines` (or one message per file), print
    each distinct error; returns True when kcat reported success."""
    args = ["-P", "-t", topic or ctx.topic, "-X", "message.timeout.ms=10000", "-X", "acks=all"]
    if key_delim:
        args += ["-K", key_delim]
    args += list(extra)
    stdin = b"".join(l + b"\n" for l in lines or [])
    rc, _, err = ctx.kcat(args + list(files or []), stdin=stdin)
    names = ctx.errors(err)
    if rc is None:
        names.append("CLIENT_TIMEOUT")
    elif rc != 0 and not names:
        names.append("CLIENT_ERROR")
    for name in names:
        ctx.emit({"op": "produce", "error": name})
    return rc == 0


def consume(ctx, expected, topic=None, partition=None, offset="beginning", extra=()):
    """Records (kcat -J envelopes) from offset until `expected` arrived or all
    partitions reached their end, sorted by (partition, offset)."""
    args = ["-C", "-J", "-e", "-q", "-t", topic or ctx.topic, "-o", str(offset)]
    if partition is not None:
        args += ["-p", str(partition)]
    if expected:
        args += ["-c", str(expected)]
    rc, out, err = ctx.kcat(args + list(extra), cap=20)
    for name in ctx.errors(err):
        ctx.emit({"op": "fetch", "error": name})
    recs = [json.loads(l) for l in out.decode("utf-8", "replace").splitlines() if l.strip()]
    recs.sort(key=lambda r: (r["partition"], r["offset"]))
    return recs


def metadata(ctx, topic):
    """kcat -L for one topic, never auto-creating: (topic dict, error name)."""
    rc, out, err = ctx.kcat(["-L", "-J", "-t", topic, "-X", "allow.auto.create.topics=false"])
    if rc != 0:
        return None, (ctx.errors(err) or ["CLIENT_ERROR"])[0]
    (t,) = json.loads(out)["topics"]
    if t.get("error"):
        return None, error_from_text(t["error"])
    return t, None


def query(ctx, topic, partition, ts):
    """kcat -Q: offset for timestamp ts (-2 earliest, -1 latest): (offset, error name)."""
    rc, out, err = ctx.kcat(["-Q", "-J", "-t", "%s:%d:%d" % (topic, partition, ts)])
    if rc != 0:
        return None, (ctx.errors(err) or ["CLIENT_ERROR"])[0]
    res = json.loads(out)[topic][str(partition)]
    if "error" in res:
        return None, error_from_text(res["error"])
    return res["offset"], None


# ---------------------------------------------------------------- scenarios

def s_metadata_topic(ctx):
    t, err = metadata(ctx, ctx.topic)
    if err:
        ctx.emit({"op": "metadata", "error": err})
        return
    parts = sorted(t["partitions"], key=lambda p: p["partition"])
    for p in parts:
        ctx.emit({"partition": p["partition"], "leader": p["leader"],
                  "replicas": [r["id"] for r in p["replicas"]],
                  "isr": [r["id"] for r in p["isrs"]]})
    ctx.emit({"topic": t["topic"], "partitions": len(parts)})


def produce_consume(codec):
    def run(ctx):
        lines = [b"k%d:v%d" % (i, i) for i in range(20)]
        produce(ctx, lines, key_delim=":", extra=["-X", "compression.codec=" + codec])
        for r in consume(ctx, 20):
            ctx.emit({"partition": r["partition"], "offset": r["offset"],
                      "key": r["key"], "value": r["payload"]})
    return run


def s_null_keys(ctx):
    # no -K: kcat sends a null key
    produce(ctx, [b"n%d" % i for i in range(5)])
    for r in consume(ctx, 5):
        ctx.emit({"offset": r["offset"], "key": r["key"], "value": r["payload"]})


def s_headers(ctx):
    # -H applies to every message of one kcat run, so one run per record;
    # "-H h2" without "=" is a header with a null value.
    for i, hs in enumerate((["h1=a"], ["h2"], ["h1=x", "h1=y"])):
        extra = [a for h in hs for a in ("-H", h)]
        produce(ctx, [b"v%d" % i], extra=extra)
    for r in consume(ctx, 3):
        flat = r.get("headers") or []  # kcat -J: [k1, v1, k2, v2, ...]
        ctx.emit({"offset": r["offset"], "value": r["payload"],
                  "headers": [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)]})


def s_timestamps(ctx):
    ctx.emit({"skip": "kcat cannot set a record's CreateTime"})


def s_large_record(ctx):
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"x" * 1000000)
        f.flush()
        # a file argument is produced as one message
        produce(ctx, files=[f.name], extra=["-X", "message.max.bytes=2000000"])
    for r in consume(ctx, 1, extra=["-X", "fetch.message.max.bytes=2000000"]):
        ctx.emit({"offset": r["offset"], "value_len": len(r["payload"])})


def s_too_large_record(ctx):
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"x" * 1100000)
        f.flush()
        # message.max.bytes 2,000,000 so the broker decides; retries=0 since
        # its verdict is final.
        ok = produce(ctx, files=[f.name],
                     extra=["-X", "message.max.bytes=2000000", "-X", "retries=0"])
    if ok:
        ctx.emit({"op": "produce", "error": None})


def s_list_offsets(ctx):
    # kcat cannot set CreateTime, so the 5 records carry the time they were
    # produced (after 1700000002500): the by-timestamp queries use the
    # scenario's first timestamp (expect offset 0) and one far in the future
    # (year 2100, expect -1) instead of the scenario's.
    produce(ctx, [b"v%d" % i for i in range(5)])
    for q, ts in (("earliest", -2), ("latest", -1),
                  ("timestamp:1700000002500", 1700000002500),
                  ("timestamp:4102444800000", 4102444800000)):
        off, err = query(ctx, ctx.topic, 0, ts)
        ctx.emit({"query": q, "error": err} if err else {"query": q, "offset": off})


def s_list_offsets_max_timestamp(ctx):
    ctx.emit({"skip": "kcat has no MAX_TIMESTAMP query and cannot set CreateTime"})


def s_unknown_topic_metadata(ctx):
    _, err = metadata(ctx, ctx.missing)
    ctx.emit({"op": "metadata", "error": err})


def s_unknown_topic_list_offsets(ctx):
    # librdkafka refuses locally ("Local: Unknown partition") once the
    # metadata says the topic does not exist.
    _, err = query(ctx, ctx.missing, 0, -1)
    ctx.emit({"op": "list_offsets", "error": err})


def s_unknown_partition(ctx):
    if produce(ctx, [b"v"], extra=["-p", "5"]):
        ctx.emit({"op": "produce", "error": None})


def s_idempotent_producer(ctx):
    produce(ctx, [b"v%d" % i for i in range(50)], extra=["-X", "enable.idempotence=true"])
    for r in consume(ctx, 50):
        ctx.emit({"offset": r["offset"], "value": r["payload"]})


def s_auto_create(ctx):
    topic = "%s-auto-create-new" % ctx.prefix
    produce(ctx, [b"created"], topic=topic, extra=["-X", "allow.auto.create.topics=true"])
    t, err = metadata(ctx, topic)
    if err:
        ctx.emit({"op": "metadata", "error": err})
        return
    ctx.emit({"topic_partitions": len(t["partitions"])})
    for r in consume(ctx, 1, topic=topic):
        ctx.emit({"offset": r["offset"], "value": r["payload"]})


def s_offset_out_of_range(ctx):
    produce(ctx, [b"v%d" % i for i in range(5)])
    # auto.offset.reset=error: kcat reports the broker's OFFSET_OUT_OF_RANGE
    # ("fetch failed due to requested offset not available on the broker:
    # Broker: Offset out of range") and exits.
    args = ["-C", "-J", "-e", "-q", "-t", ctx.topic, "-p", "0", "-o", "100",
            "-X", "auto.offset.reset=error"]
    rc, out, err = ctx.kcat(args, cap=10)
    names = ctx.errors(err)
    if names:
        for name in names:
            ctx.emit({"op": "fetch", "error": name})
    else:
        ctx.emit({"op": "fetch", "error": None, "records": len(out.splitlines())})


def s_empty_topic(ctx):
    # -e ends the read at the partition's end instead of waiting 2 s idle
    ctx.emit({"records": len(consume(ctx, 0))})
    off, err = query(ctx, ctx.topic, 0, -1)
    ctx.emit({"query": "latest", "error": err} if err else {"query": "latest", "offset": off})


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


# ---------------------------------------------------------------- security
# PROTOCOL.md "Security": SASL logins that succeed or fail, and what kcat
# can do of the eight operations of acl-denied and acl-allowed; how to
# connect comes from the runner's flags (Ctx.security_args). Debian's
# librdkafka (2.0.2) sends a SCRAM client-final nonce that Kafka 4.4 (and
# kafgres) refuse, so its SCRAM logins fail on both brokers.

def produce_one(ctx, cap=10):
    """kcat -P of one record key k value v to partition 0: (offset, first
    error name). The offset comes from kcat's delivery report (-vvv)."""
    args = ["-P", "-t", ctx.topic, "-p", "0", "-K", ":", "-X", "message.timeout.ms=%d" % (cap * 1000),
            "-v", "-v", "-v"]
    rc, _, err = ctx.kcat(args, stdin=b"k:v\n", cap=cap + 5)
    names = ctx.errors(err)
    if names:
        return None, names[0]
    if rc is None:
        return None, "CLIENT_TIMEOUT"
    for line in err:
        m = re.search(r"Message delivered to partition \d+ \(offset (\d+)\)", line)
        if m:
            return int(m.group(1)), None
    return None, "CLIENT_ERROR"


def fetch_first(ctx, cap=8):
    """kcat -C of partition 0 from offset 0 (no group) until one record or
    an error: (record envelope, first error name). Without -q, which would
    also silence librdkafka's report of a refused login."""
    rc, out, err = ctx.kcat(["-C", "-J", "-t", ctx.topic, "-p", "0", "-o", "0", "-c", "1"], cap=cap)
    names = ctx.errors(err)
    if names:
        return None, names[0]
    recs = [json.loads(l) for l in out.decode("utf-8", "replace").splitlines() if l.strip()]
    if recs:
        return recs[0], None
    return None, "CLIENT_TIMEOUT" if rc is None else "CLIENT_ERROR"


def s_sasl_ok(ctx):
    off, err = produce_one(ctx)
    if err:
        ctx.emit({"op": "produce", "error": err})
        return
    ctx.emit({"op": "produce", "error": None, "offset": off})
    r, err = fetch_first(ctx, cap=15)
    if err:
        ctx.emit({"op": "consume", "error": err})
        return
    ctx.emit({"op": "consume", "offset": r["offset"], "key": r["key"], "value": r["payload"]})


def s_sasl_refused(ctx):
    """kcat -L (Metadata) with credentials the broker must refuse."""
    _, err = metadata(ctx, ctx.topic)
    ctx.emit({"op": "connect", "error": err})


def s_acl_ops(ctx):
    """What kcat can do of acl-denied's and acl-allowed's operations, in
    PROTOCOL.md's order: produce, fetch, metadata and group-join. kcat has
    no request for offset-commit (it commits only what its group member
    consumed), describe-configs, create-topic or delete-topic, so those
    four are not observed."""
    _, err = produce_one(ctx, cap=6)
    ctx.emit({"op": "produce", "error": err})
    _, err = fetch_first(ctx)
    ctx.emit({"op": "fetch", "error": err})
    _, err = metadata(ctx, ctx.topic)
    ctx.emit({"op": "metadata", "error": err})
    # a balanced consumer (-G, the classic protocol in librdkafka 2.0) that
    # exits at the end of what it was assigned (-e); -v prints the
    # assignment
    group = "%s-%s-g" % (ctx.prefix, ctx.name)
    rc, _, err = ctx.kcat(["-G", group, "-J", "-e", "-v", "-X", "auto.offset.reset=earliest", ctx.topic], cap=8)
    names = ctx.errors(err)
    if names:
        name = names[0]
    elif any("assigned:" in l for l in err):
        name = None
    else:
        name = "CLIENT_TIMEOUT" if rc is None else "CLIENT_ERROR"
    ctx.emit({"op": "group-join", "error": name})


SCENARIOS.update({
    "sasl-scram-ok": s_sasl_ok,
    "sasl-ssl-scram-ok": s_sasl_ok,
    "sasl-ssl-plain-ok": s_sasl_ok,
    "sasl-bad-password": s_sasl_refused,
    "sasl-unknown-user": s_sasl_refused,
    "acl-denied": s_acl_ops,
    "acl-allowed": s_acl_ops,
    "kafka-acls": lambda ctx: ctx.emit({"skip": "a kafka-acls.sh scenario (java-tools)"}),
    "compaction": lambda ctx: ctx.emit({"skip": "the brokers' log cleaners are compared, not clients: franz and java run it"}),
})


if __name__ == "__main__":
    main(SCENARIOS, Ctx, lambda e: "CLIENT_%s" % type(e).__name__)
