package broker

// ApiVersions: v0-5
//
// Behavior:
//   - advertises exactly the broker's API table (apis.go), so every key it
//     lists has a handler
//   - a request at a version above ours is answered, not dropped: error
//     UNSUPPORTED_VERSION in a v0 body whose only entry is ApiVersions itself,
//     so the client can retry at a version we speak (Kafka's error path)
//   - v3+ requests whose client software name or version is not
//     [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? get INVALID_REQUEST
//
// Version notes:
//   - v1: throttle; v3: flexible, client software fields, features:
//     group.version supported 0-1 and finalized at 1 unless UpdateFeatures
//     changed it (the consumer group protocol is on, as in Kafka 4.x);
//     Kafka's other features (metadata.version, kraft.version,
//     transaction.version, ...) are not advertised (features.go)

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var softwareField = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(_ context.Context, b *Broker, _ *conn, req *kmsg.ApiVersionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareField.MatchString(req.ClientSoftwareName) || !softwareField.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	for _, a := range b.apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	if req.Version >= 3 {
		for _, f := range supportedFeatures {
			sf := kmsg.NewApiVersionsResponseSupportedFeature()
			sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		}
		names, levels, epoch := b.features.finalized()
		for _, n := range names {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = n, levels[n], levels[n]
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
		resp.FinalizedFeaturesEpoch = epoch
	}
	return resp, nil
}

// apiVersionsUnsupported is the v0 answer to an ApiVersions request at a
// version we do not serve.
func (b *Broker) apiVersionsUnsupported() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	a, _ := b.apis.lookup(18)
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
	resp.ApiKeys = append(resp.ApiKeys, k)
	return resp
}
