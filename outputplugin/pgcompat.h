/*-------------------------------------------------------------------------
 *
 * pgcompat.h
 *	  Every difference between the PostgreSQL majors kafgres builds
 *	  against (15 and 18; docs/architecture.md lists them).
 *
 * The .c files are written against the newest API and have no
 * PG_VERSION_NUM tests of their own: this header maps that API onto the
 * older servers, so a new major's change is made here, once.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFGRES_PGCOMPAT_H
#define KAFGRES_PGCOMPAT_H

#if PG_VERSION_NUM < 150000
#error "kafgres needs PostgreSQL 15 or later"
#endif

#if PG_VERSION_NUM >= 160000
/*
 * PostgreSQL 16 moved the varlena macros (VARDATA_ANY, VARSIZE_ANY_EXHDR)
 * out of postgres.h into a header of their own.
 */
#include "varatt.h"
#endif

#if PG_VERSION_NUM < 170000
/*
 * PostgreSQL 17 added LogLogicalMessage's flush argument.  Before it a
 * transactional message was flushed with its commit, which is all kafgres
 * asks for, so the argument is dropped.
 */
#define LogLogicalMessage(prefix, message, size, transactional, flush) \
	LogLogicalMessage(prefix, message, size, transactional)

/*
 * PostgreSQL 17 made a ReorderBufferChange's old and new tuples plain
 * HeapTuples; before, they were ReorderBufferTupleBufs holding one.
 */
#define KAFGRES_CHANGE_TUPLE(t) (&(t)->tuple)
#else
#define KAFGRES_CHANGE_TUPLE(t) (t)
#endif

#if PG_VERSION_NUM < 180000
/*
 * PostgreSQL 18 replaced the postfix pg_attribute_noreturn() with the
 * prefix pg_noreturn (C11's _Noreturn) and removed the old macro.  Under
 * GCC and Clang the old one is an attribute that may stand in front too.
 */
#define pg_noreturn pg_attribute_noreturn()
#endif

#endif							/* KAFGRES_PGCOMPAT_H */
