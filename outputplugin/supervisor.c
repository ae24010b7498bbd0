/*-------------------------------------------------------------------------
 *
 * supervisor.c
 *	  The "kafgres supervisor" background worker.
 *
 * The Kafka-protocol broker is a separate program (kafgres-broker, written
 * in Go), so the supervisor's whole job is to keep exactly one copy of it
 * running for as long as the server runs, and none after.  It builds the
 * broker's command line from the kafgres.* settings, forks and execs it,
 * restarts it one second after it exits, restarts it when a reload changes
 * its command line, and stops it before the server finishes shutting down.
 *
 * The contract with the broker is described in docs/architecture.md
 * ("Supervisor <-> broker contract").  The part that makes it safe is the
 * liveness pipe: the broker gets the read end as fd 3 and the supervisor
 * alone holds the write end.  Should the supervisor die by any means,
 * including the postmaster being killed with SIGKILL, the kernel closes the
 * write end, the broker reads EOF and exits; no broker is ever left
 * holding the Kafka port without a server behind it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "kafgres.h"
#include "pgcompat.h"

/* fd number at which the broker finds the read end of the liveness pipe */
#define LIVENESS_FD				3

#define POLL_INTERVAL_MS		200
#define RESTART_DELAY_MS		1000
#define MISSING_RETRY_MS		5000
#define STOP_GRACE_MS			5000

typedef struct BrokerCommand
{
	MemoryContext cxt;			/* holds this struct and everything below */
	int			argc;
	char	  **argv;			/* NULL-terminated; argv[0] is the path */
} BrokerCommand;

/* 0 when no broker is running; volatile as the SIGQUIT handler reads it */
static volatile pid_t broker_pid = 0;
static int	liveness_fd = -1;	/* write end of the liveness pipe */
static char *bootstrap_superuser = NULL;

/* path of the missing broker executable we already complained about */
static char missing_path_logged[MAXPGPATH] = "";

static BrokerCommand *build_broker_command(void);
static void free_broker_command(BrokerCommand *cmd);
static bool broker_commands_equal(BrokerCommand *a, BrokerCommand *b);
static void append_security_args(List **args);

/*
 * PostgreSQL's own TLS files (declared in libpq/libpq.h, which cannot be
 * included without GSSAPI's headers).
 */
extern PGDLLIMPORT char *ssl_cert_file;
extern PGDLLIMPORT char *ssl_key_file;
extern PGDLLIMPORT char *ssl_ca_file;
static bool start_broker(BrokerCommand *cmd);
pg_noreturn static void exec_broker(char **argv, int read_fd);
static void stop_broker(void);
static void broker_exited(int status, bool expected);
static const char *conninfo_value(const char *value);
static void supervisor_quickdie(SIGNAL_ARGS);

/*
 * Register the supervisor.  Called from _PG_init while the postmaster loads
 * shared_preload_libraries.
 */
void
kafgres_register_supervisor(void)
{
	BackgroundWorker worker;

	/*
	 * pg_upgrade starts both clusters in binary-upgrade mode to dump one
	 * and restore into the other.  A broker there would stream the old
	 * cluster's slot and append to the log while the upgrade runs, and keep
	 * pg_upgrade's smart shutdown waiting for its connections forever.
	 * Records are delivered before the upgrade and after it, never during
	 * (docs/operations.md, "Upgrading PostgreSQL from 15 to 18").
	 */
	if (IsBinaryUpgrade)
	{
		ereport(LOG,
				(errmsg("kafgres supervisor not started: the server is in binary upgrade mode")));
		return;
	}

	memset(&worker, 0, sizeof(worker));

	/*
	 * A (catalog-less) database connection is what makes the worker appear
	 * in pg_stat_activity, and it lets us look up the bootstrap superuser's
	 * name once at start.
	 */
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;

	/* the broker writes metadata, which a server in recovery cannot take */
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "kafgres", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "kafgres_supervisor_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "kafgres supervisor", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "kafgres supervisor", BGW_MAXLEN);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;

	RegisterBackgroundWorker(&worker);
}

