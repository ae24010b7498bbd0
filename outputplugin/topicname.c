/*-------------------------------------------------------------------------
 *
 * topicname.c
 *	  Kafka's topic name rule, and kafgres.topic_name_problem(name), which
 *	  gives it to SQL.
 *
 * One implementation for the whole extension: kafgres_produce() (C) and
 * kafgres_create_topic() and kafgres_add_mapping() (SQL) all end up here,
 * each raising its own error messages from the problem found.  The order
 * of the checks is Kafka's (and broker/topicname's), which matters only for
 * a name with two problems.  Lengths are counted in characters, as SQL's
 * length() counts them; a name that is not all ASCII is refused anyway.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "pgcompat.h"
#include "topicname.h"

PG_FUNCTION_INFO_V1(kafgres_topic_name_problem);
PG_FUNCTION_INFO_V1(kafgres_topic_is_internal);

TopicNameProblem
topic_name_problem(const char *name, int len, int *length)
{
	int			i;

	*length = pg_mbstrlen_with_len(name, len);
	if (len == 0)
		return TOPIC_NAME_EMPTY;
	if ((len == 1 && name[0] == '.') ||
		(len == 2 && name[0] == '.' && name[1] == '.'))
		return TOPIC_NAME_DOTS;
	if (*length > TOPIC_NAME_MAX_LENGTH)
		return TOPIC_NAME_TOO_LONG;
	for (i = 0; i < len; i++)
	{
		char		c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return TOPIC_NAME_CHARACTERS;
	}
	return TOPIC_NAME_OK;
}

bool
topic_name_internal(const char *name, int len)
{
	static const char *const internal[] = {
		"__consumer_offsets", "__transaction_state", "__share_group_state"
	};

	for (int i = 0; i < lengthof(internal); i++)
	{
		if (len == strlen(internal[i]) && memcmp(name, internal[i], len) == 0)
			return true;
	}
	return false;
}

/*
 * kafgres.topic_is_internal(name text) RETURNS boolean
 *
 * Whether Kafka treats name as an internal topic (kafgres.topics shows it).
 */
Datum
kafgres_topic_is_internal(PG_FUNCTION_ARGS)
{
	text	   *name = PG_GETARG_TEXT_PP(0);

	PG_RETURN_BOOL(topic_name_internal(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name)));
}

/*
 * kafgres.topic_name_problem(name text) RETURNS text
 *
 * NULL when Kafka accepts name as a topic name, else why not.  The
 * reasons are fixed texts (the SQL callers tell them apart, and turn the
 * last two into an error DETAIL):
 *
 *	  the name is empty
 *	  "." and ".." are not allowed
 *	  topic names can be at most 249 characters long
 *	  topic names may contain only ASCII letters, digits, ".", "_" and "-"
 *
 * STRICT: a NULL name is the caller's to report.
 */
Datum
kafgres_topic_name_problem(PG_FUNCTION_ARGS)
{
	text	   *name = PG_GETARG_TEXT_PP(0);
	int			length;

	switch (topic_name_problem(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), &length))
	{
		case TOPIC_NAME_OK:
			PG_RETURN_NULL();
		case TOPIC_NAME_EMPTY:
			PG_RETURN_TEXT_P(cstring_to_text("the name is empty"));
		case TOPIC_NAME_DOTS:
			PG_RETURN_TEXT_P(cstring_to_text("\".\" and \"..\" are not allowed"));
		case TOPIC_NAME_TOO_LONG:
			PG_RETURN_TEXT_P(cstring_to_text(psprintf("topic names can be at most %d characters long",
													  TOPIC_NAME_MAX_LENGTH)));
		case TOPIC_NAME_CHARACTERS:
			break;
	}
	PG_RETURN_TEXT_P(cstring_to_text("topic names may contain only ASCII letters, digits, \".\", \"_\" and \"-\""));
}
