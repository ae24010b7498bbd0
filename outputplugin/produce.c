/*-------------------------------------------------------------------------
 *
 * produce.c
 *	  kafgres_produce(): produce a Kafka record from SQL, transactionally.
 *
 * The record is written to the WAL as a transactional logical message with
 * prefix "kafgres".  Logical decoding hands it to the output plugin
 * (plugin.c) only if the transaction commits, and the broker appends it to
 * the topic from there: the record exists if and only if the transaction
 * that produced it commits.  The message content is specified in
 * docs/producing.md ("Message format").
 *
 * Messages are signed (auth.c): pg_logical_emit_message() is open to every
 * role, and the output plugin delivers only messages this file wrote.  So
 * EXECUTE on kafgres_produce is the right to produce, and
 * kafgres.snapshot_row(), which writes the snapshot rows of
 * kafgres_snapshot_mapping(), checks its caller itself.
 *
 * Everything that can be checked here is checked before anything is
 * written, so that an error leaves no message behind.  What cannot be
 * checked here (the broker's view of the topic at delivery) is the broker's
 * business.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "catalog/pg_proc.h"
#include "commands/trigger.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "replication/message.h"
#include "replication/slot.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "auth.h"
#include "kafgres.h"
#include "topicname.h"

/*
 * First byte of the payloads (inside the signed envelope, auth.h); bump
 * them with docs/producing.md.
 */
#define KAFGRES_MESSAGE_VERSION		1
#define KAFGRES_SNAPSHOT_VERSION	2
#define KAFGRES_REQUEST_VERSION		3

/* logical message prefix, and the name of the slot the broker reads */
#define KAFGRES_MESSAGE_PREFIX		"kafgres"
#define KAFGRES_SLOT_NAME			"kafgres"
#define KAFGRES_PLUGIN_NAME			"kafgres"

/*
 * Size of a Kafka v2 record batch header (base offset through record
 * count), which kafgres.max_message_bytes counts like Kafka's
 * max.message.bytes does.
 */
#define RECORD_BATCH_OVERHEAD		61

/* a header; value NULL (with value_len -1) is a null header value */
typedef struct ProduceHeader
{
	const char *key;
	int			key_len;
	const char *value;
	int			value_len;
} ProduceHeader;

/* one record to produce; a NULL key or value has length -1 */
typedef struct ProduceRecord
{
	const char *topic;
	int32		partition;		/* -1: the broker chooses */
	const char *key;
	int			key_len;
	const char *value;
	int			value_len;
	int			nheaders;
	ProduceHeader *headers;
} ProduceRecord;

PG_FUNCTION_INFO_V1(kafgres_produce_text);
PG_FUNCTION_INFO_V1(kafgres_produce_bytea);
PG_FUNCTION_INFO_V1(kafgres_produce_arrays);
PG_FUNCTION_INFO_V1(kafgres_snapshot_row);
PG_FUNCTION_INFO_V1(kafgres_mapping_request);

static XLogRecPtr produce(ProduceRecord *rec);
static const char *topic_argument(FunctionCallInfo fcinfo, int argno);
static int32 partition_argument(FunctionCallInfo fcinfo, int argno);
static void text_argument(FunctionCallInfo fcinfo, int argno,
						  const char **data, int *len);
static void bytea_argument(FunctionCallInfo fcinfo, int argno,
						   const char **data, int *len);
static void headers_from_jsonb(ProduceRecord *rec, Jsonb *jb);
static void headers_from_arrays(ProduceRecord *rec, ArrayType *keys,
								ArrayType *values);
static void check_topic_name(const char *topic);
static void check_header_key(const char *key, int len);
static void check_record_size(ProduceRecord *rec);
static void check_topic_and_partition(ProduceRecord *rec);
static void check_key_compacted(ProduceRecord *rec);
static void check_wal_level(const char *what);
static void check_slot(void);
static int64 varint_size(int64 value);
static void send_string16(StringInfo buf, const char *data, int len);
static void send_bytes32(StringInfo buf, const char *data, int len);

/*
 * kafgres_produce(topic text, key text, value text,
 *				   headers jsonb DEFAULT NULL, partition int DEFAULT NULL)
 *
 * Key and value are sent as UTF-8.
 */
Datum
kafgres_produce_text(PG_FUNCTION_ARGS)
{
	ProduceRecord rec = {0};

	rec.topic = topic_argument(fcinfo, 0);
	text_argument(fcinfo, 1, &rec.key, &rec.key_len);
	text_argument(fcinfo, 2, &rec.value, &rec.value_len);
	if (!PG_ARGISNULL(3))
		headers_from_jsonb(&rec, PG_GETARG_JSONB_P(3));
	rec.partition = partition_argument(fcinfo, 4);

	PG_RETURN_LSN(produce(&rec));
}

/*
 * kafgres_produce(topic text, key bytea, value bytea,
 *				   headers jsonb DEFAULT NULL, partition int DEFAULT NULL)
 */
