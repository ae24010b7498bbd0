package sasl

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// Verifiers made by PostgreSQL 15.20 (initdb, password_encryption =
// 'scram-sha-256', CREATE ROLE r PASSWORD '...', SELECT rolpassword), with
// the password each was made from.
var pgVerifiers = []struct {
	role, password, verifier, why string
}{
	{"x", "pencil", "SCRAM-SHA-256$4096:+FtRzwUvRTUUIc6d1nt9Xg==$SlJy3wwGBWBE1riacMg3WO7o9xzA7f6davgdONslktM=:myMA7xhYP5aq3+0PpRbeFTBMuWp+RGePmcSXAaXOuJM=", "ASCII"},
	{"y", "pässwörd", "SCRAM-SHA-256$4096:55/sc62ydblrI9gbDIxTSA==$qepYWElaCs3w21sIklmEBDTKZxYTtufozO6LjHZuwJo=:GTLH+bSAuim3mNuA/LkB+rdb/YCvwZkBbgfRLEZ9Cg8=", "non-ASCII, NFKC leaves it"},
	{"z", "a\u00a0b\u00adc", "SCRAM-SHA-256$4096:/GMSI476a5DKc/dOK0O+FQ==$t3kj2E/+NNy3br1EOgQ1pcP3J6tjBOArPPCFR385LXs=:s+WXYaza7aE69Ll+S7U0xFMmO+jbfjRsDL5WCmnAzYs=", "non-ASCII space mapped, soft hyphen dropped"},
	{"w", "\ufb01x", "SCRAM-SHA-256$4096:uHtA6NPRUsLcfzUmBDxeeg==$bjSf696YLiWGKIIL8ZMhU6Ff0t7ta5Xx520MTDWi73E=:A79oq+dCCUsxEy6kmxbQrhS9cYJvMcWAabHuAHgjTUg=", "NFKC: the ligature becomes fi"},
	{"v", "\u0627x", "SCRAM-SHA-256$4096:dYM+WLgJX6Ns+pZsiv5Xiw==$DcbHCj1j0UNvshwNz0sxbnBwve+mjMpebRqtPwwGXTY=:xFox7iYfYQhOjRPoM9UUUnNeB9Kn0O/DCcy8LZjXOZk=", "bidi rule broken: raw bytes"},
	{"u", "smile\U0001F600", "SCRAM-SHA-256$4096:j3fWw5LHAJOVjN1g0xV8HA==$LnYeY3CW0Q0wcKOGz0JEPtfc+aionGC4M9c1VnIHWc4=:qLzRqlMZ9M8Mfc+0BKGDOcUb7od2xbj6ToWVjDWXXD0=", "unassigned in Unicode 3.2: raw bytes"},
	{"t", "bell\a", "SCRAM-SHA-256$4096:032LOPcc2k3ljQuUFU4pdQ==$jnMA8zFWkVofUV2hkwF4BwT2pUCUX266IRKDG3FXCoY=:qRUdCXjpJogMlQ3x6iZcMRu9YHFFcamt08Lt31CQnQM=", "ASCII control character: used as is"},
}

// makeVerifier computes a verifier the way Postgres's scram_build_secret
// does, for a password already prepared.
func makeVerifier(prepared string, salt []byte, iterations int) string {
	salted, err := pbkdf2.Key(sha256.New, prepared, salt, iterations, 32)
	if err != nil {
		panic(err)
	}
	h := func(key []byte, s string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	stored := sha256.Sum256(h(salted, "Client Key"))
	b := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b(salt), b(stored[:]), b(h(salted, "Server Key")))
}

func lookupOf(roles map[string]Role) Lookup {
	return func(_ context.Context, user string) (Role, error) {
		if user == "broken" {
			return Role{}, errors.New("connection refused")
		}
		r, ok := roles[user]
		if !ok {
			return Role{Status: RoleUnknown}, nil
		}
		return r, nil
	}
}

func pgRoles() map[string]Role {
	roles := map[string]Role{
		"md5":     {Status: RoleFound, Verifier: "md5" + strings.Repeat("a", 32)},
		"nologin": {Status: RoleNotAllowed},
		"null":    {Status: RoleFound},
		"few":     {Status: RoleFound, Verifier: makeVerifier("pencil", []byte("salt"), 1000)},
		"many":    {Status: RoleFound, Verifier: strings.Replace(pgVerifiers[0].verifier, "$4096:", fmt.Sprintf("$%d:", MaxPlainIterations+1), 1)},
		"a,b=c":   {Status: RoleFound, Verifier: pgVerifiers[0].verifier},
	}
	for _, v := range pgVerifiers {
		roles[v.role] = Role{Status: RoleFound, Verifier: v.verifier}
	}
	return roles
}

