package broker

// DeleteGroups: v0-3
//
// Behavior:
//   - deletes Empty groups with their committed offsets; NON_EMPTY_GROUP
//     while a group has members, GROUP_ID_NOT_FOUND for a group that is
//     neither known to the coordinator nor has committed offsets (after a
//     broker restart a group lives on only in its offsets, and deleting it
//     deletes them, as Kafka's would load the group from its offsets)
//   - a failure to delete the offsets in Postgres is UNKNOWN_SERVER_ERROR
//     for that group (the group itself is already gone; retrying deletes
//     the offsets)
//
// Version notes:
//   - v1: throttle; v2: flexible; v3: error message

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteGroups(ctx context.Context, b *Broker, cc *conn, req *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	// DELETE on each group; the denied ones come after the others.
	var denied []kmsg.DeleteGroupsResponseGroup
	for _, name := range req.Groups {
		if !b.allowed(cc, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, name) {
			if !slices.ContainsFunc(denied, func(g kmsg.DeleteGroupsResponseGroup) bool { return g.Group == name }) {
				rg := kmsg.NewDeleteGroupsResponseGroup()
				rg.Group, rg.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
				denied = append(denied, rg)
			}
			continue
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		if err := b.deleteGroup(ctx, name); err != nil {
			rg.ErrorCode = errorCode(err)
			if req.Version >= 3 {
				msg := err.Error()
				rg.ErrorMessage = &msg
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	resp.Groups = append(resp.Groups, denied...)
	return resp, nil
}

func (b *Broker) deleteGroup(ctx context.Context, name string) error {
	err := b.groups.Delete(name)
	if err == kerr.GroupIDNotFound {
		has, herr := b.meta.HasOffsets(ctx, name)
		if herr != nil {
			b.log.Error("delete group", "group", name, "err", herr)
			return kerr.UnknownServerError
		}
		if !has {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := b.meta.DeleteGroupOffsets(ctx, name); err != nil {
		b.log.Error("delete group", "group", name, "err", err)
		return kerr.UnknownServerError
	}
	return nil
}
