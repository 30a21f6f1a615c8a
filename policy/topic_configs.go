// This file holds the names of Kafka's topic-level configs, so that
// kproxy validate can warn of a require.configs name no topic has (a
// typo would make the condition never apply).

package policy

import (
	"fmt"
	"sort"
)

// topicConfigs are Kafka's topic-level configs (Apache Kafka 4.x
// documentation, "Topic-Level Configs").
var topicConfigs = map[string]bool{
	"cleanup.policy": true, "compression.gzip.level": true, "compression.lz4.level": true,
	"compression.type": true, "compression.zstd.level": true, "delete.retention.ms": true,
	"file.delete.delay.ms": true, "flush.messages": true, "flush.ms": true,
	"follower.replication.throttled.replicas": true, "index.interval.bytes": true,
	"leader.replication.throttled.replicas": true, "local.retention.bytes": true,
	"local.retention.ms": true, "max.compaction.lag.ms": true, "max.message.bytes": true,
	"message.downconversion.enable": true, "message.format.version": true,
	"message.timestamp.after.max.ms": true, "message.timestamp.before.max.ms": true,
	"message.timestamp.difference.max.ms": true, "message.timestamp.type": true,
	"min.cleanable.dirty.ratio": true, "min.compaction.lag.ms": true, "min.insync.replicas": true,
	"preallocate": true, "remote.log.copy.disable": true, "remote.log.delete.on.disable": true,
	"remote.storage.enable": true, "retention.bytes": true, "retention.ms": true,
	"segment.bytes": true, "segment.index.bytes": true, "segment.jitter.ms": true,
	"segment.ms": true, "unclean.leader.election.enable": true,
}

// Warnings lists what is valid but likely a mistake: require.configs
// names that are no Kafka topic config (a config of a newer Kafka, or a
// typo, which would never be judged).
func (c Config) Warnings() []string {
	var out []string
	for i, r := range c.Rules {
		if r.Require == nil {
			continue
		}
		names := make([]string, 0, len(r.Require.Configs))
		for name := range r.Require.Configs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if !topicConfigs[name] {
				out = append(out, fmt.Sprintf("rules.%d.require.configs.%s: not a Kafka topic config this kproxy knows; requests setting it are still judged, but check the spelling", i, name))
			}
		}
	}
	return out
}
