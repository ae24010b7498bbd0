package mappings

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/broker/metadata/listen"
	"github.com/kafgres/kafgres/broker/retry"
	"github.com/kafgres/kafgres/decoder"
)

// Renderer turns decoded changes (and snapshot row messages) into records
// by evaluating each mapping's expressions in Postgres.
//
// Each mapping gets a function kafgres_render.m<id>, created by the broker
// (a superuser) after Validate, owned by the mapping's owner and SECURITY
// DEFINER: it runs with the owner's privileges only, and Postgres refuses
// SET ROLE, set_config('role', ...) and SET SESSION AUTHORIZATION inside a
// security-definer function, so an expression cannot climb back to the
// broker's role. It is called with whole arrays of rows, once per mapping
// and group of transactions, in a READ ONLY transaction that is always
// rolled back.
//
// Render functions run on a connection of their own (the render pool),
// never used for anything else: whatever an expression leaves in its
// session that a rollback does not undo (prepared statements, session
// advisory locks) is cleared after every call, and the broker's own
// statements (status, dead letters, definitions) run on pool, where no
// author's code ever runs.
type Renderer struct {
	pool    *pgxpool.Pool // bookkeeping: definitions, status, dead letters
	render  *pgxpool.Pool // render calls only
	timeout time.Duration // per render call; 0: none
	logger  *slog.Logger

	// stale is set by the LISTEN goroutine: reload definitions before the
	// next render.
	stale      atomic.Bool
	listenOnce sync.Once
	stopListen context.CancelFunc
	listenDone chan struct{}

	// Render is called from one goroutine (the producer); mu only makes
	// concurrent misuse safe.
	mu         sync.Mutex
	loaded     bool
	byRel      map[uint32][]*Mapping // live mappings by source table
	byID       map[int64]*Mapping    // live mappings
	retired    map[int64]*Mapping    // removed, still rendering what matched them
	lastRetire time.Time             // last advanceRetired
	fns        map[int64]*renderFn
	status     map[int64]*mappingStatus
	// deadHigh is the highest change position with a mapping's dead
	// letter, as far as known (deadHighKnown): a change at or before it
	// may be dead-lettered already (deadLettered).
	deadHigh      decoder.LSN
	deadHighKnown bool
	lastFlush     time.Time
	flushTimer    *time.Timer // pending trailing flush, if any
	// replaysPurged: no dead letter delivered by a replay is left to
	// remove (purgeReplayed), as far as known
	replaysPurged bool
	lastPurge     time.Time
	purgeTimer    *time.Timer // pending purgeReplayed, if any
	closed        bool
}

// renderFn is what the renderer knows of one mapping's render function.
type renderFn struct {
	key     string   // Mapping.key() the function was made for
	name    string   // kafgres_render.m<id>
	columns []string // the table's columns when it was made: the fields of its record literals
	// the table's key (replica identity index, else primary key) when
	// it was made, for what a failed row's status says (rowKey)
	keyColumns []string
	broken     error       // the definition cannot be rendered (Validate failed, ...)
	direct     *directPlan // the expressions as the broker renders them itself (direct.go); nil: only the function can
}

// mappingStatus is the broker's view of kafgres.mapping_status, written in
// batches (flushStatus), not per change.
type mappingStatus struct {
	status, lastError      string
	since                  time.Time // when status last changed
	rendered, deadLettered int64     // not yet written
	dirty                  bool
	changed                bool // status or last_error changed: write at once
}

// set changes the status and last error; a change is written at once.
func (st *mappingStatus) set(status, lastError string) {
	if st.status == status && st.lastError == lastError {
		return
	}
	if st.status != status {
		st.since = time.Now()
	}
	st.status, st.lastError, st.dirty, st.changed = status, lastError, true, true
}

// job is the rows of one mapping in one Render call.
type job struct {
	m    *Mapping
	rows []renderRow
	// maxBytes is the largest key and value together the topic takes
	// (max.message.bytes); 0: not known
	maxBytes int64
	// resumes: rows holds a resume request's place (hold)
	resumes bool
}

// Log is what the renderer asks of the log its records go to.
type Log interface {
	// Delivered says whether every partition of topic has the source
	// position end: a change of the transaction that ends there was
	// rendered before (its record appended, or none due), and is not
	// rendered again. A group replayed after a crash, or streamed again
	// after a reconnect, holds such changes; rendered again now, a change
	// could fail where it passed before (a column renamed meanwhile),
	// and be dead-lettered as well as delivered.
	Delivered(topic string, end decoder.LSN) bool
	// MaxRecordBytes is the topic's max.message.bytes, 0 if not known: a
	// rendered key and value larger together are refused where they are
	// rendered, in Postgres, and never sent to the broker.
	MaxRecordBytes(topic string) int64
}

type renderRow struct {
	item   decoder.Item    // the change, snapshot row or replay request
	err    error           // cannot be rendered at all (an unchanged TOASTed value): goes only to the dead letter
	change *decoder.Change // the change's images, sent as record literals; nil for a snapshot or replayed row
	// a snapshot or replayed row's images as JSON objects (nil: none),
	// read by column name
	newJSON, oldJSON *string
	// replay is the kafgres.dead_letter id of a replayed row, 0 for
	// others
	replay int64
	// resume marks a resume request's place (hold); first and last are a
	// replay request's range of dead letters
	resume      bool
	first, last int64
	op          string
	lsn         decoder.LSN
	end         decoder.LSN // the end of the change's transaction
	xid         int64
	commitTS    time.Time
}

// images are the row's new and old images as JSON objects, for the dead
// letter; nil for none.
func (row *renderRow) images() (newRow, oldRow *string) {
	if row.change == nil {
		return row.newJSON, row.oldJSON
	}
	if row.change.Err != nil {
		// the frame as it came, for whoever looks into why
		s := `{"unreadable_frame": "` + base64.StdEncoding.EncodeToString(row.change.Raw) + `"}`
		return &s, nil
	}
	newRow, _ = tupleJSON(row.change.New, row.change.Old)
	oldRow, _ = tupleJSON(row.change.Old, nil) // an old image has no unchanged values
	return newRow, oldRow
}

// rendered is one output row of a render function.
type rendered struct {
	ord  int32
	pass bool
	k, v []byte
	// size is the key's and value's bytes together when the function
	// refused to send them for their size (then k and v are nil)
	size int64
}

// tooLarge takes out of res the records larger than j's topic takes, to
// fail their rows (indexes of res's rows, of which there are n) instead:
// those the render function refused to send, and those the broker
// rendered itself.
func tooLarge(j *job, res []rendered, n int) []failure {
	if j.maxBytes <= 0 {
		return nil
	}
	var failed []failure
	for i := range res {
		o := &res[i]
		size := o.size
		if size == 0 {
			size = int64(len(o.k) + len(o.v))
		}
		if !o.pass || size <= j.maxBytes || o.ord < 0 || int(o.ord) >= n {
			continue
		}
		failed = append(failed, failure{row: int(o.ord), err: fmt.Errorf(
			"record of %d bytes (key and value) is larger than max.message.bytes %d of topic %q; not appended",
			size, j.maxBytes, j.m.Topic)})
		o.pass, o.k, o.v = false, nil, nil
	}
	return failed
}

const (
	statusActive  = "active"
	statusStalled = "stalled"
	statusError   = "error"
	statusPaused  = "paused"

	statusFlushInterval = time.Second
	retireInterval      = 2 * time.Second
	notifyChannel       = "kafgres_mappings"
	// The LISTEN connection is retried after 100 ms, doubling up to 5 s.
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Config is what the renderer takes from the broker's settings.
type Config struct {
	// RenderTimeout limits each call of a render function
	// (kafgres.mapping_render_timeout); 0 means no limit.
	RenderTimeout time.Duration
}

// NewRenderer renders with pool for its bookkeeping and a one-connection
// pool of the same configuration for the render calls. Both should have
// search_path pinned to pg_catalog, pg_temp (the render pool always has).
func NewRenderer(pool *pgxpool.Pool, cfg Config, logger *slog.Logger) (*Renderer, error) {
	rc := pool.Config()
	rc.MaxConns, rc.MinConns = 1, 0
	cc := rc.ConnConfig
	// Unnamed statements only: a named one could be deallocated and
	// prepared again, with other SQL, by an expression (PREPARE does not
	// roll back), and then run by the broker.
	cc.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	cc.StatementCacheCapacity, cc.DescriptionCacheCapacity = 0, 0
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["search_path"] = "pg_catalog, pg_temp"
	timeout := max(cfg.RenderTimeout, 0)
	if timeout > 0 {
		// The render time limit, for the session: the limit is armed when
		// a statement starts, so an expression that changes
		// statement_timeout cannot lift it from its own statement, and
		// every render transaction is rolled back, which undoes any
		// change for the next. The Go deadline (backstop) is there should
		// the server's timer not fire.
		cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)
	}
	render, err := pgxpool.NewWithConfig(context.Background(), rc)
	if err != nil {
		return nil, fmt.Errorf("render pool: %w", err)
	}
	return &Renderer{
		pool:    pool,
		render:  render,
		timeout: timeout,
		logger:  logger,
		byRel:   map[uint32][]*Mapping{},
		byID:    map[int64]*Mapping{},
		retired: map[int64]*Mapping{},
		fns:     map[int64]*renderFn{},
		status:  map[int64]*mappingStatus{},
	}, nil
}

// Close stops the LISTEN connection and the render pool. The bookkeeping
// pool is the caller's.
func (r *Renderer) Close() {
	r.mu.Lock()
	r.closed = true
	if r.flushTimer != nil {
		r.flushTimer.Stop()
	}
	if r.purgeTimer != nil {
		r.purgeTimer.Stop()
	}
	stop, done := r.stopListen, r.listenDone
	r.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	r.render.Close()
}

