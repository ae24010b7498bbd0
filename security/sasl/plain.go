package sasl

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
)

// MaxPlainIterations bounds the PBKDF2 work one PLAIN attempt can cost. The
// SCRAM client does this work itself; for PLAIN the broker does it, so a
// verifier made with an absurd scram_iterations must not turn every login
// into a CPU burner. Postgres's default is 4096; OWASP's 2023 advice for
// PBKDF2-HMAC-SHA256 is 600000.
const MaxPlainIterations = 1 << 20

// defaultIterations is Postgres's SCRAM_DEFAULT_ITERATIONS, used to spend
// the same time on a user we cannot check as on one we can.
const defaultIterations = 4096

// plainExchange is RFC 4616 PLAIN with Kafka's PlainSaslServer rules and
// messages. It takes one token and is over.
type plainExchange struct {
	cfg       Config
	principal string
	done      bool
	stepped   bool
}

func (p *plainExchange) Mechanism() string { return Plain }
func (p *plainExchange) Done() bool        { return p.done }
func (p *plainExchange) Principal() string { return p.principal }

func (p *plainExchange) fail(msg string, reason error) *AuthError {
	return &AuthError{Code: CodeSASLAuthenticationFailed, Message: msg, Reason: reason}
}

func (p *plainExchange) Step(ctx context.Context, token []byte) ([]byte, error) {
	if p.stepped {
		return nil, &AuthError{Code: CodeSASLAuthenticationFailed,
			Message: invalidCredentials(Plain, p.cfg.Reauthenticating), Reason: ErrExchangeOver}
	}
	p.stepped = true
	if len(token) > MaxTokenBytes {
		return nil, p.fail("Authentication failed: Invalid username or password", ErrTokenTooLarge)
	}
	// message = [authzid] NUL authcid NUL passwd. Kafka cuts at most four
	// pieces and wants exactly three.
	parts := bytes.SplitN(token, []byte{0}, 4)
	if len(parts) != 3 {
		return nil, p.fail(fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts)), ErrMalformed)
	}
	authzid, user, password := parts[0], parts[1], parts[2]
	if len(user) == 0 {
		return nil, p.fail("Authentication failed: username not specified", ErrMalformed)
	}
	if len(password) == 0 {
		return nil, p.fail("Authentication failed: password not specified", ErrMalformed)
	}
	role, err := p.cfg.Lookup(ctx, string(user))
	if err != nil {
		return nil, p.fail("Authentication failed: credentials for user could not be verified", fmt.Errorf("%w: %w", ErrLookup, err))
	}
	if ok, reason := checkPlain(role, password); !ok {
		return nil, p.fail("Authentication failed: Invalid username or password", reason)
	}
	// Kafka checks the authorization id only after the password.
	if len(authzid) != 0 && !bytes.Equal(authzid, user) {
		return nil, p.fail("Authentication failed: Client requested an authorization id that is different from username", ErrAuthzID)
	}
	p.principal = string(user)
	p.done = true
	return []byte{}, nil
}

// checkPlain verifies a password against the role's verifier. A role that
// cannot be checked still costs one default PBKDF2, so the answer's timing
// does not tell which roles exist.
func checkPlain(role Role, password []byte) (bool, error) {
	var reason error
	switch role.Status {
	case RoleFound:
		v, err := ParseVerifier(role.Verifier)
		if err != nil {
			reason = err
			break
		}
		if v.Iterations > MaxPlainIterations {
			reason = fmt.Errorf("%w (%d > %d)", ErrManyIterations, v.Iterations, MaxPlainIterations)
			break
		}
		stored, err := storedKey(password, v.Salt, v.Iterations)
		if err != nil {
			return false, fmt.Errorf("%w: %w", ErrInternalFailure, err)
		}
		if subtle.ConstantTimeCompare(stored[:], v.StoredKey[:]) != 1 {
			return false, ErrBadCredentials
		}
		return true, nil
	case RoleUnknown:
		reason = ErrUnknownUser
	case RoleNotAllowed:
		reason = ErrNotAllowed
	default:
		reason = fmt.Errorf("%w: lookup returned %v", ErrInternalFailure, role.Status)
	}
	_, _ = storedKey(password, []byte("kafgres-mock-salt"), defaultIterations)
	return false, reason
}

// storedKey is SCRAM's StoredKey for a password, with the password prepared
// as Postgres prepared it when it made the verifier:
// SaltedPassword = PBKDF2-HMAC-SHA-256(pg_saslprep(password), salt, i),
// ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey).
func storedKey(password, salt []byte, iterations int) ([keyLen]byte, error) {
	salted, err := pbkdf2.Key(sha256.New, string(pgSASLprep(password)), salt, iterations, keyLen)
	if err != nil {
		return [keyLen]byte{}, fmt.Errorf("pbkdf2: %w", err)
	}
	mac := hmac.New(sha256.New, salted)
	mac.Write([]byte("Client Key"))
	return sha256.Sum256(mac.Sum(nil)), nil
}
