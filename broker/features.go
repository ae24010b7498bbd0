package broker

import (
	"context"
	"sort"
	"sync"
)

// feature is one feature flag kafgres supports, with the levels it can be
// finalized at and the level it is finalized at when nobody changed it.
type feature struct {
	name     string
	min, max int16
	dflt     int16
}

// supportedFeatures are the features kafgres implements. Kafka 4.4 also
// lists metadata.version, kraft.version, share.version, streams.version
// and eligible.leader.replicas.version;
// their levels describe machinery kafgres does not have, so advertising
// them would promise behaviour it cannot give (docs/conformance.md).
var supportedFeatures = []feature{
	// group.version 1 turns on the KIP-848 consumer group protocol.
	{name: "group.version", min: 0, max: 1, dflt: 1},
	// transaction.version: the transaction protocol new transactions use.
	// 1 verifies that a partition was added before a transactional
	// produce (KIP-890 part 1); 2 adds it implicitly from the produce and
	// bumps the producer epoch at every EndTxn (KIP-890 part 2). New
	// Kafka 4 clusters finalize 2.
	{name: "transaction.version", min: 0, max: 2, dflt: 2},
}

func lookupFeature(name string) (feature, bool) {
	for _, f := range supportedFeatures {
		if f.name == name {
			return f, true
		}
	}
	return feature{}, false
}

// featureLevels holds the finalized level of every supported feature,
// loaded from kafgres.feature at start and written through on change.
type featureLevels struct {
	mu     sync.RWMutex
	levels map[string]int16
	epoch  int64 // FinalizedFeaturesEpoch: bumped by every change
}

// load reads the stored levels; a feature not stored is at its default,
// and a stored one this broker does not know is ignored.
func (fl *featureLevels) load(ctx context.Context, store interface {
	LoadFeatures(context.Context) (map[string]int16, error)
}) error {
	stored, err := store.LoadFeatures(ctx)
	if err != nil {
		return err
	}
	levels := map[string]int16{}
	for _, f := range supportedFeatures {
		levels[f.name] = f.dflt
	}
	for name, level := range stored {
		if _, ok := lookupFeature(name); ok {
			levels[name] = level
		}
	}
	fl.mu.Lock()
	fl.levels, fl.epoch = levels, 1
	fl.mu.Unlock()
	return nil
}

// level is the finalized level of name (0: disabled or unknown).
func (fl *featureLevels) level(name string) int16 {
	fl.mu.RLock()
	defer fl.mu.RUnlock()
	return fl.levels[name]
}

// finalized returns the features with a level above 0, sorted by name, and
// the epoch.
func (fl *featureLevels) finalized() ([]string, map[string]int16, int64) {
	fl.mu.RLock()
	defer fl.mu.RUnlock()
	var names []string
	out := map[string]int16{}
	for n, l := range fl.levels {
		if l > 0 {
			names = append(names, n)
			out[n] = l
		}
	}
	sort.Strings(names)
	return names, out, fl.epoch
}

// set stores new levels in one transaction and then publishes them.
func (fl *featureLevels) set(ctx context.Context, store interface {
	StoreFeatures(context.Context, map[string]int16) error
}, updates map[string]int16) error {
	if err := store.StoreFeatures(ctx, updates); err != nil {
		return err
	}
	fl.mu.Lock()
	for name, level := range updates {
		fl.levels[name] = level
	}
	fl.epoch++
	fl.mu.Unlock()
	return nil
}
