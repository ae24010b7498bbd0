package coordinator

// The consumer group protocol (KIP-848): ConsumerGroupHeartbeat and
// ConsumerGroupDescribe, following Apache Kafka's ConsumerGroup and
// CurrentAssignmentBuilder.
//
// The coordinator owns the assignment. Every change to the membership, to
// a subscription or to the metadata of a subscribed topic bumps the group
// epoch; the target assignment is then recomputed at once by the
// server-side assignor (uniform or range) and stamped with the group epoch.
// Each member then converges on its share of the target, one heartbeat at a
// time, revoking before assigning:
//
//	stable ──target moved──► unrevoked (revoke first, epoch kept)
//	  ▲                         │ revoked
//	  │                         ▼
//	  └── all released ◄── unreleased (wait for previous owners)
//
// A partition is given to a member only once no other member owns it (holds
// it assigned or pending revocation), so two members never own one
// partition. Like the classic groups, state is in memory: after a restart
// members get UNKNOWN_MEMBER_ID and rejoin with epoch 0.

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	consumerHeartbeatInterval = 5 * time.Second  // group.consumer.heartbeat.interval.ms
	consumerSessionTimeout    = 45 * time.Second // group.consumer.session.timeout.ms
	defaultServerAssignor     = UniformAssignor  // first of group.consumer.assignors
)

// Member epochs with a meaning of their own in a heartbeat.
const (
	JoinEpoch        int32 = 0
	LeaveEpoch       int32 = -1
	StaticLeaveEpoch int32 = -2
)

// Topic is what the assignors need to know of a topic.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// TopicPartition is one partition of a topic, by topic id.
type TopicPartition struct {
	TopicID   [16]byte
	Partition int32
}

// tpSet is a set of partitions; assignments are sets.
type tpSet map[TopicPartition]struct{}

func (s tpSet) has(p TopicPartition) bool { _, ok := s[p]; return ok }

func (s tpSet) clone() tpSet {
	out := make(tpSet, len(s))
	for p := range s {
		out[p] = struct{}{}
	}
	return out
}

func (s tpSet) equal(o tpSet) bool {
	if len(s) != len(o) {
		return false
	}
	for p := range s {
		if !o.has(p) {
			return false
		}
	}
	return true
}

