/*-------------------------------------------------------------------------
 *
 * plugin.c
 *	  The "kafgres" logical decoding output plugin.
 *
 * The broker's decoder reads slot "kafgres" through this plugin.  Only two
 * kinds of content leave it: transactional logical messages with prefix
 * "kafgres" signed by kafgres_produce() or kafgres.snapshot_row() (see
 * produce.c and auth.c), and row changes of the tables that have a row in
 * kafgres.mapping.  Everything else is dropped here, inside the walsender,
 * so that a busy database whose tables are mostly unmapped costs the broker
 * nothing but keepalives, and so that no message written by hand with our
 * prefix ever reaches it.
 *
 * The output is binary: frames, gathered into one OutputPluginWrite per
 * transaction (or per KAFGRES_BATCH_BYTES of a large one), each preceded by
 * its length.  The format is specified in docs/producing.md ("Output plugin
 * frames"), which is the contract with decoder/ -- change both together.
 *
 * kafgres.mapping is a user_catalog_table, so it can be read here under the
 * historic snapshot: the answer to "which mappings does this change
 * match?" is the one that was true at the change's position in the WAL,
 * not today's, and every change frame carries those mappings' ids so that
 * the broker renders it with them.  A mapping on a partitioned table
 * matches the changes of every partition below it: pg_inherits is a
 * catalog, so the partition tree is also read as of the change.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "libpq/pqformat.h"
#include "nodes/bitmapset.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/output_plugin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "auth.h"
#include "pgcompat.h"

/* first byte of every frame; bump it with docs/producing.md */
#define KAFGRES_FRAME_VERSION	3

/*
 * Frames are gathered and written together once a transaction ends or they
 * reach this size.  Every write is a CopyData message the walsender tries
 * to send at once, and one the broker must read: a write per frame cost a
 * send() per row here and a read per few rows there.  A batch of more than
 * KAFGRES_BATCH_KEEP bytes (one huge row) is freed after it is written.
 */
#define KAFGRES_BATCH_BYTES		(64 * 1024)
#define KAFGRES_BATCH_KEEP		(1024 * 1024)

/* see docs/producing.md */
#define FRAME_BEGIN				'B'
#define FRAME_MESSAGE			'M'
#define FRAME_INSERT			'I'
#define FRAME_UPDATE			'U'
#define FRAME_DELETE			'D'
#define FRAME_TRUNCATE			'T'
#define FRAME_COMMIT			'C'

/* tuple column kinds */
#define COLUMN_NULL				'n'
#define COLUMN_UNCHANGED_TOAST	'u'
#define COLUMN_TEXT				't'

/*
 * How many changes we may skip in a row before telling the walsender we are
 * still alive.  Without that a huge transaction on unmapped tables sends
 * nothing for as long as it takes to decode, and the receiving side's
 * wal_sender_timeout fires.  pgoutput uses the same figure.
 */
#define SKIPPED_CHANGES_THRESHOLD	100

/*
 * One entry of the per-transaction cache "which mappings match a change of
 * this relation?": the ids of the kafgres.mapping rows whose source_relid is
 * the relation or one of its partition ancestors, ascending.
 */
typedef struct RelMappingsEntry
{
	Oid			relid;			/* hash key */
	int			nmappings;
	int64	   *mapping_ids;	/* in txn_context; NULL when nmappings is 0 */
} RelMappingsEntry;

typedef struct KafgresDecodingData
{
	/* reset after every frame; everything per change is allocated here */
	MemoryContext context;

	/*
	 * Lives for one transaction: the mapping cache and the location of
	 * kafgres.mapping.  Reset in begin and commit.
	 */
	MemoryContext txn_context;

	/* whether the current transaction's B frame has been written */
	bool		begin_written;

	/*
	 * Frames not yet written (each a uint32 length and the frame), in
	 * ctx->context, and where the one being built starts.
	 */
	StringInfo	batch;
	int			frame_start;

	/* changes skipped since we last wrote or reported progress */
	int			skipped_changes;

	/*
	 * The replication origins of the table engine's log writer (one per
	 * connection of the broker's pool, kafgres.log_session_origin()):
	 * learnt from the first change of theirs to a log table, then dropped
	 * by kafgres_filter_origin before the reorder buffer queues them.
	 * Learnt, not looked up by name: the filter runs outside any
	 * transaction, where the catalog cannot be read.
	 */
	Bitmapset  *log_origins;
	MemoryContext origins_context;

	/*
	 * kafgres.mapping as seen by the current transaction's historic
	 * snapshot; looked up at its first change.  mapping_relid is InvalidOid
	 * when the table does not exist (yet), or no longer exists today (DROP
	 * EXTENSION), in which case nothing is mapped.
	 */
	bool		mapping_looked_up;
	Oid			mapping_nspid;	/* schema kafgres */
	Oid			mapping_relid;
	Oid			mapping_index;	/* index on source_relid, if any */
	AttrNumber	mapping_attnum; /* attnum of source_relid */
	AttrNumber	mapping_id_attnum;	/* attnum of mapping_id */

	HTAB	   *rel_mappings;	/* RelMappingsEntry by relid, in txn_context */

	/*
	 * Every relation rel_mappings's answers were derived from (the
	 * relations and their ancestors), as a set of Oids in txn_context; a
	 * relcache invalidation of one of them (relcache_invalidated) sets
	 * rels_invalidated: a partition may have been attached or detached
	 * within the transaction, so what rel_mappings says about ancestors may
	 * be out of date.
	 */
	HTAB	   *watched_rels;
	bool		rels_invalidated;

	/*
	 * The kafgres.mapping and index whose storage was last found to exist
	 * in today's catalog, kept across transactions until a relcache
	 * invalidation of either (see check_mapping_storage).
	 */
	Oid			storage_checked_relid;
	Oid			storage_checked_index;
	bool		storage_index_usable;
} KafgresDecodingData;

