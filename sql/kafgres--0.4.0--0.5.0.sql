/* sql/kafgres--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.5.0'" to load this file. \quit

/*
 * 0.5.0: Kafka ACLs (issue #13).  docs/security.md ("Authorization")
 * describes the behaviour these statements implement; docs/sql.md the
 * functions.
 */

/* ---------------------------------------------------------------------
 * Section: ACLs
 * --------------------------------------------------------------------- */

/*
 * kafgres.acl: one row per Kafka ACL binding, spelled with Kafka's enum
 * names (what kafka-acls.sh prints), so that the table reads as Kafka's
 * documentation does.  The CHECK constraints are the validity rules of
 * Kafka's controller (AclControlManager.validateNewAcl) and of the
 * CreateAcls handler (the CLUSTER name): a row the broker could not load
 * cannot be written.  The primary key is the whole binding: creating an
 * ACL that exists changes nothing, as in Kafka.
 *
 * Read by the broker (reloaded on NOTIFY kafgres_acls) and by
 * kafgres.acl_authorize, the SQL side's check.
 */
CREATE TABLE kafgres.acl (
    resource_type text NOT NULL
        CHECK (resource_type IN ('TOPIC', 'GROUP', 'CLUSTER', 'TRANSACTIONAL_ID',
                                 'DELEGATION_TOKEN', 'USER')),
    resource_name text NOT NULL
        CHECK (resource_name <> ''),
    pattern_type  text NOT NULL
        CHECK (pattern_type IN ('LITERAL', 'PREFIXED')),
    principal     text NOT NULL
        CHECK (pg_catalog.strpos(principal, ':') > 0),
    host          text NOT NULL,
    operation     text NOT NULL
        CHECK (operation IN ('ALL', 'READ', 'WRITE', 'CREATE', 'DELETE', 'ALTER',
                             'DESCRIBE', 'CLUSTER_ACTION', 'DESCRIBE_CONFIGS',
                             'ALTER_CONFIGS', 'IDEMPOTENT_WRITE', 'CREATE_TOKENS',
                             'DESCRIBE_TOKENS')),
    permission    text NOT NULL
        CHECK (permission IN ('ALLOW', 'DENY')),
    CONSTRAINT acl_cluster_name
        CHECK (resource_type <> 'CLUSTER' OR resource_name = 'kafka-cluster'),
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host,
                 operation, permission)
);
COMMENT ON TABLE kafgres.acl IS 'Kafka ACLs: who may do what to topics, groups, the cluster and transactional ids';
REVOKE ALL ON kafgres.acl FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('kafgres.acl', '');

/*
 * Every change, however made, tells the brokers, which swap in a new
 * authorizer within a second.
 */
CREATE FUNCTION kafgres.acl_notify() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('kafgres_acls', '');
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION kafgres.acl_notify() FROM PUBLIC;
CREATE TRIGGER acl_notify
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON kafgres.acl
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.acl_notify();

/*
 * kafgres.acl_changed(): empties the ACL decision caches of the backends
 * running kafgres_produce (a relcache invalidation of kafgres.acl, sent at
 * commit; produce.c).
 */
CREATE FUNCTION kafgres.acl_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'kafgres_acl_changed'
LANGUAGE C;
REVOKE ALL ON FUNCTION kafgres.acl_changed() FROM PUBLIC;
CREATE TRIGGER acl_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON kafgres.acl
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.acl_changed();

/*
 * kafgres.acl_enabled(): whether the authorizer is on (kafgres.authorizer,
 * resolved in C so that "auto" means the same as for the broker).
 */
CREATE FUNCTION kafgres.acl_enabled() RETURNS boolean
AS 'MODULE_PATHNAME', 'kafgres_acl_enabled'
LANGUAGE C STABLE PARALLEL SAFE;

/*
 * kafgres.acl_authorize(principal, host, operation, resource_type, name):
 * Kafka's StandardAuthorizer decision, over kafgres.acl.  The rules are
 * the broker's (security/acl, Authorize):
 *
 *   - super users may do anything: the principals of kafgres.super_users,
 *     and User:<role> for every Postgres superuser;
 *   - the ACLs that apply to the resource are those of its type that are
 *     LITERAL with its name, LITERAL '*', or PREFIXED with a prefix of it;
 *   - of those, the ones for this principal or User:*, and this host or
 *     '*', decide: a DENY for the operation or ALL denies; else an ALLOW
 *     for it, for ALL, or for an operation implying it allows (READ,
 *     WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies
 *     DESCRIBE_CONFIGS);
 *   - otherwise allowed only when no ACL applies to the resource at all
 *     and kafgres.allow_everyone_if_no_acl_found is on.
 *
 * SECURITY DEFINER: kafgres.acl is nobody's business but the owner's; the
 * function answers only yes or no.
 */
