package audit

import "github.com/twmb/franz-go/pkg/kmsg"

// changing marks the APIs a client sends to change cluster state: what
// an audit trail must hold. Data-path writes (Produce, OffsetCommit,
// TxnOffsetCommit, EndTxn) and group membership are left out: they are
// the cluster's traffic, not changes to it. So are the APIs only brokers
// and controllers send each other (AlterPartition, WriteTxnMarkers, the
// share-group state APIs), which no client behind kproxy has cause to
// send; a refusal of any of them is still audited through BeginRefusal.
var changing = func() (t [kmsg.MaxKey + 1]bool) {
	for _, k := range []kmsg.Key{
		kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.CreatePartitions, kmsg.DeleteRecords,
		kmsg.AlterConfigs, kmsg.IncrementalAlterConfigs,
		kmsg.CreateACLs, kmsg.DeleteACLs,
		kmsg.AlterUserSCRAMCredentials, kmsg.AlterClientQuotas,
		kmsg.CreateDelegationToken, kmsg.RenewDelegationToken, kmsg.ExpireDelegationToken,
		kmsg.AlterPartitionAssignments, kmsg.ElectLeaders, kmsg.AlterReplicaLogDirs,
		kmsg.DeleteGroups, kmsg.OffsetDelete,
		kmsg.AlterShareGroupOffsets, kmsg.DeleteShareGroupOffsets,
		kmsg.UpdateFeatures, kmsg.UnregisterBroker, kmsg.UnregisterController,
		kmsg.AddRaftVoter, kmsg.RemoveRaftVoter,
	} {
		t[k] = true
	}
	return t
}()

// ChangesCluster reports whether key is an API that changes cluster state:
// the APIs audited when the apis list is empty.
func ChangesCluster(key int16) bool {
	return key >= 0 && int(key) < len(changing) && changing[key]
}
