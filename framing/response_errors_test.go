package framing

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Error codes used below, by their Kafka names.
const (
	errUnknownTopic  int16 = 3
	errNotLeader     int16 = 6
	errNotCoord      int16 = 16
	errTopicAuth     int16 = 29
	errUnknownMember int16 = 25
)

func produceResp(codes ...[]int16) *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	for _, parts := range codes {
		tp := kmsg.NewProduceResponseTopic()
		for i, c := range parts {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = int32(i), c
			tp.Partitions = append(tp.Partitions, p)
		}
		r.Topics = append(r.Topics, tp)
	}
	return r
}

func fetchResp(top int16, codes ...int16) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.ErrorCode = top
	tp := kmsg.NewFetchResponseTopic()
	for _, c := range codes {
		p := kmsg.NewFetchResponseTopicPartition()
		p.ErrorCode = c
		tp.Partitions = append(tp.Partitions, p)
	}
	r.Topics = append(r.Topics, tp)
	return r
}

func metadataResp(codes ...int16) *kmsg.MetadataResponse {
	r := kmsg.NewPtrMetadataResponse()
	r.Brokers = append(r.Brokers, kmsg.NewMetadataResponseBroker())
	for _, c := range codes {
		tp := kmsg.NewMetadataResponseTopic()
		tp.ErrorCode = c
		tp.Partitions = append(tp.Partitions, kmsg.NewMetadataResponseTopicPartition())
		r.Topics = append(r.Topics, tp)
	}
	return r
}

func offsetCommitResp(codes ...int16) *kmsg.OffsetCommitResponse {
	r := kmsg.NewPtrOffsetCommitResponse()
	tp := kmsg.NewOffsetCommitResponseTopic()
	for _, c := range codes {
		p := kmsg.NewOffsetCommitResponseTopicPartition()
		p.ErrorCode = c
		tp.Partitions = append(tp.Partitions, p)
	}
	r.Topics = append(r.Topics, tp)
	return r
}

func listOffsetsResp(codes ...int16) *kmsg.ListOffsetsResponse {
	r := kmsg.NewPtrListOffsetsResponse()
	tp := kmsg.NewListOffsetsResponseTopic()
	for _, c := range codes {
		p := kmsg.NewListOffsetsResponseTopicPartition()
		p.ErrorCode = c
		tp.Partitions = append(tp.Partitions, p)
	}
	r.Topics = append(r.Topics, tp)
	return r
}

// addPartitionsV3 has the v0-v3 shape: topics at the top.
func addPartitionsV3(codes ...int16) *kmsg.AddPartitionsToTxnResponse {
	r := kmsg.NewPtrAddPartitionsToTxnResponse()
	r.Version = 3
	tp := kmsg.NewAddPartitionsToTxnResponseTopic()
	for _, c := range codes {
		p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		p.ErrorCode = c
		tp.Partitions = append(tp.Partitions, p)
	}
	r.Topics = append(r.Topics, tp)
	return r
}

// addPartitionsV4 has the v4+ shape: topics nested in transactions.
func addPartitionsV4(top int16, codes ...int16) *kmsg.AddPartitionsToTxnResponse {
	r := kmsg.NewPtrAddPartitionsToTxnResponse()
	r.Version, r.ErrorCode = 4, top
	for _, c := range codes {
		tx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		tp := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		ok := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
		p := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
		p.ErrorCode = c
		tp.Partitions = append(tp.Partitions, ok, p)
		tx.Topics = append(tx.Topics, tp)
		r.Transactions = append(r.Transactions, tx)
	}
	return r
}

func findCoordinatorV4(codes ...int16) *kmsg.FindCoordinatorResponse {
	r := kmsg.NewPtrFindCoordinatorResponse()
	r.Version = 4
	for _, c := range codes {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.ErrorCode = c
		r.Coordinators = append(r.Coordinators, co)
	}
	return r
}

func leaveGroupResp(codes ...int16) *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupResponse()
	for _, c := range codes {
		m := kmsg.NewLeaveGroupResponseMember()
		m.ErrorCode = c
		r.Members = append(r.Members, m)
	}
	return r
}

// FirstError finds a code wherever the API puts it, the first one when
// there are several, and 0 when every code is 0.
func TestFirstError(t *testing.T) {
	join := kmsg.NewPtrJoinGroupResponse()
	join.ErrorCode = errUnknownMember
	initPID := kmsg.NewPtrInitProducerIDResponse()
	initPID.ErrorCode = errNotCoord
	endTxn := kmsg.NewPtrEndTxnResponse()
	endTxn.ErrorCode = 48 // INVALID_TXN_STATE

	for _, tc := range []struct {
		name string
		resp kmsg.Response
		want int16
	}{
		{"produce ok", produceResp([]int16{0, 0}, []int16{0}), 0},
		{"produce partition", produceResp([]int16{0, 0}, []int16{0, errNotLeader, errUnknownTopic}), errNotLeader},
		{"produce empty", kmsg.NewPtrProduceResponse(), 0},
		{"fetch ok", fetchResp(0, 0, 0), 0},
		{"fetch top-level", fetchResp(errNotCoord, errNotLeader), errNotCoord},
		{"fetch partition", fetchResp(0, 0, errNotLeader), errNotLeader},
		{"metadata ok", metadataResp(0, 0), 0},
		{"metadata topic", metadataResp(0, errUnknownTopic, errTopicAuth), errUnknownTopic},
		{"join ok", kmsg.NewPtrJoinGroupResponse(), 0},
		{"join", join, errUnknownMember},
		{"offset commit ok", offsetCommitResp(0, 0), 0},
		{"offset commit partition", offsetCommitResp(0, errNotCoord), errNotCoord},
		{"list offsets ok", listOffsetsResp(0), 0},
		{"list offsets partition", listOffsetsResp(0, errNotLeader), errNotLeader},
		{"init producer id", initPID, errNotCoord},
		{"init producer id ok", kmsg.NewPtrInitProducerIDResponse(), 0},
		{"end txn", endTxn, 48},
		{"add partitions v3 ok", addPartitionsV3(0, 0), 0},
		{"add partitions v3", addPartitionsV3(0, errTopicAuth), errTopicAuth},
		{"add partitions v4 ok", addPartitionsV4(0, 0, 0), 0},
		{"add partitions v4 nested", addPartitionsV4(0, 0, errTopicAuth), errTopicAuth},
		{"add partitions v4 top-level", addPartitionsV4(errNotCoord, errTopicAuth), errNotCoord},
		{"find coordinator v4 ok", findCoordinatorV4(0, 0), 0},
		{"find coordinator v4", findCoordinatorV4(0, errNotCoord, 15), errNotCoord},
		{"leave group ok", leaveGroupResp(0, 0), 0},
		{"leave group member", leaveGroupResp(0, errUnknownMember), errUnknownMember},
		{"api versions ok", kmsg.NewPtrApiVersionsResponse(), 0},
	} {
		if got := FirstError(tc.resp); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The cost of reading codes from the busiest response, walked directly,
// and from one walked by reflection.
func BenchmarkFirstErrorProduce(b *testing.B) {
	r := produceResp([]int16{0, 0, 0, 0}, []int16{0, 0, 0, 0}, []int16{0, 0, 0, 0})
	b.ReportAllocs()
	for b.Loop() {
		if FirstError(r) != 0 {
			b.Fatal("error found")
		}
	}
}

func BenchmarkFirstErrorMetadata(b *testing.B) {
	r := metadataResp(0, 0, 0, 0, 0, 0, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		if FirstError(r) != 0 {
			b.Fatal("error found")
		}
	}
}