// sorted lists the set by topic id and partition, for deterministic answers.
func (s tpSet) sorted() []TopicPartition {
	out := make([]TopicPartition, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := strings.Compare(string(out[i].TopicID[:]), string(out[j].TopicID[:])); c != 0 {
			return c < 0
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// byTopic groups a set as the protocol lists it: topic id → partitions.
func (s tpSet) byTopic(fn func(id [16]byte, parts []int32)) {
	var (
		cur   [16]byte
		parts []int32
	)
	for i, p := range s.sorted() {
		if i > 0 && p.TopicID != cur {
			fn(cur, parts)
			parts = nil
		}
		cur = p.TopicID
		parts = append(parts, p.Partition)
	}
	if len(parts) > 0 {
		fn(cur, parts)
	}
}

func ownedSet(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) tpSet {
	out := tpSet{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			out[TopicPartition{t.TopicID, p}] = struct{}{}
		}
	}
	return out
}

type memberState int8

// CurrentAssignmentBuilder's member states.
const (
	memberStable     memberState = iota // owns exactly its target at the target's epoch
	memberUnrevoked                     // must revoke partitions before anything else
	memberUnreleased                    // waits for partitions other members still own
)

type consumerMember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration

	topics []string // subscribed names, sorted
	regex  string   // subscribed regex as sent; "" for none
	re     *regexp.Regexp
	// mayDescribe filters what re matches to the topics the member's
	// principal may DESCRIBE; nil without an authorizer.
	mayDescribe func(topic string) bool
	assignor    string // ServerAssignor asked for; "" for the default

	epoch, prevEpoch int32
	state            memberState
	assigned         tpSet                    // owned and told to the member
	revoking         tpSet                    // owned, being revoked
	assignedAt       map[TopicPartition]int32 // member epoch at which each assigned partition came
	session          timer                    // session expiry
	revocation       timer                    // rebalance timeout while revoking
	left             bool                     // static member gone with epoch -2, awaiting its replacement
}

// subscribes reports whether the member subscribes to topic name.
func (m *consumerMember) subscribes(name string) bool {
	if _, ok := slices.BinarySearch(m.topics, name); ok {
		return true
	}
	return m.re != nil && m.re.MatchString(name) && (m.mayDescribe == nil || m.mayDescribe(name))
}

type consumerGroup struct {
	name string
	gs   *Groups

	mu              sync.Mutex
	dead            bool
	epoch           int32 // group epoch
	assignmentEpoch int32 // epoch of target
	assignorName    string
	members         map[string]*consumerMember
	static          map[string]string         // instance id → member id
	target          map[string]tpSet          // member id → target assignment
	owner           map[TopicPartition]string // partition → member owning it (assigned or revoking)
	metadata        string                    // fingerprint of the subscribed topics' metadata
	bumpPending     bool                      // the next refresh starts a new epoch
}

// State is Kafka's ConsumerGroupState name. The target is computed as soon
// as the group epoch moves, so "Assigning" is never seen here.
func (g *consumerGroup) state() string {
	switch {
	case g.dead:
		return "Dead"
	case len(g.members) == 0:
		return "Empty"
	case g.assignmentEpoch != g.epoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if m.state != memberStable || m.epoch != g.assignmentEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// schedule runs fn under g.mu after d unless tm is stopped or rescheduled
// first, or the group died (the classic groups' timer discipline).
func (g *consumerGroup) schedule(tm *timer, d time.Duration, fn func()) {
	tm.stop()
	token := tm.token
	tm.t = g.gs.clock.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if tm.token != token || g.dead {
			return
		}
		tm.t = nil
		fn()
	})
}

// lookupConsumer returns the live consumer group locked, or nil.
func (gs *Groups) lookupConsumer(name string) *consumerGroup {
	for {
		gs.mu.Lock()
		g := gs.consumer[name]
		gs.mu.Unlock()
		if g == nil {
			return nil
		}
		g.mu.Lock()
		if !g.dead {
			return g
		}
		g.mu.Unlock()
	}
}

// createConsumer returns the consumer group name locked, creating it if
// needed. A classic group of that name is replaced only while it is Empty
// (its committed offsets stay, as when Kafka converts an empty classic
// group); with members it is GROUP_ID_NOT_FOUND, Kafka's answer when the
// online upgrade of a classic group is not possible.
func (gs *Groups) createConsumer(name string) (*consumerGroup, *kerr.Error) {
	for {
		gs.mu.Lock()
		g := gs.consumer[name]
		if g == nil {
			if c := gs.all[name]; c != nil {
				c.mu.Lock()
				if c.state != groupEmpty && c.state != groupDead {
					c.mu.Unlock()
					gs.mu.Unlock()
					return nil, kerr.GroupIDNotFound
				}
				c.killLocked()
				c.mu.Unlock()
				delete(gs.all, name)
			}
			g = &consumerGroup{
				name: name, gs: gs,
				members: map[string]*consumerMember{}, static: map[string]string{},
				target: map[string]tpSet{}, owner: map[TopicPartition]string{},
			}
			gs.consumer[name] = g
		}
		gs.mu.Unlock()
		g.mu.Lock()
		if !g.dead {
			return g, nil
		}
		g.mu.Unlock()
	}
}

// IsConsumerGroup reports whether name is a live consumer group.
func (gs *Groups) IsConsumerGroup(name string) bool {
	g := gs.lookupConsumer(name)
	if g == nil {
		return false
	}
	g.mu.Unlock()
	return true
}

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat the caller has
// validated as Kafka does, with what the coordinator needs of the connection.
type ConsumerHeartbeatRequest struct {
	*kmsg.ConsumerGroupHeartbeatRequest
	ClientID, ClientHost string
	Regex                *regexp.Regexp // compiled SubscribedTopicRegex (CompileSubscription)
	// MayDescribe, when set, is whether the sender's principal may
	// DESCRIBE a topic: regex matches are filtered by it, as Kafka's
	// filterTopicDescribeAuthorizedTopics.
	MayDescribe func(topic string) bool
}

// consumerSessionTimeout is how long a consumer-group member may go without
// a heartbeat.
func (gs *Groups) consumerSessionTimeout() time.Duration {
	if gs.cfg.ConsumerSessionTimeout > 0 {
		return gs.cfg.ConsumerSessionTimeout
	}
	return consumerSessionTimeout
}

// ConsumerHeartbeat handles a validated ConsumerGroupHeartbeat.
func (gs *Groups) ConsumerHeartbeat(req ConsumerHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	resp.HeartbeatIntervalMillis = int32(consumerHeartbeatInterval / time.Millisecond)
	var g *consumerGroup
	if req.MemberEpoch == JoinEpoch {
		var err *kerr.Error
		if g, err = gs.createConsumer(req.Group); err != nil {
			resp.ErrorCode = err.Code
			resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Group %s is not a consumer group.", req.Group))
			return
		}
	} else if g = gs.lookupConsumer(req.Group); g == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Consumer group %s not found.", req.Group))
		return
	}
	defer g.mu.Unlock()
	if err := g.heartbeat(req, resp); err != nil {
		resp.ErrorCode = err.Code
		resp.MemberID, resp.MemberEpoch, resp.Assignment = nil, 0, nil
	}
}