/*
 * The decoding session of this backend, for the relcache callback, which
 * cannot be unregistered and so outlives sessions: NULL between them.  A
 * backend runs at most one decoding session at a time.
 */
static KafgresDecodingData *active_session = NULL;
static bool relcache_callback_registered = false;

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

static void kafgres_startup(LogicalDecodingContext *ctx,
							OutputPluginOptions *opt, bool is_init);
static void kafgres_shutdown(LogicalDecodingContext *ctx);
static void kafgres_begin_txn(LogicalDecodingContext *ctx,
							  ReorderBufferTXN *txn);
static void kafgres_commit_txn(LogicalDecodingContext *ctx,
							   ReorderBufferTXN *txn, XLogRecPtr commit_lsn);
static void kafgres_change(LogicalDecodingContext *ctx,
						   ReorderBufferTXN *txn, Relation relation,
						   ReorderBufferChange *change);
static void kafgres_truncate(LogicalDecodingContext *ctx,
							 ReorderBufferTXN *txn, int nrelations,
							 Relation relations[],
							 ReorderBufferChange *change);
static void kafgres_message(LogicalDecodingContext *ctx,
							ReorderBufferTXN *txn, XLogRecPtr message_lsn,
							bool transactional, const char *prefix,
							Size message_size, const char *message);

static void reject_message(LogicalDecodingContext *ctx, XLogRecPtr order,
						   XLogRecPtr message_lsn, const char *why);
static void reset_txn_state(KafgresDecodingData *data);
static void forget_mappings(KafgresDecodingData *data);
static bool changes_mapping_table(KafgresDecodingData *data,
								  Relation relation);
static void relcache_invalidated(Datum arg, Oid relid);
static void session_context_gone(void *arg);
static RelMappingsEntry *relation_mappings(KafgresDecodingData *data,
										   Relation relation);
static void lookup_mapping_table(KafgresDecodingData *data);
static bool check_mapping_storage(KafgresDecodingData *data);
static void unlock_mapping_storage(KafgresDecodingData *data);
static bool relation_exists_today(Oid relid, Oid nspid, const char *relname,
								  Oid relfilenode);
static void collect_mapping_ids(KafgresDecodingData *data, Relation mapping,
								Oid source_relid, int64 **ids, int *nids,
								int *capacity);
static int	compare_int64(const void *a, const void *b);
static void send_mapping_ids(StringInfo out, RelMappingsEntry *entry,
							 XLogRecPtr lsn);
static void skipped_change(LogicalDecodingContext *ctx);
static bool kafgres_filter_origin(LogicalDecodingContext *ctx,
								  RepOriginId origin_id);
static void learn_log_origin(KafgresDecodingData *data,
							 ReorderBufferTXN *txn, Relation relation);
static StringInfo begin_frame(LogicalDecodingContext *ctx,
							  ReorderBufferTXN *txn, char kind);
static void end_frame(LogicalDecodingContext *ctx);
static void write_frames(LogicalDecodingContext *ctx);
static void ensure_begin_written(LogicalDecodingContext *ctx,
								 ReorderBufferTXN *txn);
static void send_string16(StringInfo out, const char *str);
static void send_relation_name(StringInfo out, Relation relation);
static void send_tuple(StringInfo out, TupleDesc tupdesc, HeapTuple tuple,
					   Bitmapset *only_attrs);

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	/*
	 * No streaming and no two-phase callbacks: the decoder wants each
	 * transaction whole and only once it has committed, which is what
	 * logical decoding does when those callbacks are absent.  A prepared
	 * transaction is therefore decoded at its COMMIT PREPARED.
	 */
	cb->startup_cb = kafgres_startup;
	cb->begin_cb = kafgres_begin_txn;
	cb->change_cb = kafgres_change;
	cb->truncate_cb = kafgres_truncate;
	cb->message_cb = kafgres_message;
	cb->commit_cb = kafgres_commit_txn;
	cb->filter_by_origin_cb = kafgres_filter_origin;
	cb->shutdown_cb = kafgres_shutdown;
}

