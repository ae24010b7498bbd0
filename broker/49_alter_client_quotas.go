package broker

// AlterClientQuotas: v0-1
//
// Behavior:
//   - sets or removes quota values per entity in kafgres.client_quota, one
//     transaction per entity; validateOnly checks and stores nothing
//   - INVALID_REQUEST with Kafka's messages for unknown entity types,
//     ip combined with user/client-id, keys that do not apply to the
//     entity, non-positive values, and an entity given twice (reported
//     once, first, and not applied); kafgres also refuses entity names
//     with a NUL byte or invalid UTF-8 (kept in jsonb, which cannot hold
//     them) with INVALID_REQUEST
//   - quotas are stored and reported; kafgres does not throttle clients
//     yet (docs/configuration.md)
//
// Version notes:
//   - v1: flexible

import (
	"context"
	"slices"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata"
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
	unique, dups := splitDuplicates(req.Entries, func(in kmsg.AlterClientQuotasRequestEntry) string { return entityOf(in).key() })
	answer := func(in kmsg.AlterClientQuotasRequestEntry, err error) {
		e := entityOf(in)
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, typ := range e.types() {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = typ, e[typ]
			out.Entity = append(out.Entity, oe)
		}
		out.ErrorCode, out.ErrorMessage = b.codeAndMessage("alter client quotas", err)
		resp.Entries = append(resp.Entries, out)
	}
	// Kafka reports duplicated entities first.
	for _, in := range dups {
		answer(in, apierr.New(kerr.InvalidRequest, "Ignoring duplicate entity %s", entityOf(in)))
	}
	for _, in := range unique {
		answer(in, b.alterQuotaEntry(ctx, entityOf(in), in.Ops, req.ValidateOnly))
	}
	return resp, nil
}

func (b *Broker) alterQuotaEntry(ctx context.Context, e quotaEntity, ops []kmsg.AlterClientQuotasRequestEntryOp, validateOnly bool) error {
	keys, err := checkQuotaEntity(e)
	if err != nil {
		return err
	}
	var changes []metadata.QuotaOp
	for _, op := range ops {
		if !slices.Contains(keys, op.Key) {
			return apierr.New(kerr.InvalidRequest, "Invalid configuration key %s", op.Key)
		}
		if !op.Remove && op.Value <= 0 {
			return apierr.New(kerr.InvalidRequest, "Quota %s must be greater than 0", op.Key)
		}
		changes = append(changes, metadata.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
	}
	if validateOnly {
		return nil
	}
	return b.meta.AlterQuotas(ctx, metadata.QuotaEntity(e), changes)
}

// deniedAlterClientQuotas: every entry fails with the code's default
// message (AlterClientQuotasRequest.getErrorResponse uses Errors.message,
// not the exception's).
func deniedAlterClientQuotas(r kmsg.Request, code int16, _ *string) kmsg.Response {
	req := r.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	msg := apierr.DefaultMessage(kerr.ErrorForCode(code).(*kerr.Error))
	for _, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode, re.ErrorMessage = code, &msg
		for _, c := range e.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			re.Entity = append(re.Entity, rc)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}
