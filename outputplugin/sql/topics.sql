--
-- topics: kafgres_create_topic, kafgres_drop_topic, kafgres_partition_offsets,
-- kafgres_create_partitions and what they leave in the catalog.
--
\set SHOW_CONTEXT never
SELECT kafgres_create_topic('orders', 3) > 0 AS created;
SELECT name, partitions, log_end_offset FROM kafgres.topics ORDER BY name;
SELECT * FROM kafgres_partition_offsets('orders');
-- the default partition count is kafgres.default_partitions (1)
SELECT kafgres_create_topic('a.b_c-D9') > 0 AS created;
SELECT name, partitions FROM kafgres.topic ORDER BY name;
-- a name of 249 characters is the longest there is
SELECT kafgres_create_topic(repeat('x', 249), 1) > 0 AS created;

-- bad arguments
SELECT kafgres_create_topic(NULL, 1);
SELECT kafgres_create_topic('', 1);
SELECT kafgres_create_topic('.', 1);
SELECT kafgres_create_topic('..', 1);
SELECT kafgres_create_topic(repeat('y', 250), 1);
SELECT kafgres_create_topic('white space', 1);
SELECT kafgres_create_topic('ünïcode', 1);
SELECT kafgres_create_topic('zero', 0);
SELECT kafgres_create_topic('many', 10001);
-- the rule itself, shared with kafgres_produce and kafgres_add_mapping:
-- NULL for a good name, else the first problem in Kafka's order
SELECT left(n, 12) AS name, length(n), kafgres.topic_name_problem(n) AS problem
  FROM unnest(ARRAY['orders', '...', '', '.', '..', repeat('y', 250), 'white space', 'ünïcode',
                    repeat(' ', 250)]) AS n;
SELECT kafgres.topic_name_problem(NULL) IS NULL AS strict;
SELECT kafgres_create_topic('orders', 1);
SELECT kafgres_drop_topic('nope');
SELECT * FROM kafgres_partition_offsets('nope');
SELECT kafgres_create_partitions('orders', NULL);
SELECT kafgres_create_partitions('nope', 4);
SELECT kafgres_create_partitions('orders', 2);
SELECT kafgres_create_partitions('orders', 3);
SELECT kafgres_create_partitions('orders', 10001);

-- growing a topic
SELECT kafgres_create_partitions('orders', 5);
SELECT partition, log_start_offset, high_watermark, leader_epoch
  FROM kafgres_partition_offsets('orders');
SELECT partitions FROM kafgres.topic WHERE name = 'orders';

-- dropping one takes its partitions and configs along, and leaves a record
-- that proves to the broker that the topic's log may go
INSERT INTO kafgres.topic_config (topic_id, name, value)
SELECT topic_id, 'retention.ms', '1000' FROM kafgres.topic WHERE name = 'orders';
SELECT kafgres_drop_topic('orders');
SELECT count(*) FROM kafgres.partition p
 WHERE NOT EXISTS (SELECT FROM kafgres.topic t WHERE t.topic_id = p.topic_id);
SELECT count(*) FROM kafgres.topic_config;
SELECT name FROM kafgres.dropped_topic ORDER BY name;
-- so does a plain DELETE
DELETE FROM kafgres.topic WHERE name = 'a.b_c-D9';
SELECT name FROM kafgres.dropped_topic ORDER BY name;
-- a new topic of an old name gets a new id and uuid
SELECT kafgres_create_topic('orders', 1) > 0 AS created;
SELECT count(*) AS ids, count(DISTINCT d.topic_uuid) AS uuids
  FROM kafgres.dropped_topic d JOIN kafgres.topic t USING (name)
 WHERE d.topic_id <> t.topic_id AND d.topic_uuid <> t.topic_uuid;
SELECT kafgres_drop_topic('orders');
SELECT kafgres_drop_topic(repeat('x', 249));
SELECT count(*) FROM kafgres.topic;

-- client bytes shown to people (kafgres.consumer_lag's group_id)
SELECT kafgres.client_text(convert_to('grüppe', 'UTF8')),
       kafgres.client_text('\x6d657461006461'::bytea),
       kafgres.client_text('\xff5c'::bytea);

-- Kafka's internal topics, by name
SELECT n, kafgres.topic_is_internal(n)
  FROM unnest(ARRAY['__consumer_offsets', '__transaction_state', '__share_group_state',
                    '__consumer_offsets_', '_consumer_offsets', 'orders', '']) AS n;
SELECT kafgres_create_topic('__consumer_offsets', 2) > 0 AS created;
SELECT name, partitions, internal FROM kafgres.topics WHERE name = '__consumer_offsets';
SELECT kafgres_drop_topic('__consumer_offsets');

-- segment archiving: no broker runs here, so nothing is reported; a row
-- the broker wrote is shown with its topic's name, and goes with the topic
SELECT * FROM kafgres_archive_status();
SELECT kafgres_create_topic('archived', 1) > 0 AS created;
INSERT INTO kafgres.archive_status (topic_id, partition, archived_offset, last_archived_segment, backlog_segments)
SELECT topic_id, 0, 3000, 'archived-0-00000000000000002000.log', 2 FROM kafgres.topic WHERE name = 'archived';
SELECT topic, partition, archived_offset, last_archived_segment, failed_count, backlog_segments
  FROM kafgres_archive_status();
SELECT kafgres_drop_topic('archived');
SELECT count(*) FROM kafgres.archive_status;

-- a topic's own storage engine; NULL (or the two-argument function) takes
-- kafgres.storage_engine, here segment; it never changes
SELECT kafgres_create_topic('in-table', 2, 'table') > 0 AS created;
SELECT kafgres_create_topic('in-segments', 1, storage_engine => 'segment') > 0 AS created;
SELECT kafgres_create_topic(name => 'by-default', partitions => NULL, storage_engine => NULL) > 0 AS created;
SELECT name, partitions, storage_engine FROM kafgres.topic
 WHERE name IN ('in-table', 'in-segments', 'by-default') ORDER BY name;
SELECT kafgres_create_topic('bad-engine', 1, 'memory');
SELECT kafgres_create_topic('in-table', 1, 'segment');
UPDATE kafgres.topic SET storage_engine = 'segment' WHERE name = 'in-table';
SELECT kafgres_drop_topic('in-table'), kafgres_drop_topic('in-segments'), kafgres_drop_topic('by-default');