void
kafgres_supervisor_main(Datum main_arg)
{
	BrokerCommand *cmd;
	TimestampTz next_start = 0;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGQUIT, supervisor_quickdie);
	BackgroundWorkerUnblockSignals();

	/* connect to the shared catalogs only: no database needs to exist */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	/*
	 * With kafgres.role empty the broker connects as the bootstrap
	 * superuser, which is not necessarily the OS user running the server
	 * (initdb -U).  Its name cannot change while we run except by ALTER ROLE
	 * RENAME, which nobody does to the bootstrap superuser in practice.
	 */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	{
		char	   *name = GetUserNameFromId(BOOTSTRAP_SUPERUSERID, true);

		if (name != NULL)
			bootstrap_superuser = MemoryContextStrdup(TopMemoryContext, name);
	}
	CommitTransactionCommand();

	cmd = build_broker_command();

	for (;;)
	{
		if (ShutdownRequestPending)
			break;

		if (ConfigReloadPending)
		{
			BrokerCommand *newcmd;

			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);

			newcmd = build_broker_command();
			if (!broker_commands_equal(cmd, newcmd))
			{
				if (broker_pid != 0)
				{
					ereport(LOG,
							(errmsg("kafgres settings changed, restarting the kafgres broker")));
					stop_broker();
				}
				next_start = 0;
			}
			else if (broker_pid != 0)
			{
				/* same command: let it read its certificate files again */
				kill(broker_pid, SIGHUP);
			}
			free_broker_command(cmd);
			cmd = newcmd;
		}

		if (broker_pid != 0)
		{
			int			status;
			pid_t		rc = waitpid(broker_pid, &status, WNOHANG);

			if (rc == broker_pid)
			{
				broker_exited(status, false);
				next_start = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 RESTART_DELAY_MS);
			}
		}

		if (broker_pid == 0 && GetCurrentTimestamp() >= next_start)
		{
			if (!start_broker(cmd))
				next_start = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 MISSING_RETRY_MS);
		}

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 POLL_INTERVAL_MS,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}

	/*
	 * Server shutdown.  The postmaster waits for us before it goes on, so
	 * stopping the broker here means its port is closed by the time pg_ctl
	 * stop returns.  Exit status 0 tells the postmaster not to restart us.
	 */
	stop_broker();
	proc_exit(0);
}

/*
 * SIGQUIT: immediate shutdown, or a crash of another backend.  The standard
 * handler would just _exit(2) and leave the broker to notice the closed
 * pipe on its own time; killing and reaping it here, with async-signal-safe
 * calls only, gets its port closed before the postmaster goes away too.
 */
