package sasl

import (
	"unicode/utf8"

	"github.com/xdg-go/stringprep"
	"golang.org/x/text/unicode/norm"
)

// pgSASLprep turns a password into the bytes Postgres hashed when it made
// the role's verifier (scram_build_secret after pg_saslprep, saslprep.c), so
// a PLAIN password is checked against what Postgres really stored:
//
//   - pure ASCII is used as it is (no prohibited-character check at all);
//   - anything that is not valid UTF-8, or that SASLprep refuses, is used as
//     the raw bytes (Postgres's documented leniency);
//   - otherwise: non-ASCII spaces (C.1.2) become U+0020, B.1 characters are
//     dropped, an empty result is refused, and the NFKC form is used.
//
// Postgres checks prohibited (C.1.2–C.9), unassigned (A.1) and
// bidirectional rules on the mapped string before normalisation, not after
// it as RFC 3454 says; we do the same. The RFC 3454 tables are
// xdg-go/stringprep's. NFKC is Go's (a newer Unicode than Postgres's, which
// gives the same result: every code point not assigned in Unicode 3.2 is
// refused first, and normalisation of assigned ones is stable).
func pgSASLprep(password []byte) []byte {
	ascii := true
	for _, c := range password {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii || !utf8.Valid(password) {
		return password
	}
	mapped := make([]rune, 0, len(password))
	for _, r := range string(password) {
		switch {
		case stringprep.TableC1_2.Contains(r):
			mapped = append(mapped, ' ')
		case isMappedToNothing(r):
		default:
			mapped = append(mapped, r)
		}
	}
	if len(mapped) == 0 {
		return password
	}
	for _, r := range mapped {
		if prohibited(r) || stringprep.TableA1.Contains(r) {
			return password
		}
	}
	randAL := false
	for _, r := range mapped {
		if stringprep.TableD1.Contains(r) {
			randAL = true
			break
		}
	}
	if randAL {
		for _, r := range mapped {
			if stringprep.TableD2.Contains(r) {
				return password
			}
		}
		if !stringprep.TableD1.Contains(mapped[0]) || !stringprep.TableD1.Contains(mapped[len(mapped)-1]) {
			return password
		}
	}
	return norm.NFKC.Bytes([]byte(string(mapped)))
}

// isMappedToNothing is RFC 3454 B.1 as Postgres's table has it:
// xdg-go/stringprep's lacks U+1806 (the Mongolian "todo" soft hyphen, Unicode's
// name for it).
func isMappedToNothing(r rune) bool {
	_, ok := stringprep.TableB1.Map(r)
	return ok || r == 0x1806
}

// prohibited is SASLprep's prohibited output: RFC 3454 C.1.2, C.2.1, C.2.2,
// C.3, C.4, C.5, C.6, C.7, C.8 and C.9.
func prohibited(r rune) bool {
	for _, t := range []stringprep.Set{
		stringprep.TableC1_2, stringprep.TableC2_1, stringprep.TableC2_2,
		stringprep.TableC3, stringprep.TableC4, stringprep.TableC5,
		stringprep.TableC6, stringprep.TableC7, stringprep.TableC8,
		stringprep.TableC9,
	} {
		if t.Contains(r) {
			return true
		}
	}
	return false
}
