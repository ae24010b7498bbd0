--
-- acl: Kafka ACLs in SQL (docs/security.md, "Authorization"): the table's
-- checks, kafgres_acl_grant/revoke/acls, the decision function, and the
-- SQL paths held to it: kafgres_produce needs WRITE on the topic for
-- User:<current_user>, a mapping's owner WRITE on its topic.
--
SET search_path = regress, public;
\set SHOW_CONTEXT never
CREATE ROLE regress_acl_app;
CREATE ROLE regress_acl_author;
GRANT EXECUTE ON FUNCTION kafgres_produce(text, text, text, jsonb, int) TO regress_acl_app;
GRANT USAGE ON SCHEMA kafgres TO regress_acl_author;
GRANT SELECT, INSERT, DELETE ON kafgres.mapping TO regress_acl_author;
GRANT EXECUTE ON FUNCTION kafgres_add_mapping(text, regclass, text, text, text, text, text), kafgres_remove_mapping(text), kafgres.mapping_topic(text) TO regress_acl_author;
CREATE SCHEMA acl_s;
GRANT USAGE ON SCHEMA acl_s TO regress_acl_author;
CREATE TABLE acl_s.src (id int PRIMARY KEY);
GRANT SELECT ON acl_s.src TO regress_acl_author;
SELECT kafgres_create_topic('acl-orders', 1) > 0 AS created;
SELECT kafgres_create_topic('acl-other', 1) > 0 AS created;

-- granting: names in any case, defaults LITERAL, ALLOW, host *
SELECT kafgres_acl_grant('User:regress_acl_app', 'write', 'topic', 'acl-orders');
SELECT kafgres_acl_grant('User:regress_acl_app', 'WRITE', 'TOPIC', 'acl-orders');
SELECT kafgres_acl_grant('User:regress_acl_author', 'Write', 'Topic', 'acl-', 'prefixed');
SELECT kafgres_acl_grant('User:regress_acl_author', 'write', 'topic', 'acl-other', 'literal', 'deny');
SELECT kafgres_acl_grant('User:*', 'describe', 'group', '*');
SELECT kafgres_acl_grant('User:ops', 'alter', 'cluster', 'kafka-cluster', host => '10.0.0.1');
SELECT * FROM kafgres_acls();
SELECT * FROM kafgres_acls(principal => 'User:regress_acl_app');

-- refusals a user understands
SELECT kafgres_acl_grant('regress_acl_app', 'write', 'topic', 'x');
SELECT kafgres_acl_grant('User:a', 'fly', 'topic', 'x');
SELECT kafgres_acl_grant('User:a', 'read', 'table', 'x');
SELECT kafgres_acl_grant('User:a', 'read', 'topic', 'x', 'match');
SELECT kafgres_acl_grant('User:a', 'read', 'topic', 'x', permission => 'maybe');
SELECT kafgres_acl_grant('User:a', 'read', 'topic', '');
SELECT kafgres_acl_grant('User:a', 'alter', 'cluster', 'mine');
INSERT INTO kafgres.acl VALUES ('TOPIC', 'x', 'MATCH', 'User:a', '*', 'READ', 'ALLOW');
INSERT INTO kafgres.acl VALUES ('CLUSTER', 'x', 'LITERAL', 'User:a', '*', 'ALTER', 'ALLOW');

-- the decision, as Kafka's StandardAuthorizer
SELECT kafgres.acl_authorize('User:regress_acl_app', '1.2.3.4', 'WRITE', 'TOPIC', 'acl-orders') AS write_literal,
       kafgres.acl_authorize('User:regress_acl_app', '1.2.3.4', 'DESCRIBE', 'TOPIC', 'acl-orders') AS describe_implied,
       kafgres.acl_authorize('User:regress_acl_app', '1.2.3.4', 'READ', 'TOPIC', 'acl-orders') AS read_not,
       kafgres.acl_authorize('User:regress_acl_author', '1.2.3.4', 'WRITE', 'TOPIC', 'acl-x') AS prefixed,
       kafgres.acl_authorize('User:regress_acl_author', '1.2.3.4', 'WRITE', 'TOPIC', 'acl-other') AS deny_wins,
       kafgres.acl_authorize('User:bob', '1.2.3.4', 'DESCRIBE', 'GROUP', 'g') AS wildcard,
       kafgres.acl_authorize('User:ops', '10.0.0.1', 'ALTER', 'CLUSTER', 'kafka-cluster') AS host_match,
       kafgres.acl_authorize('User:ops', '10.0.0.2', 'ALTER', 'CLUSTER', 'kafka-cluster') AS host_other,
       kafgres.acl_authorize('User:bob', '1.2.3.4', 'READ', 'TOPIC', 'no-acl') AS no_acl_default_deny,
       kafgres.acl_authorize('User:postgres', '', 'READ', 'TOPIC', 'no-acl') AS pg_superuser;