Datum
kafgres_produce_bytea(PG_FUNCTION_ARGS)
{
	ProduceRecord rec = {0};

	rec.topic = topic_argument(fcinfo, 0);
	bytea_argument(fcinfo, 1, &rec.key, &rec.key_len);
	bytea_argument(fcinfo, 2, &rec.value, &rec.value_len);
	if (!PG_ARGISNULL(3))
		headers_from_jsonb(&rec, PG_GETARG_JSONB_P(3));
	rec.partition = partition_argument(fcinfo, 4);

	PG_RETURN_LSN(produce(&rec));
}

/*
 * kafgres_produce(topic text, key bytea, value bytea,
 *				   header_keys text[], header_values bytea[],
 *				   partition int DEFAULT NULL)
 *
 * For headers that a jsonb object cannot carry: binary values, repeated
 * keys, or an order of one's choosing.
 */
Datum
kafgres_produce_arrays(PG_FUNCTION_ARGS)
{
	ProduceRecord rec = {0};

	rec.topic = topic_argument(fcinfo, 0);
	bytea_argument(fcinfo, 1, &rec.key, &rec.key_len);
	bytea_argument(fcinfo, 2, &rec.value, &rec.value_len);
	headers_from_arrays(&rec,
						PG_ARGISNULL(3) ? NULL : PG_GETARG_ARRAYTYPE_P(3),
						PG_ARGISNULL(4) ? NULL : PG_GETARG_ARRAYTYPE_P(4));
	rec.partition = partition_argument(fcinfo, 5);

	PG_RETURN_LSN(produce(&rec));
}

/*
 * With the authorizer on, the calling role needs Kafka's WRITE on the
 * topic, as a Kafka producer authenticated as User:<role> would
 * (docs/security.md, "Authorization").  The decision is the SQL function
 * kafgres.acl_check, which the mapping trigger uses too, so that the
 * rules live in one place on the SQL side.  It is called by OID through
 * fmgr: the producing role needs neither USAGE on schema kafgres nor
 * EXECUTE on it (EXECUTE on kafgres_produce is the right to ask).  The OID
 * is looked up once per backend and forgotten on any pg_proc
 * invalidation (DROP/CREATE EXTENSION).  Refused: insufficient_privilege,
 * inside the caller's transaction.
 */
static Oid	acl_check_oid = InvalidOid;
static Oid	topic_compacts_oid = InvalidOid;
static bool kafgres_functions_callback = false;

static void
kafgres_functions_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	acl_check_oid = InvalidOid;
	topic_compacts_oid = InvalidOid;
}

/*
 * The OID of the SQL function kafgres.<name>(text, ...) with nargs text
 * arguments, cached in *oid until the next pg_proc invalidation.
 */
static Oid
lookup_kafgres_function(const char *name, int nargs, Oid *oid)
{
	Oid			nspid;
	Oid			argtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	oidvector  *args;

	Assert(nargs <= lengthof(argtypes));
	if (!kafgres_functions_callback)
	{
		CacheRegisterSyscacheCallback(PROCOID, kafgres_functions_invalidate, (Datum) 0);
		kafgres_functions_callback = true;
	}
	if (OidIsValid(*oid))
		return *oid;
	nspid = get_namespace_oid("kafgres", true);
	args = buildoidvector(argtypes, nargs);
	if (OidIsValid(nspid))
		*oid = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
							   CStringGetDatum(name),
							   PointerGetDatum(args),
							   ObjectIdGetDatum(nspid));
	if (!OidIsValid(*oid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function kafgres.%s does not exist", name),
				 errhint("Run ALTER EXTENSION kafgres UPDATE in this database.")));
	return *oid;
}

/*
 * Per-backend cache of the decisions, since asking the SQL function costs
 * about half a millisecond (it is planned on every call) against some ten
 * microseconds for the rest of kafgres_produce.  It is emptied by every
 * relcache invalidation of kafgres.acl (which its statement trigger
 * kafgres.acl_changed sends at commit to every backend, and to this one at
 * once), of any role (pg_authid: superusers, renames), and when the ACL
 * settings change (compared on each call).
 */
#define ACL_TOPIC_KEY_LEN 256

typedef struct AclCacheKey
{
	Oid			userid;
	char		topic[ACL_TOPIC_KEY_LEN];
} AclCacheKey;

typedef struct AclCacheEntry
{
	AclCacheKey key;
	bool		allowed;
} AclCacheEntry;

static HTAB *acl_cache = NULL;
static Oid	acl_table_relid = InvalidOid;
static char *acl_cache_settings = NULL; /* super users and default, as cached */

static void
acl_cache_reset(void)
{
	if (acl_cache != NULL)
	{
		hash_destroy(acl_cache);
		acl_cache = NULL;
	}
}

static void
acl_cache_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == acl_table_relid)
		acl_cache_reset();
}

static void
acl_cache_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	acl_cache_reset();
}

