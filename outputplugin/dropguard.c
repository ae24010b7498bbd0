/*-------------------------------------------------------------------------
 *
 * dropguard.c
 *	  Refuse DROP EXTENSION kafgres while a change of kafgres.mapping is
 *	  still to be decoded.
 *
 * kafgres.mapping is a user catalog table, so the output plugin can read
 * it under the historic snapshot of each change.  PostgreSQL, though, opens
 * a user catalog table in logical decoding through its *current* pg_class
 * row (RelationInitPhysicalAddr looks the relfilenode up outside the
 * historic snapshot).  Once DROP EXTENSION has removed that row, decoding
 * a change of kafgres.mapping made before the drop fails with "could not
 * find pg_class entry" and the slot cannot get past it: every record after
 * it, SQL-produced or CDC, is stuck.  Nothing in the output plugin can help
 * (it never sees the change), and an event trigger of the extension cannot
 * see its own drop, so the check is a ProcessUtility hook.
 *
 * A change is still to be decoded by a slot unless the transaction that
 * made it precedes the slot's catalog_xmin: catalog_xmin is the oldest
 * transaction still running at a point the slot has confirmed, so any
 * older transaction committed (or aborted) before that point, and a slot
 * never decodes a transaction again once it has confirmed past its
 * commit.  The transactions that changed kafgres.mapping are found in the
 * table itself, dead row versions included: vacuum keeps a user catalog
 * table's rows until every slot's catalog_xmin has passed them.  That is
 * conservative (a long-running transaction elsewhere holds catalog_xmin
 * back), never unsafe.
 *
 * When a slot is behind and in use (the broker streaming), the hook logs a
 * running-transactions record, so that catalog_xmin can move at once
 * rather than at bgwriter's next one, and waits a while for the slot to
 * pass; otherwise it refuses, saying how to proceed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "replication/slot.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/standby.h"
#include "tcop/utility.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "dropguard.h"

/*
 * How long DROP EXTENSION waits for a streaming slot to catch up, how often
 * it looks, and how often it logs a running-transactions record meanwhile:
 * a slot takes up a new catalog_xmin only once it has applied the one
 * before, so one record is not always enough.
 */
#define DROPGUARD_WAIT_MS	10000
#define DROPGUARD_POLL_MS	100
#define DROPGUARD_LOG_MS	1000

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

static void dropguard_ProcessUtility(PlannedStmt *pstmt,
									 const char *queryString,
									 bool readOnlyTree,
									 ProcessUtilityContext context,
									 ParamListInfo params,
									 QueryEnvironment *queryEnv,
									 DestReceiver *dest,
									 QueryCompletion *qc);
static bool drops_kafgres(DropStmt *stmt);
static Oid	extension_schema(Oid extoid);
static void check_mapping_decoded(void);
static bool oldest_slot_horizon(TransactionId *horizon);
static TransactionId newest_mapping_change(Relation rel,
										   TransactionId horizon,
										   bool *ours);
static bool slot_behind(TransactionId xid, NameData *slot_name, bool *active);

void
kafgres_dropguard_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = dropguard_ProcessUtility;
}

static void
dropguard_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
						 bool readOnlyTree, ProcessUtilityContext context,
						 ParamListInfo params, QueryEnvironment *queryEnv,
						 DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, DropStmt) && drops_kafgres((DropStmt *) parsetree))
		check_mapping_decoded();

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * Does stmt drop the kafgres extension: DROP EXTENSION kafgres, or DROP
 * SCHEMA of the extension's schema (which, with CASCADE, takes the
 * extension along)?
 */
static bool
drops_kafgres(DropStmt *stmt)
{
	Oid			extoid;
	char	   *extschema = NULL;
	ListCell   *lc;

	if (stmt->removeType != OBJECT_EXTENSION &&
		stmt->removeType != OBJECT_SCHEMA)
		return false;
	extoid = get_extension_oid("kafgres", true);
	if (!OidIsValid(extoid))
		return false;
	if (stmt->removeType == OBJECT_SCHEMA)
		extschema = get_namespace_name(extension_schema(extoid));

	foreach(lc, stmt->objects)
	{
		Node	   *obj = (Node *) lfirst(lc);
		const char *name;

		if (!IsA(obj, String))
			continue;
		name = strVal(obj);
		if (stmt->removeType == OBJECT_EXTENSION && strcmp(name, "kafgres") == 0)
			return true;
		if (extschema != NULL && strcmp(name, extschema) == 0)
			return true;
	}
	return false;
}

/*
 * The schema of extension extoid (PostgreSQL 15 does not export its own
 * lookup).
 */
static Oid
extension_schema(Oid extoid)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			nsp = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		nsp = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

/*
 * Raise an error unless every kafgres slot of this database has decoded
 * every change of kafgres.mapping; wait a while for a slot in use.
 */