func (g *consumerGroup) heartbeat(req ConsumerHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *kerr.Error {
	switch req.MemberEpoch {
	case LeaveEpoch, StaticLeaveEpoch:
		return g.leave(req, resp)
	case JoinEpoch:
		if err := g.join(req); err != nil {
			return err
		}
	}
	m := g.members[req.MemberID]
	if m == nil {
		if req.InstanceID != nil && g.static[*req.InstanceID] != "" {
			return kerr.FencedInstanceID
		}
		return kerr.UnknownMemberID
	}
	if req.MemberEpoch != JoinEpoch {
		if err := m.validateEpoch(req.MemberEpoch, req.Topics); err != nil {
			return err
		}
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if g.updateSubscription(m, req) {
		g.bump("subscription of " + m.id + " changed")
	}
	g.refresh()

	before := m.assigned.clone()
	var owned tpSet
	if req.Topics != nil {
		owned = ownedSet(req.Topics)
	}
	g.reconcile(m, owned)
	g.scheduleSession(m)

	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = m.epoch
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if req.MemberEpoch == JoinEpoch || full || !before.equal(m.assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		m.assigned.byTopic(func(id [16]byte, parts []int32) {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID, t.Partitions = id, parts
			a.Topics = append(a.Topics, t)
		})
		if a.Topics == nil {
			a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		resp.Assignment = &a
	}
	return nil
}

// validateEpoch is Kafka's throwIfMemberEpochIsInvalid: a member may be one
// epoch behind (its last answer was lost) if it owns no more than it has.
func (m *consumerMember) validateEpoch(epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kerr.Error {
	switch {
	case epoch > m.epoch:
		return kerr.FencedMemberEpoch
	case epoch < m.epoch:
		if epoch != m.prevEpoch || owned == nil {
			return kerr.FencedMemberEpoch
		}
		for p := range ownedSet(owned) {
			if !m.assigned.has(p) {
				return kerr.FencedMemberEpoch
			}
		}
	}
	return nil
}

// join adds the member of an epoch-0 heartbeat. A member that rejoins
// under its own id has given up what it owned (it sends no partitions):
// it starts over. A static member takes over the assignment of the member
// that left with epoch -2 under its instance id; while that member is
// still in the group the instance id is UNRELEASED_INSTANCE_ID.
func (g *consumerGroup) join(req ConsumerHeartbeatRequest) *kerr.Error {
	var inherit *consumerMember
	if req.InstanceID != nil {
		if old := g.members[g.static[*req.InstanceID]]; old != nil && old.id != req.MemberID {
			if !old.left {
				return kerr.UnreleasedInstanceID
			}
			inherit = old
			g.detach(old)
		}
	}
	if old := g.members[req.MemberID]; old != nil {
		g.gs.log.Info("consumer group member rejoined", "group", g.name, "member", old.id)
		g.detach(old)
	}
	rebalanceTimeout := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if rebalanceTimeout <= 0 {
		rebalanceTimeout = 5 * time.Minute // the client's max.poll.interval.ms default
	}
	m := &consumerMember{
		id: req.MemberID, instanceID: req.InstanceID, rackID: req.RackID,
		clientID: req.ClientID, clientHost: req.ClientHost,
		rebalanceTimeout: rebalanceTimeout,
		assigned:         tpSet{}, revoking: tpSet{}, assignedAt: map[TopicPartition]int32{},
	}
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if inherit != nil {
		m.epoch, m.prevEpoch, m.state = inherit.epoch, inherit.prevEpoch, inherit.state
		m.assigned, m.revoking, m.assignedAt = inherit.assigned, inherit.revoking, inherit.assignedAt
		m.topics, m.regex, m.re, m.assignor = inherit.topics, inherit.regex, inherit.re, inherit.assignor
		m.mayDescribe = req.MayDescribe
		g.target[m.id] = g.target[inherit.id]
		delete(g.target, inherit.id)
		g.own(m)
		g.gs.log.Info("static member replaced", "group", g.name, "member", m.id, "previous", inherit.id)
		return nil
	}
	g.gs.log.Info("member joined consumer group", "group", g.name, "member", m.id)
	g.bump("member " + m.id + " joined")
	return nil
}

// updateSubscription applies the subscription fields a heartbeat carries
// (null means unchanged) and reports whether anything changed.
func (g *consumerGroup) updateSubscription(m *consumerMember, req ConsumerHeartbeatRequest) bool {
	changed := false
	m.mayDescribe = req.MayDescribe
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.topics) {
			m.topics, changed = names, true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.re, changed = *req.SubscribedTopicRegex, req.Regex, true
		if m.regex == "" {
			m.re = nil
		}
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor, changed = *req.ServerAssignor, true
	}
	return changed
}

// leave handles epochs -1 and -2. A static member leaving with -2 keeps its
// partitions until it is replaced or its session expires, so a restart of
// it moves nothing; everyone else leaves at once.
func (g *consumerGroup) leave(req ConsumerHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *kerr.Error {
	m := g.members[req.MemberID]
	if m == nil {
		if req.InstanceID != nil && g.static[*req.InstanceID] != "" {
			return kerr.FencedInstanceID
		}
		return kerr.UnknownMemberID
	}
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = req.MemberEpoch
	if req.MemberEpoch == StaticLeaveEpoch && m.instanceID != nil {
		m.left = true
		m.revocation.stop()
		g.scheduleSession(m)
		g.gs.log.Info("static member left temporarily", "group", g.name, "member", m.id)
		return nil
	}
	g.remove(m, "member left")
	return nil
}

// remove drops a member for good and recomputes the target without it.
func (g *consumerGroup) remove(m *consumerMember, reason string) {
	g.gs.log.Info("removing consumer group member", "group", g.name, "member", m.id, "reason", reason)
	g.detach(m)
	g.bump(reason)
	g.refresh()
}

// detach takes a member out of the group's maps and releases what it owns.
func (g *consumerGroup) detach(m *consumerMember) {
	m.session.stop()
	m.revocation.stop()
	g.disown(m)
	delete(g.members, m.id)
	delete(g.target, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
}

func (g *consumerGroup) own(m *consumerMember) {
	for p := range m.assigned {
		g.owner[p] = m.id
	}
	for p := range m.revoking {
		g.owner[p] = m.id
	}
}

func (g *consumerGroup) disown(m *consumerMember) {
	for p, id := range g.owner {
		if id == m.id {
			delete(g.owner, p)
		}
	}
}

// bump asks for a new group epoch, which the next refresh starts: however
// many changes one heartbeat makes, the epoch moves once, as in Kafka.
func (g *consumerGroup) bump(reason string) {
	g.bumpPending = true
	g.gs.log.Debug("consumer group epoch bump", "group", g.name, "epoch", g.epoch+1, "reason", reason)
}

// refresh bumps the epoch when the metadata of the subscribed topics
// changed (a topic created that a regex matches, partitions added, a topic
// deleted) and recomputes the target when the epoch moved. Kafka refreshes
// on metadata updates; here every heartbeat looks.
func (g *consumerGroup) refresh() {
	topics := g.gs.topics()
	var subscribed []string
	for _, t := range topics {
		for _, m := range g.members {
			if m.subscribes(t.Name) {
				subscribed = append(subscribed, fmt.Sprintf("%s/%x/%d", t.Name, t.ID, t.Partitions))
				break
			}
		}
	}
	sort.Strings(subscribed)
	if fp := strings.Join(subscribed, ","); fp != g.metadata {
		g.bump("subscribed topic metadata changed")
		g.metadata = fp
	}
	if g.bumpPending {
		g.epoch++
		g.bumpPending = false
	}
	if g.assignmentEpoch == g.epoch {
		return
	}
	g.assignorName = g.preferredAssignor()
	g.target = assign(g.assignorName, topics, g.members, g.target)
	g.assignmentEpoch = g.epoch
}

// preferredAssignor is the assignor most members ask for (by name on a
// tie, where Kafka's choice is arbitrary), else the default.
func (g *consumerGroup) preferredAssignor() string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best, n := defaultServerAssignor, 0
	for name, v := range votes {
		if v > n || v == n && name < best {
			best, n = name, v
		}
	}
	return best
}

// reconcile is CurrentAssignmentBuilder.build: it moves the member one step
// towards its target. owned is what the member reports owning (nil when
// the heartbeat does not say).
func (g *consumerGroup) reconcile(m *consumerMember, owned tpSet) {
	if m.left {
		return
	}
	switch m.state {
	case memberStable:
		if m.epoch == g.assignmentEpoch {
			return
		}
	case memberUnrevoked:
		if owned == nil || ownsAny(owned, m.revoking) {
			return // still revoking
		}
	}
	g.nextAssignment(m, owned)
}

func ownsAny(owned, s tpSet) bool {
	for p := range s {
		if owned.has(p) {
			return true
		}
	}
	return false
}

// nextAssignment is CurrentAssignmentBuilder.computeNextAssignment.
func (g *consumerGroup) nextAssignment(m *consumerMember, owned tpSet) {
	target := g.target[m.id]
	keep, revoke := tpSet{}, tpSet{}
	for p := range m.assigned {
		if target.has(p) {
			keep[p] = struct{}{}
		} else {
			revoke[p] = struct{}{}
		}
	}
	var free []TopicPartition
	unreleased := false
	for p := range target {
		if m.assigned.has(p) {
			continue
		}
		if o, ok := g.owner[p]; ok && o != m.id {
			unreleased = true
			continue
		}
		free = append(free, p)
	}

	g.disown(m)
	prev := m.epoch
	switch {
	case len(revoke) > 0 && (owned == nil || ownsAny(owned, revoke)):
		// Revoke first; the epoch stays until the member confirms.
		m.assigned, m.revoking, m.state = keep, revoke, memberUnrevoked
		m.prevEpoch = prev
		g.schedule(&m.revocation, m.rebalanceTimeout, func() {
			if g.members[m.id] == m && m.state == memberUnrevoked {
				g.remove(m, "member did not revoke its partitions within the rebalance timeout")
			}
		})
	default:
		for _, p := range free {
			keep[p] = struct{}{}
			m.assignedAt[p] = g.assignmentEpoch
		}
		m.assigned, m.revoking = keep, tpSet{}
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleased
		}
		m.prevEpoch, m.epoch = prev, g.assignmentEpoch
		m.revocation.stop()
	}
	for p := range m.assignedAt {
		if !m.assigned.has(p) {
			delete(m.assignedAt, p)
		}
	}
	g.own(m)
}

func (g *consumerGroup) scheduleSession(m *consumerMember) {
	g.schedule(&m.session, g.gs.consumerSessionTimeout(), func() {
		if g.members[m.id] == m {
			g.remove(m, "session timeout expired")
		}
	})
}

// killLocked ends a classic group the consumer protocol takes over; the
// caller holds gs.mu and g.mu and removes it from the map.
func (g *group) killLocked() {
	for _, tm := range g.pending {
		tm.stop()
	}
	g.joinTimer.stop()
	g.syncTimer.stop()
	g.transition(groupDead)
}

// topics lists the topics there are, for the assignors.
func (gs *Groups) topics() []Topic {
	if gs.cfg.Topics == nil {
		return nil
	}
	return gs.cfg.Topics()
}

// ConsumerCommitAllowed is ConsumerGroup.validateOffsetCommit. It returns
// false when name is not a consumer group (the classic rules apply). A
// commit without a member (epoch < 0) is accepted only while the group is
// empty; a member must commit with OffsetCommit v9+ and its current epoch.
// A member one or more epochs behind may still commit partitions it has
// owned since that epoch (Kafka 4.3+, KIP-1251), which spares clients the
// STALE_MEMBER_EPOCH of a commit racing a reassignment it is not part of.
func (gs *Groups) ConsumerCommitAllowed(name, memberID string, epoch int32, version int16, parts []TopicPartition) (bool, *kerr.Error) {
	g := gs.lookupConsumer(name)
	if g == nil {
		return false, nil
	}
	defer g.mu.Unlock()
	if epoch < 0 && len(g.members) == 0 {
		return true, nil
	}
	m := g.members[memberID]
	if m == nil {
		return true, kerr.UnknownMemberID
	}
	if version < 9 {
		return true, kerr.UnsupportedVersion
	}
	if epoch == m.epoch {
		return true, nil
	}
	if epoch > m.epoch || len(parts) == 0 {
		return true, kerr.StaleMemberEpoch
	}
	for _, p := range parts {
		at, ok := m.assignedAt[p]
		if !ok || at > epoch {
			return true, kerr.StaleMemberEpoch
		}
	}
	return true, nil
}

// ConsumerFetchAllowed is ConsumerGroup.validateOffsetFetch for OffsetFetch
// v9+: a request naming a member must carry its current epoch. Requests
// without a member (admin tools) are always allowed.
func (gs *Groups) ConsumerFetchAllowed(name, memberID string, epoch int32) *kerr.Error {
	if epoch < 0 && memberID == "" {
		return nil
	}
	g := gs.lookupConsumer(name)
	if g == nil {
		return nil
	}
	defer g.mu.Unlock()
	m := g.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch
	}
	return nil
}

// consumerSubscribed reports whether a member of consumer group name
// subscribes to topic; ok is false for a name that is no consumer group.
func (gs *Groups) consumerSubscribed(name, topic string) (subscribed, ok bool) {
	g := gs.lookupConsumer(name)
	if g == nil {
		return false, false
	}
	defer g.mu.Unlock()
	for _, m := range g.members {
		if m.subscribes(topic) {
			return true, true
		}
	}
	return false, true
}

// deleteConsumer deletes an Empty consumer group; ok is false when name is
// no consumer group.
func (gs *Groups) deleteConsumer(name string) (ok bool, err *kerr.Error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.consumer[name]
	if g == nil {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.members) > 0 {
		return true, kerr.NonEmptyGroup
	}
	g.dead = true
	delete(gs.consumer, name)
	return true, nil
}

// consumerListings are the ListGroups entries of the consumer groups.
func (gs *Groups) consumerListings() []GroupListing {
	gs.mu.Lock()
	all := make([]*consumerGroup, 0, len(gs.consumer))
	for _, g := range gs.consumer {
		all = append(all, g)
	}
	gs.mu.Unlock()
	var out []GroupListing
	for _, g := range all {
		g.mu.Lock()
		if !g.dead {
			out = append(out, GroupListing{Name: g.name, ProtocolType: "consumer", Type: "consumer", State: g.state()})
		}
		g.mu.Unlock()
	}
	return out
}

// DescribeConsumer fills a ConsumerGroupDescribe answer for one group;
// false when name is no consumer group.
func (gs *Groups) DescribeConsumer(name string, names func([16]byte) string, out *kmsg.ConsumerGroupDescribeResponseGroup) bool {
	g := gs.lookupConsumer(name)
	if g == nil {
		return false
	}
	defer g.mu.Unlock()
	out.State = g.state()
	out.Epoch = g.epoch
	out.AssignmentEpoch = g.assignmentEpoch
	out.AssignorName = g.preferredAssignor()
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID = m.id, m.instanceID, m.rackID
		dm.MemberEpoch = m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = slices.Clone(m.topics)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			dm.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
		}
		dm.Assignment = describeAssignment(m.assigned, names)
		dm.TargetAssignment = describeAssignment(g.target[m.id], names)
		dm.MemberType = 1 // consumer protocol (0 would be a classic member)
		out.Members = append(out.Members, dm)
	}
	return true
}

func describeAssignment(s tpSet, names func([16]byte) string) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	s.byTopic(func(id [16]byte, parts []int32) {
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID, t.Topic, t.Partitions = id, names(id), parts
		a.TopicPartitions = append(a.TopicPartitions, t)
	})
	return a
}

// CompileSubscription compiles a SubscribedTopicRegex. Kafka uses RE2/J
// and matches whole topic names, so the pattern is anchored.
func CompileSubscription(re string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + re + `)$`)
}

// dropEmptyConsumerLocked makes way for a classic group named name: an
// Empty consumer group is deleted (its offsets stay), one with members is
// kept and false returned. The caller holds gs.mu.
func (gs *Groups) dropEmptyConsumerLocked(name string) bool {
	g := gs.consumer[name]
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.members) > 0 {
		return false
	}
	g.dead = true
	delete(gs.consumer, name)
	return true
}
