package coordinator

// The classic consumer-group coordinator (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup and the group side of OffsetCommit), following Apache Kafka's
// GroupMetadataManager/ClassicGroup state machine:
//
//	Empty ──join──► PreparingRebalance ──all joined / timeout──► CompletingRebalance
//	  ▲                  ▲       │                                   │ leader syncs
//	  └── no members ────┘       └─────── member change ◄── Stable ◄─┘
//
// Each group has its own mutex; timers (session, rebalance, initial delay,
// pending sync) run their callbacks under it. A JoinGroup or SyncGroup that
// has to wait parks a buffered channel on its member and waits on it outside
// the lock, so a rebalance blocks only the connections taking part in it.
//
// What Kafka writes to __consumer_offsets as the group's metadata is stored
// (Config.Store) at the same points: when a rebalance completes, before any
// member hears its assignment, and when the group becomes Empty. A
// restarted broker restores the groups from it (Restore), so members keep
// their ids, generation and assignment, as after a Kafka coordinator
// failover. Generations must never go back: cooperative assignors settle
// two members' claims to one partition by the generation each claims it
// in (KIP-792), and a member that owned it before a restart would win over
// its current owner with a generation from before the restart.

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newMemberJoinTimeout bounds how long a new member's parked JoinGroup may
// keep it in the group (Kafka's group.classic.new.member.join.timeout): its
// session timer cannot run while it has no member id to heartbeat with.
const newMemberJoinTimeout = 5 * time.Minute

// Config holds the broker settings the coordinator uses, and what it needs
// from the rest of the broker.
type Config struct {
	InitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms
	MinSessionTimeout     time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	MaxSize               int           // group.max.size
	// group.consumer.session.timeout.ms (KIP-848 groups); zero: Kafka's 45 s
	ConsumerSessionTimeout time.Duration

	// Topics lists the topics that exist, for the consumer-group
	// assignors. It runs under a group's lock, so it must not call back
	// into the coordinator. Nil: no topics.
	Topics func() []Topic
	// Clock runs the session, rebalance and delay timers; nil: the real
	// clock. Tests pass a fake one to step through timeouts.
	Clock Clock
	// Store keeps each classic group's durable state; nil: none, the
	// groups live in memory only.
	Store Store
}

// Store keeps each classic group's record: the bytes of Kafka's
// GroupMetadataValue, as Kafka writes them to __consumer_offsets. It is
// called under the group's lock.
type Store interface {
	SaveGroup(ctx context.Context, group string, value []byte) error
	DeleteGroup(ctx context.Context, group string) error
}

// storeTimeout bounds one write of a group's record (Kafka's
// offsets.commit.timeout.ms); the group's other requests wait for it.
const storeTimeout = 5 * time.Second

// Groups is the coordinator for every group: classic groups here, consumer
// groups (KIP-848) in consumer_groups.go. One group id names one group of
// either kind; gs.mu guards both maps, and is taken before any group's lock.
type Groups struct {
	cfg   Config
	log   *slog.Logger
	clock Clock

	mu       sync.Mutex
	all      map[string]*group
	consumer map[string]*consumerGroup
}

// New returns a coordinator with no groups.
func New(cfg Config, log *slog.Logger) *Groups {
	clock := cfg.Clock
	if clock == nil {
		clock = realClock{}
	}
	return &Groups{cfg: cfg, log: log, clock: clock, all: map[string]*group{}, consumer: map[string]*consumerGroup{}}
}

type groupState int8

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
	groupDead
)

// String is Kafka's name of the state, as DescribeGroups and ListGroups show it.
func (s groupState) String() string {
	switch s {
	case groupEmpty:
		return "Empty"
	case groupPreparingRebalance:
		return "PreparingRebalance"
	case groupCompletingRebalance:
		return "CompletingRebalance"
	case groupStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// Protocol is one assignor a member supports, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []Protocol // in the member's order of preference
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	assignment       []byte
	isNew            bool            // joined, first JoinGroup not yet answered
	joinWait         chan JoinResult // non-nil while a JoinGroup waits
	syncWait         chan SyncResult // non-nil while a SyncGroup waits
	heartbeat        timer           // session expiry
}

func (m *member) awaitingJoin() bool { return m.joinWait != nil }
func (m *member) awaitingSync() bool { return m.syncWait != nil }

// sameProtocols reports whether a rejoin changes nothing the leader assigned from.
func (m *member) sameProtocols(ps []Protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

type group struct {
	name string
	gs   *Groups

	mu           sync.Mutex
	state        groupState
	prevState    groupState
	generation   int32
	protocolType string // set by the first member; kept while Empty
	protocol     string // selected protocol; empty when none
	leader       string

	members map[string]*member
	order   []string          // member ids in join order: leader succession
	pending map[string]*timer // v4+ joiners told MEMBER_ID_REQUIRED
	static  map[string]string // group.instance.id → member id

	pendingSync    map[string]bool // members yet to SyncGroup this generation
	newMemberAdded bool            // extends the initial rebalance delay
	joinTimer      timer           // rebalance timeout or initial delay
	syncTimer      timer           // pending-sync expiry
}

// schedule runs fn under g.mu after d unless tm is stopped or rescheduled
// first, or the group died.
func (g *group) schedule(tm *timer, d time.Duration, fn func()) {
	tm.stop()
	token := tm.token
	tm.t = g.gs.clock.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if tm.token != token || g.state == groupDead {
			return
		}
		tm.t = nil
		fn()
	})
}