static void
kafgres_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt,
				bool is_init)
{
	KafgresDecodingData *data;
	ListCell   *option;
	MemoryContextCallback *gone;
	MemoryContext old;

	/*
	 * The format has no options.  Refuse any, rather than
	 * ignore them: a decoder asking for something we do not do should find
	 * out at once, not from misread frames.
	 */
	foreach(option, ctx->output_plugin_options)
	{
		DefElem    *elem = lfirst(option);

		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("output plugin \"kafgres\" does not accept option \"%s\"",
						elem->defname),
				 errdetail("Version %d of the kafgres frame format has no options.",
						   KAFGRES_FRAME_VERSION)));
	}

	data = MemoryContextAllocZero(ctx->context, sizeof(KafgresDecodingData));
	data->context = AllocSetContextCreate(ctx->context,
										  "kafgres change context",
										  ALLOCSET_DEFAULT_SIZES);
	data->txn_context = AllocSetContextCreate(ctx->context,
											  "kafgres transaction context",
											  ALLOCSET_SMALL_SIZES);
	data->origins_context = ctx->context;
	reset_txn_state(data);
	old = MemoryContextSwitchTo(ctx->context);
	data->batch = makeStringInfo();
	MemoryContextSwitchTo(old);

	/*
	 * Relcache invalidations reach the callback below while we decode:
	 * those of the transaction being decoded (ATTACH PARTITION, DROP
	 * EXTENSION) as well as other backends' ones.  ctx->context goes away
	 * without our shutdown callback when decoding fails, hence the reset
	 * callback that forgets the session.
	 */
	if (!relcache_callback_registered)
	{
		CacheRegisterRelcacheCallback(relcache_invalidated, (Datum) 0);
		relcache_callback_registered = true;
	}
	gone = MemoryContextAllocZero(ctx->context, sizeof(MemoryContextCallback));
	gone->func = session_context_gone;
	gone->arg = data;
	MemoryContextRegisterResetCallback(ctx->context, gone);
	active_session = data;

	ctx->output_plugin_private = data;

	opt->output_type = OUTPUT_PLUGIN_BINARY_OUTPUT;
	opt->receive_rewrites = false;
}

static void
kafgres_shutdown(LogicalDecodingContext *ctx)
{
	KafgresDecodingData *data = ctx->output_plugin_private;

	/* both are children of ctx->context, but they need not outlive us */
	MemoryContextDelete(data->context);
	MemoryContextDelete(data->txn_context);
	if (active_session == data)
		active_session = NULL;
}

/* ctx->context is going away: the session must not be called back */
static void
session_context_gone(void *arg)
{
	if (active_session == arg)
		active_session = NULL;
}

/*
 * A relcache entry was invalidated (relid), or all of them (InvalidOid).
 * Only flags are set here: this runs wherever invalidations are accepted,
 * which may be in the middle of one of our own lookups.
 */
static void
relcache_invalidated(Datum arg, Oid relid)
{
	KafgresDecodingData *data = active_session;

	if (data == NULL)
		return;

	/*
	 * ATTACH and DETACH PARTITION invalidate the partition and its parent:
	 * if we derived an answer from either, forget all answers, which costs
	 * one lookup per relation.  Invalidations of other relations, which
	 * other backends' DDL sends all the time, leave the cache alone.
	 */
	if (!OidIsValid(relid) ||
		(data->watched_rels != NULL &&
		 hash_search(data->watched_rels, &relid, HASH_FIND, NULL) != NULL))
		data->rels_invalidated = true;

	if (!OidIsValid(relid) ||
		relid == data->storage_checked_relid ||
		relid == data->storage_checked_index)
	{
		data->storage_checked_relid = InvalidOid;
		data->storage_checked_index = InvalidOid;
		data->storage_index_usable = false;
	}
}

/*
 * Forget everything learned about the current transaction.  The mapping
 * cache must not survive it: the next transaction is decoded under a later
 * historic snapshot, in which kafgres.mapping may have changed.
 */
static void
reset_txn_state(KafgresDecodingData *data)
{
	data->begin_written = false;
	forget_mappings(data);
}

/* Forget the mapping cache, and where kafgres.mapping is. */
static void
forget_mappings(KafgresDecodingData *data)
{
	MemoryContextReset(data->txn_context);
	data->mapping_looked_up = false;
	data->mapping_nspid = InvalidOid;
	data->mapping_relid = InvalidOid;
	data->mapping_index = InvalidOid;
	data->mapping_attnum = InvalidAttrNumber;
	data->mapping_id_attnum = InvalidAttrNumber;
	data->rel_mappings = NULL;
	data->watched_rels = NULL;
	data->rels_invalidated = false;
}

/*
 * Is this change one to kafgres.mapping, which invalidates what we cached?
 * When the table did not exist at our lookup it may be created later in the
 * same transaction (CREATE EXTENSION, then a mapping, then changes), hence
 * the check by name; a false positive only costs a new lookup.
 */
static bool
changes_mapping_table(KafgresDecodingData *data, Relation relation)
{
	if (!data->mapping_looked_up)
		return false;
	if (OidIsValid(data->mapping_relid))
		return RelationGetRelid(relation) == data->mapping_relid;
	return strcmp(RelationGetRelationName(relation), "mapping") == 0;
}

/*
 * BEGIN: write nothing yet.  B goes out only before the transaction's first
 * message or change, so that the (usual) transactions with neither cost no
 * frames at all.
 */
static void
kafgres_begin_txn(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	reset_txn_state(ctx->output_plugin_private);
}

static void
kafgres_commit_txn(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				   XLogRecPtr commit_lsn)
{
	KafgresDecodingData *data = ctx->output_plugin_private;

	if (data->begin_written)
	{
		StringInfo	out = begin_frame(ctx, txn, FRAME_COMMIT);

		pq_sendint64(out, txn->final_lsn);
		pq_sendint64(out, txn->xact_time.commit_time);
		end_frame(ctx);
		write_frames(ctx);
	}
	else
	{
		/*
		 * Nothing of this transaction was sent.  Let the walsender know that
		 * we got past it, so that it can send a keepalive when it is due;
		 * the decoder learns of our progress from those.
		 */
		OutputPluginUpdateProgress(ctx, true);
	}

	reset_txn_state(data);
	data->skipped_changes = 0;
}

