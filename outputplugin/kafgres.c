/*-------------------------------------------------------------------------
 *
 * kafgres.c
 *	  Entry point of the kafgres library: settings and the supervisor.
 *	  The library also holds the logical decoding output plugin (plugin.c)
 *	  and kafgres_produce() (produce.c).
 *
 * The library is meant to be listed in shared_preload_libraries.  Loaded
 * that way it starts the "kafgres supervisor" background worker, which runs
 * the Kafka-protocol broker (kafgres-broker) as a child process.  Loaded any
 * other way it only defines the kafgres.* settings, so that SHOW and
 * current_setting() work in sessions, but it starts nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "auth.h"
#include "dropguard.h"
#include "kafgres.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* GUC variables; see docs/configuration.md */
char	   *kafgres_listen_address = NULL;
int			kafgres_port = 9092;
char	   *kafgres_advertised_host = NULL;
int			kafgres_advertised_port = 0;
char	   *kafgres_data_directory = NULL;
char	   *kafgres_database = NULL;
char	   *kafgres_role = NULL;
char	   *kafgres_broker_path = NULL;
bool		kafgres_auto_create_topics = true;
int			kafgres_default_partitions = 1;
int			kafgres_group_initial_rebalance_delay = 3000;
int			kafgres_transaction_max_timeout = 900000;
int			kafgres_transactional_id_expiration = 604800000;
int			kafgres_transaction_abort_timed_out_interval = 10000;
int			kafgres_transaction_remove_expired_interval = 3600000;
bool		kafgres_fsync = true;
bool		kafgres_fetch_sendfile = true;
int			kafgres_log_cached_tail = -1;
int			kafgres_max_message_bytes = 1048588;
int			kafgres_log_retention_check_interval = 300000;
int			kafgres_log_cleaner_backoff = 15000;
int			kafgres_fetch_session_cache_slots = 1000;
char	   *kafgres_segment_archive_command = NULL;
int			kafgres_producer_id_expiration = 86400000;
int			kafgres_producer_id_expiration_check_interval = 600000;
int			kafgres_mapping_render_timeout = 5000;
int			kafgres_authorizer = KAFGRES_AUTHORIZER_AUTO;
char	   *kafgres_super_users = NULL;
bool		kafgres_allow_everyone_if_no_acl_found = false;

/*
 * kafgres.storage_engine: the engine of the topics created from now on
 * (kafgres.topic.storage_engine's default reads it by name, so no C code
 * needs the value; the broker opens each topic with the engine its row
 * names).
 */
static int	kafgres_storage_engine = 0;

static const struct config_enum_entry storage_engine_options[] = {
	{"segment", 0, false},
	{"table", 1, false},
	{NULL, 0, false}
};

static const struct config_enum_entry authorizer_options[] = {
	{"auto", KAFGRES_AUTHORIZER_AUTO, false},
	{"on", KAFGRES_AUTHORIZER_ON, false},
	{"off", KAFGRES_AUTHORIZER_OFF, false},
	{"true", KAFGRES_AUTHORIZER_ON, true},
	{"false", KAFGRES_AUTHORIZER_OFF, true},
	{NULL, 0, false}
};

/*
 * Is the security protocol of listener name (len bytes) other than
 * PLAINTEXT?  A name is its own protocol unless
 * kafgres.listener_security_protocol_map maps it (NAME:PROTOCOL,...).
 */
static bool
listener_authenticates(const char *name, size_t len)
{
	const char *proto = name;
	size_t		proto_len = len;
	const char *m = kafgres_listener_security_protocol_map;

	while (m != NULL && *m != '\0')
	{
		size_t		item = strcspn(m, ",");
		const char *colon = memchr(m, ':', item);

		while (*m == ' ')
			m++, item--;
		if (colon != NULL && (size_t) (colon - m) == len &&
			pg_strncasecmp(m, name, len) == 0)
		{
			proto = colon + 1;
			proto_len = item - (colon + 1 - m);
			break;
		}
		m += item;
		if (*m == ',')
			m++;
	}
	while (proto_len > 0 && proto[proto_len - 1] == ' ')
		proto_len--;
	return !(proto_len == strlen("PLAINTEXT") &&
			 pg_strncasecmp(proto, "PLAINTEXT", proto_len) == 0);
}

/*
 * Whether ACLs are enforced, in the broker and on the SQL side alike.
 * "auto" is on when a listener is not PLAINTEXT (Kafka needs an authorizer
 * only when clients can be told apart: on a PLAINTEXT-only broker every
 * client is User:ANONYMOUS).  The broker's Config.authorizerEnabled
 * resolves it the same way.
 */
