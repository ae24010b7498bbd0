/*-------------------------------------------------------------------------
 *
 * auth.h
 *	  Authenticated kafgres logical messages (auth.c).
 *
 * kafgres_produce() and kafgres.snapshot_row() write their messages signed
 * with a per-cluster key; the output plugin delivers only messages whose
 * signature checks out.  A signed message is
 *
 *	  version 3 (uint8) | HMAC-SHA256 (32 bytes) | payload
 *
 * where the payload is a format-1 (kafgres_produce) or format-2 (snapshot
 * row) message of docs/producing.md, and the HMAC covers the top-level
 * transaction id, the database and the payload.  The plugin passes only
 * the payload on to the broker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFGRES_AUTH_H
#define KAFGRES_AUTH_H

#include "access/xlogdefs.h"
#include "lib/stringinfo.h"

#define KAFGRES_SIGNED_MESSAGE_VERSION	3
#define KAFGRES_MAC_LEN					32	/* HMAC-SHA256 */
#define KAFGRES_SIGNED_HEADER_LEN		(1 + KAFGRES_MAC_LEN)

/* from _PG_init, while shared_preload_libraries are being loaded */
extern void kafgres_auth_init(void);

/* ERROR unless this server has the message key (the library is preloaded) */
extern void kafgres_require_message_key(void);

/*
 * Writing: start a message with kafgres_start_signed_message(), append the
 * payload, and write it with kafgres_emit_signed_message(), which signs it
 * for the current top-level transaction and returns the message's LSN.
 */
extern void kafgres_start_signed_message(StringInfo buf);
extern XLogRecPtr kafgres_emit_signed_message(StringInfo buf,
											  const char *prefix);

/*
 * Reading, in the output plugin: the payload of an authentic message of
 * transaction xid, or NULL with *why saying what is wrong with it.
 */
extern const char *kafgres_verify_message(TransactionId xid,
										  const char *message, Size size,
										  Size *payload_size,
										  const char **why);

/*
 * Count a rejected message.  order is the position at which logical
 * decoding handled it (its transaction's end LSN, or its own LSN when it is
 * not transactional); true the first time this server counts a message at
 * (order, lsn), so that WAL decoded again after a reconnect, or by a second
 * slot, is counted and logged once.
 */
extern bool kafgres_count_rejected(XLogRecPtr order, XLogRecPtr lsn);

/* ERROR unless the current user may write snapshot rows of this mapping */
extern void kafgres_check_snapshot_writer(int64 mapping_id);

#endif							/* KAFGRES_AUTH_H */
