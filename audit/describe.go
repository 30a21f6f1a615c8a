package audit

import (
	"encoding/base64"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describe records the resources of req, by API family. Of the APIs that
// do not change cluster state, which are audited only when refused,
// Produce has its own description and the rest the generic one.
func describe(b *builder, req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		createTopics(b, r)
	case *kmsg.DeleteTopicsRequest:
		deleteTopics(b, r)
	case *kmsg.CreatePartitionsRequest:
		createPartitions(b, r)
	case *kmsg.DeleteRecordsRequest:
		deleteRecords(b, r)
	case *kmsg.ElectLeadersRequest:
		electLeaders(b, r)
	case *kmsg.AlterPartitionAssignmentsRequest:
		alterAssignments(b, r)
	case *kmsg.AlterReplicaLogDirsRequest:
		alterLogDirs(b, r)
	case *kmsg.AlterConfigsRequest:
		alterConfigs(b, r)
	case *kmsg.IncrementalAlterConfigsRequest:
		incrementalAlterConfigs(b, r)
	case *kmsg.AlterClientQuotasRequest:
		alterQuotas(b, r)
	case *kmsg.CreateACLsRequest:
		createACLs(b, r)
	case *kmsg.DeleteACLsRequest:
		deleteACLs(b, r)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		alterSCRAM(b, r)
	case *kmsg.CreateDelegationTokenRequest:
		createToken(b, r)
	case *kmsg.RenewDelegationTokenRequest, *kmsg.ExpireDelegationTokenRequest:
		b.add("delegation_token") // named by its HMAC only, which is a secret
	case *kmsg.DeleteGroupsRequest:
		deleteGroups(b, r)
	case *kmsg.OffsetDeleteRequest:
		offsetDelete(b, r)
	case *kmsg.AlterShareGroupOffsetsRequest:
		alterShareOffsets(b, r)
	case *kmsg.DeleteShareGroupOffsetsRequest:
		deleteShareOffsets(b, r)
	case *kmsg.UpdateFeaturesRequest:
		updateFeatures(b, r)
	case *kmsg.UnregisterBrokerRequest:
		b.named("broker", itoa(r.BrokerID))
	case *kmsg.UnregisterControllerRequest:
		b.named("controller", itoa(r.ControllerID))
	case *kmsg.AddRaftVoterRequest:
		addVoter(b, r)
	case *kmsg.RemoveRaftVoterRequest:
		if v := b.named("voter", itoa(r.VoterID)); v != nil {
			v.ID = uuid(r.VoterDirectoryID)
		}
	case *kmsg.ProduceRequest:
		produce(b, r)
	default:
		generic(b, req)
	}
	b.described = len(b.ln.Resources)
}

// settle maps resp onto the line, by the same families.
func settle(s *settler, resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			t := &r.Topics[i]
			s.key(keyOf("topic", t.Topic), t.ErrorCode, t.ErrorMessage)
		}
	case *kmsg.DeleteTopicsResponse:
		settleDeleteTopics(s, r)
	case *kmsg.CreatePartitionsResponse:
		for i := range r.Topics {
			t := &r.Topics[i]
			s.key(keyOf("topic", t.Topic), t.ErrorCode, t.ErrorMessage)
		}
	case *kmsg.DeleteRecordsResponse:
		for i := range r.Topics {
			t := &r.Topics[i]
			c, _ := firstCode(t.Partitions, func(p *kmsg.DeleteRecordsResponseTopicPartition) (int16, *string) { return p.ErrorCode, nil })
			s.key(keyOf("topic", t.Topic), c, nil)
		}
	case *kmsg.ElectLeadersResponse:
		settleElect(s, r)
	case *kmsg.AlterPartitionAssignmentsResponse:
		s.top(r.ErrorCode, r.ErrorMessage)
		for i := range r.Topics {
			t := &r.Topics[i]
			c, m := firstCode(t.Partitions, func(p *kmsg.AlterPartitionAssignmentsResponseTopicPartition) (int16, *string) {
				return p.ErrorCode, p.ErrorMessage
			})
			s.key(keyOf("topic", t.Topic), c, m)
		}
	case *kmsg.AlterReplicaLogDirsResponse:
		for i := range r.Topics {
			t := &r.Topics[i]
			c, _ := firstCode(t.Partitions, func(p *kmsg.AlterReplicaLogDirsResponseTopicPartition) (int16, *string) { return p.ErrorCode, nil })
			s.key(keyOf("topic", t.Topic), c, nil)
		}
	case *kmsg.AlterConfigsResponse:
		for i := range r.Resources {
			e := &r.Resources[i]
			s.key(keyOf(configType(e.ResourceType), e.ResourceName), e.ErrorCode, e.ErrorMessage)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for i := range r.Resources {
			e := &r.Resources[i]
			s.key(keyOf(configType(e.ResourceType), e.ResourceName), e.ErrorCode, e.ErrorMessage)
		}
	case *kmsg.AlterClientQuotasResponse:
		for i := range r.Entries {
			e := &r.Entries[i]
			s.key(quotaKey(e.Entity, func(x *kmsg.AlterClientQuotasResponseEntryEntity) (string, *string) { return x.Type, x.Name }), e.ErrorCode, e.ErrorMessage)
		}
	case *kmsg.CreateACLsResponse:
		for i := range r.Results {
			s.at(i, r.Results[i].ErrorCode, r.Results[i].ErrorMessage)
		}
	case *kmsg.DeleteACLsResponse:
		settleDeleteACLs(s, r)
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for i := range r.Results {
			e := &r.Results[i]
			s.key(keyOf("user", e.User), e.ErrorCode, e.ErrorMessage)
		}
	case *kmsg.CreateDelegationTokenResponse:
		settleCreateToken(s, r)
	case *kmsg.RenewDelegationTokenResponse:
		s.all(r.ErrorCode, nil)
	case *kmsg.ExpireDelegationTokenResponse:
		s.all(r.ErrorCode, nil)
	case *kmsg.DeleteGroupsResponse:
		for i := range r.Groups {
			g := &r.Groups[i]
			s.key(keyOf("group", g.Group), g.ErrorCode, g.ErrorMessage)
		}
	case *kmsg.OffsetDeleteResponse:
		settleOffsetDelete(s, r)
	case *kmsg.AlterShareGroupOffsetsResponse:
		settleAlterShareOffsets(s, r)
	case *kmsg.DeleteShareGroupOffsetsResponse:
		settleDeleteShareOffsets(s, r)
	case *kmsg.UpdateFeaturesResponse:
		settleFeatures(s, r)
	case *kmsg.UnregisterBrokerResponse:
		s.all(r.ErrorCode, r.ErrorMessage)
	case *kmsg.UnregisterControllerResponse:
		s.all(r.ErrorCode, r.ErrorMessage)
	case *kmsg.AddRaftVoterResponse:
		s.all(r.ErrorCode, r.ErrorMessage)
	case *kmsg.RemoveRaftVoterResponse:
		s.all(r.ErrorCode, r.ErrorMessage)
	case *kmsg.ProduceResponse:
		settleProduce(s, r)
	default:
		settleGeneric(s, resp)
	}
}

// uuid spells a Kafka UUID (topic id, directory id) as Kafka prints it:
// URL-safe base64, unpadded. The zero UUID is "".
func uuid(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// TopicID spells a topic id as audit lines do, for naming a refused
// resource that the request named by id (RefuseCode).
func TopicID(id [16]byte) string { return uuid(id) }
