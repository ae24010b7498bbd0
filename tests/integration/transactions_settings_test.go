package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestTransactionSettings checks that the four transaction coordinator
// GUCs reach the broker (supervisor flag -> broker.Config) and take
// effect: DescribeConfigs reports them as static broker configs, a
// transaction.timeout.ms above kafgres.transaction_max_timeout is refused,
// an ongoing transaction past its timeout is aborted within
// kafgres.transaction_abort_timed_out_interval (Kafka's default, 10 s,
// would not do it within the test's wait), and the idle transactional id
// is then forgotten after kafgres.transactional_id_expiration, looked for
// every kafgres.transaction_remove_expired_interval.
func TestTransactionSettings(t *testing.T) {
	c := harness.Start(t,
		"kafgres.transaction_max_timeout = '20s'",
		"kafgres.transactional_id_expiration = 1500",
		"kafgres.transaction_abort_timed_out_interval = 200",
		"kafgres.transaction_remove_expired_interval = 300",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic(t, "txset", 1)
	db := c.Conn(t)

	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType = kmsg.ConfigResourceTypeBroker
	dr.ResourceName = "1"
	dreq.Resources = append(dreq.Resources, dr)
	dresp, err := dreq.RequestWith(ctx, admin)
	if err != nil || len(dresp.Resources) != 1 {
		t.Fatalf("describe broker configs: %v", err)
	}
	want := map[string]string{
		"transaction.max.timeout.ms":                                  "20000",
		"transactional.id.expiration.ms":                              "1500",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
		"transaction.remove.expired.transaction.cleanup.interval.ms":  "300",
	}
	for _, cfg := range dresp.Resources[0].Configs {
		w, ok := want[cfg.Name]
		if !ok {
			continue
		}
		if cfg.Value == nil || *cfg.Value != w || cfg.Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Errorf("%s = %v (source %v), want %s as a static broker config", cfg.Name, cfg.Value, cfg.Source, w)
		}
		delete(want, cfg.Name)
	}
	if len(want) > 0 {
		t.Errorf("not described: %v", want)
	}

	initPID := func(txnID string, timeoutMs int32) int16 {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(txnID)
		req.TransactionTimeoutMillis = timeoutMs
		req.ProducerID, req.ProducerEpoch = -1, -1
		var resp *kmsg.InitProducerIDResponse
		for i := 0; i < 50; i++ { // the coordinator may still be loading
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKey, fc.CoordinatorType = txnID, 1
			if _, err := fc.RequestWith(ctx, admin); err != nil {
				t.Fatalf("FindCoordinator: %v", err)
			}
			if resp, err = req.RequestWith(ctx, admin); err != nil {
				t.Fatalf("InitProducerId: %v", err)
			}
			if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code && resp.ErrorCode != kerr.ConcurrentTransactions.Code {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return resp.ErrorCode
	}
	if code := initPID("tx-too-long", 20001); code != kerr.InvalidTransactionTimeout.Code {
		t.Errorf("InitProducerId with transaction.timeout.ms 20001: %v, want INVALID_TRANSACTION_TIMEOUT", kerr.ErrorForCode(code))
	}
	if code := initPID("tx-max", 20000); code != 0 {
		t.Errorf("InitProducerId with transaction.timeout.ms 20000: %v, want no error", kerr.ErrorForCode(code))
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.TransactionalID("tx-timeout"),
		kgo.TransactionTimeout(time.Second), kgo.DefaultProduceTopic("txset"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("never committed")}).FirstErr(); err != nil {
		t.Fatalf("produce in the transaction: %v", err)
	}
	state := func() string {
		var s string
		err := db.QueryRow(ctx, `SELECT state FROM kafgres.transaction WHERE transactional_id = convert_to('tx-timeout', 'UTF8')`).Scan(&s)
		if err == pgx.ErrNoRows {
			return "(none)"
		} else if err != nil {
			t.Fatalf("read kafgres.transaction: %v", err)
		}
		return s
	}
	wait := func(what string, within time.Duration, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		s := state()
		for !ok(s) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: state still %s after %v", what, s, within)
			}
			time.Sleep(50 * time.Millisecond)
			s = state()
		}
	}
	wait("timed-out transaction aborted", 5*time.Second, func(s string) bool { return s == "CompleteAbort" })
	wait("expired transactional id removed", 6*time.Second, func(s string) bool { return s == "(none)" })
}