CREATE FUNCTION kafgres.acl_authorize(principal text, host text, operation text,
                                      resource_type text, resource_name text)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
WITH applicable AS (
    SELECT a.principal, a.host, a.operation, a.permission
      FROM kafgres.acl AS a
     WHERE a.resource_type OPERATOR(pg_catalog.=) $4
       AND ((a.pattern_type OPERATOR(pg_catalog.=) 'LITERAL'
             AND (a.resource_name OPERATOR(pg_catalog.=) $5
                  OR a.resource_name OPERATOR(pg_catalog.=) '*'))
            OR (a.pattern_type OPERATOR(pg_catalog.=) 'PREFIXED'
                AND pg_catalog.starts_with($5, a.resource_name)))
), mine AS (
    SELECT a.operation, a.permission
      FROM applicable AS a
     WHERE (a.principal OPERATOR(pg_catalog.=) $1 OR a.principal OPERATOR(pg_catalog.=) 'User:*')
       AND (a.host OPERATOR(pg_catalog.=) '*' OR a.host OPERATOR(pg_catalog.=) $2)
)
SELECT CASE
    WHEN $1 OPERATOR(pg_catalog.=) ANY (kafgres.acl_super_users()) THEN true
    WHEN EXISTS (SELECT FROM mine AS m
                  WHERE m.permission OPERATOR(pg_catalog.=) 'DENY'
                    AND m.operation OPERATOR(pg_catalog.=) ANY (ARRAY[$3, 'ALL'])) THEN false
    WHEN EXISTS (SELECT FROM mine AS m
                  WHERE m.permission OPERATOR(pg_catalog.=) 'ALLOW'
                    AND (m.operation OPERATOR(pg_catalog.=) ANY (ARRAY[$3, 'ALL'])
                         OR ($3 OPERATOR(pg_catalog.=) 'DESCRIBE'
                             AND m.operation OPERATOR(pg_catalog.=) ANY (ARRAY['READ', 'WRITE', 'DELETE', 'ALTER']))
                         OR ($3 OPERATOR(pg_catalog.=) 'DESCRIBE_CONFIGS'
                             AND m.operation OPERATOR(pg_catalog.=) 'ALTER_CONFIGS'))) THEN true
    WHEN EXISTS (SELECT FROM applicable) THEN false
    ELSE COALESCE(pg_catalog.current_setting('kafgres.allow_everyone_if_no_acl_found', true), 'off')
             OPERATOR(pg_catalog.=) ANY (ARRAY['on', 'true', 'yes', '1'])
END
$$;
COMMENT ON FUNCTION kafgres.acl_authorize(text, text, text, text, text) IS 'Kafka''s authorizer decision over kafgres.acl';
REVOKE ALL ON FUNCTION kafgres.acl_authorize(text, text, text, text, text) FROM PUBLIC;

/*
 * kafgres.acl_super_users(): the principals allowed everything: those of
 * kafgres.super_users (Kafka's super.users, ';'-separated) and User:<role>
 * of every Postgres superuser.  The broker loads the same list.
 */
CREATE FUNCTION kafgres.acl_super_users() RETURNS text[]
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.array_agg(u)
  FROM (SELECT pg_catalog.btrim(s) AS u
          FROM pg_catalog.regexp_split_to_table(
                   COALESCE(pg_catalog.current_setting('kafgres.super_users', true), ''), ';') AS s
        UNION
        SELECT 'User:' OPERATOR(pg_catalog.||) r.rolname
          FROM pg_catalog.pg_roles AS r
         WHERE r.rolsuper) AS t
 WHERE u OPERATOR(pg_catalog.<>) ''
$$;
REVOKE ALL ON FUNCTION kafgres.acl_super_users() FROM PUBLIC;

/*
 * kafgres.acl_check(principal, operation, resource_type, name): the
 * decision for a SQL session, whose host is its client address (IPv4 as
 * Kafka prints it; '' over a Unix socket, so that only host '*' ACLs
 * apply).  kafgres_produce calls it from C by OID (no EXECUTE or USAGE
 * needed from the producing role); SECURITY DEFINER so that it reads
 * kafgres.acl whoever asks.
 */
CREATE FUNCTION kafgres.acl_check(principal text, operation text, resource_type text, resource_name text)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT kafgres.acl_authorize($1, COALESCE(pg_catalog.host(pg_catalog.inet_client_addr()), ''), $2, $3, $4)
$$;
REVOKE ALL ON FUNCTION kafgres.acl_check(text, text, text, text) FROM PUBLIC;

/*
 * kafgres.acl_require(role, operation, resource_type, name): raise
 * insufficient_privilege unless User:<role> may, when the authorizer is
 * on.  The message is the one kafgres_produce raises (produce.c).
 */