static bool
acl_cache_lookup(const char *topic, AclCacheKey *key, bool *allowed)
{
	char	   *settings;
	AclCacheEntry *e;

	memset(key, 0, sizeof(*key));
	if (strlen(topic) >= ACL_TOPIC_KEY_LEN)
		return false;			/* not a valid topic name; ask, no caching */
	key->userid = GetUserId();
	strlcpy(key->topic, topic, ACL_TOPIC_KEY_LEN);

	settings = psprintf("%s|%d", kafgres_super_users ? kafgres_super_users : "",
						(int) kafgres_allow_everyone_if_no_acl_found);
	if (acl_cache_settings == NULL || strcmp(settings, acl_cache_settings) != 0)
	{
		acl_cache_reset();
		if (acl_cache_settings != NULL)
			pfree(acl_cache_settings);
		acl_cache_settings = MemoryContextStrdup(TopMemoryContext, settings);
	}
	pfree(settings);

	if (acl_cache == NULL)
		return false;
	e = hash_search(acl_cache, key, HASH_FIND, NULL);
	if (e == NULL)
		return false;
	*allowed = e->allowed;
	return true;
}

static void
acl_cache_store(const AclCacheKey *key, bool allowed)
{
	AclCacheEntry *e;

	if (key->topic[0] == '\0')
		return;
	if (acl_cache == NULL)
	{
		HASHCTL		ctl;
		Oid			nspid = get_namespace_oid("kafgres", true);

		acl_table_relid = OidIsValid(nspid) ? get_relname_relid("acl", nspid) : InvalidOid;
		ctl.keysize = sizeof(AclCacheKey);
		ctl.entrysize = sizeof(AclCacheEntry);
		acl_cache = hash_create("kafgres ACL decisions", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	e = hash_search(acl_cache, key, HASH_ENTER, NULL);
	e->allowed = allowed;
}

static void
check_topic_acl(const char *topic)
{
	char	   *principal;
	AclCacheKey key;
	bool		allowed;
	static bool callbacks = false;

	if (!kafgres_authorizer_enabled())
		return;
	if (!callbacks)
	{
		CacheRegisterRelcacheCallback(acl_cache_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, acl_cache_syscache_callback, (Datum) 0);
		callbacks = true;
	}

	principal = psprintf("User:%s", GetUserNameFromId(GetUserId(), false));
	if (!acl_cache_lookup(topic, &key, &allowed))
	{
		allowed = DatumGetBool(OidFunctionCall4(lookup_kafgres_function("acl_check", 4, &acl_check_oid),
												CStringGetTextDatum(principal),
												CStringGetTextDatum("WRITE"),
												CStringGetTextDatum("TOPIC"),
												CStringGetTextDatum(topic)));
		acl_cache_store(&key, allowed);
	}
	if (!allowed)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for topic \"%s\"", topic),
				 errdetail("The Kafka ACLs do not allow principal %s WRITE on TOPIC %s.",
						   principal, topic),
				 errhint("A superuser can grant it: SELECT kafgres_acl_grant(%s, 'WRITE', 'TOPIC', %s);",
						 quote_literal_cstr(principal), quote_literal_cstr(topic))));
	pfree(principal);
}

/*
 * A topic kafgres_produce would have created (kafgres.auto_create_topics)
 * needs Kafka's CREATE, as a Kafka client's auto-creation does: on the
 * cluster or on the topic.  Asked only for a topic that does not exist,
 * so not cached.
 */
static void
check_create_acl(const char *topic)
{
	char	   *principal;
	Oid			fn;

	if (!kafgres_authorizer_enabled())
		return;
	principal = psprintf("User:%s", GetUserNameFromId(GetUserId(), false));
	fn = lookup_kafgres_function("acl_check", 4, &acl_check_oid);
	if (DatumGetBool(OidFunctionCall4(fn, CStringGetTextDatum(principal), CStringGetTextDatum("CREATE"),
									  CStringGetTextDatum("CLUSTER"), CStringGetTextDatum("kafka-cluster"))) ||
		DatumGetBool(OidFunctionCall4(fn, CStringGetTextDatum(principal), CStringGetTextDatum("CREATE"),
									  CStringGetTextDatum("TOPIC"), CStringGetTextDatum(topic))))
	{
		pfree(principal);
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to create topic \"%s\"", topic),
			 errdetail("Topic \"%s\" does not exist, and the Kafka ACLs do not allow principal %s CREATE on TOPIC %s or on the CLUSTER, which creating it takes, as it does for a Kafka client.",
					   topic, principal, topic),
			 errhint("Create the topic with kafgres_create_topic() first, or a superuser can grant it: SELECT kafgres_acl_grant(%s, 'CREATE', 'TOPIC', %s);",
					 quote_literal_cstr(principal), quote_literal_cstr(topic))));
}

PG_FUNCTION_INFO_V1(kafgres_acl_changed);

/*
 * kafgres.acl_changed(): statement trigger on kafgres.acl.  Sends a
 * relcache invalidation of the table, delivered at commit to every
 * backend, which empties their ACL decision caches.
 */
Datum
kafgres_acl_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "kafgres.acl_changed() must be called as a trigger");
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}

/*
 * Check everything, then write the message.  Returns the message's LSN.
 */
