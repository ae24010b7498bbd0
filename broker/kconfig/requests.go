package kconfig

// What AlterConfigs and IncrementalAlterConfigs requests are refused for
// before any resource is looked at, in Kafka's words.

import (
	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Resource names one config resource of a request.
type Resource struct {
	Type kmsg.ConfigResourceType
	Name string
}

// DuplicateResources are the resources named more than once in a request;
// Kafka refuses each occurrence (with ErrDuplicateResource).
func DuplicateResources(resources []Resource) map[Resource]bool {
	seen := map[Resource]int{}
	for _, r := range resources {
		seen[r]++
	}
	dups := map[Resource]bool{}
	for r, n := range seen {
		if n > 1 {
			dups[r] = true
		}
	}
	return dups
}

var (
	// ErrDuplicateResource answers a resource named twice in one request.
	ErrDuplicateResource = apierr.InvalidRequest("Each resource must appear at most once.")
	// ErrDuplicateKeys answers a resource that names a key twice.
	ErrDuplicateKeys = apierr.InvalidRequest("Error due to duplicate config keys")
)

// NullValue answers a null value for key name where one is needed.
func NullValue(name string) *apierr.Error {
	return apierr.InvalidRequest("Null value not supported for : %s", name)
}

// UnknownResourceType answers a resource type the request cannot alter.
func UnknownResourceType(t kmsg.ConfigResourceType) *apierr.Error {
	return apierr.InvalidRequest("Unknown resource type %d", int8(t))
}
