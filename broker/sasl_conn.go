package broker

// The SASL authenticator of a SASL listener's connection, as Kafka's
// SaslServerAuthenticator and SocketServer run it (the rules are written
// up in docs/security.md, "SASL"):
//
//   - until authentication completes, nothing reaches the handlers: only
//     ApiVersions (once) and SaslHandshake are accepted, then SaslAuthenticate
//     (v1+ handshake) or raw length-prefixed tokens (v0 handshake); any
//     other request closes the connection without an answer, except during
//     SaslAuthenticate with v1 headers, where it gets its own error
//     response with ILLEGAL_SASL_STATE before the close;
//   - a failed exchange is answered (v1+) after
//     connection.failed.authentication.delay.ms, then the connection is
//     closed (Kafka sends the answer when its delayed close comes due);
//   - afterwards, a SaslHandshake starts re-authentication (KIP-368) when
//     the session has a lifetime and the last re-authentication began at
//     least a second ago; any other request once the lifetime is over
//     closes the connection without an answer.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
	"github.com/kafgres/kafgres/security/sasl"
)

// saslMaxReceiveSize is Kafka's sasl.server.max.receive.size: the largest
// frame accepted before authentication.
const saslMaxReceiveSize = 524288

// minReauthInterval: Kafka starts at most one re-authentication a second;
// a handshake sooner than that is answered as after authentication.
const minReauthInterval = time.Second

type saslState int

const (
	saslHandshakeOrVersions saslState = iota // nothing yet: ApiVersions or SaslHandshake
	saslHandshake                            // ApiVersions answered: SaslHandshake only
	saslAuthenticate                         // mechanism chosen: tokens
	saslComplete                             // authenticated: requests go to the handlers
	saslFailNext                             // re-authentication asked for another mechanism
)

// saslSession is one connection's SASL state.
type saslSession struct {
	mechs     sasl.Mechanisms
	state     saslState
	raw       bool // v0 handshake: tokens travel as bare frames
	mechanism string
	exchange  sasl.Exchange
	reauth    bool // the exchange under way re-authenticates

	role          string    // the authenticated role, once complete
	validUntil    time.Time // the role's rolvaliduntil as last looked up; zero: none
	expiry        time.Time // end of the session's lifetime; zero: none
	lifetime      time.Duration
	reauthStarted time.Time

	refusal string // why the lookup refused the role, for the log
	oldMech string // the mechanism a re-authentication tried to leave
}

// errAuthClose ends a connection whose authentication failed or was
// refused, once any answer and the failed-authentication delay are out.
var errAuthClose = errors.New("authentication failed")

// errSessionExpired closes a connection whose session lifetime is over,
// without an answer, as Kafka disconnects an expired channel.
var errSessionExpired = errors.New("session lifetime over (connections.max.reauth.ms or the role's VALID UNTIL); the client did not re-authenticate")

// frameKey is the API key of a request frame (frames are at least 8
// bytes, readFrameSize checks).
func frameKey(frame []byte) int16 { return int16(binary.BigEndian.Uint16(frame)) }

// saslFrame runs the authenticator on one frame of a SASL listener's
// connection. handled false sends the frame on to the handlers.
func (b *Broker) saslFrame(ctx context.Context, cc *conn, frame []byte) (response, bool, error) {
	s := cc.sasl
	now := time.Now()
	if s.state == saslComplete {
		switch {
		case frameKey(frame) == 17 && !s.expiry.IsZero() && now.Sub(s.reauthStarted) >= minReauthInterval:
			s.state, s.reauth, s.reauthStarted = saslHandshake, true, now
		case !s.expiry.IsZero() && now.After(s.expiry):
			return response{}, true, errSessionExpired
		default:
			return response{}, false, nil
		}
	}
	switch s.state {
	case saslHandshakeOrVersions, saslHandshake:
		r, err := b.saslBeforeHandshake(ctx, cc, s, frame)
		return r, true, err
	case saslAuthenticate:
		if s.raw {
			r, err := b.saslRawToken(ctx, cc, s, frame)
			return r, true, err
		}
		r, err := b.saslAuthenticateFrame(ctx, cc, s, frame)
		return r, true, err
	case saslFailNext:
		return response{}, true, fmt.Errorf("SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'", s.mechanism, s.oldMech)
	}
	return response{}, true, fmt.Errorf("SASL state %d", s.state)
}

