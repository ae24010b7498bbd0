--
-- produce: what kafgres_produce writes, as the output plugin sends it.
-- Its records exist if and only if their transaction commits; the M frame
-- carries the record (format 1) at the LSN kafgres_produce returned.
--
SET search_path = regress, public;
\set SHOW_CONTEXT never
SELECT kafgres_create_topic('t1', 1) > 0 AS created;
SELECT kafgres_create_topic('t3', 3) > 0 AS created;

-- committed, rolled back, a rolled-back savepoint, prepared
SELECT kafgres_produce('t1', 'committed', 'v') IS NOT NULL AS produced;
BEGIN;
SELECT kafgres_produce('t1', 'rolledback', 'v') IS NOT NULL AS produced;
ROLLBACK;
BEGIN;
SELECT kafgres_produce('t1', 'kept', 'v') IS NOT NULL AS produced;
SAVEPOINT s;
SELECT kafgres_produce('t1', 'rolledback', 'v') IS NOT NULL AS produced;
ROLLBACK TO s;
SELECT kafgres_produce('t1', 'kept after the savepoint', 'v') IS NOT NULL AS produced;
COMMIT;
BEGIN;
SELECT kafgres_produce('t1', 'prepared', 'v') IS NOT NULL AS produced;
PREPARE TRANSACTION 'regress_p1';
BEGIN;
SELECT kafgres_produce('t1', 'rolledback prepared', 'v') IS NOT NULL AS produced;
PREPARE TRANSACTION 'regress_p2';
-- a prepared transaction is decoded at COMMIT PREPARED, not before
SELECT * FROM decode();
COMMIT PREPARED 'regress_p1';
ROLLBACK PREPARED 'regress_p2';
SELECT * FROM decode();

-- the LSN kafgres_produce returns is its M frame's
SELECT kafgres_produce('t1', 'lsn', 'v') AS produced_lsn \gset
CREATE TEMP TABLE f AS SELECT n, frame FROM frames();
SELECT count(*) AS m_frames,
       bool_and((header(frame)).lsn = :'produced_lsn') AS lsn_matches
  FROM f WHERE (header(frame)).kind = 'M';
-- and it lies before the commit, and the commit before the frames'
-- commit_end_lsn, which the WAL has passed
SELECT bool_and((header(frame)).commit_end_lsn > :'produced_lsn'
                AND (header(frame)).commit_end_lsn <= pg_current_wal_lsn()) AS positions_ok
  FROM f;
DROP TABLE f;

-- what a record holds: keys, values, partitions and headers in all three
-- forms; jsonb headers come in jsonb's key order (shorter keys first), a
-- JSON null is a NULL header value, other JSON values their text
SELECT kafgres_produce('t3', 'order-1001', 'murmur', '{"h2": "v2", "h1": "v1", "n": null, "num": 5, "obj": {"a": [1, "x"]}}') IS NOT NULL AS produced;
SELECT kafgres_produce('t3', '\x00ff'::bytea, '\xdeadbeef'::bytea, ARRAY['a', 'b', 'a'], ARRAY['\x01'::bytea, NULL, 'dup']) IS NOT NULL AS produced;
SELECT kafgres_produce('t3', 'k', 'explicit', partition => 2) IS NOT NULL AS produced;
SELECT kafgres_produce('t3', NULL::text, NULL::text, partition => 0) IS NOT NULL AS produced;
SELECT kafgres_produce('t3', ''::text, ''::text, '{}'::jsonb) IS NOT NULL AS produced;
SELECT kafgres_produce('t3', NULL::bytea, 'no headers'::bytea, '{}'::text[], '{}'::bytea[]) IS NOT NULL AS produced;
-- text is sent as UTF-8
SELECT kafgres_produce('t3', 'schlüssel', 'wert €', '{"ä": "ö"}') IS NOT NULL AS produced;
-- the largest value a record without key and headers may have:
-- kafgres.max_message_bytes (1048588) less 72 bytes of batch and record
-- framing (produce_errors has one byte more)
SELECT kafgres_produce('t1', NULL, repeat('v', 1048588 - 72)) IS NOT NULL AS produced;
SELECT * FROM decode();

-- a topic that does not exist yet is created by the broker on delivery
-- (kafgres.auto_create_topics is on), not here
SELECT kafgres_produce('not-yet', 'k', 'v', partition => 0) IS NOT NULL AS produced;
SELECT count(*) FROM kafgres.topic WHERE name = 'not-yet';
SELECT * FROM decode();

-- records and their transaction: order within it is the order of the
-- calls, a transaction's frames come at its commit, in commit order
BEGIN;
SELECT kafgres_produce('t1', 'first', '1') IS NOT NULL AS produced;
SELECT kafgres_produce('t1', 'second', '2') IS NOT NULL AS produced;
SAVEPOINT a;
SELECT kafgres_produce('t1', 'third, in a savepoint', '3') IS NOT NULL AS produced;
RELEASE a;
COMMIT;
SELECT * FROM decode();

-- many records in one transaction go out in several writes of the plugin
-- (it writes once its frames reach 64 kB), still one B and one C
BEGIN;
SELECT count(kafgres_produce('t1', 'k' || g, repeat('v', 1000))) FROM generate_series(1, 200) g;
COMMIT;
CREATE TEMP TABLE f AS SELECT n, msg, frame FROM frames();
SELECT count(*) AS frames, count(DISTINCT msg) > 1 AS several_writes,
       string_agg(DISTINCT (header(frame)).kind, '' ORDER BY (header(frame)).kind) AS kinds,
       frames_ok(array_agg(frame ORDER BY n))
  FROM f;
SELECT bool_and(describe(frame) = format('M topic=t1 partition=-1 key=%L value=<1000 bytes>', 'k' || (n - 1)))
  FROM f WHERE (header(frame)).kind = 'M';
DROP TABLE f;

-- kafgres_wait_delivered: with no broker, nothing is ever delivered, so it
-- times out -- after its timeout, not before
SELECT clock_timestamp() AS t0 \gset
SELECT kafgres_wait_delivered('FFFFFFFF/FFFFFFF0', '200 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '190 ms' AS waited;
SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '0');
-- once kafgres.delivery (the broker's progress) has passed the position
-- and the WAL insert position, it returns true at once
UPDATE kafgres.delivery SET applied_lsn = 'FFFFFFFF/FFFFFFFF';
SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '10 s');
SELECT kafgres_wait_delivered('0/0');
UPDATE kafgres.delivery SET applied_lsn = '0/0';
-- its errors
SELECT kafgres_wait_delivered(NULL);
BEGIN;
SELECT kafgres_produce('t1', 'k', 'v') IS NOT NULL AS produced;
SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '1 s');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '1 s');
ROLLBACK;

SELECT * FROM decode();
SELECT kafgres_drop_topic('t1'), kafgres_drop_topic('t3');
