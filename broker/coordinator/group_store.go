package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupRecordVersion is the GroupMetadataValue version stored: the newest
// that is not flexible, as Kafka 4.4 writes for classic groups.
const groupRecordVersion = 3

// record is the group's durable state as Kafka's GroupMetadataValue: the
// generation, the selected protocol, the leader and every member with its
// subscription (the selected protocol's metadata) and assignment; an
// Empty group has no members, leader or protocol.
func (g *group) record() []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupRecordVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.Protocol = g.protocolPtr()
	if g.leader != "" && len(g.members) > 0 {
		leader := g.leader
		v.Leader = &leader
	}
	v.CurrentStateTimestamp = time.Now().UnixMilli()
	for _, id := range g.order {
		m := g.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// persist stores the group's record (g.mu held); without a store, nothing.
func (g *group) persist() error {
	st := g.gs.cfg.Store
	if st == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return st.SaveGroup(ctx, g.name, g.record())
}

// unstore deletes the record of an Empty group (g.mu held), for
// DeleteGroups; a group in any other state keeps it.
func (g *group) unstore() *kerr.Error {
	st := g.gs.cfg.Store
	if st == nil || g.state != groupEmpty {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := st.DeleteGroup(ctx, g.name); err != nil {
		g.gs.log.Error("delete group record", "group", g.name, "err", err)
		return kerr.CoordinatorNotAvailable
	}
	return nil
}

// Restore brings back a group from its stored record, before the broker
// serves requests: Stable with its members, whose sessions count from now
// (a member that does not come back expires and the group rebalances), or
// Empty. The members' supported protocols are the selected one only, with
// the subscription stored, as Kafka loads them.
func (gs *Groups) Restore(name string, value []byte) error {
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("restore group %q: %w", name, err)
	}
	g := gs.newGroup(name)
	g.generation, g.protocolType = v.Generation, v.ProtocolType
	// Not yet in gs.all: nobody else can see g, but its timers take g.mu.
	g.mu.Lock()
	if len(v.Members) > 0 && v.Protocol != nil {
		g.protocol = *v.Protocol
		for _, vm := range v.Members {
			m := &member{
				id:               vm.MemberID,
				instanceID:       vm.InstanceID,
				clientID:         vm.ClientID,
				clientHost:       vm.ClientHost,
				protocolType:     v.ProtocolType,
				protocols:        []Protocol{{Name: g.protocol, Metadata: vm.Subscription}},
				rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
				sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
				assignment:       vm.Assignment,
			}
			g.members[m.id] = m
			g.order = append(g.order, m.id)
			if m.instanceID != nil {
				g.static[*m.instanceID] = m.id
			}
			g.scheduleHeartbeat(m, m.sessionTimeout)
		}
		g.leader = g.order[0]
		if v.Leader != nil && g.members[*v.Leader] != nil {
			g.leader = *v.Leader
		}
		g.transition(groupStable)
	}
	g.mu.Unlock()
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.all[name] != nil {
		return fmt.Errorf("restore group %q: already known", name)
	}
	gs.all[name] = g
	return nil
}