-- with the authorizer off (the default, auto, with no authenticating
-- listener) the SQL paths are not checked
SHOW kafgres.authorizer;
SELECT kafgres.acl_enabled();
SET ROLE regress_acl_app;
SELECT kafgres_produce('acl-other', 'k', 'off') IS NOT NULL AS produced;
RESET ROLE;

ALTER SYSTEM SET kafgres.authorizer = on;
SELECT pg_reload_conf();
SELECT pg_sleep(0.2);
SELECT kafgres.acl_enabled();

-- kafgres_produce: WRITE on the topic for User:<current_user>
SET ROLE regress_acl_app;
SELECT kafgres_produce('acl-orders', 'k', 'allowed') IS NOT NULL AS produced;
SELECT kafgres_produce('acl-other', 'k', 'refused');
BEGIN;
SELECT kafgres_produce('acl-orders', 'k', 'in txn') IS NOT NULL AS produced;
SAVEPOINT s;
SELECT kafgres_produce('acl-other', 'k', 'refused in txn');
ROLLBACK TO s;
COMMIT;
RESET ROLE;
-- superusers are super users
SELECT kafgres_produce('acl-other', 'k', 'superuser') IS NOT NULL AS produced;
-- a change applies at once (a new snapshot sees it)
SELECT kafgres_acl_grant('User:regress_acl_app', 'write', 'topic', 'acl-other');
SET ROLE regress_acl_app;
SELECT kafgres_produce('acl-other', 'k', 'granted') IS NOT NULL AS produced;
RESET ROLE;
SELECT kafgres_acl_revoke('User:regress_acl_app', 'write', 'topic', 'acl-other');
SET ROLE regress_acl_app;
SELECT kafgres_produce('acl-other', 'k', 'revoked');
RESET ROLE;

-- mappings: the owner needs WRITE on the target topic
SET ROLE regress_acl_author;
SELECT kafgres_add_mapping('acl_m1', 'acl_s.src', 'acl-orders') > 0 AS added;
SELECT kafgres_add_mapping('acl_m2', 'acl_s.src', 'acl-other');
INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path)
VALUES ('acl_m3', 'acl_s.src'::regclass, 'acl-other', 0, 'public');
RESET ROLE;

-- kafgres.super_users
ALTER SYSTEM SET kafgres.super_users = 'User:nobody; User:regress_acl_app';
SELECT pg_reload_conf();
SELECT pg_sleep(0.2);
SET ROLE regress_acl_app;
SELECT kafgres_produce('acl-other', 'k', 'super user') IS NOT NULL AS produced;
RESET ROLE;

-- revoke with nulls as wildcards; the functions are not for PUBLIC
SELECT kafgres_acl_revoke(NULL, NULL, 'topic', NULL, NULL, NULL, NULL);
SELECT * FROM kafgres_acls();
SET ROLE regress_acl_app;
SELECT kafgres_acl_grant('User:regress_acl_app', 'all', 'topic', '*');
SELECT * FROM kafgres_acls();
RESET ROLE;

ALTER SYSTEM RESET kafgres.authorizer;
ALTER SYSTEM RESET kafgres.super_users;
SELECT pg_reload_conf();
SELECT pg_sleep(0.2);
SELECT kafgres_remove_mapping('acl_m1');
SELECT kafgres_acl_revoke(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT * FROM decode();
DROP SCHEMA acl_s CASCADE;
REVOKE ALL ON FUNCTION kafgres_produce(text, text, text, jsonb, int) FROM regress_acl_app;
REVOKE ALL ON SCHEMA kafgres FROM regress_acl_author;
REVOKE ALL ON kafgres.mapping FROM regress_acl_author;
REVOKE ALL ON FUNCTION kafgres_add_mapping(text, regclass, text, text, text, text, text), kafgres_remove_mapping(text), kafgres.mapping_topic(text) FROM regress_acl_author;
DROP ROLE regress_acl_app;
DROP ROLE regress_acl_author;
