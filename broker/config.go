package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/kafgres/kafgres/security/principal"
	"github.com/kafgres/kafgres/security/sasl"
	"github.com/kafgres/kafgres/security/tlsconf"
)

// Config is everything the broker is told at start. The supervisor builds it
// from the kafgres.* GUCs and passes it as flags; nothing else reads the
// environment.
type Config struct {
	ListenAddr       string // host:port for the Kafka listener
	AdvertisedHost   string // host returned in Metadata
	AdvertisedPort   int32  // port returned in Metadata
	DataDir          string // root of the segment log
	DSN              string // libpq-style connection string back into Postgres
	AutoCreateTopics bool
	DefaultPartition int32 // partitions of auto-created topics
	Fsync            bool

	NodeID          int32         // always 1: kafgres is a single-broker cluster
	MaxRequestBytes int32         // socket.request.max.bytes: the largest request frame
	MaxMessageBytes int32         // max.message.bytes (topic default)
	SegmentBytes    int64         // log.segment.bytes
	MirrorInterval  time.Duration // how often log ends are copied into Postgres

	// QueuedMaxRequestBytes is queued.max.request.bytes: the request bytes
	// all connections together may have read and not yet handled; a
	// connection waits for room before it reads a frame's body. Zero means
	// the kafgres default, 256 MiB (Kafka's -1, unbounded, is allowed). It
	// may not be below MaxRequestBytes, as Kafka requires.
	QueuedMaxRequestBytes int64
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection that sends
	// no request (or reads no response) for this long is closed.
	ConnectionsMaxIdle time.Duration
	// RequestReadTimeout bounds the time between a frame's size arriving
	// and its last byte: a peer that stalls mid-frame is dropped and its
	// share of QueuedMaxRequestBytes freed. kafgres's own; Kafka has none.
	RequestReadTimeout time.Duration

	// RetentionCheckInterval is log.retention.check.interval.ms: how often
	// segments past their topic's retention.ms/retention.bytes go.
	RetentionCheckInterval time.Duration
	// CleanerBackoff is the static log.cleaner.backoff.ms (zero: Kafka's
	// 15 s): how often the log cleaner looks for compacted partitions to
	// clean (broker/cleaner.go). A dynamic log.cleaner.backoff.ms
	// (AlterConfigs) overrides it, as in Kafka.
	CleanerBackoff time.Duration

	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots:
	// how many incremental fetch sessions the broker keeps (zero: Kafka's
	// 1000; negative: none, every fetch is answered in full).
	FetchSessionCacheSlots int
	// FetchCopy serves fetches through memory on plaintext listeners too,
	// instead of sending segment records with sendfile(2)
	// (fetch_sendfile.go; kafgres.fetch_sendfile = off).
	FetchCopy bool
	// LogCachedTail is kafgres.log_cached_tail in bytes: how much of each
	// partition's newest durable log stays in the page cache
	// (storage/segment/pagecache.go); negative: all of it, as in Kafka.
	LogCachedTail int64

	// SegmentArchiveCommand is kafgres.segment_archive_command: run through
	// /bin/sh for every file of every sealed segment, as Postgres runs
	// archive_command (broker/archiver.go). Empty: no archiving, and
	// nothing waits for an archive before reclaiming segments.
	SegmentArchiveCommand string
	// ArchiveInterval is how often the archiver looks for sealed segments
	// when nothing woke it; zero: 1 s. ArchiveRetryMin and ArchiveRetryMax
	// bound the wait after a failed command (zero: 1 s and 1 min).
	ArchiveInterval, ArchiveRetryMin, ArchiveRetryMax time.Duration

	// Consumer groups. GroupInitialRebalanceDelay is
	// group.initial.rebalance.delay.ms: zero means Kafka's default (3 s),
	// a negative value no delay.
	GroupInitialRebalanceDelay time.Duration
	GroupMinSessionTimeout     time.Duration // group.min.session.timeout.ms
	GroupMaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	GroupMaxSize               int           // group.max.size

	// Transactions (the transaction coordinator, package txn), with
	// Kafka's names; zero means Kafka's default.
	// TransactionMaxTimeout is transaction.max.timeout.ms (15 min);
	// TransactionalIDExpiration transactional.id.expiration.ms (7 days);
	// TransactionAbortInterval
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s);
	// TransactionRemoveExpiredInterval
	// transaction.remove.expired.transaction.cleanup.interval.ms (1 h).
	TransactionMaxTimeout            time.Duration
	TransactionalIDExpiration        time.Duration
	TransactionAbortInterval         time.Duration
	TransactionRemoveExpiredInterval time.Duration

	// ProducerIDExpiration is producer.id.expiration.ms (1 day): a
	// partition forgets an idempotent producer idle this long with no open
	// transaction. ProducerIDExpirationCheckInterval is
	// producer.id.expiration.check.interval.ms (10 min). Zero means
	// Kafka's default.
	ProducerIDExpiration              time.Duration
	ProducerIDExpirationCheckInterval time.Duration

	// Authorization (docs/security.md, "Authorization"). Authorizer is
	// auto, on or off ("" is auto): auto enforces ACLs when a listener
	// authenticates clients. SuperUsers is Kafka's super.users
	// (";"-separated principals); Postgres superusers are super users too.
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found.
	Authorizer                string
	SuperUsers                string
	AllowEveryoneIfNoACLFound bool
	// Listeners are Kafka's listeners with their advertised endpoints.
	// Empty: one PLAINTEXT listener on ListenAddr, advertised as
	// AdvertisedHost:AdvertisedPort (the --listen flags of old).
	Listeners []Listener
	// AllowPlaintextRemote (kafgres.allow_plaintext_remote) lets a
	// PLAINTEXT listener bind an address other machines can reach.
	AllowPlaintextRemote bool
	// TLS is the certificate, key and CA files of SSL and SASL_SSL
	// listeners, ssl.client.auth (SSL listeners) and the lowest version.
	TLS tlsconf.Files
	// TLSHandshakeTimeout bounds a new connection's TLS handshake.
	TLSHandshakeTimeout time.Duration
	// SASLMechanisms is sasl.enabled.mechanisms. Empty: SCRAM-SHA-256 and
	// PLAIN; PLAIN is never offered on SASL_PLAINTEXT (it would send the
	// password in clear).
	SASLMechanisms []string
	// ClientRole (kafgres.client_role), when set, is the Postgres role a
	// SASL user must be a member of.
	ClientRole string
	// ConnectionsMaxReauth is connections.max.reauth.ms: zero, Kafka's
	// default, lets sessions last until the role expires.
	ConnectionsMaxReauth time.Duration
	// PrincipalMappingRules is ssl.principal.mapping.rules (default
	// DEFAULT): a client certificate's subject to a user name.
	PrincipalMappingRules string
	// FailedAuthDelay is connection.failed.authentication.delay.ms: how long
	// a connection is kept after a failed authentication is answered.
	FailedAuthDelay time.Duration
	// RoleCheckInterval is how often the roles of authenticated sessions
	// are checked again: a dropped, NOLOGIN or expired role's connections
	// are closed within it.
	RoleCheckInterval time.Duration

	// LogLevel, when set, is the level of the logger the broker was given;
	// IncrementalAlterConfigs on the BROKER_LOGGER "root" changes it.
	LogLevel *slog.LevelVar
}

