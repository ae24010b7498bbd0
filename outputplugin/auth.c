/*-------------------------------------------------------------------------
 *
 * auth.c
 *	  Authentication of kafgres's logical messages.
 *
 * pg_logical_emit_message() is executable by every role, so a message with
 * prefix "kafgres" proves nothing about who wrote it.  kafgres_produce()
 * and kafgres.snapshot_row() therefore sign what they write with an
 * HMAC-SHA256 over the top-level transaction id, the database and the
 * payload, keyed with a secret that only the server's own processes can
 * read; the output plugin (plugin.c) delivers a message only if its
 * signature checks out, and drops, counts and logs every other one.  The
 * format is in auth.h and docs/producing.md.
 *
 * The key is the file kafgres_message_key in the data directory: 32 random
 * bytes, mode 0600, created by the postmaster at its first start with
 * kafgres preloaded and read into shared memory at every start.  It must
 * outlive restarts, because WAL written before a restart or crash is
 * decoded after it: a key made anew at each start would make the plugin
 * drop committed records.  Being in the data directory, it goes wherever
 * the WAL goes (base backups, standbys).  A server in recovery never makes
 * a key of its own -- its WAL was signed with its primary's -- and reads
 * the file again when it first needs the key, so that a key copied in
 * later is picked up without a restart.
 *
 * Why an unprivileged role cannot forge a signature: the key is neither in
 * the WAL nor in any table, the file is readable only by the server's OS
 * user (pg_read_binary_file needs superuser or pg_read_server_files), and
 * shared memory is reachable only from C code in the server.  The MAC
 * binds the transaction id, so a signed message cannot be moved to another
 * transaction; messages are never shown to SQL roles with their MAC, since
 * the plugin strips it before anything leaves the server.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/hmac.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "replication/message.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "auth.h"
#include "pgcompat.h"

/* in the data directory, which is the server's working directory */
#define KEY_FILE			"kafgres_message_key"
#define KEY_FILE_TMP		"kafgres_message_key.tmp"
#define KEY_LEN				32

/*
 * What the MAC covers besides the payload, so that a signature made for
 * anything else (another format, another purpose) can never pass for one.
 */
#define MAC_CONTEXT			"kafgres signed message v3"

typedef struct KafgresAuthShared
{
	slock_t		mutex;			/* protects everything below */
	bool		key_loaded;
	uint8		key[KEY_LEN];

	/* messages rejected since the server started, see count_rejected */
	uint64		rejected;
	XLogRecPtr	last_rejected_order;
	XLogRecPtr	last_rejected_lsn;
} KafgresAuthShared;

static KafgresAuthShared *auth_shared = NULL;

/* this process's copy of the key, once it has it (it never changes) */
static bool local_key_loaded = false;
static uint8 local_key[KEY_LEN];

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void auth_shmem_request(void);
static void auth_shmem_startup(void);
static bool server_in_recovery_at_start(void);
static bool read_key_file(uint8 *key, int elevel);
static void create_key_file(uint8 *key);
static const uint8 *message_key(void);
static void compute_mac(TransactionId xid, const char *payload, Size size,
						uint8 *mac);

PG_FUNCTION_INFO_V1(kafgres_rejected_messages);

void
kafgres_auth_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = auth_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = auth_shmem_startup;
}

static void
auth_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(KafgresAuthShared)));
}

/*
 * Runs in the postmaster at every start and after every crash restart (and,
 * on EXEC_BACKEND builds, in each child, which finds the struct set up).
 * A key file that exists but cannot be read stops the server: carrying on
 * with another key would drop every record still in the WAL.
 */
