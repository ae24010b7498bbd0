// Package apierr is the failure a Kafka API reports for one resource of a
// request (a topic, a config resource, a quota entity): Kafka's error code
// and the message Kafka puts next to it, which clients show verbatim. The
// broker and its model packages (kconfig) share this one type.
package apierr

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error is a client-visible failure: a Kafka error code and its message,
// which may be empty. It is immutable, so shared values are safe.
type Error struct {
	code int16
	msg  string
}

// New is an error with kind's code and a message in Kafka's wording.
func New(kind *kerr.Error, format string, args ...any) *Error {
	return &Error{code: kind.Code, msg: fmt.Sprintf(format, args...)}
}

// WithoutMessage is an error with kind's code and no message, for the
// answers where Kafka sends none (UNKNOWN_SERVER_ERROR for a failure of
// ours, UNKNOWN_TOPIC_OR_PARTITION in DescribeConfigs).
func WithoutMessage(kind *kerr.Error) *Error {
	return &Error{code: kind.Code}
}

// InvalidConfig is INVALID_CONFIG, the code of most config checks.
func InvalidConfig(format string, args ...any) *Error {
	return New(kerr.InvalidConfig, format, args...)
}

// InvalidRequest is INVALID_REQUEST.
func InvalidRequest(format string, args ...any) *Error {
	return New(kerr.InvalidRequest, format, args...)
}

func (e *Error) Error() string { return e.msg }

// Code is the Kafka error code, 0 for a nil error (no failure).
func (e *Error) Code() int16 {
	if e == nil {
		return 0
	}
	return e.code
}

// Message is the message, "" for a nil error.
func (e *Error) Message() string {
	if e == nil {
		return ""
	}
	return e.msg
}

// NullableMessage is the message for a response field that is null when
// there is none (nil error or empty message).
func (e *Error) NullableMessage() *string {
	if e == nil || e.msg == "" {
		return nil
	}
	msg := e.msg
	return &msg
}

// DefaultMessage is the message Kafka sends with kind when the answer
// carries no message of its own: its Errors.message(). That is franz-go's
// description of the code, except for the authorization failures, where
// franz-go prefixes the exception's text; clients print these verbatim.
func DefaultMessage(kind *kerr.Error) string {
	switch kind.Code {
	case kerr.TopicAuthorizationFailed.Code:
		return "Topic authorization failed."
	case kerr.GroupAuthorizationFailed.Code:
		return "Group authorization failed."
	case kerr.TransactionalIDAuthorizationFailed.Code:
		return "Transactional Id authorization failed."
	}
	return kind.Description
}
