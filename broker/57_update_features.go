package broker

// UpdateFeatures: v0-2
//
// Behavior:
//   - finalizes feature levels (kafka-features.sh upgrade/downgrade/
//     disable); the only feature is group.version (0-1): at 0 the KIP-848
//     consumer group protocol is off and ConsumerGroupHeartbeat answers
//     UNSUPPORTED_VERSION, as Kafka does
//   - all or nothing, as Kafka's controller: the first invalid update fails
//     the whole request with INVALID_UPDATE_VERSION and Kafka's message;
//     a lower level needs a downgrade upgrade type (or allowDowngrade
//     before v1); level 0 disables
//   - levels live in kafgres.feature, so they survive restarts
//   - validateOnly checks and changes nothing
//
// Version notes:
//   - v1: upgrade type instead of allowDowngrade, validateOnly;
//     v2: per-feature results are no longer sent

import (
	"context"
	"fmt"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	upgradeTypeUpgrade       = 1
	upgradeTypeSafeDowngrade = 2
)

func handleUpdateFeatures(ctx context.Context, b *Broker, _ *conn, req *kmsg.UpdateFeaturesRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	updates := map[string]int16{}
	var failed error
	for _, u := range req.FeatureUpdates {
		if err := b.checkFeatureUpdate(req.Version, u); err != nil {
			failed = err
			break
		}
		if _, known := lookupFeature(u.Feature); known {
			// Disabling an unknown feature is accepted and changes
			// nothing; its name is not stored.
			updates[u.Feature] = u.MaxVersionLevel
		}
	}
	if failed == nil && !req.ValidateOnly {
		failed = b.features.set(ctx, b.meta, updates)
	}
	if failed != nil {
		code, msg := b.codeAndMessage("update features", failed)
		if code == kerr.InvalidUpdateVersion.Code {
			m := "The update failed for all features since the following feature had an error: " + *msg
			msg = &m
		}
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp, nil
	}
	if req.Version < 2 {
		// Kafka fills the message of a successful result with the
		// error's name.
		none := "NONE"
		for _, u := range req.FeatureUpdates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature, r.ErrorMessage = u.Feature, &none
			resp.Results = append(resp.Results, r)
		}
	}
	return resp, nil
}

func (b *Broker) checkFeatureUpdate(version int16, u kmsg.UpdateFeaturesRequestFeatureUpdate) error {
	invalid := func(format string, args ...any) error {
		return apierr.New(kerr.InvalidUpdateVersion, "Invalid update version %d for feature %s. %s", u.MaxVersionLevel, u.Feature, fmt.Sprintf(format, args...))
	}
	f, ok := lookupFeature(u.Feature)
	if !ok {
		if u.MaxVersionLevel == 0 {
			return nil // disabling what does not exist changes nothing
		}
		return invalid("Local controller %d does not support this feature.", b.cfg.NodeID)
	}
	if u.MaxVersionLevel < 0 || (u.MaxVersionLevel != 0 && (u.MaxVersionLevel < f.min || u.MaxVersionLevel > f.max)) {
		return invalid("Local controller %d only supports versions %d-%d", b.cfg.NodeID, f.min, f.max)
	}
	downgrade := version >= 1 && u.UpgradeType >= upgradeTypeSafeDowngrade || version == 0 && u.AllowDowngrade
	if u.MaxVersionLevel < b.features.level(u.Feature) && !downgrade {
		return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	}
	return nil
}

// deniedUpdateFeatures is UpdateFeaturesResponse.createWithErrors: the
// error at the top, no results.
func deniedUpdateFeatures(r kmsg.Request, code int16, msg *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	resp.ErrorCode, resp.ErrorMessage = code, msg
	return resp
}
