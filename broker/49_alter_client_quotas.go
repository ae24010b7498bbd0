package broker

// AlterClientQuotas: v0-1
//
// Behavior:
//   - sets or removes quota values per entity in kafgres.client_quota, one
//     transaction per entity; validateOnly checks and stores nothing
//   - INVALID_REQUEST with Kafka's messages for unknown entity types,
//     ip combined with user/client-id, keys that do not apply to the
//     entity, non-positive values, and an entity given twice (reported
//     once, first, and not applied)
//   - quotas are stored and reported; kafgres does not throttle clients
//     yet (docs/configuration.md)
//
// Version notes:
//   - v1: flexible

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAlterClientQuotas(ctx context.Context, b *Broker, _ *conn, req *kmsg.AlterClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	entityOf := func(in kmsg.AlterClientQuotasRequestEntry) quotaEntity {
		e := quotaEntity{}
		for _, c := range in.Entity {
			e[c.Type] = c.Name
		}
		return e
	}
	counts := map[string]int{}
	for _, in := range req.Entries {
		counts[entityOf(in).key()]++
	}
	var dups, rest []kmsg.AlterClientQuotasResponseEntry
	for _, in := range req.Entries {
		e := entityOf(in)
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, typ := range e.types() {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = typ, e[typ]
			out.Entity = append(out.Entity, oe)
		}
		switch n := counts[e.key()]; {
		case n == 0:
			continue
		case n > 1:
			counts[e.key()] = 0
			out.ErrorCode, out.ErrorMessage = b.codeAndMessage("", newAdminError(kerr.InvalidRequest, "Ignoring duplicate entity %s", e))
			dups = append(dups, out)
			continue
		}
		out.ErrorCode, out.ErrorMessage = b.codeAndMessage("alter client quotas", b.alterQuotaEntry(ctx, e, in.Ops, req.ValidateOnly))
		rest = append(rest, out)
	}
	resp.Entries = append(dups, rest...)
	return resp, nil
}

func (b *Broker) alterQuotaEntry(ctx context.Context, e quotaEntity, ops []kmsg.AlterClientQuotasRequestEntryOp, validateOnly bool) error {
	keys, err := checkQuotaEntity(e)
	if err != nil {
		return err
	}
	var changes []quotaOp
	for _, op := range ops {
		if !slices.Contains(keys, op.Key) {
			return newAdminError(kerr.InvalidRequest, "Invalid configuration key %s", op.Key)
		}
		if !op.Remove && op.Value <= 0 {
			return newAdminError(kerr.InvalidRequest, "Quota %s must be greater than 0", op.Key)
		}
		changes = append(changes, quotaOp{key: op.Key, value: op.Value, remove: op.Remove})
	}
	if validateOnly {
		return nil
	}
	return b.alterQuotas(ctx, e, changes)
}
