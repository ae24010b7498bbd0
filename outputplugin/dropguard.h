/*-------------------------------------------------------------------------
 *
 * dropguard.h
 *	  The check that keeps DROP EXTENSION kafgres from stopping the
 *	  replication slot (dropguard.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFGRES_DROPGUARD_H
#define KAFGRES_DROPGUARD_H

extern void kafgres_dropguard_init(void);

#endif							/* KAFGRES_DROPGUARD_H */
