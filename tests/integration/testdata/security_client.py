#!/usr/bin/env python3
"""Runs the cells of the security matrix (security_clients_test.go) with
kafka-python or confluent-kafka and prints one line per cell:

    RESULT<TAB>name<TAB>code<TAB>detail

code is empty on success, else the name the client gives the error: the
Kafka error name (TOPIC_AUTHORIZATION_FAILED, ...) where the client has
one, else its own (confluent-kafka's _AUTHENTICATION, an exception class).
Every wait is bounded.

SPEC is tab-separated lines: "addr LISTENER HOST:PORT", "ca PATH",
"cert PATH", "key PATH" and
"cell NAME LISTENER MECHANISM USER PASSWORD OP TOPIC GROUP".

Usage: security_client.py kafka-python|confluent-kafka SPEC
"""
import logging
import sys
import time
import traceback

WAIT = 12  # seconds any one operation may take

lib, spec_path = sys.argv[1:3]
addrs, files, cells = {}, {}, []
with open(spec_path) as f:
    for line in f:
        parts = line.rstrip("\n").split("\t")
        if parts[0] == "addr":
            addrs[parts[1]] = parts[2]
        elif parts[0] == "cell":
            cells.append(dict(zip(["name", "listener", "mech", "user", "password", "op", "topic", "group"], parts[1:])))
        else:
            files[parts[0]] = parts[1]


def report(name, code, detail=""):
    detail = " ".join(str(detail).split())[:600]
    sys.stdout.write("RESULT\t%s\t%s\t%s\n" % (name, code, detail))
    sys.stdout.flush()


class Failed(Exception):
    """An operation's error, with the code the client gave it."""

    def __init__(self, code, detail):
        super().__init__(detail)
        self.code = code


# ---- kafka-python ----

def kp_config(c):
    cfg = dict(bootstrap_servers=addrs[c["listener"]], security_protocol=c["listener"],
               request_timeout_ms=WAIT * 1000, api_version_auto_timeout_ms=WAIT * 1000,
               reconnect_backoff_max_ms=500)
    if c["mech"]:
        cfg.update(sasl_mechanism=c["mech"], sasl_plain_username=c["user"], sasl_plain_password=c["password"])
    if "SSL" in c["listener"]:
        cfg.update(ssl_cafile=files["ca"])
    if c["listener"] == "SSL":
        cfg.update(ssl_certfile=files["cert"], ssl_keyfile=files["key"])
    return cfg