static void
supervisor_quickdie(SIGNAL_ARGS)
{
	pid_t		pid = broker_pid;

	if (pid > 0 && kill(pid, SIGKILL) == 0)
	{
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	_exit(2);
}

/*
 * Build the broker's command line from the current settings.
 */
static BrokerCommand *
build_broker_command(void)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	BrokerCommand *cmd;
	List	   *args = NIL;
	char		path[MAXPGPATH];
	const char *lhost = kafgres_listen_address ? kafgres_listen_address : "";
	bool		all_interfaces;
	const char *adv_host;
	const char *dbhost = "localhost";
	const char *role;
	char	   *dsn;
	ListCell   *lc;
	int			i;

	cxt = AllocSetContextCreate(TopMemoryContext, "kafgres broker command",
								ALLOCSET_SMALL_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	cmd = palloc0(sizeof(BrokerCommand));
	cmd->cxt = cxt;

	/* argv[0]: the broker installed next to postgres unless told otherwise */
	if (kafgres_broker_path && kafgres_broker_path[0] != '\0')
		strlcpy(path, kafgres_broker_path, MAXPGPATH);
	else
	{
		strlcpy(path, my_exec_path, MAXPGPATH);
		get_parent_directory(path);
		join_path_components(path, path, "kafgres-broker");
	}
	args = lappend(args, pstrdup(path));

	/*
	 * "*" and "" mean every interface, which Go spells as an empty host; an
	 * IPv6 literal needs brackets to be told apart from the port.
	 */
	all_interfaces = (lhost[0] == '\0' || strcmp(lhost, "*") == 0 ||
					  strcmp(lhost, "0.0.0.0") == 0 || strcmp(lhost, "::") == 0);
	if (lhost[0] == '\0' || strcmp(lhost, "*") == 0)
		args = lappend(args, psprintf("--listen=:%d", kafgres_port));
	else if (strchr(lhost, ':') != NULL && lhost[0] != '[')
		args = lappend(args, psprintf("--listen=[%s]:%d", lhost, kafgres_port));
	else
		args = lappend(args, psprintf("--listen=%s:%d", lhost, kafgres_port));

	/*
	 * Clients must be told an address they can reach; a wildcard address is
	 * not one, so fall back to this machine's name.
	 */
	if (kafgres_advertised_host && kafgres_advertised_host[0] != '\0')
		adv_host = kafgres_advertised_host;
	else if (all_interfaces)
	{
		char		hostname[256];

		if (gethostname(hostname, sizeof(hostname)) == 0 && hostname[0] != '\0')
		{
			hostname[sizeof(hostname) - 1] = '\0';
			adv_host = pstrdup(hostname);
		}
		else
			adv_host = "localhost";
	}
	else
		adv_host = lhost;
	args = lappend(args, psprintf("--advertised-host=%s", adv_host));
	args = lappend(args, psprintf("--advertised-port=%d",
								  kafgres_advertised_port > 0 ?
								  kafgres_advertised_port : kafgres_port));

	/* data directory: relative paths are relative to PGDATA */
	if (kafgres_data_directory == NULL || kafgres_data_directory[0] == '\0')
		join_path_components(path, DataDir, "kafgres");
	else if (is_absolute_path(kafgres_data_directory))
		strlcpy(path, kafgres_data_directory, MAXPGPATH);
	else
		join_path_components(path, DataDir, kafgres_data_directory);
	canonicalize_path(path);
	args = lappend(args, psprintf("--data-dir=%s", path));

	/*
	 * Connect over the first Unix socket: it needs no listen_addresses entry
	 * and is what a default pg_hba.conf trusts or peers for local users.
	 */
	if (Unix_socket_directories && Unix_socket_directories[0] != '\0')
	{
		char	   *rawstring = pstrdup(Unix_socket_directories);
		List	   *dirs;

		if (SplitDirectoriesString(rawstring, ',', &dirs) && dirs != NIL)
			dbhost = (char *) linitial(dirs);
	}
	role = (kafgres_role && kafgres_role[0] != '\0') ? kafgres_role : bootstrap_superuser;
	dsn = psprintf("host=%s port=%d dbname=%s",
				   conninfo_value(dbhost), PostPortNumber,
				   conninfo_value(kafgres_database ? kafgres_database : "postgres"));
	if (role != NULL)
		dsn = psprintf("%s user=%s", dsn, conninfo_value(role));
	dsn = psprintf("%s application_name=kafgres", dsn);
	args = lappend(args, psprintf("--dsn=%s", dsn));

	args = lappend(args, psprintf("--auto-create-topics=%s",
								  kafgres_auto_create_topics ? "true" : "false"));
	args = lappend(args, psprintf("--default-partitions=%d",
								  kafgres_default_partitions));
	args = lappend(args, psprintf("--group-initial-rebalance-delay=%dms",
								  kafgres_group_initial_rebalance_delay));
	args = lappend(args, psprintf("--transaction-max-timeout=%dms",
								  kafgres_transaction_max_timeout));
	args = lappend(args, psprintf("--transactional-id-expiration=%dms",
								  kafgres_transactional_id_expiration));
	args = lappend(args, psprintf("--transaction-abort-timed-out-interval=%dms",
								  kafgres_transaction_abort_timed_out_interval));
	args = lappend(args, psprintf("--transaction-remove-expired-interval=%dms",
								  kafgres_transaction_remove_expired_interval));
	args = lappend(args, psprintf("--log-retention-check-interval=%dms",
								  kafgres_log_retention_check_interval));
	args = lappend(args, psprintf("--log-cleaner-backoff=%dms",
								  kafgres_log_cleaner_backoff));
	args = lappend(args, psprintf("--max-incremental-fetch-session-cache-slots=%d",
								  kafgres_fetch_session_cache_slots));
	args = lappend(args, psprintf("--segment-archive-command=%s",
								  kafgres_segment_archive_command ? kafgres_segment_archive_command : ""));
	args = lappend(args, psprintf("--producer-id-expiration=%dms",
								  kafgres_producer_id_expiration));
	args = lappend(args, psprintf("--producer-id-expiration-check-interval=%dms",
								  kafgres_producer_id_expiration_check_interval));
	args = lappend(args, psprintf("--mapping-render-timeout=%dms",
								  kafgres_mapping_render_timeout));
	args = lappend(args, psprintf("--fsync=%s", kafgres_fsync ? "true" : "false"));
	args = lappend(args, psprintf("--fetch-sendfile=%s", kafgres_fetch_sendfile ? "true" : "false"));
	args = lappend(args, psprintf("--log-cached-tail=" INT64_FORMAT,
								  kafgres_log_cached_tail < 0 ? (int64) -1 :
								  (int64) kafgres_log_cached_tail * 1024));
	args = lappend(args, psprintf("--authorizer=%s",
								  kafgres_authorizer == KAFGRES_AUTHORIZER_ON ? "on" :
								  kafgres_authorizer == KAFGRES_AUTHORIZER_OFF ? "off" : "auto"));
	args = lappend(args, psprintf("--super-users=%s",
								  kafgres_super_users ? kafgres_super_users : ""));
	args = lappend(args, psprintf("--allow-everyone-if-no-acl-found=%s",
								  kafgres_allow_everyone_if_no_acl_found ? "true" : "false"));
	append_security_args(&args);
	args = lappend(args, psprintf("--liveness-fd=%d", LIVENESS_FD));

	cmd->argc = list_length(args);
	cmd->argv = palloc0(sizeof(char *) * (cmd->argc + 1));
	i = 0;
	foreach(lc, args)
		cmd->argv[i++] = (char *) lfirst(lc);

	MemoryContextSwitchTo(oldcxt);
	return cmd;
}

/*
 * A TLS file setting of kafgres, or else PostgreSQL's own when its ssl is
 * on, made absolute the way PostgreSQL resolves it (relative to the data
 * directory, its working directory).  NULL when neither is set.
 */
static char *
tls_file(const char *own, const char *postgres)
{
	const char *f = own;
	char		path[MAXPGPATH];

	if (f == NULL || f[0] == '\0')
		f = EnableSSL ? postgres : NULL;
	if (f == NULL || f[0] == '\0')
		return NULL;
	if (is_absolute_path(f))
		strlcpy(path, f, MAXPGPATH);
	else
		join_path_components(path, DataDir, f);
	canonicalize_path(path);
	return pstrdup(path);
}

/*
 * The listener and authentication flags.  Without kafgres.listeners the
 * broker runs the one PLAINTEXT listener of --listen, as before.
 */
static void
append_security_args(List **args)
{
	static const char *const client_auth[] = {"none", "requested", "required"};
	static const char *const tls_version[] = {"TLSv1.2", "TLSv1.3"};
	char	   *f;

	if (kafgres_listeners && kafgres_listeners[0] != '\0')
	{
		*args = lappend(*args, psprintf("--listeners=%s", kafgres_listeners));
		if (kafgres_advertised_listeners && kafgres_advertised_listeners[0] != '\0')
			*args = lappend(*args, psprintf("--advertised-listeners=%s", kafgres_advertised_listeners));
		if (kafgres_listener_security_protocol_map && kafgres_listener_security_protocol_map[0] != '\0')
			*args = lappend(*args, psprintf("--listener-security-protocol-map=%s",
											kafgres_listener_security_protocol_map));
	}
	*args = lappend(*args, psprintf("--allow-plaintext-remote=%s",
									kafgres_allow_plaintext_remote ? "true" : "false"));
	if ((f = tls_file(kafgres_ssl_cert_file, ssl_cert_file)) != NULL)
		*args = lappend(*args, psprintf("--ssl-cert-file=%s", f));
	if ((f = tls_file(kafgres_ssl_key_file, ssl_key_file)) != NULL)
		*args = lappend(*args, psprintf("--ssl-key-file=%s", f));
	if ((f = tls_file(kafgres_ssl_ca_file, ssl_ca_file)) != NULL)
		*args = lappend(*args, psprintf("--ssl-ca-file=%s", f));
	*args = lappend(*args, psprintf("--ssl-client-auth=%s", client_auth[kafgres_ssl_client_auth]));
	*args = lappend(*args, psprintf("--ssl-min-protocol-version=%s",
									tls_version[kafgres_ssl_min_protocol_version]));
	*args = lappend(*args, psprintf("--ssl-principal-mapping-rules=%s",
									kafgres_ssl_principal_mapping_rules ? kafgres_ssl_principal_mapping_rules : "DEFAULT"));
	*args = lappend(*args, psprintf("--sasl-enabled-mechanisms=%s",
									kafgres_sasl_enabled_mechanisms ? kafgres_sasl_enabled_mechanisms : ""));
	*args = lappend(*args, psprintf("--client-role=%s", kafgres_client_role ? kafgres_client_role : ""));
	*args = lappend(*args, psprintf("--connections-max-reauth=%dms", kafgres_connections_max_reauth));
}

static void
free_broker_command(BrokerCommand *cmd)
{
	MemoryContextDelete(cmd->cxt);
}

static bool
broker_commands_equal(BrokerCommand *a, BrokerCommand *b)
{
	if (a->argc != b->argc)
		return false;
	for (int i = 0; i < a->argc; i++)
	{
		if (strcmp(a->argv[i], b->argv[i]) != 0)
			return false;
	}
	return true;
}

/*
 * Quote a value for a libpq connection string if it needs it.
 */
static const char *
conninfo_value(const char *value)
{
	StringInfoData buf;

	if (value[0] != '\0' && strpbrk(value, " \t\n\r\f\v'\\") == NULL)
		return value;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '\'');
	for (const char *p = value; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(&buf, '\\');
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, '\'');
	return buf.data;
}