// Render renders every change and snapshot row of txns: the records of
// each (one per mapping of the table whose filter passes). An error means
// nothing should be appended; the caller retries the group.
//
// log (nil: none) says which transactions are rendered already, and how
// large a record may be.
func (r *Renderer) Render(ctx context.Context, txns []*decoder.Transaction, log Log) (Rendered, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listenOnce.Do(r.startListener)

	need, unknown := false, false
	n := 0 // changes and snapshot rows
	for _, tx := range txns {
		for _, item := range tx.Items {
			switch it := item.(type) {
			case *decoder.Change:
				need = true
				n++
				if len(it.Mappings) == 0 {
					_, ok := r.byRel[it.RelID]
					unknown = unknown || !ok
				}
				for _, id := range it.Mappings {
					unknown = unknown || r.lookup(id) == nil
				}
			case *decoder.SnapshotRow:
				need = true
				n++
				unknown = unknown || r.lookup(it.MappingID) == nil
			case *decoder.MappingRequest:
				need = true
				n++
				unknown = unknown || r.lookup(it.MappingID) == nil || r.pauseUnknown(it, tx)
			}
		}
	}
	out := make(Rendered, n)
	if len(r.retired) > 0 && time.Since(r.lastRetire) >= retireInterval {
		r.advanceRetired(ctx)
	}
	if !r.replaysPurged && time.Since(r.lastPurge) >= retireInterval {
		r.purgeReplayed(ctx)
	}
	if !need {
		return out, nil
	}
	if !r.loaded || unknown || r.stale.Load() {
		if err := r.reload(ctx); err != nil {
			return nil, err
		}
	}

	jobs, err := r.collect(ctx, txns, n)
	if err != nil {
		return nil, err
	}
	// Privileges can be revoked at any time, and REVOKE notifies nobody:
	// every render call checks its mapping's owner first (callSQL).
	for _, j := range jobs {
		if err := r.renderJob(ctx, j, log, out); err != nil {
			r.flushStatus(ctx, true)
			return nil, err
		}
	}
	r.flushStatus(ctx, false)
	return out, nil
}