static XLogRecPtr
produce(ProduceRecord *rec)
{
	StringInfoData buf;
	XLogRecPtr	lsn;
	int			i;

	/* a produced record is a write, whatever the WAL machinery thinks */
	PreventCommandIfReadOnly("kafgres_produce()");
	PreventCommandDuringRecovery("kafgres_produce()");

	check_record_size(rec);
	check_topic_acl(rec->topic);
	check_topic_and_partition(rec);
	check_key_compacted(rec);

	check_wal_level("kafgres_produce");
	check_slot();
	kafgres_require_message_key();

	kafgres_start_signed_message(&buf);
	pq_sendbyte(&buf, KAFGRES_MESSAGE_VERSION);
	send_string16(&buf, rec->topic, strlen(rec->topic));
	pq_sendint32(&buf, (uint32) rec->partition);
	send_bytes32(&buf, rec->key, rec->key_len);
	send_bytes32(&buf, rec->value, rec->value_len);
	pq_sendint16(&buf, (uint16) rec->nheaders);
	for (i = 0; i < rec->nheaders; i++)
	{
		send_string16(&buf, rec->headers[i].key, rec->headers[i].key_len);
		send_bytes32(&buf, rec->headers[i].value, rec->headers[i].value_len);
	}

	/*
	 * The LSN returned is the end of the message's WAL record, as with
	 * pg_logical_emit_message(); logical decoding reports the same position
	 * as the message's, so it is also the lsn of the M frame.
	 */
	lsn = kafgres_emit_signed_message(&buf, KAFGRES_MESSAGE_PREFIX);

	pfree(buf.data);

	return lsn;
}

/*
 * Per-call cache of kafgres_snapshot_row's permission check: a snapshot
 * calls it once per row of the table, always for the same mapping.
 */
typedef struct SnapshotRowCheck
{
	int64		mapping_id;
	Oid			userid;
} SnapshotRowCheck;

/*
 * kafgres.snapshot_row(mapping_id bigint, row jsonb) RETURNS pg_lsn
 *
 * Write one snapshot row of a mapping (format 2, docs/producing.md), signed
 * like kafgres_produce's messages.  kafgres_snapshot_mapping() calls it for
 * each row of the table.  Only a member of the mapping's owner role may:
 * the broker renders the row with the owner's privileges.
 */
Datum
kafgres_snapshot_row(PG_FUNCTION_ARGS)
{
	int64		mapping_id;
	Jsonb	   *row;
	SnapshotRowCheck *checked = fcinfo->flinfo->fn_extra;
	char	   *json;
	char	   *utf8;
	StringInfoData buf;
	XLogRecPtr	lsn;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("arguments of kafgres.snapshot_row must not be null")));
	mapping_id = PG_GETARG_INT64(0);
	row = PG_GETARG_JSONB_P(1);

	PreventCommandIfReadOnly("kafgres_snapshot_mapping()");
	PreventCommandDuringRecovery("kafgres_snapshot_mapping()");

	if (checked == NULL || checked->mapping_id != mapping_id ||
		checked->userid != GetUserId())
	{
		kafgres_check_snapshot_writer(mapping_id);
		check_wal_level("kafgres_snapshot_mapping");
		check_slot();
		kafgres_require_message_key();

		if (checked == NULL)
			checked = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt,
										 sizeof(SnapshotRowCheck));
		checked->mapping_id = mapping_id;
		checked->userid = GetUserId();
		fcinfo->flinfo->fn_extra = checked;
	}

	/* the text to_jsonb(row)::text gives, as UTF-8 */
	json = JsonbToCString(NULL, &row->root, VARSIZE(row));
	utf8 = pg_server_to_any(json, strlen(json), PG_UTF8);

	kafgres_start_signed_message(&buf);
	pq_sendbyte(&buf, KAFGRES_SNAPSHOT_VERSION);
	pq_sendint64(&buf, (uint64) mapping_id);
	appendBinaryStringInfo(&buf, utf8, strlen(utf8));

	lsn = kafgres_emit_signed_message(&buf, KAFGRES_MESSAGE_PREFIX);

	pfree(buf.data);

	PG_RETURN_LSN(lsn);
}

/*
 * kafgres.mapping_request(mapping_id bigint, request "char", first_id bigint,
 *                         last_id bigint) RETURNS pg_lsn
 *
 * A request to the broker about one mapping, at this point of the stream
 * (format 3, docs/producing.md), signed like the others: 'r' render again
 * the dead letters with ids first_id to last_id that this transaction
 * marked (kafgres_replay_dead_letters); 'p' hold the mapping's changes
 * from here (a schema change broke it, the event trigger); 's' deliver
 * what was held and hold no more (kafgres_alter_mapping).  The broker acts
 * on a request only when the rows it names agree (the marks, the pause),
 * which only kafgres's functions write.
 */
Datum
kafgres_mapping_request(PG_FUNCTION_ARGS)
{
	int64		mapping_id;
	char		request;
	StringInfoData buf;
	XLogRecPtr	lsn;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("arguments of kafgres.mapping_request must not be null")));
	mapping_id = PG_GETARG_INT64(0);
	request = PG_GETARG_CHAR(1);
	if (request != 'r' && request != 'p' && request != 's')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid mapping request \"%c\"", request)));

	PreventCommandIfReadOnly("kafgres.mapping_request()");
	PreventCommandDuringRecovery("kafgres.mapping_request()");
	kafgres_check_snapshot_writer(mapping_id);
	check_wal_level("kafgres.mapping_request");
	check_slot();
	kafgres_require_message_key();

	kafgres_start_signed_message(&buf);
	pq_sendbyte(&buf, KAFGRES_REQUEST_VERSION);
	pq_sendbyte(&buf, (uint8) request);
	pq_sendint64(&buf, (uint64) mapping_id);
	pq_sendint64(&buf, (uint64) PG_GETARG_INT64(2));
	pq_sendint64(&buf, (uint64) PG_GETARG_INT64(3));

	lsn = kafgres_emit_signed_message(&buf, KAFGRES_MESSAGE_PREFIX);

	pfree(buf.data);

	PG_RETURN_LSN(lsn);
}