/*
 * Fork and exec the broker.  Returns false if the executable is missing, in
 * which case the caller waits a few seconds before trying again.
 */
static bool
start_broker(BrokerCommand *cmd)
{
	int			pipefd[2];
	sigset_t	all,
				saved;
	pid_t		pid;

	if (access(cmd->argv[0], X_OK) != 0)
	{
		/* complain once per path, not every few seconds */
		if (strcmp(missing_path_logged, cmd->argv[0]) != 0)
		{
			ereport(WARNING,
					(errcode_for_file_access(),
					 errmsg("could not start the kafgres broker: cannot execute \"%s\": %m",
							cmd->argv[0]),
					 errdetail("The supervisor tries again every %d seconds.",
							   MISSING_RETRY_MS / 1000),
					 errhint("Install kafgres-broker there, or set kafgres.broker_path to its location and reload the configuration.")));
			strlcpy(missing_path_logged, cmd->argv[0], MAXPGPATH);
		}
		return false;
	}
	missing_path_logged[0] = '\0';

	if (pipe(pipefd) != 0)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not create the kafgres broker's liveness pipe: %m")));
		return false;
	}

	/* only we may hold the write end, or the broker would never see EOF */
	if (fcntl(pipefd[1], F_SETFD, FD_CLOEXEC) != 0)
		elog(WARNING, "could not set FD_CLOEXEC on the liveness pipe: %m");

	/*
	 * Block signals across fork() so that none of our handlers runs in the
	 * child before it has reset them; they would act on our latch and our
	 * flags, not the child's.
	 */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &saved);
	fflush(NULL);

	pid = fork();
	if (pid == 0)
		exec_broker(cmd->argv, pipefd[0]);

	sigprocmask(SIG_SETMASK, &saved, NULL);
	close(pipefd[0]);

	if (pid < 0)
	{
		close(pipefd[1]);
		ereport(WARNING,
				(errmsg("could not fork the kafgres broker: %m")));
		return true;			/* retry after the normal restart delay */
	}

	broker_pid = pid;
	liveness_fd = pipefd[1];
	ereport(LOG,
			(errmsg("kafgres broker started (PID %d)", (int) pid)));
	if (message_level_is_interesting(DEBUG1))
	{
		StringInfoData buf;

		initStringInfo(&buf);
		for (int i = 0; i < cmd->argc; i++)
			appendStringInfo(&buf, "%s%s", i > 0 ? " " : "", cmd->argv[i]);
		elog(DEBUG1, "kafgres broker command line: %s", buf.data);
		pfree(buf.data);
	}
	return true;
}