bool
kafgres_authorizer_enabled(void)
{
	const char *l = kafgres_listeners;

	if (kafgres_authorizer != KAFGRES_AUTHORIZER_AUTO)
		return kafgres_authorizer == KAFGRES_AUTHORIZER_ON;
	while (l != NULL && *l != '\0')
	{
		size_t		item = strcspn(l, ",");
		const char *sep;

		while (*l == ' ' && item > 0)
			l++, item--;
		sep = item >= 3 ? strstr(l, "://") : NULL;
		if (sep != NULL && sep < l + item &&
			listener_authenticates(l, sep - l))
			return true;
		l += item;
		if (*l == ',')
			l++;
	}
	return false;
}

PG_FUNCTION_INFO_V1(kafgres_acl_enabled);

/* kafgres.acl_enabled() */
Datum
kafgres_acl_enabled(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(kafgres_authorizer_enabled());
}
char	   *kafgres_listeners = NULL;
char	   *kafgres_advertised_listeners = NULL;
char	   *kafgres_listener_security_protocol_map = NULL;
bool		kafgres_allow_plaintext_remote = false;
char	   *kafgres_ssl_cert_file = NULL;
char	   *kafgres_ssl_key_file = NULL;
char	   *kafgres_ssl_ca_file = NULL;
int			kafgres_ssl_client_auth = KAFGRES_CLIENT_AUTH_NONE;
int			kafgres_ssl_min_protocol_version = KAFGRES_TLS_1_2;
char	   *kafgres_ssl_principal_mapping_rules = NULL;
char	   *kafgres_sasl_enabled_mechanisms = NULL;
char	   *kafgres_client_role = NULL;
int			kafgres_connections_max_reauth = 0;

static const struct config_enum_entry client_auth_options[] = {
	{"none", KAFGRES_CLIENT_AUTH_NONE, false},
	{"requested", KAFGRES_CLIENT_AUTH_REQUESTED, false},
	{"required", KAFGRES_CLIENT_AUTH_REQUIRED, false},
	{NULL, 0, false}
};

static const struct config_enum_entry tls_version_options[] = {
	{"TLSv1.2", KAFGRES_TLS_1_2, false},
	{"TLSv1.3", KAFGRES_TLS_1_3, false},
	{NULL, 0, false}
};