static const char *
topic_argument(FunctionCallInfo fcinfo, int argno)
{
	char	   *topic;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"topic\" of kafgres_produce must not be null")));

	topic = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	check_topic_name(topic);
	return topic;
}

/* NULL means "the broker chooses", which the message spells -1 */
static int32
partition_argument(FunctionCallInfo fcinfo, int argno)
{
	int32		partition;

	if (PG_ARGISNULL(argno))
		return -1;

	partition = PG_GETARG_INT32(argno);
	if (partition < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid partition %d in argument \"partition\" of kafgres_produce",
						partition),
				 errdetail("Partitions are numbered from 0."),
				 errhint("Pass NULL to let the broker choose the partition.")));
	return partition;
}

/*
 * A text key or value, as UTF-8: Kafka clients take string keys and values
 * to be UTF-8, whatever the database's encoding.
 */
static void
text_argument(FunctionCallInfo fcinfo, int argno, const char **data, int *len)
{
	text	   *t;

	if (PG_ARGISNULL(argno))
	{
		*data = NULL;
		*len = -1;
		return;
	}

	t = PG_GETARG_TEXT_PP(argno);
	*data = pg_server_to_any(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), PG_UTF8);
	*len = (*data == VARDATA_ANY(t)) ? VARSIZE_ANY_EXHDR(t) : strlen(*data);
}

static void
bytea_argument(FunctionCallInfo fcinfo, int argno, const char **data, int *len)
{
	bytea	   *b;

	if (PG_ARGISNULL(argno))
	{
		*data = NULL;
		*len = -1;
		return;
	}

	b = PG_GETARG_BYTEA_PP(argno);
	*data = VARDATA_ANY(b);
	*len = VARSIZE_ANY_EXHDR(b);
}

/*
 * Headers from a jsonb object: each key is a header; a string value is sent
 * as its UTF-8 bytes, null as a null header value, and anything else
 * (numbers, booleans, arrays, objects) as its JSON text.  jsonb keeps keys
 * unique and in its own order, so the headers come in that order.
 */
static void
headers_from_jsonb(ProduceRecord *rec, Jsonb *jb)
{
	JsonbIterator *it;
	JsonbIteratorToken token;
	JsonbValue	v;
	int			n = 0;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"headers\" of kafgres_produce must be a JSON object"),
				 errdetail("It is a JSON %s.",
						   JB_ROOT_IS_SCALAR(jb) ? "scalar" : "array"),
				 errhint("Pass headers as '{\"name\": \"value\", ...}', or NULL for none.")));

	if (JB_ROOT_COUNT(jb) > PG_UINT16_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many headers in argument \"headers\" of kafgres_produce"),
				 errdetail("It has %u keys; a record can have at most %d headers.",
						   JB_ROOT_COUNT(jb), PG_UINT16_MAX)));

	rec->nheaders = JB_ROOT_COUNT(jb);
	rec->headers = palloc0(sizeof(ProduceHeader) * Max(rec->nheaders, 1));

	it = JsonbIteratorInit(&jb->root);
	while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		ProduceHeader *h;

		if (token == WJB_KEY)
		{
			Assert(n < rec->nheaders);
			h = &rec->headers[n];
			h->key = pg_server_to_any(v.val.string.val, v.val.string.len,
									  PG_UTF8);
			h->key_len = (h->key == v.val.string.val) ?
				v.val.string.len : strlen(h->key);
			check_header_key(h->key, h->key_len);
		}
		else if (token == WJB_VALUE)
		{
			h = &rec->headers[n++];
			if (v.type == jbvNull)
			{
				h->value = NULL;
				h->value_len = -1;
			}
			else if (v.type == jbvString)
			{
				h->value = pg_server_to_any(v.val.string.val,
											v.val.string.len, PG_UTF8);
				h->value_len = (h->value == v.val.string.val) ?
					v.val.string.len : strlen(h->value);
			}
			else
			{
				/* numbers, booleans, nested arrays and objects: JSON text */
				Jsonb	   *value = JsonbValueToJsonb(&v);
				char	   *json = JsonbToCString(NULL, &value->root,
												  VARSIZE(value));

				h->value = pg_server_to_any(json, strlen(json), PG_UTF8);
				h->value_len = strlen(h->value);
			}
		}
	}
	Assert(n == rec->nheaders);
}

/*
 * Headers from two parallel arrays.  NULL for an array means no elements,
 * so (NULL, NULL) is "no headers".
 */