// saslBeforeHandshake accepts ApiVersions (once) and SaslHandshake.
func (b *Broker) saslBeforeHandshake(ctx context.Context, cc *conn, s *saslSession, frame []byte) (response, error) {
	key := frameKey(frame)
	switch {
	case key == 18 && s.state == saslHandshakeOrVersions && !s.reauth:
	case key == 17:
	case key == 18:
		return response{}, errors.New("unexpected ApiVersions request received during SASL authentication state HANDSHAKE_REQUEST")
	default:
		return response{}, fmt.Errorf("unexpected Kafka request of type %s during SASL handshake", kmsg.NameForKey(key))
	}
	req, err := parseRequest(frame, b.apis)
	if err != nil {
		return response{}, err
	}
	cc.clientID = req.clientID
	if key == 18 {
		var resp kmsg.Response
		if req.body == nil {
			resp = b.apiVersionsUnsupported() // the client may retry lower
		} else {
			if resp, err = handleApiVersions(ctx, b, cc, req.body.(*kmsg.ApiVersionsRequest)); err != nil {
				return response{}, err
			}
			if resp.(*kmsg.ApiVersionsResponse).ErrorCode == 0 {
				s.state = saslHandshake
			}
		}
		return response{correlation: req.correlation, resp: resp}, nil
	}
	resp, closeAfter := b.saslHandshake(cc, s, req.body.(*kmsg.SASLHandshakeRequest))
	return response{correlation: req.correlation, resp: resp, closeAfter: closeAfter}, nil
}

// saslAuthenticateFrame takes a SaslAuthenticate after a v1+ handshake.
func (b *Broker) saslAuthenticateFrame(ctx context.Context, cc *conn, s *saslSession, frame []byte) (response, error) {
	req, err := parseRequest(frame, b.apis)
	if err != nil {
		return response{}, err // an unsupported SaslAuthenticate version too: closed at once
	}
	cc.clientID = req.clientID
	if req.key != 36 {
		// That request's own error response, then the close.
		return response{correlation: req.correlation, resp: illegalSASLStateResponse(req.body), closeAfter: true}, nil
	}
	resp, closeAfter := b.saslAuthenticate(ctx, cc, s, req.body.(*kmsg.SASLAuthenticateRequest))
	return response{correlation: req.correlation, resp: resp, closeAfter: closeAfter}, nil
}

// saslRawToken steps the exchange with a token sent without a Kafka header
// (v0 handshake). A failure is not answered.
func (b *Broker) saslRawToken(ctx context.Context, cc *conn, s *saslSession, token []byte) (response, error) {
	out, err := b.saslStep(ctx, cc, s, token)
	if err != nil {
		return response{closeAfter: true}, nil
	}
	return response{token: out, isToken: true}, nil
}

// saslStep steps the exchange; on completion the connection is the role's.
// An error is an *sasl.AuthError, already logged.
func (b *Broker) saslStep(ctx context.Context, cc *conn, s *saslSession, token []byte) ([]byte, error) {
	out, err := s.exchange.Step(ctx, token)
	if err != nil {
		logAuthFailure(cc.log, s, err)
		return nil, err
	}
	if !s.exchange.Done() {
		return out, nil
	}
	user := s.exchange.Principal()
	if s.reauth && user != s.role {
		msg := fmt.Sprintf("Cannot change principals during re-authentication from User.%s: User.%s", s.role, user)
		err := &sasl.AuthError{Code: sasl.CodeSASLAuthenticationFailed, Message: msg, Reason: errors.New("principal changed")}
		logAuthFailure(cc.log, s, err)
		return nil, err
	}
	now := time.Now()
	s.role, s.state, s.exchange = user, saslComplete, nil
	s.expiry, s.lifetime = time.Time{}, 0
	if d, ok := b.sessionLifetime(s, now); ok {
		s.expiry, s.lifetime = now.Add(d), d
	}
	if !s.reauth {
		cc.principal = acl.Principal{Type: acl.UserType, Name: user}
		cc.log.Debug("SASL authenticated", "principal", cc.principal, "mechanism", s.mechanism)
	}
	s.reauth = false
	b.sessions.add(cc, user)
	return out, nil
}

// sessionLifetime is Kafka's ReauthInfo: the shorter of
// connections.max.reauth.ms (when set) and the time left until the role's
// VALID UNTIL (when it has one); none when neither applies.
func (b *Broker) sessionLifetime(s *saslSession, now time.Time) (time.Duration, bool) {
	d, ok := time.Duration(0), false
	if b.cfg.ConnectionsMaxReauth > 0 {
		d, ok = b.cfg.ConnectionsMaxReauth, true
	}
	if !s.validUntil.IsZero() {
		if left := s.validUntil.Sub(now); !ok || left < d {
			d, ok = left, true
		}
	}
	return max(d, 0), ok
}