// collect groups the rows to render by mapping, in mapping id order.
// n is how many changes and snapshot rows txns hold.
func (r *Renderer) collect(ctx context.Context, txns []*decoder.Transaction, n int) ([]*job, error) {
	byID := map[int64]*job{}
	add := func(m *Mapping, row renderRow) {
		j := byID[m.ID]
		if j == nil {
			// most groups are of one mapping: room for every row at once
			j = &job{m: m, rows: make([]renderRow, 0, n)}
			byID[m.ID] = j
		}
		j.rows = append(j.rows, row)
	}
	type snapRow struct {
		id  int64
		row renderRow
	}
	var (
		snaps   []snapRow
		replays []snapRow // row: the request's transaction and position
	)
	for _, tx := range txns {
		for _, item := range tx.Items {
			base := renderRow{item: item, end: tx.EndLSN, xid: int64(tx.Xid), commitTS: tx.CommitTime}
			if tx.Skipped != nil {
				base.err = fmt.Errorf("%w: its transaction was skipped with kafgres_skip_transaction: %w", errBroken, tx.Skipped)
			}
			switch it := item.(type) {
			case *decoder.Change:
				row := base
				row.op, row.lsn, row.change = string(it.Op), it.LSN, it
				switch {
				case row.err != nil: // skipped
				case it.Err != nil:
					// no mapping can render a change the decoder could
					// not read, so it never stalls one either
					row.err = fmt.Errorf("%w: the output plugin's frame of this change could not be read: %w", errBroken, it.Err)
				default:
					if te := unchangedToast(it.New, it.Old); te != nil {
						te.table = pgx.Identifier{it.Schema, it.Table}.Sanitize()
						row.err = te
					}
				}
				// the definitions of the mappings the output plugin found
				// matching the change where it is in the WAL, live or
				// retired since, or, from a plugin that does not say
				// (frame version 1), the table's live mappings
				if len(it.Mappings) == 0 {
					for _, m := range r.byRel[it.RelID] {
						add(m, row)
					}
				}
				for _, id := range it.Mappings {
					add(r.definition(id), row)
				}
			case *decoder.SnapshotRow:
				row := base
				row.op, row.lsn, row.newJSON = "R", it.LSN, &it.Row
				snaps = append(snaps, snapRow{id: it.MappingID, row: row})
			case *decoder.MappingRequest:
				row := base
				row.lsn = it.LSN
				switch it.Kind {
				case decoder.RequestReplay:
					row.first, row.last = it.First, it.Last
					replays = append(replays, snapRow{id: it.MappingID, row: row})
				case decoder.RequestResume:
					// where the held changes go (hold)
					row.resume = true
					m := r.definition(it.MappingID)
					add(m, row)
					byID[m.ID].resumes = true
				}
				// a pause is read with the definitions (pauseUnknown)
			}
		}
	}
	if len(snaps) > 0 {
		ids := make([]int64, len(snaps))
		xids := make([]int64, len(snaps))
		for i, s := range snaps {
			ids[i], xids[i] = s.id, s.row.xid
		}
		ok, err := r.snapshotsStarted(ctx, ids, xids)
		if err != nil {
			return nil, err
		}
		for _, s := range snaps {
			if !ok[[2]int64{s.id, s.row.xid}] {
				r.logger.Warn("drop snapshot row not written by kafgres_snapshot_mapping", "mapping_id", s.id, "lsn", s.row.lsn, "xid", s.row.xid)
				continue
			}
			add(r.definition(s.id), s.row)
		}
	}
	for _, req := range replays {
		rows, err := r.replayRows(ctx, req.id, req.row)
		if err != nil {
			return nil, err
		}
		m := r.definition(req.id)
		for _, row := range rows {
			add(m, row)
		}
	}
	ids := make([]int64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	jobs := make([]*job, len(ids))
	for i, id := range ids {
		jobs[i] = byID[id]
	}
	return jobs, nil
}

// lookup is the live or retired definition of mapping id, nil if none.
func (r *Renderer) lookup(id int64) *Mapping {
	if m := r.byID[id]; m != nil {
		return m
	}
	return r.retired[id]
}

// definition is lookup, or when no definition is left, one that
// dead-letters what it is given, saying so.
func (r *Renderer) definition(id int64) *Mapping {
	if m := r.lookup(id); m != nil {
		return m
	}
	return &Mapping{ID: id, Name: "", OnError: OnErrorDeadLetter, Retired: true, Unknown: true}
}

const snapshotsStartedSQL = `
SELECT u.m, u.x
  FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::int8[])) AS u(m, x)
 WHERE EXISTS (SELECT 1 FROM kafgres.mapping_snapshot AS s
                WHERE s.mapping_id OPERATOR(pg_catalog.=) u.m
                  AND s.xid::text::bigint OPERATOR(pg_catalog.%) 4294967296 OPERATOR(pg_catalog.=) u.x)`

// snapshotsStarted says which (mapping, xid) pairs were marked by
// kafgres_snapshot_mapping: anyone may emit a logical message, but only a
// mapping's owner can mark a transaction as its snapshot.
func (r *Renderer) snapshotsStarted(ctx context.Context, ids, xids []int64) (map[[2]int64]bool, error) {
	rows, err := r.pool.Query(ctx, snapshotsStartedSQL, ids, xids)
	if err != nil {
		return nil, fmt.Errorf("check snapshot markers: %w", err)
	}
	ok := map[[2]int64]bool{}
	var m, x int64
	_, err = pgx.ForEachRow(rows, []any{&m, &x}, func() error {
		ok[[2]int64{m, x}] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check snapshot markers: %w", err)
	}
	return ok, nil
}

// renderJob renders one mapping's rows into out. Rows that fail are
// dead-lettered or stall the mapping (an error), as its on_error says;
// a retired mapping, or one whose definition can never render, never
// stalls.
func (r *Renderer) renderJob(ctx context.Context, j *job, log Log, out Rendered) error {
	j.maxBytes = 0
	if log != nil {
		j.maxBytes = log.MaxRecordBytes(j.m.Topic)
		// asked once per transaction: its rows are next to each other
		var (
			lastEnd decoder.LSN
			last    bool
		)
		j.rows = slices.DeleteFunc(j.rows, func(row renderRow) bool {
			if row.end != lastEnd {
				lastEnd, last = row.end, log.Delivered(j.m.Topic, row.end)
			}
			return last
		})
	}
	if err := r.deadLettered(ctx, j); err != nil {
		return err
	}
	if err := r.hold(ctx, j); err != nil {
		return err
	}
	if len(j.rows) == 0 {
		return nil
	}
	// rows that cannot be rendered whatever the definition fail first:
	// those the decoder said so of, and those of a shape the table no
	// longer has (shapeChanged)
	fn, _, err := r.ensureFunction(ctx, j.m, false)
	if err != nil {
		return err
	}
	var columns []string
	if fn != nil && fn.broken == nil {
		columns = fn.columns
	}
	rowErr := func(row renderRow) error {
		switch {
		case row.err != nil || columns == nil:
			return row.err
		case row.change != nil:
			return shapeChanged(columns, row.change)
		case row.replay != 0:
			return jsonShapeChanged(columns, row.newJSON, row.oldJSON, j.m.Source)
		}
		return nil
	}
	anyErr := func() bool {
		return slices.ContainsFunc(j.rows, func(row renderRow) bool { return rowErr(row) != nil })
	}
	failing := anyErr()
	if failing && columns != nil {
		// The function may have been made before the table changed
		// (nobody told the broker): the rows are judged by the columns
		// the table has now, for which it is made again.
		if err := r.reload(ctx); err != nil {
			return err
		}
		j.m = r.definition(j.m.ID)
		if fn, _, err = r.ensureFunction(ctx, j.m, true); err != nil {
			return err
		}
		columns = nil
		if fn != nil && fn.broken == nil {
			columns = fn.columns
		}
		failing = anyErr()
	}
	var (
		failed []failure
		rows   = j.rows // the rest, sent to the function
		idx    []int    // their indexes in j.rows; nil: the same
	)
	if failing {
		rows = nil
		for i, row := range j.rows {
			if err := rowErr(row); err != nil {
				failed = append(failed, failure{row: i, err: err})
				continue
			}
			rows = append(rows, row)
			idx = append(idx, i)
		}
	}
	if len(rows) == 0 {
		// no call to check the owner on the way: check here, so that a
		// paused mapping says so whatever its rows
		if paused, err := r.pauseIfDenied(ctx, j); paused || err != nil {
			return err
		}
	}
	res, rowFailed, err := r.renderRows(ctx, j, rows)
	if errors.Is(err, errAccessRefused) {
		return r.refused(ctx, j, out)
	}
	if err != nil {
		return err
	}
	rowFailed = append(rowFailed, tooLarge(j, res, len(rows))...)
	for _, f := range rowFailed {
		if idx != nil {
			f.row = idx[f.row]
		}
		failed = append(failed, f)
	}
	if len(failed) > 0 {
		slices.SortFunc(failed, func(a, b failure) int { return a.row - b.row })
		if err := r.handleFailures(ctx, j, failed); err != nil {
			return err
		}
	}
	if err := r.markReplayed(ctx, j, failed); err != nil {
		return err
	}
	n := int64(0)
	// one allocation for the records of the rows that have only one (most)
	slab := make([]Record, 0, len(res))
	for _, o := range res {
		if !o.pass || int(o.ord) >= len(rows) || o.ord < 0 {
			continue
		}
		row := &rows[o.ord]
		rec := Record{Topic: j.m.Topic, Key: o.k, Value: o.v}
		if recs := out[row.item]; recs != nil {
			out[row.item] = append(recs, rec)
		} else {
			slab = append(slab, rec)
			out[row.item] = slab[len(slab)-1 : len(slab) : len(slab)]
		}
		n++
	}
	// The mapping's latest change decides its status: error while that
	// one could not be rendered (it is in the dead letters), active again
	// once a later one is.
	st := r.statusOf(j.m.ID)
	switch last := len(failed) - 1; {
	case last >= 0 && failed[last].row == len(j.rows)-1:
		st.set(statusError, r.failureText(j, failed[last]))
	case j.m.Pause.active():
		st.set(statusPaused, "paused: "+j.m.Pause.Reason)
	default:
		st.set(statusActive, "")
	}
	if n > 0 {
		st.rendered += n
		st.dirty = true
	}
	return nil
}

const (
	deadHighSQL = `
SELECT pg_catalog.max(d.lsn)::pg_catalog.text FROM kafgres.dead_letter AS d WHERE d.mapping_id IS NOT NULL`
	deadLetteredSQL = `
SELECT d.lsn::pg_catalog.text FROM kafgres.dead_letter AS d
 WHERE d.mapping_id OPERATOR(pg_catalog.=) $1
   AND d.lsn OPERATOR(pg_catalog.=) ANY ($2::text[]::pg_catalog.pg_lsn[])`
)

// deadLettered takes out of j the rows already dead-lettered for its
// mapping.
// A dead letter is written before the group's records are appended and
// the slot acknowledged, so a group rendered again -- retried after a
// failure, or replayed after a crash -- may hold changes dead-lettered
// the first time; rendered again they could now pass (a column renamed
// back meanwhile), and be delivered as well. A dead letter decides its
// change for good. Only changes at or before the highest dead-lettered
// position are looked up, so a group of new changes costs no query.
func (r *Renderer) deadLettered(ctx context.Context, j *job) error {
	if !r.deadHighKnown {
		var high *string
		if err := r.pool.QueryRow(ctx, deadHighSQL).Scan(&high); err != nil {
			return fmt.Errorf("read the dead letters' highest position: %w", err)
		}
		if high != nil {
			lsn, err := pglogrepl.ParseLSN(*high)
			if err != nil {
				return fmt.Errorf("read the dead letters' highest position: %w", err)
			}
			r.deadHigh = lsn
		}
		r.deadHighKnown = true
	}
	var lsns []string
	for _, row := range j.rows {
		// a replayed row is its own dead letter
		if row.replay == 0 && !row.resume && row.lsn <= r.deadHigh {
			lsns = append(lsns, row.lsn.String())
		}
	}
	if len(lsns) == 0 {
		return nil
	}
	rows, err := r.pool.Query(ctx, deadLetteredSQL, j.m.ID, lsns)
	if err != nil {
		return fmt.Errorf("look up the dead letters of mapping %s: %w", j.m.Name, err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("look up the dead letters of mapping %s: %w", j.m.Name, err)
	}
	if len(done) == 0 {
		return nil
	}
	dead := map[string]bool{}
	for _, l := range done {
		dead[l] = true
	}
	j.rows = slices.DeleteFunc(j.rows, func(row renderRow) bool { return row.replay == 0 && dead[row.lsn.String()] })
	return nil
}

// renderRows renders rows with j's definition: what they rendered to (ord
// indexes rows), and the rows that failed. When the definition cannot be
// rendered at all, every row fails with the reason. j.m is replaced when
// the definitions are reloaded.
func (r *Renderer) renderRows(ctx context.Context, j *job, rows []renderRow) ([]rendered, []failure, error) {
	if len(rows) == 0 {
		return nil, nil, nil
	}
	all := func(err error) []failure {
		failed := make([]failure, len(rows))
		for i := range rows {
			failed[i] = failure{row: i, err: err}
		}
		return failed
	}
	fn, renderErr, err := r.ensureFunction(ctx, j.m, false)
	if err != nil {
		return nil, nil, err
	}
	if fn != nil && fn.broken != nil {
		return nil, all(fn.broken), nil
	}
	if renderErr == nil && fn.direct != nil {
		if res, ok := fn.direct.render(rows, j.maxBytes); ok {
			// what the render call's access check does (checkedCallSQL)
			if ok, err := r.ownerMayRead(ctx, j.m); err != nil || !ok {
				if err == nil {
					err = errAccessRefused
				}
				return nil, nil, err
			}
			return res, nil, nil
		}
	}
	var res []rendered
	if renderErr == nil {
		res, renderErr, err = r.call(ctx, j, fn, rows)
		if err != nil {
			return nil, nil, err
		}
	}
	if renderErr != nil && staleFunction(renderErr) {
		// The table may have been renamed, or its columns changed, under
		// the function: read the definitions again (the table's current
		// name and row type) and make it again, once, before blaming the
		// rows.
		if err := r.reload(ctx); err != nil {
			return nil, nil, err
		}
		j.m = r.definition(j.m.ID)
		if fn, renderErr, err = r.ensureFunction(ctx, j.m, true); err != nil {
			return nil, nil, err
		}
		if fn != nil && fn.broken != nil {
			return nil, all(fn.broken), nil
		}
		if renderErr == nil {
			if res, renderErr, err = r.call(ctx, j, fn, rows); err != nil {
				return nil, nil, err
			}
		}
	}
	if renderErr == nil {
		return res, nil, nil
	}
	if errors.Is(renderErr, errAccessRefused) {
		return nil, nil, renderErr
	}
	if errors.Is(renderErr, errStaleColumns) {
		// the columns changed again while the function was being made:
		// no row is to blame, so the group is rendered again later
		return nil, nil, fmt.Errorf("render with %s: %w", fn.name, renderErr)
	}
	var te *timeoutError
	switch {
	case fn == nil: // no function to call: every row fails the same way
		return nil, all(renderErr), nil
	case errors.As(renderErr, &te) && len(rows) == 1:
		// the slow change is known: do not wait for it again
		return nil, all(renderErr), nil
	default:
		return r.callEach(ctx, j, fn, rows)
	}
}

type failure struct {
	row int
	err error
}

// errBroken is wrapped by the reason a definition can never render (its
// table or owner is gone, ...): no retry can help, so its rows are
// dead-lettered even when the mapping would stall.
var errBroken = errors.New("mapping cannot be rendered")

// ErrStalled is wrapped by Render's error when a mapping with on_error
// 'stall' could not render a change.
var ErrStalled = errors.New("mapping stalled")

const deadLetterSQL = `
WITH ins AS (
    INSERT INTO kafgres.dead_letter (mapping_id, mapping_name, lsn, xid, op, error, new_row, old_row, expression, held)
    SELECT u.*, $10::pg_catalog.bool FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::text[]),
                               pg_catalog.unnest($3::text[]::pg_lsn[]), pg_catalog.unnest($4::int8[]),
                               pg_catalog.unnest($5::text[]), pg_catalog.unnest($6::text[]),
                               pg_catalog.unnest($7::text[]::jsonb[]), pg_catalog.unnest($8::text[]::jsonb[]),
                               pg_catalog.unnest($9::text[]))
                    AS u(mapping_id, mapping_name, lsn, xid, op, error, new_row, old_row, expression)
    ON CONFLICT (mapping_id, lsn) DO NOTHING
    RETURNING 1)
SELECT pg_catalog.count(*) FROM ins`

func (r *Renderer) handleFailures(ctx context.Context, j *job, failed []failure) error {
	st := r.statusOf(j.m.ID)
	first := j.rows[failed[0].row]
	// a replayed row failing again is a dead letter again: it never
	// stalls, as its change did not when it was dead-lettered
	if j.m.stalls() && !errors.Is(failed[0].err, errBroken) && first.replay == 0 {
		msg := r.failureText(j, failed[0])
		if st.status != statusStalled || st.lastError != msg {
			r.logger.Error("mapping stalled", "mapping", j.m.Name, "lsn", first.lsn, "err", msg)
		}
		st.set(statusStalled, msg)
		return fmt.Errorf("%w: %s at %s: %s", ErrStalled, j.m.Name, first.lsn, msg)
	}
	return r.deadLetter(ctx, j, failed)
}

// pause handles the rows of a mapping whose owner may not (any longer)
// read all of its table. Nothing may reach the topic, and nothing may be
// lost: the rows are dead-lettered with the reason, where dead_letter's row
// security shows them only to roles that may read the table now; a mapping
// with on_error 'stall' holds everything up instead, as for any error. The
// next group whose check passes renders again and makes the mapping active.
func (r *Renderer) pause(ctx context.Context, j *job, reason string) error {
	st := r.statusOf(j.m.ID)
	msg := "paused: " + reason
	if st.status != statusPaused || st.lastError != msg {
		r.logger.Warn("mapping paused", "mapping", j.m.Name, "reason", reason)
		st.set(statusPaused, msg)
	}
	if j.m.stalls() {
		return fmt.Errorf("%w: %s at %s: %s", ErrStalled, j.m.Name, j.rows[0].lsn, msg)
	}
	failed := make([]failure, len(j.rows))
	for i := range failed {
		failed[i] = failure{row: i, err: errors.New(msg)}
	}
	return r.deadLetter(ctx, j, failed)
}

// errAccessRefused is what a render call says when the access check in
// front of it (callSQL) refused to run the function: the mapping's owner
// may no longer read its table, or is gone.
var errAccessRefused = errors.New("render call refused by the access check")

// refused handles a group whose owner the access check refused, asking
// again for the reason: a pause; or, for an owner that is gone, the
// definition's end: checkAccess cleared its Owner, so rendering again
// finds the definition broken (check) and dead-letters the rows without
// another call, which is why this recursion ends. Access given back in
// between is rare enough to be left to the group's retry.
func (r *Renderer) refused(ctx context.Context, j *job, out Rendered) error {
	if paused, err := r.pauseIfDenied(ctx, j); paused || err != nil {
		return err
	}
	if j.m.Owner == "" {
		return r.renderJob(ctx, j, nil, out) // the rows were filtered on the way in
	}
	return fmt.Errorf("render with mapping %s: the access check refused the call but finds nothing to refuse now", j.m.Name)
}

// pauseIfDenied asks whether j's owner may read its table and pauses the
// mapping if not (paused true). An owner that is gone is no pause:
// checkAccess clears j.m.Owner instead.
func (r *Renderer) pauseIfDenied(ctx context.Context, j *job) (paused bool, err error) {
	denied, err := r.checkAccess(ctx, []*Mapping{j.m})
	if err != nil {
		return false, err
	}
	reason, ok := denied[j.m.ID]
	if !ok {
		return false, nil
	}
	return true, r.pause(ctx, j, reason)
}

// deadLetter writes the failed rows of j to kafgres.dead_letter, or for
// replayed rows, their new reasons there.
func (r *Renderer) deadLetter(ctx context.Context, j *job, failed []failure) error {
	return r.writeDead(ctx, j, failed, false)
}

// writeDead is deadLetter, or with held, keeps rows of a paused mapping
// (hold), which are not counted as dead-lettered.
func (r *Renderer) writeDead(ctx context.Context, j *job, failed []failure, held bool) error {
	st := r.statusOf(j.m.ID)
	first := j.rows[failed[0].row]
	n := len(failed)
	var (
		ids   = make([]int64, 0, n)
		names = make([]string, 0, n)
		lsns  = make([]string, 0, n)
		xids  = make([]int64, 0, n)
		ops   = make([]string, 0, n)
		errs  = make([]*string, 0, n)
		exprs = make([]*string, 0, n)
		news  = make([]*string, 0, n)
		olds  = make([]*string, 0, n)

		again                 []int64 // replayed rows that failed again
		againErrs, againExprs []*string
	)
	for _, f := range failed {
		row := j.rows[f.row]
		msg := errorText(f.err)
		var expr *string
		if e := failedExpression(f.err); e != "" {
			expr = &e
		}
		if row.replay != 0 {
			again, againErrs, againExprs = append(again, row.replay), append(againErrs, &msg), append(againExprs, expr)
			continue
		}
		ids, names, lsns, xids, ops = append(ids, j.m.ID), append(names, j.m.Name), append(lsns, row.lsn.String()), append(xids, row.xid), append(ops, row.op)
		errs, exprs = append(errs, &msg), append(exprs, expr)
		newRow, oldRow := row.images()
		news, olds = append(news, newRow), append(olds, oldRow)
	}
	if len(again) > 0 {
		if err := r.replayFailed(ctx, j, again, againErrs, againExprs); err != nil {
			return err
		}
	}
	var inserted int64
	if len(ids) > 0 {
		if err := r.pool.QueryRow(ctx, deadLetterSQL, ids, names, lsns, xids, ops, errs, news, olds, exprs, held).Scan(&inserted); err != nil {
			return fmt.Errorf("dead-letter %d changes of mapping %s: %w", n, j.m.Name, err)
		}
	}
	for _, f := range failed {
		if row := j.rows[f.row]; row.replay == 0 {
			r.deadHigh = max(r.deadHigh, row.lsn)
		}
	}
	if held {
		r.logger.Info("held changes of a paused mapping", "mapping", j.m.Name, "changes", n, "first_lsn", first.lsn)
		return nil
	}
	r.logger.Warn("dead-lettered changes", "mapping", j.m.Name, "changes", n, "replayed", len(again), "first_lsn", first.lsn, "err", errorText(failed[0].err))
	st.deadLettered += inserted
	st.dirty = true
	return nil
}

// errorText is the message stored for a failed row: Postgres's own.
func errorText(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

func (r *Renderer) statusOf(id int64) *mappingStatus {
	st := r.status[id]
	if st == nil {
		st = &mappingStatus{}
		r.status[id] = st
	}
	return st
}

const flushStatusSQL = `
INSERT INTO kafgres.mapping_status AS s (mapping_id, status, last_error, rendered, dead_lettered, updated_at, status_since)
SELECT u.id, u.status, u.last_error, u.rendered, u.dead, pg_catalog.now(), u.since
  FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]),
                  pg_catalog.unnest($4::int8[]), pg_catalog.unnest($5::int8[]), pg_catalog.unnest($6::timestamptz[]))
       AS u(id, status, last_error, rendered, dead, since)
 WHERE EXISTS (SELECT 1 FROM kafgres.mapping AS m WHERE m.mapping_id OPERATOR(pg_catalog.=) u.id)
ON CONFLICT (mapping_id) DO UPDATE
   SET status = excluded.status,
       -- a broker that starts again knows no earlier change of status
       status_since = CASE WHEN s.status OPERATOR(pg_catalog.=) excluded.status THEN s.status_since
                           ELSE excluded.status_since END,
       last_error = excluded.last_error,
       rendered = s.rendered OPERATOR(pg_catalog.+) excluded.rendered,
       dead_lettered = s.dead_lettered OPERATOR(pg_catalog.+) excluded.dead_lettered,
       updated_at = excluded.updated_at`

// flushStatus writes what changed in mapping_status, in one statement:
// at once when a status changed (or with force), otherwise at most once a
// second, with a timer making sure counters left over are written even if
// no further change comes. Failures are logged: the counters are
// bookkeeping and stay pending for the next flush.
func (r *Renderer) flushStatus(ctx context.Context, force bool) {
	dirty := false
	for _, st := range r.status {
		force = force || st.changed
		dirty = dirty || st.dirty
	}
	if !dirty {
		return
	}
	if !force && time.Since(r.lastFlush) < statusFlushInterval {
		if r.flushTimer == nil {
			r.flushTimer = time.AfterFunc(statusFlushInterval, func() {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.flushTimer = nil
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				r.flushStatus(ctx, true)
			})
		}
		return
	}
	var (
		ids             []int64
		statuses, lasts []*string
		rendered, deads []int64
		since           []time.Time
		flushed         []*mappingStatus
	)
	for id, st := range r.status {
		if !st.dirty {
			continue
		}
		var last *string
		if st.lastError != "" {
			last = &st.lastError
		}
		status := st.status
		if status == "" {
			status = statusActive
		}
		ids = append(ids, id)
		statuses = append(statuses, &status)
		lasts = append(lasts, last)
		rendered = append(rendered, st.rendered)
		deads = append(deads, st.deadLettered)
		if st.since.IsZero() {
			st.since = time.Now()
		}
		since = append(since, st.since)
		flushed = append(flushed, st)
	}
	r.lastFlush = time.Now()
	if len(ids) == 0 {
		return
	}
	if _, err := r.pool.Exec(ctx, flushStatusSQL, ids, statuses, lasts, rendered, deads, since); err != nil {
		r.logger.Warn("update mapping status", "err", err)
		return
	}
	for i, st := range flushed {
		st.rendered -= rendered[i]
		st.deadLettered -= deads[i]
		st.dirty, st.changed = false, false
	}
}

// reload reads every mapping definition, live and retired, after retiring
// the mappings whose table is gone, and drops the render functions of
// mappings that are gone for good.
func (r *Renderer) reload(ctx context.Context) error {
	r.stale.Store(false) // a notification arriving from here on means reload again
	if err := r.retireOrphans(ctx); err != nil {
		// not fatal: such a mapping is reported as broken below
		r.logger.Warn("remove mappings of dropped tables", "err", err)
	}
	all, err := loadMappings(ctx, r.pool)
	if err != nil {
		r.stale.Store(true)
		return err
	}
	r.byRel = map[uint32][]*Mapping{}
	r.byID = map[int64]*Mapping{}
	r.retired = map[int64]*Mapping{}
	var ms []*Mapping // live
	for _, m := range all {
		if m.Retired {
			r.retired[m.ID] = m
			continue
		}
		ms = append(ms, m)
		r.byRel[m.SourceRelID] = append(r.byRel[m.SourceRelID], m)
		r.byID[m.ID] = m
	}
	for id := range r.fns {
		if r.lookup(id) == nil {
			delete(r.fns, id)
		}
	}
	for id := range r.status {
		if r.lookup(id) == nil {
			delete(r.status, id)
		}
	}
	r.loaded = true
	r.logger.Debug("loaded mappings", "mappings", len(ms), "retired", len(r.retired))
	if len(r.retired) > 0 {
		r.advanceRetired(ctx)
	}
	// statuses only: the rows of a paused mapping are dealt with when
	// they come (Render checks again)
	if denied, err := r.checkAccess(ctx, ms); err != nil {
		r.logger.Warn("check mapping owners' privileges", "err", err)
	} else {
		for _, m := range ms {
			st := r.statusOf(m.ID)
			reason, ok := denied[m.ID]
			if !ok && m.Pause.active() {
				reason, ok = m.Pause.Reason, true
			}
			if ok {
				if msg := "paused: " + reason; st.status != statusPaused || st.lastError != msg {
					r.logger.Warn("mapping paused", "mapping", m.Name, "reason", reason)
					st.set(statusPaused, msg)
				}
			} else if st.status == statusPaused {
				st.set(statusActive, "")
			}
		}
	}
	if err := r.dropOrphans(ctx); err != nil {
		r.logger.Warn("drop render functions of removed mappings", "err", err)
	}
	return nil
}

const orphansSQL = `
SELECT p.oid::regprocedure::text
  FROM pg_catalog.pg_proc AS p
  JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
 WHERE n.nspname OPERATOR(pg_catalog.=) 'kafgres_render'
   AND NOT EXISTS (SELECT 1 FROM kafgres.mapping AS m
                    WHERE p.proname OPERATOR(pg_catalog.=) ('m' OPERATOR(pg_catalog.||) m.mapping_id))
   AND NOT EXISTS (SELECT 1 FROM kafgres.mapping_retired AS m
                    WHERE p.proname OPERATOR(pg_catalog.=) ('m' OPERATOR(pg_catalog.||) m.mapping_id))`

// retireOrphansSQL finds the mappings whose source table is gone, for
// drops the event trigger kafgres.mapping_source_dropped did not see
// (session_replication_role = replica, or before 0.4.0); they are then
// removed, and trigger mapping_retire keeps their definitions. Looked for
// first: a DELETE, even of nothing, notifies kafgres_mappings, which would
// make the broker reload again, and again.
const (
	orphansFindSQL = `
SELECT m.mapping_id, m.name, m.source_relid
  FROM kafgres.mapping AS m
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) m.source_relid)`

	orphansRetireSQL = `
DELETE FROM kafgres.mapping AS m
 WHERE m.mapping_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c WHERE c.oid OPERATOR(pg_catalog.=) m.source_relid)
RETURNING m.mapping_id`

	orphanReasonSQL = `
UPDATE kafgres.mapping_retired AS r
   SET reason = 'source table (oid ' OPERATOR(pg_catalog.||) r.source_relid::pg_catalog.text
                OPERATOR(pg_catalog.||) ') was dropped'
 WHERE r.mapping_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])`
)

func (r *Renderer) retireOrphans(ctx context.Context) error {
	rows, err := r.pool.Query(ctx, orphansFindSQL)
	if err != nil {
		return err
	}
	var (
		ids  []int64
		id   int64
		name string
		rel  uint32
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &name, &rel}, func() error {
		r.logger.Warn("removing mapping: its source table was dropped", "mapping", name, "source_relid", rel)
		ids = append(ids, id)
		return nil
	}); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	rows, err = tx.Query(ctx, orphansRetireSQL, ids)
	if err != nil {
		return err
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		return err
	}
	// a statement of its own: the rows trigger mapping_retire wrote are
	// not visible to the statement that fired it
	if _, err := tx.Exec(ctx, orphanReasonSQL, ids); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// The life of a retired definition (kafgres.mapping_retired). A change
// matched it only if it was written before the removal committed, by a
// transaction that had an xid by then. When the broker first sees the row
// (after the removal committed) it keeps the current snapshot; once every
// transaction that snapshot saw running or unstarted-below-xmax has ended,
// it reads the WAL insert position; once delivery has passed that
// position, every change that could have matched the mapping has been
// rendered, and the definition and its render function go.
const (
	retiredSeenSQL = `
UPDATE kafgres.mapping_retired
   SET drain_snapshot = pg_catalog.pg_current_snapshot()
 WHERE drain_snapshot IS NULL`

	retiredDrainedSQL = `
UPDATE kafgres.mapping_retired
   SET drain_lsn = pg_catalog.pg_current_wal_lsn()
 WHERE drain_lsn IS NULL AND drain_snapshot IS NOT NULL
   AND pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())
       OPERATOR(pg_catalog.>=) pg_catalog.pg_snapshot_xmax(drain_snapshot)`

	retiredCollectSQL = `
WITH gone AS (
    DELETE FROM kafgres.mapping_retired AS r
     USING kafgres.delivery AS d
     WHERE r.drain_lsn OPERATOR(pg_catalog.<=) d.applied_lsn
       AND NOT EXISTS (SELECT 1 FROM kafgres.mapping AS m WHERE m.mapping_id OPERATOR(pg_catalog.=) r.mapping_id)
    RETURNING r.mapping_id),
markers AS (
    DELETE FROM kafgres.mapping_snapshot AS s USING gone
     WHERE s.mapping_id OPERATOR(pg_catalog.=) gone.mapping_id)
SELECT gone.mapping_id FROM gone`
)

// advanceRetired moves retired definitions along their life, and drops
// those no change can need any more. Failures are logged: a definition
// kept longer costs nothing but space.
func (r *Renderer) advanceRetired(ctx context.Context) {
	r.lastRetire = time.Now()
	for _, sql := range []string{retiredSeenSQL, retiredDrainedSQL} {
		if _, err := r.pool.Exec(ctx, sql); err != nil {
			r.logger.Warn("advance retired mappings", "err", err)
			return
		}
	}
	rows, err := r.pool.Query(ctx, retiredCollectSQL)
	if err != nil {
		r.logger.Warn("collect retired mappings", "err", err)
		return
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		r.logger.Warn("collect retired mappings", "err", err)
		return
	}
	for _, id := range ids {
		delete(r.retired, id)
		delete(r.fns, id)
		delete(r.status, id)
		if _, err := r.pool.Exec(ctx, fmt.Sprintf("DROP FUNCTION IF EXISTS %s(%s)", renderFnName(id), renderArgs)); err != nil {
			r.logger.Warn("drop render function of retired mapping", "mapping_id", id, "err", err)
		}
	}
	if len(ids) > 0 {
		r.logger.Info("dropped retired mapping definitions", "mapping_ids", ids)
	}
}

// accessSQL asks kafgres.mapping_denial (sql/kafgres--0.2.0--0.3.0.sql)
// whether each mapping's owner may read all of its table.
const accessSQL = `
SELECT u.id, kafgres.mapping_denial(u.rel, u.owner),
       EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) u.owner)
  FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::oid[]), pg_catalog.unnest($3::oid[]))
       AS u(id, rel, owner)`

// checkAccess returns, for each of ms whose owner may not read all of its
// source table (every column, and past row security), why not. An owner
// role that is gone is no pause but the end of the definition: its Owner
// is cleared, so that it is found broken (and its changes dead-lettered,
// even for a mapping that would stall) rather than paused.
func (r *Renderer) checkAccess(ctx context.Context, ms []*Mapping) (map[int64]string, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	ids, rels, owners := make([]int64, len(ms)), make([]uint32, len(ms)), make([]uint32, len(ms))
	for i, m := range ms {
		ids[i], rels[i], owners[i] = m.ID, m.SourceRelID, m.OwnerRole
	}
	rows, err := r.pool.Query(ctx, accessSQL, ids, rels, owners)
	if err != nil {
		return nil, fmt.Errorf("check mapping owners' privileges: %w", err)
	}
	byID := make(map[int64]*Mapping, len(ms))
	for _, m := range ms {
		byID[m.ID] = m
	}
	denied := map[int64]string{}
	var (
		id     int64
		reason *string
		exists bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &reason, &exists}, func() error {
		if !exists && !byID[id].Unknown {
			byID[id].Owner = ""
			return nil
		}
		if reason != nil {
			denied[id] = *reason
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("check mapping owners' privileges: %w", err)
	}
	return denied, nil
}

// mayReadSQL is the common case of kafgres.mapping_denial in one plain
// query, a third of its cost: the owner exists and may SELECT the table,
// which has no row security. Anything else (a grant per column, row
// security the owner bypasses, ...) is left to checkAccess.
const mayReadSQL = `
SELECT pg_catalog.has_table_privilege(a.oid, c.oid, 'SELECT') AND NOT c.relrowsecurity
  FROM pg_catalog.pg_class AS c, pg_catalog.pg_authid AS a
 WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid AND a.oid OPERATOR(pg_catalog.=) $2::pg_catalog.oid`

// ownerMayRead says whether m's owner may read all of its table: the
// check a render call makes (checkedCallSQL), for a group rendered
// without one (direct.go).
func (r *Renderer) ownerMayRead(ctx context.Context, m *Mapping) (bool, error) {
	var ok bool
	err := r.pool.QueryRow(ctx, mayReadSQL, m.SourceRelID, m.OwnerRole).Scan(&ok)
	if err == nil && ok {
		return true, nil
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("check the owner of mapping %s: %w", m.Name, err)
	}
	denied, err := r.checkAccess(ctx, []*Mapping{m})
	if err != nil {
		return false, err
	}
	_, no := denied[m.ID]
	return !no && m.Owner != "", nil
}

func (r *Renderer) dropOrphans(ctx context.Context) error {
	rows, err := r.pool.Query(ctx, orphansSQL)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, n := range names {
		// regprocedure's text is a quoted, qualified signature
		if _, err := r.pool.Exec(ctx, "DROP FUNCTION IF EXISTS "+n); err != nil {
			return fmt.Errorf("drop %s: %w", n, err)
		}
	}
	return nil
}

func renderFnName(id int64) string { return "kafgres_render.m" + strconv.FormatInt(id, 10) }

// ensureFunction makes m's render function if it does not exist for m's
// current definition (or always, with force). It returns the function; or
// a function marked broken when the definition can never render; or a
// renderErr when Postgres refused it (a column the expression reads is
// gone, ...), which the rows share; err is for Postgres being unreachable.
func (r *Renderer) ensureFunction(ctx context.Context, m *Mapping, force bool) (fn *renderFn, renderErr, err error) {
	key := m.key()
	if fn = r.fns[m.ID]; fn != nil && fn.key == key && !force {
		return fn, nil, nil
	}
	delete(r.fns, m.ID)
	st := r.statusOf(m.ID)

	path, broken := r.check(m)
	if broken != nil {
		broken = fmt.Errorf("%w: %w", errBroken, broken)
		fn = &renderFn{key: key, broken: broken}
		r.fns[m.ID] = fn
		if st.status != statusError || st.lastError != broken.Error() {
			r.logger.Error("mapping cannot be rendered", "mapping", m.Name, "err", broken)
		}
		st.set(statusError, broken.Error())
		return fn, nil, nil
	}

	fn = &renderFn{key: key, name: renderFnName(m.ID)}
	if renderErr, err = r.createFunction(ctx, m, fn, path); err != nil || renderErr != nil {
		return nil, renderErr, err
	}
	r.fns[m.ID] = fn
	st.set(statusActive, "")
	r.logger.Info("render function ready", "mapping", m.Name, "function", fn.name, "direct", fn.direct != nil)
	return fn, nil, nil
}

// check is everything about a definition that no retry can fix. It is
// the gate before any of m's text is spliced into SQL.
func (r *Renderer) check(m *Mapping) (searchPath string, err error) {
	switch {
	case m.Unknown:
		return "", fmt.Errorf("no definition of mapping %d is left (it was removed before kafgres kept removed definitions)", m.ID)
	case m.Source == "" && m.Retired:
		return "", fmt.Errorf("source table (oid %d) no longer exists (mapping removed: %s)", m.SourceRelID, m.RetiredReason)
	case m.Source == "":
		return "", fmt.Errorf("source table (oid %d) no longer exists", m.SourceRelID)
	case m.Owner == "":
		return "", fmt.Errorf("owner role (oid %d) no longer exists", m.OwnerRole)
	}
	for _, e := range []struct {
		arg  string
		expr *string
	}{{"value_expr", m.ValueExpr}, {"key_expr", m.KeyExpr}, {"filter_expr", m.FilterExpr}} {
		if e.expr == nil {
			continue
		}
		if err := Validate(*e.expr); err != nil {
			return "", fmt.Errorf("%s: %w", e.arg, err)
		}
	}
	names, err := parseSearchPath(m.SearchPath)
	if err != nil {
		return "", err
	}
	return quoteSearchPath(names), nil
}

// The query that evaluates a mapping's expressions is written once, by
// kafgres.render_query (sql/kafgres--0.4.0--0.5.0.sql), which
// kafgres_add_mapping and kafgres_preview_mapping ask too: the broker asks
// it for the probe (one insert without images, whose result types say how
// key and value are sent) and for the query over a render function's
// arguments, and wraps the latter in the function. Both are asked before
// SET ROLE: the owner needs no privilege on schema kafgres.
//
// The query reads new and old through jsonb_populate_record of the
// table's row type with a base record: a change's image arrives as the
// text of a record literal of the row type (the columns the function was
// made for, by name, each as its type's text output; the row type's input
// function parses it, as jsonb_populate_record would have parsed each
// value), and a snapshot row as jsonb. An absent image is a NULL row, so
// to_jsonb(new) of a delete is NULL: a tombstone.
//
// A record literal is positional, so the function first checks (once per
// call, a one-time filter) that the table still has the columns it was
// made for, in that order; if not it returns only a row with ord -1 and
// the broker makes it again (staleFunction).
const (
	renderQueriesSQL = `
SELECT kafgres.render_query($1::pg_catalog.oid::pg_catalog.regclass, $2, $3, $4, 'probe'),
       kafgres.render_query($1::pg_catalog.oid::pg_catalog.regclass, $2, $3, $4, 'call'),
       kafgres.render_query($1::pg_catalog.oid::pg_catalog.regclass, NULL, 'NULL', NULL, 'call'),
       CASE WHEN $4 IS NOT NULL
            THEN kafgres.render_query($1::pg_catalog.oid::pg_catalog.regclass, NULL, 'NULL', $4, 'call') END,
       CASE WHEN $2 IS NOT NULL
            THEN kafgres.render_query($1::pg_catalog.oid::pg_catalog.regclass, $2, 'NULL', NULL, 'call') END,
       kafgres.render_query($1::pg_catalog.oid::pg_catalog.regclass, NULL, $3, NULL, 'call')`

	renderArgs = `int[], text[], text[], jsonb[], text[], pg_lsn[], bigint[], timestamptz[], jsonb[], bigint`

	// the arguments of render functions made by earlier brokers: before
	// 0.4.0's, which sent record literals, and before 0.12.0's, which
	// sent old images as JSON and the largest record too; dropped when the
	// function is made again
	oldRenderArgs = `int[], jsonb[], jsonb[], text[], pg_lsn[], bigint[], timestamptz[]`
	renderArgs011 = `int[], text[], text[], jsonb[], text[], pg_lsn[], bigint[], timestamptz[]`

	columnsSQL = `
SELECT a.attname::pg_catalog.text, a.atttypid::pg_catalog.int8
  FROM pg_catalog.pg_attribute AS a
 WHERE a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.oid
   AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
 ORDER BY a.attnum`

	// the columns of the replica identity index, else of the primary key
	keyColumnsSQL = `
SELECT a.attname::pg_catalog.text
  FROM (SELECT i.indkey FROM pg_catalog.pg_index AS i
         WHERE i.indrelid OPERATOR(pg_catalog.=) $1::pg_catalog.oid AND (i.indisreplident OR i.indisprimary)
         ORDER BY i.indisreplident DESC LIMIT 1) AS x
 CROSS JOIN LATERAL pg_catalog.unnest(x.indkey::pg_catalog.int2[]) WITH ORDINALITY AS k(attnum, n)
  JOIN pg_catalog.pg_attribute AS a
    ON a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.oid AND a.attnum OPERATOR(pg_catalog.=) k.attnum
 ORDER BY k.n`

	// the functions of direct rendering (direct.go) that exist outside
	// pg_catalog too
	shadowedSQL = `
SELECT DISTINCT p.proname::pg_catalog.text
  FROM pg_catalog.pg_proc AS p
 WHERE p.proname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])
   AND p.pronamespace OPERATOR(pg_catalog.<>) 'pg_catalog'::pg_catalog.regnamespace`

	// %[1]s the table, %[2]s its column names as a text[] literal
	columnsGuardSQL = `(SELECT COALESCE(pg_catalog.array_agg(a.attname::pg_catalog.text ORDER BY a.attnum), '{}')
          FROM pg_catalog.pg_attribute AS a
         WHERE a.attrelid OPERATOR(pg_catalog.=) %[1]s::pg_catalog.regclass
           AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped)
       OPERATOR(pg_catalog.=) %[2]s`

	// PL/pgSQL rather than SQL: a SQL function that is not inlined (and
	// SECURITY DEFINER prevents that) plans its body afresh in every
	// calling statement, which was half of a one-row render's time;
	// PL/pgSQL keeps the plan for the session. The parameters have no
	// names (the query uses $1..$8) and the columns of the query win over
	// the result variables, so an expression reads exactly what the probe
	// accepted it with. The function was SQL with named parameters up to
	// 0.4.0, which CREATE OR REPLACE cannot turn into this: it is dropped
	// first. %[4]s and %[5]s are the key and value as bytea (columns k
	// and v of the query, r), %[6]s the query, %[7]s the columns guard,
	// %[8]s the blocks that find the expression that failed (blameSQL).
	//
	// An error is raised again with the expression that failed in its
	// column field (value_expr, key_expr or filter_expr; none when the
	// rows themselves could not be read), found by evaluating each alone
	// over the same rows: that costs only when a call fails. A handler
	// costs a subtransaction per call, not per row.
	createSQL = `CREATE FUNCTION %[1]s(int[], text[], text[], jsonb[], text[], pg_lsn[], bigint[], timestamptz[], jsonb[], bigint)
RETURNS TABLE (ord int, pass boolean, k bytea, v bytea, n bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path TO %[2]s
AS %[3]s
#variable_conflict use_column
DECLARE
    kafgres_err_state text;
    kafgres_err_msg text;
    kafgres_err_detail text;
    kafgres_err_hint text;
    kafgres_err_expr text;
BEGIN
RETURN QUERY
SELECT s.ord, s.pass,
       CASE WHEN s.n OPERATOR(pg_catalog.>) $10 THEN NULL ELSE s.k END,
       CASE WHEN s.n OPERATOR(pg_catalog.>) $10 THEN NULL ELSE s.v END,
       CASE WHEN s.n OPERATOR(pg_catalog.>) $10 THEN s.n END
  FROM (SELECT r.ord, r.pass, r.k, r.v,
               CASE WHEN r.pass AND $10 OPERATOR(pg_catalog.>) 0
                    THEN coalesce(pg_catalog.octet_length(r.k), 0) OPERATOR(pg_catalog.+) coalesce(pg_catalog.octet_length(r.v), 0)
                    ELSE 0 END::pg_catalog.int8 AS n
          FROM (SELECT r.ord, r.pass, %[4]s AS k, %[5]s AS v
                  FROM (%[6]s) AS r
                 WHERE %[7]s
                OFFSET 0) AS r) AS s
UNION ALL
SELECT -1, false, NULL, NULL, NULL WHERE NOT %[7]s;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS kafgres_err_state = RETURNED_SQLSTATE, kafgres_err_msg = MESSAGE_TEXT,
                            kafgres_err_detail = PG_EXCEPTION_DETAIL, kafgres_err_hint = PG_EXCEPTION_HINT;
%[8]s
    IF kafgres_err_expr IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = kafgres_err_state, MESSAGE = kafgres_err_msg,
                              DETAIL = kafgres_err_detail, HINT = kafgres_err_hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = kafgres_err_state, MESSAGE = kafgres_err_msg,
                          DETAIL = kafgres_err_detail, HINT = kafgres_err_hint, COLUMN = kafgres_err_expr;
END
%[3]s`

	// one block of the handler: %[1]s the query evaluating one expression
	// alone (or none, the rows only, for '-'), %[2]s its column, %[3]s
	// the expression's name
	blameSQL = `    IF kafgres_err_expr IS NULL THEN
        BEGIN
            PERFORM pg_catalog.count(r.%[2]s) FROM (%[1]s) AS r;
        EXCEPTION WHEN OTHERS THEN
            kafgres_err_expr := %[3]s;
        END;
    END IF;`
)

// blame is the handler's blocks that find which expression of a failed
// call failed: none if the rows alone fail ('-', then left NULL), else
// the first of filter, key and value that fails alone.
func blame(rowsOnly string, filter, key *string, value string) string {
	var b []string
	add := func(query, column, name string) {
		b = append(b, fmt.Sprintf(blameSQL, query, column, name))
	}
	add(rowsOnly, "ord", "'-'")
	if filter != nil {
		add(*filter, "pass", "'filter_expr'")
	}
	if key != nil {
		add(*key, "k", "'key_expr'")
	}
	add(value, "v", "'value_expr'")
	b = append(b, `    IF kafgres_err_expr OPERATOR(pg_catalog.=) '-' THEN
        kafgres_err_expr := NULL;
    END IF;`)
	return strings.Join(b, "\n")
}

// createFunction probes m's expressions as its owner to learn their types
// (bytea is sent as is, anything else as the UTF-8 of its text form), then
// creates the render function and hands it to the owner.
func (r *Renderer) createFunction(ctx context.Context, m *Mapping, fn *renderFn, searchPath string) (renderErr, err error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("create render function of %s: %w", m.Name, err)
	}
	defer tx.Rollback(ctx)
	owner := pgx.Identifier{m.Owner}.Sanitize()

	var (
		probe, query, rowsOnly, valueOnly string
		filterOnly, keyOnly               *string
	)
	if err := tx.QueryRow(ctx, renderQueriesSQL, m.SourceRelID, m.KeyExpr, m.ValueExpr, m.FilterExpr).
		Scan(&probe, &query, &rowsOnly, &filterOnly, &keyOnly, &valueOnly); err != nil {
		return classify(err, "build the render query of mapping "+m.Name)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+owner); err != nil {
		return classify(err, "probe mapping "+m.Name)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('search_path', $1, true)", m.SearchPath); err != nil {
		return classify(err, "probe mapping "+m.Name)
	}
	sd, err := tx.Conn().PgConn().Prepare(ctx, "", probe, nil)
	if err != nil {
		return classify(err, "probe mapping "+m.Name)
	}
	if len(sd.Fields) != 4 {
		return fmt.Errorf("probe of mapping %s returned %d columns", m.Name, len(sd.Fields)), nil
	}
	conv := func(e string, oid uint32) string {
		if oid == oidBytea {
			return e
		}
		return "pg_catalog.convert_to((" + e + ")::pg_catalog.text, 'UTF8')"
	}
	if _, err := tx.Exec(ctx, "RESET ROLE"); err != nil {
		return classify(err, "create render function of "+m.Name)
	}
	rows, err := tx.Query(ctx, columnsSQL, m.SourceRelID)
	if err != nil {
		return classify(err, "read the columns of "+m.Source)
	}
	var (
		columns []string
		typed   []directColumn
		name    string
		typ     int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &typ}, func() error {
		columns = append(columns, name)
		typed = append(typed, directColumn{name: name, typ: uint32(typ)})
		return nil
	}); err != nil {
		return classify(err, "read the columns of "+m.Source)
	}
	rows, err = tx.Query(ctx, keyColumnsSQL, m.SourceRelID)
	if err != nil {
		return classify(err, "read the key of "+m.Source)
	}
	keyColumns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return classify(err, "read the key of "+m.Source)
	}
	rows, err = tx.Query(ctx, shadowedSQL, directFunctions)
	if err != nil {
		return classify(err, "look for functions named as pg_catalog's")
	}
	shadowed := map[string]bool{}
	if _, err := pgx.ForEachRow(rows, []any{&name}, func() error {
		shadowed[name] = true
		return nil
	}); err != nil {
		return classify(err, "look for functions named as pg_catalog's")
	}

	keySQL, valueSQL := conv("r.k", sd.Fields[2].DataTypeOID), conv("r.v", sd.Fields[3].DataTypeOID)
	guard := fmt.Sprintf(columnsGuardSQL, sqlString(m.Source), textArrayLiteral(columns))
	blocks := blame(rowsOnly, filterOnly, keyOnly, valueOnly)
	body := strings.Join([]string{keySQL, valueSQL, query, guard, blocks}, "\n")
	tag := dollarTag(body)
	ddl := []string{
		fmt.Sprintf("DROP FUNCTION IF EXISTS %s(%s)", fn.name, oldRenderArgs),
		fmt.Sprintf("DROP FUNCTION IF EXISTS %s(%s)", fn.name, renderArgs011),
		fmt.Sprintf("DROP FUNCTION IF EXISTS %s(%s)", fn.name, renderArgs),
		fmt.Sprintf(createSQL, fn.name, searchPath, tag, keySQL, valueSQL, query, guard, blocks),
		fmt.Sprintf("ALTER FUNCTION %s(%s) OWNER TO %s", fn.name, renderArgs, owner),
		fmt.Sprintf("REVOKE ALL ON FUNCTION %s(%s) FROM PUBLIC", fn.name, renderArgs),
	}
	for _, stmt := range ddl {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return classify(err, "create render function of "+m.Name)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(err, "create render function of "+m.Name)
	}
	fn.columns, fn.keyColumns = columns, keyColumns
	fn.direct = compileDirect(m, typed, shadowed, tx.Conn().PgConn().ParameterStatus("server_encoding"),
		sd.Fields[2].DataTypeOID, sd.Fields[3].DataTypeOID)
	return nil, nil
}

// textArrayLiteral is names as an SQL text[] constant.
func textArrayLiteral(names []string) string {
	if len(names) == 0 {
		return "'{}'::pg_catalog.text[]"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = sqlString(n)
	}
	return "ARRAY[" + strings.Join(q, ", ") + "]::pg_catalog.text[]"
}

// sqlString is s as an SQL string constant, whatever
// standard_conforming_strings is.
func sqlString(s string) string {
	if strings.Contains(s, `\`) {
		return "E'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// dollarTag is a dollar quote that does not occur in body, so the body
// (which holds the author's expressions) cannot end the quote early.
func dollarTag(body string) string {
	for i := 0; ; i++ {
		tag := "$kafgres" + strconv.Itoa(i) + "$"
		if !strings.Contains(body, tag) {
			return tag
		}
	}
}

// classify splits an error into one Postgres raised for the statement
// (renderErr: the rows share it) and anything else (err: retry later).
func classify(err error, doing string) (renderErr, connErr error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return err, nil
	}
	return nil, fmt.Errorf("%s: %w", doing, err)
}

// callSQL calls a render function. Its arguments are sent as binary
// arrays the broker encodes itself (callParams) and its results read in
// binary, on an unnamed statement with the parameter types given: no
// describe round trip, and no per-value conversion on either side.
const callSQL = `SELECT ord, pass, k, v, n FROM %s($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

// checkedCallSQL is callSQL behind the check that the mapping's owner may
// still read its table (mapping_denial of $11, the table, and $12, the
// owner). The check has no column in it, so it is a one-time filter: when
// it fails the function is never called, and the call returns no row at
// all. Checking in the call's own round trip and snapshot, rather than in
// a query before it, takes a round trip off every group.
const checkedCallSQL = callSQL + `
 WHERE kafgres.mapping_denial($11, $12) IS NULL`

// Type OIDs of the render call's parameters.
const (
	oidInt4        = 23
	oidOID         = 26
	oidInt8        = 20
	oidText        = 25
	oidPgLSN       = 3220
	oidTimestamptz = 1184
	oidInt4Array   = 1007
	oidInt8Array   = 1016
	oidTextArray   = 1009
	oidJSONBArray  = 3807
	oidPgLSNArray  = 3221
	oidTstzArray   = 1185
)

// callParams encodes rows as the render function's arguments, in the
// binary array format (array_recv): ords from ordBase, images as record
// literals of fn's columns, snapshot rows as jsonb.
func callParams(fn *renderFn, rows []renderRow, ordBase int) [][]byte {
	n := len(rows)
	var (
		ords     = arrayHeader(8, oidInt4, n)
		news     = arrayHeader(64, oidText, n)
		olds     = arrayHeader(4, oidText, n) // inserts have none
		jsons    = arrayHeader(4, oidJSONB, n)
		oldJSONs = arrayHeader(4, oidJSONB, n)
		ops      = arrayHeader(5, oidText, n)
		lsns     = arrayHeader(12, oidPgLSN, n)
		xids     = arrayHeader(12, oidInt8, n)
		tss      = arrayHeader(12, oidTimestamptz, n)
	)
	for i := range rows {
		row := &rows[i]
		ords = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(ords, 4), uint32(int32(ordBase+i)))
		var newImg, oldImg *decoder.Tuple
		if row.change != nil {
			newImg, oldImg = row.change.New, row.change.Old
		}
		news = appendLiteralElem(news, newImg, oldImg, fn.columns)
		olds = appendLiteralElem(olds, oldImg, nil, fn.columns)
		jsons = appendJSONBElem(jsons, row.newJSON)
		oldJSONs = appendJSONBElem(oldJSONs, row.oldJSON)
		ops = append(binary.BigEndian.AppendUint32(ops, uint32(len(row.op))), row.op...)
		lsns = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(lsns, 8), uint64(row.lsn))
		xids = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(xids, 8), uint64(row.xid))
		tss = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(tss, 8), uint64(row.commitTS.UnixMicro()-pgEpochMicros))
	}
	// the has-nulls flag of the arrays that may have NULLs (array_recv
	// finds out itself whether they do; the flag must only be 0 or 1)
	news[7], olds[7], jsons[7], oldJSONs[7] = 1, 1, 1, 1
	return [][]byte{ords, news, olds, jsons, ops, lsns, xids, tss, oldJSONs}
}

// appendJSONBElem appends a jsonb array element: NULL for nil.
func appendJSONBElem(b []byte, doc *string) []byte {
	if doc == nil {
		return binary.BigEndian.AppendUint32(b, nullElem)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(1+len(*doc)))
	return append(append(b, 1), *doc...) // jsonb's binary format: version 1, then the text
}

const (
	nullElem      = 0xFFFFFFFF // -1: a NULL element
	pgEpochMicros = 946684800 * 1_000_000
)

// arrayHeader starts a one-dimensional binary array of n elements of type
// elem (lower bound 1), with room for elements of about size bytes each.
func arrayHeader(size int, elem uint32, n int) []byte {
	b := make([]byte, 0, 20+size*n)
	if n == 0 {
		return append(b, 0, 0, 0, 0, 0, 0, 0, 0, byte(elem>>24), byte(elem>>16), byte(elem>>8), byte(elem))
	}
	b = binary.BigEndian.AppendUint32(b, 1) // dimensions
	b = binary.BigEndian.AppendUint32(b, 0) // has nulls
	b = binary.BigEndian.AppendUint32(b, elem)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	return binary.BigEndian.AppendUint32(b, 1)
}

// appendLiteralElem appends t as a text element holding a record literal
// of columns (NULL when t is nil).
func appendLiteralElem(b []byte, t, other *decoder.Tuple, columns []string) []byte {
	if t == nil {
		return binary.BigEndian.AppendUint32(b, nullElem)
	}
	at := len(b)
	b = appendRecordLiteral(append(b, 0, 0, 0, 0), t, other, columns)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// timeoutError is a render that took longer than kafgres.mapping_render_timeout.
type timeoutError struct{ limit time.Duration }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("render timed out after %s (kafgres.mapping_render_timeout)", e.limit)
}

// timedOut says whether err is the render time limit running out, either
// on the server (statement_timeout) or at the backstop, as opposed to ctx
// ending (the broker stopping) or another failure.
func (r *Renderer) timedOut(ctx context.Context, err error) error {
	if r.timeout <= 0 || ctx.Err() != nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Code == "57014" && strings.Contains(pe.Message, "statement timeout") {
			return &timeoutError{limit: r.timeout}
		}
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return &timeoutError{limit: r.timeout}
	}
	return nil
}