CREATE FUNCTION kafgres.acl_require(role_name name, operation text, resource_type text, resource_name text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_principal text := 'User:' OPERATOR(pg_catalog.||) role_name;
BEGIN
    IF NOT kafgres.acl_enabled() THEN
        RETURN;
    END IF;
    IF NOT kafgres.acl_check(v_principal, operation, resource_type, resource_name) THEN
        RAISE EXCEPTION 'permission denied for % "%"', pg_catalog.lower(resource_type), resource_name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('The Kafka ACLs do not allow principal %s %s on %s %s.',
                                             v_principal, operation, resource_type, resource_name),
                  HINT = pg_catalog.format('A superuser can grant it: SELECT kafgres_acl_grant(%L, %L, %L, %L);',
                                           v_principal, operation, resource_type, resource_name);
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION kafgres.acl_require(name, text, text, text) FROM PUBLIC;

/*
 * kafgres.acl_word(value, what, allowed): value in upper case if it is
 * one of allowed, else a clear error.  Kafka's tools accept the names in
 * any case, so do the SQL functions.
 */
CREATE FUNCTION kafgres.acl_word(value text, what text, allowed text[])
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text := pg_catalog.upper(pg_catalog.replace(pg_catalog.btrim(value), '-', '_'));
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION '% must not be null', what USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT v OPERATOR(pg_catalog.=) ANY (allowed) THEN
        RAISE EXCEPTION 'invalid % "%"', what, value
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use one of ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(allowed, ', ') OPERATOR(pg_catalog.||) '.';
    END IF;
    RETURN v;
END;
$$;
REVOKE ALL ON FUNCTION kafgres.acl_word(text, text, text[]) FROM PUBLIC;

/*
 * kafgres_acl_grant(principal, operation, resource_type, resource_name,
 * pattern_type, permission, host): add an ACL, as kafka-acls.sh --add
 * does.  Returns false if it existed already (which, as in Kafka, is not
 * an error).
 */
CREATE FUNCTION kafgres_acl_grant(principal text, operation text, resource_type text,
                                  resource_name text, pattern_type text DEFAULT 'LITERAL',
                                  permission text DEFAULT 'ALLOW', host text DEFAULT '*')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rt   text := kafgres.acl_word(resource_type, 'resource type',
                      ARRAY['TOPIC', 'GROUP', 'CLUSTER', 'TRANSACTIONAL_ID', 'DELEGATION_TOKEN', 'USER']);
    v_pt   text := kafgres.acl_word(pattern_type, 'pattern type', ARRAY['LITERAL', 'PREFIXED']);
    v_op   text := kafgres.acl_word(operation, 'operation',
                      ARRAY['ALL', 'READ', 'WRITE', 'CREATE', 'DELETE', 'ALTER', 'DESCRIBE',
                            'CLUSTER_ACTION', 'DESCRIBE_CONFIGS', 'ALTER_CONFIGS',
                            'IDEMPOTENT_WRITE', 'CREATE_TOKENS', 'DESCRIBE_TOKENS']);
    v_perm text := kafgres.acl_word(permission, 'permission', ARRAY['ALLOW', 'DENY']);
    v_n    bigint;
BEGIN
    IF kafgres_acl_grant.principal IS NULL OR pg_catalog.strpos(kafgres_acl_grant.principal, ':') = 0 THEN
        RAISE EXCEPTION 'invalid principal "%"', kafgres_acl_grant.principal
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A principal is written Type:name, e.g. User:alice, or User:* for everyone.';
    END IF;
    IF kafgres_acl_grant.host IS NULL OR kafgres_acl_grant.host = '' THEN
        RAISE EXCEPTION 'host must be an IP address or *' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF kafgres_acl_grant.resource_name IS NULL OR kafgres_acl_grant.resource_name = '' THEN
        RAISE EXCEPTION 'resource name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_rt = 'CLUSTER' AND kafgres_acl_grant.resource_name <> 'kafka-cluster' THEN
        RAISE EXCEPTION 'the only valid name for the CLUSTER resource is kafka-cluster'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO kafgres.acl (resource_type, resource_name, pattern_type, principal, host, operation, permission)
    VALUES (v_rt, kafgres_acl_grant.resource_name, v_pt, kafgres_acl_grant.principal,
            kafgres_acl_grant.host, v_op, v_perm)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n > 0;
END;
$$;
COMMENT ON FUNCTION kafgres_acl_grant(text, text, text, text, text, text, text) IS 'add a Kafka ACL; false if it existed';
REVOKE ALL ON FUNCTION kafgres_acl_grant(text, text, text, text, text, text, text) FROM PUBLIC;

/*
 * kafgres_acl_revoke(...): remove the ACLs matching the arguments, a null
 * argument matching anything (kafka-acls.sh --remove with a filter).
 * Returns how many were removed.
 */
CREATE FUNCTION kafgres_acl_revoke(principal text, operation text, resource_type text,
                                   resource_name text, pattern_type text DEFAULT 'LITERAL',
                                   permission text DEFAULT 'ALLOW', host text DEFAULT '*')
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rt   text;
    v_pt   text;
    v_op   text;
    v_perm text;
    v_n    bigint;
BEGIN
    IF resource_type IS NOT NULL THEN
        v_rt := kafgres.acl_word(resource_type, 'resource type',
                    ARRAY['TOPIC', 'GROUP', 'CLUSTER', 'TRANSACTIONAL_ID', 'DELEGATION_TOKEN', 'USER']);
    END IF;
    IF pattern_type IS NOT NULL THEN
        v_pt := kafgres.acl_word(pattern_type, 'pattern type', ARRAY['LITERAL', 'PREFIXED']);
    END IF;
    IF operation IS NOT NULL THEN
        v_op := kafgres.acl_word(operation, 'operation',
                    ARRAY['ALL', 'READ', 'WRITE', 'CREATE', 'DELETE', 'ALTER', 'DESCRIBE',
                          'CLUSTER_ACTION', 'DESCRIBE_CONFIGS', 'ALTER_CONFIGS',
                          'IDEMPOTENT_WRITE', 'CREATE_TOKENS', 'DESCRIBE_TOKENS']);
    END IF;
    IF permission IS NOT NULL THEN
        v_perm := kafgres.acl_word(permission, 'permission', ARRAY['ALLOW', 'DENY']);
    END IF;
    DELETE FROM kafgres.acl AS a
     WHERE (v_rt IS NULL OR a.resource_type = v_rt)
       AND (kafgres_acl_revoke.resource_name IS NULL OR a.resource_name = kafgres_acl_revoke.resource_name)
       AND (v_pt IS NULL OR a.pattern_type = v_pt)
       AND (kafgres_acl_revoke.principal IS NULL OR a.principal = kafgres_acl_revoke.principal)
       AND (kafgres_acl_revoke.host IS NULL OR a.host = kafgres_acl_revoke.host)
       AND (v_op IS NULL OR a.operation = v_op)
       AND (v_perm IS NULL OR a.permission = v_perm);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
COMMENT ON FUNCTION kafgres_acl_revoke(text, text, text, text, text, text, text) IS 'remove the Kafka ACLs matching the arguments (null matches any); returns how many';
REVOKE ALL ON FUNCTION kafgres_acl_revoke(text, text, text, text, text, text, text) FROM PUBLIC;

/*
 * kafgres_acls(principal, resource_type, resource_name): the ACLs, those
 * matching the non-null arguments.
 */
CREATE FUNCTION kafgres_acls(principal text DEFAULT NULL, resource_type text DEFAULT NULL,
                             resource_name text DEFAULT NULL)
RETURNS TABLE (resource_type text, resource_name text, pattern_type text, principal text,
               host text, operation text, permission text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission
  FROM kafgres.acl AS a
 WHERE ($1 IS NULL OR a.principal OPERATOR(pg_catalog.=) $1)
   AND ($2 IS NULL OR a.resource_type OPERATOR(pg_catalog.=) pg_catalog.upper($2))
   AND ($3 IS NULL OR a.resource_name OPERATOR(pg_catalog.=) $3)
 ORDER BY a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission
$$;
COMMENT ON FUNCTION kafgres_acls(text, text, text) IS 'list Kafka ACLs';
REVOKE ALL ON FUNCTION kafgres_acls(text, text, text) FROM PUBLIC;

/*
 * Mappings obey the ACLs: the mapping's owner needs WRITE on its topic
 * when the authorizer is on.  A trigger rather than a check inside
 * kafgres_add_mapping, so that a plain INSERT into kafgres.mapping is held
 * to the same rule; it fires after mapping_set_owner (triggers fire in
 * name order), which sets owner_role.  SECURITY DEFINER: the author needs
 * no right on the ACL functions.
 */
CREATE FUNCTION kafgres.mapping_topic_acl() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM kafgres.acl_require((SELECT r.rolname FROM pg_catalog.pg_roles AS r
                                  WHERE r.oid OPERATOR(pg_catalog.=) NEW.owner_role),
                                'WRITE', 'TOPIC', NEW.topic);
    RETURN NEW;
END;
$$;
REVOKE ALL ON FUNCTION kafgres.mapping_topic_acl() FROM PUBLIC;
CREATE TRIGGER mapping_topic_acl
    BEFORE INSERT ON kafgres.mapping
    FOR EACH ROW EXECUTE FUNCTION kafgres.mapping_topic_acl();
