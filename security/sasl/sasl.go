// Package sasl authenticates Kafka clients (SaslHandshake/SaslAuthenticate)
// against the passwords Postgres already keeps: a role's SCRAM-SHA-256
// verifier in pg_authid.rolpassword. It serves SCRAM-SHA-256 and PLAIN with
// the messages and failure behaviour of Kafka's ScramSaslServer,
// PlainSaslServer and SaslServerAuthenticator, so a client sees Kafka.
//
// It does no I/O: the broker supplies a Lookup that reads pg_authid and
// decides whether the role may log in, steps an Exchange with each
// SaslAuthenticate's bytes, and turns an *AuthError into the response.
package sasl

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Mechanism names, as Kafka spells them.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	Plain       = "PLAIN"
)

// Kafka error codes this package produces.
const (
	CodeUnsupportedSASLMechanism int16 = 33 // UNSUPPORTED_SASL_MECHANISM
	CodeSASLAuthenticationFailed int16 = 58 // SASL_AUTHENTICATION_FAILED
)

// MaxTokenBytes bounds one SaslAuthenticate token. Real ones are well under
// a kilobyte (a role name is at most 63 bytes); a larger one fails like bad
// credentials.
const MaxTokenBytes = 64 << 10

// Supported lists what this package can serve. SCRAM-SHA-512 is not in it:
// Postgres stores SCRAM-SHA-256 verifiers only.
func Supported() []string { return []string{ScramSHA256, Plain} }

// Mechanisms is the set a listener enables (Kafka's
// sasl.enabled.mechanisms), in the order SaslHandshake lists them.
type Mechanisms struct{ names []string }

// NewMechanisms checks a configured list: each name must be one this
// package serves, once.
func NewMechanisms(names ...string) (Mechanisms, error) {
	if len(names) == 0 {
		return Mechanisms{}, errors.New("no SASL mechanism enabled")
	}
	for i, n := range names {
		switch n {
		case ScramSHA256, Plain:
		case ScramSHA512:
			return Mechanisms{}, fmt.Errorf("SASL mechanism %s cannot be served: Postgres stores SCRAM-SHA-256 verifiers only", n)
		default:
			return Mechanisms{}, fmt.Errorf("SASL mechanism %q is not supported (supported: %v)", n, Supported())
		}
		if slices.Contains(names[:i], n) {
			return Mechanisms{}, fmt.Errorf("SASL mechanism %s is listed twice", n)
		}
	}
	return Mechanisms{names: slices.Clone(names)}, nil
}

// Names returns the enabled mechanisms.
func (m Mechanisms) Names() []string { return slices.Clone(m.names) }

// Handshake answers a SaslHandshake request as Kafka's
// SaslServerAuthenticator does: error code 0 and the enabled list when the
// requested name is enabled (exact, case-sensitive match), else
// UNSUPPORTED_SASL_MECHANISM with the same list, after which Kafka closes the
// connection.
func (m Mechanisms) Handshake(requested string) (code int16, enabled []string) {
	if slices.Contains(m.names, requested) {
		return 0, m.Names()
	}
	return CodeUnsupportedSASLMechanism, m.Names()
}

// RoleStatus is what the broker's lookup found for a client's user name.
type RoleStatus int

const (
	// RoleFound: the role exists and may log in now; Verifier is its
	// pg_authid.rolpassword.
	RoleFound RoleStatus = iota
	// RoleUnknown: no such role.
	RoleUnknown
	// RoleNotAllowed: the role exists but may not log in (NOLOGIN, expired
	// rolvaliduntil, not a member of the role the broker requires).
	RoleNotAllowed
)

func (s RoleStatus) String() string {
	switch s {
	case RoleFound:
		return "found"
	case RoleUnknown:
		return "unknown"
	case RoleNotAllowed:
		return "not allowed"
	}
	return fmt.Sprintf("RoleStatus(%d)", int(s))
}

// Role is a lookup's answer.
type Role struct {
	Status   RoleStatus
	Verifier string // pg_authid.rolpassword as stored; "" for NULL
}

// Lookup finds the role a client names. An error means the broker could
// not tell (Postgres unreachable, ...): the client is refused as Kafka
// refuses it when its credential callback fails, and the error is kept in
// the AuthError for the log.
type Lookup func(ctx context.Context, username string) (Role, error)

// Why an exchange failed, for the broker's log (errors.Is on
// AuthError.Reason). None of it reaches the client.
var (
	ErrUnknownUser     = errors.New("unknown user")
	ErrNotAllowed      = errors.New("role may not log in")
	ErrBadCredentials  = errors.New("invalid credentials")
	ErrMalformed       = errors.New("malformed SASL message")
	ErrTokenAuth       = errors.New("delegation token authentication is not supported")
	ErrFewIterations   = errors.New("verifier iteration count is below Kafka's minimum of 4096 for SCRAM-SHA-256")
	ErrManyIterations  = errors.New("verifier iteration count is above the limit for PLAIN")
	ErrAuthzID         = errors.New("authorization id differs from the user name")
	ErrLookup          = errors.New("role lookup failed")
	ErrExchangeOver    = errors.New("SASL exchange already finished")
	ErrTokenTooLarge   = errors.New("SASL token too large")
	ErrInternalFailure = errors.New("internal failure")
)

// AuthError is a failed step: the broker answers SaslAuthenticate with Code
// and Message (exactly Kafka's text) and closes the connection, as Kafka
// does; Reason says why, for the log only.
type AuthError struct {
	Code    int16
	Message string
	Reason  error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("%s (%v)", e.Message, e.Reason)
}

func (e *AuthError) Unwrap() error { return e.Reason }

// Exchange is one SASL authentication on one connection, a small state
// machine the broker steps with each SaslAuthenticate's auth bytes.
type Exchange interface {
	// Mechanism is the mechanism's name.
	Mechanism() string
	// Step takes the client's token and returns the server's. An error is
	// always an *AuthError, and ends the exchange.
	Step(ctx context.Context, token []byte) ([]byte, error)
	// Done reports that the client is authenticated.
	Done() bool
	// Principal is the authenticated user name (Kafka's authorization id),
	// valid once Done.
	Principal() string
}

// Config is what an exchange needs from the broker.
type Config struct {
	Lookup Lookup
	// Reauthenticating makes failure messages say "re-authentication", as
	// Kafka's do for KIP-368 re-authentication.
	Reauthenticating bool
	// Nonce, if set, makes the SCRAM server nonce (tests); else it is
	// random.
	Nonce func() string
}

// Start begins an exchange for a mechanism the handshake accepted.
func (m Mechanisms) Start(mechanism string, cfg Config) (Exchange, error) {
	if !slices.Contains(m.names, mechanism) {
		return nil, fmt.Errorf("SASL mechanism %q is not enabled", mechanism)
	}
	if cfg.Lookup == nil {
		return nil, errors.New("sasl: no Lookup")
	}
	switch mechanism {
	case ScramSHA256:
		return newScram(cfg), nil
	case Plain:
		return &plainExchange{cfg: cfg}, nil
	}
	return nil, fmt.Errorf("SASL mechanism %q is not supported", mechanism)
}

// invalidCredentials is the message Kafka's SaslServerAuthenticator sends
// for any SaslException, which hides the reason from the client.
func invalidCredentials(mechanism string, reauth bool) string {
	phase := "authentication"
	if reauth {
		phase = "re-authentication"
	}
	return "Authentication failed during " + phase + " due to invalid credentials with SASL mechanism " + mechanism
}
