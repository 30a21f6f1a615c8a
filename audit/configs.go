package audit

import (
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file describes the config and quota APIs. Every config value goes
// through configValue, which redacts secrets.

// configType is a config resource type as the line spells it.
func configType(t kmsg.ConfigResourceType) string {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		return "topic"
	case kmsg.ConfigResourceTypeBroker:
		return "broker"
	case kmsg.ConfigResourceTypeBrokerLogger:
		return "broker_logger"
	case kmsg.ConfigResourceTypeClientMetrics:
		return "client_metrics"
	case kmsg.ConfigResourceTypeGroupConfig:
		return "group"
	}
	return "config_type_" + strconv.Itoa(int(t))
}

func alterConfigs(b *builder, req *kmsg.AlterConfigsRequest) {
	b.expect(len(req.Resources))
	b.ln.ValidateOnly = req.ValidateOnly
	for i := range req.Resources {
		res := &req.Resources[i]
		r := b.named(configType(res.ResourceType), res.ResourceName)
		if r == nil {
			continue
		}
		for n := range res.Configs {
			b.config(r, n, res.Configs[n].Name, res.Configs[n].Value, "")
		}
	}
}

func incrementalAlterConfigs(b *builder, req *kmsg.IncrementalAlterConfigsRequest) {
	b.expect(len(req.Resources))
	b.ln.ValidateOnly = req.ValidateOnly
	for i := range req.Resources {
		res := &req.Resources[i]
		r := b.named(configType(res.ResourceType), res.ResourceName)
		if r == nil {
			continue
		}
		for n := range res.Configs {
			c := &res.Configs[n]
			b.config(r, n, c.Name, c.Value, strings.ToLower(c.Op.String()))
		}
	}
}

// alterQuotas records each entry as a quota resource: its entity (a
// null name is the default entity, JSON null), and each quota key's new
// value as a config, with op set or remove.
func alterQuotas(b *builder, req *kmsg.AlterClientQuotasRequest) {
	b.expect(len(req.Entries))
	b.ln.ValidateOnly = req.ValidateOnly
	for i := range req.Entries {
		e := &req.Entries[i]
		r := b.add("quota")
		if r == nil {
			continue
		}
		r.key = quotaKey(e.Entity, func(x *kmsg.AlterClientQuotasRequestEntryEntity) (string, *string) { return x.Type, x.Name })
		b.cost += len(r.key.name)
		for n := range e.Entity {
			x := &e.Entity[n]
			if !b.keep(r, n, entryCost) {
				continue
			}
			if r.Entity == nil {
				r.Entity = make(map[string]*string)
			}
			r.Entity[b.str(x.Type)] = b.optStr(x.Name)
		}
		for n := range e.Ops {
			op := &e.Ops[n]
			if op.Remove {
				b.config(r, n, op.Key, nil, "remove")
				continue
			}
			v := strconv.FormatFloat(op.Value, 'f', -1, 64)
			b.config(r, n, op.Key, &v, "set")
		}
	}
}

// maxEntityParts bounds the parts of an entity that its match key holds:
// Kafka's have at most three (user, client-id, ip).
const maxEntityParts = 8

// quotaKey is an entity's match key: its parts sorted by type, so that a
// broker answering in another order still matches.
func quotaKey[E any](entity []E, part func(*E) (string, *string)) rkey {
	parts := make([]string, 0, min(len(entity), maxEntityParts))
	for i := range entity {
		if i == maxEntityParts {
			break
		}
		typ, name := part(&entity[i])
		if name == nil {
			parts = append(parts, cut(typ)+"\x01")
		} else {
			parts = append(parts, cut(typ)+"="+cut(*name))
		}
	}
	sort.Strings(parts)
	return rkey{"quota", strings.Join(parts, "\x00")}
}
