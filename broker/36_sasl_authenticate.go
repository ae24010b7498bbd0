package broker

// SaslAuthenticate: v0-2
//
// Behavior:
//   - on a SASL listener during authentication (after a v1 handshake,
//     sasl_conn.go): the auth bytes step the exchange (security/sasl:
//     SCRAM-SHA-256 or PLAIN against the role's verifier in pg_authid) and
//     the server's bytes come back; a failure is answered with
//     SASL_AUTHENTICATION_FAILED and Kafka's message after
//     connection.failed.authentication.delay.ms, then the connection is
//     closed (as Kafka, which answers when its delayed close comes due)
//   - on success the session lifetime is the shorter of
//     connections.max.reauth.ms (when above 0) and the time left until the
//     role's VALID UNTIL (when set); 0 when neither applies
//   - after authentication, and on PLAINTEXT and SSL listeners (Kafka's
//     KafkaApis answer): ILLEGAL_SASL_STATE "SaslAuthenticate request
//     received after successful authentication", connection kept
//
// Version notes:
//   - v1: session lifetime (0 until the exchange is complete); a client
//     that sends v1+ supports re-authentication; v2: flexible

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/sasl"
)

func handleSaslAuthenticate(_ context.Context, _ *Broker, _ *conn, req *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate request received after successful authentication"
	resp.ErrorMessage = &msg
	resp.SASLAuthBytes = []byte{}
	return resp, nil
}

// saslAuthenticate steps the connection's exchange with one request;
// closeAfter when it failed.
func (b *Broker) saslAuthenticate(ctx context.Context, cc *conn, s *saslSession, req *kmsg.SASLAuthenticateRequest) (resp *kmsg.SASLAuthenticateResponse, closeAfter bool) {
	resp = req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	out, err := b.saslStep(ctx, cc, s, req.SASLAuthBytes)
	if err != nil {
		var ae *sasl.AuthError
		if !errors.As(err, &ae) {
			ae = &sasl.AuthError{Code: sasl.CodeSASLAuthenticationFailed, Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + s.mechanism}
		}
		resp.ErrorCode, resp.ErrorMessage = ae.Code, &ae.Message
		resp.SASLAuthBytes = []byte{}
		return resp, true
	}
	if out == nil {
		out = []byte{}
	}
	resp.SASLAuthBytes = out
	if req.Version >= 1 && s.state == saslComplete && !s.expiry.IsZero() {
		resp.SessionLifetimeMillis = s.lifetime.Milliseconds()
	}
	return resp, false
}