// JoinRequest is a JoinGroup as the coordinator sees it.
type JoinRequest struct {
	Group                string
	MemberID             string
	InstanceID           *string
	ClientID, ClientHost string
	ProtocolType         string
	Protocols            []Protocol // owned by the coordinator once passed
	SessionTimeout       time.Duration
	RebalanceTimeout     time.Duration
	RequireKnownMemberID bool // v4+: a new dynamic member first gets MEMBER_ID_REQUIRED
	Reason               string
}

// JoinResult is a JoinGroup answer; the handler encodes it per version.
type JoinResult struct {
	Err            *kerr.Error
	MemberID       string
	Generation     int32
	ProtocolType   *string
	Protocol       *string
	Leader         string
	SkipAssignment bool
	Members        []JoinMember // only for the leader
}

// JoinMember is one member as the leader's JoinGroup answer lists it.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

func joinError(err *kerr.Error, memberID string) JoinResult {
	return JoinResult{Err: err, MemberID: memberID, Generation: -1}
}

// SyncRequest is a SyncGroup as the coordinator sees it.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   *string
	Generation   int32
	ProtocolType *string           // v5+
	Protocol     *string           // v5+
	Assignments  map[string][]byte // owned by the coordinator once passed
}

// SyncResult is a SyncGroup answer.
type SyncResult struct {
	Err          *kerr.Error
	ProtocolType *string
	Protocol     *string
	Assignment   []byte
}

// lookup returns the live group locked, or nil. A group deleted between the
// map lookup and the lock is out of the map by then, so the retry ends.
// Creating a classic group replaces an Empty consumer group of that name
// (as Kafka does), but not one with members: then lookup returns nil.
func (gs *Groups) lookup(name string, create bool) *group {
	for {
		gs.mu.Lock()
		g := gs.all[name]
		if g == nil && create {
			if !gs.dropEmptyConsumerLocked(name) {
				gs.mu.Unlock()
				return nil
			}
			g = gs.newGroup(name)
			gs.all[name] = g
		}
		gs.mu.Unlock()
		if g == nil {
			return nil
		}
		g.mu.Lock()
		if g.state != groupDead {
			return g
		}
		g.mu.Unlock()
	}
}

func (gs *Groups) newGroup(name string) *group {
	return &group{
		name:    name,
		gs:      gs,
		members: map[string]*member{},
		pending: map[string]*timer{},
		static:  map[string]string{},
	}
}

// Exists reports whether the coordinator knows group (in any live state).
func (gs *Groups) Exists(group string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.all[group] != nil || gs.consumer[group] != nil
}

// Subscribed reports whether a live consumer-protocol member of group
// subscribes to topic (OffsetDelete refuses to delete such offsets).
func (gs *Groups) Subscribed(group, topic string) bool {
	if sub, ok := gs.consumerSubscribed(group, topic); ok {
		return sub
	}
	g := gs.lookup(group, false)
	if g == nil {
		return false
	}
	defer g.mu.Unlock()
	if g.protocolType != "consumer" || g.state == groupEmpty || g.state == groupDead {
		return false
	}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			continue
		}
		for _, t := range md.Topics {
			if t == topic {
				return true
			}
		}
	}
	return false
}

// Ensure creates group in the Empty state if it does not exist, for groups
// known only from their committed offsets.
func (gs *Groups) Ensure(group string) {
	if g := gs.lookup(group, true); g != nil {
		g.mu.Unlock()
	}
}

// CommitAllowed applies Kafka's OffsetCommit rules for classic groups
// (ClassicGroup.validateOffsetCommit). A "simple" commit (generation < 0,
// no member id, no instance id) is allowed when the group is Empty or
// unknown, and creates it Empty. Otherwise the member must exist
// (UNKNOWN_MEMBER_ID), its instance id must map to it (FENCED_INSTANCE_ID),
// the generation must match (ILLEGAL_GENERATION), and commits while the
// group waits for the leader's assignment get REBALANCE_IN_PROGRESS.
//
// An unknown group with generation >= 0 gets GROUP_ID_NOT_FOUND; Kafka
// answers that from OffsetCommit v9 and ILLEGAL_GENERATION below, which the
// caller maps.
func (gs *Groups) CommitAllowed(group, memberID string, instanceID *string, generation int32) error {
	if err := gs.commitAllowed(group, memberID, instanceID, generation, false); err != nil {
		return err
	}
	return nil
}

