"""What the Python conformance clients (kcat, kafka-python, confluent-kafka)
share of tests/conformance/PROTOCOL.md: the command line and scenario loop,
the per-scenario names and observation lines, and the Kafka protocol error
names by code, so each client maps whatever its library exposes to the same
names."""

import argparse
import contextlib
import json
import sys
import time
import traceback

SCENARIO_SECONDS = 30  # PROTOCOL.md: each scenario must finish in 30 s


class Scenario:
    """One scenario's names, time budget and output; each client's Ctx
    extends it with its library's clients."""

    def __init__(self, bootstrap, prefix, name):
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.name = name
        self.topic = "%s-%s-0" % (prefix, name)
        self.missing = "%s-%s-missing" % (prefix, name)
        self.deadline = time.monotonic() + SCENARIO_SECONDS - 2

    def emit(self, obj):
        print("%s\t%s" % (self.name, json.dumps(obj, sort_keys=True, separators=(",", ":"))),
              flush=True)


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def main(scenarios, make_ctx, error_name, guard=contextlib.nullcontext):
    """Parse the command line and run each requested scenario: an unknown
    one is skipped, an unexpected failure becomes an observation naming
    error_name(exception) (the trace goes to stderr). guard() wraps each
    scenario (e.g. a last-resort timeout)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--scenarios", required=True)
    # PROTOCOL.md "Security" (all optional; PLAINTEXT without them)
    ap.add_argument("--security-protocol", default=None)
    ap.add_argument("--sasl-mechanism", default=None)
    ap.add_argument("--username", default=None)
    ap.add_argument("--password", default=None)
    ap.add_argument("--ca-file", default=None)
    args = ap.parse_args()
    security = {
        "protocol": args.security_protocol, "mechanism": args.sasl_mechanism,
        "username": args.username, "password": args.password, "ca_file": args.ca_file,
    }
    for name in [s for s in args.scenarios.split(",") if s]:
        fn = scenarios.get(name)
        ctx = make_ctx(args.bootstrap, args.prefix, name)
        ctx.security = security
        if fn is None:
            ctx.emit({"skip": "unknown scenario"})
            continue
        try:
            with guard():
                fn(ctx)
        except Exception as e:
            traceback.print_exc()
            ctx.emit({"error": error_name(e), "op": "scenario"})

PROTOCOL_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR",
    1: "OFFSET_OUT_OF_RANGE",
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    4: "INVALID_FETCH_SIZE",
    5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    8: "BROKER_NOT_AVAILABLE",
    9: "REPLICA_NOT_AVAILABLE",
    10: "MESSAGE_TOO_LARGE",
    13: "NETWORK_EXCEPTION",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    21: "INVALID_REQUIRED_ACKS",
    22: "ILLEGAL_GENERATION",
    23: "INCONSISTENT_GROUP_PROTOCOL",
    24: "INVALID_GROUP_ID",
    25: "UNKNOWN_MEMBER_ID",
    26: "INVALID_SESSION_TIMEOUT",
    27: "REBALANCE_IN_PROGRESS",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    32: "INVALID_TIMESTAMP",
    33: "UNSUPPORTED_SASL_MECHANISM",
    34: "ILLEGAL_SASL_STATE",
    35: "UNSUPPORTED_VERSION",
    36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS",
    38: "INVALID_REPLICATION_FACTOR",
    41: "NOT_CONTROLLER",
    42: "INVALID_REQUEST",
    43: "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    44: "POLICY_VIOLATION",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH",
    48: "INVALID_TXN_STATE",
    49: "INVALID_PRODUCER_ID_MAPPING",
    50: "INVALID_TRANSACTION_TIMEOUT",
    51: "CONCURRENT_TRANSACTIONS",
    52: "TRANSACTION_COORDINATOR_FENCED",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    58: "SASL_AUTHENTICATION_FAILED",
    59: "UNKNOWN_PRODUCER_ID",
    68: "NON_EMPTY_GROUP",
    69: "GROUP_ID_NOT_FOUND",
    74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH",
    76: "UNSUPPORTED_COMPRESSION_TYPE",
    79: "MEMBER_ID_REQUIRED",
    87: "INVALID_RECORD",
    88: "UNSTABLE_OFFSET_COMMIT",
    90: "PRODUCER_FENCED",
    100: "UNKNOWN_TOPIC_ID",
    105: "TRANSACTIONAL_ID_NOT_FOUND",
    110: "TRANSACTION_ABORTABLE",
}
