#!/usr/bin/env bash
#
# tests/runsecurity.sh -- the security half of "make run": a SASL_SSL
# listener next to the loopback PLAINTEXT one, a self-signed certificate, a
# SASL role, the Kafka ACLs the demos need, and ready client configs.
#
#   tests/runsecurity.sh conf  DIR KAFKAPORT SASLPORT
#   tests/runsecurity.sh setup DIR KAFKAPORT SASLPORT
#
# conf makes DIR/tls/server.{crt,key} on first use (openssl; a self-signed
# certificate for localhost and 127.0.0.1) and prints the postgresql.conf
# lines for the two listeners; "make run" passes them to pgcluster.sh in
# KAFGRES_PG_CONF.  With a listener that is not PLAINTEXT the authorizer is
# on (kafgres.authorizer = auto), so setup, run once the cluster is up:
#
#   * grants User:ANONYMOUS from 127.0.0.1 (the PLAINTEXT listener is
#     loopback-only) what the demos in examples/ use: ALL on every topic,
#     group and transactional id, and CREATE, DESCRIBE, DESCRIBE_CONFIGS,
#     ALTER_CONFIGS and IDEMPOTENT_WRITE on the cluster -- not ALTER, which
#     would let any local process change ACLs and Postgres role passwords;
#   * creates the role kafka_user (LOGIN, a generated password, printed
#     once) with the same topic, group and transactional-id grants, from
#     any host;
#   * writes DIR/client.properties (Kafka's Java tools: --command-config)
#     and DIR/kcat.conf (kcat -F), both mode 0600 since they hold the
#     password, and prints a summary.
#
# Running it again keeps the certificate, the role and its password (read
# back from DIR/client.properties); delete that file to get a new password.

set -euo pipefail

