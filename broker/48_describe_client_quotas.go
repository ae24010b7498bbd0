package broker

// DescribeClientQuotas: v0-1
//
// Behavior:
//   - the quotas stored with AlterClientQuotas (kafgres.client_quota),
//     filtered as Kafka filters: each component matches an entity type by
//     exact name, the type's default entity, or any entity of that type;
//     strict filters also require the entity to have no other types
//   - an unknown entity type fails the request with UNSUPPORTED_VERSION
//     "Unsupported entity type ..." (Kafka's answer)
//   - quotas are stored and reported; kafgres does not throttle clients
//     yet (docs/configuration.md)
//
// Version notes:
//   - v1: flexible

import (
	"context"
	"sort"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeClientQuotas(ctx context.Context, b *Broker, _ *conn, req *kmsg.DescribeClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	for _, c := range req.Components {
		if c.EntityType != "user" && c.EntityType != "client-id" && c.EntityType != "ip" {
			resp.ErrorCode, resp.ErrorMessage = b.codeAndMessage("", apierr.New(kerr.UnsupportedVersion, "Unsupported entity type %s", c.EntityType))
			return resp, nil
		}
	}
	rows, err := b.loadQuotas(ctx)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = b.codeAndMessage("describe client quotas", err)
		return resp, nil
	}
	empty := ""
	resp.ErrorMessage = &empty
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{} // nullable: null only on error
	for _, r := range rows {
		if !quotaMatches(r.entity, req.Components, req.Strict) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, typ := range r.entity.types() {
			e := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			e.Type, e.Name = typ, r.entity[typ]
			entry.Entity = append(entry.Entity, e)
		}
		keys := make([]string, 0, len(r.values))
		for k := range r.values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, r.values[k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp, nil
}

func quotaMatches(e quotaEntity, components []kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	if strict && len(e) != len(components) {
		return false
	}
	for _, c := range components {
		name, ok := e[c.EntityType]
		if !ok {
			return false
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if name == nil || c.Match == nil || *name != *c.Match {
				return false
			}
		case kmsg.QuotasMatchTypeDefault:
			if name != nil {
				return false
			}
		}
	}
	return true
}

// deniedDescribeClientQuotas: KafkaApis's own check, error code with a null
// message and null entries.
func deniedDescribeClientQuotas(r kmsg.Request, code int16, _ *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.ErrorCode = code
	resp.Entries = nil
	return resp
}