// backstop is ctx with a deadline a little past the render time limit.
// Reaching it closes the connection (pgx's default), which ends the call
// however stuck the backend is.
func (r *Renderer) backstop(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.timeout+max(r.timeout/2, 2*time.Second))
}

// beginRender starts a READ ONLY render transaction (the time limit is the
// session's: NewRenderer). It returns the number of statements queued.
func (r *Renderer) beginRender(b *pgconn.Batch) int {
	b.ExecParams("BEGIN READ ONLY", nil, nil, nil, nil)
	return 1
}

// queueCall queues the render call of rows (ords from ordBase) on b,
// behind the access check of m's owner unless m is nil.
func queueCall(b *pgconn.Batch, fn *renderFn, rows []renderRow, ordBase int, maxBytes int64, m *Mapping) {
	oids := []uint32{oidInt4Array, oidTextArray, oidTextArray, oidJSONBArray, oidTextArray, oidPgLSNArray, oidInt8Array, oidTstzArray, oidJSONBArray, oidInt8}
	formats := []int16{1} // binary, for every parameter and every result column
	params := append(callParams(fn, rows, ordBase), binary.BigEndian.AppendUint64(nil, uint64(maxBytes)))
	sql := fmt.Sprintf(callSQL, fn.name)
	if m != nil {
		sql = fmt.Sprintf(checkedCallSQL, fn.name)
		oids = append(oids, oidOID, oidOID)
		params = append(params, binary.BigEndian.AppendUint32(nil, m.SourceRelID), binary.BigEndian.AppendUint32(nil, m.OwnerRole))
	}
	b.ExecParams(sql, params, oids, formats, formats)
}