die() { echo "runsecurity.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}; dir=${2:-}; kafkaport=${3:-9092}; saslport=${4:-9093}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '6,8p' "$0" | sed 's/^# *//' >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)
tls=$dir/tls
role=kafka_user

cmd_conf() {
	if [ ! -f "$tls/server.crt" ] || [ ! -f "$tls/server.key" ]; then
		command -v openssl >/dev/null || die "openssl is needed for the SASL_SSL listener's certificate"
		mkdir -p "$tls"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
			-subj '/CN=localhost' -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' \
			-keyout "$tls/server.key" -out "$tls/server.crt" 2>/dev/null ||
			die "openssl could not make the certificate"
		chmod 0600 "$tls/server.key"
		echo "runsecurity.sh: made a self-signed certificate in $tls" >&2
	fi
	if [ "$(id -u)" -eq 0 ]; then
		# the server runs as the postgres OS user (pgcluster.sh)
		chown -R postgres: "$tls"
	fi
	echo "kafgres.listeners = 'PLAINTEXT://127.0.0.1:$kafkaport,SASL_SSL://127.0.0.1:$saslport'"
	echo "kafgres.ssl_cert_file = '$tls/server.crt'"
	echo "kafgres.ssl_key_file = '$tls/server.key'"
}

psql_run() { bash "$here/pgcluster.sh" psql "$dir" -q -v ON_ERROR_STOP=1 "$@"; }

cmd_setup() {
	local props=$dir/client.properties password="" fresh=no
	if [ -f "$props" ]; then
		password=$(sed -n 's/.*password="\([^"]*\)";$/\1/p' "$props")
	fi
	local exists
	exists=$(psql_run -At -c "SELECT count(*) FROM pg_roles WHERE rolname = '$role'")
	if [ -z "$password" ] || [ "$exists" = 0 ]; then
		password=$(openssl rand -base64 24 | tr -d '/+=\n' | cut -c1-24)
		fresh=yes
		psql_run -v pw="$password" <<-SQL
			SET client_min_messages = warning;
			SELECT format(CASE WHEN EXISTS (SELECT FROM pg_roles WHERE rolname = '$role')
			                   THEN 'ALTER ROLE %I LOGIN PASSWORD %L' ELSE 'CREATE ROLE %I LOGIN PASSWORD %L' END,
			              '$role', :'pw') \gexec
		SQL
	fi

	# kafgres_acl_grant(principal, operation, resource_type, name, pattern, permission, host)
	local grants=() p op
	for p in "User:ANONYMOUS|127.0.0.1" "User:$role|*"; do
		local principal=${p%|*} host=${p#*|}
		for rt in TOPIC GROUP TRANSACTIONAL_ID; do
			grants+=("$principal|ALL|$rt|*|$host")
		done
	done
	for op in CREATE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE; do
		grants+=("User:ANONYMOUS|$op|CLUSTER|kafka-cluster|127.0.0.1")
	done
	grants+=("User:$role|IDEMPOTENT_WRITE|CLUSTER|kafka-cluster|*" "User:$role|DESCRIBE|CLUSTER|kafka-cluster|*")
	local sql="" g
	for g in "${grants[@]}"; do
		IFS='|' read -r principal op rt name host <<<"$g"
		sql+="SELECT kafgres_acl_grant('$principal', '$op', '$rt', '$name', 'LITERAL', 'ALLOW', '$host');"$'\n'
	done
	psql_run -o /dev/null <<<"$sql"

	local ca=$tls/server.crt bootstrap=127.0.0.1:$saslport
	umask 077
	cat >"$props" <<-EOF
		# written by tests/runsecurity.sh (make run): Kafka's Java clients and tools
		# over SASL_SSL, e.g. kafka-topics.sh --bootstrap-server $bootstrap --command-config $props --list
		bootstrap.servers=$bootstrap
		security.protocol=SASL_SSL
		sasl.mechanism=SCRAM-SHA-256
		sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$role" password="$password";
		ssl.truststore.type=PEM
		ssl.truststore.location=$ca
	EOF
	# PLAIN, not SCRAM: librdkafka before 2.10 (Debian 12's kcat) sends a
	# SCRAM nonce that Kafka 4.4 and kafgres refuse; over TLS, PLAIN is safe.
	cat >"$dir/kcat.conf" <<-EOF
		# written by tests/runsecurity.sh (make run): kcat -F $dir/kcat.conf -L
		bootstrap.servers=$bootstrap
		security.protocol=SASL_SSL
		sasl.mechanisms=PLAIN
		sasl.username=$role
		sasl.password=$password
		ssl.ca.location=$ca
	EOF

	echo
	echo "Kafka listeners:"
	echo "  PLAINTEXT  127.0.0.1:$kafkaport   loopback only, principal User:ANONYMOUS"
	echo "  SASL_SSL   127.0.0.1:$saslport   SCRAM-SHA-256 or PLAIN as a Postgres role; certificate $ca (self-signed)"
	echo "The authorizer is on (a listener is not PLAINTEXT). ACLs granted (SELECT * FROM kafgres_acls()):"
	for g in "${grants[@]}"; do
		IFS='|' read -r principal op rt name host <<<"$g"
		printf '  %-15s %-16s %-16s %-14s host %s\n' "$principal" "$op" "$rt" "$name" "$host"
	done
	echo "SASL user: $role (a Postgres role; any role with LOGIN and a SCRAM password can log in)"
	if [ $fresh = yes ]; then
		echo "  password: $password    (shown once; also in $props and $dir/kcat.conf)"
	else
		echo "  password: unchanged, in $props"
	fi
	echo "Clients over SASL_SSL:"
	echo "  kcat -F $dir/kcat.conf -L"
	echo "  kcat -b $bootstrap -X security.protocol=SASL_SSL -X sasl.mechanisms=PLAIN \\"
	echo "       -X sasl.username=$role -X sasl.password=<password> -X ssl.ca.location=$ca -L"
	echo "  kafka-topics.sh --bootstrap-server $bootstrap --command-config $props --list"
}

case "$cmd" in
conf)  cmd_conf ;;
setup) cmd_setup ;;
*)     die "unknown command $cmd" ;;
esac