/*
 * In the forked child: set up the process the way the contract promises and
 * exec the broker.  Only async-signal-safe calls from here on.
 */
static void
exec_broker(char **argv, int read_fd)
{
	sigset_t	none;
	static const char msg[] = "kafgres supervisor: could not execute the kafgres broker\n";

	/*
	 * exec resets caught signals but keeps ignored ones (postgres ignores
	 * SIGPIPE, for one), so restore every disposition explicitly.
	 */
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	if (read_fd != LIVENESS_FD)
	{
		if (dup2(read_fd, LIVENESS_FD) < 0)
			_exit(127);
	}

	/*
	 * Close everything else the server had open (its sockets, data files,
	 * the pipe's write end): the broker must hold nothing of the server's.
	 */
#ifdef SYS_close_range
	if (syscall(SYS_close_range, LIVENESS_FD + 1, ~0U, 0) != 0)
#endif
	{
		long		maxfd = sysconf(_SC_OPEN_MAX);

		if (maxfd < 0)
			maxfd = 1024;
		for (long fd = LIVENESS_FD + 1; fd < maxfd; fd++)
			close((int) fd);
	}

	execv(argv[0], argv);

	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
	{
		/* nothing more we can do */
	}
	_exit(127);
}

/*
 * Stop the running broker, if any: SIGTERM, up to STOP_GRACE_MS to exit,
 * then SIGKILL.  Returns only once the broker has been reaped, so its port
 * is closed.
 */
