package tracing

import "github.com/twmb/franz-go/pkg/kmsg"

type requestCase struct {
	name string
	req  kmsg.Request
	want wantFacts
}

// requestCases cover each API requestFacts knows, plus one it does not.
func requestCases() []requestCase {
	ordersID, auditID := topicID(1), topicID(2) // as learnt by TestRequestFacts
	two := concat(plainBatch(kmsg.Record{Value: []byte("a")}, kmsg.Record{}), plainBatch(kmsg.Record{Key: []byte("k")}))
	one := plainBatch(kmsg.Record{Value: []byte("b")})

	offsetFetchV7 := kmsg.NewPtrOffsetFetchRequest()
	offsetFetchV7.Version, offsetFetchV7.Group = 7, "g7"
	oft := kmsg.NewOffsetFetchRequestTopic()
	oft.Topic, oft.Partitions = "orders", []int32{0, 1, 2}
	offsetFetchV7.Topics = append(offsetFetchV7.Topics, oft)

	offsetFetchV8 := kmsg.NewPtrOffsetFetchRequest()
	offsetFetchV8.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "g8"
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = "audit", []int32{4}
	g.Topics = append(g.Topics, gt)
	offsetFetchV8.Groups = append(offsetFetchV8.Groups, g)

	offsetFetchV8Two := kmsg.NewPtrOffsetFetchRequest()
	offsetFetchV8Two.Version = 8
	g2 := g
	g2.Group = "other"
	offsetFetchV8Two.Groups = append(offsetFetchV8Two.Groups, g, g2)

	deleteV5 := kmsg.NewPtrDeleteTopicsRequest()
	deleteV5.Version, deleteV5.TopicNames = 5, []string{"old", "older", "old"}
	deleteV6 := kmsg.NewPtrDeleteTopicsRequest()
	deleteV6.Version = 6
	for _, name := range []*string{kmsg.StringPtr("gone"), nil} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = name
		dt.TopicID = topicID(9)
		deleteV6.Topics = append(deleteV6.Topics, dt)
	}

	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 9
	for _, name := range []*string{kmsg.StringPtr("orders"), kmsg.StringPtr("audit")} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = name
		metadata.Topics = append(metadata.Topics, mt)
	}
	metadataByID := kmsg.NewPtrMetadataRequest()
	metadataByID.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.TopicID = ordersID
	metadataByID.Topics = append(metadataByID.Topics, mt)

	listOffsets := kmsg.NewPtrListOffsetsRequest()
	listOffsets.Version = 5
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "orders"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition = 7
	lt.Partitions = append(lt.Partitions, lp)
	listOffsets.Topics = append(listOffsets.Topics, lt)

	txnCommit := kmsg.NewPtrTxnOffsetCommitRequest()
	txnCommit.Version, txnCommit.Group = 3, "tg"
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "orders"
	for _, p := range []int32{0, 1} {
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition = p
		tt.Partitions = append(tt.Partitions, tp)
	}
	txnCommit.Topics = append(txnCommit.Topics, tt)

	offsetDelete := kmsg.NewPtrOffsetDeleteRequest()
	offsetDelete.Group = "dg"
	ot := kmsg.NewOffsetDeleteRequestTopic()
	ot.Topic = "audit"
	op := kmsg.NewOffsetDeleteRequestTopicPartition()
	op.Partition = 3
	ot.Partitions = append(ot.Partitions, op)
	offsetDelete.Topics = append(offsetDelete.Topics, ot)

	addV3 := kmsg.NewPtrAddPartitionsToTxnRequest()
	addV3.Version = 3
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "orders", []int32{0, 1}
	addV3.Topics = append(addV3.Topics, at)
	addV4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	addV4.Version = 4
	for _, name := range []string{"orders", "audit"} {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		xt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		xt.Topic, xt.Partitions = name, []int32{2}
		tx.Topics = append(tx.Topics, xt)
		addV4.Transactions = append(addV4.Transactions, tx)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group = 9, "jg"
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group = 5, "sg"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group = 4, "hg"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "lg"
	cghb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cghb.Group = "cg"
	addOffsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffsets.Version, addOffsets.Group = 3, "ag"
	describeOne := kmsg.NewPtrDescribeGroupsRequest()
	describeOne.Version, describeOne.Groups = 5, []string{"only"}
	describeTwo := kmsg.NewPtrDescribeGroupsRequest()
	describeTwo.Version, describeTwo.Groups = 5, []string{"a", "b"}
	deleteGroups := kmsg.NewPtrDeleteGroupsRequest()
	deleteGroups.Version, deleteGroups.Groups = 2, []string{"doomed"}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 7
	for _, name := range []string{"new1", "new2"} {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic = name
		create.Topics = append(create.Topics, ct)
	}

	return []requestCase{
		{"produce names", produceReq(9, produceTopic("orders", [16]byte{}, two, one), produceTopic("audit", [16]byte{}, nil), produceTopic("orders", [16]byte{}, one)),
			wantFacts{topics: []string{"orders", "audit"}, partitions: 4, records: 5}},
		{"produce one partition", produceReq(3, produceTopic("orders", [16]byte{}, two)),
			wantFacts{topics: []string{"orders"}, partitions: 1, records: 3}},
		{"produce ids", produceReq(13, produceTopic("", auditID, one), produceTopic("", ordersID, one, two), produceTopic("", topicID(99), one)),
			wantFacts{topics: []string{"audit", "orders"}, partitions: 4, records: 6}},
		{"fetch names", fetchReq(12, "orders", [16]byte{}, 0, 1, 2), wantFacts{topics: []string{"orders"}, partitions: 3}},
		{"fetch id", fetchReq(13, "", ordersID, 5), wantFacts{topics: []string{"orders"}, partitions: 1, partition: 5}},
		{"fetch unknown id", fetchReq(16, "", topicID(98), 5), wantFacts{partitions: 1, partition: 5}},
		{"list offsets", listOffsets, wantFacts{topics: []string{"orders"}, partitions: 1, partition: 7}},
		{"metadata", metadata, wantFacts{topics: []string{"orders", "audit"}}},
		{"metadata by id", metadataByID, wantFacts{topics: []string{"orders"}}},
		{"offset commit", offsetCommitReq(8, "grp", map[string][]int32{"audit": {0}, "orders": {0, 1}}),
			wantFacts{topics: []string{"audit", "orders"}, partitions: 3, group: "grp"}},
		{"txn offset commit", txnCommit, wantFacts{topics: []string{"orders"}, partitions: 2, group: "tg"}},
		{"offset fetch v7", offsetFetchV7, wantFacts{topics: []string{"orders"}, partitions: 3, group: "g7"}},
		{"offset fetch v8 one group", offsetFetchV8, wantFacts{topics: []string{"audit"}, partitions: 1, partition: 4, group: "g8"}},
		// No one group, but the topics of both are named.
		{"offset fetch v8 two groups", offsetFetchV8Two, wantFacts{topics: []string{"audit"}, partitions: 2}},
		{"offset delete", offsetDelete, wantFacts{topics: []string{"audit"}, partitions: 1, partition: 3, group: "dg"}},
		{"add partitions v3", addV3, wantFacts{topics: []string{"orders"}, partitions: 2}},
		{"add partitions v4", addV4, wantFacts{topics: []string{"orders", "audit"}, partitions: 2}},
		{"join", join, wantFacts{group: "jg"}},
		{"sync", sync, wantFacts{group: "sg"}},
		{"heartbeat", hb, wantFacts{group: "hg"}},
		{"leave", leave, wantFacts{group: "lg"}},
		{"consumer group heartbeat", cghb, wantFacts{group: "cg"}},
		{"add offsets to txn", addOffsets, wantFacts{group: "ag"}},
		{"describe one group", describeOne, wantFacts{group: "only"}},
		{"describe two groups", describeTwo, wantFacts{}},
		{"delete groups", deleteGroups, wantFacts{group: "doomed"}},
		{"create topics", create, wantFacts{topics: []string{"new1", "new2"}}},
		{"delete topics v5", deleteV5, wantFacts{topics: []string{"old", "older"}}},
		{"delete topics v6", deleteV6, wantFacts{topics: []string{"gone"}}},
		{"api versions", kmsg.NewPtrApiVersionsRequest(), wantFacts{}},
	}
}
