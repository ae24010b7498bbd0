/*-------------------------------------------------------------------------
 *
 * topicname.h
 *	  Kafka's topic name rule (topicname.c), the extension's one copy of it.
 *
 * kafgres_produce() checks its topic argument with it, and SQL asks it
 * through kafgres.topic_name_problem(name) (kafgres_create_topic,
 * kafgres_add_mapping), so C and SQL cannot disagree.  The broker's Go
 * copy is broker/topicname; TestTopicNameRulesAgree holds the two to one
 * table of names.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KAFGRES_TOPICNAME_H
#define KAFGRES_TOPICNAME_H

/* Kafka's limit on topic names */
#define TOPIC_NAME_MAX_LENGTH		249

/* why a name is refused, in the order Kafka checks (Topic.validate) */
typedef enum TopicNameProblem
{
	TOPIC_NAME_OK,
	TOPIC_NAME_EMPTY,
	TOPIC_NAME_DOTS,			/* "." or ".." */
	TOPIC_NAME_TOO_LONG,		/* more than TOPIC_NAME_MAX_LENGTH characters */
	TOPIC_NAME_CHARACTERS		/* other than ASCII letters, digits, ".", "_", "-" */
} TopicNameProblem;

/*
 * The first problem of name (len bytes, in the database encoding);
 * *length is set to its length in characters.
 */
extern TopicNameProblem topic_name_problem(const char *name, int len, int *length);

/*
 * Whether Kafka treats a topic of this name as internal (its coordinators'
 * logs and the share-group state): producers may not write to it.  The Go
 * copy is topicname.Internal.
 */
extern bool topic_name_internal(const char *name, int len);

#endif							/* KAFGRES_TOPICNAME_H */