// TxnCommitAllowed is CommitAllowed for TxnOffsetCommit, whose rules
// Kafka relaxes (validateOffsetCommit with isTransactional): a commit
// without member and generation is accepted whatever the group's state,
// since TxnOffsetCommit before v3 carries neither (and Sarama sends v3
// without them), and one from a current member is accepted while the
// group waits for its assignment, the group's state not being enforced
// for transactional commits.
func (gs *Groups) TxnCommitAllowed(group, memberID string, instanceID *string, generation int32) *kerr.Error {
	return gs.commitAllowed(group, memberID, instanceID, generation, true)
}

func (gs *Groups) commitAllowed(group, memberID string, instanceID *string, generation int32, transactional bool) *kerr.Error {
	simple := generation < 0 && memberID == "" && instanceID == nil
	g := gs.lookup(group, generation < 0)
	if g == nil {
		return kerr.GroupIDNotFound
	}
	defer g.mu.Unlock()
	if generation < 0 && g.state == groupEmpty {
		return nil
	}
	if !simple {
		if err := g.validateMember(memberID, instanceID); err != nil {
			return err
		}
		if generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if !transactional && g.state != groupEmpty {
		// Without a member id, commits are only accepted while nobody
		// consumes with the group.
		return kerr.UnknownMemberID
	}
	if !transactional && g.state == groupCompletingRebalance {
		return kerr.RebalanceInProgress
	}
	return nil
}

// validateMember is ClassicGroup.validateMember: a static member is known
// by its instance id, and an old member id for it has been fenced.
func (g *group) validateMember(memberID string, instanceID *string) *kerr.Error {
	if instanceID != nil {
		id, ok := g.static[*instanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID
		case id != memberID:
			return kerr.FencedInstanceID
		}
		return nil
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID
	}
	return nil
}

// Join handles JoinGroup; it waits, while ctx lasts, for the rebalance when
// the member has to. The error is ctx's, when it ended first.
func (gs *Groups) Join(ctx context.Context, req JoinRequest) (JoinResult, error) {
	res, wait := gs.join(req)
	return answer(ctx, res, wait)
}

// join enters req into its group; a non-nil channel means the answer will
// come there. Split from Join so tests can order joins without goroutines.
func (gs *Groups) join(req JoinRequest) (JoinResult, chan JoinResult) {
	if req.Group == "" {
		return joinError(kerr.InvalidGroupID, req.MemberID), nil
	}
	if req.SessionTimeout < gs.cfg.MinSessionTimeout || req.SessionTimeout > gs.cfg.MaxSessionTimeout {
		return joinError(kerr.InvalidSessionTimeout, req.MemberID), nil
	}
	// Only a member without an id may create the group.
	g := gs.lookup(req.Group, req.MemberID == "")
	if g == nil {
		if req.MemberID == "" {
			// A consumer group with members has the id. Kafka would
			// let a classic member join it (online migration); we
			// do not mix protocols in one group.
			return joinError(kerr.InconsistentGroupProtocol, ""), nil
		}
		return joinError(kerr.UnknownMemberID, req.MemberID), nil
	}
	defer g.mu.Unlock()
	return g.join(req)
}

// answer is res, or — when the group parked the request on wait — what
// arrives there; the caller has released the group's lock, so other
// members can complete the rebalance meanwhile.
func answer[T any](ctx context.Context, res T, wait chan T) (T, error) {
	if wait == nil {
		return res, nil
	}
	select {
	case res = <-wait:
		return res, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// join runs under g.mu; a non-nil channel means "wait for the answer".
func (g *group) join(req JoinRequest) (JoinResult, chan JoinResult) {
	if !g.acceptJoining(req.MemberID) {
		g.remove(req.MemberID)
		g.maybeCompleteJoin()
		return joinError(kerr.GroupMaxSizeReached, ""), nil
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		return joinError(kerr.InconsistentGroupProtocol, req.MemberID), nil
	}
	if req.MemberID == "" {
		return g.joinNew(req)
	}
	return g.joinExisting(req)
}

func (g *group) acceptJoining(memberID string) bool {
	max := g.gs.cfg.MaxSize
	switch g.state {
	case groupPreparingRebalance:
		if m := g.members[memberID]; m != nil && m.awaitingJoin() {
			return true
		}
		return g.numAwaitingJoin() < max
	case groupCompletingRebalance, groupStable:
		return g.members[memberID] != nil || len(g.members) < max
	default:
		return true
	}
}

// supportsProtocols: an Empty group takes any non-empty protocol list; a
// group with members only a member of the same protocol type offering at
// least one protocol every member supports.
func (g *group) supportsProtocols(protocolType string, ps []Protocol) bool {
	if g.state == groupEmpty {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		if g.supportedBy(p.Name) == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) supportedBy(name string) int {
	n := 0
	for _, m := range g.members {
		if slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name }) {
			n++
		}
	}
	return n
}

func (g *group) joinNew(req JoinRequest) (JoinResult, chan JoinResult) {
	id := NewMemberID(req.ClientID, req.InstanceID)
	if req.InstanceID != nil {
		if old, ok := g.static[*req.InstanceID]; ok {
			return g.replaceStatic(old, id, req)
		}
		// Static members skip MEMBER_ID_REQUIRED: their instance id
		// already identifies them across retries.
		return g.addMember(id, req)
	}
	if req.RequireKnownMemberID {
		// Park the id until the member comes back with it; if it never
		// does, its session timeout forgets it.
		tm := &timer{}
		g.pending[id] = tm
		g.schedule(tm, req.SessionTimeout, func() {
			delete(g.pending, id)
			if g.state == groupPreparingRebalance && g.allJoined() {
				g.completeJoin()
			}
		})
		return joinError(kerr.MemberIDRequired, id), nil
	}
	return g.addMember(id, req)
}

func (g *group) joinExisting(req JoinRequest) (JoinResult, chan JoinResult) {
	if tm, ok := g.pending[req.MemberID]; ok {
		tm.stop()
		return g.addMember(req.MemberID, req)
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return joinError(err, req.MemberID), nil
	}
	m := g.members[req.MemberID]
	switch g.state {
	case groupPreparingRebalance:
		return g.updateMember(m, req)
	case groupCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// Probably a retry after a lost response: repeat it.
			return g.currentJoinResult(m, g.leader == m.id), nil
		}
		return g.updateMember(m, req)
	case groupStable:
		// A leader's rejoin forces a rebalance: that is how it reacts to
		// changes the members' metadata does not show (new partitions).
		if g.leader == m.id || !m.sameProtocols(req.Protocols) {
			return g.updateMember(m, req)
		}
		return g.currentJoinResult(m, false), nil
	default:
		return joinError(kerr.UnknownMemberID, req.MemberID), nil
	}
}

func (g *group) currentJoinResult(m *member, withMembers bool) JoinResult {
	r := JoinResult{
		MemberID:     m.id,
		Generation:   g.generation,
		ProtocolType: g.protocolTypePtr(),
		Protocol:     g.protocolPtr(),
		Leader:       g.leader,
	}
	if withMembers {
		r.Members = g.joinMembers()
	}
	return r
}

func (g *group) protocolTypePtr() *string {
	if g.protocolType == "" {
		return nil
	}
	s := g.protocolType
	return &s
}

func (g *group) protocolPtr() *string {
	if g.protocol == "" {
		return nil
	}
	s := g.protocol
	return &s
}

func (g *group) joinMembers() []JoinMember {
	out := make([]JoinMember, 0, len(g.members))
	for _, id := range g.order {
		m := g.members[id]
		out = append(out, JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadataFor(g.protocol)})
	}
	return out
}