static void
kafgres_message(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				XLogRecPtr message_lsn, bool transactional,
				const char *prefix, Size message_size, const char *message)
{
	const char *payload;
	Size		payload_size;
	const char *why;
	StringInfo	out;

	if (strcmp(prefix, "kafgres") != 0)
		return;

	/*
	 * kafgres_produce() only writes transactional messages: a record must
	 * exist if and only if its transaction commits.  A non-transactional
	 * message with our prefix was written by hand.
	 */
	if (!transactional)
	{
		reject_message(ctx, message_lsn, message_lsn,
					   "It is not transactional, and kafgres writes only transactional messages.");
		return;
	}

	/*
	 * Anyone can write a message with our prefix; only the ones kafgres
	 * signed are delivered.  txn is the top-level transaction, whatever
	 * subtransaction wrote the message: the id the writer signed.
	 */
	payload = kafgres_verify_message(txn->xid, message, message_size,
									 &payload_size, &why);
	if (payload == NULL)
	{
		reject_message(ctx, txn->end_lsn, message_lsn, why);
		return;
	}

	/* the frame's length field is 32 bits; the producer never comes close */
	if (payload_size > PG_UINT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("kafgres message at %X/%X is too large to decode",
						LSN_FORMAT_ARGS(message_lsn))));

	ensure_begin_written(ctx, txn);

	out = begin_frame(ctx, txn, FRAME_MESSAGE);
	pq_sendint64(out, message_lsn);
	pq_sendint32(out, (uint32) payload_size);
	pq_sendbytes(out, payload, (int) payload_size);
	end_frame(ctx);
}

/*
 * Drop a message that kafgres did not write: count it and log it, once per
 * server start however often it is decoded, with its position and never
 * its content.  Nothing of it is sent, and a transaction with nothing else
 * sends no frames at all.
 */
static void
reject_message(LogicalDecodingContext *ctx, XLogRecPtr order,
			   XLogRecPtr message_lsn, const char *why)
{
	if (kafgres_count_rejected(order, message_lsn))
		ereport(LOG,
				(errmsg("kafgres: dropped unauthenticated kafgres message at %X/%X",
						LSN_FORMAT_ARGS(message_lsn)),
				 errdetail("%s", why),
				 errhint("Only kafgres_produce() and kafgres_snapshot_mapping() can write records; pg_logical_emit_message() with prefix \"kafgres\" cannot.")));
	skipped_change(ctx);
}

static void
kafgres_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			   Relation relation, ReorderBufferChange *change)
{
	KafgresDecodingData *data = ctx->output_plugin_private;
	Oid			relid = RelationGetRelid(relation);
	TupleDesc	tupdesc = RelationGetDescr(relation);
	HeapTuple	newtuple = NULL;
	HeapTuple	oldtuple = NULL;
	Bitmapset  *old_attrs = NULL;
	RelMappingsEntry *mappings;
	MemoryContext old;
	char		kind;
	StringInfo	out;

	/*
	 * A change of kafgres.mapping itself may map or unmap tables for the
	 * rest of this transaction (kafgres_add_mapping() followed by inserts,
	 * in one transaction): forget what we cached.  The historic snapshot
	 * moves past the change before our next lookup.  Likewise after an
	 * invalidation, which may have moved the relation in a partition tree.
	 */
	if (data->rels_invalidated || changes_mapping_table(data, relation))
		forget_mappings(data);

	mappings = relation_mappings(data, relation);
	if (mappings->nmappings == 0)
	{
		learn_log_origin(data, txn, relation);
		MemoryContextReset(data->context);
		skipped_change(ctx);
		return;
	}

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			kind = FRAME_INSERT;
			break;
		case REORDER_BUFFER_CHANGE_UPDATE:
			kind = FRAME_UPDATE;
			break;
		case REORDER_BUFFER_CHANGE_DELETE:
			kind = FRAME_DELETE;
			break;
		default:
			/* speculative inserts etc. reach us as plain inserts */
			Assert(false);
			return;
	}

	if (change->data.tp.newtuple != NULL)
		newtuple = KAFGRES_CHANGE_TUPLE(change->data.tp.newtuple);
	if (change->data.tp.oldtuple != NULL)
		oldtuple = KAFGRES_CHANGE_TUPLE(change->data.tp.oldtuple);

	/* an insert has no old tuple and a delete no new one, by construction */
	if (kind == FRAME_INSERT)
		oldtuple = NULL;
	else if (kind == FRAME_DELETE)
		newtuple = NULL;

	old = MemoryContextSwitchTo(data->context);

	/*
	 * Unless the replica identity is FULL, the old tuple holds the identity
	 * key's columns and NULLs elsewhere.  Send only the key columns, so that
	 * a NULL in the old tuple always means a NULL in the row.
	 */
	if (oldtuple != NULL &&
		relation->rd_rel->relreplident != REPLICA_IDENTITY_FULL)
		old_attrs = RelationGetIdentityKeyBitmap(relation);

	ensure_begin_written(ctx, txn);

	out = begin_frame(ctx, txn, kind);
	pq_sendint64(out, change->lsn);
	pq_sendint32(out, relid);
	send_relation_name(out, relation);
	send_mapping_ids(out, mappings, change->lsn);

	pq_sendbyte(out, newtuple != NULL ? 1 : 0);
	if (newtuple != NULL)
		send_tuple(out, tupdesc, newtuple, NULL);

	pq_sendbyte(out, oldtuple != NULL ? 1 : 0);
	if (oldtuple != NULL)
		send_tuple(out, tupdesc, oldtuple, old_attrs);

	end_frame(ctx);

	MemoryContextSwitchTo(old);
	MemoryContextReset(data->context);
}