// errStaleColumns is what a render function says when its table's
// columns are no longer those it was made for.
var errStaleColumns = errors.New("the columns of the mapping's table changed since its render function was made")

// runBatch sends b and reads the rows of its result number call, the
// render call; any error of the batch is returned.
func runBatch(ctx context.Context, pc *pgconn.PgConn, b *pgconn.Batch, call int) ([]rendered, error) {
	var (
		res   []rendered
		arena []byte // the keys and values, copied out of the read buffer
		bad   error
		first error // the first statement's error
	)
	mrr := pc.ExecBatch(ctx, b)
	for i := 0; mrr.NextResult(); i++ {
		rr := mrr.ResultReader()
		for i == call && rr.NextRow() {
			vals := rr.Values()
			if len(vals) != 5 || len(vals[0]) != 4 || len(vals[1]) != 1 || vals[4] != nil && len(vals[4]) != 8 {
				if bad == nil {
					bad = fmt.Errorf("render call returned a malformed row")
				}
				continue
			}
			o := rendered{ord: int32(binary.BigEndian.Uint32(vals[0])), pass: vals[1][0] != 0}
			if vals[4] != nil {
				o.size = int64(binary.BigEndian.Uint64(vals[4]))
			}
			if o.ord == -1 {
				bad = errStaleColumns
				continue
			}
			for j, dst := range []*[]byte{&o.k, &o.v} {
				v := vals[2+j]
				if v == nil {
					continue
				}
				if len(arena)+len(v) > cap(arena) {
					arena = make([]byte, 0, max(64<<10, len(v)))
				}
				at := len(arena)
				arena = append(arena, v...)
				*dst = arena[at:len(arena):len(arena)]
			}
			res = append(res, o)
		}
		if _, err := rr.Close(); err != nil && first == nil {
			first = err
		}
	}
	if err := mrr.Close(); err != nil {
		return nil, err
	}
	if first != nil {
		return nil, first
	}
	if bad != nil {
		return nil, bad
	}
	return res, nil
}

