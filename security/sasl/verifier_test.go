package sasl

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"testing"
)

// A verifier made by Postgres (password "pencil") is what
// VerifierFromSaltedPassword makes from the same salt and iterations.
func TestVerifierFromSaltedPasswordIsPostgres(t *testing.T) {
	const postgres = "SCRAM-SHA-256$4096:+FtRzwUvRTUUIc6d1nt9Xg==$SlJy3wwGBWBE1riacMg3WO7o9xzA7f6davgdONslktM=:myMA7xhYP5aq3+0PpRbeFTBMuWp+RGePmcSXAaXOuJM="
	salt, _ := base64.StdEncoding.DecodeString("+FtRzwUvRTUUIc6d1nt9Xg==")
	salted, err := pbkdf2.Key(sha256.New, "pencil", salt, 4096, 32)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifierFromSaltedPassword(salted, salt, 4096)
	if err != nil || got != postgres {
		t.Fatalf("got %q, %v; want %q", got, err, postgres)
	}
	if _, err := ParseVerifier(got); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifierFromSaltedPassword(nil, salt, 4096); err == nil {
		t.Fatal("empty salted password accepted")
	}
}