static void
headers_from_arrays(ProduceRecord *rec, ArrayType *keys, ArrayType *values)
{
	Datum	   *key_datums = NULL;
	bool	   *key_nulls = NULL;
	int			nkeys = 0;
	Datum	   *value_datums = NULL;
	bool	   *value_nulls = NULL;
	int			nvalues = 0;
	int			i;

	if (keys != NULL)
	{
		if (ARR_NDIM(keys) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("argument \"header_keys\" of kafgres_produce must be a one-dimensional array")));
		deconstruct_array(keys, TEXTOID, -1, false, TYPALIGN_INT,
						  &key_datums, &key_nulls, &nkeys);
	}
	if (values != NULL)
	{
		if (ARR_NDIM(values) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("argument \"header_values\" of kafgres_produce must be a one-dimensional array")));
		deconstruct_array(values, BYTEAOID, -1, false, TYPALIGN_INT,
						  &value_datums, &value_nulls, &nvalues);
	}

	if (nkeys != nvalues)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("arguments \"header_keys\" and \"header_values\" of kafgres_produce must have the same number of elements"),
				 errdetail("header_keys has %d elements, header_values has %d.",
						   nkeys, nvalues)));

	if (nkeys > PG_UINT16_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many headers in argument \"header_keys\" of kafgres_produce"),
				 errdetail("It has %d elements; a record can have at most %d headers.",
						   nkeys, PG_UINT16_MAX)));

	rec->nheaders = nkeys;
	rec->headers = palloc0(sizeof(ProduceHeader) * Max(nkeys, 1));

	for (i = 0; i < nkeys; i++)
	{
		ProduceHeader *h = &rec->headers[i];
		text	   *k;

		/* Kafka header keys are strings; only values may be null */
		if (key_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument \"header_keys\" of kafgres_produce must not contain nulls"),
					 errdetail("Element %d is null.", i + 1),
					 errhint("A header's value may be null, its key may not.")));

		k = DatumGetTextPP(key_datums[i]);
		h->key = pg_server_to_any(VARDATA_ANY(k), VARSIZE_ANY_EXHDR(k), PG_UTF8);
		h->key_len = (h->key == VARDATA_ANY(k)) ?
			VARSIZE_ANY_EXHDR(k) : strlen(h->key);
		check_header_key(h->key, h->key_len);

		if (value_nulls[i])
		{
			h->value = NULL;
			h->value_len = -1;
		}
		else
		{
			bytea	   *v = DatumGetByteaPP(value_datums[i]);

			h->value = VARDATA_ANY(v);
			h->value_len = VARSIZE_ANY_EXHDR(v);
		}
	}
}

/*
 * Kafka's rule (topicname.c, which kafgres_create_topic() asks too), with
 * kafgres_create_topic()'s messages naming argument "topic"; and no
 * internal topic, as Kafka refuses produce requests to them
 */
static void
check_topic_name(const char *topic)
{
	int			len = strlen(topic);
	int			length;

	switch (topic_name_problem(topic, len, &length))
	{
		case TOPIC_NAME_OK:
			break;
		case TOPIC_NAME_EMPTY:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid topic name: the name is empty"),
					 errhint("Pass a non-empty name as argument \"topic\".")));
			break;
		case TOPIC_NAME_DOTS:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid topic name \"%s\": \".\" and \"..\" are not allowed",
							topic)));
			break;
		case TOPIC_NAME_TOO_LONG:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid topic name \"%.*s...\": the name is %d characters long",
							pg_mbcliplen(topic, len, 40), topic, length),
					 errdetail("Topic names can be at most %d characters long.",
							   TOPIC_NAME_MAX_LENGTH)));
			break;
		case TOPIC_NAME_CHARACTERS:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid topic name \"%s\" in argument \"topic\"", topic),
					 errdetail("Topic names may contain only ASCII letters, digits, \".\", \"_\" and \"-\".")));
			break;
	}
	if (topic_name_internal(topic, len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot produce to internal topic \"%s\"", topic),
				 errdetail("Kafka's internal topics hold its coordinators' state; no producer may write to them.")));
}

static void
check_header_key(const char *key, int len)
{
	if (len > PG_UINT16_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("header key of kafgres_produce is too long"),
				 errdetail("The key \"%.40s...\" is %d bytes long; at most %d are allowed.",
						   key, len, PG_UINT16_MAX)));
}

/* bytes of a zigzag varint, as Kafka encodes lengths in v2 records */
static int64
varint_size(int64 value)
{
	uint64		v = ((uint64) value << 1) ^ (uint64) (value >> 63);
	int64		bytes = 1;

	while (v >= 0x80)
	{
		v >>= 7;
		bytes++;
	}
	return bytes;
}

/*
 * kafgres.max_message_bytes is Kafka's max.message.bytes: the limit on a
 * record batch.  We count the batch this record would make on its own, so
 * that SQL accepts exactly what a Kafka producer sending it alone could
 * send.
 */