// call renders all rows in one round trip: BEGIN READ ONLY, the time
// limit, the function, ROLLBACK, then what reset clears. Rolling back
// undoes every setting the expressions made, set_config(..., false)
// included; DEALLOCATE ALL and pg_advisory_unlock_all() clear what a
// rollback does not.
func (r *Renderer) call(ctx context.Context, j *job, fn *renderFn, rows []renderRow) (res []rendered, renderErr, err error) {
	conn, err := r.render.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("render: %w", err)
	}
	defer conn.Release()
	pc := conn.Conn().PgConn()
	b := &pgconn.Batch{}
	call := r.beginRender(b)
	queueCall(b, fn, rows, 0, j.maxBytes, j.m)
	b.ExecParams("ROLLBACK", nil, nil, nil, nil)
	// and what reset clears, in the same round trip; should anything
	// before fail, the rest is skipped and reset runs
	b.ExecParams("DEALLOCATE ALL", nil, nil, nil, nil)
	b.ExecParams("SELECT pg_catalog.pg_advisory_unlock_all()", nil, nil, nil, nil)
	bctx, cancel := r.backstop(ctx)
	res, err = runBatch(bctx, pc, b, call)
	cancel()
	if err != nil || pc.TxStatus() != 'I' {
		r.reset(ctx, conn)
	}
	if err != nil {
		if errors.Is(err, errStaleColumns) {
			return nil, err, nil
		}
		if te := r.timedOut(ctx, err); te != nil {
			return nil, te, nil
		}
		renderErr, err = classify(err, "render with "+fn.name)
		return nil, renderErr, err
	}
	if len(res) == 0 && len(rows) > 0 {
		// every row of a call that ran comes back, passed or not
		return nil, errAccessRefused, nil
	}
	return res, nil, nil
}