static void
kafgres_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				 int nrelations, Relation relations[],
				 ReorderBufferChange *change)
{
	KafgresDecodingData *data = ctx->output_plugin_private;
	RelMappingsEntry **mappings;
	int			nmapped = 0;
	int			i;
	StringInfo	out;

	/* TRUNCATE kafgres.mapping unmaps everything from here on */
	if (data->rels_invalidated)
		forget_mappings(data);
	for (i = 0; i < nrelations; i++)
	{
		if (changes_mapping_table(data, relations[i]))
			forget_mappings(data);
	}

	/*
	 * Entries live in txn_context; nothing below forgets them before the
	 * frame is written (an invalidation only sets a flag).
	 */
	mappings = MemoryContextAlloc(data->context,
								  sizeof(RelMappingsEntry *) * nrelations);
	for (i = 0; i < nrelations; i++)
	{
		mappings[i] = relation_mappings(data, relations[i]);
		if (mappings[i]->nmappings > 0)
			nmapped++;
	}

	if (nmapped == 0)
	{
		MemoryContextReset(data->context);
		skipped_change(ctx);
		return;
	}

	/* a TRUNCATE names at most a few thousand tables, never 65535 */
	if (nmapped > PG_UINT16_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("TRUNCATE at %X/%X names too many mapped tables to decode",
						LSN_FORMAT_ARGS(change->lsn)),
				 errdetail("%d mapped tables are truncated; a kafgres frame can list at most %d.",
						   nmapped, PG_UINT16_MAX)));

	ensure_begin_written(ctx, txn);

	out = begin_frame(ctx, txn, FRAME_TRUNCATE);
	pq_sendint64(out, change->lsn);
	pq_sendint16(out, (uint16) nmapped);
	for (i = 0; i < nrelations; i++)
	{
		Relation	relation = relations[i];

		if (mappings[i]->nmappings == 0)
			continue;
		pq_sendint32(out, RelationGetRelid(relation));
		send_relation_name(out, relation);
		send_mapping_ids(out, mappings[i], change->lsn);
	}
	end_frame(ctx);

	MemoryContextReset(data->context);
}

/*
 * The mappings a change of relation matches, as of the current historic
 * snapshot: those on the relation itself and, for a partition, those on
 * each of its ancestors, since a mapping on a partitioned table covers
 * every partition below it (changes arrive for the leaf that holds the
 * row).  Answers are cached for the rest of the transaction, so that a
 * transaction changing many rows of one table costs one lookup, not one
 * per row.  The result lives in txn_context.
 */