func start(t *testing.T, mech string, reauth bool) Exchange {
	t.Helper()
	m, err := NewMechanisms(ScramSHA256, Plain)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := m.Start(mech, Config{Lookup: lookupOf(pgRoles()), Reauthenticating: reauth})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func TestParseVerifierPostgres(t *testing.T) {
	for _, v := range pgVerifiers {
		p, err := ParseVerifier(v.verifier)
		if err != nil {
			t.Fatalf("%s: %v", v.role, err)
		}
		if p.Iterations != 4096 || len(p.Salt) != 16 {
			t.Errorf("%s: iterations %d, salt %d bytes", v.role, p.Iterations, len(p.Salt))
		}
	}
	// A verifier computed here with a known salt parses back to its parts
	// and its StoredKey is what storedKey computes.
	salt := []byte("0123456789abcdef")
	p, err := ParseVerifier(makeVerifier("pencil", salt, 4096))
	if err != nil {
		t.Fatal(err)
	}
	sk, _ := storedKey([]byte("pencil"), salt, 4096)
	if string(p.Salt) != string(salt) || sk != p.StoredKey {
		t.Error("computed verifier does not round-trip")
	}
}

func TestParseVerifierAsPostgres(t *testing.T) {
	good := pgVerifiers[0].verifier
	_, rest, _ := strings.Cut(good, "$") // "4096:salt$stored:server"
	_, keys, _ := strings.Cut(rest, "$")
	ok := []struct {
		in    string
		iters int
	}{
		{good, 4096},
		{"SCRAM-SHA-256$ 4096:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys, 4096},      // strtol skips spaces
		{"SCRAM-SHA-256$+4096:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys, 4096},      // and takes a sign
		{"$$SCRAM-SHA-256$4096:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys, 4096},     // strtok skips leading delimiters
		{"SCRAM-SHA-256$4294971392:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys, 4096}, // long narrowed to int
		{"SCRAM-SHA-256$4096:AA=A$" + keys, 4096},                           // pg_b64_decode's '=' quirk
	}
	for _, c := range ok {
		v, err := ParseVerifier(c.in)
		if err != nil || v.Iterations != c.iters {
			t.Errorf("%q: %v %v", c.in, v, err)
		}
	}
	bad := []string{
		"", "pencil", "md5" + strings.Repeat("0", 32),
		"SCRAM-SHA-1$4096:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys,
		"scram-sha-256$4096:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys,
		"SCRAM-SHA-256$4096x:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys,
		"SCRAM-SHA-256$0:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys,
		"SCRAM-SHA-256$-4096:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys,
		"SCRAM-SHA-256$99999999999999999999:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys,
		"SCRAM-SHA-256$4096:+FtRzwUvRTUUIc6d1nt9Xg=$" + keys,  // not whole quanta
		"SCRAM-SHA-256$4096:+FtRzwUvRTUU Ic6d1nt9Xg=$" + keys, // whitespace
		"SCRAM-SHA-256$4096:A===$" + keys,
		"SCRAM-SHA-256$$4096:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys, // strtok(NULL, ":") keeps the second '$'
		"SCRAM-SHA-256$4096::+FtRzwUvRTUUIc6d1nt9Xg==$" + keys,
		"SCRAM-SHA-256$4096:+FtRzwUvRTUUIc6d1nt9Xg==",
		"SCRAM-SHA-256$4096:+FtRzwUvRTUUIc6d1nt9Xg==$AAAA:" + strings.Split(keys, ":")[1],
		"SCRAM-SHA-256$4096:+FtRzwUvRTUUIc6d1nt9Xg==$" + keys + "AAAA",
	}
	for _, in := range bad {
		if _, err := ParseVerifier(in); !errors.Is(err, ErrNotSCRAM) {
			t.Errorf("%q: %v, want ErrNotSCRAM", in, err)
		}
	}
}

func TestPgSASLprep(t *testing.T) {
	for in, want := range map[string]string{
		"pencil":               "pencil",
		"bell\a":               "bell\a",
		"pässwörd":             "pässwörd",
		"pa\u0308sswo\u0308rd": "pässwörd", // NFKC composes
		"a\u00a0b\u00adc":      "a bc",
		"\ufb01x":              "fix",
		"\u1806a\u00e9":        "a\u00e9", // U+1806: Postgres's B.1 has it
		"\u0627x":              "\u0627x", // bidi: raw
		"\u0627\u0628":         "\u0627\u0628",
		"smile\U0001F600":      "smile\U0001F600",
		"\u00ad":               "\u00ad", // maps to nothing: empty is refused, raw
		"\xff\xfe":             "\xff\xfe",
		"\u2163":               "IV",
	} {
		if got := string(pgSASLprep([]byte(in))); got != want {
			t.Errorf("pgSASLprep(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPlainAgainstPostgresVerifiers(t *testing.T) {
	for _, v := range pgVerifiers {
		ex := start(t, Plain, false)
		out, err := ex.Step(context.Background(), []byte("\x00"+v.role+"\x00"+v.password))
		if err != nil || !ex.Done() || ex.Principal() != v.role || len(out) != 0 {
			t.Errorf("%s (%s): %v", v.role, v.why, err)
		}
		ex = start(t, Plain, false)
		if _, err := ex.Step(context.Background(), []byte("\x00"+v.role+"\x00"+v.password+"x")); err == nil {
			t.Errorf("%s: wrong password accepted", v.role)
		}
	}
	// The prepared form is the same password to Postgres.
	ex := start(t, Plain, false)
	if _, err := ex.Step(context.Background(), []byte("\x00w\x00fix")); err != nil {
		t.Errorf("fix for \ufb01x: %v", err)
	}
}

func TestPlainFailures(t *testing.T) {
	const (
		invalid  = "Authentication failed: Invalid username or password"
		authzMsg = "Authentication failed: Client requested an authorization id that is different from username"
	)
	cases := []struct {
		token, msg string
		reason     error
	}{
		{"x\x00pencil", "Invalid SASL/PLAIN response: expected 3 tokens, got 2", ErrMalformed},
		{"pencil", "Invalid SASL/PLAIN response: expected 3 tokens, got 1", ErrMalformed},
		{"\x00x\x00pencil\x00", "Invalid SASL/PLAIN response: expected 3 tokens, got 4", ErrMalformed},
		{"\x00x\x00pen\x00cil\x00more", "Invalid SASL/PLAIN response: expected 3 tokens, got 4", ErrMalformed},
		{"\x00\x00pencil", "Authentication failed: username not specified", ErrMalformed},
		{"\x00x\x00", "Authentication failed: password not specified", ErrMalformed},
		{"\x00x\x00wrong", invalid, ErrBadCredentials},
		{"\x00nobody\x00pencil", invalid, ErrUnknownUser},
		{"\x00nologin\x00pencil", invalid, ErrNotAllowed},
		{"\x00md5\x00pencil", invalid, ErrNotSCRAM},
		{"\x00null\x00pencil", invalid, ErrNotSCRAM},
		{"\x00many\x00pencil", invalid, ErrManyIterations},
		{"\x00broken\x00pencil", "Authentication failed: credentials for user could not be verified", ErrLookup},
		{"y\x00x\x00pencil", authzMsg, ErrAuthzID},
		{"y\x00x\x00wrong", invalid, ErrBadCredentials}, // the password is checked first
		{"\x00x\x00" + strings.Repeat("p", MaxTokenBytes), invalid, ErrTokenTooLarge},
	}
	for _, c := range cases {
		ex := start(t, Plain, false)
		_, err := ex.Step(context.Background(), []byte(c.token))
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Code != CodeSASLAuthenticationFailed || ae.Message != c.msg || !errors.Is(err, c.reason) || ex.Done() {
			t.Errorf("%q: %v, want %q (%v)", c.token, err, c.msg, c.reason)
		}
	}
	// Authorization id equal to the user; iterations below Kafka's SCRAM
	// minimum are fine for PLAIN.
	for _, tok := range []string{"x\x00x\x00pencil", "\x00few\x00pencil"} {
		ex := start(t, Plain, false)
		if _, err := ex.Step(context.Background(), []byte(tok)); err != nil || !ex.Done() {
			t.Errorf("%q: %v", tok, err)
		}
		if _, err := ex.Step(context.Background(), []byte(tok)); !errors.Is(err, ErrExchangeOver) {
			t.Errorf("second step: %v", err)
		}
	}
}

// scramLogin runs a whole exchange with xdg-go/scram's client.
func scramLogin(t *testing.T, ex Exchange, user, password, authz string) error {
	t.Helper()
	client, err := scram.SHA256.NewClient(user, password, authz)
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	msg, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	for !ex.Done() {
		out, err := ex.Step(context.Background(), []byte(msg))
		if err != nil {
			return err
		}
		if msg, err = conv.Step(string(out)); err != nil {
			t.Fatalf("client refused the server's %q: %v", out, err)
		}
	}
	if !conv.Valid() {
		t.Fatal("client did not verify the server's signature")
	}
	return nil
}

func TestScramExchange(t *testing.T) {
	for _, v := range pgVerifiers[:4] { // the client SASLpreps as Postgres did
		ex := start(t, ScramSHA256, false)
		if err := scramLogin(t, ex, v.role, v.password, ""); err != nil {
			t.Errorf("%s (%s): %v", v.role, v.why, err)
		} else if ex.Principal() != v.role {
			t.Errorf("principal %q", ex.Principal())
		}
	}
	ex := start(t, ScramSHA256, false)
	if err := scramLogin(t, ex, "a,b=c", "pencil", ""); err != nil || ex.Principal() != "a,b=c" {
		t.Errorf("escaped name: %v %q", err, ex.Principal())
	}
	ex = start(t, ScramSHA256, false)
	if err := scramLogin(t, ex, "x", "pencil", "x"); err != nil {
		t.Errorf("authzid = user: %v", err)
	}
	if _, err := ex.Step(context.Background(), []byte("n,,n=x,r=abc")); !errors.Is(err, ErrExchangeOver) {
		t.Errorf("step after success: %v", err)
	}
}

func TestScramFailures(t *testing.T) {
	generic := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	for _, c := range []struct {
		user, password, authz string
		reason                error
		msg                   string
	}{
		{"x", "wrong", "", ErrBadCredentials, generic},
		{"nobody", "pencil", "", ErrUnknownUser, generic},
		{"nologin", "pencil", "", ErrNotAllowed, generic},
		{"md5", "pencil", "", ErrNotSCRAM, generic},
		{"null", "pencil", "", ErrNotSCRAM, generic},
		{"broken", "pencil", "", ErrLookup, generic},
		{"few", "pencil", "", ErrFewIterations, generic},
		{"x", "pencil", "y", ErrAuthzID, "Authentication failed: Client requested an authorization id that is different from username"},
		{"nobody", "pencil", "y", ErrUnknownUser, generic}, // the user is looked up first
	} {
		ex := start(t, ScramSHA256, false)
		err := scramLogin(t, ex, c.user, c.password, c.authz)
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Code != CodeSASLAuthenticationFailed || ae.Message != c.msg || !errors.Is(err, c.reason) || ex.Done() {
			t.Errorf("%s/%s/%s: %v, want %v", c.user, c.password, c.authz, err, c.reason)
		}
	}
	ex := start(t, ScramSHA256, true)
	_, err := ex.Step(context.Background(), []byte("n,,n=nobody,r=abc"))
	if err == nil || err.(*AuthError).Message != strings.Replace(generic, "during authentication", "during re-authentication", 1) {
		t.Errorf("re-authentication message: %v", err)
	}
}

func TestScramMalformed(t *testing.T) {
	for _, first := range []string{
		"", "n,,", "n,,n=x", "n,,n=x,r=", "n,,r=abc,n=x",
		"y,,n=x,r=abc", "p=tls-server-end-point,,n=x,r=abc", // only "n": no channel binding
		"n,,n=,r=abc", "n,,n=a=b,r=abc", "n,,n=a=2c,r=abc", "n,a=,n=x,r=abc", "n,a=x",
		"n,,n=x,r=a bc", "n,,n=x,r=abc,", "n,,n=x,r=abc,1=2", "n,,n=x,r=abc,ext=",
		"n,,n=x\u00e9,r=abc", "n,,n=x\x00,r=abc", "n,,m=,n=x,r=abc",
		"n,,n=x,r=abc,tokenauth=true", "n,,n=x,r=abc,tokenauth=TRUE",
		"n,,n=x,r=abc,tokenauth=false,tokenauth=true",
		"n,,n=x,r=" + strings.Repeat("a", MaxTokenBytes),
	} {
		ex := start(t, ScramSHA256, false)
		if _, err := ex.Step(context.Background(), []byte(first)); err == nil {
			t.Errorf("client-first %q accepted", first)
		}
	}
	// Accepted by Kafka's grammar: an ignored m= part and extensions other
	// than tokenauth=true.
	for _, first := range []string{
		"n,,m=foo,n=x,r=abc", "n,,n=x,r=abc,foo=bar", "n,,n=x,r=abc,tokenauth=true,tokenauth=no",
	} {
		ex := start(t, ScramSHA256, false)
		out, err := ex.Step(context.Background(), []byte(first))
		if err != nil || !strings.HasPrefix(string(out), "r=abc") || !strings.Contains(string(out), ",i=4096") {
			t.Errorf("client-first %q: %q %v", first, out, err)
		}
	}
	for _, final := range []string{
		"", "c=biws", "c=biws,r=abc", "c=biws,p=AAAA", "c=bi,r=abc,p=AAAA", "c=biws,r=abc,p=AAA",
		"c=biws,r=abc,1=2,p=AAAA", "c=biws,r=abc,p=AAAA,x=y",
		"c=biws,r=abc,p=" + strings.Repeat("A", 44), // nonce is not the server's: refused
	} {
		ex := start(t, ScramSHA256, false)
		if _, err := ex.Step(context.Background(), []byte("n,,n=x,r=abc")); err != nil {
			t.Fatal(err)
		}
		_, err := ex.Step(context.Background(), []byte(final))
		if err == nil || ex.Done() {
			t.Errorf("client-final %q accepted", final)
		}
		if _, err := ex.Step(context.Background(), []byte(final)); !errors.Is(err, ErrExchangeOver) {
			t.Errorf("step after failure: %v", err)
		}
	}
}

func TestMechanisms(t *testing.T) {
	if _, err := NewMechanisms(ScramSHA512); err == nil || !strings.Contains(err.Error(), "SCRAM-SHA-256 verifiers only") {
		t.Errorf("SCRAM-SHA-512: %v", err)
	}
	for _, bad := range [][]string{{}, {"GSSAPI"}, {Plain, Plain}} {
		if _, err := NewMechanisms(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	m, err := NewMechanisms(ScramSHA256)
	if err != nil {
		t.Fatal(err)
	}
	for req, want := range map[string]int16{ScramSHA256: 0, ScramSHA512: CodeUnsupportedSASLMechanism,
		"scram-sha-256": CodeUnsupportedSASLMechanism, Plain: CodeUnsupportedSASLMechanism} {
		code, names := m.Handshake(req)
		if code != want || len(names) != 1 || names[0] != ScramSHA256 {
			t.Errorf("Handshake(%s) = %d %v", req, code, names)
		}
	}
	if _, err := m.Start(Plain, Config{Lookup: lookupOf(nil)}); err == nil {
		t.Error("PLAIN started while not enabled")
	}
	if got := Supported(); len(got) != 2 || got[0] != ScramSHA256 || got[1] != Plain {
		t.Errorf("Supported() = %v", got)
	}
}

// TestScramLibrdkafkaNonce: librdkafka before 2.10 (Debian 12 has 2.0.2)
// sends its own nonce again in front of the combined nonce in the
// client-final message, with a proof over the message as sent. Kafka 4.4
// refuses it (the nonce must equal the combined one, since
// CVE-2024-56128), and so does kafgres, even with a right proof; the exact
// nonce passes, and the server-final signs the message as sent.
func TestScramLibrdkafkaNonce(t *testing.T) {
	hm := func(key []byte, s string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	v, err := ParseVerifier(pgVerifiers[0].verifier)
	if err != nil {
		t.Fatal(err)
	}
	salted, _ := pbkdf2.Key(sha256.New, pgVerifiers[0].password, v.Salt, v.Iterations, 32)
	clientKey := hm(salted, "Client Key")
	for _, prefix := range []string{"abc", ""} {
		ex := start(t, ScramSHA256, false)
		first, err := ex.Step(context.Background(), []byte("n,,n=x,r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		nonce, _, _ := strings.Cut(strings.TrimPrefix(string(first), "r="), ",")
		withoutProof := "c=biws,r=" + prefix + nonce
		stored := sha256.Sum256(clientKey)
		authMsg := "n=x,r=abc," + string(first) + "," + withoutProof
		sig := hm(stored[:], authMsg)
		proof := make([]byte, len(sig))
		for i := range sig {
			proof[i] = clientKey[i] ^ sig[i]
		}
		final, err := ex.Step(context.Background(), []byte(withoutProof+",p="+base64.StdEncoding.EncodeToString(proof)))
		if prefix != "" {
			if err == nil || ex.Done() {
				t.Fatalf("nonce with prefix %q accepted", prefix)
			}
			continue
		}
		if err != nil || !ex.Done() {
			t.Fatalf("exact nonce: %v", err)
		}
		if want := "v=" + base64.StdEncoding.EncodeToString(hm(hm(salted, "Server Key"), authMsg)); string(final) != want {
			t.Fatalf("server-final %q, want %q", final, want)
		}
	}
}
