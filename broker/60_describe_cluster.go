package broker

// DescribeCluster: v0-2
//
// Behavior:
//   - one broker (node 1, the advertised endpoint of the client's
//     listener), which is also the
//     controller; the cluster id is derived from the Postgres system
//     identifier (catalog.go)
//   - cluster authorized operations, when asked: every cluster operation,
//     as Kafka answers without an authorizer
//   - a request for the controller endpoint type fails with
//     MISMATCHED_ENDPOINT_TYPE, as a Kafka broker listener answers it
//
// Version notes:
//   - v1: endpoint type; v2: include fenced brokers, fenced flag (never
//     set)

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
)

const endpointTypeController = 2

func handleDescribeCluster(_ context.Context, b *Broker, cc *conn, req *kmsg.DescribeClusterRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 {
		resp.EndpointType = 1
		if req.EndpointType == endpointTypeController {
			msg := "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
			resp.ErrorCode, resp.ErrorMessage = kerr.MismatchedEndpointType.Code, &msg
			resp.ControllerID = -1
			return resp, nil
		}
	}
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.cfg.NodeID
	br := kmsg.NewDescribeClusterResponseBroker()
	host, port := b.endpoint(cc)
	br.NodeID, br.Host, br.Port = b.cfg.NodeID, host, port
	resp.Brokers = append(resp.Brokers, br)
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = 0 // DESCRIBE on the cluster denied
		if b.allowedCluster(cc, kmsg.ACLOperationDescribe) {
			resp.ClusterAuthorizedOperations = b.authorizedOps(cc, kmsg.ACLResourceTypeCluster, acl.ClusterName)
		}
	}
	return resp, nil
}
