/* sql/kafgres--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.5.0'" to load this file. \quit

/*
 * 0.5.0: Kafka clients authenticate as Postgres roles (issue #13,
 * docs/security.md "SASL").
 */

/*
 * kafgres.role_credential: what the broker needs to authenticate a SASL
 * client as a Postgres role, and to end the sessions of a role that may no
 * longer log in.  The broker may run as a role that cannot read pg_authid,
 * hence SECURITY DEFINER (the extension's owner, a superuser).  One row
 * per named role that exists.
 *
 * A superuser's verifier is returned only to a superuser: a non-superuser
 * broker role must not be able to take superusers' verifiers away for an
 * offline guess (so superusers cannot log in to such a broker).
 * is_member: the role is a member of client_role (directly or not, as
 * pg_has_role's MEMBER), or client_role is NULL or empty.  A client_role
 * that does not exist makes nobody a member.
 *
 * Not granted to PUBLIC: it hands out password verifiers.  The broker's
 * role needs EXECUTE when it is not a superuser (docs/sql.md).
 */
CREATE FUNCTION kafgres.role_credential(role_names text[], client_role text)
RETURNS TABLE (role_name text, verifier text, can_login boolean, valid_until timestamptz, is_member boolean)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.rolname::text,
           CASE WHEN a.rolsuper AND NOT coalesce((SELECT s.rolsuper FROM pg_catalog.pg_authid AS s
                                                  WHERE s.rolname OPERATOR(pg_catalog.=) session_user), false)
                THEN NULL
                ELSE a.rolpassword END,
           a.rolcanlogin,
           a.rolvaliduntil,
           CASE WHEN client_role IS NULL OR client_role OPERATOR(pg_catalog.=) '' THEN true
                ELSE coalesce((SELECT pg_catalog.pg_has_role(a.oid, c.oid, 'MEMBER')
                               FROM pg_catalog.pg_authid AS c
                               WHERE c.rolname OPERATOR(pg_catalog.=) client_role::name), false) END
    FROM pg_catalog.pg_authid AS a
    WHERE a.rolname OPERATOR(pg_catalog.=) ANY (role_names::name[])
$$;
COMMENT ON FUNCTION kafgres.role_credential(text[], text) IS 'SCRAM verifier, LOGIN, VALID UNTIL and client-role membership of roles Kafka clients authenticate as';
REVOKE ALL ON FUNCTION kafgres.role_credential(text[], text) FROM PUBLIC;
