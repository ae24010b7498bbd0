package broker

// A request other than SaslAuthenticate during a v1+ SASL exchange is
// answered as Kafka's SaslServerAuthenticator answers it: the request's own
// getErrorResponse for IllegalSaslStateException("Unexpected Kafka request
// of type <APIKEY> during SASL authentication."), then the close. Each
// request type puts that error where its response has room for it: the top
// level when it has an error code there, else every item the request named.

import (
	"reflect"
	"strings"
	"unicode"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// illegalSASLStateResponse is req's error response with ILLEGAL_SASL_STATE;
// nil (close without an answer) where Kafka builds none (Produce with
// acks=0) or kafgres knows no shape.
func illegalSASLStateResponse(req kmsg.Request) kmsg.Response {
	code := kerr.IllegalSaslState.Code
	msg := kmsg.StringPtr("Unexpected Kafka request of type " + kafkaAPIName(req.Key()) + " during SASL authentication.")
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if r.Acks == 0 {
			return nil
		}
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, msg
				rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.ErrorCode = code // v13+
		for _, t := range r.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			rt.Topic, rt.TopicID, rt.ErrorCode = &name, t.TopicID, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.ListOffsetsRequest:
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset, rp.Timestamp = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.OffsetCommitRequest:
		return deniedOffsetCommit(r, code, nil)
	case *kmsg.FindCoordinatorRequest:
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		if r.Version < 4 {
			resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(kerr.IllegalSaslState.Description)
			resp.NodeID, resp.Port = -1, -1
			return resp
		}
		for _, k := range r.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.ErrorCode, c.NodeID, c.Port = k, code, -1, -1
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	case *kmsg.CreateTopicsRequest:
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DescribeConfigsRequest:
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, in := range r.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = in.ResourceType, in.ResourceName
			rr.ErrorCode, rr.ErrorMessage = code, kmsg.StringPtr(kerr.IllegalSaslState.Description)
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	}
	return topLevelErrorResponse(req, code)
}

// topLevelErrorResponse is req's response with code in its top-level error
// code, nil for the responses that have none.
func topLevelErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 || !f.CanSet() {
		return nil
	}
	f.SetInt(int64(code))
	return resp
}

// kafkaAPIName is the name of Kafka's ApiKeys constant for key (PRODUCE,
// DESCRIBE_ACLS, INIT_PRODUCER_ID), from kmsg's CamelCase name.
func kafkaAPIName(key int16) string {
	name := kmsg.NameForKey(key)
	var sb strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prevLower := unicode.IsLower(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1]) && rs[i+1] != 's'
			if prevLower || nextLower && unicode.IsUpper(rs[i-1]) {
				sb.WriteByte('_')
			}
		}
		sb.WriteRune(unicode.ToUpper(r))
	}
	return sb.String()
}
