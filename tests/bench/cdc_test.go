package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kafgres/kafgres/tests/harness"
)

// BenchmarkCDC: the workloads of issue #11, on a table with one mapping to
// a 3-partition topic, each record consumed by a franz-go consumer.
//
//   - bulk: 20 transactions of 10,000 INSERTed rows, one after another;
//     rows/s from the first COMMIT to the last record consumed (and, for
//     reference, end-to-end-s from the first INSERT).
//   - single: 20,000 single-row INSERT transactions from one client;
//     commit-to-consumer p50 and p99 over every row, and rows/s.
//
// Each starts after one row of warm-up has reached the consumer: the
// first change makes the mapping's render function (tens of ms), and the
// consumer must be fetching, or the first few hundred rows measure that.
//
// b.N is ignored: the workloads are fixed so that numbers compare across
// runs and with other systems run on the same workload.
func BenchmarkCDC(b *testing.B) {
	for _, w := range []struct {
		name       string
		txns, rows int
	}{
		{"bulk", 20, 10_000},
		{"single", 20_000, 1},
	} {
		b.Run(w.name, func(b *testing.B) {
			c := harness.Start(b)
			c.CreateTopic(b, "cdc", 3)
			c.Exec(b, `CREATE TABLE cdc_rows (id bigint PRIMARY KEY, customer int, total numeric, status text)`)
			c.Exec(b, `SELECT kafgres_add_mapping('cdc', 'public.cdc_rows', 'cdc',
				value_expr => $$ jsonb_build_object('id', new.id, 'total', new.total, 'status', new.status, 'op', op) $$,
				key_expr => $$ new.id::text $$)`)
			conn := c.Conn(b)
			ctx := context.Background()
			total := w.txns * w.rows
			l := newLatencies()
			wait := l.consumeAsync(c.Addr, "cdc", total+1, 10*time.Minute)
			// one row first, not measured: the render function is made
			// and the consumer is fetching before the clock starts
			if _, err := conn.Exec(ctx, `INSERT INTO cdc_rows VALUES (-1, 0, 0, 'warm-up')`); err != nil {
				b.Fatal(err)
			}
			harness.Eventually(b, time.Minute, func() error {
				l.mu.Lock()
				defer l.mu.Unlock()
				if _, ok := l.received["-1"]; !ok {
					return fmt.Errorf("warm-up row not consumed")
				}
				return nil
			})

			b.ResetTimer()
			start := time.Now()
			for i := 0; i < w.txns; i++ {
				first, last := int64(i*w.rows), int64((i+1)*w.rows-1)
				if w.rows == 1 {
					_, err := conn.Exec(ctx, `INSERT INTO cdc_rows VALUES ($1::bigint, $1::bigint % 100, 9.99, 'placed')`, first)
					if err != nil {
						b.Fatal(err)
					}
				} else {
					_, err := conn.Exec(ctx, `INSERT INTO cdc_rows SELECT g, g % 100, 9.99, 'placed' FROM generate_series($1::bigint, $2::bigint) g`, first, last)
					if err != nil {
						b.Fatal(err)
					}
				}
				// every row's commit time, so that each record pairs with it
				for id := first; id <= last; id++ {
					l.commit(strconv.FormatInt(id, 10))
				}
			}
			if err := wait(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()

			l.mu.Lock()
			window := l.last.Sub(l.first)
			l.mu.Unlock()
			b.ReportMetric(float64(total)/window.Seconds(), "rows/s")
			if w.rows > 1 {
				b.ReportMetric(time.Since(start).Seconds(), "end-to-end-s")
			} else {
				l.report(b)
			}
		})
	}
}
