package sasl

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/xdg-go/scram"
)

// minScramIterations is Kafka's ScramMechanism.SCRAM_SHA_256 minimum: its
// server refuses a credential with fewer, and its client refuses a server
// that asks for fewer.
const minScramIterations = 4096

// scramExchange is SCRAM-SHA-256 (RFC 5802/7677) as Kafka's ScramSaslServer
// runs it. Messages are first held to Kafka's grammar (ScramMessages), so
// what Kafka refuses is refused. xdg-go/scram's server conversation makes
// the server-first message; the client proof is checked here, as Kafka
// checks it: the final nonce need only end with the server's, since
// librdkafka (2.0 at least) sends the client nonce in front of the
// combined one, and the AuthMessage is built from the final message as
// sent.
//
// Like Kafka, and unlike Postgres, an unknown user fails at the first
// message (Kafka runs no mock exchange); every failure but one carries
// Kafka's single "invalid credentials" message.
type scramExchange struct {
	cfg       Config
	state     scramState
	conv      *scram.ServerConversation
	principal string

	// What the client-final message is checked against.
	gs2        string // the gs2 header, which c= must carry
	nonce      string // the combined nonce of the server-first message
	authPrefix string // client-first-message-bare "," server-first-message
	verifier   *Verifier
}

type scramState int

const (
	awaitClientFirst scramState = iota
	awaitClientFinal
	scramDone
	scramFailed
)

func newScram(cfg Config) *scramExchange { return &scramExchange{cfg: cfg} }

func (s *scramExchange) Mechanism() string { return ScramSHA256 }
func (s *scramExchange) Done() bool        { return s.state == scramDone }
func (s *scramExchange) Principal() string { return s.principal }

func (s *scramExchange) fail(reason error) *AuthError {
	s.state = scramFailed
	s.conv = nil
	return &AuthError{Code: CodeSASLAuthenticationFailed,
		Message: invalidCredentials(ScramSHA256, s.cfg.Reauthenticating), Reason: reason}
}

func (s *scramExchange) Step(ctx context.Context, token []byte) ([]byte, error) {
	if len(token) > MaxTokenBytes {
		return nil, s.fail(ErrTokenTooLarge)
	}
	switch s.state {
	case awaitClientFirst:
		return s.clientFirst(ctx, token)
	case awaitClientFinal:
		return s.clientFinal(token)
	}
	return nil, s.fail(ErrExchangeOver)
}

func (s *scramExchange) clientFirst(ctx context.Context, token []byte) ([]byte, error) {
	m, err := parseClientFirst(token)
	if err != nil {
		return nil, s.fail(err)
	}
	if m.tokenAuth {
		return nil, s.fail(ErrTokenAuth)
	}
	role, err := s.cfg.Lookup(ctx, m.username)
	if err != nil {
		return nil, s.fail(fmt.Errorf("%w: %w", ErrLookup, err))
	}
	switch role.Status {
	case RoleFound:
	case RoleUnknown:
		return nil, s.fail(ErrUnknownUser)
	case RoleNotAllowed:
		return nil, s.fail(ErrNotAllowed)
	default:
		return nil, s.fail(fmt.Errorf("%w: lookup returned %v", ErrInternalFailure, role.Status))
	}
	v, err := ParseVerifier(role.Verifier)
	if err != nil {
		return nil, s.fail(err)
	}
	// Kafka compares the authzid as sent (still escaped) with the decoded
	// user name, after finding the credential, and says why.
	if m.authzid != "" && m.authzid != m.username {
		s.state = scramFailed
		return nil, &AuthError{Code: CodeSASLAuthenticationFailed,
			Message: "Authentication failed: Client requested an authorization id that is different from username",
			Reason:  ErrAuthzID}
	}
	if v.Iterations < minScramIterations {
		return nil, s.fail(fmt.Errorf("%w (%d)", ErrFewIterations, v.Iterations))
	}
	cred := scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(v.Salt), Iters: v.Iterations},
		StoredKey:  v.StoredKey[:],
		ServerKey:  v.ServerKey[:],
	}
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) { return cred, nil })
	if err != nil {
		return nil, s.fail(fmt.Errorf("%w: %w", ErrInternalFailure, err))
	}
	if s.cfg.Nonce != nil {
		srv = srv.WithNonceGenerator(s.cfg.Nonce)
	}
	s.conv = srv.NewConversation()
	out, err := s.conv.Step(m.forLibrary)
	if err != nil {
		return nil, s.fail(fmt.Errorf("%w: %w", ErrMalformed, err))
	}
	nonce, _, _ := strings.Cut(strings.TrimPrefix(out, "r="), ",")
	s.gs2, s.nonce, s.authPrefix, s.verifier = m.gs2, nonce, m.bare+","+out, v
	s.conv = nil
	s.principal = m.username
	s.state = awaitClientFinal
	return []byte(out), nil
}

