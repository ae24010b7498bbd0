package broker

// SaslHandshake: v0-1
//
// Behavior:
//   - on a SASL listener before authentication (sasl_conn.go): an enabled
//     mechanism gets error 0 and the listener's enabled mechanisms, and the
//     exchange starts; any other name gets UNSUPPORTED_SASL_MECHANISM with
//     the same list, sent after connection.failed.authentication.delay.ms,
//     and the connection is closed. Names match
//     case-sensitively, as in Kafka. SCRAM-SHA-512 is never enabled
//     (Postgres keeps SCRAM-SHA-256 verifiers only); PLAIN only on SASL_SSL
//   - re-authentication (KIP-368) with another mechanism than the session's
//     is answered with error 0, and the next frame closes the connection
//   - after authentication, and on PLAINTEXT and SSL listeners (Kafka's
//     KafkaApis answer): ILLEGAL_SASL_STATE with no mechanisms, connection
//     kept
//
// Version notes:
//   - v0: the SASL tokens that follow are bare size-prefixed frames, no
//     Kafka header; v1: they are SaslAuthenticate requests

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/sasl"
)

func handleSaslHandshake(_ context.Context, _ *Broker, _ *conn, req *kmsg.SASLHandshakeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	resp.SupportedMechanisms = []string{}
	return resp, nil
}

// saslHandshake answers a handshake on a SASL listener before (or to
// start re-) authentication; closeAfter when the mechanism is refused.
func (b *Broker) saslHandshake(cc *conn, s *saslSession, req *kmsg.SASLHandshakeRequest) (resp *kmsg.SASLHandshakeResponse, closeAfter bool) {
	resp = req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	code, names := s.mechs.Handshake(req.Mechanism)
	resp.ErrorCode, resp.SupportedMechanisms = code, names
	if code != 0 {
		cc.log.Info("SASL mechanism refused", "mechanism", req.Mechanism, "enabled", names)
		return resp, true
	}
	if s.reauth && req.Mechanism != s.mechanism {
		s.oldMech, s.mechanism, s.state = s.mechanism, req.Mechanism, saslFailNext
		return resp, false
	}
	ex, err := s.mechs.Start(req.Mechanism, sasl.Config{Lookup: b.roleLookup(s), Reauthenticating: s.reauth})
	if err != nil { // the handshake accepted it, so this is a bug
		cc.log.Error("SASL exchange", "err", err)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, true
	}
	s.mechanism, s.exchange, s.state, s.refusal = req.Mechanism, ex, saslAuthenticate, ""
	s.raw = req.Version == 0
	return resp, false
}