// staleFunction says whether a render error may come from the function
// itself being out of date (dropped, or the table's columns or types
// changed under it) rather than from the rows.
func staleFunction(err error) bool {
	if errors.Is(err, errStaleColumns) {
		return true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "42883", // undefined_function: dropped
		"42P01", // undefined_table
		"42703", // undefined_column
		"42804", // datatype_mismatch
		"42846", // cannot_coerce
		"0A000", // feature_not_supported: "cached plan must not change result type"
		"XX000": // internal_error: "cache lookup failed for type ..."
		return true
	}
	return false
}

// callEach renders row by row, each in a subtransaction that is always
// rolled back (so that no row's settings reach the next), to tell the rows
// that fail from those that do not. With stopAtFirst (a mapping that
// stalls) there is no point going on after the first failure.
func (r *Renderer) callEach(ctx context.Context, j *job, fn *renderFn, rows []renderRow) ([]rendered, []failure, error) {
	var (
		res         []rendered
		failed      []failure
		stopAtFirst = j.m.stalls()
	)
	for next := 0; next < len(rows) && !(stopAtFirst && len(failed) > 0); {
		var err error
		if next, err = r.callEachTx(ctx, j, fn, rows, next, &res, &failed); err != nil {
			return nil, nil, err
		}
	}
	return res, failed, nil
}