void
_PG_init(void)
{
	/*
	 * Everything is PGC_SIGHUP: the supervisor re-reads the settings on
	 * reload and restarts the broker if its command line changed, so none of
	 * them needs a server restart.
	 */
	DefineCustomStringVariable("kafgres.listen_address",
							   "Address the Kafka-protocol broker listens on.",
							   "\"*\" or \"0.0.0.0\" means all interfaces.",
							   &kafgres_listen_address,
							   "127.0.0.1",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.port",
							"TCP port the Kafka-protocol broker listens on.",
							NULL,
							&kafgres_port,
							9092, 1, 65535,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.advertised_host",
							   "Host name the broker tells Kafka clients to connect to.",
							   "Empty means the listen address, or this machine's host name "
							   "when listening on all interfaces.",
							   &kafgres_advertised_host,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.advertised_port",
							"Port the broker tells Kafka clients to connect to.",
							"0 means kafgres.port.",
							&kafgres_advertised_port,
							0, 0, 65535,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.data_directory",
							   "Directory holding the broker's segment log.",
							   "Empty means \"kafgres\" inside the data directory; "
							   "a relative path is taken relative to the data directory.",
							   &kafgres_data_directory,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.database",
							   "Database in which the kafgres extension is installed.",
							   NULL,
							   &kafgres_database,
							   "postgres",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.role",
							   "Role the broker connects to PostgreSQL as.",
							   "Empty means the bootstrap superuser.",
							   &kafgres_role,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.broker_path",
							   "Path of the kafgres-broker executable.",
							   "Empty means kafgres-broker in PostgreSQL's bin directory.",
							   &kafgres_broker_path,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("kafgres.auto_create_topics",
							 "Create unknown topics when clients first use them.",
							 NULL,
							 &kafgres_auto_create_topics,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.default_partitions",
							"Number of partitions of topics created without an explicit count.",
							NULL,
							&kafgres_default_partitions,
							1, 1, 10000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.group_initial_rebalance_delay",
							"How long a new consumer group waits for more members before its first rebalance.",
							"Kafka's group.initial.rebalance.delay.ms.",
							&kafgres_group_initial_rebalance_delay,
							3000, 0, 300000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/* The transaction coordinator's settings, with Kafka's defaults and ranges. */
	DefineCustomIntVariable("kafgres.transaction_max_timeout",
							"Longest transaction.timeout.ms a transactional producer may ask for.",
							"Kafka's transaction.max.timeout.ms.",
							&kafgres_transaction_max_timeout,
							900000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.transactional_id_expiration",
							"How long a transactional id without a transaction in progress is kept.",
							"Kafka's transactional.id.expiration.ms.",
							&kafgres_transactional_id_expiration,
							604800000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.transaction_abort_timed_out_interval",
							"How often the transaction coordinator aborts transactions past their timeout.",
							"Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms.",
							&kafgres_transaction_abort_timed_out_interval,
							10000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.transaction_remove_expired_interval",
							"How often the transaction coordinator forgets expired transactional ids.",
							"Kafka's transaction.remove.expired.transaction.cleanup.interval.ms.",
							&kafgres_transaction_remove_expired_interval,
							3600000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("kafgres.fsync",
							 "Acknowledge produced records only once they are flushed to disk.",
							 "Turning this off risks losing acknowledged records "
							 "if the machine crashes.",
							 &kafgres_fsync,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	/*
	 * Read by kafgres_produce() in the backends, not by the broker.  The
	 * default is Kafka's max.message.bytes.  The upper bound keeps the
	 * logical message, which carries the record plus a few bytes, within
	 * what one palloc can hold.
	 */
	DefineCustomIntVariable("kafgres.max_message_bytes",
							"Largest record kafgres_produce() accepts, as a Kafka record batch.",
							"Kafka's max.message.bytes: key, value and headers plus "
							"the record batch's overhead.",
							&kafgres_max_message_bytes,
							1048588, 1024, MaxAllocSize / 2,
							PGC_SIGHUP, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.log_retention_check_interval",
							"How often the broker deletes log segments that topics' retention.ms or retention.bytes no longer keep.",
							"Kafka's log.retention.check.interval.ms.",
							&kafgres_log_retention_check_interval,
							300000, 100, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.log_cleaner_backoff",
							"How often the log cleaner looks for compacted partitions to clean.",
							"Kafka's log.cleaner.backoff.ms as a static broker config; a dynamic one (AlterConfigs) overrides it.",
							&kafgres_log_cleaner_backoff,
							15000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("kafgres.fetch_sendfile",
							 "Send fetched records from the log files to plaintext connections with sendfile.",
							 "Off: fetches read records into the broker's memory and write them from there, "
							 "as they always do on TLS connections and for table topics.",
							 &kafgres_fetch_sendfile,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	/*
	 * Postgres drops its own WAL from the page cache when it is done with
	 * it; set, the broker does the same with the log beyond its newest
	 * bytes.  The default leaves the page cache to the kernel, as Kafka
	 * does, so that consumers catching up read from memory.
	 */
	DefineCustomIntVariable("kafgres.log_cached_tail",
							"How much of each partition's newest durable log the broker leaves in the operating system's page cache.",
							"Older log pages are dropped once fsynced, and fetches further back read "
							"ahead from disk. -1 leaves the page cache to the kernel, as Kafka does. "
							"Only with kafgres.fsync on.",
							&kafgres_log_cached_tail,
							-1, -1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.max_incremental_fetch_session_cache_slots",
							"How many incremental fetch sessions the broker keeps.",
							"Kafka's max.incremental.fetch.session.cache.slots; 0 turns fetch sessions off.",
							&kafgres_fetch_session_cache_slots,
							1000, 0, INT_MAX,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.segment_archive_command",
							   "Shell command that archives a sealed log segment file.",
							   "As archive_command: %p is the file's path, %f a name unique across "
							   "partitions (<topic>-<partition>-<file>), %% a percent sign; exit status 0 "
							   "means archived. Empty: no archiving.",
							   &kafgres_segment_archive_command,
							   "",
							   PGC_SIGHUP, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.producer_id_expiration",
							"How long a partition remembers an idle idempotent producer that has no open transaction.",
							"Kafka's producer.id.expiration.ms.",
							&kafgres_producer_id_expiration,
							86400000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.producer_id_expiration_check_interval",
							"How often the broker forgets the producers idle longer than kafgres.producer_id_expiration.",
							"Kafka's producer.id.expiration.check.interval.ms.",
							&kafgres_producer_id_expiration_check_interval,
							600000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * A limit per render call, so that one slow mapping cannot hold up the
	 * delivery of everything committed after its change.
	 */
	DefineCustomIntVariable("kafgres.mapping_render_timeout",
							"Longest time a CDC mapping may take to render a change.",
							"A change that takes longer is dead-lettered (or stalls a mapping "
							"with on_error 'stall'). 0 turns the limit off.",
							&kafgres_mapping_render_timeout,
							5000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * Authorization (docs/security.md, "Authorization").  Read by the
	 * broker (passed as flags) and by kafgres_produce() and the mapping
	 * trigger in the backends, which apply the same ACLs.
	 */
	DefineCustomEnumVariable("kafgres.storage_engine",
							 "Storage engine of new topics: segment (files in the data directory) or table (rows of kafgres.log_batch).",
							 "Read when a topic is created; a topic keeps its engine for life.",
							 &kafgres_storage_engine,
							 0, storage_engine_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("kafgres.authorizer",
							 "Whether Kafka ACLs are enforced: auto, on or off.",
							 "auto enforces them when a listener authenticates clients.",
							 &kafgres_authorizer,
							 KAFGRES_AUTHORIZER_AUTO, authorizer_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.super_users",
							   "Principals allowed everything, separated by semicolons.",
							   "Kafka's super.users, e.g. User:admin;User:ops. Postgres "
							   "superusers are super users too.",
							   &kafgres_super_users,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("kafgres.allow_everyone_if_no_acl_found",
							 "Allow everyone to use a resource that no ACL applies to.",
							 "Kafka's allow.everyone.if.no.acl.found.",
							 &kafgres_allow_everyone_if_no_acl_found,
							 false,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	/*
	 * Listeners and authentication (docs/security.md).  Like the rest they
	 * are PGC_SIGHUP: a change restarts the broker; a reload that changes
	 * none of them is forwarded to the broker, which reads the certificate
	 * files again.
	 */
	DefineCustomStringVariable("kafgres.listeners",
							   "Kafka listeners, as Kafka's listeners setting spells them.",
							   "NAME://host:port,... with NAME one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
							   "SASL_SSL (or a name in kafgres.listener_security_protocol_map). "
							   "Empty: one PLAINTEXT listener on kafgres.listen_address and kafgres.port.",
							   &kafgres_listeners,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.advertised_listeners",
							   "Endpoints given to clients, per listener name (Kafka's advertised.listeners).",
							   "Empty, or a listener left out: the listener's own address, a wildcard "
							   "host replaced by this machine's name.",
							   &kafgres_advertised_listeners,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.listener_security_protocol_map",
							   "Security protocol of custom listener names (Kafka's listener.security.protocol.map).",
							   "NAME:PROTOCOL,...",
							   &kafgres_listener_security_protocol_map,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomBoolVariable("kafgres.allow_plaintext_remote",
							 "Allows a PLAINTEXT listener, which authenticates nobody, on a non-loopback address.",
							 NULL,
							 &kafgres_allow_plaintext_remote,
							 false,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.ssl_cert_file",
							   "PEM certificate of the broker's SSL and SASL_SSL listeners.",
							   "Empty: PostgreSQL's ssl_cert_file when ssl is on. Relative to the data directory.",
							   &kafgres_ssl_cert_file,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.ssl_key_file",
							   "PEM private key of the broker's SSL and SASL_SSL listeners.",
							   "Empty: PostgreSQL's ssl_key_file when ssl is on. Relative to the data directory.",
							   &kafgres_ssl_key_file,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.ssl_ca_file",
							   "PEM certificate authorities that Kafka client certificates must chain to.",
							   "Empty: PostgreSQL's ssl_ca_file when ssl is on. Relative to the data directory.",
							   &kafgres_ssl_ca_file,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomEnumVariable("kafgres.ssl_client_auth",
							 "Whether SSL listeners ask Kafka clients for a certificate (Kafka's ssl.client.auth).",
							 "With required, the principal is the certificate's subject.",
							 &kafgres_ssl_client_auth,
							 KAFGRES_CLIENT_AUTH_NONE, client_auth_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("kafgres.ssl_min_protocol_version",
							 "Lowest TLS version the broker accepts.",
							 NULL,
							 &kafgres_ssl_min_protocol_version,
							 KAFGRES_TLS_1_2, tls_version_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.ssl_principal_mapping_rules",
							   "Client certificate subject to Kafka user name (Kafka's ssl.principal.mapping.rules).",
							   NULL,
							   &kafgres_ssl_principal_mapping_rules,
							   "DEFAULT",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.sasl_enabled_mechanisms",
							   "SASL mechanisms of SASL listeners (Kafka's sasl.enabled.mechanisms).",
							   "SCRAM-SHA-256 and PLAIN; PLAIN is offered on SASL_SSL listeners only.",
							   &kafgres_sasl_enabled_mechanisms,
							   "SCRAM-SHA-256,PLAIN",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("kafgres.client_role",
							   "Role that Kafka SASL users must be members of.",
							   "Empty: any role that can log in.",
							   &kafgres_client_role,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("kafgres.connections_max_reauth",
							"Longest SASL session before the client must re-authenticate (Kafka's connections.max.reauth.ms).",
							"0: sessions last until the role's VALID UNTIL, if any.",
							&kafgres_connections_max_reauth,
							0, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("kafgres");

	/* in every backend that loads the library: DROP EXTENSION's check */
	kafgres_dropguard_init();

	/*
	 * Only the postmaster can register a background worker that is started
	 * with the server, or reserve shared memory (for the key that
	 * authenticates kafgres_produce's messages, auth.c); a library loaded
	 * later (LOAD, session_preload) must not try.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		kafgres_register_supervisor();
		kafgres_auth_init();
	}
}