static void
check_mapping_decoded(void)
{
	Oid			nsp;
	Oid			relid;
	Relation	rel;
	TransactionId horizon;
	TransactionId newest;
	bool		ours = false;
	NameData	slot_name;
	bool		active = false;
	long		waited = 0;

	nsp = get_namespace_oid("kafgres", true);
	relid = OidIsValid(nsp) ? get_relname_relid("mapping", nsp) : InvalidOid;
	if (!OidIsValid(relid) || !oldest_slot_horizon(&horizon))
		return;

	/*
	 * Block writers of the table until the drop, which takes an exclusive
	 * lock anyway, so that no change slips in after the check.  SHARE does
	 * not conflict with the reads of the decoding we wait for.
	 */
	rel = table_open(relid, ShareLock);
	newest = newest_mapping_change(rel, horizon, &ours);
	table_close(rel, NoLock);

	/*
	 * The drop would commit together with the change: decoding the change
	 * at that commit meets the table already gone.
	 */
	if (ours)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot drop extension kafgres in the transaction that changed kafgres.mapping"),
				 errdetail("Logical decoding of the change would fail once the extension is gone, and the replication slot would stop there."),
				 errhint("Commit the mapping change first.")));
	if (!TransactionIdIsValid(newest))
		return;

	while (slot_behind(newest, &slot_name, &active))
	{
		/*
		 * catalog_xmin moves only at a running-transactions record the slot
		 * has decoded and confirmed; make one rather than wait for
		 * bgwriter's.
		 */
		if (waited % DROPGUARD_LOG_MS == 0)
			LogStandbySnapshot();
		if (!active || waited >= DROPGUARD_WAIT_MS)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot drop extension kafgres: replication slot \"%s\" has not decoded the latest change of kafgres.mapping",
							NameStr(slot_name)),
					 errdetail("Logical decoding of that change would fail once the extension is gone, and the slot would stop there."),
					 active ?
					 errhint("Retry once the broker has caught up, or drop the slot with pg_drop_replication_slot('%s') if its records are not wanted.",
							 NameStr(slot_name)) :
					 errhint("Let the broker (or whoever reads the slot) catch up and retry, or drop the slot with pg_drop_replication_slot('%s') if its records are not wanted.",
							 NameStr(slot_name))));
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 DROPGUARD_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		waited += DROPGUARD_POLL_MS;
	}
}

/*
 * The oldest catalog_xmin of the kafgres slots of this database, into
 * *horizon; false if there is no such slot.  Transactions before it are
 * decoded by every slot, and their xids may be too old to look up.
 */
static bool
oldest_slot_horizon(TransactionId *horizon)
{
	bool		found = false;
	int			i;

	*horizon = InvalidTransactionId;
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (i = 0; i < max_replication_slots; i++)
	{
		ReplicationSlot *s = &ReplicationSlotCtl->replication_slots[i];
		TransactionId catalog_xmin;
		bool		ours;

		if (!s->in_use)
			continue;
		SpinLockAcquire(&s->mutex);
		ours = s->data.database == MyDatabaseId &&
			strcmp(NameStr(s->data.plugin), "kafgres") == 0;
		catalog_xmin = s->data.catalog_xmin;
		SpinLockRelease(&s->mutex);
		if (!ours || !TransactionIdIsNormal(catalog_xmin))
			continue;
		if (!found || TransactionIdPrecedes(catalog_xmin, *horizon))
			*horizon = catalog_xmin;
		found = true;
	}
	LWLockRelease(ReplicationSlotControlLock);
	return found;
}

/*
 * The newest committed transaction not before horizon that inserted,
 * updated or deleted a row of rel, or InvalidTransactionId if there is
 * none; *ours is set if the current transaction did.
 */
static TransactionId
newest_mapping_change(Relation rel, TransactionId horizon, bool *ours)
{
	TableScanDesc scan;
	HeapTuple	tuple;
	TransactionId newest = InvalidTransactionId;

	scan = table_beginscan(rel, SnapshotAny, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		HeapTupleHeader htup = tuple->t_data;
		TransactionId xids[2] = {InvalidTransactionId, InvalidTransactionId};
		int			i;

		if (!HeapTupleHeaderXminFrozen(htup) && !HeapTupleHeaderXminInvalid(htup))
			xids[0] = HeapTupleHeaderGetRawXmin(htup);
		if (!(htup->t_infomask & HEAP_XMAX_INVALID) &&
			!HEAP_XMAX_IS_LOCKED_ONLY(htup->t_infomask))
			xids[1] = HeapTupleHeaderGetUpdateXid(htup);

		for (i = 0; i < 2; i++)
		{
			TransactionId xid = xids[i];

			if (!TransactionIdIsNormal(xid) || TransactionIdPrecedes(xid, horizon))
				continue;
			if (TransactionIdIsCurrentTransactionId(xid))
			{
				*ours = true;
				continue;
			}
			if (!TransactionIdDidCommit(xid))
				continue;
			if (!TransactionIdIsValid(newest) || TransactionIdFollows(xid, newest))
				newest = xid;
		}
	}
	table_endscan(scan);
	return newest;
}

/*
 * Is a kafgres slot of this database yet to pass xid (its catalog_xmin
 * not after xid)?  If so, *slot_name and *active tell which and whether a
 * process is streaming from it.
 */
static bool
slot_behind(TransactionId xid, NameData *slot_name, bool *active)
{
	bool		behind = false;
	int			i;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (i = 0; i < max_replication_slots && !behind; i++)
	{
		ReplicationSlot *s = &ReplicationSlotCtl->replication_slots[i];

		if (!s->in_use)
			continue;
		SpinLockAcquire(&s->mutex);
		if (s->data.database == MyDatabaseId &&
			strcmp(NameStr(s->data.plugin), "kafgres") == 0 &&
			TransactionIdIsNormal(s->data.catalog_xmin) &&
			!TransactionIdPrecedes(xid, s->data.catalog_xmin))
		{
			behind = true;
			*slot_name = s->data.name;
			*active = s->active_pid != 0;
		}
		SpinLockRelease(&s->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	return behind;
}
