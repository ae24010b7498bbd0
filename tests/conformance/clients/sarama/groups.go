package main

// Consumer-group scenarios: sarama.NewConsumerGroup for the member,
// ClusterAdmin for offsets, describe and list.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func init() {
	scenarios["group-consume-commit"] = groupConsumeCommit
	scenarios["group-describe"] = groupDescribe
	scenarios["group-list"] = groupList
	scenarios["group-errors"] = func(r *runner, emit emitFunc) error {
		emit(map[string]any{"skip": "Sarama has no raw group requests outside its consumer group"})
		return nil
	}
}

func groupConfig() *sarama.Config {
	c := config()
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	return c
}

// handler counts what a member consumes, marks it, and tells when it has
// an assignment and when it has seen want records.
type handler struct {
	want     int
	mu       sync.Mutex
	n        int
	assigned chan struct{}
	enough   chan struct{}
	once     sync.Once
	done     sync.Once
	setup    func(sarama.ConsumerGroupSession) // run on each assignment, before assigned closes
}

func newHandler(want int) *handler {
	return &handler{want: want, assigned: make(chan struct{}), enough: make(chan struct{})}
}

func (h *handler) Setup(s sarama.ConsumerGroupSession) error {
	if h.setup != nil {
		h.setup(s)
	}
	h.once.Do(func() { close(h.assigned) })
	return nil
}
func (h *handler) Cleanup(s sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.n++
		if h.want > 0 && h.n >= h.want {
			s.Commit()
			h.done.Do(func() { close(h.enough) })
		}
		h.mu.Unlock()
	}
	return nil
}

func (h *handler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// member starts a group member that consumes until stopped; stop closes it.
func (r *runner) member(h *handler) (stop func() error, err error) {
	g, err := sarama.NewConsumerGroup([]string{r.Bootstrap}, r.Group(), groupConfig())
	if err != nil {
		return nil, fmt.Errorf("creating consumer group: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{r.Topic(0)}, h); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return func() error {
		cancel()
		wg.Wait()
		return g.Close()
	}, nil
}

func (r *runner) admin() (sarama.ClusterAdmin, error) {
	a, err := sarama.NewClusterAdmin([]string{r.Bootstrap}, config())
	if err != nil {
		return nil, fmt.Errorf("creating admin: %w", err)
	}
	return a, nil
}

func groupConsumeCommit(r *runner, emit emitFunc) error {
	c := config()
	c.Producer.Partitioner = sarama.NewManualPartitioner
	var msgs []*sarama.ProducerMessage
	for i := 0; i < 6; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: r.Topic(0), Partition: int32(i % 3),
			Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))})
	}
	if err := r.produce(c, msgs...); err != nil {
		return err
	}

	h := newHandler(6)
	stop, err := r.member(h)
	if err != nil {
		return err
	}
	select {
	case <-h.enough:
	case <-time.After(15 * time.Second):
	}
	if err := stop(); err != nil {
		return err
	}
	emit(map[string]any{"consumed": h.count()})

	a, err := r.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	offs, err := a.ListConsumerGroupOffsets(r.Group(), map[string][]int32{r.Topic(0): {0, 1, 2}})
	if err != nil {
		return err
	}
	if offs.Err != sarama.ErrNoError {
		return offs.Err
	}
	for p := int32(0); p < 3; p++ {
		b := offs.GetBlock(r.Topic(0), p)
		if b == nil {
			return fmt.Errorf("no offset for partition %d in the answer", p)
		}
		emit(map[string]any{"partition": p, "committed": b.Offset})
	}

	h2 := newHandler(0)
	stop2, err := r.member(h2)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	if err := stop2(); err != nil {
		return err
	}
	emit(map[string]any{"records_after_restart": h2.count()})
	return nil
}

func groupDescribe(r *runner, emit emitFunc) error {
	h := newHandler(0)
	stop, err := r.member(h)
	if err != nil {
		return err
	}
	defer stop()
	select {
	case <-h.assigned:
	case <-time.After(15 * time.Second):
		return fmt.Errorf("no assignment in 15 s: %w", context.DeadlineExceeded)
	}
	a, err := r.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	gs, err := a.DescribeConsumerGroups([]string{r.Group()})
	if err != nil {
		return err
	}
	if len(gs) != 1 {
		return fmt.Errorf("describe: %d groups in the answer", len(gs))
	}
	g := gs[0]
	if g.Err != sarama.ErrNoError {
		return g.Err
	}
	emit(map[string]any{"state": g.State, "protocol_type": g.ProtocolType, "protocol": g.Protocol, "members": len(g.Members)})
	var assigned [][]int32
	for _, m := range g.Members {
		ma, err := m.GetMemberAssignment()
		if err != nil {
			return fmt.Errorf("member assignment: %w", err)
		}
		var ps []int32
		if ma != nil {
			ps = append(ps, ma.Topics[r.Topic(0)]...)
		}
		assigned = append(assigned, int32s(ps))
	}
	sort.Slice(assigned, func(i, j int) bool { return fmt.Sprint(assigned[i]) < fmt.Sprint(assigned[j]) })
	for i, ps := range assigned {
		emit(map[string]any{"member": i, "assigned": ps})
	}
	return nil
}

func groupList(r *runner, emit emitFunc) error {
	h := newHandler(0)
	// an offset commit makes the group outlive its member (state Empty)
	h.setup = func(s sarama.ConsumerGroupSession) {
		s.MarkOffset(r.Topic(0), 0, 0, "")
		s.Commit()
	}
	stop, err := r.member(h)
	if err != nil {
		return err
	}
	select {
	case <-h.assigned:
	case <-time.After(15 * time.Second):
		stop()
		return fmt.Errorf("no assignment in 15 s: %w", context.DeadlineExceeded)
	}
	if err := stop(); err != nil {
		return err
	}
	a, err := r.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	groups, err := a.ListConsumerGroups()
	if err != nil {
		return err
	}
	pt, ok := groups[r.Group()]
	obs := map[string]any{"present": ok}
	if ok {
		obs["protocol_type"] = pt
	}
	emit(obs)
	return nil
}