// callEachTx renders rows[start:] one by one in one READ ONLY transaction
// and returns where to go on: len(rows) when done, or the row after one
// that ran into the backstop, which closed the connection.
func (r *Renderer) callEachTx(ctx context.Context, j *job, fn *renderFn, rows []renderRow, start int,
	res *[]rendered, failed *[]failure) (int, error) {
	stopAtFirst := j.m.stalls()
	conn, err := r.render.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("render with %s: %w", fn.name, err)
	}
	defer conn.Release()
	defer r.reset(ctx, conn)
	pc := conn.Conn().PgConn()
	b := &pgconn.Batch{}
	r.beginRender(b)
	if _, err := runBatch(ctx, pc, b, -1); err != nil {
		return 0, fmt.Errorf("render with %s: %w", fn.name, err)
	}
	for i := start; i < len(rows); i++ {
		b := &pgconn.Batch{}
		b.ExecParams("SAVEPOINT kafgres_row", nil, nil, nil, nil)
		queueCall(b, fn, rows[i:i+1], i, j.maxBytes, nil)
		b.ExecParams("ROLLBACK TO SAVEPOINT kafgres_row", nil, nil, nil, nil)
		bctx, cancel := r.backstop(ctx)
		got, err := runBatch(bctx, pc, b, 1)
		cancel()
		if err == nil {
			*res = append(*res, got...)
			continue
		}
		if errors.Is(err, errStaleColumns) {
			// not the row's fault: the group is rendered again later
			return 0, fmt.Errorf("render with %s: %w", fn.name, err)
		}
		rowErr := r.timedOut(ctx, err)
		if rowErr == nil {
			var connErr error
			if rowErr, connErr = classify(err, "render with "+fn.name); connErr != nil {
				return 0, connErr
			}
		}
		*failed = append(*failed, failure{row: i, err: rowErr})
		if stopAtFirst {
			return len(rows), nil
		}
		if pc.IsClosed() {
			return i + 1, nil
		}
		if err := pc.Exec(ctx, "ROLLBACK TO SAVEPOINT kafgres_row").Close(); err != nil {
			return 0, fmt.Errorf("render with %s: %w", fn.name, err)
		}
	}
	return len(rows), nil
}

// reset leaves a render connection as it was before the call: outside any
// transaction, without prepared statements or session advisory locks an
// expression may have made (neither is undone by a rollback; the render
// pool itself uses no named statements). A connection that cannot be
// reset is closed.
func (r *Renderer) reset(ctx context.Context, conn *pgxpool.Conn) {
	pc := conn.Conn().PgConn()
	if pc.IsClosed() {
		return
	}
	sql := "DEALLOCATE ALL; SELECT pg_catalog.pg_advisory_unlock_all()"
	if pc.TxStatus() != 'I' {
		sql = "ROLLBACK; " + sql
	}
	if err := pc.Exec(ctx, sql).Close(); err != nil {
		r.logger.Warn("reset render connection; closing it", "err", err)
		conn.Conn().Close(ctx)
	}
}

// startListener keeps a connection LISTENing on kafgres_mappings for as
// long as the renderer lives, marking the definitions stale on every
// notification and whenever it (re)connects, since changes made while it
// was not listening went unnoticed. Called under r.mu.
func (r *Renderer) startListener() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stopListen = cancel
	done := make(chan struct{})
	r.listenDone = done
	go func() {
		defer close(done)
		listen.Run(ctx, listen.Config{
			Conn:    r.pool.Config().ConnConfig,
			Channel: notifyChannel,
			Retry:   retry.Policy{Min: listenRetryMin, Max: listenRetryMax},
			Log:     r.logger,
		}, func(context.Context) error {
			r.stale.Store(true)
			return nil
		})
	}()
}
