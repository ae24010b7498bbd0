/*-------------------------------------------------------------------------
 *
 * kafgres.h
 *	  Settings shared between the kafgres library's parts.
 *
 * The kafgres.* GUCs are defined in kafgres.c.  Most are read by the
 * supervisor background worker (supervisor.c), which turns them into the
 * broker's command line; kafgres_produce() (produce.c) reads a few in the
 * backends.  See docs/configuration.md for what each one does.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFGRES_H
#define KAFGRES_H

extern char *kafgres_listen_address;
extern int	kafgres_port;
extern char *kafgres_advertised_host;
extern int	kafgres_advertised_port;
extern char *kafgres_data_directory;
extern char *kafgres_database;
extern char *kafgres_role;
extern char *kafgres_broker_path;
extern bool kafgres_auto_create_topics;
extern int	kafgres_default_partitions;
extern int	kafgres_group_initial_rebalance_delay;
extern int	kafgres_transaction_max_timeout;
extern int	kafgres_transactional_id_expiration;
extern int	kafgres_transaction_abort_timed_out_interval;
extern int	kafgres_transaction_remove_expired_interval;
extern bool kafgres_fsync;
extern bool kafgres_fetch_sendfile;
extern int	kafgres_log_cached_tail;
extern int	kafgres_max_message_bytes;
extern int	kafgres_log_retention_check_interval;
extern int	kafgres_log_cleaner_backoff;
extern int	kafgres_fetch_session_cache_slots;
extern char *kafgres_segment_archive_command;
extern int	kafgres_producer_id_expiration;
extern int	kafgres_producer_id_expiration_check_interval;
extern int	kafgres_mapping_render_timeout;
extern char *kafgres_listeners;
extern char *kafgres_advertised_listeners;
extern char *kafgres_listener_security_protocol_map;
extern bool kafgres_allow_plaintext_remote;
extern char *kafgres_ssl_cert_file;
extern char *kafgres_ssl_key_file;
extern char *kafgres_ssl_ca_file;
extern int	kafgres_ssl_client_auth;
extern int	kafgres_ssl_min_protocol_version;
extern char *kafgres_ssl_principal_mapping_rules;
extern char *kafgres_sasl_enabled_mechanisms;
extern char *kafgres_client_role;
extern int	kafgres_connections_max_reauth;

/* kafgres.ssl_client_auth and kafgres.ssl_min_protocol_version values */
typedef enum
{
	KAFGRES_CLIENT_AUTH_NONE,
	KAFGRES_CLIENT_AUTH_REQUESTED,
	KAFGRES_CLIENT_AUTH_REQUIRED
} KafgresClientAuth;

typedef enum
{
	KAFGRES_TLS_1_2,
	KAFGRES_TLS_1_3
} KafgresTLSVersion;

/* kafgres.authorizer */
enum
{
	KAFGRES_AUTHORIZER_AUTO,
	KAFGRES_AUTHORIZER_ON,
	KAFGRES_AUTHORIZER_OFF
};
extern int	kafgres_authorizer;
extern char *kafgres_super_users;
extern bool kafgres_allow_everyone_if_no_acl_found;
extern bool kafgres_authorizer_enabled(void);

/* supervisor.c */
extern void kafgres_register_supervisor(void);
extern PGDLLEXPORT void kafgres_supervisor_main(Datum main_arg);

#endif							/* KAFGRES_H */