static void
auth_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	auth_shared = ShmemInitStruct("kafgres message authentication",
								  sizeof(KafgresAuthShared), &found);
	if (!found)
	{
		memset(auth_shared, 0, sizeof(KafgresAuthShared));
		SpinLockInit(&auth_shared->mutex);

		if (read_key_file(auth_shared->key, FATAL))
			auth_shared->key_loaded = true;
		else if (!server_in_recovery_at_start())
		{
			create_key_file(auth_shared->key);
			auth_shared->key_loaded = true;
		}
		else
			ereport(LOG,
					(errmsg("kafgres: file \"%s\" is missing in this standby's data directory",
							KEY_FILE),
					 errdetail("Records produced in SQL can be decoded here only with the primary's key."),
					 errhint("Copy \"%s\" (mode 0600) from the primary's data directory.",
							 KEY_FILE)));
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Whether this start is a recovery (standby or point-in-time): the startup
 * process has not run yet, so the signal files are what tells.
 */
static bool
server_in_recovery_at_start(void)
{
	struct stat st;

	return stat(STANDBY_SIGNAL_FILE, &st) == 0 ||
		stat(RECOVERY_SIGNAL_FILE, &st) == 0;
}

/*
 * Read the key file into key.  False if it does not exist; any other
 * problem is reported at elevel (which must not return).
 */
static bool
read_key_file(uint8 *key, int elevel)
{
	uint8		buf[KEY_LEN + 1];
	int			fd;
	ssize_t		n;

	Assert(elevel >= ERROR);

	fd = BasicOpenFile(KEY_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return false;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", KEY_FILE)));
	}

	/* one byte more than a key, to notice a file that is too long */
	n = read(fd, buf, sizeof(buf));
	if (n < 0)
	{
		int			save_errno = errno;

		close(fd);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", KEY_FILE)));
	}
	close(fd);

	if (n != KEY_LEN)
		ereport(elevel,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("file \"%s\" is corrupt", KEY_FILE),
				 errdetail("It holds %zd bytes; a kafgres message key is %d bytes.",
						   n, KEY_LEN),
				 errhint("Restore it from a backup of this cluster.  Deleting it makes the server create a new key, and SQL-produced records not yet delivered are then dropped.")));

	memcpy(key, buf, KEY_LEN);
	explicit_bzero(buf, sizeof(buf));
	return true;
}

/*
 * Make a new key and store it durably before anything is signed with it:
 * written to a temporary file, fsynced, renamed into place and the
 * directory fsynced, so that a crash leaves either no key or the whole one.
 */
static void
create_key_file(uint8 *key)
{
	int			fd;

	if (!pg_strong_random(key, KEY_LEN))
		ereport(FATAL,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a kafgres message key")));

	/* 0600 whatever the data directory's group access */
	fd = BasicOpenFilePerm(KEY_FILE_TMP, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY,
						   S_IRUSR | S_IWUSR);
	if (fd < 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", KEY_FILE_TMP)));

	errno = 0;
	if (write(fd, key, KEY_LEN) != KEY_LEN)
	{
		/* a short write without an error means the disk is full */
		if (errno == 0)
			errno = ENOSPC;
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", KEY_FILE_TMP)));
	}
	if (pg_fsync(fd) != 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m", KEY_FILE_TMP)));
	if (close(fd) != 0)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", KEY_FILE_TMP)));

	/* fsyncs the file and the data directory */
	durable_rename(KEY_FILE_TMP, KEY_FILE, FATAL);

	ereport(LOG,
			(errmsg("kafgres: created message key file \"%s\"", KEY_FILE),
			 errdetail("It authenticates SQL-produced records; it is part of the cluster's data and must be kept with it.")));
}

/*
 * The key, or an ERROR.  Everything that signs or verifies goes through
 * here, so a server without the key refuses to produce, and its plugin
 * stops decoding (to be retried) rather than drop what it cannot check.
 */
static const uint8 *
message_key(void)
{
	uint8		key[KEY_LEN];

	if (local_key_loaded)
		return local_key;

	if (auth_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kafgres must be loaded via shared_preload_libraries"),
				 errdetail("SQL-produced records are authenticated with a key kept in shared memory."),
				 errhint("Add kafgres to shared_preload_libraries in postgresql.conf and restart the server.")));

	SpinLockAcquire(&auth_shared->mutex);
	if (auth_shared->key_loaded)
	{
		memcpy(local_key, auth_shared->key, KEY_LEN);
		local_key_loaded = true;
	}
	SpinLockRelease(&auth_shared->mutex);
	if (local_key_loaded)
		return local_key;

	/*
	 * A standby that started without the key: it may have been copied in
	 * since.  Read outside the spinlock; two processes doing this at once
	 * read the same bytes.
	 */
	if (!read_key_file(key, ERROR))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kafgres message key file \"%s\" is missing", KEY_FILE),
				 errdetail("This server started in recovery without it, so it cannot check or sign SQL-produced records."),
				 errhint("Copy \"%s\" (mode 0600) from the primary's data directory.",
						 KEY_FILE)));

	SpinLockAcquire(&auth_shared->mutex);
	if (!auth_shared->key_loaded)
	{
		memcpy(auth_shared->key, key, KEY_LEN);
		auth_shared->key_loaded = true;
	}
	memcpy(local_key, auth_shared->key, KEY_LEN);
	local_key_loaded = true;
	SpinLockRelease(&auth_shared->mutex);
	explicit_bzero(key, sizeof(key));

	return local_key;
}

