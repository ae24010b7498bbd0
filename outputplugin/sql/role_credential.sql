-- kafgres.role_credential: what the broker reads of the roles Kafka SASL
-- clients log in as (docs/security.md, "SASL").
SET password_encryption = 'scram-sha-256';
CREATE ROLE regress_clients NOLOGIN;
CREATE ROLE regress_kalice LOGIN PASSWORD 'pencil' IN ROLE regress_clients;
CREATE ROLE regress_kbob NOLOGIN PASSWORD 'pencil' VALID UNTIL '2001-01-01 00:00:00+00';
CREATE ROLE regress_ksuper SUPERUSER LOGIN PASSWORD 'pencil';
CREATE ROLE regress_kbroker LOGIN;

-- not executable by PUBLIC
SELECT has_function_privilege('regress_kbroker', 'kafgres.role_credential(text[], text)', 'EXECUTE');

-- a superuser caller sees every verifier; missing roles have no row
SELECT role_name, verifier LIKE 'SCRAM-SHA-256$4096:%' AS scram, can_login, valid_until, is_member
FROM kafgres.role_credential(ARRAY['regress_kalice', 'regress_kbob', 'regress_ksuper', 'regress_nobody'], 'regress_clients')
ORDER BY role_name;
SELECT role_name, is_member
FROM kafgres.role_credential(ARRAY['regress_kalice', 'regress_kbob'], '')
ORDER BY role_name;
SELECT role_name, is_member
FROM kafgres.role_credential(ARRAY['regress_kalice'], 'regress_no_such_role');

-- a non-superuser broker role needs the grant, and is not given a
-- superuser's verifier
GRANT USAGE ON SCHEMA kafgres TO regress_kbroker;
SET SESSION AUTHORIZATION regress_kbroker;
SELECT * FROM kafgres.role_credential(ARRAY['regress_kalice'], NULL);
RESET SESSION AUTHORIZATION;
GRANT EXECUTE ON FUNCTION kafgres.role_credential(text[], text) TO regress_kbroker;
SET SESSION AUTHORIZATION regress_kbroker;
SELECT role_name, verifier IS NOT NULL AS has_verifier
FROM kafgres.role_credential(ARRAY['regress_kalice', 'regress_ksuper'], NULL)
ORDER BY role_name;
RESET SESSION AUTHORIZATION;

REVOKE ALL ON FUNCTION kafgres.role_credential(text[], text) FROM regress_kbroker;
REVOKE ALL ON SCHEMA kafgres FROM regress_kbroker;
DROP ROLE regress_kalice, regress_kbob, regress_ksuper, regress_kbroker, regress_clients;