static RelMappingsEntry *
relation_mappings(KafgresDecodingData *data, Relation relation)
{
	static RelMappingsEntry no_mappings = {InvalidOid, 0, NULL};
	Oid			relid = RelationGetRelid(relation);
	RelMappingsEntry *entry;
	bool		found;
	List	   *sources;
	ListCell   *lc;
	Relation	mapping;
	int64	   *ids = NULL;
	int			nids = 0;
	int			capacity = 0;
	MemoryContext old;

	if (!data->mapping_looked_up)
		lookup_mapping_table(data);

	/* no kafgres.mapping: the extension is not installed, newer or dropped */
	if (!OidIsValid(data->mapping_relid))
		return &no_mappings;

	if (data->rel_mappings == NULL)
	{
		HASHCTL		hash_ctl;

		hash_ctl.keysize = sizeof(Oid);
		hash_ctl.entrysize = sizeof(RelMappingsEntry);
		hash_ctl.hcxt = data->txn_context;
		data->rel_mappings = hash_create("kafgres relation mappings", 32,
										 &hash_ctl,
										 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		hash_ctl.keysize = sizeof(Oid);
		hash_ctl.entrysize = sizeof(Oid);
		hash_ctl.hcxt = data->txn_context;
		data->watched_rels = hash_create("kafgres watched relations", 32,
										 &hash_ctl,
										 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	entry = hash_search(data->rel_mappings, &relid, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	/*
	 * Work in the per-change context (reset by our callers); only the
	 * result is kept, in txn_context.  The entry is made last, so that a
	 * failed lookup leaves none behind.
	 */
	old = MemoryContextSwitchTo(data->context);

	sources = list_make1_oid(relid);
	if (relation->rd_rel->relispartition)
		sources = list_concat(sources, get_partition_ancestors(relid));

	/*
	 * The locks first: taking them makes us accept pending invalidations,
	 * and holding them keeps the table from being dropped, and its index
	 * from being rebuilt, between the check and the scans.  A REINDEX in
	 * progress is waited for here, before the check, not in the scan, where
	 * its commit would leave us reading the emptied old index file.  They
	 * are released at once, as a table_close would, so that decoding a long
	 * transaction does not hold up DDL on kafgres.mapping.
	 */
	LockRelationOid(data->mapping_relid, AccessShareLock);
	if (OidIsValid(data->mapping_index))
		LockRelationOid(data->mapping_index, AccessShareLock);
	if (!check_mapping_storage(data))
	{
		/*
		 * The table we see as of this change has been dropped since (DROP
		 * EXTENSION kafgres, with the slot kept): its rows, the mapping
		 * definitions, are gone with it, and so is anything they could be
		 * rendered with.  Nothing is mapped.
		 */
		unlock_mapping_storage(data);
		MemoryContextSwitchTo(old);
		data->mapping_relid = InvalidOid;
		return &no_mappings;
	}
	mapping = table_open(data->mapping_relid, NoLock);
	foreach(lc, sources)
		collect_mapping_ids(data, mapping, lfirst_oid(lc), &ids, &nids,
							&capacity);
	table_close(mapping, NoLock);
	unlock_mapping_storage(data);

	/* ascending, as docs/producing.md promises; ids are unique */
	if (nids > 1)
		qsort(ids, nids, sizeof(int64), compare_int64);

	MemoryContextSwitchTo(old);

	foreach(lc, sources)
	{
		Oid			source = lfirst_oid(lc);

		(void) hash_search(data->watched_rels, &source, HASH_ENTER, NULL);
	}

	entry = hash_search(data->rel_mappings, &relid, HASH_ENTER, &found);
	Assert(!found);
	entry->nmappings = nids;
	entry->mapping_ids = NULL;
	if (nids > 0)
	{
		entry->mapping_ids = MemoryContextAlloc(data->txn_context,
												sizeof(int64) * nids);
		memcpy(entry->mapping_ids, ids, sizeof(int64) * nids);
	}
	return entry;
}

/*
 * Find kafgres.mapping, its source_relid and mapping_id columns and the
 * index on source_relid, under the historic snapshot.  Any of them missing
 * is not an error: a slot can be created before CREATE EXTENSION kafgres,
 * and then there is nothing mapped until the extension exists.
 */
static void
lookup_mapping_table(KafgresDecodingData *data)
{
	Oid			nspid;
	Oid			relid;

	data->mapping_looked_up = true;
	data->mapping_nspid = InvalidOid;
	data->mapping_relid = InvalidOid;
	data->mapping_index = InvalidOid;
	data->mapping_attnum = InvalidAttrNumber;
	data->mapping_id_attnum = InvalidAttrNumber;

	nspid = get_namespace_oid("kafgres", true);
	if (!OidIsValid(nspid))
		return;

	relid = get_relname_relid("mapping", nspid);
	if (!OidIsValid(relid))
		return;

	data->mapping_attnum = get_attnum(relid, "source_relid");
	data->mapping_id_attnum = get_attnum(relid, "mapping_id");
	if (data->mapping_attnum == InvalidAttrNumber ||
		get_atttype(relid, data->mapping_attnum) != OIDOID ||
		data->mapping_id_attnum == InvalidAttrNumber ||
		get_atttype(relid, data->mapping_id_attnum) != INT8OID)
	{
		/* not a kafgres.mapping we know how to read */
		return;
	}

	data->mapping_nspid = nspid;
	data->mapping_relid = relid;

	/* without the index we fall back to a sequential scan: slower, correct */
	data->mapping_index = get_relname_relid("mapping_source_relid_idx", nspid);
}

/*
 * Can the kafgres.mapping of the historic snapshot still be read?  Logical
 * decoding reads a user catalog table through today's pg_class row for it
 * (its files move with VACUUM FULL), so once the table has been dropped --
 * DROP EXTENSION kafgres with the slot kept -- opening it fails with
 * "could not find pg_class entry", and would for every transaction before
 * the drop still in the slot.  Its index is read through the historic
 * pg_class row, whose files are gone after a REINDEX or VACUUM FULL; then
 * we scan without it.
 *
 * Checking today's catalog takes a lookup in pg_class, so a positive answer
 * is kept until a relcache invalidation of either relation.  The caller
 * holds a lock on the table, so that invalidations up to now have been
 * accepted and the answer stays true while it reads.
 */
static bool
check_mapping_storage(KafgresDecodingData *data)
{
	Oid			relid = data->mapping_relid;
	Oid			index = data->mapping_index;
	Oid			nspid = data->mapping_nspid;
	bool		usable = false;

	if (data->storage_checked_relid == relid &&
		data->storage_checked_index == index)
		return true;

	/*
	 * Claim the answer before looking, so that an invalidation arriving
	 * while we look (a REINDEX committing) withdraws it: this lookup then
	 * reads without the index, and the next one checks again.
	 */
	data->storage_checked_relid = relid;
	data->storage_checked_index = index;
	data->storage_index_usable = false;

	if (!relation_exists_today(relid, nspid, "mapping", InvalidOid))
	{
		data->storage_checked_relid = InvalidOid;
		data->storage_checked_index = InvalidOid;
		return false;
	}

	if (OidIsValid(index))
	{
		HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(index));

		/* the relfilenode as of the historic snapshot */
		if (HeapTupleIsValid(tuple))
		{
			Oid			relfilenode = ((Form_pg_class) GETSTRUCT(tuple))->relfilenode;

			ReleaseSysCache(tuple);
			usable = OidIsValid(relfilenode) &&
				relation_exists_today(index, nspid, "mapping_source_relid_idx",
									  relfilenode);
		}
	}

	if (data->storage_checked_relid == relid &&
		data->storage_checked_index == index)
		data->storage_index_usable = usable;
	return true;
}

/* release the locks relation_mappings takes */
static void
unlock_mapping_storage(KafgresDecodingData *data)
{
	if (OidIsValid(data->mapping_index))
		UnlockRelationOid(data->mapping_index, AccessShareLock);
	UnlockRelationOid(data->mapping_relid, AccessShareLock);
}

/*
 * Does today's catalog -- not the historic snapshot -- have relation relid
 * in namespace nspid with name relname (and, if valid, that relfilenode)?
 * The name is compared too, in case the OID has been reused.
 */
static bool
relation_exists_today(Oid relid, Oid nspid, const char *relname,
					  Oid relfilenode)
{
	Relation	pg_class;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	bool		exists = false;

	pg_class = table_open(RelationRelationId, AccessShareLock);
	ScanKeyInit(&key,
				Anum_pg_class_oid,
				BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(pg_class, ClassOidIndexId, true,
							  GetNonHistoricCatalogSnapshot(RelationRelationId),
							  1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);

		exists = form->relnamespace == nspid &&
			strcmp(NameStr(form->relname), relname) == 0 &&
			(!OidIsValid(relfilenode) || form->relfilenode == relfilenode);
	}
	systable_endscan(scan);
	table_close(pg_class, AccessShareLock);

	return exists;
}

/*
 * Append to ids the mapping_id of every kafgres.mapping row for
 * source_relid.  Read with the systable scan API, as the logical decoding
 * documentation requires for user catalog tables; the snapshot is the
 * historic one logical decoding has set up.
 */
static void
collect_mapping_ids(KafgresDecodingData *data, Relation mapping,
					Oid source_relid, int64 **ids, int *nids, int *capacity)
{
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	ScanKeyInit(&key,
				data->mapping_attnum,
				BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(source_relid));

	scan = systable_beginscan(mapping, data->mapping_index,
							  OidIsValid(data->mapping_index) &&
							  data->storage_index_usable,
							  NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		id = heap_getattr(tuple, data->mapping_id_attnum,
									  RelationGetDescr(mapping), &isnull);

		/* the primary key: never NULL */
		if (isnull)
			continue;
		if (*nids == *capacity)
		{
			*capacity = *capacity == 0 ? 4 : *capacity * 2;
			*ids = *ids == NULL ?
				palloc(sizeof(int64) * *capacity) :
				repalloc(*ids, sizeof(int64) * *capacity);
		}
		(*ids)[(*nids)++] = DatumGetInt64(id);
	}
	systable_endscan(scan);
}

static int
compare_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * The ids of the mappings a change matched: uint16 count, then each as
 * int64, ascending.
 */
static void
send_mapping_ids(StringInfo out, RelMappingsEntry *entry, XLogRecPtr lsn)
{
	int			i;

	if (entry->nmappings > PG_UINT16_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("change at %X/%X matches too many kafgres mappings to decode",
						LSN_FORMAT_ARGS(lsn)),
				 errdetail("%d mappings match it; a kafgres frame can list at most %d.",
						   entry->nmappings, PG_UINT16_MAX),
				 errhint("Remove mappings of the table or of the partitioned tables above it.")));

	pq_sendint16(out, (uint16) entry->nmappings);
	for (i = 0; i < entry->nmappings; i++)
		pq_sendint64(out, entry->mapping_ids[i]);
}

/*
 * Account for a change we did not send, reporting progress now and then so
 * that a long stretch of unmapped changes does not look like a dead
 * walsender to the receiving side.
 */
/*
 * Drop the changes of the table engine's log writer before they are
 * queued: the log rows are never mapped, and decoding them (their TOAST
 * reassembled) would cost the walsender as much as the produce itself.
 * Changes of other origins (a subscription applying into mapped tables)
 * are decoded as always.
 */
static bool
kafgres_filter_origin(LogicalDecodingContext *ctx, RepOriginId origin_id)
{
	KafgresDecodingData *data = ctx->output_plugin_private;

	return origin_id != InvalidRepOriginId &&
		bms_is_member(origin_id, data->log_origins);
}

/*
 * A change to one of the table engine's tables (kafgres.log_batch_*) made
 * under a replication origin tells us that origin is the log writer's.
 */
static void
learn_log_origin(KafgresDecodingData *data, ReorderBufferTXN *txn,
				 Relation relation)
{
	MemoryContext old;
	char	   *nspname;

	if (txn->origin_id == InvalidRepOriginId ||
		bms_is_member(txn->origin_id, data->log_origins) ||
		strncmp(RelationGetRelationName(relation), "log_batch_", 10) != 0)
		return;
	nspname = get_namespace_name(RelationGetNamespace(relation));
	if (nspname == NULL || strcmp(nspname, "kafgres") != 0)
		return;
	/* in the decoding context's memory, not the per-change context */
	old = MemoryContextSwitchTo(data->origins_context);
	data->log_origins = bms_add_member(data->log_origins, txn->origin_id);
	MemoryContextSwitchTo(old);
}

static void
skipped_change(LogicalDecodingContext *ctx)
{
	KafgresDecodingData *data = ctx->output_plugin_private;

	if (++data->skipped_changes >= SKIPPED_CHANGES_THRESHOLD)
	{
		/* what we gathered goes first, as it would have unbatched */
		write_frames(ctx);
		OutputPluginUpdateProgress(ctx, false);
		data->skipped_changes = 0;
	}
}

/*
 * Start a frame in the batch: its length (filled in by end_frame) and the
 * common header.  The caller appends the kind's fields to the StringInfo
 * returned and calls end_frame.
 */
static StringInfo
begin_frame(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, char kind)
{
	KafgresDecodingData *data = ctx->output_plugin_private;
	StringInfo	out = data->batch;

	data->frame_start = out->len;
	pq_sendint32(out, 0);
	pq_sendbyte(out, KAFGRES_FRAME_VERSION);
	pq_sendbyte(out, (uint8) kind);
	pq_sendint64(out, txn->end_lsn);
	pq_sendint32(out, txn->xid);

	/* anything sent counts as a sign of life, and this will be */
	data->skipped_changes = 0;
	return out;
}

/* End the frame begin_frame started; write the batch once it is large. */
static void
end_frame(LogicalDecodingContext *ctx)
{
	KafgresDecodingData *data = ctx->output_plugin_private;
	StringInfo	out = data->batch;
	Size		len = out->len - data->frame_start - sizeof(uint32);
	uint32		nlen;

	/* a StringInfo holds at most MaxAllocSize bytes, below 4 GB */
	Assert(len <= PG_UINT32_MAX);
	nlen = pg_hton32((uint32) len);
	memcpy(out->data + data->frame_start, &nlen, sizeof(nlen));

	if (out->len >= KAFGRES_BATCH_BYTES)
		write_frames(ctx);
}

/* Write the frames gathered so far, if any, as one message. */
static void
write_frames(LogicalDecodingContext *ctx)
{
	KafgresDecodingData *data = ctx->output_plugin_private;
	StringInfo	batch = data->batch;

	if (batch->len == 0)
		return;

	OutputPluginPrepareWrite(ctx, true);
	appendBinaryStringInfo(ctx->out, batch->data, batch->len);
	OutputPluginWrite(ctx, true);

	if (batch->maxlen > KAFGRES_BATCH_KEEP)
	{
		MemoryContext old = MemoryContextSwitchTo(ctx->context);

		pfree(batch->data);
		initStringInfo(batch);
		MemoryContextSwitchTo(old);
	}
	else
		resetStringInfo(batch);
}

/* Write the transaction's B frame, unless it has been written already. */
static void
ensure_begin_written(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	KafgresDecodingData *data = ctx->output_plugin_private;
	StringInfo	out;

	if (data->begin_written)
		return;

	out = begin_frame(ctx, txn, FRAME_BEGIN);
	pq_sendint64(out, txn->final_lsn);
	pq_sendint64(out, txn->xact_time.commit_time);
	end_frame(ctx);

	data->begin_written = true;
}

/* string16: uint16 length, then the bytes (no terminator) */
static void
send_string16(StringInfo out, const char *str)
{
	size_t		len = strlen(str);

	/* identifiers are at most NAMEDATALEN bytes; this is a can't-happen */
	if (len > PG_UINT16_MAX)
		elog(ERROR, "string of %zu bytes does not fit a kafgres frame", len);

	pq_sendint16(out, (uint16) len);
	pq_sendbytes(out, str, (int) len);
}

/* schema and table name of a relation, as two string16 */
static void
send_relation_name(StringInfo out, Relation relation)
{
	char	   *nspname = get_namespace_name(RelationGetNamespace(relation));

	if (nspname == NULL)
		elog(ERROR, "cache lookup failed for namespace %u",
			 RelationGetNamespace(relation));

	send_string16(out, nspname);
	send_string16(out, RelationGetRelationName(relation));
}

/*
 * A tuple: uint16 column count, then per column name, type OID, kind and,
 * for kind 't', the value's text output.  Dropped columns are left out.
 * With only_attrs set (an old tuple carrying the replica identity key) only
 * those columns are sent; its members are offset by
 * FirstLowInvalidHeapAttributeNumber, as the relcache returns them.
 */
static void
send_tuple(StringInfo out, TupleDesc tupdesc, HeapTuple tuple,
		   Bitmapset *only_attrs)
{
	int			ncolumns = 0;
	int			natt;

	for (natt = 0; natt < tupdesc->natts; natt++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, natt);

		if (attr->attisdropped)
			continue;
		if (only_attrs != NULL &&
			!bms_is_member(attr->attnum - FirstLowInvalidHeapAttributeNumber,
						   only_attrs))
			continue;
		ncolumns++;
	}

	/* MaxTupleAttributeNumber is 1664, far below 65535 */
	pq_sendint16(out, (uint16) ncolumns);

	for (natt = 0; natt < tupdesc->natts; natt++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, natt);
		Oid			typid = attr->atttypid;
		Oid			typoutput;
		bool		typisvarlena;
		Datum		origval;
		bool		isnull;

		if (attr->attisdropped)
			continue;
		if (only_attrs != NULL &&
			!bms_is_member(attr->attnum - FirstLowInvalidHeapAttributeNumber,
						   only_attrs))
			continue;

		send_string16(out, NameStr(attr->attname));
		pq_sendint32(out, typid);

		origval = heap_getattr(tuple, attr->attnum, tupdesc, &isnull);
		getTypeOutputInfo(typid, &typoutput, &typisvarlena);

		if (isnull)
			pq_sendbyte(out, COLUMN_NULL);
		else if (typisvarlena && VARATT_IS_EXTERNAL_ONDISK(origval))
		{
			/*
			 * A TOASTed value the update did not touch: the WAL has only the
			 * pointer, and the TOAST table cannot be read as of this change.
			 * The decoder must keep the column's previous value.
			 */
			pq_sendbyte(out, COLUMN_UNCHANGED_TOAST);
		}
		else
		{
			char	   *str = OidOutputFunctionCall(typoutput, origval);
			size_t		len = strlen(str);

			pq_sendbyte(out, COLUMN_TEXT);
			pq_sendint32(out, (uint32) len);
			pq_sendbytes(out, str, (int) len);
		}
	}
}