// addMember adds a new member awaiting its JoinGroup answer.
func (g *group) addMember(id string, req JoinRequest) (JoinResult, chan JoinResult) {
	m := &member{
		id:               id,
		instanceID:       req.InstanceID,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		protocolType:     req.ProtocolType,
		protocols:        req.Protocols,
		rebalanceTimeout: req.RebalanceTimeout,
		sessionTimeout:   req.SessionTimeout,
		isNew:            true,
		joinWait:         make(chan JoinResult, 1),
	}
	if g.state == groupPreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	g.order = append(g.order, id)
	if g.leader == "" {
		g.leader = id
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = id
	}
	delete(g.pending, id)
	// The session timer cannot protect a member parked in JoinGroup (it
	// cannot heartbeat); a client that gave up and retries would leave a
	// defunct member behind, so new members get a join deadline instead.
	g.scheduleHeartbeat(m, newMemberJoinTimeout)
	g.maybeRebalance(fmt.Sprintf("adding member %s; reason: %s", id, req.Reason))
	return JoinResult{}, m.joinWait
}

// updateMember records a known member's rejoin.
func (g *group) updateMember(m *member, req JoinRequest) (JoinResult, chan JoinResult) {
	m.protocols = req.Protocols
	m.rebalanceTimeout = req.RebalanceTimeout
	m.sessionTimeout = req.SessionTimeout
	ch := make(chan JoinResult, 1)
	if m.joinWait != nil {
		// A second JoinGroup from the same member supersedes the first,
		// which Kafka also answers this way.
		m.joinWait <- joinError(kerr.RebalanceInProgress, m.id)
	}
	m.joinWait = ch
	g.maybeRebalance(fmt.Sprintf("member %s rejoined; reason: %s", m.id, req.Reason))
	return JoinResult{}, ch
}