class SaslLog(logging.Handler):
    """kafka-python does not raise a refused login: kafka.conn logs
    "SaslAuthenticate error: SaslAuthenticationFailedError (<broker's
    message>)", closes the connection and the call fails as if the broker
    were unreachable. This keeps what it logged."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.seen = []

    def emit(self, record):
        msg = record.getMessage()
        if "SaslAuthenticate error" in msg or "SaslAuthenticationFailedError" in msg:
            self.seen.append(msg)


sasl_log = SaslLog()
logging.getLogger("kafka.conn").addHandler(sasl_log)


def kp_code(e):
    from kafka.errors import BrokerResponseError
    if isinstance(e, BrokerResponseError) and type(e).message:
        return type(e).message
    return type(e).__name__


def kp_check(code, what):
    from kafka.errors import for_code
    if code != 0:
        err = for_code(code)
        raise Failed(err.message, "%s: %s" % (what, err.__name__))


def kp_run(c):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    cfg, op, topic = kp_config(c), c["op"], c["topic"]
    if op == "login":
        sasl_log.seen.clear()
        try:
            cl = KafkaAdminClient(**cfg)
            try:
                cl.describe_cluster()
            finally:
                cl.close()
        except Exception as e:
            if sasl_log.seen:
                raise Failed("LOGGED_SASL_AUTHENTICATION_FAILED", "%s; then %s: %s" % (sasl_log.seen[0], type(e).__name__, e))
            raise
    if op in ("produce", "roundtrip"):
        p = KafkaProducer(max_block_ms=WAIT * 1000, **cfg)
        try:
            p.send(topic, b"v-" + c["name"].encode()).get(timeout=WAIT)
        finally:
            p.close(timeout=2)
    if op in ("fetch", "roundtrip"):
        cons = KafkaConsumer(enable_auto_commit=False, fetch_max_wait_ms=200, **cfg)
        try:
            tp = TopicPartition(topic, 0)
            cons.assign([tp])
            cons.seek_to_beginning(tp)
            deadline = time.time() + WAIT
            while not cons.poll(timeout_ms=500):
                # kafka-python's consumer raises nothing for a topic it may
                # not read: it never learns a leader, so never fetches; the
                # metadata answer it keeps is the only report of the refusal
                if topic in cons._client.cluster.unauthorized_topics:
                    raise Failed("TOPIC_AUTHORIZATION_FAILED", "no exception; the consumer's metadata lists %s as unauthorized" % topic)
                if time.time() > deadline:
                    raise Failed("TIMEOUT", "no record within %ds" % WAIT)
        finally:
            cons.close(autocommit=False)
    if op == "group":
        cons = KafkaConsumer(group_id=c["group"], enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=6000, heartbeat_interval_ms=500, fetch_max_wait_ms=200, **cfg)
        try:
            cons.subscribe([topic])
            deadline = time.time() + WAIT
            while not cons.poll(timeout_ms=500):
                if time.time() > deadline:
                    raise Failed("TIMEOUT", "no record within %ds" % WAIT)
            cons.commit()
        finally:
            cons.close(autocommit=False)
    if op in ("create", "delete", "topic-configs", "broker-configs"):
        adm = KafkaAdminClient(**cfg)
        try:
            if op == "create":
                adm.create_topics([NewTopic(topic, 1, 1)], timeout_ms=WAIT * 1000)
            elif op == "delete":
                adm.delete_topics([topic], timeout_ms=WAIT * 1000)
            else:
                kind, name = (ConfigResourceType.TOPIC, topic) if op == "topic-configs" else (ConfigResourceType.BROKER, "1")
                # the responses carry the errors; kafka-python does not raise them
                for resp in adm.describe_configs([ConfigResource(kind, name)]):
                    for res in resp.resources:
                        kp_check(res[0], "describe_configs %s" % res[3])
        finally:
            adm.close()


# ---- confluent-kafka ----

def ck_config(c, errors):
    cfg = {"bootstrap.servers": addrs[c["listener"]], "security.protocol": c["listener"],
           "socket.timeout.ms": WAIT * 1000, "reconnect.backoff.max.ms": 500,
           "error_cb": lambda e: errors.append(e)}
    if c["mech"]:
        cfg.update({"sasl.mechanisms": c["mech"], "sasl.username": c["user"], "sasl.password": c["password"]})
    if "SSL" in c["listener"]:
        cfg["ssl.ca.location"] = files["ca"]
    if c["listener"] == "SSL":
        cfg.update({"ssl.certificate.location": files["cert"], "ssl.key.location": files["key"]})
    return cfg


def ck_raise(err, errors):
    """Raises the client's error: an authentication failure librdkafka
    reported through error_cb wins over what the operation saw after it."""
    from confluent_kafka import KafkaError
    for e in errors:
        if e.code() == KafkaError._AUTHENTICATION:
            raise Failed(e.name(), e.str())
    raise Failed(err.name(), err.str())


def ck_future(f, errors):
    from confluent_kafka import KafkaException
    try:
        return f.result(timeout=WAIT)
    except KafkaException as e:
        ck_raise(e.args[0], errors)


def ck_poll(cons, errors, what, topic=None):
    """Polls for one record. With topic (a fetch without a group) the
    group's errors are not the fetch's: librdkafka looks the coordinator of
    its mandatory group.id up even for assign(), and reports that group's
    GROUP_AUTHORIZATION_FAILED though it never uses it. Nor does it raise
    anything for an assigned partition of a topic it may not describe (it
    never learns a leader, so never fetches): the topic's metadata error is
    its report of the refusal."""
    from confluent_kafka import KafkaError
    deadline = time.time() + WAIT
    while time.time() < deadline:
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            ck_raise(errors[0], errors)
        m = cons.poll(0.5)
        if topic is not None and m is None:
            md = cons.list_topics(topic, timeout=WAIT).topics.get(topic)
            if md is not None and md.error is not None and md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise Failed(md.error.name(), "no error from poll; the topic's metadata: %s" % md.error.str())
        if m is None:
            continue
        if m.error():
            if topic is not None and m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                continue
            ck_raise(m.error(), errors)
        return
    raise Failed("TIMEOUT", "%s: no record within %ds; client errors: %s" % (what, WAIT, [e.str() for e in errors]))


def ck_run(c):
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
    errors = []
    cfg, op, topic = ck_config(c, errors), c["op"], c["topic"]
    if op == "login":
        # librdkafka retries a refused login until the call's timeout; the
        # refusal itself is reported at once through error_cb, which poll()
        # serves, so ask in short steps
        adm = AdminClient(cfg)
        deadline = time.time() + WAIT
        while True:
            try:
                adm.list_topics(timeout=1)
                break
            except KafkaException as e:
                adm.poll(0.2)
                if errors or time.time() > deadline:
                    ck_raise(e.args[0], errors)
        adm.poll(0)
        for e in errors:
            ck_raise(e, errors)
    if op in ("produce", "roundtrip"):
        p = Producer(dict(cfg, **{"message.timeout.ms": WAIT * 1000}))
        got = []
        p.produce(topic, b"v-" + c["name"].encode(), on_delivery=lambda err, msg: got.append(err))
        p.flush(WAIT + 2)
        if not got:
            raise Failed("TIMEOUT", "no delivery report")
        if got[0] is not None:
            ck_raise(got[0], errors)
    if op in ("fetch", "roundtrip"):
        # librdkafka wants a group.id even for a consumer that only assigns
        cons = Consumer(dict(cfg, **{"group.id": c["name"], "enable.auto.commit": False}))
        try:
            cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            ck_poll(cons, errors, "fetch", topic)
        finally:
            cons.close()
    if op == "group":
        cons = Consumer(dict(cfg, **{"group.id": c["group"], "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                                     "heartbeat.interval.ms": 500}))
        try:
            cons.subscribe([topic])
            ck_poll(cons, errors, "group")
            try:
                cons.commit(asynchronous=False)
            except Exception as e:
                ck_raise(e.args[0], errors)
        finally:
            cons.close()
    if op in ("create", "delete", "topic-configs", "broker-configs"):
        adm = AdminClient(cfg)
        if op == "create":
            fs = adm.create_topics([NewTopic(topic, 1, 1)], operation_timeout=WAIT, request_timeout=WAIT)
        elif op == "delete":
            fs = adm.delete_topics([topic], operation_timeout=WAIT, request_timeout=WAIT)
        else:
            kind, name = ("topic", topic) if op == "topic-configs" else ("broker", "1")
            fs = adm.describe_configs([ConfigResource(kind, name)], request_timeout=WAIT)
        for f in fs.values():
            ck_future(f, errors)


run = {"kafka-python": kp_run, "confluent-kafka": ck_run}[lib]
for c in cells:
    try:
        run(c)
        report(c["name"], "")
    except Failed as e:
        report(c["name"], e.code, e)
    except Exception as e:
        code = kp_code(e) if lib == "kafka-python" else type(e).__name__
        if lib == "confluent-kafka" and e.args and hasattr(e.args[0], "name"):
            code = e.args[0].name()
        report(c["name"], code, "%s: %s | %s" % (type(e).__name__, e, traceback.format_exc(limit=3)))
