// Package topicname is Kafka's rule for topic names
// (org.apache.kafka.common.internals.Topic.validate), with Kafka's wording.
// The extension enforces the same rule in C (kafgres_produce) and in SQL
// (kafgres_create_topic, kafgres_add_mapping); the integration test
// TestTopicNameRulesAgree holds all three to one table of names.
package topicname

// MaxLength is the longest topic name Kafka accepts.
const MaxLength = 249

// Problem says why Kafka refuses name as a topic name ("" if it does not),
// in the words of Kafka's InvalidTopicException after "Topic name is
// invalid: ".
func Problem(name string) string {
	switch {
	case name == "":
		return "the empty string is not allowed"
	case name == "." || name == "..":
		return "'" + name + "' is not allowed"
	case len(name) > MaxLength:
		return "the length of '" + name + "' is longer than the max allowed length 249"
	}
	for i := 0; i < len(name); i++ {
		if !legal(name[i]) {
			return "'" + name + "' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
		}
	}
	return ""
}

// Valid reports whether Kafka accepts name as a topic name.
func Valid(name string) bool { return Problem(name) == "" }

func legal(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Internal reports whether Kafka treats a topic of this name as internal
// (Topic.isInternal), whether or not it exists: the group and transaction
// coordinators' logs and the share-group state. Clients skip them in
// pattern subscriptions; producers may not write to them.
func Internal(name string) bool {
	switch name {
	case "__consumer_offsets", "__transaction_state", "__share_group_state":
		return true
	}
	return false
}