// replaceStatic hands a static member's place to a new member id: the old
// id is fenced, the assignment kept, and a stable group does not rebalance
// unless the selected protocol would change (KIP-345).
func (g *group) replaceStatic(oldID, newID string, req JoinRequest) (JoinResult, chan JoinResult) {
	old := g.members[oldID]
	if old.joinWait != nil {
		old.joinWait <- joinError(kerr.FencedInstanceID, oldID)
		old.joinWait = nil
	}
	if old.syncWait != nil {
		old.syncWait <- SyncResult{Err: kerr.FencedInstanceID}
		old.syncWait = nil
	}
	old.heartbeat.stop()
	m := &member{
		id:               newID,
		instanceID:       old.instanceID,
		clientID:         old.clientID,
		clientHost:       old.clientHost,
		protocolType:     old.protocolType,
		protocols:        req.Protocols,
		rebalanceTimeout: req.RebalanceTimeout,
		sessionTimeout:   req.SessionTimeout,
		assignment:       old.assignment,
		joinWait:         make(chan JoinResult, 1),
	}
	delete(g.members, oldID)
	g.members[newID] = m
	g.order[slices.Index(g.order, oldID)] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	g.static[*req.InstanceID] = newID
	g.scheduleHeartbeat(m, m.sessionTimeout)

	switch g.state {
	case groupStable:
		if err := g.persist(); err != nil {
			// The stored member id would fence the new one after a
			// restart; a rebalance stores the group again.
			g.gs.log.Warn("store replaced static member", "group", g.name, "member", newID, "err", err)
			g.maybeRebalance("error storing static member " + newID)
			break
		}
		if g.selectProtocol() == g.protocol {
			r := g.currentJoinResult(m, g.leader == newID)
			// The leader already assigned this generation; it must not
			// run its assignor again with the new id (KIP-814).
			r.SkipAssignment = g.leader == newID
			m.joinWait = nil
			return r, nil
		}
		g.maybeRebalance("static member " + newID + " changes the selected protocol")
	case groupCompletingRebalance:
		// The leader may be assigning to the old id; start over.
		g.prepareRebalance("static member " + newID + " replaced " + oldID + " during sync")
	default:
		g.maybeCompleteJoin()
	}
	return JoinResult{}, m.joinWait
}

// maybeRebalance starts a rebalance, or finishes the join phase when one is
// under way and everybody is in.
func (g *group) maybeRebalance(reason string) {
	switch g.state {
	case groupEmpty, groupStable, groupCompletingRebalance:
		g.prepareRebalance(reason)
	default:
		g.maybeCompleteJoin()
	}
}

func (g *group) prepareRebalance(reason string) {
	if g.state == groupCompletingRebalance {
		// Members waiting for the old generation's assignment rejoin.
		g.propagateSync(kerr.RebalanceInProgress)
	}
	g.clearPendingSync()
	initial := g.state == groupEmpty
	g.transition(groupPreparingRebalance)
	g.gs.log.Info("preparing to rebalance group", "group", g.name, "generation", g.generation, "reason", reason)
	if initial {
		// A new group waits group.initial.rebalance.delay.ms, extended
		// while members keep arriving, up to the rebalance timeout, so
		// consumers started together land in one generation.
		delay := g.gs.cfg.InitialRebalanceDelay
		g.scheduleInitial(delay, max(g.rebalanceTimeout()-delay, 0))
		return
	}
	if g.allJoined() {
		g.completeJoin()
		return
	}
	g.schedule(&g.joinTimer, g.rebalanceTimeout(), g.completeJoin)
}

func (g *group) scheduleInitial(delay, remaining time.Duration) {
	g.schedule(&g.joinTimer, delay, func() {
		if g.newMemberAdded && remaining > 0 {
			g.newMemberAdded = false
			next := min(g.gs.cfg.InitialRebalanceDelay, remaining)
			g.scheduleInitial(next, max(remaining-delay, 0))
			return
		}
		g.completeJoin()
	})
}

// maybeCompleteJoin ends the join phase once every member rejoined, except
// during the initial delay.
func (g *group) maybeCompleteJoin() {
	if g.state == groupPreparingRebalance && g.prevState != groupEmpty && g.allJoined() {
		g.completeJoin()
	}
}

func (g *group) transition(s groupState) {
	g.prevState, g.state = g.state, s
}

func (g *group) numAwaitingJoin() int {
	n := 0
	for _, m := range g.members {
		if m.awaitingJoin() {
			n++
		}
	}
	return n
}

func (g *group) allJoined() bool {
	return g.numAwaitingJoin() == len(g.members) && len(g.pending) == 0
}