void
kafgres_require_message_key(void)
{
	(void) message_key();
}

/*
 * HMAC-SHA256(key, MAC_CONTEXT || xid || database || payload), integers
 * big-endian.  Needs a resource owner (the OpenSSL implementation registers
 * its context with it): backends call it inside their transaction, the
 * plugin inside the one logical decoding runs callbacks in.
 */
static void
compute_mac(TransactionId xid, const char *payload, Size size, uint8 *mac)
{
	const uint8 *key = message_key();
	pg_hmac_ctx *ctx;
	uint32		ids[2];

	ids[0] = pg_hton32(xid);
	ids[1] = pg_hton32(MyDatabaseId);

	ctx = pg_hmac_create(PG_SHA256);
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (pg_hmac_init(ctx, key, KEY_LEN) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) MAC_CONTEXT, strlen(MAC_CONTEXT)) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) ids, sizeof(ids)) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) payload, size) < 0 ||
		pg_hmac_final(ctx, mac, KAFGRES_MAC_LEN) < 0)
	{
		const char *msg = pstrdup(pg_hmac_error(ctx));

		pg_hmac_free(ctx);
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute the HMAC of a kafgres message: %s", msg)));
	}
	pg_hmac_free(ctx);
}

void
kafgres_start_signed_message(StringInfo buf)
{
	static const char zeros[KAFGRES_MAC_LEN] = {0};

	initStringInfo(buf);
	appendStringInfoCharMacro(buf, (char) KAFGRES_SIGNED_MESSAGE_VERSION);
	appendBinaryStringInfo(buf, zeros, KAFGRES_MAC_LEN);
}

/*
 * Sign buf (made with kafgres_start_signed_message) for this transaction
 * and write it as a transactional logical message.
 *
 * GetTopTransactionId() assigns the transaction id if there is none yet;
 * logical decoding hands the message to the plugin with its top-level
 * transaction (ReorderBufferProcessTXN replays subtransactions' changes
 * under it), whose id is this one, also for savepoints and for prepared
 * transactions decoded at COMMIT PREPARED.
 */
XLogRecPtr
kafgres_emit_signed_message(StringInfo buf, const char *prefix)
{
	TransactionId xid;
	uint8		mac[KAFGRES_MAC_LEN];

	Assert(buf->len >= KAFGRES_SIGNED_HEADER_LEN &&
		   (uint8) buf->data[0] == KAFGRES_SIGNED_MESSAGE_VERSION);

	xid = GetTopTransactionId();
	compute_mac(xid, buf->data + KAFGRES_SIGNED_HEADER_LEN,
				buf->len - KAFGRES_SIGNED_HEADER_LEN, mac);
	memcpy(buf->data + 1, mac, KAFGRES_MAC_LEN);

	/*
	 * Transactional: decoded with its transaction, at commit, and dropped
	 * if the transaction (or the subtransaction that wrote it) aborts.  No
	 * flush of its own: a transactional message is flushed with its commit.
	 */
	return LogLogicalMessage(prefix, buf->data, buf->len, true, false);
}

const char *
kafgres_verify_message(TransactionId xid, const char *message, Size size,
					   Size *payload_size, const char **why)
{
	uint8		mac[KAFGRES_MAC_LEN];
	uint8		diff = 0;
	int			i;

	if (size == 0)
	{
		*why = "The message is empty.";
		return NULL;
	}
	if ((uint8) message[0] != KAFGRES_SIGNED_MESSAGE_VERSION)
	{
		*why = (message[0] == 1 || message[0] == 2) ?
			"It is in an unsigned format, which only pg_logical_emit_message() or a kafgres version before 0.3.0 writes." :
			"Its first byte is not a known message format.";
		return NULL;
	}
	if (size < KAFGRES_SIGNED_HEADER_LEN)
	{
		*why = "It is too short to hold a signature.";
		return NULL;
	}

	compute_mac(xid, message + KAFGRES_SIGNED_HEADER_LEN,
				size - KAFGRES_SIGNED_HEADER_LEN, mac);

	/* constant time: how much of a forged MAC matches must not show */
	for (i = 0; i < KAFGRES_MAC_LEN; i++)
		diff |= mac[i] ^ (uint8) message[1 + i];
	if (diff != 0)
	{
		*why = "Its signature does not match its content, transaction and database.";
		return NULL;
	}

	*payload_size = size - KAFGRES_SIGNED_HEADER_LEN;
	return message + KAFGRES_SIGNED_HEADER_LEN;
}

