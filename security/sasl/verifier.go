package sasl

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// keyLen is SCRAM_KEY_LEN: the SHA-256 output size of StoredKey and ServerKey.
const keyLen = 32

// ErrNotSCRAM says a role's pg_authid.rolpassword cannot be used for SCRAM
// (nor for PLAIN, which we verify through the same verifier): it is NULL, an
// MD5 hash, a plaintext password left from an old release, or a string that
// Postgres's own parser would not take as a SCRAM secret.
var ErrNotSCRAM = errors.New("cannot authenticate with SCRAM: the role has no SCRAM-SHA-256 verifier")

// Verifier is a parsed SCRAM-SHA-256 secret as Postgres stores it in
// pg_authid.rolpassword.
type Verifier struct {
	Iterations int
	Salt       []byte // decoded
	StoredKey  [keyLen]byte
	ServerKey  [keyLen]byte
}

// ParseVerifier parses `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`
// with the checks of Postgres's parse_scram_secret (auth-scram.c), so that a
// secret Postgres accepts is accepted here and one it refuses is refused:
// fields are split the way strtok splits them, the iteration count is read as
// strtol reads it and then narrowed to a C int, and the base64 fields are
// decoded by Postgres's decoder (pg_b64_decode), whose rules differ from Go's.
// On top of Postgres, an iteration count below 1 is refused: Postgres would
// run one PBKDF2 round and announce a count no client accepts.
func ParseVerifier(secret string) (*Verifier, error) {
	if strings.HasPrefix(secret, "md5") {
		return nil, fmt.Errorf("%w (MD5 hash)", ErrNotSCRAM)
	}
	tok := strtok{rest: secret}
	scheme, ok1 := tok.next("$")
	iters, ok2 := tok.next(":")
	salt64, ok3 := tok.next("$")
	stored64, ok4 := tok.next(":")
	server64, ok5 := tok.remainder()
	if !(ok1 && ok2 && ok3 && ok4 && ok5) || scheme != "SCRAM-SHA-256" {
		return nil, fmt.Errorf("%w (not of the form SCRAM-SHA-256$<iterations>:<salt>$<storedkey>:<serverkey>)", ErrNotSCRAM)
	}
	n, ok := cStrtolInt(iters)
	if !ok {
		return nil, fmt.Errorf("%w (iteration count %q)", ErrNotSCRAM, iters)
	}
	if n < 1 {
		return nil, fmt.Errorf("%w (iteration count %d)", ErrNotSCRAM, n)
	}
	salt, ok := pgBase64Decode(salt64)
	if !ok {
		return nil, fmt.Errorf("%w (salt is not base64)", ErrNotSCRAM)
	}
	v := &Verifier{Iterations: n, Salt: salt}
	for _, f := range []struct {
		text string
		dst  *[keyLen]byte
		name string
	}{{stored64, &v.StoredKey, "StoredKey"}, {server64, &v.ServerKey, "ServerKey"}} {
		b, ok := pgBase64Decode(f.text)
		if !ok || len(b) != keyLen {
			return nil, fmt.Errorf("%w (%s is not %d bytes of base64)", ErrNotSCRAM, f.name, keyLen)
		}
		copy(f.dst[:], b)
	}
	return v, nil
}

// strtok walks a string as successive C strtok calls would: leading
// delimiters are skipped, and the token ends at the next delimiter, which is
// consumed.
type strtok struct{ rest string }

func (t *strtok) next(delims string) (string, bool) {
	s := strings.TrimLeft(t.rest, delims)
	if s == "" {
		t.rest = ""
		return "", false
	}
	if i := strings.IndexAny(s, delims); i >= 0 {
		t.rest = s[i+1:]
		return s[:i], true
	}
	t.rest = ""
	return s, true
}

// remainder is strtok(NULL, ""): whatever is left, if anything.
func (t *strtok) remainder() (string, bool) {
	s := t.rest
	t.rest = ""
	return s, s != ""
}

// cStrtolInt reads s as `*p = strtol(s, &end, 10)` with the checks
// `*end == '\0' && errno == 0`, then stores the long in a C int (LP64:
// the low 32 bits, two's complement), as parse_scram_secret does.
func cStrtolInt(s string) (int, bool) {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\n\v\f\r", s[i]) >= 0 {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var v uint64
	const limit = 1 << 63 // |LONG_MIN|; LONG_MAX is limit-1
	overflow := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if !overflow {
			v = v*10 + uint64(s[i]-'0')
			if v > limit {
				overflow = true
			}
		}
		i++
	}
	if i == start || i != len(s) {
		return 0, false // no digits (end pointer at the start), or junk after them
	}
	if overflow || (!neg && v == limit) {
		return 0, false // ERANGE
	}
	l := int64(v)
	if neg {
		l = -l
	}
	return int(int32(l)), true
}

// pgBase64Decode decodes as Postgres's pg_b64_decode: whitespace is an
// error, '=' may first appear only at the third or fourth place of a
// quantum and from then on only shortens each later quantum's output, and
// the input must be whole quanta.
func pgBase64Decode(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s)*3/4)
	var buf uint32
	pos, end := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var b uint32
		switch {
		case c == '=':
			if end == 0 {
				switch pos {
				case 2:
					end = 1
				case 3:
					end = 2
				default:
					return nil, false
				}
			}
		case c >= 'A' && c <= 'Z':
			b = uint32(c - 'A')
		case c >= 'a' && c <= 'z':
			b = uint32(c-'a') + 26
		case c >= '0' && c <= '9':
			b = uint32(c-'0') + 52
		case c == '+':
			b = 62
		case c == '/':
			b = 63
		default:
			return nil, false // whitespace or any other symbol
		}
		buf = buf<<6 + b
		pos++
		if pos == 4 {
			out = append(out, byte(buf>>16))
			if end == 0 || end > 1 {
				out = append(out, byte(buf>>8))
			}
			if end == 0 || end > 2 {
				out = append(out, byte(buf))
			}
			buf, pos = 0, 0
		}
	}
	if pos != 0 {
		return nil, false
	}
	return out, true
}

// VerifierFromSaltedPassword is the Postgres SCRAM-SHA-256 secret for a
// credential given as Kafka's AlterUserScramCredentials gives it: the salt,
// the iteration count and SaltedPassword = PBKDF2-HMAC-SHA-256(password,
// salt, iterations), computed by the client. StoredKey =
// H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
// "Server Key"), as Kafka's ScramFormatter and Postgres's scram_build_secret
// compute them.
func VerifierFromSaltedPassword(saltedPassword, salt []byte, iterations int) (string, error) {
	if len(saltedPassword) == 0 || len(salt) == 0 || iterations < 1 {
		return "", errors.New("SCRAM credential needs a salted password, a salt and a positive iteration count")
	}
	hm := func(key []byte, msg string) []byte {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(msg))
		return mac.Sum(nil)
	}
	stored := sha256.Sum256(hm(saltedPassword, "Client Key"))
	server := hm(saltedPassword, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(server)), nil
}