// rebalanceTimeout is the longest any member allows for a rebalance.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// completeJoin closes the join phase: dynamic members that did not rejoin
// are dropped, the next generation starts and every waiting JoinGroup is
// answered (the leader's with the members' metadata).
func (g *group) completeJoin() {
	if g.state != groupPreparingRebalance {
		return
	}
	g.joinTimer.stop()
	for _, id := range slices.Clone(g.order) {
		if m := g.members[id]; !m.awaitingJoin() && m.instanceID == nil {
			g.gs.log.Info("removing member that did not rejoin", "group", g.name, "member", id)
			g.remove(id)
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined are left; wait
		// for them to rejoin or for their sessions to expire.
		g.schedule(&g.joinTimer, g.rebalanceTimeout(), g.completeJoin)
		return
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol = ""
		g.transition(groupEmpty)
		g.clearPendingSync()
		g.gs.log.Info("group is empty", "group", g.name, "generation", g.generation)
		if err := g.persist(); err != nil {
			g.gs.log.Warn("store empty group", "group", g.name, "generation", g.generation, "err", err)
		}
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(groupCompletingRebalance)
	g.clearPendingSync()
	g.gs.log.Info("rebalance: join phase complete", "group", g.name, "generation", g.generation,
		"members", len(g.members), "protocol", g.protocol, "leader", g.leader)
	g.pendingSync = map[string]bool{}
	for _, id := range g.order {
		m := g.members[id]
		if m.joinWait != nil {
			m.joinWait <- g.currentJoinResult(m, id == g.leader)
			m.joinWait = nil
		}
		m.isNew = false
		g.scheduleHeartbeat(m, m.sessionTimeout)
		g.pendingSync[id] = true
	}
	gen := g.generation
	g.schedule(&g.syncTimer, g.rebalanceTimeout(), func() { g.expirePendingSync(gen) })
}

// electJoinedLeader keeps the leader if it rejoined, else picks the first
// member that did; false when nobody rejoined.
func (g *group) electJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].awaitingJoin() {
		return true
	}
	for _, id := range g.order {
		if g.members[id].awaitingJoin() {
			g.leader = id
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for the first in its own preference order,
// and the most votes win. Kafka breaks ties arbitrarily; we take the
// earliest in the leader's preference, so the choice is deterministic.
func (g *group) selectProtocol() string {
	candidates := map[string]bool{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.supportedBy(p.Name) == len(g.members) {
				candidates[p.Name] = true
			}
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if candidates[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	var order []string
	if l := g.members[g.leader]; l != nil {
		for _, p := range l.protocols {
			order = append(order, p.Name)
		}
	}
	best, bestVotes := "", 0
	for _, name := range order {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	if best == "" { // no leader yet: any most-voted protocol, by name
		names := make([]string, 0, len(votes))
		for name := range votes {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if votes[name] > bestVotes {
				best, bestVotes = name, votes[name]
			}
		}
	}
	return best
}

// expirePendingSync removes the members that did not SyncGroup within the
// rebalance timeout after the join phase, and rebalances without them.
func (g *group) expirePendingSync(generation int32) {
	if generation != g.generation || len(g.pendingSync) == 0 {
		return
	}
	if g.state != groupCompletingRebalance && g.state != groupStable {
		return
	}
	var gone []string
	for id := range g.pendingSync {
		gone = append(gone, id)
		g.remove(id)
	}
	sort.Strings(gone)
	g.prepareRebalance("members did not sync in time: " + strings.Join(gone, ", "))
}

func (g *group) clearPendingSync() {
	g.pendingSync = nil
	g.syncTimer.stop()
}

// remove drops a member or pending member without rebalancing; the
// leadership passes to the oldest remaining member.
func (g *group) remove(id string) {
	if tm, ok := g.pending[id]; ok {
		tm.stop()
		delete(g.pending, id)
	}
	m := g.members[id]
	if m == nil {
		return
	}
	m.heartbeat.stop()
	delete(g.members, id)
	g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	delete(g.pendingSync, id)
}

// removeAndRebalance removes a member whose session expired.
func (g *group) removeAndRebalance(m *member, reason string) {
	g.evict(m)
	switch g.state {
	case groupStable, groupCompletingRebalance:
		g.maybeRebalance(reason)
	case groupPreparingRebalance:
		if g.allJoined() {
			g.completeJoin()
		}
	}
}

// scheduleHeartbeat (re)arms a member's session expiry.
func (g *group) scheduleHeartbeat(m *member, d time.Duration) {
	g.schedule(&m.heartbeat, d, func() {
		if g.members[m.id] != m {
			return
		}
		// Members parked in a rebalance satisfy their heartbeats, except
		// new ones whose first join is taking too long.
		if !m.isNew && (m.awaitingJoin() || m.awaitingSync()) {
			return
		}
		g.gs.log.Info("member session expired", "group", g.name, "member", m.id)
		g.removeAndRebalance(m, "session timeout of member "+m.id)
	})
}

// Sync handles SyncGroup: the leader's request carries the assignments and
// completes the rebalance; followers wait for it, while ctx lasts.
func (gs *Groups) Sync(ctx context.Context, req SyncRequest) (SyncResult, error) {
	res, wait := gs.sync(req)
	return answer(ctx, res, wait)
}

// sync is join's counterpart for SyncGroup.
func (gs *Groups) sync(req SyncRequest) (SyncResult, chan SyncResult) {
	if req.Group == "" {
		return SyncResult{Err: kerr.InvalidGroupID}, nil
	}
	g := gs.lookup(req.Group, false)
	if g == nil {
		return SyncResult{Err: kerr.UnknownMemberID}, nil
	}
	defer g.mu.Unlock()
	return g.sync(req)
}

func (g *group) sync(req SyncRequest) (SyncResult, chan SyncResult) {
	if g.state == groupEmpty {
		return SyncResult{Err: kerr.UnknownMemberID}, nil
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return SyncResult{Err: err}, nil
	}
	if req.Generation != g.generation {
		return SyncResult{Err: kerr.IllegalGeneration}, nil
	}
	if inconsistent(req.ProtocolType, g.protocolType) || inconsistent(req.Protocol, g.protocol) {
		return SyncResult{Err: kerr.InconsistentGroupProtocol}, nil
	}
	m := g.members[req.MemberID]
	switch g.state {
	case groupPreparingRebalance:
		return SyncResult{Err: kerr.RebalanceInProgress}, nil
	case groupCompletingRebalance:
		ch := make(chan SyncResult, 1)
		if m.syncWait != nil {
			m.syncWait <- SyncResult{Err: kerr.RebalanceInProgress}
		}
		m.syncWait = ch
		g.syncedBy(m.id)
		if m.id == g.leader {
			for _, id := range g.order {
				g.members[id].assignment = req.Assignments[id] // missing: empty
			}
			if err := g.persist(); err != nil {
				// As Kafka: nobody learns an assignment that a restart
				// could forget; the members rejoin.
				g.gs.log.Error("store group assignment", "group", g.name, "generation", g.generation, "err", err)
				g.propagateSync(kerr.CoordinatorNotAvailable)
				g.prepareRebalance("error storing the group assignment")
				return SyncResult{}, ch
			}
			g.transition(groupStable)
			g.propagateSync(nil)
			g.gs.log.Info("rebalance complete", "group", g.name, "generation", g.generation, "members", len(g.members))
		}
		return SyncResult{}, ch
	default: // Stable: a late or repeated SyncGroup gets the assignment again
		g.syncedBy(m.id)
		return SyncResult{ProtocolType: g.protocolTypePtr(), Protocol: g.protocolPtr(), Assignment: m.assignment}, nil
	}
}

func inconsistent(asked *string, have string) bool {
	return asked != nil && have != "" && *asked != have
}

func (g *group) syncedBy(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.syncTimer.stop()
	}
}

// propagateSync answers every waiting SyncGroup: with its assignment, or
// with err (and every assignment cleared).
func (g *group) propagateSync(err *kerr.Error) {
	for _, id := range g.order {
		m := g.members[id]
		if err != nil {
			m.assignment = nil
		}
		if m.syncWait == nil {
			continue
		}
		res := SyncResult{Err: err}
		if err == nil {
			res = SyncResult{ProtocolType: g.protocolTypePtr(), Protocol: g.protocolPtr(), Assignment: m.assignment}
		}
		m.syncWait <- res
		m.syncWait = nil
		// A session may have lapsed while it waited; count from now.
		g.scheduleHeartbeat(m, m.sessionTimeout)
	}
}

// Heartbeat handles Heartbeat.
func (gs *Groups) Heartbeat(group, memberID string, instanceID *string, generation int32) *kerr.Error {
	if group == "" {
		return kerr.InvalidGroupID
	}
	g := gs.lookup(group, false)
	if g == nil {
		return kerr.UnknownMemberID
	}
	defer g.mu.Unlock()
	if err := g.validateMember(memberID, instanceID); err != nil {
		return err
	}
	if generation != g.generation {
		return kerr.IllegalGeneration
	}
	m := g.members[memberID]
	switch g.state {
	case groupEmpty:
		return kerr.UnknownMemberID
	case groupPreparingRebalance:
		g.scheduleHeartbeat(m, m.sessionTimeout)
		return kerr.RebalanceInProgress
	default:
		g.scheduleHeartbeat(m, m.sessionTimeout)
		return nil
	}
}

// LeaveMember is one member a LeaveGroup names.
type LeaveMember struct {
	MemberID   string
	InstanceID *string
	Reason     string
}

// Leave handles LeaveGroup: a group-level error, else one error (or nil)
// per member. An instance id without a member id removes that static member
// (administrative removal).
func (gs *Groups) Leave(group string, ms []LeaveMember) (*kerr.Error, []*kerr.Error) {
	if group == "" {
		return kerr.InvalidGroupID, nil
	}
	g := gs.lookup(group, false)
	if g == nil {
		return kerr.UnknownMemberID, nil
	}
	defer g.mu.Unlock()
	errs := make([]*kerr.Error, len(ms))
	left := 0
	for i, lm := range ms {
		switch {
		case lm.MemberID == "":
			id, ok := "", false
			if lm.InstanceID != nil {
				id, ok = g.static[*lm.InstanceID]
			}
			if !ok {
				errs[i] = kerr.UnknownMemberID
				continue
			}
			g.leaveOne(id, lm.Reason)
			left++
		case g.pending[lm.MemberID] != nil:
			g.remove(lm.MemberID)
			left++
		default:
			if err := g.validateMember(lm.MemberID, lm.InstanceID); err != nil {
				errs[i] = err
				continue
			}
			g.leaveOne(lm.MemberID, lm.Reason)
			left++
		}
	}
	if left > 0 {
		switch g.state {
		case groupStable, groupCompletingRebalance:
			g.maybeRebalance("members left")
		case groupPreparingRebalance:
			g.maybeCompleteJoin()
		}
	}
	return nil, errs
}

func (g *group) leaveOne(id, reason string) {
	g.gs.log.Info("member left group", "group", g.name, "member", id, "reason", reason)
	g.evict(g.members[id])
}

// evict removes a member, answering any request it has parked with
// UNKNOWN_MEMBER_ID so that, if it is still alive, it joins again.
func (g *group) evict(m *member) {
	if m.joinWait != nil {
		m.joinWait <- joinError(kerr.UnknownMemberID, "")
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Err: kerr.UnknownMemberID}
		m.syncWait = nil
	}
	g.remove(m.id)
}

// GroupDescription is a DescribeGroups answer for one group.
type GroupDescription struct {
	State        string // as Kafka names it: Empty, PreparingRebalance, ...
	ProtocolType string
	Protocol     string // only when Stable
	Members      []MemberDescription
}

// MemberDescription is one member of a GroupDescription.
type MemberDescription struct {
	MemberID, ClientID, ClientHost string
	InstanceID                     *string
	Metadata, Assignment           []byte // only when Stable
}

// Describe returns the group as DescribeGroups shows it; false if unknown.
func (gs *Groups) Describe(group string) (GroupDescription, bool) {
	g := gs.lookup(group, false)
	if g == nil {
		return GroupDescription{State: groupDead.String()}, false
	}
	defer g.mu.Unlock()
	d := GroupDescription{State: g.state.String(), ProtocolType: g.protocolType}
	stable := g.state == groupStable
	if stable {
		d.Protocol = g.protocol
	}
	for _, id := range g.order {
		m := g.members[id]
		md := MemberDescription{MemberID: id, ClientID: m.clientID, ClientHost: m.clientHost, InstanceID: m.instanceID}
		if stable {
			md.Metadata, md.Assignment = m.metadataFor(g.protocol), m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d, true
}

// GroupListing is one ListGroups entry.
type GroupListing struct {
	Name, ProtocolType string
	Type               string // "classic" or "consumer"
	State              string // as Kafka names the state of that type
}

// List returns every group, sorted by name.
func (gs *Groups) List() []GroupListing {
	gs.mu.Lock()
	all := make([]*group, 0, len(gs.all))
	for _, g := range gs.all {
		all = append(all, g)
	}
	gs.mu.Unlock()
	out := make([]GroupListing, 0, len(all))
	for _, g := range all {
		g.mu.Lock()
		if g.state != groupDead {
			out = append(out, GroupListing{Name: g.name, ProtocolType: g.protocolType, Type: "classic", State: g.state.String()})
		}
		g.mu.Unlock()
	}
	out = append(out, gs.consumerListings()...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Delete deletes an Empty group (DeleteGroups): GROUP_ID_NOT_FOUND when
// unknown, NON_EMPTY_GROUP while it has members. The group is Dead and gone
// from the coordinator when this returns; its offsets are the caller's.
func (gs *Groups) Delete(group string) *kerr.Error {
	if ok, err := gs.deleteConsumer(group); ok {
		return err
	}
	// The record goes first, under the group's lock alone (gs.mu is
	// taken before a group's lock, and not held over a write): a group
	// that gets members meanwhile stores itself again when its rebalance
	// completes, and is answered NON_EMPTY_GROUP below.
	if g := gs.lookup(group, false); g != nil {
		err := g.unstore()
		g.mu.Unlock()
		if err != nil {
			return err
		}
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.all[group]
	if g == nil {
		return kerr.GroupIDNotFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case groupEmpty:
	case groupDead:
		return kerr.GroupIDNotFound
	default:
		return kerr.NonEmptyGroup
	}
	for _, tm := range g.pending {
		tm.stop()
	}
	g.joinTimer.stop()
	g.syncTimer.stop()
	g.transition(groupDead)
	delete(gs.all, group)
	return nil
}

// NewMemberID is Kafka's: the client id (or instance id) and a UUID.
func NewMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