static void
check_record_size(ProduceRecord *rec)
{
	int64		headers_bytes = 0;
	int64		body;
	int64		batch;
	int			i;

	/* attributes, timestamp delta 0, offset delta 0 */
	body = 3;
	body += varint_size(rec->key_len) + Max(rec->key_len, 0);
	body += varint_size(rec->value_len) + Max(rec->value_len, 0);
	body += varint_size(rec->nheaders);
	for (i = 0; i < rec->nheaders; i++)
	{
		ProduceHeader *h = &rec->headers[i];

		body += varint_size(h->key_len) + h->key_len;
		body += varint_size(h->value_len) + Max(h->value_len, 0);
		headers_bytes += h->key_len + Max(h->value_len, 0);
	}
	batch = RECORD_BATCH_OVERHEAD + varint_size(body) + body;

	if (batch > kafgres_max_message_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("record for topic \"%s\" is too large", rec->topic),
				 errdetail("The record takes %lld bytes as a Kafka record batch "
						   "(key %d bytes, value %d bytes, %d headers of %lld bytes); "
						   "kafgres.max_message_bytes is %d.",
						   (long long) batch,
						   Max(rec->key_len, 0), Max(rec->value_len, 0),
						   rec->nheaders, (long long) headers_bytes,
						   kafgres_max_message_bytes)));
}

/*
 * Where kafgres.topic is: its OID, its unique index on the name and the
 * columns read.  Looking these up by name on every call took about a tenth
 * of kafgres_produce's own time (docs/performance.md), so each backend keeps
 * them from its first call on and forgets them on any invalidation of the
 * table or its index (ALTER TABLE, DROP or CREATE EXTENSION, an index
 * created) and of any namespace (ALTER SCHEMA ... RENAME), which every such
 * change sends.
 * invalidations counts the callbacks, so that a lookup that an
 * invalidation overtook is made again.
 */
typedef struct TopicTable
{
	bool		valid;
	Oid			relid;
	Oid			index_relid;	/* InvalidOid: scan the table */
	AttrNumber	name_attnum;
	AttrNumber	partitions_attnum;
} TopicTable;

static TopicTable topic_table;
static uint64 topic_table_invalidations = 0;
static bool topic_table_callbacks = false;

static void
topic_table_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == topic_table.relid ||
		relid == topic_table.index_relid)
	{
		topic_table.valid = false;
		topic_table_invalidations++;
	}
}

static void
topic_table_namespace_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	topic_table.valid = false;
	topic_table_invalidations++;
}

/* look kafgres.topic up by name; errors leave topic_table invalid */
static void
lookup_topic_table(void)
{
	Oid			nspid;
	Oid			relid;

	if (!topic_table_callbacks)
	{
		CacheRegisterRelcacheCallback(topic_table_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID,
									  topic_table_namespace_callback, (Datum) 0);
		topic_table_callbacks = true;
	}

	topic_table.valid = false;

	nspid = get_namespace_oid("kafgres", true);
	relid = OidIsValid(nspid) ? get_relname_relid("topic", nspid) : InvalidOid;
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table kafgres.topic does not exist"),
				 errhint("Run CREATE EXTENSION kafgres in this database.")));

	topic_table.relid = relid;
	topic_table.name_attnum = get_attnum(relid, "name");
	topic_table.partitions_attnum = get_attnum(relid, "partitions");
	if (topic_table.name_attnum == InvalidAttrNumber ||
		topic_table.partitions_attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("table kafgres.topic lacks column \"name\" or \"partitions\""),
				 errhint("The kafgres extension's tables have been altered; reinstall the extension.")));

	/* without the unique index a sequential scan gives the same answer */
	topic_table.index_relid = get_relname_relid("topic_name_key", nspid);

	topic_table.valid = true;
}

/*
 * Open kafgres.topic with AccessShareLock.  Taking the lock processes
 * pending invalidations, so what was looked up before is used only if
 * nothing was invalidated since, as RangeVarGetRelidExtended does.
 */
static Relation
open_topic_table(void)
{
	for (;;)
	{
		uint64		seen = topic_table_invalidations;
		Relation	rel;

		if (!topic_table.valid)
			lookup_topic_table();
		rel = try_table_open(topic_table.relid, AccessShareLock);
		if (rel != NULL && topic_table.valid &&
			seen == topic_table_invalidations)
			return rel;
		if (rel != NULL)
			table_close(rel, AccessShareLock);
		topic_table.valid = false;
	}
}

/*
 * The topic must exist, unless the broker may create it at delivery; an
 * explicit partition must exist too.  Read with an index scan under the
 * statement's snapshot rather than through SPI: it is cheap, it sees topics
 * created earlier in the same transaction, and it does not require callers
 * to have privileges on kafgres.topic -- EXECUTE on kafgres_produce is the
 * right to produce.
 */