func (s *scramExchange) clientFinal(token []byte) ([]byte, error) {
	if err := checkClientFinal(token); err != nil {
		return nil, s.fail(err)
	}
	msg := string(token)
	fields := strings.Split(msg, ",")
	if cb, _ := base64.StdEncoding.DecodeString(fields[0][len("c="):]); string(cb) != s.gs2 {
		return nil, s.fail(fmt.Errorf("%w: channel binding is not the gs2 header", ErrMalformed))
	}
	// Exactly the combined nonce, as RFC 5802 says and Kafka checks since
	// CVE-2024-56128 (Kafka 3.9.1, 4.0): librdkafka before 2.10 sends its
	// own nonce again in front and is refused by Kafka and here alike.
	if fields[1][len("r="):] != s.nonce {
		return nil, s.fail(fmt.Errorf("%w: invalid client nonce in the final client message", ErrMalformed))
	}
	proof, _ := base64.StdEncoding.DecodeString(fields[len(fields)-1][len("p="):])
	if len(proof) != keyLen {
		return nil, s.fail(fmt.Errorf("%w: client proof of %d bytes", ErrMalformed, len(proof)))
	}
	authMsg := []byte(s.authPrefix + "," + msg[:strings.LastIndex(msg, ",")])
	clientKey := hmacSHA256(s.verifier.StoredKey[:], authMsg)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	if stored := sha256.Sum256(clientKey); subtle.ConstantTimeCompare(stored[:], s.verifier.StoredKey[:]) != 1 {
		return nil, s.fail(ErrBadCredentials)
	}
	s.state = scramDone
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSHA256(s.verifier.ServerKey[:], authMsg))), nil
}

func hmacSHA256(key, msg []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(msg)
	return mac.Sum(nil)
}

// clientFirst is a client-first-message Kafka's grammar accepts:
//
//	"n," ["a=" saslname] "," ["m=" value ","] "n=" saslname ",r=" printable *("," ALPHA "=" value)
//
// Only gs2 flag "n" (no channel binding), all of it ASCII.
type clientFirst struct {
	authzid    string // as sent, escapes not undone (what Kafka compares)
	username   string // saslname with =2C and =3D undone
	tokenAuth  bool   // extension tokenauth=true (the last one wins, as in Kafka's map)
	forLibrary string // the message without Kafka's ignored m= part
	gs2        string // gs2 header as forLibrary has it
	bare       string // client-first-message-bare
}

