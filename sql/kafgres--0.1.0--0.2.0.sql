/* sql/kafgres--0.1.0--0.2.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.2.0'" to load this file. \quit

/*
 * 0.2.0: the admin APIs (issue #6) -- growing topics, dynamic broker
 * configs, client quotas and finalized feature levels.  There is no
 * separate 0.2.0 install script: CREATE EXTENSION runs kafgres--0.1.0.sql
 * and then this one, so fresh and updated installations are built by the
 * same statements.
 */

/*
 * kafgres_create_partitions(topic, partitions): grow a topic to a total of
 * "partitions" partitions, as kafka-topics.sh --alter --partitions does.
 * Kafka never shrinks a topic (keys would move between partitions), so
 * neither does this.
 */
CREATE FUNCTION kafgres_create_partitions(topic text, partitions int)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_topic_id bigint;
    v_current  int;
BEGIN
    IF partitions IS NULL THEN
        RAISE EXCEPTION 'argument "partitions" of kafgres_create_partitions must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- FOR UPDATE: two concurrent calls must not both insert partition N
    SELECT t.topic_id, t.partitions INTO v_topic_id, v_current
      FROM kafgres.topic AS t
     WHERE t.name = kafgres_create_partitions.topic
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'topic "%" does not exist', kafgres_create_partitions.topic
            USING ERRCODE = 'undefined_object';
    END IF;
    IF partitions < v_current THEN
        RAISE EXCEPTION 'topic "%" has % partitions, which is more than the requested count %',
                        kafgres_create_partitions.topic, v_current, partitions
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The number of partitions of a topic can only be increased.';
    END IF;
    IF partitions = v_current THEN
        RAISE EXCEPTION 'topic "%" already has % partitions', kafgres_create_partitions.topic, v_current
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF partitions > 10000 THEN
        RAISE EXCEPTION 'invalid number of partitions: %', partitions
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument "partitions" must be between 1 and 10000.';
    END IF;

    UPDATE kafgres.topic AS t SET partitions = kafgres_create_partitions.partitions
     WHERE t.topic_id = v_topic_id;
    INSERT INTO kafgres.partition (topic_id, partition)
    SELECT v_topic_id, p
      FROM pg_catalog.generate_series(v_current, partitions - 1) AS p;
END
$$;
COMMENT ON FUNCTION kafgres_create_partitions(text, int) IS 'grow a kafgres topic to the given number of partitions';

/*
 * kafgres.broker_config: dynamic broker configuration set through Kafka's
 * AlterConfigs / IncrementalAlterConfigs (kafka-configs.sh --entity-type
 * brokers).  node_id NULL is the cluster-wide default (--entity-default),
 * otherwise the node the value is for (always 1: kafgres is one broker).
 * The broker validates names and values before writing; see
 * docs/configuration.md.
 */
CREATE TABLE kafgres.broker_config (
    node_id int,
    name    text NOT NULL,
    value   text NOT NULL,
    UNIQUE NULLS NOT DISTINCT (node_id, name)
);
COMMENT ON TABLE kafgres.broker_config IS 'dynamic broker configuration (node_id NULL: cluster default)';
CREATE TRIGGER broker_config_notify
    AFTER INSERT OR UPDATE OR DELETE ON kafgres.broker_config
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.notify_topics();

/*
 * kafgres.client_quota: client quotas set through AlterClientQuotas
 * (kafka-configs.sh --entity-type users/clients/ips).  entity maps each
 * entity type ("user", "client-id", "ip") to a name, or to null for that
 * type's default, as the protocol does.
 */
CREATE TABLE kafgres.client_quota (
    entity jsonb  NOT NULL CHECK (pg_catalog.jsonb_typeof(entity) = 'object'),
    key    text   NOT NULL,
    value  double precision NOT NULL,
    PRIMARY KEY (entity, key)
);
COMMENT ON TABLE kafgres.client_quota IS 'client quotas by entity';

/*
 * kafgres.feature: finalized feature levels (UpdateFeatures,
 * kafka-features.sh).  A feature without a row is at the level the broker
 * finalizes by default.
 */
CREATE TABLE kafgres.feature (
    name  text     PRIMARY KEY,
    level smallint NOT NULL CHECK (level >= 0)
);
COMMENT ON TABLE kafgres.feature IS 'finalized feature levels set with UpdateFeatures';

REVOKE ALL ON FUNCTION kafgres_create_partitions(text, int) FROM PUBLIC;
REVOKE ALL ON kafgres.broker_config, kafgres.client_quota, kafgres.feature FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('kafgres.broker_config', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.client_quota', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.feature', '');