static void
check_topic_and_partition(ProduceRecord *rec)
{
	Relation	rel;
	TupleDesc	desc;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		exists = false;
	int32		partitions = 0;

	rel = open_topic_table();
	desc = RelationGetDescr(rel);

	ScanKeyInit(&key, topic_table.name_attnum, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(rec->topic));
	/* the index is ordered by the column's collation, so compare with it */
	key.sk_collation = TupleDescAttr(desc, topic_table.name_attnum - 1)->attcollation;

	scan = systable_beginscan(rel, topic_table.index_relid,
							  OidIsValid(topic_table.index_relid),
							  GetActiveSnapshot(), 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, topic_table.partitions_attnum,
									 desc, &isnull);

		exists = true;
		partitions = isnull ? 0 : DatumGetInt32(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!exists)
	{
		if (!kafgres_auto_create_topics)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("topic \"%s\" does not exist", rec->topic),
					 errdetail("kafgres.auto_create_topics is off."),
					 errhint("Create the topic with kafgres_create_topic() first.")));
		check_create_acl(rec->topic);

		/*
		 * The broker will create it with kafgres.default_partitions
		 * partitions when it delivers the record; a partition beyond those
		 * could never be delivered.
		 */
		if (rec->partition >= kafgres_default_partitions)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("partition %d of topic \"%s\" does not exist",
							rec->partition, rec->topic),
					 errdetail("Topic \"%s\" does not exist yet; it will be created with kafgres.default_partitions = %d partitions, numbered from 0.",
							   rec->topic, kafgres_default_partitions),
					 errhint("Create the topic with kafgres_create_topic() and the partition count you need.")));
		return;
	}

	if (rec->partition >= partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition %d of topic \"%s\" does not exist",
						rec->partition, rec->topic),
				 errdetail("Topic \"%s\" has %d partitions, numbered from 0.",
						   rec->topic, partitions)));
}

/*
 * A record without a key cannot go to a compacted topic: Kafka refuses it
 * (INVALID_RECORD, "Compacted topic cannot accept message without key"),
 * and compaction could never remove it.  The topic's cleanup.policy, else
 * the broker's log.cleanup.policy, is the plpgsql function
 * kafgres.topic_compacts (SECURITY DEFINER: the caller needs no privilege
 * on the config tables), whose plan is cached per backend; asked only for
 * a NULL key.
 */
static void
check_key_compacted(ProduceRecord *rec)
{
	if (rec->key != NULL)
		return;
	if (!DatumGetBool(OidFunctionCall1(lookup_kafgres_function("topic_compacts", 1, &topic_compacts_oid),
									   CStringGetTextDatum(rec->topic))))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("a record without a key cannot go to compacted topic \"%s\"", rec->topic),
			 errdetail("The topic's cleanup.policy includes compact: compaction keeps the latest record of each key, and Kafka refuses records without one there."),
			 errhint("Give the record a key.")));
}

/*
 * Without logical decoding nobody would ever read the message: the record
 * would be silently lost.  The server refuses to start with a logical slot
 * and a lower wal_level, but check anyway, for the clearer message.
 */
static void
check_wal_level(const char *what)
{
	if (wal_level < WAL_LEVEL_LOGICAL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s requires wal_level = logical", what),
				 errdetail("wal_level is \"%s\".",
						   GetConfigOption("wal_level", false, false)),
				 errhint("Set wal_level = logical in postgresql.conf and restart the server.")));
}

/*
 * Slot "kafgres" must exist, in this database, with our plugin: otherwise
 * nobody decodes the message and the record is silently lost -- messages
 * written before a slot is created are never decoded by it, and a slot in
 * another database skips this database's WAL.
 */
static void
check_slot(void)
{
	ReplicationSlot *slot;
	bool		found = false;
	Oid			database = InvalidOid;
	NameData	plugin;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(KAFGRES_SLOT_NAME, false);
	if (slot != NULL)
	{
		found = true;
		SpinLockAcquire(&slot->mutex);
		database = slot->data.database;
		namestrcpy(&plugin, NameStr(slot->data.plugin));
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);

	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replication slot \"%s\" does not exist", KAFGRES_SLOT_NAME),
				 errhint("The kafgres broker creates it when it starts; check that it is running (kafgres supervisor in pg_stat_activity).")));

	if (!OidIsValid(database))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replication slot \"%s\" is not a logical replication slot",
						KAFGRES_SLOT_NAME),
				 errhint("Drop the slot; the kafgres broker creates it when it starts.")));

	if (database != MyDatabaseId)
	{
		char	   *dbname = get_database_name(database);

		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replication slot \"%s\" belongs to another database",
						KAFGRES_SLOT_NAME),
				 errdetail("The slot is in database \"%s\"; records produced in this database would never be delivered.",
						   dbname ? dbname : "(dropped)"),
				 errhint("Produce in the database named by kafgres.database.")));
	}

	if (strcmp(NameStr(plugin), KAFGRES_PLUGIN_NAME) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replication slot \"%s\" uses output plugin \"%s\", not \"%s\"",
						KAFGRES_SLOT_NAME, NameStr(plugin), KAFGRES_PLUGIN_NAME),
				 errhint("Drop the slot; the kafgres broker creates it when it starts.")));
}

/* string16: uint16 length, then the bytes */
static void
send_string16(StringInfo buf, const char *data, int len)
{
	Assert(len >= 0 && len <= PG_UINT16_MAX);
	pq_sendint16(buf, (uint16) len);
	pq_sendbytes(buf, data, len);
}

/* int32 length (-1 for NULL), then the bytes */
static void
send_bytes32(StringInfo buf, const char *data, int len)
{
	if (data == NULL)
	{
		pq_sendint32(buf, (uint32) -1);
		return;
	}
	pq_sendint32(buf, (uint32) len);
	pq_sendbytes(buf, data, len);
}