/*
 * Logical decoding hands messages to the plugin in increasing (order, lsn):
 * transactions by commit, messages within one by position, and a
 * non-transactional message at its own position, which lies between the
 * commits around it.  So "newer than the last one counted" means "not
 * counted yet", however many times a walsender decodes the same WAL.
 */
bool
kafgres_count_rejected(XLogRecPtr order, XLogRecPtr lsn)
{
	bool		counted = false;

	if (auth_shared == NULL)
		return true;

	SpinLockAcquire(&auth_shared->mutex);
	if (order > auth_shared->last_rejected_order ||
		(order == auth_shared->last_rejected_order &&
		 lsn > auth_shared->last_rejected_lsn))
	{
		auth_shared->rejected++;
		auth_shared->last_rejected_order = order;
		auth_shared->last_rejected_lsn = lsn;
		counted = true;
	}
	SpinLockRelease(&auth_shared->mutex);

	return counted;
}

/*
 * kafgres_rejected_messages() RETURNS bigint: messages with prefix
 * "kafgres" the output plugin dropped since the server started because
 * they were not authentic.
 */
Datum
kafgres_rejected_messages(PG_FUNCTION_ARGS)
{
	uint64		n;

	if (auth_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("kafgres must be loaded via shared_preload_libraries"),
				 errhint("Add kafgres to shared_preload_libraries in postgresql.conf and restart the server.")));

	SpinLockAcquire(&auth_shared->mutex);
	n = auth_shared->rejected;
	SpinLockRelease(&auth_shared->mutex);

	PG_RETURN_INT64((int64) n);
}

/*
 * Snapshot rows are rendered with their mapping's owner's privileges, so
 * only a member of the owner role may write them -- the rule row security
 * applies to kafgres.mapping_snapshot.  kafgres.mapping is read under the
 * statement's snapshot (so a mapping made earlier in the transaction
 * counts) with a catalog scan, which row security does not apply to: the
 * caller needs no privileges on the table.
 */
void
kafgres_check_snapshot_writer(int64 mapping_id)
{
	Oid			nspid;
	Oid			relid;
	Oid			index_relid;
	AttrNumber	id_attnum;
	AttrNumber	owner_attnum;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			owner = InvalidOid;
	bool		found = false;

	nspid = get_namespace_oid("kafgres", true);
	relid = OidIsValid(nspid) ? get_relname_relid("mapping", nspid) : InvalidOid;
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table kafgres.mapping does not exist"),
				 errhint("Run CREATE EXTENSION kafgres in this database.")));

	id_attnum = get_attnum(relid, "mapping_id");
	owner_attnum = get_attnum(relid, "owner_role");
	if (id_attnum == InvalidAttrNumber || owner_attnum == InvalidAttrNumber ||
		get_atttype(relid, id_attnum) != INT8OID ||
		get_atttype(relid, owner_attnum) != OIDOID)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("table kafgres.mapping lacks column \"mapping_id\" or \"owner_role\""),
				 errhint("The kafgres extension's tables have been altered; reinstall the extension.")));

	index_relid = get_relname_relid("mapping_pkey", nspid);

	rel = table_open(relid, AccessShareLock);
	ScanKeyInit(&key, id_attnum, BTEqualStrategyNumber, F_INT8EQ,
				Int64GetDatum(mapping_id));
	scan = systable_beginscan(rel, index_relid, OidIsValid(index_relid),
							  GetActiveSnapshot(), 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, owner_attnum,
									 RelationGetDescr(rel), &isnull);

		found = true;
		owner = isnull ? InvalidOid : DatumGetObjectId(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("mapping %lld does not exist", (long long) mapping_id)));

	if (!OidIsValid(owner) || !is_member_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be a member of the owner of mapping %lld to write its snapshot rows",
						(long long) mapping_id),
				 errhint("Use kafgres_snapshot_mapping() as the mapping's owner.")));
}