func parseClientFirst(token []byte) (clientFirst, error) {
	var m clientFirst
	bad := func(what string) (clientFirst, error) {
		return clientFirst{}, fmt.Errorf("%w: SCRAM client-first-message: %s", ErrMalformed, what)
	}
	for _, c := range token {
		if c == 0 || c > 0x7f {
			return bad("not ASCII")
		}
	}
	rest, ok := strings.CutPrefix(string(token), "n,")
	if !ok {
		return bad(`gs2 header is not "n,"`)
	}
	if r, ok := strings.CutPrefix(rest, "a="); ok {
		m.authzid, rest, _ = strings.Cut(r, ",")
		if !validSaslName(m.authzid) {
			return bad("authzid")
		}
		rest = "," + rest
		if r == m.authzid { // no comma after it
			return bad("gs2 header")
		}
	}
	rest, ok = strings.CutPrefix(rest, ",")
	if !ok {
		return bad("gs2 header")
	}
	if r, ok := strings.CutPrefix(rest, "m="); ok {
		v, after, found := strings.Cut(r, ",")
		if !found || v == "" {
			return bad("reserved m= attribute")
		}
		rest = after
	}
	bare := rest
	r, ok := strings.CutPrefix(rest, "n=")
	if !ok {
		return bad("no user name")
	}
	name, r, _ := strings.Cut(r, ",")
	if !validSaslName(name) {
		return bad("user name")
	}
	r, ok = strings.CutPrefix(r, "r=")
	if !ok {
		return bad("no nonce")
	}
	nonce, ext, _ := strings.Cut(r, ",")
	if nonce == "" || !printable(nonce) {
		return bad("nonce")
	}
	if strings.HasPrefix(r[len(nonce):], ",") {
		for _, f := range strings.Split(ext, ",") {
			k, v, ok := extension(f)
			if !ok {
				return bad("extension")
			}
			if k == "tokenauth" {
				m.tokenAuth = strings.EqualFold(v, "true")
			}
		}
	}
	m.username = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(name)
	gs2 := "n,,"
	if m.authzid != "" {
		gs2 = "n,a=" + m.authzid + ","
	}
	m.forLibrary = gs2 + bare
	m.gs2, m.bare = gs2, bare
	return m, nil
}

// checkClientFinal holds a client-final-message to Kafka's grammar:
//
//	"c=" base64 ",r=" printable *("," ALPHA "=" value) ",p=" base64
func checkClientFinal(token []byte) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: SCRAM client-final-message: %s", ErrMalformed, what)
	}
	for _, c := range token {
		if c == 0 || c > 0x7f {
			return bad("not ASCII")
		}
	}
	fields := strings.Split(string(token), ",")
	if len(fields) < 3 {
		return bad("too few attributes")
	}
	if cb, ok := strings.CutPrefix(fields[0], "c="); !ok || !kafkaBase64(cb) {
		return bad("channel binding")
	}
	if n, ok := strings.CutPrefix(fields[1], "r="); !ok || n == "" || !printable(n) {
		return bad("nonce")
	}
	for _, f := range fields[2 : len(fields)-1] {
		if _, _, ok := extension(f); !ok {
			return bad("extension")
		}
	}
	if p, ok := strings.CutPrefix(fields[len(fields)-1], "p="); !ok || !kafkaBase64(p) {
		return bad("proof")
	}
	return nil
}

// validSaslName: one or more of value-safe-char (0x01–0x7F but '=' and ','),
// "=2C" or "=3D".
func validSaslName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',':
			return false
		case '=':
			if !strings.HasPrefix(s[i:], "=2C") && !strings.HasPrefix(s[i:], "=3D") {
				return false
			}
			i += 2
		}
	}
	return true
}

// printable: one or more of 0x21–0x7E but ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return s != ""
}

// extension is ALPHA+ "=" value (value: one or more of 0x01–0x7F but ',').
func extension(f string) (key, value string, ok bool) {
	k, v, found := strings.Cut(f, "=")
	if !found || k == "" || v == "" {
		return "", "", false
	}
	for i := 0; i < len(k); i++ {
		c := k[i] | 0x20
		if c < 'a' || c > 'z' {
			return "", "", false
		}
	}
	return k, v, true
}

// kafkaBase64 is Kafka's BASE64 pattern: whole quanta with standard
// padding; empty is allowed.
func kafkaBase64(s string) bool {
	if len(s)%4 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/'
		if alpha {
			continue
		}
		// '=' only as the last one or two characters.
		if c != '=' || i < len(s)-2 || (i == len(s)-2 && s[i+1] != '=') {
			return false
		}
	}
	return true
}