// DefaultQueuedMaxRequestBytes is kafgres's queued.max.request.bytes
// (Kafka's default, -1, leaves request memory unbounded).
const DefaultQueuedMaxRequestBytes = 256 << 20

// maxDecompressedBytes bounds what one batch's records may inflate to, and
// the working memory of all decompressions in progress: no more than one
// request could carry uncompressed.
func (c *Config) maxDecompressedBytes() int64 { return int64(c.MaxRequestBytes) }

// Defaults are Kafka's broker defaults where Kafka has one.
func (c *Config) setDefaults() {
	if c.NodeID == 0 {
		c.NodeID = 1
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = 100 << 20 // 104857600, Kafka's socket.request.max.bytes
	}
	if c.QueuedMaxRequestBytes == 0 {
		c.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if c.ConnectionsMaxIdle == 0 {
		c.ConnectionsMaxIdle = 10 * time.Minute // Kafka's connections.max.idle.ms
	}
	if c.RequestReadTimeout == 0 {
		c.RequestReadTimeout = 30 * time.Second
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1048588 // Kafka's max.message.bytes
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = 1 << 30
	}
	if c.MirrorInterval == 0 {
		c.MirrorInterval = 5 * time.Millisecond
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = 5 * time.Minute
	}
	if c.DefaultPartition == 0 {
		c.DefaultPartition = 1
	}
	if c.GroupInitialRebalanceDelay == 0 {
		c.GroupInitialRebalanceDelay = 3 * time.Second
	}
	if c.GroupMinSessionTimeout == 0 {
		c.GroupMinSessionTimeout = 6 * time.Second
	}
	if c.GroupMaxSessionTimeout == 0 {
		c.GroupMaxSessionTimeout = 30 * time.Minute
	}
	if c.FetchSessionCacheSlots == 0 {
		c.FetchSessionCacheSlots = defaultFetchSessionSlots
	}
	if c.GroupMaxSize == 0 {
		c.GroupMaxSize = math.MaxInt32 // Kafka's default: no limit
	}
	if c.TransactionMaxTimeout == 0 {
		c.TransactionMaxTimeout = 15 * time.Minute
	}
	if c.TransactionalIDExpiration == 0 {
		c.TransactionalIDExpiration = 7 * 24 * time.Hour
	}
	if c.TransactionAbortInterval == 0 {
		c.TransactionAbortInterval = 10 * time.Second
	}
	if c.TransactionRemoveExpiredInterval == 0 {
		c.TransactionRemoveExpiredInterval = time.Hour
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = 24 * time.Hour
	}
	if c.ProducerIDExpirationCheckInterval == 0 {
		c.ProducerIDExpirationCheckInterval = 10 * time.Minute
	}
	if len(c.Listeners) == 0 && c.ListenAddr != "" {
		c.Listeners = []Listener{{Name: string(Plaintext), Protocol: Plaintext, Addr: c.ListenAddr,
			AdvertisedHost: c.AdvertisedHost, AdvertisedPort: c.AdvertisedPort}}
	}
	if len(c.SASLMechanisms) == 0 {
		c.SASLMechanisms = sasl.Supported()
	}
	if c.PrincipalMappingRules == "" {
		c.PrincipalMappingRules = principal.DefaultRules
	}
	if c.TLSHandshakeTimeout == 0 {
		c.TLSHandshakeTimeout = 10 * time.Second
	}
	if c.FailedAuthDelay == 0 {
		c.FailedAuthDelay = 100 * time.Millisecond // Kafka's connection.failed.authentication.delay.ms
	}
	if c.RoleCheckInterval == 0 {
		c.RoleCheckInterval = 5 * time.Second
	}
	if c.LogLevel == nil {
		c.LogLevel = new(slog.LevelVar) // changes then only affect what Kafka clients are told
	}
}

func (c *Config) validate() error {
	var errs []error
	if len(c.Listeners) == 0 {
		errs = append(errs, errors.New("no listener: listen address is empty"))
	}
	for _, l := range c.Listeners {
		if l.AdvertisedPort <= 0 || l.AdvertisedPort > 65535 {
			errs = append(errs, fmt.Errorf("listener %s: advertised port %d out of range", l, l.AdvertisedPort))
		}
		if _, _, err := net.SplitHostPort(l.Addr); err != nil {
			errs = append(errs, fmt.Errorf("listener %s: %w", l, err))
		}
		if l.Protocol.SASL() {
			if _, err := listenerMechanisms(c.SASLMechanisms, l.Protocol); err != nil {
				errs = append(errs, fmt.Errorf("listener %s: %w", l, err))
			}
		}
	}
	if err := checkPlaintextRemote(c.Listeners, c.AllowPlaintextRemote); err != nil {
		errs = append(errs, err)
	}
	if _, err := principal.ParseRules(c.PrincipalMappingRules); err != nil {
		errs = append(errs, fmt.Errorf("ssl.principal.mapping.rules: %w", err))
	}
	if c.ConnectionsMaxReauth < 0 {
		errs = append(errs, errors.New("connections.max.reauth.ms must not be negative"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data directory is empty"))
	}
	if c.DSN == "" {
		errs = append(errs, errors.New("dsn is empty"))
	}
	if err := c.validateAuthorizer(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxRequestBytes < 8 {
		errs = append(errs, fmt.Errorf("socket.request.max.bytes %d must be at least 8", c.MaxRequestBytes))
	}
	if c.QueuedMaxRequestBytes > 0 && c.QueuedMaxRequestBytes < int64(c.MaxRequestBytes) {
		errs = append(errs, fmt.Errorf("queued.max.request.bytes %d must be -1 or at least socket.request.max.bytes (%d)", c.QueuedMaxRequestBytes, c.MaxRequestBytes))
	}
	if c.ConnectionsMaxIdle < 0 || c.RequestReadTimeout < 0 {
		errs = append(errs, errors.New("connection timeouts must not be negative"))
	}
	if c.TransactionMaxTimeout < 0 || c.TransactionalIDExpiration < 0 || c.TransactionAbortInterval < 0 || c.TransactionRemoveExpiredInterval < 0 {
		errs = append(errs, errors.New("transaction timeouts and intervals must not be negative"))
	}
	if c.ProducerIDExpiration < 0 || c.ProducerIDExpirationCheckInterval < 0 {
		errs = append(errs, errors.New("producer id expiration and its check interval must not be negative"))
	}
	if c.DefaultPartition < 1 {
		errs = append(errs, fmt.Errorf("default partitions %d must be at least 1", c.DefaultPartition))
	}
	return errors.Join(errs...)
}