static void
stop_broker(void)
{
	int			status;
	pid_t		rc;

	if (broker_pid == 0)
		return;

	if (kill(broker_pid, SIGTERM) != 0 && errno != ESRCH)
		elog(WARNING, "could not send SIGTERM to the kafgres broker (PID %d): %m",
			 (int) broker_pid);

	for (int waited = 0; waited < STOP_GRACE_MS; waited += 10)
	{
		rc = waitpid(broker_pid, &status, WNOHANG);
		if (rc == broker_pid || (rc < 0 && errno == ECHILD))
		{
			broker_exited(rc == broker_pid ? status : 0, true);
			return;
		}
		pg_usleep(10 * 1000L);
	}

	ereport(LOG,
			(errmsg("kafgres broker (PID %d) did not stop within %d seconds, killing it",
					(int) broker_pid, STOP_GRACE_MS / 1000)));
	kill(broker_pid, SIGKILL);
	do
	{
		rc = waitpid(broker_pid, &status, 0);
	} while (rc < 0 && errno == EINTR);
	broker_exited(status, true);
}

/*
 * Bookkeeping and logging for a reaped broker.  "expected" is true when we
 * stopped it ourselves.
 */
static void
broker_exited(int status, bool expected)
{
	pid_t		pid = broker_pid;

	broker_pid = 0;
	if (liveness_fd >= 0)
	{
		close(liveness_fd);
		liveness_fd = -1;
	}

	if (expected)
	{
		if (WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM)
			ereport(LOG,
					(errmsg("kafgres broker (PID %d) stopped by signal %d: %s",
							(int) pid, WTERMSIG(status),
							pg_strsignal(WTERMSIG(status)))));
		else
			ereport(LOG,
					(errmsg("kafgres broker (PID %d) stopped", (int) pid)));
		return;
	}

	if (WIFEXITED(status))
		ereport(LOG,
				(errmsg("kafgres broker (PID %d) exited with exit code %d",
						(int) pid, WEXITSTATUS(status)),
				 errdetail("It will be restarted in %d second.",
						   RESTART_DELAY_MS / 1000)));
	else if (WIFSIGNALED(status))
		ereport(LOG,
				(errmsg("kafgres broker (PID %d) was terminated by signal %d: %s",
						(int) pid, WTERMSIG(status),
						pg_strsignal(WTERMSIG(status))),
				 errdetail("It will be restarted in %d second.",
						   RESTART_DELAY_MS / 1000)));
	else
		ereport(LOG,
				(errmsg("kafgres broker (PID %d) exited with unrecognized status %d",
						(int) pid, status)));
}
